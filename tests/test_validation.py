# SPDX-License-Identifier: MIT
"""Bad inputs raise ``LockConfigError`` before any network I/O.

"Before any I/O" is proved by building every lock on a client pointed at a unix socket that
does not exist: any command would fail at once with ``redis.exceptions.ConnectionError``, so
a ``LockConfigError`` here can only come from a check that ran before the first command.
The part that needs a held lock (``extend``) runs on the suite's real redis-server.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

import pytest
import redis
import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock import (
    AsyncLock,
    Lock,
    LockConfigError,
    LongLeaseWarning,
    NotOwnedError,
    RedisLockError,
)
from redislock._core.validate import MAX_DURATION, MAX_NAME_BYTES

DEAD_SOCKET = "/nonexistent/redislock-test/x.sock"

AnyLock: TypeAlias = Lock | AsyncLock


@dataclass
class Dead:
    """One flavour's lock class, a client of that flavour on a dead socket, and one of the
    other flavour (for the wrong-client checks)."""

    cls: type[Lock] | type[AsyncLock]
    client: Any
    other: Any

    def lock(self, name: Any = "job", **kwargs: Any) -> AnyLock:
        return self.cls(self.client, name, **kwargs)


def dead_clients() -> tuple[redis.Redis, redis.asyncio.Redis]:
    """Clients that fail on their first command (no retries: they fail in microseconds)."""
    return (
        redis.Redis(unix_socket_path=DEAD_SOCKET, retry=Retry(NoBackoff(), 0)),
        redis.asyncio.Redis(unix_socket_path=DEAD_SOCKET, retry=AsyncRetry(NoBackoff(), 0)),
    )


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    """One pair for the module: nothing below ever gets as far as connecting."""
    sync_client, async_client = dead_clients()
    yield sync_client, async_client
    sync_client.close()
    asyncio.run(async_client.aclose())


@pytest.fixture(params=["sync", "async"])
def dead(request: pytest.FixtureRequest, clients: tuple[redis.Redis, redis.asyncio.Redis]) -> Dead:
    sync_client, async_client = clients
    if request.param == "sync":
        return Dead(Lock, sync_client, async_client)
    return Dead(AsyncLock, async_client, sync_client)


def invoke(lock: AnyLock, method: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``lock.method(...)``; for ``AsyncLock`` run the coroutine on a fresh loop."""
    result = getattr(lock, method)(*args, **kwargs)
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    return result


def assert_untouched(lock: AnyLock) -> None:
    """A rejected call left no trace in the lock object."""
    stats = lock.statistics()
    assert not stats.held
    assert stats.fencing_token is None
    assert stats.acquisitions == 0
    assert stats.failed_acquisitions == 0
    assert lock.token is None


# ------------------------------------------------------------------ the dead client is dead


def test_dead_sync_client_really_fails_on_io() -> None:
    """Control: a valid call does reach the network and fails with ConnectionError, so the
    absence of ConnectionError in the tests below means no I/O happened."""
    sync_client, async_client = dead_clients()
    lock = Lock(sync_client, "job", ttl=5)
    with pytest.raises(redis.exceptions.ConnectionError):
        lock.acquire(blocking=False)
    with pytest.raises(redis.exceptions.ConnectionError):
        lock.locked()
    assert_untouched(lock)
    sync_client.close()
    asyncio.run(async_client.aclose())


async def test_dead_async_client_really_fails_on_io() -> None:
    sync_client, async_client = dead_clients()
    lock = AsyncLock(async_client, "job", ttl=5)
    with pytest.raises(redis.exceptions.ConnectionError):
        await lock.acquire(blocking=False)
    with pytest.raises(redis.exceptions.ConnectionError):
        await lock.locked()
    assert_untouched(lock)
    sync_client.close()
    await async_client.aclose()


def test_lock_config_error_is_a_value_error(dead: Dead) -> None:
    with pytest.raises(ValueError, match="ttl") as info:
        dead.lock(ttl=0)
    assert isinstance(info.value, LockConfigError)
    assert isinstance(info.value, RedisLockError)


# ------------------------------------------------------------------ constructor arguments

ONE_YEAR_PLUS = MAX_DURATION + 1.0

CONSTRUCTOR_CASES: list[tuple[str, dict[str, Any], str]] = [
    # ttl
    ("ttl-zero", {"ttl": 0}, "ttl"),
    ("ttl-zero-float", {"ttl": 0.0}, "ttl"),
    ("ttl-negative", {"ttl": -1}, "ttl"),
    ("ttl-nan", {"ttl": math.nan}, "ttl"),
    ("ttl-inf", {"ttl": math.inf}, "ttl"),
    ("ttl-minus-inf", {"ttl": -math.inf}, "ttl"),
    ("ttl-true", {"ttl": True}, "ttl"),
    ("ttl-false", {"ttl": False}, "ttl"),
    ("ttl-str", {"ttl": "30"}, "ttl"),
    ("ttl-below-1ms", {"ttl": 0.0004}, "ttl"),
    ("ttl-just-below-1ms", {"ttl": 0.000999}, "ttl"),
    ("ttl-over-a-year", {"ttl": ONE_YEAR_PLUS}, "ttl"),
    ("ttl-in-ms-by-mistake", {"ttl": 30_000_000_000}, "ttl"),
    ("ttl-list", {"ttl": [30]}, "ttl"),
    # watchdog lease
    ("watchdog-lease-zero", {"watchdog_lease": 0}, "watchdog_lease"),
    ("watchdog-lease-nan", {"watchdog_lease": math.nan}, "watchdog_lease"),
    ("watchdog-lease-str", {"watchdog_lease": "30"}, "watchdog_lease"),
    ("watchdog-lease-over-a-year", {"watchdog_lease": ONE_YEAR_PLUS}, "watchdog_lease"),
    # name
    ("name-empty", {"name": ""}, "lock name"),
    ("name-none", {"name": None}, "lock name"),
    ("name-bytes", {"name": b"bytes"}, "lock name"),
    ("name-int", {"name": 42}, "lock name"),
    ("name-1025-bytes", {"name": "x" * (MAX_NAME_BYTES + 1)}, "lock name"),
    ("name-1025-utf8-bytes", {"name": "é" * 512 + "x"}, "lock name"),
    ("name-newline", {"name": "a\nb"}, "lock name"),
    ("name-carriage-return", {"name": "a\rb"}, "lock name"),
    ("name-nul", {"name": "a\x00b"}, "lock name"),
    ("name-del", {"name": "a\x7fb"}, "lock name"),
    ("name-line-separator", {"name": "a\u2028b"}, "lock name"),
    ("name-bidi-override", {"name": "a\u202eb"}, "lock name"),
    ("name-zero-width-space", {"name": "a\u200bb"}, "lock name"),
    ("name-c1-nel", {"name": "a\x85b"}, "lock name"),
    ("name-escape", {"name": "\x1b[31mred"}, "lock name"),
    ("name-lone-surrogate", {"name": "a\ud800b"}, "lock name"),
    ("name-starts-with-close-brace", {"name": "}job"}, "lock name"),
    ("name-only-close-brace", {"name": "}"}, "lock name"),
    # prefix
    ("prefix-open-brace", {"prefix": "app{"}, "prefix"),
    ("prefix-close-brace", {"prefix": "app}"}, "prefix"),
    ("prefix-hash-tag", {"prefix": "{app}:"}, "prefix"),
    ("prefix-bytes", {"prefix": b"app:"}, "prefix"),
    ("prefix-none", {"prefix": None}, "prefix"),
    ("prefix-newline", {"prefix": "app\n:"}, "prefix"),
    ("prefix-too-long", {"prefix": "p" * 257}, "prefix"),
    # renew_interval (default lease: 30 s)
    ("renew-equal-to-lease", {"renew_interval": 30}, "renew_interval"),
    ("renew-longer-than-lease", {"renew_interval": 40}, "renew_interval"),
    ("renew-over-half-lease", {"renew_interval": 15.5}, "renew_interval"),
    ("renew-over-half-lease-10", {"watchdog_lease": 10, "renew_interval": 5.01}, "renew_interval"),
    ("renew-zero", {"renew_interval": 0}, "renew_interval"),
    ("renew-negative", {"renew_interval": -1}, "renew_interval"),
    ("renew-nan", {"renew_interval": math.nan}, "renew_interval"),
    ("renew-with-fixed-ttl", {"ttl": 10, "renew_interval": 1}, "renew_interval"),
    ("renew-over-fixed-ttl", {"ttl": 10, "renew_interval": 20}, "renew_interval"),
    # max_lease
    ("max-lease-below-lease", {"max_lease": 10}, "max_lease"),
    ("max-lease-below-custom-lease", {"watchdog_lease": 5, "max_lease": 4.999}, "max_lease"),
    ("max-lease-with-fixed-ttl", {"ttl": 10, "max_lease": 100}, "max_lease"),
    ("max-lease-zero", {"max_lease": 0}, "max_lease"),
    ("max-lease-nan", {"max_lease": math.nan}, "max_lease"),
    ("max-lease-inf", {"max_lease": math.inf}, "max_lease"),
    # timeout
    ("timeout-negative", {"timeout": -1}, "timeout"),
    ("timeout-minus-inf", {"timeout": -math.inf}, "timeout"),
    ("timeout-nan", {"timeout": math.nan}, "timeout"),
    ("timeout-str", {"timeout": "1"}, "timeout"),
    ("timeout-true", {"timeout": True}, "timeout"),
    # recheck_interval
    ("recheck-zero", {"recheck_interval": 0}, "recheck_interval"),
    ("recheck-nan", {"recheck_interval": math.nan}, "recheck_interval"),
    # on_lost
    ("on-lost-int", {"on_lost": 42}, "on_lost"),
    ("on-lost-str", {"on_lost": "print"}, "on_lost"),
]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [pytest.param(kw, m, id=i) for i, kw, m in CONSTRUCTOR_CASES],
)
def test_bad_constructor_argument(dead: Dead, kwargs: dict[str, Any], match: str) -> None:
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "job")
    with pytest.raises(LockConfigError, match=match):
        dead.lock(name, **kwargs)


GOOD_NAMES = [
    "x" * MAX_NAME_BYTES,
    "é" * (MAX_NAME_BYTES // 2),
    "a",
    "{",
    "a}b",
    "a{b}c",
    "job:{tenant}",
    "日本語",
    "tab-free name with spaces",
]


@pytest.mark.parametrize("name", GOOD_NAMES, ids=range(len(GOOD_NAMES)))
def test_good_names_are_accepted(dead: Dead, name: str) -> None:
    lock = dead.lock(name)
    assert lock.name == name
    assert lock.key == "redislock:{" + name + "}"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ttl": 0.001},
        {"ttl": MAX_DURATION},
        {"ttl": 1},
        {"watchdog_lease": 10, "renew_interval": 5},  # exactly half the lease is allowed
        {"watchdog_lease": 10, "renew_interval": 0.001},
        {"max_lease": 30},  # equal to the lease
        {"max_lease": 3600, "renew_interval": 1},
        {"timeout": 0},
        {"timeout": None},
        {"timeout": math.inf},
        {"timeout": 1e9},
        {"prefix": ""},
        {"prefix": "p" * 256},
        {"on_lost": print},
        {"on_lost": None},
        {"recheck_interval": 0.001},
    ],
    ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()),
)
def test_good_constructor_arguments_are_accepted(dead: Dead, kwargs: dict[str, Any]) -> None:
    if kwargs.get("ttl", 0) > 3600:  # accepted, with a warning (tests/test_long_lease.py)
        with pytest.warns(LongLeaseWarning, match="is a lease of 8784.0 hours"):
            lock = dead.lock(**kwargs)
    else:
        lock = dead.lock(**kwargs)
    assert lock.name == "job"
    assert_untouched(lock)


@pytest.mark.parametrize(
    "arg", ["ttl", "watchdog_lease", "max_lease", "timeout", "recheck_interval"]
)
def test_huge_int_duration_is_a_config_error(dead: Dead, arg: str) -> None:
    with pytest.raises(LockConfigError, match=arg):
        dead.lock(**{arg: 10**400})


@pytest.mark.parametrize(
    ("method", "kwargs", "match"),
    [("acquire", {"timeout": 10**400}, "timeout"), ("extend", {"seconds": 10**400}, "seconds")],
    ids=["acquire", "extend"],
)
def test_huge_int_method_argument_is_a_config_error(
    dead: Dead, method: str, kwargs: dict[str, Any], match: str
) -> None:
    lock = dead.lock(ttl=10)
    with pytest.raises(LockConfigError, match=match):
        invoke(lock, method, **kwargs)


@pytest.mark.parametrize("value", ["30", -1, math.nan])
def test_garbage_watchdog_lease_with_fixed_ttl(dead: Dead, value: Any) -> None:
    with pytest.raises(LockConfigError, match="watchdog_lease"):
        dead.lock(ttl=10, watchdog_lease=value)


# ------------------------------------------------------------------ client type


def test_client_of_the_other_flavour_is_rejected(dead: Dead) -> None:
    with pytest.raises(LockConfigError, match=dead.cls.__name__) as info:
        dead.cls(dead.other, "job")
    assert type(dead.other).__name__ in str(info.value)


@pytest.mark.parametrize(
    "client",
    [object(), None, "redis://localhost", redis.ConnectionPool()],
    ids=["object", "none", "url", "pool"],
)
def test_non_client_is_rejected(dead: Dead, client: object) -> None:
    with pytest.raises(LockConfigError, match=f"{dead.cls.__name__} needs"):
        dead.cls(client, "job")  # type: ignore[arg-type]


def test_client_is_checked_before_the_other_arguments(dead: Dead) -> None:
    with pytest.raises(LockConfigError, match="needs"):
        dead.cls(object(), "", ttl=-1)  # type: ignore[arg-type]


# ------------------------------------------------------------------ method arguments

METHOD_CASES: list[tuple[str, str, tuple[Any, ...], dict[str, Any], str]] = [
    ("acquire-nonblock-timeout", "acquire", (), {"blocking": False, "timeout": 1}, "timeout"),
    ("acquire-nonblock-timeout-0", "acquire", (False, 0), {}, "blocking=False"),
    ("acquire-negative-timeout", "acquire", (), {"timeout": -1}, "timeout"),
    ("acquire-nan-timeout", "acquire", (), {"timeout": math.nan}, "timeout"),
    ("acquire-str-timeout", "acquire", (), {"timeout": "1"}, "timeout"),
    ("acquire-bool-timeout", "acquire", (), {"timeout": True}, "timeout"),
    ("acquire-blocking-str", "acquire", (), {"blocking": "yes"}, "blocking"),
    ("acquire-blocking-int", "acquire", (1,), {}, "blocking"),
    ("acquire-blocking-none", "acquire", (), {"blocking": None}, "blocking"),
    ("extend-zero", "extend", (0,), {}, "seconds"),
    ("extend-negative", "extend", (-1,), {}, "seconds"),
    ("extend-nan", "extend", (math.nan,), {}, "seconds"),
    ("extend-inf", "extend", (math.inf,), {}, "seconds"),
    ("extend-str", "extend", ("5",), {}, "seconds"),
    ("extend-bool", "extend", (True,), {}, "seconds"),
    ("extend-below-1ms", "extend", (0.0004,), {"replace": True}, "seconds"),
    ("adopt-short", "adopt", ("short",), {}, "token"),
    ("adopt-31-hex", "adopt", ("a" * 31,), {}, "token"),
    ("adopt-non-hex", "adopt", ("Z" * 32,), {}, "token"),
    ("adopt-upper-hex", "adopt", ("A" * 32,), {}, "token"),
    ("adopt-hex-with-pipe", "adopt", ("a" * 16 + "|" + "a" * 16,), {}, "token"),
    ("adopt-too-long", "adopt", ("a" * 257,), {}, "token"),
    ("adopt-int", "adopt", (123,), {}, "token"),
    ("adopt-bytes", "adopt", (b"a" * 32,), {}, "token"),
    ("adopt-none", "adopt", (None,), {}, "token"),
]


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "match"),
    [pytest.param(m, a, kw, msg, id=i) for i, m, a, kw, msg in METHOD_CASES],
)
def test_bad_method_argument(
    dead: Dead, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    lock = dead.lock(ttl=10)
    with pytest.raises(LockConfigError, match=match):
        invoke(lock, method, *args, **kwargs)
    assert_untouched(lock)


def test_extend_checks_seconds_before_ownership(dead: Dead) -> None:
    """With good seconds an unheld lock says NotOwnedError (still no I/O): the argument check
    comes first, so the error names the argument rather than the state."""
    lock = dead.lock(ttl=10)
    with pytest.raises(NotOwnedError):
        invoke(lock, "extend", 5)
    with pytest.raises(LockConfigError, match="seconds"):
        invoke(lock, "extend", -5)


# ------------------------------------------------------------------ extend on a held lock

BAD_EXTENSIONS: list[Any] = [0, -1, math.nan, math.inf, -math.inf, "5", True, 0.0004, ONE_YEAR_PLUS]


def test_bad_extend_on_held_sync_lock(r: redis.Redis) -> None:
    lock = Lock(r, "held", ttl=10)
    assert lock.acquire(blocking=False)
    before = r.pttl(lock.key)
    assert 9000 < before <= 10_000
    for bad in BAD_EXTENSIONS:
        for replace in (False, True):
            with pytest.raises(LockConfigError, match="seconds"):
                lock.extend(bad, replace=replace)
    after = r.pttl(lock.key)
    assert 9000 < after <= before  # not extended, not shortened
    assert lock.owned()
    assert not lock.lost
    assert lock.fencing_token == 1
    assert lock.extend(5) > 14.0  # a good extension still works afterwards
    lock.release()
    assert r.exists(lock.key) == 0


async def test_bad_extend_on_held_async_lock(ar: redis.asyncio.Redis) -> None:
    lock = AsyncLock(ar, "held", ttl=10)
    assert await lock.acquire(blocking=False)
    before = await ar.pttl(lock.key)
    assert 9000 < before <= 10_000
    for bad in BAD_EXTENSIONS:
        for replace in (False, True):
            with pytest.raises(LockConfigError, match="seconds"):
                await lock.extend(bad, replace=replace)
    after = await ar.pttl(lock.key)
    assert 9000 < after <= before
    assert await lock.owned()
    assert not lock.lost
    assert lock.fencing_token == 1
    assert await lock.extend(5) > 14.0
    await lock.release()
    assert await ar.exists(lock.key) == 0


def test_bad_acquire_arguments_on_live_server_leave_no_keys(r: redis.Redis) -> None:
    """The same rejections against a live server: nothing at all is written."""
    lock = Lock(r, "clean", ttl=10)
    for kwargs in ({"blocking": False, "timeout": 1}, {"timeout": -1}, {"blocking": "yes"}):
        with pytest.raises(LockConfigError):
            lock.acquire(**kwargs)
    with pytest.raises(LockConfigError):
        lock.adopt("Z" * 32)
    assert r.dbsize() == 0
    assert_untouched(lock)


def test_the_settings_cache_never_admits_a_bool_after_an_equal_number(dead: Dead) -> None:
    """Validated settings are cached; True == 1 must still be rejected after ttl=1 passed."""
    assert dead.lock(ttl=1).name == "job"
    with pytest.raises(LockConfigError, match="ttl"):
        dead.lock(ttl=True)
    assert dead.lock(timeout=0).name == "job"
    with pytest.raises(LockConfigError, match="timeout"):
        dead.lock(timeout=False)
