# SPDX-License-Identifier: MIT
"""Lock's hand-off under contention, on a real server: waiters queue (fair.lua, the queue
FairLock uses) and a release grants the lock to the first live waiter directly.

No double grant (a counter read and written inside the critical section, and fencing tokens
that follow the order of the holds), no starvation (nobody is served twice while another
waits), a dead queued waiter skipped once its waiter lease ends, a holder whose lease runs
out handing on to the queue, and a cancelled asyncio waiter leaving the queue."""

from __future__ import annotations

import asyncio
import functools
import itertools
import multiprocessing
import threading
import time
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import AsyncLock, Lock
from redislock._core.fair import NO_QUEUE_LIMIT
from redislock._core.keys import FairKeys
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from tests.support import async_wait_for, wait_for

CTX = multiprocessing.get_context("spawn")
NAME = "handoff"
F = FairKeys.for_name(NAME)
COUNTER = "handoff:counter"

# One hold: monotonic ns when the acquire began and when it returned, the worker, the
# fencing token, the counter read inside the critical section.
Hold = tuple[int, int, int, int, int]


def contend(kwargs: dict[str, Any], worker: int, cycles: int, start: Any) -> list[Hold]:
    """``cycles`` acquisitions of one Lock; inside each, read the counter, hold ~1 ms, write
    it back plus one (a second holder at the same time would lose an increment)."""
    client = redis.Redis(**kwargs)
    lock = Lock(client, NAME, ttl=10)
    holds: list[Hold] = []
    try:
        start.wait(60)
        for _ in range(cycles):
            t_req = time.monotonic_ns()
            assert lock.acquire(timeout=60)
            t_got = time.monotonic_ns()
            seen = int(client.get(COUNTER) or 0)
            time.sleep(0.001)
            client.set(COUNTER, seen + 1)
            fence = lock.fencing_token
            assert fence is not None
            lock.release()
            holds.append((t_req, t_got, worker, fence, seen))
    finally:
        client.close()
    return holds


def contend_in_process(
    kwargs: dict[str, Any], worker: int, cycles: int, start: Any, out: Any
) -> None:
    out.put(contend(kwargs, worker, cycles, start))


def check_holds(holds: list[Hold], workers: int, cycles: int) -> None:
    assert len(holds) == workers * cycles
    by_fence = sorted(holds, key=lambda h: h[3])
    # Exclusion: the k-th hold (by fencing token) read k-1 from the counter, so every hold
    # saw every earlier one's write; fencing tokens are consecutive, so strictly
    # increasing in the order of the holds.
    first = by_fence[0][3]
    assert [h[3] for h in by_fence] == list(range(first, first + len(holds)))
    assert [h[4] for h in by_fence] == list(range(len(holds)))
    assert [h[1] for h in by_fence] == sorted(h[1] for h in holds)
    # No barging: nobody holds twice in a row while another worker has been waiting since
    # well before the first of the two (its try is in the queue ahead of the releaser's
    # next one; the margin covers a try sent late on a loaded machine). A lock that lets
    # the releaser take it straight back does this all the time.
    margin = 50_000_000  # ns
    for prev, nxt in itertools.pairwise(by_fence):
        if prev[2] != nxt[2]:
            continue
        skipped = [h for h in holds if h[2] != prev[2] and h[0] < prev[1] - margin < nxt[1] < h[1]]
        assert not skipped, (prev, nxt, skipped[:3])
    waits = [(h[1] - h[0]) / 1e9 for h in holds]
    assert max(waits) < 2.0, max(waits)  # every waiter served in bounded time


def test_threads_take_turns_without_double_grant(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    workers, cycles = 6, 25
    start = threading.Event()
    results: list[list[Hold]] = [[] for _ in range(workers)]

    def run(i: int) -> None:
        results[i] = contend(redis_server.client_kwargs(), i, cycles, start)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    start.set()
    for t in threads:
        t.join(120)
    check_holds([h for r in results for h in r], workers, cycles)
    assert admin.get(COUNTER) == str(workers * cycles)  # the admin client decodes
    assert admin.exists(F.queue, F.leases, F.info) == 0  # the queue leaves nothing behind


def test_processes_take_turns_without_double_grant(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    workers, cycles = 4, 30
    start = CTX.Event()
    out = CTX.Queue()
    procs = [
        CTX.Process(
            target=contend_in_process,
            args=(redis_server.client_kwargs(), i, cycles, start, out),
        )
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        start.set()
        holds = [h for _ in procs for h in out.get(timeout=120)]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0] * workers
    check_holds(holds, workers, cycles)
    assert admin.get(COUNTER) == str(workers * cycles)  # the admin client decodes


def queue_dead_waiter(client: redis.Redis, token: str, waiter_ms: int = 1000) -> None:
    """A waiter that queues (as a Lock's first try does) and then never renews nor listens."""
    script = SCRIPTS["fair_acquire"]
    keys = (F.lock, F.fence, F.queue, F.leases, F.info)
    args = (token, 10000, "dead-host|1|0", waiter_ms, NO_QUEUE_LIMIT)
    reply = client.eval(script.source, len(keys), *keys, *args)
    assert reply[0] in (b"busy", "busy")


def start_waiter(waiter: Lock) -> tuple[threading.Thread, list[float]]:
    """A thread that takes ``waiter`` (30 s at most); the list gets the time it had it."""
    got: list[float] = []

    def take() -> None:
        assert waiter.acquire(timeout=30)
        got.append(time.monotonic())

    thread = threading.Thread(target=take)
    thread.start()
    return thread, got


def test_a_dead_queued_waiter_is_skipped_after_its_waiter_lease(r: redis.Redis) -> None:
    holder = Lock(r, NAME, ttl=10)
    assert holder.acquire(blocking=False)
    fence = holder.fencing_token
    assert fence is not None
    dead = "d" * 32
    queue_dead_waiter(r, dead)
    # its own re-check only every 20 s: taking the lock well before that is the grant's doing
    waiter = Lock(r, NAME, ttl=10, recheck_interval=20.0)
    thread, got = start_waiter(waiter)
    try:
        wait_for(lambda: r.llen(F.queue) == 2)  # behind the dead one
        time.sleep(1.2)  # the dead waiter's lease (1 s) ends; the live one renews its own
        released = time.monotonic()
        holder.release()
        thread.join(30)
        assert got
        assert got[0] - released < 5.0  # served by the release's grant, not by a re-check
        assert waiter.owned()
        assert r.zscore(F.leases, dead) is None
        assert waiter.fencing_token == fence + 1
    finally:
        thread.join(10)
        if waiter.locked():
            waiter.release()


def test_a_holder_whose_lease_ends_hands_on_to_the_queue(r: redis.Redis) -> None:
    holder = Lock(r, NAME, ttl=0.6)
    assert holder.acquire(blocking=False)  # and never released: its holder "died"
    fence = holder.fencing_token
    assert fence is not None
    waiters = [Lock(r, NAME, ttl=10) for _ in range(2)]
    order: list[int] = []

    def take(i: int) -> None:
        assert waiters[i].acquire(timeout=30)
        order.append(i)
        time.sleep(0.05)
        waiters[i].release()

    threads = []
    for i in range(2):
        threads.append(threading.Thread(target=take, args=(i,)))
        threads[-1].start()
        wait_for(lambda: r.llen(F.queue) == len(threads))  # in this order
    started = time.monotonic()
    for t in threads:
        t.join(30)
    assert order == [0, 1]  # in arrival order
    assert time.monotonic() - started < 0.6 + 1.0  # when the lease ran out, not later
    assert r.get(F.fence) in (str(fence + 2), str(fence + 2).encode())
    assert holder.locked() is False


async def test_a_cancelled_waiter_leaves_the_queue(ar: redis.asyncio.Redis) -> None:
    holder = AsyncLock(ar, NAME, ttl=10)
    assert await holder.acquire(blocking=False)
    waiter = AsyncLock(ar, NAME, ttl=10)
    task = asyncio.ensure_future(waiter.acquire(timeout=30))

    async def queued() -> bool:
        return int(await ar.llen(F.queue)) == 1

    await async_wait_for(queued)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await async_wait_for(lambda: _no_queue(ar))
    await holder.release()
    assert not await holder.locked()  # nobody was granted it: the waiter left
    assert await waiter.acquire(blocking=False)  # and the same object can take it again
    await waiter.release()


def _queued_now(client: redis.Redis, n: int) -> bool:
    return int(client.llen(F.queue)) >= n


async def _queued(ar: redis.asyncio.Redis, n: int) -> bool:
    return int(await ar.llen(F.queue)) >= n


async def _no_queue(ar: redis.asyncio.Redis) -> bool:
    return int(await ar.exists(F.queue, F.leases, F.info)) == 0


# ------------------------------------------------------------------ waiter leases kept in bulk


def _evalsha_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0)) + int(
        stats.get("cmdstat_eval", {}).get("calls", 0)
    )


@pytest.mark.parametrize("flavour", ["threads", "asyncio"])
def test_queued_waiters_are_kept_alive_in_bulk_not_by_a_try_each(
    redis_server: RedisProcess, admin: redis.Redis, flavour: str
) -> None:
    """100 waiters queued behind a holder, each with the default 1 s waiter lease: their
    process renews all their leases in one waiter_keep call every third of it, instead of
    each waiter trying fair.lua's acquire again (300 scripts a second before). Every lease
    stays alive, and after the release every waiter is served in arrival order."""
    n = 100
    client = redis.Redis(**redis_server.client_kwargs())  # redis-py's defaults
    holder = Lock(client, NAME, ttl=30)
    assert holder.acquire(blocking=False)
    order: list[int] = []
    done = threading.Event()
    box: dict[str, BaseException] = {}

    if flavour == "threads":

        def take(i: int) -> None:
            lock = Lock(client, NAME, ttl=10)
            assert lock.acquire(timeout=60)
            order.append(i)
            lock.release()

        threads = [threading.Thread(target=take, args=(i,)) for i in range(n)]
        for i, t in enumerate(threads):
            t.start()
            wait_for(functools.partial(_queued_now, admin, i + 1))  # queued in this order

        def finish() -> None:
            for t in threads:
                t.join(60)
            done.set()

    else:
        loop_ready = threading.Event()

        async def main() -> None:
            aclient = redis.asyncio.Redis(**redis_server.client_kwargs())
            locks = [AsyncLock(aclient, NAME, ttl=10) for _ in range(n)]

            async def take(i: int) -> None:
                assert await locks[i].acquire(timeout=60)
                order.append(i)
                await locks[i].release()

            tasks = []
            for i in range(n):
                tasks.append(asyncio.ensure_future(take(i)))
                await async_wait_for(functools.partial(_queued, aclient, i + 1))  # in order
            loop_ready.set()
            try:
                await asyncio.gather(*tasks)
            finally:
                await aclient.aclose()

        def finish_loop() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:  # reported below
                box["error"] = exc
            done.set()

        runner = threading.Thread(target=finish_loop)
        runner.start()
        assert loop_ready.wait(60)

        def finish() -> None:
            runner.join(60)

    admin.config_resetstat()
    for _ in range(4):  # 2 s: six waiter-lease renewals of every waiter
        time.sleep(0.5)
        now_ms = int(admin.time()[0]) * 1000 + int(admin.time()[1]) // 1000
        assert admin.zcount(F.leases, "-inf", now_ms) == 0  # no lease ran out
        assert admin.llen(F.queue) == n
    calls = _evalsha_calls(admin)
    # A try each every third of the waiter lease would be 600 calls; the keep is about 6
    # (a few more when a call starts just before a waiter's due time).
    assert calls <= 20, calls
    holder.release()
    finish()
    assert done.wait(60)
    if flavour == "threads":
        assert order == list(range(n))  # in arrival order
    else:
        assert "error" not in box, box
        assert order == list(range(n))
    assert admin.exists(F.queue, F.leases, F.info) == 0
    client.close()


def test_a_grant_whose_message_was_lost_is_found_by_the_keep(
    r: redis.Redis, admin: redis.Redis
) -> None:
    """A waiter granted the lock without its message (as if the pub/sub message were lost)
    finds it at its keep's next look (every third of its waiter lease), not at its own
    next try seconds later; its lease estimate never outlives the key."""
    holder = Lock(r, NAME, ttl=30)
    assert holder.acquire(blocking=False)
    waiter = Lock(r, NAME, ttl=10)
    thread, got = start_waiter(waiter)
    try:
        wait_for(lambda: admin.llen(F.queue) == 1)
        time.sleep(0.5)  # its first Wait may return at once (a new subscription): let it settle
        token = str(admin.lindex(F.queue, 0))
        fence = int(admin.incr(F.fence))
        # fair_release.lua's grant, without its PUBLISH
        admin.set(F.lock, f"{token}|{fence}|other-host|1|0", px=10_000)
        granted = time.monotonic()  # the grant was written before this
        admin.lrem(F.queue, 1, token)
        admin.zrem(F.leases, token)
        admin.hdel(F.info, token)
        thread.join(10)
        assert got
        assert got[0] - granted < 1.0  # the keep's next look (1/3 s), not a try 15-30 s on
        assert waiter.fencing_token == fence
        assert waiter.owned()
        h = waiter._core.holding
        assert h is not None
        # The estimate never outlives the key: the grant's 10 s run from the SET above.
        assert h.expires_at <= granted + 10.0
        assert h.expires_at > granted + 9.0
    finally:
        thread.join(10)
        if waiter.locked():
            waiter.release()


def test_a_lock_deleted_without_a_grant_goes_to_the_head_of_the_queue(
    r: redis.Redis, admin: redis.Redis
) -> None:
    """The lock key vanishes with nobody granted (an operator's DEL, an eviction): the keep
    tells the first waiter, which takes it; the second stays queued behind it."""
    holder = Lock(r, NAME, ttl=30)
    assert holder.acquire(blocking=False)
    waiters = [Lock(r, NAME, ttl=10) for _ in range(2)]
    events = [threading.Event() for _ in range(2)]
    release = threading.Event()

    def take(i: int) -> None:
        assert waiters[i].acquire(timeout=30)
        events[i].set()
        release.wait(30)
        waiters[i].release()

    threads = []
    for i in range(2):
        threads.append(threading.Thread(target=take, args=(i,)))
        threads[-1].start()
        wait_for(lambda: admin.llen(F.queue) == len(threads))
    deleted = time.monotonic()
    admin.delete(F.lock)
    try:
        assert events[0].wait(5)
        assert time.monotonic() - deleted < 1.0  # the keep's next look, not the 30 s TTL
        assert not events[1].is_set()
        assert admin.llen(F.queue) == 1
    finally:
        release.set()
        for t in threads:
            t.join(30)
    assert events[1].is_set()
