# SPDX-License-Identifier: MIT
"""Behaviour of ``RLock`` (per thread) and ``AsyncRLock`` (per asyncio task) on a real
redis-server: re-entry and the hold count kept in Redis, ownership per thread / task,
fencing, wake-ups, the watchdog, loss, detach/adopt, heavy contention on one object, bad
input (before any I/O) and a name shared with a plain ``Lock`` (WRONGTYPE).

The async tests are native coroutines: the ``tests/flavors.py`` facade runs every call as
its own task, which would make every call a different owner of a reentrant lock.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.exceptions

from redislock import (
    AcquireTimeoutError,
    AsyncLock,
    AsyncRLock,
    Lock,
    LockConfigError,
    LockLostError,
    NotOwnedError,
    RLock,
)
from redislock._core.codec import decode_hold_value
from redislock._core.keys import fence_key
from tests.support import (
    Dead,
    async_wait_for,
    closing_dead_clients,
    dead_pair,
    in_thread,
    invoke,
    wait_for,
)
from tests.test_validation import CONSTRUCTOR_CASES, METHOD_CASES, dead_clients

# ------------------------------------------------------------------ helpers


@dataclass(frozen=True)
class Hold:
    """One field of the hold hash: ``<mode>|<count>|<expires_ms>|<fence>|<host>|<pid>|<ms>``."""

    mode: str
    count: int
    fence: int
    pid: int


def hold_of(admin: redis.Redis, key: str, token: str | None) -> Hold | None:
    """The hold of ``token`` as stored in Redis, or None if there is no such field."""
    assert token is not None
    value = admin.hget(key, token)
    if value is None:
        return None
    stored = decode_hold_value(value)
    assert stored is not None
    return Hold(stored.mode, stored.count, stored.fence, stored.pid)


def fence_of(lock: RLock | AsyncRLock) -> int | None:
    """The fencing token (a function, so mypy does not narrow the property across calls)."""
    return lock.fencing_token


# ================================================================== sync RLock


def test_reentrant_in_one_thread_and_counted_in_redis(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "re", ttl=10)
    assert lock.hold_count() == 0
    assert lock.acquire() is True
    token = lock.token
    assert lock.fencing_token == 1
    assert lock.acquire() is True
    assert lock.acquire(blocking=False) is True  # re-entry never waits
    assert lock.hold_count() == 3
    assert lock.token == token  # one hold, one token
    assert lock.fencing_token == 1  # kept while re-entered
    assert hold_of(admin, lock.key, token) == Hold("w", 3, 1, os.getpid())
    assert admin.hlen(lock.key) == 1
    lock.release()
    assert lock.hold_count() == 2
    assert hold_of(admin, lock.key, token) == Hold("w", 2, 1, os.getpid())
    lock.release()
    lock.release()
    assert lock.hold_count() == 0
    assert fence_of(lock) is None
    assert lock.token is None
    assert admin.exists(lock.key) == 0
    assert lock.acquire(blocking=False)  # a new hold: a new token and a larger fence
    assert lock.fencing_token == 2
    assert lock.token != token
    assert hold_of(admin, lock.key, lock.token) == Hold("w", 1, 2, os.getpid())
    lock.release()


def test_nested_with_statements(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "nested", ttl=10)
    with lock as outer:
        assert outer is lock
        with lock:
            assert lock.hold_count() == 2
            assert lock.owned()
        assert lock.hold_count() == 1
        assert lock.owned()
    assert lock.hold_count() == 0
    assert admin.exists(lock.key) == 0


def test_another_thread_can_neither_take_nor_release_it(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "owner", ttl=10)
    assert lock.acquire()
    assert lock.acquire()
    token = lock.token

    assert in_thread(lambda: lock.acquire(blocking=False)) is False
    assert in_thread(lambda: lock.acquire(timeout=0.2)) is False
    assert in_thread(lock.hold_count) == 0
    assert in_thread(lambda: lock.token) is None
    assert in_thread(lock.owned) is False
    assert in_thread(lock.remaining) is None
    assert in_thread(lock.locked) is True
    with pytest.raises(NotOwnedError) as err:
        in_thread(lock.release)
    assert not isinstance(err.value, LockLostError)
    with pytest.raises(NotOwnedError):
        in_thread(lambda: lock.extend(5))

    # Nothing the other thread did touched this thread's hold.
    assert lock.hold_count() == 2
    assert hold_of(admin, lock.key, token) == Hold("w", 2, 1, os.getpid())
    assert admin.hlen(lock.key) == 1
    lock.release()
    lock.release()
    assert admin.exists(lock.key) == 0


def test_another_object_of_the_same_name_is_excluded(r: redis.Redis) -> None:
    first = RLock(r, "two-objects", ttl=10)
    second = RLock(r, "two-objects", ttl=10)
    assert first.acquire()
    assert second.acquire(blocking=False) is False
    assert second.acquire(timeout=0.2) is False
    with pytest.raises(NotOwnedError):
        second.release()
    first.release()
    assert second.acquire(blocking=False)
    assert second.fencing_token == 2
    second.release()


def test_releasing_more_often_than_acquired(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "over-release", ttl=10)
    with pytest.raises(NotOwnedError):
        lock.release()
    assert lock.acquire()
    assert lock.acquire()
    lock.release()
    lock.release()
    with pytest.raises(NotOwnedError) as err:
        lock.release()
    assert not isinstance(err.value, LockLostError)
    assert admin.exists(lock.key) == 0
    assert lock.acquire(blocking=False)  # still usable
    lock.release()


def test_fence_is_issued_once_per_hold(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "fence", ttl=10)
    fences = []
    for _ in range(3):
        assert lock.acquire()
        first = lock.fencing_token
        for _ in range(4):
            assert lock.acquire()
            assert lock.fencing_token == first
        fences.append(first)
        for _ in range(5):
            lock.release()
    assert fences == [1, 2, 3]
    assert admin.get(fence_key(lock.key)) == "3"  # re-entries did not INCR it


def test_release_at_zero_wakes_a_waiter_at_once(r: redis.Redis) -> None:
    # With a 10 s recheck interval and a 30 s lease only the release's wake-up can let the
    # waiter in quickly.
    lock = RLock(r, "wake", ttl=30, recheck_interval=10.0)
    assert lock.acquire()
    assert lock.acquire()
    result: dict[str, Any] = {}

    def waiter() -> None:
        result["ok"] = lock.acquire(timeout=5)
        result["at"] = time.monotonic()
        result["fence"] = lock.fencing_token
        lock.release()

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_for(lambda: r.exists(lock.key + ":wait") == 1)
    lock.release()  # count 2 -> 1: still held, nobody may enter
    time.sleep(0.3)
    assert "ok" not in result
    released = time.monotonic()
    lock.release()
    thread.join(10)
    assert result["ok"] is True
    assert result["at"] - released < 0.4
    assert result["fence"] == 2


def test_reentry_refreshes_a_fixed_lease(r: redis.Redis) -> None:
    lock = RLock(r, "refresh", ttl=5)
    assert lock.acquire()
    assert lock.extend(1, replace=True) == 1.0
    assert lock.acquire()
    remaining = lock.remaining()
    assert remaining is not None
    assert 4.0 < remaining <= 5.0
    lock.release()
    lock.release()


def test_extend_remaining_owned_locked(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "ext", ttl=5)
    assert not lock.locked()
    assert not lock.owned()
    assert lock.remaining() is None
    with pytest.raises(NotOwnedError):
        lock.extend(1)
    assert lock.acquire()
    assert lock.locked()
    assert lock.owned()
    remaining = lock.remaining()
    assert remaining is not None
    assert 4.0 < remaining <= 5.0
    new_ttl = lock.extend(5)
    assert 9.0 < new_ttl <= 10.0
    assert 9000 < admin.pttl(lock.key) <= 10_000  # the key lives as long as the lease
    assert lock.extend(2, replace=True) == 2.0
    assert admin.pttl(lock.key) <= 2000
    lock.release()
    assert not lock.locked()
    assert not lock.owned()
    assert lock.remaining() is None
    with pytest.raises(NotOwnedError):
        lock.extend(1)


def test_fixed_lease_expires_and_frees_the_lock(r: redis.Redis) -> None:
    lock = RLock(r, "expire", ttl=0.3)
    assert lock.acquire()
    assert lock.acquire()
    other = RLock(r, "expire", ttl=5)
    start = time.monotonic()
    assert other.acquire(timeout=5)
    assert time.monotonic() - start < 1.5
    assert lock.lost
    with pytest.raises(LockLostError):
        lock.release()
    other.release()


def test_watchdog_keeps_it_beyond_its_lease(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "watchdog", watchdog_lease=1.0)
    assert lock.acquire()
    assert lock.acquire()
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert admin.pttl(lock.key) > 0
        time.sleep(0.1)
    assert lock.owned()
    assert not lock.lost
    assert lock.statistics().renewals >= 4
    assert hold_of(admin, lock.key, lock.token) == Hold("w", 2, 1, os.getpid())
    lock.release()
    time.sleep(1.3)  # a decrement keeps the renewal going
    assert lock.owned()
    lock.release()
    assert admin.exists(lock.key) == 0


def test_on_lost_gets_the_rlock_and_the_loss_is_reported(
    r: redis.Redis, admin: redis.Redis
) -> None:
    fired: list[object] = []
    lock = RLock(r, "lost", watchdog_lease=3.0, renew_interval=0.3, on_lost=fired.append)
    assert lock.acquire()
    assert lock.acquire()
    admin.delete(lock.key)
    wait_for(lambda: bool(fired), timeout=3.0)
    assert fired == [lock]
    assert lock.lost
    with pytest.raises(LockLostError):
        lock.release()
    assert admin.exists(lock.key) == 0


def test_reentry_of_a_deleted_hold_raises_lock_lost(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "reenter-gone", ttl=10)
    assert lock.acquire()
    admin.delete(lock.key)
    with pytest.raises(LockLostError):
        lock.acquire()
    assert admin.exists(lock.key) == 0  # never re-created
    assert lock.lost
    with pytest.raises(LockLostError):
        lock.release()
    assert lock.acquire(blocking=False)  # after the release the thread may start over
    assert lock.fencing_token == 2
    lock.release()


def test_reentry_after_on_lost_raises_lock_lost(r: redis.Redis, admin: redis.Redis) -> None:
    """Once the watchdog reported the loss, a nested acquire must not quietly start a new
    hold with count 1: the thread still believes it holds the old one (count 1 + 1)."""
    fired = threading.Event()
    lock = RLock(
        r, "reenter-lost", watchdog_lease=3.0, renew_interval=0.3, on_lost=lambda _: fired.set()
    )
    assert lock.acquire()
    admin.delete(lock.key)
    assert fired.wait(3.0)
    with pytest.raises(LockLostError):
        lock.acquire()
    assert admin.exists(lock.key) == 0
    with pytest.raises(LockLostError):
        lock.release()


def test_reentry_after_the_fixed_lease_ran_out_raises_lock_lost(r: redis.Redis) -> None:
    lock = RLock(r, "reenter-expired", ttl=0.3)
    assert lock.acquire()
    time.sleep(0.45)
    assert lock.lost
    with pytest.raises(LockLostError):
        lock.acquire(blocking=False)
    assert not lock.locked()  # no new hold was made behind the thread's back
    with pytest.raises(LockLostError):
        lock.release()
    assert lock.acquire(blocking=False)  # unwound: a new hold
    assert lock.hold_count() == 1
    lock.release()


def test_detach_and_adopt_carry_the_count(r: redis.Redis, admin: redis.Redis) -> None:
    first = RLock(r, "handoff", ttl=10)
    for _ in range(3):
        assert first.acquire()
    fence = first.fencing_token
    token = first.detach()
    assert first.hold_count() == 0
    assert first.token is None
    with pytest.raises(NotOwnedError):
        first.release()
    assert hold_of(admin, first.key, token) == Hold("w", 3, 1, os.getpid())  # untouched

    second = RLock(r, "handoff", ttl=10)

    def adopt_and_release() -> list[int]:
        second.adopt(token)
        counts = [second.hold_count()]
        assert second.fencing_token == fence
        assert second.token == token
        assert second.owned()
        for _ in range(3):
            second.release()
            counts.append(second.hold_count())
        return counts

    assert in_thread(adopt_and_release) == [3, 2, 1, 0]
    assert admin.exists(first.key) == 0
    with pytest.raises(NotOwnedError):
        RLock(r, "handoff", ttl=10).adopt(token)


def test_adopted_watchdog_hold_is_renewed(r: redis.Redis) -> None:
    first = RLock(r, "adopt-wd", watchdog_lease=1.0)
    assert first.acquire()
    assert first.acquire()
    token = first.detach()
    second = RLock(r, "adopt-wd", watchdog_lease=1.0)
    second.adopt(token)
    time.sleep(1.8)
    assert second.owned()
    assert second.hold_count() == 2
    second.release()
    second.release()
    assert not second.locked()


def test_32_threads_on_one_object(r: redis.Redis, admin: redis.Redis) -> None:
    lock = RLock(r, "threads", ttl=30)
    threads_n, cycles = 32, 6
    state = {"n": 0, "inside": 0, "overlaps": 0}
    fences: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_n)

    def worker() -> None:
        try:
            barrier.wait(30)
            for _ in range(cycles):
                with lock, lock:  # re-entered inside
                    state["inside"] += 1
                    if state["inside"] != 1:
                        state["overlaps"] += 1
                    assert lock.hold_count() == 2
                    fence = lock.fencing_token
                    assert fence is not None
                    fences.append(fence)
                    value = state["n"]  # a non-atomic read-modify-write
                    time.sleep(0)
                    state["n"] = value + 1
                    state["inside"] -= 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert state["overlaps"] == 0
    assert state["n"] == threads_n * cycles
    assert fences == list(range(1, threads_n * cycles + 1))  # in order, one per hold
    assert admin.exists(lock.key) == 0


def test_lock_then_rlock_of_the_same_name_is_wrongtype(r: redis.Redis) -> None:
    plain = Lock(r, "shared-name", ttl=10)
    assert plain.acquire()
    start = time.monotonic()
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        RLock(r, "shared-name", ttl=10).acquire(timeout=5)
    assert time.monotonic() - start < 2.0  # an error at once, never "busy" and a wait
    assert plain.owned()
    plain.release()


def test_rlock_then_lock_of_the_same_name_is_wrongtype(r: redis.Redis) -> None:
    rlock = RLock(r, "shared-name", ttl=10)
    assert rlock.acquire()
    plain = Lock(r, "shared-name", ttl=10)
    start = time.monotonic()
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        plain.acquire(timeout=5)
    assert time.monotonic() - start < 2.0
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        plain.acquire(blocking=False)
    assert rlock.owned()
    rlock.release()


def test_context_manager_times_out(r: redis.Redis) -> None:
    holder = RLock(r, "ctx-busy", ttl=10)
    assert holder.acquire()
    waiter = RLock(r, "ctx-busy", ttl=10, timeout=0.2)
    with pytest.raises(AcquireTimeoutError) as err, waiter:
        pytest.fail("must not enter")
    assert err.value.waited >= 0.2
    holder.release()


# ================================================================== AsyncRLock


async def test_async_reentrant_in_one_task_and_counted_in_redis(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    lock = AsyncRLock(ar, "re", ttl=10)
    assert lock.hold_count() == 0
    assert await lock.acquire() is True
    token = lock.token
    assert await lock.acquire() is True
    assert await lock.acquire(blocking=False) is True
    assert lock.hold_count() == 3
    assert lock.token == token
    assert lock.fencing_token == 1
    assert hold_of(admin, lock.key, token) == Hold("w", 3, 1, os.getpid())
    await lock.release()
    assert hold_of(admin, lock.key, token) == Hold("w", 2, 1, os.getpid())
    await lock.release()
    await lock.release()
    assert lock.hold_count() == 0
    assert fence_of(lock) is None
    assert await ar.exists(lock.key) == 0
    async with lock, lock:
        assert lock.hold_count() == 2
        assert lock.fencing_token == 2
    assert await ar.exists(lock.key) == 0


async def test_async_another_task_can_neither_take_nor_release_it(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    lock = AsyncRLock(ar, "owner", ttl=10)
    assert await lock.acquire()
    assert await lock.acquire()
    token = lock.token

    async def intruder() -> dict[str, Any]:
        seen: dict[str, Any] = {
            "try": await lock.acquire(blocking=False),
            "wait": await lock.acquire(timeout=0.2),
            "count": lock.hold_count(),
            "token": lock.token,
            "owned": await lock.owned(),
            "remaining": await lock.remaining(),
            "locked": await lock.locked(),
        }
        for call in (lock.release, lambda: lock.extend(5)):
            try:
                await call()
            except NotOwnedError as exc:
                seen.setdefault("errors", []).append(type(exc))
        return seen

    seen = await asyncio.create_task(intruder())
    assert seen == {
        "try": False,
        "wait": False,
        "count": 0,
        "token": None,
        "owned": False,
        "remaining": None,
        "locked": True,
        "errors": [NotOwnedError, NotOwnedError],
    }
    assert lock.hold_count() == 2
    assert hold_of(admin, lock.key, token) == Hold("w", 2, 1, os.getpid())
    assert await ar.hlen(lock.key) == 1
    await lock.release()
    await lock.release()
    assert await ar.exists(lock.key) == 0


async def test_async_releasing_more_often_than_acquired(ar: redis.asyncio.Redis) -> None:
    lock = AsyncRLock(ar, "over-release", ttl=10)
    with pytest.raises(NotOwnedError):
        await lock.release()
    assert await lock.acquire()
    assert await lock.acquire()
    await lock.release()
    await lock.release()
    with pytest.raises(NotOwnedError) as err:
        await lock.release()
    assert not isinstance(err.value, LockLostError)
    assert await ar.exists(lock.key) == 0


async def test_async_fence_is_issued_once_per_hold(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    lock = AsyncRLock(ar, "fence", ttl=10)
    fences = []
    for _ in range(3):
        assert await lock.acquire()
        first = lock.fencing_token
        for _ in range(3):
            assert await lock.acquire()
            assert lock.fencing_token == first
        fences.append(first)
        for _ in range(4):
            await lock.release()
    assert fences == [1, 2, 3]
    assert admin.get(fence_key(lock.key)) == "3"


async def test_async_release_at_zero_wakes_a_waiting_task_at_once(
    ar: redis.asyncio.Redis,
) -> None:
    lock = AsyncRLock(ar, "wake", ttl=30, recheck_interval=10.0)
    assert await lock.acquire()
    assert await lock.acquire()
    result: dict[str, Any] = {}

    async def waiter() -> None:
        result["ok"] = await lock.acquire(timeout=5)
        result["at"] = time.monotonic()
        result["fence"] = lock.fencing_token
        await lock.release()

    task = asyncio.create_task(waiter())
    await async_wait_for(lambda: ar.exists(lock.key + ":wait"))
    await lock.release()
    await asyncio.sleep(0.3)
    assert "ok" not in result
    released = time.monotonic()
    await lock.release()
    await asyncio.wait_for(task, 10)
    assert result["ok"] is True
    assert result["at"] - released < 0.4
    assert result["fence"] == 2


async def test_async_extend_remaining_owned_locked(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    lock = AsyncRLock(ar, "ext", ttl=5)
    assert not await lock.locked()
    assert not await lock.owned()
    assert await lock.remaining() is None
    assert await lock.acquire()
    remaining = await lock.remaining()
    assert remaining is not None
    assert 4.0 < remaining <= 5.0
    assert 9.0 < await lock.extend(5) <= 10.0
    assert 9000 < admin.pttl(lock.key) <= 10_000
    assert await lock.extend(2, replace=True) == 2.0
    assert await lock.acquire()  # re-entry refreshes the lease
    remaining = await lock.remaining()
    assert remaining is not None
    assert 4.0 < remaining <= 5.0
    assert await lock.locked()
    assert await lock.owned()
    await lock.release()
    await lock.release()
    assert not await lock.locked()
    with pytest.raises(NotOwnedError):
        await lock.extend(1)


async def test_async_watchdog_keeps_it_beyond_its_lease(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    lock = AsyncRLock(ar, "watchdog", watchdog_lease=1.0)
    assert await lock.acquire()
    assert await lock.acquire()
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert await ar.pttl(lock.key) > 0
        await asyncio.sleep(0.1)
    assert await lock.owned()
    assert not lock.lost
    assert lock.statistics().renewals >= 4
    await lock.release()
    await asyncio.sleep(1.3)
    assert await lock.owned()
    await lock.release()
    assert admin.exists(lock.key) == 0


async def test_async_on_lost_gets_the_rlock(ar: redis.asyncio.Redis) -> None:
    fired: list[object] = []
    lock = AsyncRLock(ar, "lost", watchdog_lease=3.0, renew_interval=0.3, on_lost=fired.append)
    assert await lock.acquire()
    assert await lock.acquire()
    await ar.delete(lock.key)
    await async_wait_for(lambda: bool(fired), timeout=3.0)
    assert fired == [lock]
    assert lock.lost
    with pytest.raises(LockLostError):
        await lock.release()


async def test_async_reentry_of_a_deleted_hold_raises_lock_lost(
    ar: redis.asyncio.Redis,
) -> None:
    lock = AsyncRLock(ar, "reenter-gone", ttl=10)
    assert await lock.acquire()
    await ar.delete(lock.key)
    with pytest.raises(LockLostError):
        await lock.acquire()
    assert await ar.exists(lock.key) == 0
    with pytest.raises(LockLostError):
        await lock.release()


async def test_async_reentry_after_on_lost_raises_lock_lost(ar: redis.asyncio.Redis) -> None:
    fired = asyncio.Event()
    lock = AsyncRLock(
        ar, "reenter-lost", watchdog_lease=3.0, renew_interval=0.3, on_lost=lambda _: fired.set()
    )
    assert await lock.acquire()
    await ar.delete(lock.key)
    await asyncio.wait_for(fired.wait(), 3.0)
    with pytest.raises(LockLostError):
        await lock.acquire()
    assert await ar.exists(lock.key) == 0
    with pytest.raises(LockLostError):
        await lock.release()


async def test_async_detach_and_adopt_in_another_task_carry_the_count(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    lock = AsyncRLock(ar, "handoff", ttl=10)
    for _ in range(3):
        assert await lock.acquire()
    fence = lock.fencing_token
    token = lock.detach()
    assert lock.hold_count() == 0
    assert hold_of(admin, lock.key, token) == Hold("w", 3, 1, os.getpid())

    async def adopt_and_release() -> list[int]:
        await lock.adopt(token)  # the same object, another task
        counts = [lock.hold_count()]
        assert lock.fencing_token == fence
        for _ in range(3):
            await lock.release()
            counts.append(lock.hold_count())
        return counts

    assert await asyncio.create_task(adopt_and_release()) == [3, 2, 1, 0]
    assert await ar.exists(lock.key) == 0


async def test_async_cancelled_waiter_leaves_no_hold(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    lock = AsyncRLock(ar, "cancel", ttl=10)
    assert await lock.acquire()
    task = asyncio.create_task(lock.acquire(timeout=30))
    await async_wait_for(lambda: ar.exists(lock.key + ":wait"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert admin.hkeys(lock.key) == [lock.token]
    await lock.release()
    assert await ar.exists(lock.key) == 0


async def test_500_tasks_on_one_object(ar: redis.asyncio.Redis) -> None:
    """With redis-py's default pool (100 connections): waiting tasks share one wake-up
    channel and hold no pooled connection."""
    lock = AsyncRLock(ar, "tasks", ttl=30)
    tasks_n = 500
    state = {"n": 0, "inside": 0, "overlaps": 0}
    fences: list[int] = []

    async def worker() -> None:
        async with lock, lock:
            state["inside"] += 1
            if state["inside"] != 1:
                state["overlaps"] += 1
            assert lock.hold_count() == 2
            fence = lock.fencing_token
            assert fence is not None
            fences.append(fence)
            value = state["n"]  # a non-atomic read-modify-write across an await
            await asyncio.sleep(0)
            state["n"] = value + 1
            state["inside"] -= 1

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(tasks_n))), 110)
    assert state["overlaps"] == 0
    assert state["n"] == tasks_n
    assert fences == list(range(1, tasks_n + 1))
    assert await ar.exists(lock.key) == 0


async def test_async_lock_and_rlock_of_the_same_name_is_wrongtype(
    ar: redis.asyncio.Redis,
) -> None:
    plain = AsyncLock(ar, "shared-name", ttl=10)
    assert await plain.acquire()
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        await AsyncRLock(ar, "shared-name", ttl=10).acquire(timeout=5)
    await plain.release()
    rlock = AsyncRLock(ar, "shared-name", ttl=10)
    assert await rlock.acquire()
    start = time.monotonic()
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        await AsyncLock(ar, "shared-name", ttl=10).acquire(timeout=5)
    assert time.monotonic() - start < 2.0
    await rlock.release()


# ================================================================== bad input, before any I/O


DeadRLock = Dead[RLock | AsyncRLock]


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    yield from closing_dead_clients()


@pytest.fixture(params=["sync", "async"])
def dead(
    request: pytest.FixtureRequest, clients: tuple[redis.Redis, redis.asyncio.Redis]
) -> DeadRLock:
    return dead_pair(request.param, clients, RLock, AsyncRLock)


def test_dead_client_control(dead: DeadRLock) -> None:
    """A valid call does reach the network: so no ConnectionError below means no I/O."""
    lock = dead.make(ttl=5)
    with pytest.raises(redis.exceptions.ConnectionError):
        invoke(lock, "acquire", blocking=False)
    assert lock.hold_count() == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [pytest.param(kw, m, id=i) for i, kw, m in CONSTRUCTOR_CASES],
)
def test_bad_constructor_argument(dead: DeadRLock, kwargs: dict[str, Any], match: str) -> None:
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "job")
    with pytest.raises(LockConfigError, match=match):
        dead.make(name, **kwargs)


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "match"),
    [pytest.param(m, a, kw, msg, id=i) for i, m, a, kw, msg in METHOD_CASES],
)
def test_bad_method_argument(
    dead: DeadRLock, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    lock = dead.make(ttl=10)
    with pytest.raises(LockConfigError, match=match):
        invoke(lock, method, *args, **kwargs)
    assert lock.hold_count() == 0
    assert lock.statistics().acquisitions == 0


def test_client_of_the_other_flavour_is_rejected(dead: DeadRLock) -> None:
    with pytest.raises(LockConfigError, match=dead.cls.__name__):
        dead.cls(dead.other, "job")
    with pytest.raises(LockConfigError, match="needs"):
        dead.cls(object(), "job")  # type: ignore[arg-type]


def test_async_local_state_is_readable_outside_an_event_loop() -> None:
    """repr(), hold_count(), token and statistics() are local and I/O-free: like AsyncLock's,
    they must work where no event loop runs (logging, a debugger, a sync test)."""
    _, async_client = dead_clients()
    lock = AsyncRLock(async_client, "job", ttl=10)
    assert "unlocked" in repr(lock)
    assert lock.hold_count() == 0
    assert lock.token is None
    assert lock.fencing_token is None
    assert not lock.lost
    assert not lock.statistics().held
    asyncio.run(async_client.aclose())
