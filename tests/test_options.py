# SPDX-License-Identifier: MIT
"""The options object (redislock._core.options): one list of options per kind, typed
keywords that match it, validation at construction, signatures for help(). No I/O."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
import redis
import redis.asyncio

import redislock
from redislock._core.options import (
    DEFAULT_REPLICA_TIMEOUT,
    FairOptions,
    LockOptions,
    MultiOptions,
    QuorumOptions,
)
from redislock.errors import LockConfigError

OPTIONS = (MultiOptions, LockOptions, FairOptions, QuorumOptions)


@pytest.mark.parametrize("options", OPTIONS)
def test_keywords_match_the_options_fields(options: type[MultiOptions]) -> None:
    fields = {f.name: f.type for f in dataclasses.fields(options) if f.init}
    assert set(options.kwargs.__annotations__) <= set(fields)
    unused = set(fields) - set(options.kwargs.__annotations__)
    # Redlock fixes recheck_interval (its waits are random retry delays).
    assert unused == ({"recheck_interval"} if options is QuorumOptions else set())
    for name, hint in options.kwargs.__annotations__.items():
        text = hint.__forward_arg__ if hasattr(hint, "__forward_arg__") else hint
        # on_lost's argument is generic in the keywords (what the callback receives: the
        # lock, a Permit, a ReadWriteLock's side) and Any in the stored options
        assert text.replace("HandleT", "Any") == fields[name], name


def test_options_are_frozen_and_normalised() -> None:
    opts = LockOptions(ttl=5, recheck_interval=1)
    assert opts.ttl == 5.0
    assert isinstance(opts.ttl, float)
    assert opts.lease == 5.0
    assert opts.renew_interval == pytest.approx(5 / 3)
    assert opts.replica_timeout == DEFAULT_REPLICA_TIMEOUT == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.ttl = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ttl": -1}, "ttl"),
        ({"ttl": True}, "ttl"),
        ({"renew_interval": 20.0}, "renew_interval"),
        ({"replicas": 1, "replica_timeout": 20.0}, "replica_timeout"),
        ({"prefix": "a{b"}, "prefix"),
        ({"on_lost": 3}, "on_lost"),
    ],
)
def test_bad_values_raise_lock_config_error(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(LockConfigError, match=match):
        LockOptions.of(kwargs)


def test_cache_keeps_true_and_one_apart() -> None:
    assert LockOptions.of({"ttl": 1}).ttl == 1.0
    with pytest.raises(LockConfigError, match="ttl"):
        LockOptions.of({"ttl": True})
    assert LockOptions.of({"ttl": 1}) is LockOptions.of({"ttl": 1})


def test_callbacks_are_not_cached() -> None:
    def cb(_: object) -> None:
        return None

    assert LockOptions.of({"on_lost": cb}) is not LockOptions.of({"on_lost": cb})


@pytest.mark.parametrize(
    ("cls", "bad"),
    [
        (redislock.Lock, "waiter_lease"),
        (redislock.AsyncLock, "drift_factor"),
        (redislock.MultiLock, "replicas"),
        (redislock.Redlock, "replicas"),
        (redislock.AsyncRedlock, "recheck_interval"),
        (redislock.ReadWriteLock, "queue_max"),
        (redislock.Semaphore, "fencing"),
    ],
)
def test_unknown_keyword_is_a_type_error(cls: Any, bad: str) -> None:
    params = inspect.signature(cls).parameters
    assert bad not in params
    client: Any = redis.Redis(unix_socket_path="/nonexistent/redislock.sock")
    if cls in (redislock.AsyncLock, redislock.AsyncRedlock):
        client = redis.asyncio.Redis(unix_socket_path="/nonexistent/redislock.sock")
    first: Any = [client] * 3 if "Redlock" in cls.__name__ else client
    args: tuple[Any, ...] = (first, "x", 2) if cls is redislock.Semaphore else (first, "x")
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{bad}'"):
        cls(*args, **{bad: 1})


SIGNATURES = {
    redislock.Lock: ("client", "name"),
    redislock.AsyncLock: ("client", "name"),
    redislock.RLock: ("client", "name"),
    redislock.ReadWriteLock: ("client", "name"),
    redislock.AsyncReadWriteLock: ("client", "name"),
    redislock.FairLock: ("client", "name"),
    redislock.Semaphore: ("client", "name", "permits"),
    redislock.AsyncSemaphore: ("client", "name", "permits"),
    redislock.MultiLock: ("client", "names"),
    redislock.Redlock: ("masters", "name"),
    redislock.MultiRedlock: ("masters", "name"),
}


@pytest.mark.parametrize("cls", list(SIGNATURES))
def test_help_shows_every_option_as_a_keyword(cls: Any) -> None:
    sig = inspect.signature(cls)
    positional = [p.name for p in sig.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert tuple(positional) == SIGNATURES[cls]
    keywords = {p.name: p.default for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY}
    assert keywords["ttl"] is None
    assert keywords["watchdog_lease"] == 30.0
    assert keywords["prefix"] == "redislock:"
    if "Redlock" in cls.__name__:
        assert keywords["drift_factor"] == 0.01
        assert "replicas" not in keywords
    elif "Multi" in cls.__name__:
        assert "replicas" not in keywords
    else:
        assert keywords["replicas"] == 0
        assert keywords["replica_timeout"] == 1.0
    if cls is redislock.FairLock:
        assert keywords["waiter_lease"] == 1.0
        assert keywords["queue_max"] == 10_000
