# SPDX-License-Identifier: MIT
"""``Barrier`` and ``AsyncBarrier`` on real redis-servers: parties enter and leave together,
rounds and their generations, timeouts (an enter that times out leaves), a party arriving at
an open round, the watchdog keeping a party in, a lost membership, a party killed with
SIGKILL leaving within its lease, lost wake-ups (never published; the wake-up connection
killed), several processes of both flavours, the keys' TTLs and nothing left after use, bad
input before any I/O.

Both flavours run from one async test body (``tests.test_latch.Side``: a sync call runs in
a thread of its own).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster
import redis.exceptions

from redislock import (
    AcquireTimeoutError,
    AsyncBarrier,
    Barrier,
    KindConflictError,
    LockConfigError,
    LockLostError,
    LockUsageError,
    NotOwnedError,
    UnexpectedReplyError,
)
from redislock._core.keys import LockKeys
from redislock._core.lock import DONE_MS
from redislock.server import RedisProcess
from tests import clients
from tests.support import Dead, async_wait_for, closing_dead_clients, dead_pair, invoke
from tests.test_latch import Side, subscribers, ttls

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

CTX = multiprocessing.get_context("spawn")


@pytest.fixture(params=["sync", "asyncio"])
async def side(
    request: pytest.FixtureRequest, redis_server: RedisProcess, admin: redis.Redis
) -> Any:
    """A client of the flavour (redis-py's default settings) on the flushed server."""
    if request.param == "sync":
        client: Any = clients.sync_client(**redis_server.client_kwargs())
    else:
        client = clients.async_client(**redis_server.client_kwargs())
    yield Side(request.param, client)
    if request.param == "sync":
        client.close()
    else:
        await client.aclose()


def party(side: Side, parties: int = 3, **options: Any) -> Any:
    """A new party (one object) of the test's barrier."""
    cls = Barrier if side.sync else AsyncBarrier
    return cls(side.client, side.name, parties, **options)


async def entered_is(side: Side, b: Any, n: int) -> bool:
    """Whether ``n`` live parties are in ``b``'s round now (for ``async_wait_for``)."""
    return bool(await side.call(b.entered) == n)


async def leave_all(side: Side, *ps: Any) -> list[bool]:
    """Every party leaves, side by side: each one's ``leave()`` result."""
    return list(await asyncio.wait_for(asyncio.gather(*(side.task(p.leave, 30) for p in ps)), 40))


def members_key(b: Any) -> str:
    return str(b.key) + ":members"


def in_with(b: Any, seen: list[Any]) -> None:
    with b:  # enters, leaves at the end
        seen.append(b.generation)


async def in_async_with(b: Any, seen: list[Any]) -> None:
    async with b:
        seen.append(b.generation)


# ================================================================== enter and leave


async def test_parties_enter_and_leave_together(side: Side, admin: redis.Redis) -> None:
    a, b, c = (party(side, 3) for _ in range(3))
    entering = [side.task(a.enter, 30), side.task(b.enter, 30)]
    await async_wait_for(lambda: side.call(a.entered), 10)
    await async_wait_for(lambda: subscribers(admin, a.key) == 1)
    await asyncio.sleep(0.3)
    assert not any(t.done() for t in entering)  # 2 of 3 in: the round is not open
    assert await side.call(a.entered) == 2
    started = time.monotonic()
    assert await side.call(c.enter, 30) is True
    assert await asyncio.wait_for(asyncio.gather(*entering), 10) == [True, True]
    assert time.monotonic() - started < 2.0  # woken, not a re-check (5 s) away
    gen = a.generation
    assert gen is not None
    assert gen > 0
    assert a.fencing_token == gen
    assert b.generation == c.generation == gen  # one round, one generation
    assert await side.call(a.entered) == 3

    leaving = [side.task(a.leave, 30), side.task(b.leave, 30)]
    await asyncio.sleep(0.3)
    assert not any(t.done() for t in leaving)  # c is still in
    assert a.generation is None  # left at once
    assert await side.call(c.entered) == 1
    started = time.monotonic()
    assert await side.call(c.leave, 30) is True
    assert await asyncio.wait_for(asyncio.gather(*leaving), 10) == [True, True]
    assert time.monotonic() - started < 2.0
    assert await side.call(c.entered) == 0
    assert set(ttls(admin)) == {str(a.key) + ":done"}  # the round's keys are gone
    assert 0 < admin.pttl(str(a.key) + ":done") <= DONE_MS
    assert [a.lost, b.lost, c.lost] == [False] * 3


async def test_with_enters_and_leaves(side: Side, admin: redis.Redis) -> None:
    seen: list[Any] = []
    body = in_with if side.sync else in_async_with
    runs = [side.task(body, party(side, 3), seen) for _ in range(3)]
    await asyncio.wait_for(asyncio.gather(*runs), 20)
    assert len(seen) == 3
    assert len(set(seen)) == 1
    assert set(ttls(admin)) <= {str(party(side).key) + ":done"}


async def test_with_raises_when_the_timeout_runs_out(side: Side, admin: redis.Redis) -> None:
    seen: list[Any] = []
    body = in_with if side.sync else in_async_with
    with pytest.raises(AcquireTimeoutError):
        await side.call(body, party(side, 2, timeout=0.3), seen)
    assert seen == []
    assert await side.call(party(side).entered) == 0


async def test_an_enter_that_times_out_leaves(side: Side, admin: redis.Redis) -> None:
    a, b = party(side, 2), party(side, 2)
    started = time.monotonic()
    assert await side.call(a.enter, 0.4) is False
    assert 0.35 < time.monotonic() - started < 3.0
    assert a.generation is None
    assert await side.call(a.entered) == 0
    assert admin.exists(members_key(a)) == 0
    assert await side.call(b.enter, 0) is False  # no wait: only a party that opens the round
    both = [side.task(a.enter, 10), side.task(b.enter, 10)]
    assert await asyncio.wait_for(asyncio.gather(*both), 15) == [True, True]
    assert await leave_all(side, a, b) == [True, True]
    one = party(side, 1)
    assert await side.call(one.enter, 0) is True  # a party of one opens its round itself
    assert await side.call(one.leave, 0) is True


async def test_a_leave_that_times_out_has_left_all_the_same(side: Side) -> None:
    a, b = party(side, 2), party(side, 2)
    both = [side.task(a.enter, 10), side.task(b.enter, 10)]
    assert await asyncio.wait_for(asyncio.gather(*both), 15) == [True, True]
    started = time.monotonic()
    assert await side.call(a.leave, 0.4) is False  # b is still in
    assert 0.35 < time.monotonic() - started < 3.0
    assert a.generation is None
    assert await side.call(a.entered) == 1
    with pytest.raises(NotOwnedError):
        await side.call(a.leave)
    assert await side.call(b.leave, 5) is True


async def test_every_round_has_a_greater_generation(side: Side) -> None:
    b = party(side, 1)
    gens = []
    for _ in range(4):
        assert await side.call(b.enter, 5)
        gens.append(b.generation)
        assert await side.call(b.leave, 5)
        assert b.generation is None
    assert gens == sorted(gens)
    assert len(set(gens)) == 4


async def test_a_party_arriving_at_an_open_round_waits_for_the_next(
    side: Side, admin: redis.Redis
) -> None:
    a, b, c, d = (party(side, 2) for _ in range(4))
    both = [side.task(a.enter, 10), side.task(b.enter, 10)]
    assert await asyncio.wait_for(asyncio.gather(*both), 15) == [True, True]
    first = a.generation
    late = side.task(c.enter, 30)
    await asyncio.sleep(0.5)
    assert not late.done()  # the open round lets nobody else in
    assert await side.call(a.entered) == 2
    leaving = side.task(a.leave, 10)
    assert await side.call(b.leave, 10) is True
    assert await asyncio.wait_for(leaving, 10) is True
    await async_wait_for(lambda: side.call(c.entered), 10)  # c started the next round
    assert not late.done()
    assert await side.call(d.enter, 10) is True
    assert await asyncio.wait_for(late, 10) is True
    assert c.generation == d.generation
    assert c.generation is not None
    assert first is not None
    assert c.generation > first
    assert await leave_all(side, c, d) == [True, True]


async def test_another_party_count_is_a_usage_error(side: Side) -> None:
    a, b = party(side, 3), party(side, 2)
    entering = side.task(a.enter, 2)
    await async_wait_for(lambda: side.call(a.entered), 10)
    with pytest.raises(LockUsageError, match="counts 3 parties"):
        await side.call(b.enter, 1)
    assert b.generation is None
    assert await asyncio.wait_for(entering, 10) is False  # nobody else came
    assert await side.call(a.entered) == 0


async def test_entering_twice_is_a_usage_error(side: Side) -> None:
    b = party(side, 1)
    assert await side.call(b.enter, 5)
    with pytest.raises(LockUsageError):
        await side.call(b.enter, 5)
    assert await side.call(b.leave, 5)


# ================================================================== leases


async def test_the_watchdog_keeps_a_party_in_beyond_its_lease(
    side: Side, admin: redis.Redis
) -> None:
    a, b = party(side, 2, lease=1), party(side, 2, lease=1)
    both = [side.task(a.enter, 10), side.task(b.enter, 10)]
    assert await asyncio.wait_for(asyncio.gather(*both), 15) == [True, True]
    await asyncio.sleep(2.5)
    assert not a.lost
    assert not b.lost
    assert await side.call(a.entered) == 2
    assert 0 < admin.pttl(members_key(a)) <= 1000
    assert 0 < admin.pttl(str(a.key)) <= 1000
    leaving = side.task(a.leave, 10)
    assert await side.call(b.leave, 10) is True
    assert await asyncio.wait_for(leaving, 10) is True


async def test_a_lost_membership_is_reported(side: Side, admin: redis.Redis) -> None:
    lost: list[Any] = []
    a = party(side, 2, lease=1, on_lost=lost.append)
    b = party(side, 2, lease=1)
    both = [side.task(a.enter, 10), side.task(b.enter, 10)]
    assert await asyncio.wait_for(asyncio.gather(*both), 15) == [True, True]
    admin.delete(members_key(a))  # every membership gone behind their backs
    await async_wait_for(lambda: a.lost and b.lost, 10)  # the next renewals find it
    assert lost == [a]
    with pytest.raises(LockLostError):
        await side.call(a.leave, 5)
    with pytest.raises(LockLostError):
        await side.call(b.leave, 5)
    assert a.generation is None


def _party_process(
    kwargs: dict[str, Any],
    name: str,
    parties: int,
    lease: float,
    use_async: bool,
    out: Queue[Any],
) -> None:
    """A spawned process: enter the barrier ``name`` (``enter(timeout=0)``: register, do
    not wait), report its generation, then sleep until killed."""

    async def body() -> None:
        client: Any = (redis.asyncio.Redis if use_async else redis.Redis)(**kwargs)
        b: Any = (AsyncBarrier if use_async else Barrier)(client, name, parties, lease=lease)
        entered = b.enter(60)
        if inspect.isawaitable(entered):
            entered = await entered
        out.put((os.getpid(), entered, b.generation))
        while True:
            if use_async:
                await asyncio.sleep(1)
            else:
                time.sleep(1)  # noqa: ASYNC251 -- the sync flavour blocks

    asyncio.run(body())


@pytest.mark.slow
@pytest.mark.parametrize("child", ["sync", "asyncio"])
async def test_a_killed_party_leaves_within_its_lease(
    side: Side, child: str, redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """A party in another process, SIGKILLed once the round opened: the others' ``leave``
    returns when its lease ends (not before its last renewal's lease, not much later)."""
    lease = 2.0
    out: Queue[Any] = CTX.Queue()
    proc = CTX.Process(
        target=_party_process,
        args=(redis_server.client_kwargs(), side.name, 2, lease, child == "asyncio", out),
    )
    proc.start()
    try:
        me = party(side, 2, lease=lease)
        assert await side.call(me.enter, 60) is True
        pid, entered, gen = await asyncio.to_thread(out.get, True, 60)
        assert entered is True
        assert gen == me.generation
        await asyncio.sleep(1.5)  # the child renewed at least once
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        assert await side.call(me.leave, 30) is True
        took = time.monotonic() - killed
        # its lease was renewed at most lease/3 before the kill
        assert lease * 2 / 3 - 0.3 < took < lease + 3.0, took
        assert await side.call(me.entered) == 0
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        out.close()
        out.join_thread()


@pytest.mark.slow
async def test_a_killed_party_stops_counting_before_the_round_opens(
    side: Side, redis_server: RedisProcess
) -> None:
    lease = 1.5
    out: Queue[Any] = CTX.Queue()
    proc = CTX.Process(
        target=_party_process,
        args=(redis_server.client_kwargs(), side.name, 3, lease, not side.sync, out),
    )
    proc.start()
    try:
        me = party(side, 3, lease=lease)
        entering = side.task(me.enter, 30)
        await async_wait_for(lambda: entered_is(side, me, 2), 30)
        proc.kill()  # SIGKILL, while it waits in enter()
        proc.join(10)
        killed = time.monotonic()
        await async_wait_for(lambda: entered_is(side, me, 1), 10)
        assert time.monotonic() - killed < lease + 2.0
        assert not entering.done()  # 1 of 3 live parties: still closed
        two, three = party(side, 3, lease=lease), party(side, 3, lease=lease)
        more = [side.task(two.enter, 30), side.task(three.enter, 30)]
        assert await asyncio.wait_for(asyncio.gather(entering, *more), 30) == [True] * 3
        assert await leave_all(side, me, two, three) == [True] * 3
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        out.close()
        out.join_thread()


# ================================================================== lost wake-ups


async def test_an_open_never_published_is_found_by_a_re_check(
    side: Side, admin: redis.Redis
) -> None:
    a = party(side, 2, recheck_interval=0.5)
    entering = side.task(a.enter, 30)
    await async_wait_for(lambda: side.call(a.entered), 10)
    await async_wait_for(lambda: subscribers(admin, a.key) == 1)
    started = time.monotonic()
    admin.hset(str(a.key), "state", "open")  # no PUBLISH: as if the wake-up were lost
    assert await asyncio.wait_for(entering, 10) is True
    assert time.monotonic() - started < 3.0  # the 0.5 s re-check, not the timeout
    assert await side.call(a.leave, 5) is True


async def test_waiters_survive_a_killed_wake_up_connection(side: Side, admin: redis.Redis) -> None:
    """``CLIENT KILL TYPE pubsub`` mid-wait: the waiters re-check at once and wait on the
    subscription made again; the last party's enter then reaches them all, far sooner
    than their 60 s re-check."""
    ps = [party(side, 4, recheck_interval=60) for _ in range(4)]
    entering = [side.task(p.enter, 90) for p in ps[:3]]
    await async_wait_for(lambda: entered_is(side, ps[0], 3), 10)
    await async_wait_for(lambda: subscribers(admin, ps[0].key) == 1)
    await asyncio.sleep(0.2)
    assert admin.client_kill_filter(_type="pubsub") >= 1  # (earlier tests may linger 5 s)
    await async_wait_for(lambda: subscribers(admin, ps[0].key) == 1)  # subscribed again
    assert not any(t.done() for t in entering)
    started = time.monotonic()
    assert await side.call(ps[3].enter, 10) is True
    assert await asyncio.wait_for(asyncio.gather(*entering), 20) == [True] * 3
    assert time.monotonic() - started < 10.0
    assert await leave_all(side, *ps) == [True] * 4


async def test_a_cancelled_enter_leaves_nothing_registered(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = clients.async_client(**redis_server.client_kwargs())
    try:
        a = AsyncBarrier(client, f"job-{uuid.uuid4().hex[:8]}", 2)
        entering = asyncio.ensure_future(a.enter(30))
        await async_wait_for(lambda: subscribers(admin, a.key) == 1)
        assert await a.entered() == 1
        entering.cancel()
        with pytest.raises(asyncio.CancelledError):
            await entering

        async def nobody() -> bool:
            return await a.entered() == 0

        await async_wait_for(nobody, 5)
        assert a.generation is None
        assert set(ttls(admin)) <= {a.key + ":done"}
    finally:
        await client.aclose()


# ================================================================== keys and TTLs


async def test_every_key_has_a_ttl(side: Side, admin: redis.Redis) -> None:
    a, b = party(side, 2, lease=5), party(side, 2, lease=20)
    entering = side.task(a.enter, 30)
    await async_wait_for(lambda: side.call(a.entered), 10)
    got = ttls(admin)
    assert set(got) == {str(a.key), members_key(a)}
    assert all(0 < ms <= 5000 for ms in got.values())
    assert await side.call(b.enter, 10) is True
    assert await asyncio.wait_for(entering, 10) is True
    got = ttls(admin)  # the latest member lease
    assert all(15_000 < ms <= 20_000 for ms in got.values()), got
    leaving = side.task(a.leave, 10)
    await asyncio.sleep(0.2)
    got = ttls(admin)  # a left, b is in
    assert set(got) == {str(a.key), members_key(a), str(a.key) + ":done"}
    assert 0 < got[str(a.key) + ":done"] <= DONE_MS
    assert all(ms > 0 for ms in got.values())
    assert await side.call(b.leave, 10) is True
    assert await asyncio.wait_for(leaving, 10) is True


async def test_a_name_of_another_kind_is_a_typed_error(side: Side, admin: redis.Redis) -> None:
    b = party(side, 2)
    admin.set(str(b.key), "not a barrier")
    with pytest.raises(KindConflictError, match="Barrier"):
        await side.call(b.enter, 1)
    admin.delete(str(b.key))
    admin.hset(str(b.key), "gen", "x")
    with pytest.raises(UnexpectedReplyError, match="not a Barrier"):
        await side.call(b.enter, 1)
    with pytest.raises(UnexpectedReplyError, match="not a Barrier"):
        await side.call(b.entered)
    assert b.generation is None


@pytest.mark.one_server  # the server's clock is moved (libfaketime)
def test_nothing_is_left_after_use(short_tmp: Path) -> None:
    """Once the done keys' TTLs ran out (the server's clock moved on, not waited for), only
    the slots' fencing counters are left; a round nobody left goes with its last lease."""
    directory = short_tmp / "barrier-ttl"
    with RedisProcess(directory, name="barrier", clock_file=directory / "offset") as proc:
        c = redis.Redis(**proc.client_kwargs(), decode_responses=True)
        try:
            for i in range(10):
                b = Barrier(c, f"n{i}", 1, lease=30)
                assert b.enter(5)
                assert b.leave(5)
            stuck = Barrier(c, "stuck", 2, lease=30)
            assert not stuck.enter(0)  # left again
            abandoned = Barrier(c, "abandoned", 1, lease=30)
            assert abandoned.enter(5)
            abandoned._core.holding = None  # as if its process died: never left
            names = [f"n{i}" for i in range(10)] + ["stuck", "abandoned"]
            counters = {LockKeys.for_name(n).fence for n in names}
            assert all(c.pttl(k) > 0 for k in set(c.keys("*")) - counters)
            proc.set_clock_offset(2 * DONE_MS / 1000)
            deadline = time.monotonic() + 20
            while set(c.keys("*")) != counters:
                assert time.monotonic() < deadline, c.keys("*")
                time.sleep(0.1)
        finally:
            c.close()


# ================================================================== several processes


async def _io(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _rounds_process(
    kwargs: dict[str, Any],
    name: str,
    parties: int,
    rounds: int,
    use_async: bool,
    out: Queue[Any],
) -> None:
    """A spawned process: ``rounds`` times enter and leave the barrier ``name``; reports a
    list of (generation, enter called, enter returned, leave called, leave returned) in
    ``time.monotonic_ns()`` (one clock for the whole system), or its error."""

    async def body() -> list[tuple[int, int, int, int, int]]:
        client: Any = (redis.asyncio.Redis if use_async else redis.Redis)(**kwargs)
        b: Any = (AsyncBarrier if use_async else Barrier)(client, name, parties, lease=5)
        rows = []
        try:
            for _ in range(rounds):
                t0 = time.monotonic_ns()
                if not await _io(b.enter(60)):
                    raise RuntimeError("enter timed out")
                t1 = time.monotonic_ns()
                gen = b.generation
                t2 = time.monotonic_ns()
                if not await _io(b.leave(60)):
                    raise RuntimeError("leave timed out")
                rows.append((gen, t0, t1, t2, time.monotonic_ns()))
        finally:
            await _io(client.aclose() if use_async else client.close())
        return rows

    try:
        out.put(asyncio.run(body()))
    except BaseException as exc:
        out.put(repr(exc))
        raise


@pytest.mark.slow
def test_processes_enter_and_leave_together(redis_server: RedisProcess, admin: redis.Redis) -> None:
    """4 processes, sync and asyncio alternating, 3 rounds: each round has one generation
    and all 4 parties, no enter returns before the round's last party called enter, no
    leave before its last party called leave, and generations increase round by round."""
    name, n, rounds = f"job-{uuid.uuid4().hex[:8]}", 4, 3
    out: Queue[Any] = CTX.Queue()
    procs = [
        CTX.Process(
            target=_rounds_process,
            args=(redis_server.client_kwargs(), name, n, rounds, i % 2 == 1, out),
        )
        for i in range(n)
    ]
    try:
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()
    assert [r for r in results if isinstance(r, str)] == []
    assert [p.exitcode for p in procs] == [0] * n
    by_gen: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for rows in results:
        gens = [row[0] for row in rows]
        assert gens == sorted(gens)
        assert len(set(gens)) == rounds
        for row in rows:
            by_gen.setdefault(row[0], []).append(row)
    assert len(by_gen) == rounds
    for rows in by_gen.values():
        assert len(rows) == n  # every party in every round
        assert min(r[2] for r in rows) >= max(r[1] for r in rows)  # entered together
        assert min(r[4] for r in rows) >= max(r[3] for r in rows)  # left together
    ordered = sorted(by_gen)
    for earlier, later in itertools.pairwise(ordered):
        assert max(r[4] for r in by_gen[earlier]) <= min(r[2] for r in by_gen[later])
    assert admin.exists(LockKeys.for_name(name).lock + ":barrier") == 0


# ================================================================== Redis Cluster


@pytest.mark.one_server  # the suite's Redis 7 cluster
def test_a_barrier_on_a_cluster(rc: redis.cluster.RedisCluster) -> None:
    """One hash slot per name: every call is one script on the name's node."""
    seen: list[bool] = []

    def one() -> None:
        b = Barrier(rc, "job", 3)
        seen.append(b.enter(20))
        seen.append(b.leave(20))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert seen == [True] * 6


# ================================================================== bad input, before any I/O


@pytest.fixture(scope="module")
def dead_clients() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    yield from closing_dead_clients()


@pytest.fixture(params=["sync", "async"])
def dead(
    request: pytest.FixtureRequest, dead_clients: tuple[redis.Redis, redis.asyncio.Redis]
) -> Dead[Barrier | AsyncBarrier]:
    return dead_pair(request.param, dead_clients, Barrier, AsyncBarrier, parties=3)


@pytest.mark.parametrize("method", ["enter", "entered"])
def test_dead_client_control(dead: Dead[Any], method: str) -> None:
    """A valid call does reach the network: so no ConnectionError below means no I/O."""
    with pytest.raises(redis.exceptions.ConnectionError):
        invoke(dead.make(), method)


@pytest.mark.parametrize("parties", [0, -1, True, 1.5, "3", None, 1_000_001, math.nan], ids=repr)
def test_bad_parties(dead: Dead[Any], parties: Any) -> None:
    with pytest.raises(LockConfigError, match="parties"):
        dead.make(parties=parties)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lease": 0}, "lease"),
        ({"lease": -1}, "lease"),
        ({"lease": "10"}, "lease"),
        ({"lease": math.inf}, "lease"),
        ({"lease": None}, "lease"),
        ({"timeout": -1}, "timeout"),
        ({"recheck_interval": 0}, "recheck_interval"),
        ({"prefix": "a}b"}, "prefix"),
        ({"on_lost": 5}, "on_lost"),
        ({"name": ""}, "name"),
        ({"name": "}x"}, "name"),
    ],
)
def test_bad_constructor_argument(dead: Dead[Any], kwargs: dict[str, Any], match: str) -> None:
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "job")
    with pytest.raises(LockConfigError, match=match):
        dead.make(name, **kwargs)


@pytest.mark.parametrize("method", ["enter", "leave"])
@pytest.mark.parametrize("timeout", [-1, "1", True, math.nan])
def test_bad_timeout(dead: Dead[Any], method: str, timeout: Any) -> None:
    with pytest.raises(LockConfigError, match="timeout"):
        invoke(dead.make(), method, timeout)


def test_leaving_without_entering_is_not_owned(dead: Dead[Any]) -> None:
    with pytest.raises(NotOwnedError):
        invoke(dead.make(), "leave")


def test_client_of_the_other_flavour_is_rejected(dead: Dead[Any]) -> None:
    with pytest.raises(LockConfigError, match=dead.cls.__name__):
        dead.cls(dead.other, "job", 3)
    with pytest.raises(LockConfigError, match="needs"):
        dead.cls(object(), "job", 3)


def test_construction_and_local_state(dead: Dead[Any]) -> None:
    b = dead.make("job", parties=4, lease=12, prefix="app:")
    assert b.name == "job"
    assert b.key == "app:{job}:barrier"
    assert b.parties == 4
    assert b.lease == 12.0
    assert b.generation is None
    assert b.fencing_token is None
    assert not b.lost
    assert repr(b) == f"<{dead.cls.__name__} 'job' parties=4 out>"
    assert not hasattr(b, "__dict__")
