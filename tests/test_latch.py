# SPDX-License-Identifier: MIT
"""``CountDownLatch`` and ``AsyncCountDownLatch`` on real redis-servers: set, count down,
wait, generations, timeouts, a latch whose TTL ran out, lost wake-ups (a wake-up never
published; the wake-up connection killed), several processes of both flavours, the keys'
TTLs and nothing left after use, bad input before any I/O.

Both flavours run from one async test body (:class:`Side`): a sync call runs in a thread
of its own (``asyncio.to_thread``), so sync waiters wait side by side as asyncio tasks do.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import multiprocessing
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster
import redis.exceptions

from redislock import (
    AsyncCountDownLatch,
    CountDownLatch,
    KindConflictError,
    Lock,
    LockConfigError,
    UnexpectedReplyError,
)
from redislock._core.keys import LockKeys
from redislock._core.lock import DONE_MS
from redislock.server import RedisProcess
from tests import clients
from tests.support import Dead, async_wait_for, closing_dead_clients, dead_pair, invoke

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

CTX = multiprocessing.get_context("spawn")


@dataclass
class Side:
    """One flavour: its client, and a way to call its objects from an async test body."""

    flavour: str
    client: Any
    name: str = field(default_factory=lambda: f"job-{uuid.uuid4().hex[:8]}")
    """A name of this test's own: the wake-up connection of an earlier test's client may
    still be subscribed to the channel of a name used there (for 5 s)."""

    @property
    def sync(self) -> bool:
        return self.flavour == "sync"

    def latch(self, name: str, count: int = 3, **options: Any) -> Any:
        cls = CountDownLatch if self.sync else AsyncCountDownLatch
        return cls(self.client, name, count, **options)

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(...)`` of this flavour's object: a sync call in a thread of its own (not
        the loop's executor, whose few threads blocked waiters would take up), else
        awaited."""
        if not self.sync:
            return await fn(*args, **kwargs)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def settle(error: BaseException | None, result: Any) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(result)
            else:
                done.set_exception(error)

        def work() -> None:
            try:
                result: Any = fn(*args, **kwargs)
                error: BaseException | None = None
            except BaseException as exc:
                result, error = None, exc
            # A test that failed may have closed its loop before this call ended.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, error, result)

        threading.Thread(target=work, daemon=True).start()
        return await done

    def task(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.call(fn, *args, **kwargs))


@pytest.fixture(params=["sync", "asyncio"])
async def side(
    request: pytest.FixtureRequest, redis_server: RedisProcess, admin: redis.Redis
) -> AsyncIterator[Side]:
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


def subscribers(admin: redis.Redis, channel: str) -> int:
    """Connections subscribed to ``channel`` (one per waiting process and client)."""
    return int(dict(admin.pubsub_numsub(channel))[channel])


def key_of(name: str) -> str:
    return LockKeys.for_name(name).lock + ":latch"


def ttls(admin: redis.Redis) -> dict[str, int]:
    """Every key's PTTL (milliseconds; -1: none), the slots' fencing counters left out."""
    return {str(k): admin.pttl(k) for k in admin.keys("*") if not str(k).endswith(":slotfence")}


# ================================================================== set, count down, wait


async def test_set_count_down_and_wait(side: Side, admin: redis.Redis) -> None:
    latch = side.latch(side.name, 3)
    assert await side.call(latch.count) == 0  # nothing counts: reads as 0
    assert await side.call(latch.generation) == 0
    assert await side.call(latch.wait, 0) is True  # and nothing to wait for
    assert await side.call(latch.count_down) == 0  # nothing to count down: a no-op
    assert admin.keys("*") == []
    assert latch.last_generation is None

    assert await side.call(latch.try_set_count) is True
    gen = await side.call(latch.generation)
    assert gen > 0
    assert latch.last_generation == gen
    assert await side.call(latch.try_set_count) is False  # counting: refused
    assert await side.call(side.latch(side.name, 7).try_set_count) is False
    assert await side.call(latch.count) == 3

    waiters = [side.task(side.latch(side.name, 3).wait, 30) for _ in range(5)]
    await async_wait_for(lambda: subscribers(admin, latch.key) == 1)  # one subscription
    await asyncio.sleep(0.2)
    assert not any(w.done() for w in waiters)
    assert await side.call(latch.count_down) == 2
    assert await side.call(latch.count_down) == 1
    await asyncio.sleep(0.2)
    assert not any(w.done() for w in waiters)  # not before zero
    started = time.monotonic()
    assert await side.call(latch.count_down) == 0
    assert await asyncio.wait_for(asyncio.gather(*waiters), 10) == [True] * 5
    assert time.monotonic() - started < 2.0  # woken, not found by a re-check (5 s)
    assert await side.call(latch.count_down) == 0  # never below zero
    assert await side.call(latch.count) == 0
    assert await side.call(latch.generation) == gen  # its record lives with the key
    assert await side.call(latch.wait, 1) is True


async def test_try_set_count_takes_another_count(side: Side) -> None:
    latch = side.latch(side.name, 3)
    assert await side.call(latch.try_set_count, 2) is True
    assert await side.call(latch.count) == 2
    with pytest.raises(LockConfigError, match="count"):
        await side.call(latch.try_set_count, 0)


async def test_every_generation_is_above_the_last(side: Side, admin: redis.Redis) -> None:
    """A generation is the slot's next fencing token: above the latch's earlier ones, and
    above the tokens of a lock of the same slot ("<name>}x" has the name as its hash tag)."""
    latch = side.latch(side.name, 1)
    seen = []
    for _ in range(3):
        assert await side.call(latch.try_set_count)
        seen.append(latch.last_generation)
        assert await side.call(latch.count_down) == 0
        lock = Lock(admin, side.name + "}x", ttl=5)
        assert lock.acquire()
        seen.append(lock.fencing_token)
        lock.release()
    assert seen == sorted(seen)
    assert len(set(seen)) == len(seen)


async def test_wait_times_out(side: Side) -> None:
    latch = side.latch(side.name, 2)
    assert await side.call(latch.try_set_count)
    started = time.monotonic()
    assert await side.call(latch.wait, 0.4) is False
    assert 0.35 < time.monotonic() - started < 3.0
    assert await side.call(latch.wait, 0) is False  # one read
    assert await side.call(latch.count) == 2


async def test_a_waiter_returns_false_when_the_latch_expires_first(
    side: Side, admin: redis.Redis
) -> None:
    """The safe answer: a count whose latch ran out never reached zero, so the waiter of that
    generation returns False (when the TTL ends, not at its timeout), and the latch then
    reads as count 0 again."""
    latch = side.latch(side.name, 2, ttl=1)
    assert await side.call(latch.try_set_count)
    assert 0 < admin.pttl(latch.key) <= 1000
    started = time.monotonic()
    assert await side.call(latch.wait, 30) is False
    assert 0.8 < time.monotonic() - started < 5.0
    assert await side.call(latch.count) == 0
    assert await side.call(latch.try_set_count) is True  # a new generation may start


async def test_a_waiter_of_a_generation_that_finished_and_was_set_again_returns_true(
    side: Side, admin: redis.Redis
) -> None:
    """A waiter that missed the wake-up (none was published: the count was zeroed behind
    its back, then a new generation set) finds a newer generation whose ``since`` says its
    own reached zero."""
    latch = side.latch(side.name, 2, recheck_interval=0.5)
    assert await side.call(latch.try_set_count)
    waiter = side.task(side.latch(side.name, 2, recheck_interval=0.5).wait, 30)
    await async_wait_for(lambda: subscribers(admin, latch.key) == 1)
    admin.hset(latch.key, "count", 0)  # reached zero, unpublished
    assert await side.call(latch.try_set_count, 5)  # and straight on to the next
    assert await asyncio.wait_for(waiter, 10) is True


async def test_a_wake_up_never_published_is_found_by_a_re_check(
    side: Side, admin: redis.Redis
) -> None:
    latch = side.latch(side.name, 2, recheck_interval=0.5)
    assert await side.call(latch.try_set_count)
    waiter = side.task(latch.wait, 30)
    await async_wait_for(lambda: subscribers(admin, latch.key) == 1)
    started = time.monotonic()
    admin.hset(latch.key, "count", 0)  # no PUBLISH: as if the wake-up were lost
    assert await asyncio.wait_for(waiter, 10) is True
    assert time.monotonic() - started < 3.0  # the 0.5 s re-check, not the 30 s timeout


async def test_waiters_survive_a_killed_wake_up_connection(side: Side, admin: redis.Redis) -> None:
    """``CLIENT KILL TYPE pubsub`` mid-wait: every waiter re-reads at once and waits on the
    subscription made again; the count-down's wake-up then reaches them all (far sooner
    than their 60 s re-check)."""
    latch = side.latch(side.name, 1, recheck_interval=60)
    assert await side.call(latch.try_set_count)
    waiters = [side.task(side.latch(side.name, 1, recheck_interval=60).wait, 90) for _ in range(8)]
    await async_wait_for(lambda: subscribers(admin, latch.key) == 1)
    await asyncio.sleep(0.2)
    assert admin.client_kill_filter(_type="pubsub") >= 1  # (earlier tests may linger 5 s)
    await async_wait_for(lambda: subscribers(admin, latch.key) == 1)  # subscribed again
    assert not any(w.done() for w in waiters)
    started = time.monotonic()
    assert await side.call(latch.count_down) == 0
    assert await asyncio.wait_for(asyncio.gather(*waiters), 20) == [True] * 8
    assert time.monotonic() - started < 10.0


async def test_a_cancelled_waiter_leaves_nothing(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = clients.async_client(**redis_server.client_kwargs())
    try:
        latch = AsyncCountDownLatch(client, f"job-{uuid.uuid4().hex[:8]}", 1)
        assert await latch.try_set_count()
        waiter = asyncio.ensure_future(latch.wait(30))
        await async_wait_for(lambda: subscribers(admin, latch.key) == 1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await latch.count() == 1
        assert set(ttls(admin)) == {latch.key, latch.key + ":done"}
    finally:
        await client.aclose()


# ================================================================== keys and TTLs


async def test_every_key_has_a_ttl(side: Side, admin: redis.Redis) -> None:
    latch = side.latch(side.name, 2, ttl=20)
    assert await side.call(latch.try_set_count)
    got = ttls(admin)
    assert set(got) == {latch.key, latch.key + ":done"}
    assert 19_000 < got[latch.key] <= 20_000
    assert 0 < got[latch.key + ":done"] <= DONE_MS
    admin.pexpire(latch.key, 5000)
    assert await side.call(latch.count_down) == 1  # refreshed by a count-down
    assert 19_000 < admin.pttl(latch.key) <= 20_000
    assert await side.call(latch.count_down) == 0
    got = ttls(admin)
    assert 19_000 < got[latch.key] <= 20_000
    assert 0 < got[latch.key + ":done"] <= DONE_MS


async def test_a_name_of_another_kind_is_a_typed_error(side: Side, admin: redis.Redis) -> None:
    latch = side.latch(side.name, 2)
    admin.set(latch.key, "not a latch")
    with pytest.raises(KindConflictError, match="CountDownLatch"):
        await side.call(latch.try_set_count)
    admin.delete(latch.key)
    admin.hset(latch.key, "count", "many")
    with pytest.raises(UnexpectedReplyError, match="not a CountDownLatch"):
        await side.call(latch.count_down)
    with pytest.raises(UnexpectedReplyError, match="not a CountDownLatch"):
        await side.call(latch.wait, 1)


async def test_a_lock_of_the_same_name_does_not_meet_the_latch(
    side: Side, admin: redis.Redis
) -> None:
    latch = side.latch(side.name, 1)
    lock = Lock(admin, side.name, ttl=5)
    assert lock.acquire(blocking=False)
    assert await side.call(latch.try_set_count)
    lock.release()
    assert await side.call(latch.count) == 1


@pytest.mark.one_server  # the server's clock is moved (libfaketime)
def test_nothing_is_left_after_use(short_tmp: Path) -> None:
    """Once the TTLs ran out (the server's clock moved on, not waited for), only the slot's
    fencing counter is left."""
    directory = short_tmp / "latch-ttl"
    with RedisProcess(directory, name="latch", clock_file=directory / "offset") as proc:
        c = redis.Redis(**proc.client_kwargs(), decode_responses=True)
        try:
            for i in range(20):
                latch = CountDownLatch(c, f"n{i}", 2, ttl=30)
                assert latch.try_set_count()
                for _ in range(i % 3):
                    latch.count_down()
            counters = {LockKeys.for_name(f"n{i}").fence for i in range(20)}
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


def _latch_worker(
    kwargs: dict[str, Any], name: str, role: str, use_async: bool, delay: float, out: Queue[Any]
) -> None:
    """A spawned process: count the latch ``name`` down once after ``delay`` seconds, or wait
    for it; reports (role, monotonic ns, result) on ``out``."""

    async def body() -> None:
        client: Any = (redis.asyncio.Redis if use_async else redis.Redis)(**kwargs)
        latch: Any = (AsyncCountDownLatch if use_async else CountDownLatch)(client, name, 4)
        try:
            if role == "down":
                if use_async:
                    await asyncio.sleep(delay)
                else:
                    time.sleep(delay)  # noqa: ASYNC251 -- the sync flavour blocks
                before = time.monotonic_ns()
                left = await _io(latch.count_down())
                out.put(("down", before, left))
            else:
                out.put(("ready", 0, None))
                ok = await _io(latch.wait(60))
                out.put(("woke", time.monotonic_ns(), ok))
        finally:
            await _io(client.aclose() if use_async else client.close())

    asyncio.run(body())


@pytest.mark.slow
def test_processes_count_down_and_wait(redis_server: RedisProcess, admin: redis.Redis) -> None:
    """3 waiting processes and 4 counting down, sync and asyncio alternating: no waiter
    returns before the 4th count-down was sent, every waiter returns soon after it."""
    name = f"job-{uuid.uuid4().hex[:8]}"
    latch = CountDownLatch(admin, name, 4)
    assert latch.try_set_count()
    kwargs = redis_server.client_kwargs()
    out: Queue[Any] = CTX.Queue()
    waiters = [
        CTX.Process(target=_latch_worker, args=(kwargs, name, "wait", i % 2 == 1, 0.0, out))
        for i in range(3)
    ]
    downs = [
        CTX.Process(target=_latch_worker, args=(kwargs, name, "down", i % 2 == 0, 0.2 * i, out))
        for i in range(4)
    ]
    try:
        for p in waiters:
            p.start()
        reports = [out.get(timeout=60) for _ in waiters]
        assert [r[0] for r in reports] == ["ready"] * 3
        deadline = time.monotonic() + 30
        while subscribers(admin, latch.key) < 3:  # one subscription per process
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for p in downs:
            p.start()
        reports = [out.get(timeout=60) for _ in range(7)]
    finally:
        for p in waiters + downs:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()
    assert [p.exitcode for p in waiters + downs] == [0] * 7
    sent = sorted(t for role, t, _ in reports if role == "down")
    assert sorted(left for role, _, left in reports if role == "down") == [0, 1, 2, 3]
    woke = [(t, ok) for role, t, ok in reports if role == "woke"]
    assert [ok for _, ok in woke] == [True] * 3
    for t, _ in woke:
        assert t > sent[-1]  # not before the last count-down was sent
        assert (t - sent[-1]) / 1e9 < 5.0  # woken, not a re-check (5 s) away
    assert latch.count() == 0


# ================================================================== Redis Cluster


@pytest.mark.one_server  # the suite's Redis 7 cluster
def test_a_latch_on_a_cluster(rc: redis.cluster.RedisCluster) -> None:
    """One hash slot per name: every call is one script on the name's node."""
    latch = CountDownLatch(rc, "job", 2)
    assert latch.try_set_count()
    done: list[bool] = []
    t = threading.Thread(target=lambda: done.append(CountDownLatch(rc, "job", 2).wait(20)))
    t.start()
    time.sleep(0.3)
    assert latch.count_down() == 1
    assert latch.count_down() == 0
    t.join(20)
    assert done == [True]
    assert latch.count() == 0


# ================================================================== bad input, before any I/O


@pytest.fixture(scope="module")
def dead_clients() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    yield from closing_dead_clients()


@pytest.fixture(params=["sync", "async"])
def dead(
    request: pytest.FixtureRequest, dead_clients: tuple[redis.Redis, redis.asyncio.Redis]
) -> Dead[CountDownLatch | AsyncCountDownLatch]:
    return dead_pair(request.param, dead_clients, CountDownLatch, AsyncCountDownLatch, count=3)


@pytest.mark.parametrize("method", ["try_set_count", "count_down", "wait", "count", "generation"])
def test_dead_client_control(dead: Dead[Any], method: str) -> None:
    """A valid call does reach the network: so no ConnectionError below means no I/O."""
    with pytest.raises(redis.exceptions.ConnectionError):
        invoke(dead.make(), method)


BAD_COUNTS: list[Any] = [0, -1, True, False, 1.5, "3", None, 2**53 + 1, math.nan]


@pytest.mark.parametrize("count", BAD_COUNTS, ids=repr)
def test_bad_count(dead: Dead[Any], count: Any) -> None:
    with pytest.raises(LockConfigError, match="count"):
        dead.make(count=count)
    with pytest.raises(LockConfigError, match="count"):
        invoke(dead.make(), "try_set_count", count if count is not None else "x")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ttl": 0}, "ttl"),
        ({"ttl": -1}, "ttl"),
        ({"ttl": "10"}, "ttl"),
        ({"ttl": math.inf}, "ttl"),
        ({"ttl": 10**9}, "ttl"),
        ({"recheck_interval": 0}, "recheck_interval"),
        ({"recheck_interval": None}, "recheck_interval"),
        ({"prefix": "a{b"}, "prefix"),
        ({"name": ""}, "name"),
        ({"name": 5}, "name"),
        ({"name": "}x"}, "name"),
    ],
)
def test_bad_constructor_argument(dead: Dead[Any], kwargs: dict[str, Any], match: str) -> None:
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "job")
    with pytest.raises(LockConfigError, match=match):
        dead.make(name, **kwargs)


@pytest.mark.parametrize("timeout", [-1, "1", True, math.nan])
def test_bad_wait_timeout(dead: Dead[Any], timeout: Any) -> None:
    with pytest.raises(LockConfigError, match="timeout"):
        invoke(dead.make(), "wait", timeout)


def test_client_of_the_other_flavour_is_rejected(dead: Dead[Any]) -> None:
    with pytest.raises(LockConfigError, match=dead.cls.__name__):
        dead.cls(dead.other, "job", 3)
    with pytest.raises(LockConfigError, match="needs"):
        dead.cls(object(), "job", 3)


def test_construction_and_local_state(dead: Dead[Any]) -> None:
    latch = dead.make("job", count=5, ttl=60, prefix="app:")
    assert latch.name == "job"
    assert latch.key == "app:{job}:latch"
    assert latch.initial_count == 5
    assert latch.last_generation is None
    assert repr(latch) == f"<{dead.cls.__name__} 'job' count=5>"
    assert not hasattr(latch, "__dict__")
