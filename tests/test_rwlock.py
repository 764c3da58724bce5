# SPDX-License-Identifier: MIT
"""Behaviour of ``ReadWriteLock`` (holds per thread) and ``AsyncReadWriteLock`` (per task) on a
real redis-server: shared reads, exclusive writes, reentrant reads, writer preference, the
write -> read downgrade, the refused read -> write upgrade, each reader's own lease, and
bad input (before any I/O).

Every hold is one field of the hash ``redislock:{<name>}`` (``<mode>|<count>|...``, see
``scripts/_hold.lua``); the tests read it to check what Redis holds.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.exceptions

from redislock import (
    AsyncReadWriteLock,
    Lock,
    LockConfigError,
    LockLostError,
    LockUpgradeError,
    LockUsageError,
    NotOwnedError,
    ReadWriteLock,
    RLock,
)
from redislock._core.codec import decode_hold_value
from redislock.server import RedisProcess
from tests.support import (
    Background,
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


def fields(admin: redis.Redis, key: str) -> dict[str, tuple[str, int]]:
    """The holds in the hash: token -> (mode, count) ."""
    out = {}
    for token, value in admin.hgetall(key).items():
        stored = decode_hold_value(value)
        assert stored is not None
        out[str(token)] = (stored.mode, stored.count)
    return out


# ================================================================== sync


def test_many_readers_at_once_each_with_its_own_field(r: redis.Redis, admin: redis.Redis) -> None:
    rws = [ReadWriteLock(r, "catalog", ttl=10) for _ in range(5)]
    for rw in rws:
        assert rw.read().acquire(blocking=False)
    holds = fields(admin, rws[0].read().key)
    assert holds == {rw.read().token: ("r", 1) for rw in rws}
    assert sorted(rw.read().fencing_token or 0 for rw in rws) == [1, 2, 3, 4, 5]
    assert ReadWriteLock(r, "catalog", ttl=10).write().acquire(blocking=False) is False
    assert rws[0].read().locked()
    for rw in rws:
        rw.read().release()
    assert admin.exists(rws[0].read().key) == 0


def test_threads_of_one_object_read_at_the_same_time(r: redis.Redis, admin: redis.Redis) -> None:
    rw = ReadWriteLock(r, "shared", ttl=10)
    barrier = threading.Barrier(6)

    def reader() -> str | None:
        assert rw.read().acquire(timeout=5)
        token = rw.read().token
        barrier.wait(10)  # all six hold a read lock here, or this times out
        barrier.wait(10)
        rw.read().release()
        return token

    readers = [Background(reader) for _ in range(5)]
    barrier.wait(10)
    assert len(fields(admin, rw.read().key)) == 5
    assert {mode for mode, _ in fields(admin, rw.read().key).values()} == {"r"}
    barrier.wait(10)
    tokens = {reader.join() for reader in readers}
    assert len(tokens) == 5  # one hold, one token per thread
    assert admin.exists(rw.read().key) == 0


def test_a_writer_excludes_readers_and_writers(r: redis.Redis, admin: redis.Redis) -> None:
    writer = ReadWriteLock(r, "excl", ttl=10)
    other = ReadWriteLock(r, "excl", ttl=10)
    assert writer.write().acquire()
    assert fields(admin, writer.write().key) == {writer.write().token: ("w", 1)}
    assert other.read().acquire(blocking=False) is False
    assert other.read().acquire(timeout=0.2) is False
    assert other.write().acquire(blocking=False) is False
    # Another thread of the same object is another owner.
    assert in_thread(lambda: writer.read().acquire(blocking=False)) is False
    assert in_thread(lambda: writer.write().acquire(blocking=False)) is False
    writer.write().release()
    assert other.read().acquire(blocking=False)
    other.read().release()


def test_a_reader_excludes_writers(r: redis.Redis) -> None:
    reader = ReadWriteLock(r, "excl-r", ttl=10)
    other = ReadWriteLock(r, "excl-r", ttl=10)
    assert reader.read().acquire()
    assert other.write().acquire(blocking=False) is False
    assert other.write().acquire(timeout=0.2) is False
    reader.read().release()
    assert other.write().acquire(timeout=5)
    other.write().release()


def test_reads_are_reentrant(r: redis.Redis, admin: redis.Redis) -> None:
    rw = ReadWriteLock(r, "re-read", ttl=10)
    with rw.read(), rw.read(), rw.read():
        assert rw.read().hold_count() == 3
        assert fields(admin, rw.read().key) == {rw.read().token: ("r", 3)}
        assert rw.read().fencing_token == 1
        assert rw.write().hold_count() == 0
    assert admin.exists(rw.read().key) == 0


def test_writes_are_reentrant(r: redis.Redis, admin: redis.Redis) -> None:
    rw = ReadWriteLock(r, "re-write", ttl=10)
    with rw.write(), rw.write():
        assert rw.write().hold_count() == 2
        assert fields(admin, rw.write().key) == {rw.write().token: ("w", 2)}
    assert admin.exists(rw.write().key) == 0


def test_writer_preference(r: redis.Redis, admin: redis.Redis) -> None:
    first = ReadWriteLock(r, "pref", ttl=30)
    writer = ReadWriteLock(r, "pref", ttl=30, recheck_interval=10.0)
    late = ReadWriteLock(r, "pref", ttl=30)
    assert first.read().acquire()

    got_it = threading.Event()
    got_at: list[float] = []
    done = threading.Event()

    def write() -> int | None:
        assert writer.write().acquire(timeout=10)
        got_at.append(time.monotonic())
        got_it.set()
        fence = writer.write().fencing_token
        assert done.wait(10)
        writer.write().release()
        return fence

    waiting = Background(write)
    wait_for(lambda: admin.exists(first.read().key + ":wait") == 1)
    # A writer waits: a NEW reader may not get in, though only readers hold the lock ...
    assert late.read().acquire(blocking=False) is False
    assert late.read().acquire(timeout=0.3) is False
    # ... but a reader that already holds may re-enter (or it could deadlock itself).
    assert first.read().acquire(blocking=False)
    assert first.read().hold_count() == 2
    first.read().release()
    assert not waiting.done
    released = time.monotonic()
    first.read().release()
    assert got_it.wait(5)
    assert got_at[0] - released < 0.5  # woken by the release, not by a 10 s recheck
    assert late.read().acquire(blocking=False) is False  # the writer holds it now
    done.set()
    assert waiting.join() == 2


def test_last_reader_release_wakes_the_writer_at_once(r: redis.Redis) -> None:
    readers = [ReadWriteLock(r, "wake-w", ttl=30) for _ in range(2)]
    writer = ReadWriteLock(r, "wake-w", ttl=30, recheck_interval=10.0)
    for rw in readers:
        assert rw.read().acquire()

    def write() -> bool:
        ok = writer.write().acquire(timeout=8)
        writer.write().release()
        return ok

    waiting = Background(write)
    wait_for(lambda: r.exists(writer.write().key + ":wait") == 1)
    readers[0].read().release()
    time.sleep(0.3)
    assert not waiting.done  # one reader still holds
    released = time.monotonic()
    readers[1].read().release()
    assert waiting.join() is True
    assert waiting.at is not None
    assert waiting.at - released < 0.4


def test_writer_release_lets_all_waiting_readers_in_at_once(r: redis.Redis) -> None:
    writer = ReadWriteLock(r, "wake-r", ttl=30)
    readers = [ReadWriteLock(r, "wake-r", ttl=30, recheck_interval=10.0) for _ in range(3)]
    assert writer.write().acquire()
    barrier = threading.Barrier(4)

    def read(rw: ReadWriteLock) -> bool:
        ok = rw.read().acquire(timeout=8)
        barrier.wait(10)  # all three readers hold at once
        rw.read().release()
        return ok

    waiting = [Background(functools.partial(read, rw)) for rw in readers]
    wait_for(lambda: r.exists(writer.read().key + ":rwait") == 1)
    time.sleep(0.2)  # all three are blocked by now
    released = time.monotonic()
    writer.write().release()
    barrier.wait(10)
    assert all(w.join() is True for w in waiting)
    # Each reader that got in passed the wake-up on to the next one.
    assert max(w.at or 0.0 for w in waiting) - released < 0.6


def test_downgrade_write_to_read(r: redis.Redis, admin: redis.Redis) -> None:
    rw = ReadWriteLock(r, "downgrade", ttl=10)
    other = ReadWriteLock(r, "downgrade", ttl=10)
    assert rw.write().acquire()
    assert rw.read().acquire(blocking=False)  # a writer may also read
    write_token, read_token = rw.write().token, rw.read().token
    assert fields(admin, rw.read().key) == {write_token: ("w", 1), read_token: ("r", 1)}
    assert rw.read().fencing_token == 2
    assert other.read().acquire(blocking=False) is False  # still write-locked
    rw.write().release()
    assert fields(admin, rw.read().key) == {read_token: ("r", 1)}
    assert other.write().acquire(blocking=False) is False  # others' writers stay out
    assert other.read().acquire(blocking=False) is True  # others' readers get in
    other.read().release()
    rw.read().release()
    assert other.write().acquire(blocking=False)
    other.write().release()


def test_upgrade_is_refused_at_once_and_sends_nothing(
    spawn_server: Callable[..., RedisProcess],
) -> None:
    server = spawn_server()
    client = redis.Redis(**server.client_kwargs(), decode_responses=True)
    rw = ReadWriteLock(client, "upgrade", ttl=10)
    assert rw.read().acquire()
    before = client.hgetall(rw.read().key)
    calls_before = _script_calls(client)
    start = time.monotonic()
    with pytest.raises(LockUpgradeError) as err:
        rw.write().acquire()
    with pytest.raises(LockUpgradeError), rw.write():
        pytest.fail("must not enter")
    assert time.monotonic() - start < 0.5
    assert isinstance(err.value, LockUsageError)
    assert _script_calls(client) == calls_before  # no script ran: refused before any I/O
    assert client.hgetall(rw.read().key) == before
    assert client.exists(rw.read().key + ":wait") == 0
    assert rw.write().hold_count() == 0
    assert rw.read().hold_count() == 1
    rw.read().release()
    # The refused call left nothing behind for this thread on the write side.
    assert rw.write()._units == {}
    assert rw.write().acquire(blocking=False)  # after the release the writer may enter
    rw.write().release()
    client.close()


def _script_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{cmd}", {}).get("calls", 0)) for cmd in ("eval", "evalsha", "blpop")
    )


def test_a_crashed_reader_frees_its_share_within_its_lease(
    r: redis.Redis, admin: redis.Redis
) -> None:
    crashed = ReadWriteLock(r, "crash", ttl=0.5)
    assert crashed.read().acquire()
    token = crashed.read().detach()  # forgotten: nobody will release or renew it
    del crashed
    assert fields(admin, "redislock:{crash}") == {token: ("r", 1)}
    writer = ReadWriteLock(r, "crash", ttl=10)
    start = time.monotonic()
    assert writer.write().acquire(timeout=5)
    assert time.monotonic() - start < 0.5 + 1.0
    assert fields(admin, "redislock:{crash}") == {writer.write().token: ("w", 1)}
    writer.write().release()


def test_a_writer_that_waited_does_not_keep_readers_out_after_its_release(
    r: redis.Redis,
) -> None:
    """Writer preference holds "while a writer waits". Once the only waiting writer got the
    lock and released it, nobody holds or waits: a new reader must get in."""
    reader = ReadWriteLock(r, "stale", ttl=10)
    writer = ReadWriteLock(r, "stale", ttl=10, recheck_interval=10.0)
    late = ReadWriteLock(r, "stale", ttl=10)
    assert reader.read().acquire()

    def write() -> bool:
        ok = writer.write().acquire(timeout=5)
        writer.write().release()
        return ok

    waiting = Background(write)
    wait_for(lambda: r.exists(reader.read().key + ":wait") == 1)
    reader.read().release()
    assert waiting.join() is True
    assert r.exists(reader.read().key) == 0  # nobody holds anything
    assert late.read().acquire(timeout=3) is True
    late.read().release()


def test_a_writer_that_gave_up_does_not_keep_readers_out(r: redis.Redis) -> None:
    """A writer that timed out no longer waits: readers may enter beside the current one."""
    reader = ReadWriteLock(r, "gave-up", ttl=10)
    writer = ReadWriteLock(r, "gave-up", ttl=10)
    late = ReadWriteLock(r, "gave-up", ttl=10)
    assert reader.read().acquire()
    assert writer.write().acquire(timeout=0.2) is False
    assert late.read().acquire(blocking=False) is True
    late.read().release()
    reader.read().release()


def test_a_short_waiting_writer_does_not_unregister_a_long_waiting_one(r: redis.Redis) -> None:
    """Each waiting writer is registered until its own entry ends: a writer with a short
    recheck interval that gives up must not end the registration of one that still waits
    (with a 10 s recheck it retries, and re-registers, only every 10 s)."""
    reader = ReadWriteLock(r, "mixed", ttl=30)
    patient = ReadWriteLock(r, "mixed", ttl=30, recheck_interval=10.0)
    hasty = ReadWriteLock(r, "mixed", ttl=30)
    late = ReadWriteLock(r, "mixed", ttl=30)
    assert reader.read().acquire()

    def write() -> bool:
        ok = patient.write().acquire(timeout=20)
        if ok:
            patient.write().release()
        return ok

    waiting = Background(write)
    wait_for(lambda: r.exists(reader.read().key + ":wait") == 1)
    assert hasty.write().acquire(timeout=0.2) is False
    time.sleep(2.0)  # longer than the hasty writer's registration (0.5 + 1 s)
    got_in = late.read().acquire(blocking=False)
    if got_in:
        late.read().release()
    reader.read().release()
    assert waiting.join() is True
    assert got_in is False  # the patient writer was still waiting


def test_on_lost_gets_the_read_side(r: redis.Redis, admin: redis.Redis) -> None:
    fired: list[object] = []
    rw = ReadWriteLock(r, "lost", watchdog_lease=3.0, renew_interval=0.3, on_lost=fired.append)
    other = ReadWriteLock(r, "lost", ttl=10)
    assert rw.read().acquire()
    assert other.read().acquire()
    token = rw.read().token
    assert token is not None
    admin.hdel(rw.read().key, token)  # only this reader's hold disappears
    wait_for(lambda: bool(fired), timeout=3.0)
    assert fired == [rw.read()]
    assert rw.read().lost
    with pytest.raises(LockLostError):
        rw.read().release()
    assert other.read().owned()  # the other reader is untouched
    other.read().release()


def test_watchdog_keeps_a_reader_beyond_its_lease(r: redis.Redis) -> None:
    rw = ReadWriteLock(r, "wd", watchdog_lease=1.0)
    assert rw.read().acquire()
    time.sleep(2.2)
    assert rw.read().owned()
    assert ReadWriteLock(r, "wd", ttl=5).write().acquire(blocking=False) is False
    rw.read().release()


def test_a_hold_is_adopted_only_by_its_own_kind(r: redis.Redis, admin: redis.Redis) -> None:
    rw = ReadWriteLock(r, "adopt", ttl=10)
    assert rw.read().acquire()
    assert rw.read().acquire()
    token = rw.read().detach()
    with pytest.raises(NotOwnedError):
        ReadWriteLock(r, "adopt", ttl=10).write().adopt(token)
    with pytest.raises(NotOwnedError):
        RLock(r, "adopt", ttl=10).adopt(token)
    heir = ReadWriteLock(r, "adopt", ttl=10)
    heir.read().adopt(token)
    assert heir.read().hold_count() == 2
    heir.read().release()
    heir.read().release()
    assert admin.exists(heir.read().key) == 0


def test_a_plain_lock_of_the_same_name_is_wrongtype(r: redis.Redis) -> None:
    plain = Lock(r, "shared-name", ttl=10)
    assert plain.acquire()
    rw = ReadWriteLock(r, "shared-name", ttl=10)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        rw.read().acquire(timeout=5)
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        rw.write().acquire(timeout=5)
    plain.release()


def test_name_and_repr(r: redis.Redis) -> None:
    rw = ReadWriteLock(r, "named", ttl=10)
    assert rw.name == "named"
    assert rw.read() is rw.read()
    assert rw.write() is rw.write()
    assert rw.read().key == rw.write().key == "redislock:{named}"
    assert rw.read().acquire()
    text = repr(rw)
    assert "named" in text
    assert "held" in text
    token = rw.read().token
    assert token is not None
    assert token not in text
    rw.read().release()


# ================================================================== asyncio


async def test_async_many_readers_at_once(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    rw = AsyncReadWriteLock(ar, "catalog", ttl=10)
    barrier = asyncio.Barrier(6)

    async def reader() -> str | None:
        async with rw.read():
            token = rw.read().token
            await asyncio.wait_for(barrier.wait(), 10)  # all six hold a read lock at once
            await asyncio.wait_for(barrier.wait(), 10)
        return token

    tasks = [asyncio.create_task(reader()) for _ in range(5)]
    await asyncio.wait_for(barrier.wait(), 10)
    holds = fields(admin, rw.read().key)
    assert len(holds) == 5
    assert {mode for mode, _ in holds.values()} == {"r"}
    assert await AsyncReadWriteLock(ar, "catalog", ttl=10).write().acquire(blocking=False) is False
    await asyncio.wait_for(barrier.wait(), 10)
    tokens = set(await asyncio.gather(*tasks))
    assert tokens == set(holds)
    assert await ar.exists(rw.read().key) == 0


async def test_async_a_writer_excludes_readers_and_writers(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    rw = AsyncReadWriteLock(ar, "excl", ttl=10)
    assert await rw.write().acquire()
    assert fields(admin, rw.write().key) == {rw.write().token: ("w", 1)}

    async def other_task() -> tuple[bool, bool, bool]:
        return (
            await rw.read().acquire(blocking=False),
            await rw.read().acquire(timeout=0.2),
            await rw.write().acquire(blocking=False),
        )

    assert await asyncio.create_task(other_task()) == (False, False, False)
    await rw.write().release()
    reader = AsyncReadWriteLock(ar, "excl", ttl=10)
    assert await reader.read().acquire(blocking=False)
    assert await rw.write().acquire(blocking=False) is False
    await reader.read().release()


async def test_async_reads_are_reentrant(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    rw = AsyncReadWriteLock(ar, "re-read", ttl=10)
    async with rw.read(), rw.read(), rw.read():
        assert rw.read().hold_count() == 3
        assert fields(admin, rw.read().key) == {rw.read().token: ("r", 3)}
    assert await ar.exists(rw.read().key) == 0


async def test_async_writer_preference(ar: redis.asyncio.Redis) -> None:
    first = AsyncReadWriteLock(ar, "pref", ttl=30)
    writer = AsyncReadWriteLock(ar, "pref", ttl=30, recheck_interval=10.0)
    late = AsyncReadWriteLock(ar, "pref", ttl=30)
    assert await first.read().acquire()
    got: list[float] = []

    done = asyncio.Event()

    async def write() -> int | None:
        assert await writer.write().acquire(timeout=10)
        got.append(time.monotonic())
        fence = writer.write().fencing_token
        await asyncio.wait_for(done.wait(), 10)
        await writer.write().release()
        return fence

    task = asyncio.create_task(write())
    await async_wait_for(lambda: ar.exists(first.read().key + ":wait"))
    assert await late.read().acquire(blocking=False) is False
    assert await late.read().acquire(timeout=0.3) is False
    assert await first.read().acquire(blocking=False)  # re-entry of a holding reader
    await first.read().release()
    assert not got
    released = time.monotonic()
    await first.read().release()
    await async_wait_for(lambda: bool(got))
    assert got[0] - released < 0.5  # woken by the release, not by a 10 s recheck
    assert await late.read().acquire(blocking=False) is False  # the writer holds it now
    done.set()
    assert await asyncio.wait_for(task, 10) == 2


async def test_async_downgrade_write_to_read(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    rw = AsyncReadWriteLock(ar, "downgrade", ttl=10)
    other = AsyncReadWriteLock(ar, "downgrade", ttl=10)
    assert await rw.write().acquire()
    assert await rw.read().acquire(blocking=False)
    read_token = rw.read().token
    assert len(fields(admin, rw.read().key)) == 2
    await rw.write().release()
    assert fields(admin, rw.read().key) == {read_token: ("r", 1)}
    assert await other.write().acquire(blocking=False) is False
    assert await other.read().acquire(blocking=False) is True
    await other.read().release()
    await rw.read().release()
    assert await ar.exists(rw.read().key) == 0


async def test_async_upgrade_is_refused_at_once(
    ar: redis.asyncio.Redis, admin: redis.Redis
) -> None:
    rw = AsyncReadWriteLock(ar, "upgrade", ttl=10)

    async def read_then_upgrade() -> None:
        assert await rw.read().acquire()
        before = admin.hgetall(rw.read().key)
        start = time.monotonic()
        with pytest.raises(LockUpgradeError):
            await rw.write().acquire()
        with pytest.raises(LockUpgradeError):
            async with rw.write():
                pytest.fail("must not enter")
        assert time.monotonic() - start < 0.5
        assert admin.hgetall(rw.read().key) == before
        assert admin.exists(rw.read().key + ":wait") == 0
        await rw.read().release()

    task = asyncio.create_task(read_then_upgrade())
    await task
    ref = weakref.ref(task)
    del task
    for _ in range(3):  # let the loop run the finished task's done-callbacks
        await asyncio.sleep(0)
    gc.collect()
    # The refused call must not keep the finished task (its owner key) alive.
    assert ref() is None
    assert await ar.exists(rw.read().key) == 0


async def test_async_a_cancelled_writer_no_longer_keeps_readers_out(
    ar: redis.asyncio.Redis,
) -> None:
    """A cancelled waiting writer gives up like one that timed out: it no longer waits, so
    new readers may enter beside the current one."""
    reader = AsyncReadWriteLock(ar, "cancelled", ttl=30)
    writer = AsyncReadWriteLock(ar, "cancelled", ttl=30, recheck_interval=10.0)
    late = AsyncReadWriteLock(ar, "cancelled", ttl=30)
    assert await reader.read().acquire()
    task = asyncio.create_task(writer.write().acquire(timeout=20))
    await async_wait_for(lambda: ar.exists(reader.read().key + ":wait"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)  # the cancelled acquire cleans up in the background
    got_in = await late.read().acquire(blocking=False)
    if got_in:
        await late.read().release()
    await reader.read().release()
    assert got_in is True


async def test_async_a_crashed_reader_frees_its_share_within_its_lease(
    ar: redis.asyncio.Redis,
) -> None:
    crashed = AsyncReadWriteLock(ar, "crash", ttl=0.5)
    assert await crashed.read().acquire()
    crashed.read().detach()
    del crashed
    writer = AsyncReadWriteLock(ar, "crash", ttl=10)
    start = time.monotonic()
    assert await writer.write().acquire(timeout=5)
    assert time.monotonic() - start < 0.5 + 1.0
    await writer.write().release()


async def test_async_on_lost_gets_the_write_side(ar: redis.asyncio.Redis) -> None:
    fired: list[object] = []
    rw = AsyncReadWriteLock(
        ar, "lost", watchdog_lease=3.0, renew_interval=0.3, on_lost=fired.append
    )
    assert await rw.write().acquire()
    await ar.delete(rw.write().key)
    await async_wait_for(lambda: bool(fired), timeout=3.0)
    assert fired == [rw.write()]
    with pytest.raises(LockLostError):
        await rw.write().release()


# ================================================================== bad input, before any I/O


DeadRW = Dead[ReadWriteLock | AsyncReadWriteLock]


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    yield from closing_dead_clients()


@pytest.fixture(params=["sync", "async"])
def dead(
    request: pytest.FixtureRequest, clients: tuple[redis.Redis, redis.asyncio.Redis]
) -> DeadRW:
    return dead_pair(request.param, clients, ReadWriteLock, AsyncReadWriteLock)


@pytest.mark.parametrize("side", ["read", "write"])
def test_dead_client_control(dead: DeadRW, side: str) -> None:
    """A valid call does reach the network: so no ConnectionError below means no I/O."""
    lock = getattr(dead.make(ttl=5), side)()
    with pytest.raises(redis.exceptions.ConnectionError):
        invoke(lock, "acquire", blocking=False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [pytest.param(kw, m, id=i) for i, kw, m in CONSTRUCTOR_CASES],
)
def test_bad_constructor_argument(dead: DeadRW, kwargs: dict[str, Any], match: str) -> None:
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "job")
    with pytest.raises(LockConfigError, match=match):
        dead.make(name, **kwargs)


@pytest.mark.parametrize("side", ["read", "write"])
@pytest.mark.parametrize(
    ("method", "args", "kwargs", "match"),
    [pytest.param(m, a, kw, msg, id=i) for i, m, a, kw, msg in METHOD_CASES],
)
def test_bad_method_argument(
    dead: DeadRW,
    side: str,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    match: str,
) -> None:
    lock = getattr(dead.make(ttl=10), side)()
    with pytest.raises(LockConfigError, match=match):
        invoke(lock, method, *args, **kwargs)
    assert lock.statistics().acquisitions == 0


def test_client_of_the_other_flavour_is_rejected(dead: DeadRW) -> None:
    with pytest.raises(LockConfigError, match="needs"):
        dead.cls(dead.other, "job")
    with pytest.raises(LockConfigError, match="needs"):
        dead.cls(object(), "job")  # type: ignore[arg-type]


def test_async_local_state_is_readable_outside_an_event_loop() -> None:
    """repr(), hold_count(), token and statistics() are local and I/O-free: like AsyncLock's,
    they must work where no event loop runs (logging, a debugger, a sync test)."""
    _, async_client = dead_clients()
    rw = AsyncReadWriteLock(async_client, "job", ttl=10)
    assert "unlocked" in repr(rw)
    assert rw.read().hold_count() == 0
    assert rw.write().token is None
    assert rw.read().fencing_token is None
    assert not rw.write().lost
    assert not rw.read().statistics().held
    asyncio.run(async_client.aclose())
