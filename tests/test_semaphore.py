# SPDX-License-Identifier: MIT
"""Behaviour of ``Semaphore`` and ``AsyncSemaphore`` on a real redis-server: at most N permits,
``available()``, single tries and timeouts, permit ids and fencing tokens, a crashed holder's
permit coming back with its lease, ``set_permits`` at run time, wake-ups, permits as context
managers, the watchdog, loss, and bad input (before any I/O).

Each permit is one field ``p|1|...`` of the hash ``redislock:{<name>}`` (``scripts/_hold.lua``).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.exceptions

from redislock import (
    AcquireTimeoutError,
    AsyncPermit,
    AsyncSemaphore,
    Lock,
    LockConfigError,
    LockLostError,
    NotOwnedError,
    Permit,
    Semaphore,
    UnexpectedReplyError,
)
from tests.support import (
    Background,
    Dead,
    async_wait_for,
    closing_dead_clients,
    dead_pair,
    invoke,
    wait_for,
)
from tests.test_validation import BAD_EXTENSIONS, CONSTRUCTOR_CASES, METHOD_CASES

# ------------------------------------------------------------------ helpers


def modes(admin: redis.Redis, key: str) -> dict[str, str]:
    """The holds in the hash: token -> "<mode>|<count>"."""
    holds = admin.hgetall(key).items()
    return {str(token): "|".join(str(value).split("|")[:2]) for token, value in holds}


def fence(permit: Permit | AsyncPermit) -> int:
    token = permit.fencing_token
    assert token is not None
    return token


# ================================================================== sync


def test_never_more_than_n_permits(r: redis.Redis, admin: redis.Redis) -> None:
    sem = Semaphore(r, "pool", 3, ttl=30)
    threads_n, cycles = 20, 3
    guard = threading.Lock()
    state = {"in_use": 0, "peak": 0, "over": 0}
    fences: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_n)

    def worker() -> None:
        try:
            barrier.wait(30)
            for _ in range(cycles):
                with sem.acquire(timeout=60) as permit:
                    with guard:
                        state["in_use"] += 1
                        state["peak"] = max(state["peak"], state["in_use"])
                        if state["in_use"] > 3:
                            state["over"] += 1
                        fences.append(fence(permit))
                    time.sleep(0.01)
                    with guard:
                        state["in_use"] -= 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert state["over"] == 0
    assert state["peak"] == 3
    assert sorted(fences) == list(range(1, threads_n * cycles + 1))
    assert sem.available() == 3
    assert admin.exists("redislock:{pool}") == 0


def test_available_try_acquire_and_timeouts(r: redis.Redis) -> None:
    sem = Semaphore(r, "avail", 3, ttl=10)
    assert sem.permits == 3
    assert sem.available() == 3
    assert not sem.locked()
    permits = []
    for left in (2, 1, 0):
        permit = sem.try_acquire()
        assert permit is not None
        permits.append(permit)
        assert sem.available() == left
    assert sem.locked()
    assert sem.try_acquire() is None
    with pytest.raises(AcquireTimeoutError) as single:
        sem.acquire(blocking=False)
    assert isinstance(single.value, TimeoutError)
    start = time.monotonic()
    with pytest.raises(AcquireTimeoutError) as waited:
        sem.acquire(timeout=0.2)
    assert 0.2 <= time.monotonic() - start < 2.0
    assert 0.2 <= waited.value.waited < 2.0
    assert waited.value.name == "avail"
    with pytest.raises(AcquireTimeoutError):
        sem.acquire(timeout=0)
    stats = sem.statistics()
    assert stats.failed_acquisitions == 4
    assert stats.acquisitions == 3
    permits[0].release()
    assert sem.available() == 1
    again = sem.acquire(blocking=False)
    assert sem.available() == 0
    for permit in (again, *permits[1:]):
        permit.release()
    assert sem.available() == 3
    assert not sem.locked()


def test_timeout_error_reports_the_wait_of_that_call(r: redis.Redis) -> None:
    """``AcquireTimeoutError.waited`` is how long THIS call waited, not the semaphore's total."""
    sem = Semaphore(r, "waited", 1, ttl=10)
    held = sem.acquire()
    for _ in range(2):
        with pytest.raises(AcquireTimeoutError):
            sem.acquire(timeout=0.3)
    with pytest.raises(AcquireTimeoutError) as err:
        sem.acquire(blocking=False)
    assert err.value.waited < 0.25
    held.release()


def test_permits_have_distinct_ids_and_increasing_fences(
    r: redis.Redis, admin: redis.Redis
) -> None:
    sem = Semaphore(r, "ids", 3, ttl=10)
    permits = [sem.acquire() for _ in range(3)]
    assert [fence(p) for p in permits] == [1, 2, 3]
    ids = [p.id for p in permits]
    assert len(set(ids)) == 3
    for permit in permits:
        token = permit.token
        assert token is not None
        assert permit.id == hashlib.sha256(token.encode()).hexdigest()[:16]
        assert permit.name == "ids"
        assert permit.key == "redislock:{ids}"
        assert token not in repr(permit)
    assert modes(admin, "redislock:{ids}") == {p.token: "p|1" for p in permits}
    permits[1].release()
    assert permits[1].id == ""
    assert permits[1].fencing_token is None
    with pytest.raises(NotOwnedError):
        permits[1].release()
    newer = sem.acquire()
    assert fence(newer) == 4
    assert newer.id not in ids
    for permit in (permits[0], permits[2], newer):
        permit.release()


def test_a_crashed_holders_permit_comes_back_within_its_ttl(
    r: redis.Redis, admin: redis.Redis
) -> None:
    crashed = Semaphore(r, "crash", 1, ttl=0.5)
    permit = crashed.acquire()
    token = permit.detach()  # forgotten: nobody will release or renew it
    del permit
    assert modes(admin, "redislock:{crash}") == {token: "p|1"}
    other = Semaphore(r, "crash", 1, ttl=10)
    start = time.monotonic()
    again = other.acquire(timeout=5)
    assert time.monotonic() - start < 0.5 + 1.0
    assert modes(admin, "redislock:{crash}") == {again.token: "p|1"}
    again.release()


def test_set_permits_changes_capacity_for_every_object(r: redis.Redis, admin: redis.Redis) -> None:
    a = Semaphore(r, "cap", 2, ttl=10)
    b = Semaphore(r, "cap", 2, ttl=10)
    held = [a.acquire(blocking=False) for _ in range(2)]
    assert b.try_acquire() is None
    a.set_permits(4)
    assert admin.get("redislock:{cap}:permits") == "4"
    assert admin.ttl("redislock:{cap}:permits") == -1  # no TTL
    assert b.available() == 2
    held += [b.acquire(blocking=False) for _ in range(2)]
    assert b.try_acquire() is None
    assert a.available() == 0
    assert a.permits == 2  # the object's own count is unchanged
    a.set_permits(None)
    assert admin.exists("redislock:{cap}:permits") == 0
    assert b.available() == 0  # 4 held, 2 allowed: none free, none revoked
    assert all(p.owned() for p in held)
    for permit in held[:3]:
        permit.release()
    assert a.available() == 1
    b.set_permits(1)  # lower than the number held: new ones wait
    assert a.try_acquire() is None
    held[3].release()
    last = a.try_acquire()
    assert last is not None
    last.release()
    a.set_permits(None)


def test_release_wakes_a_waiter_at_once(r: redis.Redis) -> None:
    holder = Semaphore(r, "wake", 1, ttl=30)
    waiter = Semaphore(r, "wake", 1, ttl=30, recheck_interval=10.0)
    permit = holder.acquire()

    def wait() -> int:
        with waiter.acquire(timeout=8) as got:
            return fence(got)

    waiting = Background(wait)
    wait_for(lambda: r.exists("redislock:{wake}:wait") == 1)
    released = time.monotonic()
    permit.release()
    assert waiting.join() == 2
    assert waiting.at is not None
    assert waiting.at - released < 0.4


def test_several_releases_let_several_waiters_in(r: redis.Redis) -> None:
    sem = Semaphore(r, "burst", 3, ttl=30)
    waiter = Semaphore(r, "burst", 3, ttl=30, recheck_interval=10.0)
    held = [sem.acquire() for _ in range(3)]
    barrier = threading.Barrier(4)

    def wait() -> bool:
        permit = waiter.acquire(timeout=8)
        barrier.wait(10)  # all three waiters hold a permit at once
        permit.release()
        return True

    waiting = [Background(wait) for _ in range(3)]
    wait_for(lambda: r.exists("redislock:{burst}:wait") == 1)
    time.sleep(0.2)  # all three are blocked by now
    released = time.monotonic()
    for permit in held:  # three wake-ups, pushed before anybody pops one
        permit.release()
    barrier.wait(10)
    assert all(w.join() is True for w in waiting)
    assert max(w.at or 0.0 for w in waiting) - released < 1.0


def test_permit_as_context_manager(r: redis.Redis, admin: redis.Redis) -> None:
    sem = Semaphore(r, "ctx", 2, ttl=10)
    with sem.acquire() as permit:
        assert isinstance(permit, Permit)
        assert permit.owned()
        assert sem.available() == 1
    assert permit.fencing_token is None
    assert admin.exists("redislock:{ctx}") == 0

    with pytest.raises(KeyError), sem.acquire():
        raise KeyError("body")
    assert sem.available() == 2  # released although the body raised

    def lose() -> None:
        with sem.acquire() as p:
            assert p.token is not None
            admin.hdel("redislock:{ctx}", p.token)
            raise KeyError("body")

    with pytest.raises(KeyError) as err:
        lose()
    notes = getattr(err.value, "__notes__", [])
    assert any("also failed" in note for note in notes)


def test_permit_extend_remaining_owned(r: redis.Redis, admin: redis.Redis) -> None:
    sem = Semaphore(r, "ext", 2, ttl=5)
    permit = sem.acquire()
    remaining = permit.remaining()
    assert remaining is not None
    assert 4.0 < remaining <= 5.0
    assert 9.0 < permit.extend(5) <= 10.0
    assert 9000 < admin.pttl("redislock:{ext}") <= 10_000
    for bad in BAD_EXTENSIONS:
        with pytest.raises(LockConfigError, match="seconds"):
            permit.extend(bad)
    assert permit.extend(1, replace=True) == 1.0
    assert permit.owned()
    permit.release()
    assert not permit.owned()
    assert permit.remaining() is None
    with pytest.raises(NotOwnedError):
        permit.extend(1)


def test_fixed_lease_permit_that_ran_out_is_lost(r: redis.Redis) -> None:
    sem = Semaphore(r, "expire", 1, ttl=0.3)
    permit = sem.acquire()
    time.sleep(0.45)
    assert permit.lost
    assert sem.available() == 1
    with pytest.raises(LockLostError):
        permit.extend(1)
    with pytest.raises(LockLostError):
        permit.release()


def test_watchdog_permit_survives_beyond_its_lease(r: redis.Redis, admin: redis.Redis) -> None:
    sem = Semaphore(r, "wd", 1, watchdog_lease=1.0)
    permit = sem.acquire()
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert admin.pttl("redislock:{wd}") > 0
        time.sleep(0.1)
    assert permit.owned()
    assert not permit.lost
    assert permit.statistics().renewals >= 4
    assert sem.try_acquire() is None
    permit.release()
    assert sem.available() == 1


def test_on_lost_gets_the_permit(r: redis.Redis, admin: redis.Redis) -> None:
    fired: list[object] = []
    sem = Semaphore(r, "lost", 2, watchdog_lease=3.0, renew_interval=0.3, on_lost=fired.append)
    doomed = sem.acquire()
    healthy = sem.acquire()
    assert doomed.token is not None
    admin.hdel("redislock:{lost}", doomed.token)
    wait_for(lambda: bool(fired), timeout=3.0)
    assert fired == [doomed]
    assert doomed.lost
    assert not healthy.lost
    with pytest.raises(LockLostError):
        doomed.release()
    assert healthy.owned()
    healthy.release()


@pytest.mark.parametrize("value", ["many", "2.5", "0", "-3", ""])
def test_a_permit_count_not_written_by_redislock_is_a_typed_error_naming_its_key(
    r: redis.Redis, value: str
) -> None:
    """A ``:permits`` value that set_permits() cannot have written (not an integer >= 1):
    every call says so, as UnexpectedReplyError naming the key, and changes no hold (a
    release keeps its permit rather than ending it and then failing)."""
    sem = Semaphore(r, "odd-count", 2, ttl=10)
    permit = sem.acquire(blocking=False)
    assert permit is not None
    key = f"{sem.key}:permits"  # the run-time count (set_permits)
    r.set(key, value)
    for call in (sem.available, sem.try_acquire, lambda: sem.acquire(timeout=1), permit.release):
        with pytest.raises(UnexpectedReplyError, match=re.escape(key)) as caught:
            call()
        assert "not written by redislock" in str(caught.value)
    assert permit.owned()  # the failed release ended nothing
    r.delete(key)
    assert sem.available() == 1
    permit.release()
    assert sem.available() == 2


def test_a_plain_lock_of_the_same_name_is_wrongtype(r: redis.Redis) -> None:
    plain = Lock(r, "shared-name", ttl=10)
    assert plain.acquire()
    sem = Semaphore(r, "shared-name", 2, ttl=10)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        sem.acquire(timeout=5)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        sem.try_acquire()
    plain.release()
    permit = sem.acquire()
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        plain.acquire(timeout=5)
    permit.release()


# ================================================================== asyncio


async def test_async_never_more_than_n_permits(ar: redis.asyncio.Redis) -> None:
    sem = AsyncSemaphore(ar, "pool", 3, ttl=30)
    state = {"in_use": 0, "peak": 0, "over": 0}
    fences: list[int] = []

    async def worker() -> None:
        for _ in range(3):
            async with await sem.acquire(timeout=60) as permit:
                state["in_use"] += 1
                state["peak"] = max(state["peak"], state["in_use"])
                if state["in_use"] > 3:
                    state["over"] += 1
                fences.append(fence(permit))
                await asyncio.sleep(0.01)
                state["in_use"] -= 1

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(20))), 110)
    assert state["over"] == 0
    assert state["peak"] == 3
    assert sorted(fences) == list(range(1, 61))
    assert await sem.available() == 3
    assert await ar.exists("redislock:{pool}") == 0


async def test_async_available_try_acquire_and_timeouts(ar: redis.asyncio.Redis) -> None:
    sem = AsyncSemaphore(ar, "avail", 2, ttl=10)
    assert await sem.available() == 2
    first = await sem.try_acquire()
    second = await sem.acquire(blocking=False)
    assert first is not None
    assert isinstance(second, AsyncPermit)
    assert await sem.available() == 0
    assert await sem.try_acquire() is None
    with pytest.raises(AcquireTimeoutError):
        await sem.acquire(blocking=False)
    for _ in range(2):
        with pytest.raises(AcquireTimeoutError) as err:
            await sem.acquire(timeout=0.3)
        assert 0.3 <= err.value.waited < 2.0
    with pytest.raises(AcquireTimeoutError) as single:
        await sem.acquire(blocking=False)
    assert single.value.waited < 0.25  # this call's wait, not the running total
    await first.release()
    assert await sem.available() == 1
    await second.release()
    assert not await sem.locked()


async def test_async_ids_fences_and_context_manager(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    sem = AsyncSemaphore(ar, "ids", 3, ttl=10)
    permits = [await sem.acquire() for _ in range(3)]
    assert [fence(p) for p in permits] == [1, 2, 3]
    assert len({p.id for p in permits}) == 3
    assert modes(admin, "redislock:{ids}") == {p.token: "p|1" for p in permits}
    for permit in permits:
        await permit.release()
    async with await sem.acquire() as permit:
        assert await permit.owned()
        assert fence(permit) == 4
    assert permit.fencing_token is None
    with pytest.raises(NotOwnedError):
        await permit.release()
    assert await ar.exists("redislock:{ids}") == 0


async def test_async_a_crashed_holders_permit_comes_back(ar: redis.asyncio.Redis) -> None:
    crashed = AsyncSemaphore(ar, "crash", 1, ttl=0.5)
    (await crashed.acquire()).detach()
    other = AsyncSemaphore(ar, "crash", 1, ttl=10)
    start = time.monotonic()
    permit = await other.acquire(timeout=5)
    assert time.monotonic() - start < 0.5 + 1.0
    await permit.release()


async def test_async_set_permits(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    a = AsyncSemaphore(ar, "cap", 1, ttl=10)
    b = AsyncSemaphore(ar, "cap", 1, ttl=10)
    held = [await a.acquire()]
    assert await b.try_acquire() is None
    await b.set_permits(3)
    assert admin.get("redislock:{cap}:permits") == "3"
    assert await a.available() == 2
    held += [await a.acquire(blocking=False), await b.acquire(blocking=False)]
    assert await b.try_acquire() is None
    await a.set_permits(None)
    assert admin.exists("redislock:{cap}:permits") == 0
    assert await a.available() == 0
    for permit in held:
        assert await permit.owned()
        await permit.release()
    assert await a.available() == 1


async def test_async_release_wakes_a_waiting_task_at_once(ar: redis.asyncio.Redis) -> None:
    holder = AsyncSemaphore(ar, "wake", 1, ttl=30)
    waiter = AsyncSemaphore(ar, "wake", 1, ttl=30, recheck_interval=10.0)
    permit = await holder.acquire()
    got: list[float] = []

    async def wait() -> None:
        async with await waiter.acquire(timeout=8):
            got.append(time.monotonic())

    task = asyncio.create_task(wait())
    await async_wait_for(lambda: ar.exists("redislock:{wake}:wait"))
    released = time.monotonic()
    await permit.release()
    await asyncio.wait_for(task, 10)
    assert got[0] - released < 0.4


async def test_async_watchdog_permit_survives_beyond_its_lease(ar: redis.asyncio.Redis) -> None:
    sem = AsyncSemaphore(ar, "wd", 1, watchdog_lease=1.0)
    permit = await sem.acquire()
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert await ar.pttl("redislock:{wd}") > 0
        await asyncio.sleep(0.1)
    assert await permit.owned()
    assert permit.statistics().renewals >= 4
    await permit.release()
    assert await sem.available() == 1


async def test_async_on_lost_gets_the_permit(ar: redis.asyncio.Redis) -> None:
    fired: list[object] = []
    sem = AsyncSemaphore(
        ar, "lost", 1, watchdog_lease=3.0, renew_interval=0.3, on_lost=fired.append
    )
    permit = await sem.acquire()
    await ar.delete("redislock:{lost}")
    await async_wait_for(lambda: bool(fired), timeout=3.0)
    assert fired == [permit]
    assert permit.lost
    with pytest.raises(LockLostError):
        await permit.release()


async def test_async_cancelled_waiter_takes_no_permit(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    sem = AsyncSemaphore(ar, "cancel", 1, ttl=10)
    permit = await sem.acquire()
    task = asyncio.create_task(sem.acquire(timeout=30))
    await async_wait_for(lambda: ar.exists("redislock:{cancel}:wait"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert list(modes(admin, "redislock:{cancel}")) == [permit.token]
    await permit.release()
    assert await sem.available() == 1


# ================================================================== bad input, before any I/O


DeadSemaphore = Dead[Semaphore | AsyncSemaphore]


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    yield from closing_dead_clients()


@pytest.fixture(params=["sync", "async"])
def dead(
    request: pytest.FixtureRequest, clients: tuple[redis.Redis, redis.asyncio.Redis]
) -> DeadSemaphore:
    return dead_pair(request.param, clients, Semaphore, AsyncSemaphore, permits=3)


@pytest.mark.parametrize(
    ("method", "args"),
    [("acquire", ()), ("try_acquire", ()), ("available", ()), ("set_permits", (5,))],
)
def test_dead_client_control(dead: DeadSemaphore, method: str, args: tuple[Any, ...]) -> None:
    """A valid call does reach the network: so no ConnectionError below means no I/O."""
    with pytest.raises(redis.exceptions.ConnectionError):
        invoke(dead.make(ttl=5), method, *args)


BAD_PERMITS: list[Any] = [0, -1, True, False, 1.5, "3", None, 10**7, 1_000_001, math.nan]


@pytest.mark.parametrize("permits", BAD_PERMITS, ids=repr)
def test_bad_permits(dead: DeadSemaphore, permits: Any) -> None:
    with pytest.raises(LockConfigError, match="permits"):
        dead.make(permits=permits)


@pytest.mark.parametrize("permits", [1, 1_000_000])
def test_good_permits(dead: DeadSemaphore, permits: int) -> None:
    assert dead.make(permits=permits).permits == permits


@pytest.mark.parametrize("permits", [p for p in BAD_PERMITS if p is not None], ids=repr)
def test_bad_set_permits(dead: DeadSemaphore, permits: Any) -> None:
    with pytest.raises(LockConfigError, match="permits"):
        invoke(dead.make(), "set_permits", permits)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [pytest.param(kw, m, id=i) for i, kw, m in CONSTRUCTOR_CASES],
)
def test_bad_constructor_argument(dead: DeadSemaphore, kwargs: dict[str, Any], match: str) -> None:
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "job")
    with pytest.raises(LockConfigError, match=match):
        dead.make(name, **kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [pytest.param(a, kw, msg, id=i) for i, m, a, kw, msg in METHOD_CASES if m == "acquire"],
)
def test_bad_acquire_argument(
    dead: DeadSemaphore, args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    sem = dead.make(ttl=10)
    with pytest.raises(LockConfigError, match=match):
        invoke(sem, "acquire", *args, **kwargs)
    assert sem.statistics().acquisitions == 0
    assert sem.statistics().failed_acquisitions == 0


def test_client_of_the_other_flavour_is_rejected(dead: DeadSemaphore) -> None:
    with pytest.raises(LockConfigError, match=dead.cls.__name__):
        dead.cls(dead.other, "job", 3)
    with pytest.raises(LockConfigError, match="needs"):
        dead.cls(object(), "job", 3)  # type: ignore[arg-type]


async def test_async_acquire_works_directly_in_async_with(ar: redis.asyncio.Redis) -> None:
    """``async with sem.acquire(timeout=...) as permit:`` releases at the end, as
    ``async with rw.read():`` does; ``await sem.acquire()`` and a task of it still work."""
    sem = AsyncSemaphore(ar, "direct", permits=1, ttl=10)
    async with sem.acquire(timeout=5) as permit:
        assert isinstance(permit, AsyncPermit)
        assert permit.fencing_token is not None
        assert await sem.available() == 0
        with pytest.raises(AcquireTimeoutError):
            async with sem.acquire(timeout=0.1):
                pytest.fail("a second permit was granted")
    assert await sem.available() == 1
    permit = await sem.acquire(blocking=False)
    assert await sem.available() == 0
    await permit.release()
    task = asyncio.create_task(sem.acquire(timeout=5))
    permit = await task
    assert await sem.available() == 0
    await permit.release()
    with pytest.raises(LockConfigError):  # before any I/O
        async with sem.acquire(blocking="yes"):  # type: ignore[arg-type]
            pytest.fail("bad arguments were accepted")


async def test_async_acquire_cancelled_inside_async_with_gives_the_permit_back(
    ar: redis.asyncio.Redis,
) -> None:
    sem = AsyncSemaphore(ar, "cancelled", permits=1, ttl=10)
    holder = await sem.acquire()

    async def wait_for_one() -> None:
        async with sem.acquire(timeout=30):
            pytest.fail("granted while the only permit is held")

    waiter = asyncio.create_task(wait_for_one())
    await asyncio.sleep(0.2)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await holder.release()
    assert await sem.available() == 1
