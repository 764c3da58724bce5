# SPDX-License-Identifier: MIT
"""What only ``AsyncLock`` has: cancellation safety, task ownership, the per-loop watchdog."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from redislock import AsyncLock, LockLostError
from redislock._core.scripts import SCRIPTS
from redislock.aio import renewer as aio_renewer
from redislock.server import RedisProcess
from tests.proxy import DelayProxy

pytestmark = pytest.mark.pythons  # dev.py's STAGES: where else it runs


async def warm_up(slow: redis.asyncio.Redis, admin: redis.asyncio.Redis) -> None:
    """Connect through the proxy and load the scripts, so only the lock command is slow."""
    for script in SCRIPTS.values():
        await admin.script_load(script.source)
    await slow.ping()


async def test_cancelled_waiter_leaves_nothing_behind(ar: redis.asyncio.Redis) -> None:
    holder = AsyncLock(ar, "cancel-wait", ttl=10)
    assert await holder.acquire()
    waiter = AsyncLock(ar, "cancel-wait", ttl=10)
    task = asyncio.create_task(waiter.acquire(timeout=30))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert waiter.fencing_token is None
    assert waiter.token is None
    await holder.release()
    assert await ar.exists(holder.key) == 0
    assert await waiter.acquire(blocking=False)  # the object is still usable
    await waiter.release()


@pytest.fixture
async def delayed(
    redis_server: RedisProcess,
) -> AsyncIterator[tuple[redis.asyncio.Redis, redis.asyncio.Redis]]:
    """(a client whose replies arrive 0.3 s late, a direct admin client) on a flushed server."""
    assert redis_server.socket_path is not None
    async with DelayProxy(str(redis_server.socket_path), reply_delay=0.3).running() as proxy:
        slow = redis.asyncio.Redis(port=proxy.port)
        admin = redis.asyncio.Redis(**redis_server.client_kwargs())
        await admin.flushall()
        await warm_up(slow, admin)
        yield slow, admin
        await slow.aclose()
        await admin.aclose()


async def test_cancel_after_the_script_ran_deletes_the_key(
    delayed: tuple[redis.asyncio.Redis, redis.asyncio.Redis],
) -> None:
    slow, admin = delayed
    lock = AsyncLock(slow, "cancel-acquire", ttl=30)
    task = asyncio.create_task(lock.acquire())
    # The acquire script runs at once; its reply is still on the way when we cancel.
    for _ in range(100):
        if await admin.exists(lock.key):
            break
        await asyncio.sleep(0.01)
    assert await admin.exists(lock.key) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(200):
        if not await admin.exists(lock.key):
            break
        await asyncio.sleep(0.01)
    assert await admin.exists(lock.key) == 0, "a cancelled acquire left an orphan key"
    assert lock.fencing_token is None


async def test_cancelled_release_completes_and_state_follows(
    delayed: tuple[redis.asyncio.Redis, redis.asyncio.Redis],
) -> None:
    slow, admin = delayed
    lock = AsyncLock(slow, "cancel-release", ttl=30)
    assert await lock.acquire()
    task = asyncio.create_task(lock.release())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Never "released" locally while the key remains.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        released_locally = lock.fencing_token is None
        key_exists = await admin.exists(lock.key) == 1
        assert not (released_locally and key_exists)
        if released_locally and not key_exists:
            break
        await asyncio.sleep(0.01)
    assert lock.fencing_token is None
    assert await admin.exists(lock.key) == 0
    assert not lock.lost, "a clean release, finished in the background, is not a loss"


async def test_cancelled_release_while_redis_is_paused(ar: redis.asyncio.Redis) -> None:
    lock = AsyncLock(ar, "paused-release", ttl=30)
    assert await lock.acquire()
    admin = redis.asyncio.Redis(connection_pool=ar.connection_pool)
    await admin.client_pause(400, all=False)  # pause writes only
    task = asyncio.create_task(lock.release())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await ar.exists(lock.key) == 1
    assert lock.token is not None, "the object must not believe it released yet"
    await asyncio.sleep(0.6)
    assert await ar.exists(lock.key) == 0
    assert lock.fencing_token is None
    assert not lock.lost


async def test_tasks_exclude_each_other(ar: redis.asyncio.Redis) -> None:
    active = 0
    peak = 0
    fences: list[int] = []

    async def worker() -> None:
        nonlocal active, peak
        for _ in range(5):
            lock = AsyncLock(ar, "tasks", ttl=10)
            async with lock:
                active += 1
                peak = max(peak, active)
                assert lock.fencing_token is not None
                fences.append(lock.fencing_token)
                value = int(await ar.get("counter") or 0)
                await asyncio.sleep(0.001)
                await ar.set("counter", value + 1)
                active -= 1

    await asyncio.gather(*(worker() for _ in range(20)))
    assert peak == 1
    assert int(await ar.get("counter") or 0) == 100
    assert fences == sorted(fences)
    assert len(set(fences)) == 100


async def test_watchdog_task_is_one_per_loop_and_ends_when_idle(ar: redis.asyncio.Redis) -> None:
    locks = [AsyncLock(ar, f"wd{i}", watchdog_lease=1.0) for i in range(5)]
    for lock in locks:
        assert await lock.acquire()
    before = {t for t in asyncio.all_tasks() if t.get_name() == "redislock-renewer"}
    assert len(before) == 1
    await asyncio.sleep(1.5)
    for lock in locks:
        assert await lock.owned()
    for lock in locks:
        await lock.release()
    task = aio_renewer.renewer()._task
    assert task is not None
    await asyncio.wait_for(task, 2.0)
    assert task.done()


async def test_async_on_lost_callback_is_awaited(ar: redis.asyncio.Redis) -> None:
    fired = asyncio.Event()

    async def on_lost(lock: AsyncLock) -> None:
        assert lock.lost
        fired.set()

    lock = AsyncLock(ar, "alost", watchdog_lease=2.0, renew_interval=0.3, on_lost=on_lost)
    assert await lock.acquire()
    await ar.delete(lock.key)
    await asyncio.wait_for(fired.wait(), 2.0)
    with pytest.raises(LockLostError):
        await lock.release()


async def test_watchdog_notices_unreachable_redis(spawn_server: object) -> None:
    from collections.abc import Callable

    assert callable(spawn_server)
    spawn: Callable[..., RedisProcess] = spawn_server
    server = spawn()
    client = redis.asyncio.Redis(**server.client_kwargs())
    fired = asyncio.Event()
    lock = AsyncLock(client, "unreachable", watchdog_lease=1.0, on_lost=lambda _: fired.set())
    assert await lock.acquire()
    server.stop()
    start = time.monotonic()
    await asyncio.wait_for(fired.wait(), 3.0)
    # Lost once the local lease estimate ran out (1 s after the last renewal), not before.
    assert time.monotonic() - start <= 1.5
    assert lock.lost
    assert "could not renew" in (lock._core.holding.lost_reason if lock._core.holding else "")
    await client.aclose()
