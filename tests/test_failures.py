# SPDX-License-Identifier: MIT
"""A Redis failure surfaces as that error, never as "not acquired" or "busy"."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import AsyncLock, Lock, LockLostError, NotOwnedError
from redislock.server import RedisProcess

Spawn = Callable[..., RedisProcess]


def acquire_with(flavor: str, client_kwargs: dict[str, Any], name: str = "f") -> bool:
    """Acquire once with a fresh client of ``flavor``; errors propagate."""
    if flavor == "sync":
        client = redis.Redis(**client_kwargs)
        try:
            return Lock(client, name, ttl=5).acquire(blocking=False)
        finally:
            client.close()

    async def go() -> bool:
        aclient = redis.asyncio.Redis(**client_kwargs)
        try:
            return await AsyncLock(aclient, name, ttl=5).acquire(blocking=False)
        finally:
            await aclient.aclose()

    return asyncio.run(go())


FLAVOR = pytest.mark.parametrize("flavor", ["sync", "async"])


@FLAVOR
def test_connection_refused(flavor: str, tmp_path: Any) -> None:
    kwargs = {"unix_socket_path": str(tmp_path / "nobody.sock")}
    with pytest.raises(redis.exceptions.ConnectionError):
        acquire_with(flavor, kwargs)


@FLAVOR
def test_noperm(flavor: str, redis_server: RedisProcess) -> None:
    admin = redis.Redis(**redis_server.client_kwargs())
    admin.acl_setuser(
        "limited",
        enabled=True,
        passwords=["+secret-pw"],
        keys=["other:*"],
        commands=["+@all"],
    )
    try:
        kwargs = {**redis_server.client_kwargs(), "username": "limited", "password": "secret-pw"}
        with pytest.raises(redis.exceptions.NoPermissionError):
            acquire_with(flavor, kwargs)
    finally:
        admin.acl_deluser("limited")
        admin.close()


@FLAVOR
def test_readonly_replica(flavor: str, redis_server: RedisProcess, spawn_server: Spawn) -> None:
    primary = spawn_server(unix_socket=False)
    replica = spawn_server(unix_socket=False, args=["--replicaof", "127.0.0.1", str(primary.port)])
    with pytest.raises(redis.exceptions.ReadOnlyError):
        acquire_with(flavor, replica.client_kwargs())
    assert acquire_with(flavor, primary.client_kwargs()) is True


@FLAVOR
def test_out_of_memory(flavor: str, spawn_server: Spawn) -> None:
    server = spawn_server(args=["--maxmemory", "1", "--maxmemory-policy", "noeviction"])
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        acquire_with(flavor, server.client_kwargs())
    client = redis.Redis(**server.client_kwargs())
    assert client.keys("*") == []  # nothing half-written
    client.close()


def test_waiting_acquire_does_not_hide_a_dying_server(spawn_server: Spawn) -> None:
    server = spawn_server()
    client = redis.Redis(**server.client_kwargs())
    holder = Lock(client, "dying", ttl=30)
    assert holder.acquire()
    waiter = Lock(client, "dying", ttl=30, recheck_interval=0.1)
    server.stop()
    with pytest.raises(redis.exceptions.ConnectionError):
        waiter.acquire(timeout=5)
    client.close()


@FLAVOR
def test_hung_redis_is_reported_as_a_loss_not_a_hang(flavor: str, spawn_server: Spawn) -> None:
    """A client without socket_timeout and a frozen server: the renewal call never returns,
    yet the loss is reported once the local lease estimate runs out."""
    server = spawn_server()
    fired = threading.Event()

    def check(lock: Lock | AsyncLock) -> None:
        assert fired.wait(3.0), "on_lost never fired"
        assert lock.lost

    if flavor == "sync":
        client = redis.Redis(**server.client_kwargs())  # no socket_timeout
        lock = Lock(client, "hung", watchdog_lease=1.0, on_lost=lambda _: fired.set())
        assert lock.acquire()
        server.kill(signal.SIGSTOP)
        start = time.monotonic()
        check(lock)
        assert time.monotonic() - start <= 1.5
        server.kill(signal.SIGCONT)
        with pytest.raises(LockLostError):
            lock.release()
        client.close()
        return

    async def go() -> None:
        aclient = redis.asyncio.Redis(**server.client_kwargs())
        alock = AsyncLock(aclient, "hung", watchdog_lease=1.0, on_lost=lambda _: fired.set())
        assert await alock.acquire()
        server.kill(signal.SIGSTOP)
        start = time.monotonic()
        await asyncio.to_thread(fired.wait, 3.0)
        check(alock)
        assert time.monotonic() - start <= 1.5
        server.kill(signal.SIGCONT)
        with pytest.raises(LockLostError):
            await alock.release()
        await aclient.aclose()

    asyncio.run(go())


@FLAVOR
def test_a_hung_redis_delays_nobody_elses_renewal(flavor: str, spawn_server: Spawn) -> None:
    """Locks on a frozen server must not hold up the renewal of a lock on a healthy one:
    neither one slow renewal at a time, nor a pool of I/O threads used up by hung calls."""
    healthy = spawn_server()
    frozen = spawn_server()
    admin = redis.Redis(**healthy.client_kwargs())
    pttls: list[int] = []

    def watch(seconds: float, key: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pttls.append(admin.pttl(key))
            time.sleep(0.05)

    if flavor == "sync":
        hc = redis.Redis(**healthy.client_kwargs())
        fc = redis.Redis(**frozen.client_kwargs())  # no socket_timeout: calls hang
        x = Lock(hc, "x", watchdog_lease=1.0)
        stuck = [Lock(fc, f"y{i}", watchdog_lease=9.0) for i in range(8)]
        assert x.acquire()
        for lock in stuck:
            assert lock.acquire()
        frozen.kill(signal.SIGSTOP)
        watch(4.0, x.key)
        assert not x.lost
        assert x.owned()
        x.release()
        frozen.kill(signal.SIGCONT)
        for lock in stuck:
            with contextlib.suppress(NotOwnedError):
                lock.release()
        hc.close()
        fc.close()
    else:

        async def go() -> None:
            hc = redis.asyncio.Redis(**healthy.client_kwargs())
            fc = redis.asyncio.Redis(**frozen.client_kwargs())
            x = AsyncLock(hc, "x", watchdog_lease=1.0)
            stuck = [AsyncLock(fc, f"y{i}", watchdog_lease=9.0) for i in range(8)]
            assert await x.acquire()
            for lock in stuck:
                assert await lock.acquire()
            frozen.kill(signal.SIGSTOP)
            await asyncio.to_thread(watch, 4.0, x.key)
            assert not x.lost
            assert await x.owned()
            await x.release()
            frozen.kill(signal.SIGCONT)
            for lock in stuck:
                with contextlib.suppress(NotOwnedError):
                    await lock.release()
            await asyncio.sleep(0.2)  # let the late renewal tasks finish
            await hc.aclose()
            await fc.aclose()

        asyncio.run(go())
    assert pttls
    assert min(pttls) > 0, "the healthy lock's key expired while a frozen server hung renewals"
    admin.close()


@FLAVOR
def test_on_lost_fires_once_per_loss(flavor: str, spawn_server: Spawn) -> None:
    server = spawn_server()
    calls: list[float] = []

    def record(_: object) -> None:
        calls.append(time.monotonic())

    if flavor == "sync":
        client = redis.Redis(**server.client_kwargs())
        lock = Lock(client, "once", watchdog_lease=0.6, on_lost=record)
        assert lock.acquire()
        server.kill(signal.SIGSTOP)
        time.sleep(2.5)  # several renewals time out, then answer late after SIGCONT
        server.kill(signal.SIGCONT)
        time.sleep(1.0)
        assert lock.lost
        with pytest.raises(LockLostError):
            lock.release()
        client.close()
    else:

        async def go() -> None:
            client = redis.asyncio.Redis(**server.client_kwargs())
            lock = AsyncLock(client, "once", watchdog_lease=0.6, on_lost=record)
            assert await lock.acquire()
            server.kill(signal.SIGSTOP)
            await asyncio.sleep(2.5)
            server.kill(signal.SIGCONT)
            await asyncio.sleep(1.0)
            assert lock.lost
            with pytest.raises(LockLostError):
                await lock.release()
            await client.aclose()

        asyncio.run(go())
    assert len(calls) == 1


def test_every_hung_renewal_is_reported(spawn_server: Spawn) -> None:
    """Two servers freeze one after the other: each lock's loss is reported near its own
    lease end (a stale deadline entry once cancelled the second one)."""
    first, second = spawn_server(), spawn_server()
    fired: dict[str, float] = {}

    def note(name: str) -> Any:
        return lambda _: fired.setdefault(name, time.monotonic())

    c1 = redis.Redis(**first.client_kwargs())
    c2 = redis.Redis(**second.client_kwargs())
    x = Lock(c1, "x", watchdog_lease=2.7, on_lost=note("x"))
    h = Lock(c2, "h", watchdog_lease=3.0, on_lost=note("h"))
    assert x.acquire()
    assert h.acquire()
    time.sleep(2.0)
    first.kill(signal.SIGSTOP)
    time.sleep(1.1)
    second.kill(signal.SIGSTOP)
    frozen_at = time.monotonic()
    deadline = frozen_at + 6.0
    while "h" not in fired and time.monotonic() < deadline:
        time.sleep(0.05)
    first.kill(signal.SIGCONT)
    second.kill(signal.SIGCONT)
    assert "x" in fired
    assert "h" in fired, "the second frozen server's loss was never reported"
    assert fired["h"] - frozen_at <= 3.0 + 0.5
    for lock in (x, h):
        with contextlib.suppress(NotOwnedError):
            lock.release()
    c1.close()
    c2.close()


@FLAVOR
def test_stalls_shorter_than_the_margin_are_not_a_loss(flavor: str, spawn_server: Spawn) -> None:
    """Two Redis stalls of 1.15 s against a 3 s lease renewed every 1 s: the lease never
    runs out in Redis, so nothing may be reported lost."""
    server = spawn_server()
    admin = redis.Redis(**server.client_kwargs())

    def stall_twice() -> None:
        for _ in range(2):
            admin.client_pause(1150)
            time.sleep(1.6)

    if flavor == "sync":
        client = redis.Redis(**server.client_kwargs())
        lock = Lock(client, "stall", watchdog_lease=3.0, renew_interval=1.0)
        assert lock.acquire()
        time.sleep(0.5)
        stall_twice()
        assert not lock.lost
        assert lock.owned()
        lock.release()
        client.close()
    else:

        async def go() -> None:
            aclient = redis.asyncio.Redis(**server.client_kwargs())
            alock = AsyncLock(aclient, "stall", watchdog_lease=3.0, renew_interval=1.0)
            assert await alock.acquire()
            await asyncio.sleep(0.5)
            await asyncio.to_thread(stall_twice)
            assert not alock.lost
            assert await alock.owned()
            await alock.release()
            await aclient.aclose()

        asyncio.run(go())
    admin.close()


def test_renewal_retries_back_off_while_redis_is_down(spawn_server: Spawn) -> None:
    """Failed renewals are retried after a back-off, not in a tight loop."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    server = spawn_server()
    client = redis.Redis(**server.client_kwargs(), retry=Retry(NoBackoff(), 0))
    lock = Lock(client, "down", watchdog_lease=0.6)
    assert lock.acquire()
    time.sleep(0.25)
    server.stop()
    time.sleep(0.8)
    failures = lock.statistics().renewal_failures
    assert 1 <= failures <= 10
    assert lock.lost
    client.close()
