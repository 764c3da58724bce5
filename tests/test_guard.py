# SPDX-License-Identifier: MIT
"""``guard()``, ``lost_event`` and ``check()``: a critical section that stops in time.

Real servers only: the loss comes from a server that is stopped mid-section, a key an admin
deletes (or FLUSHALL, for every holder kind), or a fixed ``ttl`` that runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import (
    AsyncFairLock,
    AsyncLock,
    AsyncMultiLock,
    AsyncMultiRedlock,
    AsyncReadWriteLock,
    AsyncRedlock,
    AsyncRLock,
    AsyncSemaphore,
    Lock,
    RLock,
)
from redislock.errors import LockConfigError, LockLostError, LockUsageError, NotOwnedError
from redislock.server import RedisProcess

pytestmark = pytest.mark.pythons  # dev.py's STAGES: where else it runs

Spawn = Callable[..., RedisProcess]


def _body_ends(elapsed: float, low: float, high: float) -> None:
    assert low <= elapsed <= high, f"the body ended after {elapsed:.3f} s, not in [{low}, {high}]"


# ---------------------------------------------------------------------- the done-means


async def test_guard_cancels_body_when_server_stops(spawn_server: Spawn) -> None:
    server = spawn_server()
    client = redis.asyncio.Redis(**server.client_kwargs())
    lease = 2.0
    lock = AsyncLock(client, "stopped", watchdog_lease=lease, renew_interval=0.4)
    reached: list[str] = []
    stopped_at = 0.0

    async def stop_soon() -> None:
        nonlocal stopped_at
        await asyncio.sleep(0.5)
        await asyncio.to_thread(server.stop)
        stopped_at = time.monotonic()

    async def section() -> None:
        async with lock.guard() as g:
            assert g.margin == pytest.approx(0.2)  # max(0.1, 2.0 / 10)
            await asyncio.sleep(60)
            reached.append("end of body")

    assert await lock.acquire()
    stopper = asyncio.create_task(stop_soon())
    start = time.monotonic()
    try:
        with pytest.raises(LockLostError) as info:
            await section()
        ended = time.monotonic()
        assert isinstance(info.value.__cause__, asyncio.CancelledError)
        # The watchdog reports the loss once the estimate ran out: the event follows.
        assert await asyncio.to_thread(lock.lost_event.wait, lease + 5.0)
        assert lock.lost
        with pytest.raises(LockLostError):
            lock.check()
    finally:
        await stopper
        await client.aclose()
    assert reached == []
    assert stopped_at > 0
    # Well before the 60 s sleep: the renewals failed, and the guard stopped the body a
    # margin before the local lease estimate (at most one lease after the last renewal).
    _body_ends(ended - start, 0.5, 0.5 + lease + 5.0)
    assert ended - stopped_at < lease


def test_sync_check_stops_loop_when_server_stops(spawn_server: Spawn) -> None:
    server = spawn_server()
    client = redis.Redis(**server.client_kwargs())
    lease = 2.0
    lock = Lock(client, "stopped", watchdog_lease=lease, renew_interval=0.4)
    steps = 0

    def section() -> None:
        nonlocal steps
        with lock.guard() as g:
            server.stop()
            while True:
                g.check()
                steps += 1
                time.sleep(0.02)

    assert lock.acquire()
    event = lock.lost_event
    try:
        start = time.monotonic()
        with pytest.raises(LockLostError):
            section()
        elapsed = time.monotonic() - start
        assert steps > 0
        _body_ends(elapsed, 0.0, lease + 5.0)
        # The watchdog reports the loss once the estimate ran out: the event follows.
        assert event.wait(lease + 5.0)
        assert lock.lost
    finally:
        client.close()


# ---------------------------------------------------------------------- asyncio


async def test_key_deleted_cancels_body_at_once(
    cl: redis.asyncio.Redis, admin_r: redis.Redis
) -> None:
    lock = AsyncLock(cl, "deleted", watchdog_lease=5.0, renew_interval=0.3)
    deleted = 0.0

    async def section() -> None:
        nonlocal deleted
        async with lock.guard():
            await asyncio.sleep(0.1)
            admin_r.delete(lock.key)
            deleted = time.monotonic()
            await asyncio.sleep(60)

    assert await lock.acquire()
    event = lock.lost_event
    assert not event.is_set()
    with pytest.raises(LockLostError) as info:
        await section()
    elapsed = time.monotonic() - deleted
    assert event.is_set()
    assert lock.lost
    assert isinstance(info.value.__cause__, asyncio.CancelledError)
    # The next renewal (every 0.3 s) reports it; the body is cancelled on the next turn.
    _body_ends(elapsed, 0.0, 0.3 + 1.0)
    assert _cancelling() == 0
    with pytest.raises(LockLostError):
        await lock.release()


async def test_fixed_ttl_cancels_body_margin_before_the_ttl(
    cl: redis.asyncio.Redis, admin_r: redis.Redis
) -> None:
    # A margin the event loop cannot overrun on a loaded machine: the body must stop after
    # the lease's end less the margin (exactly, by the lock's own estimate) and before it.
    lock = AsyncLock(cl, "fixed", ttl=3.0)

    async def section() -> None:
        async with lock.guard(margin=0.9):
            await asyncio.sleep(60)

    async with lock:
        h = lock._core.holding
        assert h is not None
        with pytest.raises(LockLostError) as info:
            await section()
        ended = time.monotonic()
        # Redis still has the key: the body stopped before the lease ran out.
        assert admin_r.pttl(lock.key) > 0
        assert "safety margin" in info.value.reason
        assert h.expires_at - 0.9 <= ended < h.expires_at
        assert not lock.lost  # nothing was lost yet: only the margin was reached
        with pytest.raises(LockLostError):
            lock.check(margin=1.0)


async def test_default_margin_of_a_fixed_ttl(cl: redis.asyncio.Redis) -> None:
    lock = AsyncLock(cl, "fixed-default", ttl=4.0)

    async def section() -> None:
        async with lock.guard() as g:
            assert g.margin == pytest.approx(0.4)  # max(0.1, ttl / 10)
            await asyncio.sleep(60)

    assert await lock.acquire()
    h = lock._core.holding
    assert h is not None
    with pytest.raises(LockLostError):
        await section()
    # from the lease's end less the margin (the lock's own estimate), before the end
    assert h.expires_at - 0.4 <= time.monotonic() < h.expires_at
    with contextlib.suppress(LockLostError):  # a slow machine may reach the ttl by now
        await lock.release()


async def test_extend_moves_the_deadline(cl: redis.asyncio.Redis, admin_r: redis.Redis) -> None:
    lock = AsyncLock(cl, "extended", ttl=1.0)
    seen: list[float | None] = []

    async def section() -> None:
        async with lock.guard(margin=0.3) as g:
            seen.append(g.remaining())
            await asyncio.sleep(0.4)
            await lock.extend(1.0)  # about 1.6 s left now
            seen.append(g.remaining())
            await asyncio.sleep(60)

    async with lock:
        start = time.monotonic()
        with pytest.raises(LockLostError):
            await section()
        elapsed = time.monotonic() - start
        # Past the first deadline (0.7 s): the guard re-armed to the extended lease.
        _body_ends(elapsed, 1.4, 2.0)
        assert admin_r.pttl(lock.key) > 0
    first, later = seen
    assert first is not None
    assert first <= 0.7
    assert later is not None
    assert later > first


async def test_renewals_keep_the_body_running(cl: redis.asyncio.Redis) -> None:
    lock = AsyncLock(cl, "renewed", watchdog_lease=0.6, renew_interval=0.15)
    async with lock:
        async with lock.guard() as g:  # margin 0.1 s: 0.5 s to the first deadline
            await asyncio.sleep(1.5)  # renewals push the deadline on
            assert not g.fired
            assert g.check() > 0
        assert g.remaining() is None


async def test_outside_cancellation_stays_a_cancellation(cl: redis.asyncio.Redis) -> None:
    lock = AsyncLock(cl, "outside", watchdog_lease=5.0)
    entered = asyncio.Event()
    guards = []

    async def body() -> None:
        async with lock, lock.guard() as g:
            guards.append(g)
            entered.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(body())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not guards[0].fired
    assert not await lock.locked()  # released on the way out
    assert not lock.lost


async def test_outside_timeout_stays_a_timeout(cl: redis.asyncio.Redis) -> None:
    lock = AsyncLock(cl, "timeout", watchdog_lease=5.0)

    async def section() -> None:
        async with asyncio.timeout(0.2), lock.guard():
            await asyncio.sleep(60)

    async with lock:
        with pytest.raises(TimeoutError):
            await section()
        assert await lock.owned()


async def test_body_that_ends_in_time(cl: redis.asyncio.Redis) -> None:
    lock = AsyncLock(cl, "in-time", ttl=2.0)
    async with lock:
        async with lock.guard() as g:
            await asyncio.sleep(0.05)
            result = "done"
        assert result == "done"
        assert not g.fired
        assert g.remaining() is None
        h = lock._core.holding
        assert h is not None
        assert h.watchers is None  # nothing left behind
        await asyncio.sleep(0.05)  # no cancellation is pending for this task
        assert _cancelling() == 0
    assert not lock.lost


async def test_body_that_swallows_the_cancellation_still_reports(
    cl: redis.asyncio.Redis,
) -> None:
    lock = AsyncLock(cl, "swallow", ttl=0.5)

    async def section() -> None:
        async with lock.guard(margin=0.2):
            with contextlib.suppress(asyncio.CancelledError):  # a body that should not
                await asyncio.sleep(60)

    async with lock:
        with pytest.raises(LockLostError):
            await section()
        assert _cancelling() == 0


async def test_release_inside_the_body_ends_the_watch(cl: redis.asyncio.Redis) -> None:
    lock = AsyncLock(cl, "released", ttl=0.5)
    await lock.acquire()
    async with lock.guard(margin=0.1) as g:
        await lock.release()
        await asyncio.sleep(0.6)  # past the old deadline: nothing fires
    assert not g.fired


async def test_extend_that_finds_the_key_gone_raises_in_the_body(
    cl: redis.asyncio.Redis, admin_r: redis.Redis
) -> None:
    lock = AsyncLock(cl, "extend-gone", ttl=5.0)

    async def section() -> None:
        async with lock.guard():
            admin_r.delete(lock.key)
            await lock.extend(1.0)  # finds the key gone: the body sees it at once

    assert await lock.acquire()
    with pytest.raises(LockLostError) as info:
        await section()
    assert info.value.__cause__ is None  # the extend's own error, not the guard's
    await asyncio.sleep(0.05)  # and no cancellation comes later
    assert _cancelling() == 0
    with pytest.raises(LockLostError):
        await lock.release()


def _cancelling() -> int:
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling()


# ---------------------------------------------------------------------- every holder kind


async def _holder(kind: str, cl: Any, amasters: Any, ttl: float | None) -> tuple[Any, Any]:
    """A held holder of ``kind`` and what releases it."""
    timing: dict[str, Any] = (
        {"ttl": ttl} if ttl is not None else {"watchdog_lease": 5.0, "renew_interval": 0.3}
    )
    if kind == "Lock":
        lock: Any = AsyncLock(cl, "k", **timing)
    elif kind == "FairLock":
        lock = AsyncFairLock(cl, "k", **timing)
    elif kind == "RLock":
        lock = AsyncRLock(cl, "k", **timing)
    elif kind in ("ReadLock", "WriteLock"):
        rw = AsyncReadWriteLock(cl, "k", **timing)
        lock = rw.read() if kind == "ReadLock" else rw.write()
    elif kind == "Permit":
        permit = await AsyncSemaphore(cl, "k", 2, **timing).acquire()
        return permit, permit.release
    elif kind == "MultiLock":
        lock = AsyncMultiLock(cl, ["a", "b"], **timing)
    elif kind == "Redlock":
        lock = AsyncRedlock(amasters, "k", **timing)
    else:
        lock = AsyncMultiRedlock(amasters, ["a", "b"], **timing)
    assert await lock.acquire()
    return lock, lock.release


KINDS = [
    "Lock",
    "FairLock",
    "RLock",
    "ReadLock",
    "WriteLock",
    "Permit",
    "MultiLock",
    "Redlock",
    "MultiRedlock",
]


@pytest.mark.parametrize("kind", KINDS)
async def test_every_kind_loss_cancels_the_body(
    kind: str,
    cl: redis.asyncio.Redis,
    admin_r: redis.Redis,
    amasters: list[redis.asyncio.Redis],
    admins: list[redis.Redis],
) -> None:
    holder, release = await _holder(kind, cl, amasters, None)
    flushed = 0.0

    async def section() -> None:
        nonlocal flushed
        async with holder.guard():
            await asyncio.sleep(0.1)
            for a in [admin_r, *admins]:
                a.flushall()
            flushed = time.monotonic()
            await asyncio.sleep(60)

    try:
        with pytest.raises(LockLostError):
            await section()
        _body_ends(time.monotonic() - flushed, 0.0, 0.3 + 1.5)
        assert holder.lost
        assert holder.lost_event.is_set()
    finally:
        with pytest.raises(LockLostError):
            await release()


@pytest.mark.parametrize("kind", KINDS)
async def test_every_kind_fixed_ttl_stops_before_the_ttl(
    kind: str, cl: redis.asyncio.Redis, amasters: list[redis.asyncio.Redis]
) -> None:
    # A 3 s lease (a Redlock's node timeout is a tenth of it: a loaded machine's first
    # round, connecting to five masters, needs more than 0.1 s) and a margin that the event
    # loop cannot overrun there.
    before = time.monotonic()
    holder, release = await _holder(kind, cl, amasters, 3.0)
    start = time.monotonic()

    async def section() -> None:
        async with holder.guard(margin=0.9):
            await asyncio.sleep(60)

    with pytest.raises(LockLostError):
        await section()
    ended = time.monotonic()
    # The margin before the local lease estimate, which starts when the acquire was sent
    # (Redlock's also leaves the clock drift: a hundredth of the lease and 2 ms).
    assert ended - before >= 3.0 - 0.9 - (0.03 + 0.002)
    assert ended - start < 3.0  # before the lease ran out
    await release()  # still held in Redis: the body stopped in time


async def test_rlock_guard_is_the_calling_tasks_hold(cl: redis.asyncio.Redis) -> None:
    lock = AsyncRLock(cl, "per-task", ttl=5.0)

    async def other() -> None:
        with pytest.raises(NotOwnedError):
            await lock.guard().__aenter__()

    async with lock, lock, lock.guard():
        await asyncio.create_task(other())
        assert lock.check() > 0


# ---------------------------------------------------------------------- sync


def test_sync_lost_event_and_check_after_key_deleted(sr: redis.Redis, admin_r: redis.Redis) -> None:
    lock = Lock(sr, "sync-deleted", watchdog_lease=5.0, renew_interval=0.2)
    assert lock.acquire()
    event = lock.lost_event
    assert event is lock.lost_event  # one event per hold
    assert not event.is_set()
    assert 0 < lock.check() <= 5.0
    caught: list[BaseException] = []

    def section() -> None:
        with lock.guard() as g:
            admin_r.delete(lock.key)
            assert event.wait(0.2 + 1.5)  # set by the next renewal
            for check in (lock.check, g.check):
                try:
                    check()
                except LockLostError as exc:
                    caught.append(exc)
            # the body ends normally: the guard reports the section outlived the hold

    with pytest.raises(LockLostError):
        section()
    assert len(caught) == 2
    assert lock.lost
    with pytest.raises(LockLostError):
        lock.release()
    # A new hold has a new, clear event; the old one stays set.
    assert lock.acquire()
    try:
        assert not lock.lost_event.is_set()
        assert event.is_set()
    finally:
        lock.release()


def test_sync_lost_event_from_another_thread(sr: redis.Redis, admin_r: redis.Redis) -> None:
    lock = Lock(sr, "sync-worker", watchdog_lease=5.0, renew_interval=0.2)
    stopped: list[float] = []

    def worker(event: threading.Event) -> None:
        while not event.wait(0.01):
            pass
        stopped.append(time.monotonic())

    assert lock.acquire()
    thread = threading.Thread(target=worker, args=(lock.lost_event,))
    thread.start()
    admin_r.delete(lock.key)
    deleted = time.monotonic()
    thread.join(5.0)
    assert not thread.is_alive()
    with pytest.raises(LockLostError):
        lock.release()
    assert stopped
    assert stopped[0] - deleted < 0.2 + 1.5


def test_sync_guard_body_in_time_and_overrun(sr: redis.Redis) -> None:
    lock = Lock(sr, "sync-ttl", ttl=1.0)
    with lock:
        with lock.guard(margin=0.6) as g:
            assert g.check() > 0
            remaining = g.remaining()
            assert remaining is not None
            assert remaining <= 0.4
        assert g.remaining() is None
        with pytest.raises(LockLostError):
            overrun(lock, None)
        assert not lock.lost
    # The body's own exception passes unchanged, even after the deadline.
    with lock, pytest.raises(KeyError):
        overrun(lock, KeyError("body"))


def overrun(lock: Lock, error: Exception | None) -> None:
    """A body that runs past its guard's deadline (the lease itself still runs)."""
    with lock.guard(margin=0.6) as g:
        time.sleep(0.45)
        try:
            g.check()
        except LockLostError:
            pass
        else:
            pytest.fail("check() passed after the deadline")
        if error is not None:
            raise error


def test_sync_rlock_lost_event_is_per_thread(sr: redis.Redis) -> None:
    lock = RLock(sr, "sync-rlock", ttl=5.0)
    seen: list[BaseException] = []

    def other() -> None:
        try:
            lock.lost_event  # noqa: B018
        except NotOwnedError as exc:
            seen.append(exc)

    with lock:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(5.0)
        assert not lock.lost_event.is_set()
    assert len(seen) == 1


# ---------------------------------------------------------------------- bad input, no I/O


def _dead_sync() -> redis.Redis:
    return redis.Redis(unix_socket_path="/nonexistent/redislock-guard.sock")


def _dead_async() -> redis.asyncio.Redis:
    return redis.asyncio.Redis(unix_socket_path="/nonexistent/redislock-guard.sock")


@pytest.mark.parametrize("margin", [0, -1, math.nan, math.inf, "1", True, 0.0001])
def test_bad_margin_before_any_io(margin: Any) -> None:
    # A client whose server does not exist: any I/O would raise ConnectionError.
    lock = Lock(_dead_sync(), "bad")
    alock = AsyncLock(_dead_async(), "bad")
    with pytest.raises(LockConfigError):
        lock.guard(margin=margin)
    with pytest.raises(LockConfigError):
        alock.guard(margin=margin)
    with pytest.raises(LockConfigError):
        lock.check(margin=margin)


def test_not_held_before_any_io() -> None:
    lock = Lock(_dead_sync(), "not-held")
    with pytest.raises(NotOwnedError):
        lock.guard().__enter__()
    with pytest.raises(NotOwnedError):
        lock.check()
    with pytest.raises(NotOwnedError):
        lock.lost_event  # noqa: B018
    guard = lock.guard()
    with pytest.raises(LockUsageError):
        guard.check()
    with pytest.raises(LockUsageError):
        guard.lost_event  # noqa: B018


async def test_async_not_held_before_any_io() -> None:
    lock = AsyncLock(_dead_async(), "not-held")
    with pytest.raises(NotOwnedError):
        await lock.guard().__aenter__()
    with pytest.raises(NotOwnedError):
        lock.check()
    with pytest.raises(NotOwnedError):
        lock.lost_event  # noqa: B018


async def test_guard_entered_once_and_too_late(cl: redis.asyncio.Redis) -> None:
    lock = AsyncLock(cl, "once", ttl=2.0)
    async with lock:
        g = lock.guard(margin=0.1)
        async with g:
            pass
        with pytest.raises(LockUsageError):
            await g.__aenter__()
        await asyncio.sleep(0.15)
        # Less than the margin left: refused on entry, the body never runs.
        with pytest.raises(LockLostError):
            await lock.guard(margin=1.9).__aenter__()
