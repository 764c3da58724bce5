# SPDX-License-Identifier: MIT
"""Behaviour of ``FairLock`` and ``AsyncFairLock`` on a real redis-server: grants in arrival
order, direct hand-off on release, waiters that time out, are cancelled, or die (a queued
"ghost" written by the script itself, and a SIGKILLed process), the queue bound, single tries
that never jump the queue, the ``Lock`` API on top, and bad input (before any I/O).

Keys (see ``scripts/fair_acquire.lua``): the lock ``redislock:{N}`` (as for Lock), the queue
list ``redislock:{N}:queue``, the waiter leases ``:qleases`` and waiter info ``:qinfo``.
"""

from __future__ import annotations

import asyncio
import functools
import math
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.exceptions

from redislock import (
    AsyncFairLock,
    FairLock,
    LockConfigError,
    LockLostError,
    LockUsageError,
    QueueFullError,
    RedisLockError,
    RLock,
)
from redislock._core.keys import FairKeys, fence_key
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from tests.support import (
    Background,
    Dead,
    async_wait_for,
    closing_dead_clients,
    dead_pair,
    invoke,
    wait_for,
)
from tests.test_validation import CONSTRUCTOR_CASES, METHOD_CASES

CTX = multiprocessing.get_context("spawn")


# ------------------------------------------------------------------ helpers


def queue(admin: redis.Redis, name: str) -> list[str]:
    """The waiter tokens queued for lock ``name``, in order."""
    return [str(token) for token in admin.lrange(FairKeys.for_name(name).queue, 0, -1)]


def queue_length_is(admin: redis.Redis, name: str, n: int) -> Callable[[], bool]:
    """A predicate: ``n`` waiters are queued for lock ``name``."""
    return lambda: len(queue(admin, name)) == n


def queue_keys_gone(admin: redis.Redis, name: str) -> bool:
    keys = FairKeys.for_name(name)
    return admin.exists(keys.queue, keys.leases, keys.info) == 0


def holder_token(admin: redis.Redis, name: str) -> str | None:
    value = admin.get(FairKeys.for_name(name).lock)
    return None if value is None else str(value).split("|", 1)[0]


def enqueue_ghost(admin: redis.Redis, name: str, waiter_ms: int = 500) -> str:
    """Queue a waiter that never renews (as if it died at once), through fair_acquire.lua
    itself."""
    keys = FairKeys.for_name(name)
    token = os.urandom(16).hex()
    reply: Any = admin.eval(
        SCRIPTS["fair_acquire"].source,
        5,
        keys.lock,
        keys.fence,
        keys.queue,
        keys.leases,
        keys.info,
        token,
        30_000,
        "ghost|1|0",
        waiter_ms,
        10_000,
    )
    assert reply[0] == "busy"
    return token


# ================================================================== sync


def test_grants_in_arrival_order(r: redis.Redis, admin: redis.Redis) -> None:
    holder = FairLock(r, "fifo", ttl=30)
    assert holder.acquire()
    order: list[int] = []
    fences: list[int | None] = []
    waiters = []

    def wait(i: int, lock: FairLock) -> None:
        assert lock.acquire(timeout=30)
        order.append(i)
        fences.append(lock.fencing_token)
        time.sleep(0.01)
        lock.release()

    for i in range(6):
        lock = FairLock(r, "fifo", ttl=30)
        waiters.append(Background(functools.partial(wait, i, lock)))
        # Arrival order is known: start the next waiter once this one is queued.
        wait_for(queue_length_is(admin, "fifo", i + 1))
    holder.release()
    for waiter in waiters:
        waiter.join()
    assert order == list(range(6))
    assert fences == list(range(2, 8))
    assert admin.exists(holder.key) == 0
    assert queue_keys_gone(admin, "fifo")


def test_release_hands_the_lock_to_the_next_waiter(r: redis.Redis, admin: redis.Redis) -> None:
    holder = FairLock(r, "handoff", ttl=30)
    assert holder.acquire()
    # A 10 s recheck and a 30 s waiter lease: only the grant can wake this waiter quickly.
    waiter = FairLock(r, "handoff", ttl=30, recheck_interval=10.0, waiter_lease=30.0)
    seen: dict[str, Any] = {}

    def wait() -> bool:
        ok = waiter.acquire(timeout=20)
        seen["token"] = waiter.token
        seen["fence"] = waiter.fencing_token
        return ok

    waiting = Background(wait)
    wait_for(lambda: len(queue(admin, "handoff")) == 1)
    released = time.monotonic()
    holder.release()
    granted_to = holder_token(admin, "handoff")  # read right after release() returned
    assert granted_to is not None  # the lock never became free
    assert granted_to != holder.token
    assert waiting.join() is True
    assert waiting.at is not None
    assert waiting.at - released < 0.4
    assert seen["token"] == granted_to
    assert seen["fence"] == 2
    assert admin.get(fence_key(holder.key)) == "2"
    assert 29_000 < admin.pttl(holder.key) <= 30_000  # the waiter's own lease
    assert waiter.owned()
    assert queue_keys_gone(admin, "handoff")
    waiter.release()
    assert admin.exists(holder.key) == 0


def test_a_waiter_that_times_out_leaves_the_queue(r: redis.Redis, admin: redis.Redis) -> None:
    holder = FairLock(r, "timeout", ttl=30)
    assert holder.acquire()
    waiter = FairLock(r, "timeout", ttl=30)
    start = time.monotonic()
    assert waiter.acquire(timeout=0.3) is False
    assert 0.3 <= time.monotonic() - start < 2.0
    assert queue(admin, "timeout") == []
    assert queue_keys_gone(admin, "timeout")
    holder.release()
    assert admin.exists(holder.key) == 0  # nothing was granted to the departed waiter
    assert waiter.fencing_token is None
    assert waiter.statistics().failed_acquisitions == 1


def test_a_dead_waiter_is_skipped(r: redis.Redis, admin: redis.Redis) -> None:
    holder = FairLock(r, "ghost", ttl=30)
    assert holder.acquire()
    queued_at = time.monotonic()
    ghost = enqueue_ghost(admin, "ghost", waiter_ms=500)
    waiter = FairLock(r, "ghost", ttl=30, waiter_lease=0.5)
    waiting = Background(lambda: waiter.acquire(timeout=10))
    wait_for(lambda: len(queue(admin, "ghost")) == 2)
    assert queue(admin, "ghost")[0] == ghost
    # The live waiter's own retries drop the ghost once its waiter lease ran out.
    wait_for(lambda: ghost not in queue(admin, "ghost"), timeout=5.0)
    assert time.monotonic() - queued_at < 3.0
    assert len(queue(admin, "ghost")) == 1
    released = time.monotonic()
    holder.release()
    assert waiting.join() is True
    assert waiting.at is not None
    assert waiting.at - released < 0.5
    assert waiter.fencing_token == 2  # the ghost was never granted the lock
    waiter.release()
    assert queue_keys_gone(admin, "ghost")


def _waiting_worker(kwargs: dict[str, Any], name: str) -> None:
    client = redis.Redis(**kwargs)  # redis-py defaults
    FairLock(client, name, ttl=30, waiter_lease=0.5).acquire(timeout=60)


def test_a_sigkilled_waiter_is_skipped(
    redis_server: RedisProcess, r: redis.Redis, admin: redis.Redis
) -> None:
    holder = FairLock(r, "killed", ttl=30)
    assert holder.acquire()
    proc = CTX.Process(target=_waiting_worker, args=(redis_server.client_kwargs(), "killed"))
    proc.start()
    try:
        wait_for(lambda: len(queue(admin, "killed")) == 1, timeout=30.0)
        dead = queue(admin, "killed")[0]
        waiter = FairLock(r, "killed", ttl=30, waiter_lease=0.5)
        waiting = Background(lambda: waiter.acquire(timeout=10))
        wait_for(lambda: len(queue(admin, "killed")) == 2)
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: dead not in queue(admin, "killed"), timeout=5.0)
        assert time.monotonic() - killed < 3.0
        holder.release()
        assert waiting.join() is True
        assert holder_token(admin, "killed") == waiter.token
        assert waiter.fencing_token == 2
        waiter.release()
        assert queue_keys_gone(admin, "killed")
    finally:
        proc.join(10)


def test_queue_max(r: redis.Redis, admin: redis.Redis) -> None:
    holder = FairLock(r, "bounded", ttl=30, queue_max=2)
    assert holder.acquire()
    queued = [FairLock(r, "bounded", ttl=30, queue_max=2) for _ in range(2)]

    def wait(lock: FairLock) -> bool:
        ok = lock.acquire(timeout=20)
        lock.release()
        return ok

    waiting = []
    for i, lock in enumerate(queued):
        waiting.append(Background(functools.partial(wait, lock)))
        wait_for(queue_length_is(admin, "bounded", i + 1))
    extra = FairLock(r, "bounded", ttl=30, queue_max=2)
    start = time.monotonic()
    with pytest.raises(QueueFullError) as err:
        extra.acquire(timeout=10)
    assert time.monotonic() - start < 1.0  # refused at once, not after the timeout
    assert isinstance(err.value, RedisLockError)
    assert err.value.name == "bounded"
    assert err.value.length == 2
    assert len(queue(admin, "bounded")) == 2  # not queued
    assert extra.statistics().failed_acquisitions == 1
    assert extra.acquire(blocking=False) is False  # a single try never queues
    holder.release()
    assert all(w.join() is True for w in waiting)
    assert queue_keys_gone(admin, "bounded")


def test_a_single_try_never_jumps_the_queue(r: redis.Redis, admin: redis.Redis) -> None:
    holder = FairLock(r, "no-jump", ttl=30)
    assert holder.acquire()
    waiter = FairLock(r, "no-jump", ttl=30, recheck_interval=10.0, waiter_lease=30.0)
    waiting = Background(lambda: waiter.acquire(timeout=20))
    wait_for(lambda: len(queue(admin, "no-jump")) == 1)
    admin.delete(holder.key)  # the holder vanished without a release: the lock is free
    other = FairLock(r, "no-jump", ttl=30)
    freed = time.monotonic()
    assert other.acquire(blocking=False) is False
    assert other.acquire(timeout=0) is False
    # The single try found the lock free and granted it to the queued waiter.
    assert waiting.join() is True
    assert waiting.at is not None
    assert waiting.at - freed < 0.5
    assert waiter.fencing_token == 2
    assert other.fencing_token is None
    waiter.release()
    assert other.acquire(blocking=False) is True  # nobody queued: a try may take it
    other.release()


def test_an_expired_holder_lets_the_queue_move_on(r: redis.Redis) -> None:
    holder = FairLock(r, "expired", ttl=0.3)
    assert holder.acquire()
    waiter = FairLock(r, "expired", ttl=10)
    start = time.monotonic()
    assert waiter.acquire(timeout=5)
    assert time.monotonic() - start < 1.5
    with pytest.raises(LockLostError):
        holder.release()  # never touches the waiter's lock
    assert waiter.owned()
    waiter.release()


def test_it_is_a_lock_and_not_reentrant(r: redis.Redis, admin: redis.Redis) -> None:
    lock = FairLock(r, "api", ttl=5)
    assert not lock.locked()
    with lock:
        assert lock.locked()
        assert lock.owned()
        assert lock.fencing_token == 1
        remaining = lock.remaining()
        assert remaining is not None
        assert 4.0 < remaining <= 5.0
        assert 9.0 < lock.extend(5) <= 10.0
        with pytest.raises(LockUsageError):
            lock.acquire(blocking=False)
        value = admin.get(lock.key)
        assert isinstance(value, str)
        assert value.split("|")[0] == lock.token
    assert not lock.locked()
    assert lock.acquire()
    token = lock.detach()
    heir = FairLock(r, "api", ttl=5)
    heir.adopt(token)
    assert heir.fencing_token == 2
    heir.release()
    assert admin.exists(lock.key) == 0


def test_a_granted_watchdog_lock_is_renewed(r: redis.Redis, admin: redis.Redis) -> None:
    holder = FairLock(r, "wd", watchdog_lease=1.0)
    assert holder.acquire()
    waiter = FairLock(r, "wd", watchdog_lease=1.0)
    waiting = Background(lambda: waiter.acquire(timeout=10))
    wait_for(lambda: len(queue(admin, "wd")) == 1)
    time.sleep(1.5)  # the holder's watchdog keeps it beyond its 1 s lease
    assert holder.owned()
    holder.release()
    assert waiting.join() is True
    time.sleep(1.8)  # the hand-off gave the waiter a 1 s lease; its watchdog renews it
    assert waiter.owned()
    assert not waiter.lost
    waiter.release()


def test_an_rlock_of_the_same_name_is_wrongtype(r: redis.Redis) -> None:
    rlock = RLock(r, "shared-name", ttl=10)
    assert rlock.acquire()
    fair = FairLock(r, "shared-name", ttl=10)
    start = time.monotonic()
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        fair.acquire(timeout=5)
    assert time.monotonic() - start < 2.0
    rlock.release()
    assert fair.acquire()
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        rlock.acquire(timeout=5)
    fair.release()


# ================================================================== asyncio


async def test_async_grants_in_arrival_order(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    holder = AsyncFairLock(ar, "fifo", ttl=30)
    assert await holder.acquire()
    order: list[int] = []

    async def wait(i: int) -> None:
        lock = AsyncFairLock(ar, "fifo", ttl=30)
        async with lock:
            order.append(i)
            await asyncio.sleep(0.01)

    tasks = []
    for i in range(8):
        tasks.append(asyncio.create_task(wait(i)))
        await async_wait_for(queue_length_is(admin, "fifo", i + 1))
    await holder.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert order == list(range(8))
    assert admin.get(fence_key(holder.key)) == "9"
    assert queue_keys_gone(admin, "fifo")


async def test_async_release_hands_the_lock_to_the_next_waiter(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    holder = AsyncFairLock(ar, "handoff", ttl=30)
    assert await holder.acquire()
    waiter = AsyncFairLock(ar, "handoff", ttl=30, recheck_interval=10.0, waiter_lease=30.0)
    got: list[float] = []

    async def wait() -> None:
        assert await waiter.acquire(timeout=20)
        got.append(time.monotonic())

    task = asyncio.create_task(wait())
    await async_wait_for(lambda: len(queue(admin, "handoff")) == 1)
    released = time.monotonic()
    await holder.release()
    granted_to = holder_token(admin, "handoff")
    assert granted_to is not None
    assert granted_to != holder.token
    await asyncio.wait_for(task, 10)
    assert got[0] - released < 0.4
    assert waiter.token == granted_to
    assert waiter.fencing_token == 2
    await waiter.release()
    assert queue_keys_gone(admin, "handoff")


async def test_async_timed_out_and_cancelled_waiters_leave_the_queue(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    holder = AsyncFairLock(ar, "leave", ttl=30)
    assert await holder.acquire()
    timed_out = AsyncFairLock(ar, "leave", ttl=30)
    assert await timed_out.acquire(timeout=0.3) is False
    assert queue(admin, "leave") == []
    cancelled = AsyncFairLock(ar, "leave", ttl=30)
    task = asyncio.create_task(cancelled.acquire(timeout=30))
    await async_wait_for(lambda: len(queue(admin, "leave")) == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert queue(admin, "leave") == []
    assert queue_keys_gone(admin, "leave")
    await holder.release()
    assert await ar.exists(holder.key) == 0  # granted to nobody
    assert cancelled.fencing_token is None
    assert await cancelled.acquire(blocking=False)  # the object is still usable
    await cancelled.release()


async def test_async_a_dead_waiter_is_skipped(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    holder = AsyncFairLock(ar, "ghost", ttl=30)
    assert await holder.acquire()
    ghost = enqueue_ghost(admin, "ghost", waiter_ms=500)
    queued_at = time.monotonic()
    waiter = AsyncFairLock(ar, "ghost", ttl=30, waiter_lease=0.5)
    task = asyncio.create_task(waiter.acquire(timeout=10))
    await async_wait_for(lambda: len(queue(admin, "ghost")) == 2)
    await async_wait_for(lambda: ghost not in queue(admin, "ghost"))
    assert time.monotonic() - queued_at < 3.0
    await holder.release()
    assert await asyncio.wait_for(task, 10) is True
    assert waiter.fencing_token == 2
    await waiter.release()


async def test_async_queue_max(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    holder = AsyncFairLock(ar, "bounded", ttl=30, queue_max=1)
    assert await holder.acquire()
    first = AsyncFairLock(ar, "bounded", ttl=30, queue_max=1)
    task = asyncio.create_task(first.acquire(timeout=20))
    await async_wait_for(lambda: len(queue(admin, "bounded")) == 1)
    with pytest.raises(QueueFullError) as err:
        await AsyncFairLock(ar, "bounded", ttl=30, queue_max=1).acquire(timeout=10)
    assert err.value.length == 1
    await holder.release()
    assert await asyncio.wait_for(task, 10) is True
    await first.release()


async def test_async_a_single_try_never_jumps_the_queue(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    holder = AsyncFairLock(ar, "no-jump", ttl=30)
    assert await holder.acquire()
    waiter = AsyncFairLock(ar, "no-jump", ttl=30, recheck_interval=10.0, waiter_lease=30.0)
    task = asyncio.create_task(waiter.acquire(timeout=20))
    await async_wait_for(lambda: len(queue(admin, "no-jump")) == 1)
    await ar.delete(holder.key)
    other = AsyncFairLock(ar, "no-jump", ttl=30)
    assert await other.acquire(blocking=False) is False
    assert await asyncio.wait_for(task, 5) is True
    assert waiter.fencing_token == 2
    await waiter.release()


# ================================================================== bad input, before any I/O


DeadFairLock = Dead[FairLock | AsyncFairLock]


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    yield from closing_dead_clients()


@pytest.fixture(params=["sync", "async"])
def dead(
    request: pytest.FixtureRequest, clients: tuple[redis.Redis, redis.asyncio.Redis]
) -> DeadFairLock:
    return dead_pair(request.param, clients, FairLock, AsyncFairLock)


def test_dead_client_control(dead: DeadFairLock) -> None:
    """A valid call does reach the network: so no ConnectionError below means no I/O."""
    lock = dead.make(ttl=5)
    with pytest.raises(redis.exceptions.ConnectionError):
        invoke(lock, "acquire", blocking=False)
    with pytest.raises(redis.exceptions.ConnectionError):
        invoke(lock, "acquire", timeout=1)


@pytest.mark.parametrize(
    "value", [0, -1, 0.01, 0.049, math.nan, math.inf, "1", True, None], ids=repr
)
def test_bad_waiter_lease(dead: DeadFairLock, value: Any) -> None:
    with pytest.raises(LockConfigError, match="waiter_lease"):
        dead.make(waiter_lease=value)


@pytest.mark.parametrize("value", [0, -1, True, False, 1.5, "3", None], ids=repr)
def test_bad_queue_max(dead: DeadFairLock, value: Any) -> None:
    with pytest.raises(LockConfigError, match="queue_max"):
        dead.make(queue_max=value)


def test_good_fair_arguments(dead: DeadFairLock) -> None:
    assert dead.make(waiter_lease=0.05, queue_max=1).name == "job"
    assert dead.make(waiter_lease=3600, queue_max=10**9).name == "job"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [pytest.param(kw, m, id=i) for i, kw, m in CONSTRUCTOR_CASES],
)
def test_bad_constructor_argument(dead: DeadFairLock, kwargs: dict[str, Any], match: str) -> None:
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "job")
    with pytest.raises(LockConfigError, match=match):
        dead.make(name, **kwargs)


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "match"),
    [pytest.param(m, a, kw, msg, id=i) for i, m, a, kw, msg in METHOD_CASES],
)
def test_bad_method_argument(
    dead: DeadFairLock, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    lock = dead.make(ttl=10)
    with pytest.raises(LockConfigError, match=match):
        invoke(lock, method, *args, **kwargs)
    assert lock.statistics().acquisitions == 0
    assert lock.token is None


def test_client_of_the_other_flavour_is_rejected(dead: DeadFairLock) -> None:
    with pytest.raises(LockConfigError, match=dead.cls.__name__):
        dead.cls(dead.other, "job")
    with pytest.raises(LockConfigError, match="needs"):
        dead.cls(object(), "job")  # type: ignore[arg-type]
