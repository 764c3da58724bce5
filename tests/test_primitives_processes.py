# SPDX-License-Identifier: MIT
"""``ReadWriteLock``, ``Semaphore``, ``FairLock`` and ``RLock`` across real processes.

Worker processes use the "spawn" start method and talk to the suite's own redis-server;
half of them use the sync kind and half its asyncio twin, so both flavours contend for the
same keys. Each worker records its critical sections as intervals of
``time.monotonic_ns()`` (CLOCK_MONOTONIC on Linux: one clock for the whole system, so
timestamps of different processes compare) taken after ``acquire`` returned and before
``release`` was called; every interval is thus inside the real hold, and an oracle in the
test checks the intervals, fencing tokens and a counter kept in Redis. The SIGKILL tests
check that a dead holder's (or waiter's) share comes back when its own lease ends: not
before, and not much later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Callable, Coroutine, Iterable
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Event
from typing import Any, NamedTuple

import pytest
import redis
import redis.asyncio

from redislock import (
    AsyncFairLock,
    AsyncReadWriteLock,
    AsyncRLock,
    AsyncSemaphore,
    FairLock,
    ReadWriteLock,
    RLock,
    Semaphore,
)
from redislock._core.codec import decode_hold_value
from redislock._core.keys import fence_key
from redislock.server import RedisProcess

CTX = multiprocessing.get_context("spawn")
COUNTER = "test:counter"
NS = 1_000_000_000


def lock_key(name: str) -> str:
    return f"redislock:{{{name}}}"


class Hold(NamedTuple):
    """One critical section of one worker (times: ``time.monotonic_ns()``)."""

    pid: int
    kind: str  # "r"/"w" (ReadWriteLock), "p" (permit), "f" (FairLock), "x" (RLock)
    fence: int
    requested: int  # before acquire() was called
    start: int  # after acquire() returned
    end: int  # before release() was called
    seen: int  # COUNTER read first thing in the section
    after: int  # COUNTER read last thing in the section


@dataclasses.dataclass(frozen=True)
class Job:
    """What one contention worker does (pickled to the spawned process)."""

    kwargs: dict[str, Any]
    name: str
    cycles: int
    use_async: bool
    barrier: Barrier
    seed: int
    write_share: float = 0.0  # ReadWriteLock: the share of write sections


LEASE = 5.0  # the workers' watchdog lease: a crashed worker frees its hold soon


def overlaps(a: Hold, b: Hold) -> bool:
    return a.start < b.end and b.start < a.end


def max_concurrency(holds: Iterable[Hold]) -> int:
    """Most intervals open at one instant (sweep line; an end sorts before a start at a tie)."""
    events = sorted(itertools.chain.from_iterable(((h.start, 1), (h.end, -1)) for h in holds))
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert level == 0
    return peak


def text(value: object) -> str:
    assert isinstance(value, str)  # the admin client decodes
    return value


def as_int(value: object) -> int:
    if value is None:
        return 0
    assert isinstance(value, int | bytes | str)
    return int(value)


# --------------------------------------------------------------------------- either flavour
#
# Each contention worker below is written once for both flavours: ``await io(call)`` awaits
# the asyncio twin's coroutine and passes a sync call's result through. Both flavours run
# under ``asyncio.run``; the sync one never awaits anything real, so its calls just block (the
# process runs nothing else).


async def io(value: Any) -> Any:
    """The result of a call of either flavour (a coroutine of the asyncio twin is awaited)."""
    return await value if inspect.isawaitable(value) else value


async def pause(job: Job, seconds: float) -> None:
    """Sleep inside a section as the flavour does: yield to the loop, or block."""
    if job.use_async:
        await asyncio.sleep(seconds)
    else:
        time.sleep(seconds)  # noqa: ASYNC251 -- the sync flavour blocks, as it would anywhere


def connect(job: Job) -> Any:
    """A client of the job's flavour: ``redis.asyncio.Redis`` or ``redis.Redis``."""
    return (redis.asyncio.Redis if job.use_async else redis.Redis)(**job.kwargs)  # defaults


async def disconnect(job: Job, client: Any) -> None:
    await io(client.aclose() if job.use_async else client.close())


Body = Callable[[Job], Coroutine[Any, Any, list[Hold]]]


# --------------------------------------------------------------------------- running workers


def _work(body: Body, job: Job, out: Queue[Any]) -> None:
    """A worker process: run ``body(job)``; report its holds (or its error) on ``out``."""
    try:
        out.put((os.getpid(), asyncio.run(body(job))))
    except BaseException as exc:
        out.put((os.getpid(), repr(exc)))
        raise


def reap(procs: Iterable[BaseProcess], grace: float = 15.0) -> None:
    """Join every process, SIGKILLing those still alive after ``grace`` seconds in all."""
    deadline = time.monotonic() + grace
    for p in procs:
        if p.pid is None:  # never started
            continue
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


def run_workers(body: Body, jobs: list[Job]) -> list[Hold]:
    """Run ``body`` in one process per job; return every hold they recorded (fails on any
    error)."""
    out: Queue[Any] = CTX.Queue()
    procs = [CTX.Process(target=_work, args=(body, job, out)) for job in jobs]
    try:
        for p in procs:
            p.start()
        results = [out.get(timeout=90) for _ in procs]
    finally:
        reap(procs)
        out.close()
        out.join_thread()
    errors = [res for _, res in results if isinstance(res, str)]
    assert errors == []
    assert [p.exitcode for p in procs] == [0] * len(procs)
    assert len({pid for pid, _ in results}) == len(procs)
    holds = [h for _, hs in results for h in hs]
    assert len(holds) == sum(job.cycles for job in jobs)
    return holds


def make_jobs(
    redis_server: RedisProcess, name: str, procs_n: int, cycles: int, **extra: Any
) -> list[Job]:
    """``procs_n`` jobs, alternately sync and asyncio, behind one start barrier."""
    barrier = CTX.Barrier(procs_n)
    kwargs = redis_server.client_kwargs()
    return [
        Job(kwargs, name, cycles, use_async=i % 2 == 1, barrier=barrier, seed=i, **extra)
        for i in range(procs_n)
    ]


def check_mutual_exclusion(holds: list[Hold]) -> None:
    """Exclusive holds: disjoint intervals, fencing tokens 1..n in time order, no lost
    update (each section saw the value the previous one left)."""
    by_time = sorted(holds, key=lambda h: h.start)
    for a, b in itertools.pairwise(by_time):
        assert a.end <= b.start, f"two holders at once: {a} and {b}"
    assert [h.fence for h in by_time] == list(range(1, len(holds) + 1))
    for a, b in itertools.pairwise(by_time):
        assert b.seen == a.after, f"lost update between {a} and {b}"
    # The processes really contended: holds of different processes interleave.
    switches = sum(1 for a, b in itertools.pairwise(by_time) if a.pid != b.pid)
    assert switches >= 2 * len({h.pid for h in holds})


# --------------------------------------------------------------------------- ReadWriteLock


async def _rw(job: Job) -> list[Hold]:
    client = connect(job)
    rw = (AsyncReadWriteLock if job.use_async else ReadWriteLock)(
        client, job.name, watchdog_lease=LEASE
    )
    rng = random.Random(job.seed)
    records: list[Hold] = []
    try:
        job.barrier.wait(60)
        for _ in range(job.cycles):
            kind = "w" if rng.random() < job.write_share else "r"
            side = rw.write() if kind == "w" else rw.read()
            requested = time.monotonic_ns()
            if not await io(side.acquire(timeout=60)):
                raise RuntimeError(f"{kind} acquire timed out")
            start = time.monotonic_ns()
            fence = side.fencing_token
            assert fence is not None
            seen = as_int(await io(client.get(COUNTER)))
            if kind == "w":  # a non-atomic read-modify-write
                await pause(job, rng.uniform(0.0005, 0.002))
                await io(client.set(COUNTER, seen + 1))
            else:
                await pause(job, rng.uniform(0.003, 0.008))
            after = as_int(await io(client.get(COUNTER)))
            end = time.monotonic_ns()
            await io(side.release())
            records.append(Hold(os.getpid(), kind, fence, requested, start, end, seen, after))
    finally:
        await disconnect(job, client)
    return records


@pytest.mark.slow
def test_read_write_lock_across_processes(redis_server: RedisProcess, admin: redis.Redis) -> None:
    """6 processes mix reads and writes: writers exclude everybody, readers share, fencing
    tokens order every writer against every other hold, no write is lost or seen torn."""
    # 4 mostly-reading processes and 2 mostly-writing ones; sync and asyncio alternate.
    jobs = [
        dataclasses.replace(job, write_share=0.05 if job.seed < 4 else 0.3)
        for job in make_jobs(redis_server, "rw", 6, 30)
    ]
    holds = run_workers(_rw, jobs)
    writes = [h for h in holds if h.kind == "w"]
    reads = [h for h in holds if h.kind == "r"]
    assert len(writes) >= 10
    assert len(reads) >= 100

    # A writer overlaps nobody, reader or writer.
    for w in writes:
        others = [h for h in holds if h is not w and overlaps(h, w)]
        assert others == [], f"writer {w} overlaps {others[:3]}"
    # Readers share: some reads of different processes overlap.
    by_start = sorted(reads, key=lambda h: h.start)
    shared = 0
    for i, a in enumerate(by_start):
        for b in by_start[i + 1 :]:
            if b.start >= a.end:
                break
            shared += b.pid != a.pid
    assert shared >= 1, "no two readers of different processes ever held the lock at once"
    assert max_concurrency(reads) >= 2

    # Fencing: one token per hold (readers too); a writer's token orders it against every
    # hold before and after it, so writers' tokens increase in time order.
    fences = sorted(h.fence for h in holds)
    assert fences == list(range(1, len(holds) + 1))
    for w in writes:
        for h in holds:
            if h.end <= w.start:
                assert h.fence < w.fence, f"{h} before {w} has a larger fencing token"
            elif w.end <= h.start:
                assert h.fence > w.fence, f"{h} after {w} has a smaller fencing token"
    writes_by_time = sorted(writes, key=lambda h: h.start)
    assert all(a.fence < b.fence for a, b in itertools.pairwise(writes_by_time))

    # The data: readers saw no write during their section; no write was lost.
    assert [h for h in reads if h.after != h.seen] == []
    assert [(h.seen, h.after) for h in writes_by_time] == [(i, i + 1) for i in range(len(writes))]
    assert as_int(admin.get(COUNTER)) == len(writes)
    assert admin.exists(lock_key("rw")) == 0


def _rw_writer(kwargs: dict[str, Any], name: str, out: Queue[Any]) -> None:
    """Wait for the write lock, hold it briefly, release; report both times."""
    client = redis.Redis(**kwargs)  # redis-py defaults
    try:
        writer = ReadWriteLock(client, name, ttl=10.0).write()
        if not writer.acquire(timeout=30):
            raise RuntimeError("acquire timed out")
        out.put(("granted", time.monotonic_ns()))
        time.sleep(0.05)
        writer.release()
        out.put(("released", time.monotonic_ns()))
    except BaseException as exc:
        out.put((repr(exc), 0))
        raise
    finally:
        client.close()


def test_reader_enters_at_once_after_the_waiting_writer_is_done(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """Writer preference must end with the writer's wait: once the writer that waited has
    held and released the lock, nobody holds it and nobody waits, so a reader enters at
    once (one round trip), not when the writer's wait marker expires."""
    name = "rw:handover"
    key = lock_key(name)
    first = ReadWriteLock(admin, name, ttl=10.0).read()
    assert first.acquire(timeout=5)
    out: Queue[Any] = CTX.Queue()
    proc = CTX.Process(target=_rw_writer, args=(redis_server.client_kwargs(), name, out))
    try:
        proc.start()
        deadline = time.monotonic() + 30
        while not admin.exists(key + ":wait"):  # the writer waits (the hold scripts' waiters key)
            assert proc.is_alive(), "the writer process died"
            assert time.monotonic() < deadline, "the writer never waited"
            time.sleep(0.01)
        first.release()  # wakes the writer
        assert out.get(timeout=30)[0] == "granted"
        what, released = out.get(timeout=30)
        assert what == "released"
        proc.join(30)
        assert proc.exitcode == 0
        assert admin.exists(key) == 0  # free: no hold of any kind
        reader = ReadWriteLock(admin, name, ttl=10.0).read()
        asked = time.monotonic()
        assert reader.acquire(timeout=10)
        took = time.monotonic() - asked
        since_release = time.monotonic_ns() / NS - released / NS
        assert took < 0.5, (
            f"a reader waited {took:.2f} s for a free ReadWriteLock nobody waited for "
            f"({since_release:.2f} s after the writer released it)"
        )
        reader.release()
    finally:
        reap([proc], 0)
        out.close()
        out.join_thread()


# --------------------------------------------------------------------------- Semaphore


async def _sem(job: Job) -> list[Hold]:
    client = connect(job)
    sem = (AsyncSemaphore if job.use_async else Semaphore)(
        client, job.name, permits=3, watchdog_lease=LEASE
    )
    rng = random.Random(job.seed)
    records: list[Hold] = []
    try:
        job.barrier.wait(60)
        for _ in range(job.cycles):
            requested = time.monotonic_ns()
            permit = await io(sem.acquire(timeout=60))
            start = time.monotonic_ns()
            fence = permit.fencing_token
            assert fence is not None
            seen = as_int(await io(client.incr(COUNTER)))  # holders now, this one included
            await pause(job, rng.uniform(0.001, 0.004))
            after = as_int(await io(client.decr(COUNTER))) + 1
            end = time.monotonic_ns()
            await io(permit.release())
            records.append(Hold(os.getpid(), "p", fence, requested, start, end, seen, after))
    finally:
        await disconnect(job, client)
    return records


def test_semaphore_bounds_concurrency_across_processes(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """8 processes x 40 permits of a 3-permit semaphore: never more than 3 at once, and 3."""
    holds = run_workers(_sem, make_jobs(redis_server, "sem", 8, 40))
    assert max_concurrency(holds) <= 3  # never more than 3 permits at once...
    assert max_concurrency(holds) == 3  # ...and the capacity was used
    # The same, counted in Redis by the holders themselves (INCR on entry, DECR on exit).
    assert max(h.seen for h in holds) <= 3
    assert max(h.after for h in holds) <= 3
    assert as_int(admin.get(COUNTER)) == 0
    assert sorted(h.fence for h in holds) == list(range(1, len(holds) + 1))
    assert admin.exists(lock_key("sem")) == 0


# --------------------------------------------------------------------------- FairLock


async def _fair(job: Job) -> list[Hold]:
    client = connect(job)
    lock = (AsyncFairLock if job.use_async else FairLock)(
        client, job.name, watchdog_lease=LEASE, waiter_lease=3.0
    )
    rng = random.Random(job.seed)
    records: list[Hold] = []
    try:
        job.barrier.wait(60)
        for _ in range(job.cycles):
            requested = time.monotonic_ns()
            if not await io(lock.acquire(timeout=60)):
                raise RuntimeError("acquire timed out")
            start = time.monotonic_ns()
            fence = lock.fencing_token
            assert fence is not None
            seen = as_int(await io(client.get(COUNTER)))
            await pause(job, rng.uniform(0.0, 0.001))
            await io(client.set(COUNTER, seen + 1))
            end = time.monotonic_ns()
            await io(lock.release())
            records.append(Hold(os.getpid(), "f", fence, requested, start, end, seen, seen + 1))
    finally:
        await disconnect(job, client)
    return records


@pytest.mark.slow
def test_fair_lock_contention_across_processes(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """8 processes x 60 holds: mutual exclusion, tokens in grant order, bounded FIFO waits."""
    procs_n, cycles = 8, 60
    holds = run_workers(_fair, make_jobs(redis_server, "fair", procs_n, cycles))
    check_mutual_exclusion(holds)
    assert as_int(admin.get(COUNTER)) == procs_n * cycles
    # FIFO bounds every wait: about one hold of each other process.
    waits = [(h.start - h.requested) / NS for h in holds]
    assert max(waits) < 10.0
    # Nobody is overtaken by a request made well after its own (the slack covers the time
    # between reading the clock and the first script, which queues the waiter).
    slack = NS // 2
    overtaken = [
        (a, b)
        for a in holds
        for b in holds
        if b.requested > a.requested + slack and b.start < a.start
    ]
    assert overtaken == []
    assert admin.exists(lock_key("fair")) == 0
    assert admin.llen(lock_key("fair") + ":queue") == 0


def _fair_waiter(kwargs: dict[str, Any], name: str, waiter_lease: float, out: Queue[Any]) -> None:
    """Queue for the fair lock, report (pid, fence, monotonic ns when granted), release."""
    client = redis.Redis(**kwargs)  # redis-py defaults
    try:
        lock = FairLock(client, name, ttl=10.0, waiter_lease=waiter_lease)
        if not lock.acquire(timeout=60):
            raise RuntimeError("acquire timed out")
        granted = time.monotonic_ns()
        assert lock.owned()
        out.put((os.getpid(), lock.fencing_token, granted))
        time.sleep(0.02)
        lock.release()
    except BaseException as exc:
        out.put((os.getpid(), repr(exc), 0))
        raise
    finally:
        client.close()


def wait_for_queue(admin: redis.Redis, queue: str, length: int, proc: BaseProcess) -> None:
    deadline = time.monotonic() + 30
    while admin.llen(queue) != length:
        assert proc.is_alive(), "the waiter process died"
        assert time.monotonic() < deadline, f"{queue} did not reach length {length}"
        time.sleep(0.01)


@pytest.mark.slow
def test_fair_lock_grants_in_arrival_order(redis_server: RedisProcess, admin: redis.Redis) -> None:
    """Waiters queued one by one behind the test's hold get the lock in that order."""
    name, waiters = "fair:order", 5
    queue = lock_key(name) + ":queue"
    mine = FairLock(admin, name, ttl=60.0)
    assert mine.acquire(timeout=5)
    assert mine.fencing_token == 1
    out: Queue[Any] = CTX.Queue()
    procs: list[BaseProcess] = []
    try:
        arrivals: list[str] = []
        for i in range(waiters):
            p = CTX.Process(
                target=_fair_waiter, args=(redis_server.client_kwargs(), name, 3.0, out)
            )
            procs.append(p)
            p.start()
            wait_for_queue(admin, queue, i + 1, p)
            tokens = [text(t) for t in admin.lrange(queue, 0, -1)]
            assert tokens[:-1] == arrivals  # appended at the end; nobody moved
            arrivals = tokens
        assert mine.owned()
        mine.release()
        results = [out.get(timeout=60) for _ in procs]
    finally:
        reap(procs)
        out.close()
        out.join_thread()
    assert [fence for _, fence, _ in results if isinstance(fence, str)] == []
    assert [p.exitcode for p in procs] == [0] * waiters
    by_grant = sorted(results, key=lambda res: res[2])
    # Granted in arrival order, each with the next fencing token.
    assert [pid for pid, _, _ in by_grant] == [p.pid for p in procs]
    assert [fence for _, fence, _ in by_grant] == list(range(2, waiters + 2))
    assert admin.exists(lock_key(name)) == 0
    assert admin.exists(queue) == 0


# --------------------------------------------------------------------------- RLock


async def _rlock(job: Job) -> list[Hold]:
    client = connect(job)
    lock = (AsyncRLock if job.use_async else RLock)(client, job.name, watchdog_lease=LEASE)
    rng = random.Random(job.seed)
    records: list[Hold] = []
    try:
        job.barrier.wait(60)
        for _ in range(job.cycles):
            requested = time.monotonic_ns()
            if not await io(lock.acquire(timeout=60)):
                raise RuntimeError("acquire timed out")
            start = time.monotonic_ns()
            fence = lock.fencing_token
            assert fence is not None
            seen = as_int(await io(client.get(COUNTER)))
            assert await io(lock.acquire(timeout=0))  # re-entry never waits
            if lock.hold_count() != 2 or lock.fencing_token != fence:
                raise RuntimeError(f"re-entry: count {lock.hold_count()}, {lock.fencing_token}")
            await pause(job, rng.uniform(0.0, 0.001))
            await io(client.set(COUNTER, seen + 1))
            await io(lock.release())
            if lock.hold_count() != 1 or not await io(lock.owned()):
                raise RuntimeError("the inner release dropped the hold")
            value = as_int(await io(client.get(COUNTER)))
            await io(client.set(COUNTER, value + 1))
            after = as_int(await io(client.get(COUNTER)))
            end = time.monotonic_ns()
            await io(lock.release())
            records.append(Hold(os.getpid(), "x", fence, requested, start, end, seen, after))
        assert lock.hold_count() == 0
    finally:
        await disconnect(job, client)
    return records


@pytest.mark.slow
def test_rlock_mutual_exclusion_with_reentry_across_processes(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """6 processes x 60 holds, each entered twice: exclusion, one token per hold, exact count."""
    procs_n, cycles = 6, 60
    holds = run_workers(_rlock, make_jobs(redis_server, "rlock", procs_n, cycles))
    check_mutual_exclusion(holds)
    assert all(h.after == h.seen + 2 for h in holds)
    assert as_int(admin.get(COUNTER)) == 2 * procs_n * cycles  # no lost update
    assert as_int(admin.get(fence_key(lock_key("rlock")))) == procs_n * cycles  # not per entry
    assert admin.exists(lock_key("rlock")) == 0


# --------------------------------------------------------------------------- SIGKILL


def _holder(
    kwargs: dict[str, Any], kind: str, name: str, opts: dict[str, Any], ready: Event
) -> None:
    """Take a hold of ``kind`` and sleep until SIGKILLed."""
    client = redis.Redis(**kwargs)  # redis-py defaults
    keep: list[object] = []
    if kind == "read":
        rw = ReadWriteLock(client, name, **opts)
        keep.append(rw)
        ok = rw.read().acquire(timeout=10)
    elif kind == "permit":
        keep.append(Semaphore(client, name, permits=1, **opts).acquire(timeout=10))
        ok = True
    else:
        lock = RLock(client, name, **opts)
        keep.append(lock)
        ok = lock.acquire(timeout=10) and lock.acquire(timeout=10) and lock.hold_count() == 2
    if ok:
        ready.set()
    time.sleep(60)


class HoldField(NamedTuple):
    """One hold in a hold hash (see scripts/_hold.lua)."""

    mode: str
    depth: int  # the hold count
    expires_ms: int
    fence: int
    pid: int


def hold_fields(admin: redis.Redis, key: str) -> dict[str, HoldField]:
    fields: dict[str, HoldField] = {}
    for token, value in admin.hgetall(key).items():
        hold = decode_hold_value(value)
        assert hold is not None, value
        fields[text(token)] = HoldField(
            hold.mode, hold.count, hold.expires_ms, hold.fence, hold.pid
        )
    return fields


def start_holder(
    redis_server: RedisProcess, kind: str, name: str, opts: dict[str, Any]
) -> BaseProcess:
    """Start a holder process; return it once it holds."""
    ready = CTX.Event()
    proc = CTX.Process(target=_holder, args=(redis_server.client_kwargs(), kind, name, opts, ready))
    proc.start()
    try:
        assert ready.wait(30), "the holder did not acquire"
    except BaseException:
        reap([proc], 0)
        raise
    return proc


def kill(proc: BaseProcess) -> float:
    """SIGKILL ``proc``; return the monotonic time of the kill."""
    assert proc.pid is not None
    killed_at = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL
    return killed_at


def the_hold(admin: redis.Redis, name: str, proc: BaseProcess) -> HoldField:
    fields = hold_fields(admin, lock_key(name))
    assert len(fields) == 1
    (hold,) = fields.values()
    assert hold.pid == proc.pid  # the hold names the child
    return hold


def test_killed_reader_frees_the_write_lock_at_its_lease_end(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """A SIGKILLed reader's share is freed by its own lease (ttl): a writer gets in then."""
    name, ttl = "kill:reader", 1.0
    proc = start_holder(redis_server, "read", name, {"ttl": ttl})
    try:
        hold = the_hold(admin, name, proc)
        assert (hold.mode, hold.depth, hold.fence) == ("r", 1, 1)
        pttl = admin.pttl(lock_key(name)) / 1000.0
        assert 0.5 * ttl <= pttl <= ttl
        killed_at = kill(proc)
        writer = ReadWriteLock(admin, name, ttl=5.0).write()
        acquired = writer.acquire(timeout=ttl + 5)
        took = time.monotonic() - killed_at
        assert acquired
        assert took <= ttl + 1.5  # freed by the reader's own lease...
        assert took >= pttl - 0.1  # ...but not before: the dead reader kept its share until then
        assert writer.fencing_token == 2
        assert [h.mode for h in hold_fields(admin, lock_key(name)).values()] == ["w"]
        writer.release()
    finally:
        reap([proc], 0)
    assert admin.exists(lock_key(name)) == 0


def test_killed_permit_holder_frees_the_permit_at_its_lease_end(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """A SIGKILLed holder's permit (permits=1) comes back when its lease ends."""
    name, ttl = "kill:permit", 1.0
    proc = start_holder(redis_server, "permit", name, {"ttl": ttl})
    try:
        hold = the_hold(admin, name, proc)
        assert (hold.mode, hold.depth, hold.fence) == ("p", 1, 1)
        pttl = admin.pttl(lock_key(name)) / 1000.0
        assert 0.5 * ttl <= pttl <= ttl
        sem = Semaphore(admin, name, permits=1, ttl=5.0)
        killed_at = kill(proc)
        assert sem.try_acquire() is None  # the dead holder still has it
        permit = sem.acquire(timeout=ttl + 5)
        took = time.monotonic() - killed_at
        assert took <= ttl + 1.5
        assert took >= pttl - 0.1
        assert permit.fencing_token == 2
        permit.release()
    finally:
        reap([proc], 0)
    assert admin.exists(lock_key(name)) == 0


@pytest.mark.slow
def test_killed_watchdog_rlock_holder_is_not_renewed(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """A re-entered RLock under the watchdog is renewed while its process lives and freed
    one lease after the process is SIGKILLed."""
    name, lease = "kill:rlock", 1.0
    proc = start_holder(redis_server, "rlock", name, {"watchdog_lease": lease})
    try:
        first = the_hold(admin, name, proc)
        assert (first.mode, first.depth, first.fence) == ("w", 2, 1)
        # Held 2 s (> the lease): the watchdog renewed the same hold meanwhile.
        time.sleep(2.0)
        hold = the_hold(admin, name, proc)
        assert (hold.mode, hold.depth, hold.fence) == ("w", 2, 1)
        assert hold.expires_ms > first.expires_ms + 1000
        pttl = admin.pttl(lock_key(name)) / 1000.0
        assert 0 < pttl <= lease
        killed_at = kill(proc)
        lock = RLock(admin, name, ttl=5.0)
        acquired = lock.acquire(timeout=lease + 5)
        took = time.monotonic() - killed_at
        assert acquired
        assert took <= lease + 1.5  # nobody renews it after the kill
        assert took >= pttl - 0.1
        assert lock.fencing_token == 2
        lock.release()
    finally:
        reap([proc], 0)
    assert admin.exists(lock_key(name)) == 0


@pytest.mark.slow
def test_killed_fair_waiter_is_skipped(redis_server: RedisProcess, admin: redis.Redis) -> None:
    """A SIGKILLed waiter stays queued until its waiter lease ends, then is dropped; the
    release after that grants the live waiter behind it (no fencing token is spent on the
    dead one)."""
    name, waiter_lease = "kill:fair", 1.0
    key = lock_key(name)
    queue, leases = key + ":queue", key + ":qleases"
    mine = FairLock(admin, name, ttl=60.0)
    assert mine.acquire(timeout=5)
    out: Queue[Any] = CTX.Queue()
    kwargs = redis_server.client_kwargs()
    dead = CTX.Process(target=_fair_waiter, args=(kwargs, name, waiter_lease, out))
    # A longer waiter lease for the live one: a stall of this process cannot requeue it.
    live = CTX.Process(target=_fair_waiter, args=(kwargs, name, 3.0, out))
    try:
        dead.start()
        wait_for_queue(admin, queue, 1, dead)
        live.start()
        wait_for_queue(admin, queue, 2, live)
        dead_token, live_token = [text(t) for t in admin.lrange(queue, 0, -1)]
        seconds, micros = admin.time()
        now_ms = seconds * 1000 + micros // 1000
        score = admin.zscore(leases, dead_token)
        assert score is not None
        left = (score - now_ms) / 1000.0  # of the dead waiter's lease, at most
        assert 0 < left <= waiter_lease
        killed_at = kill(dead)
        # The dead waiter stays queued until its waiter lease ends, then is dropped.
        while admin.llen(queue) == 2:
            assert time.monotonic() - killed_at < waiter_lease + 1.5, "never dropped"
            time.sleep(0.01)
        dropped = time.monotonic() - killed_at
        assert dropped >= left - 0.1
        assert admin.lrange(queue, 0, -1) == [live_token]
        assert mine.owned()
        mine.release()
        pid, fence, granted = out.get(timeout=30)
        took = granted / NS - killed_at
        assert pid == live.pid
        assert fence == 2  # the dead waiter was never granted
        assert took <= waiter_lease + 1.5
        live.join(30)
        assert live.exitcode == 0
    finally:
        reap([dead, live], 0)
        out.close()
        out.join_thread()
    assert admin.exists(key) == 0
    assert admin.exists(queue) == 0
