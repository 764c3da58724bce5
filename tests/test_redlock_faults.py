# SPDX-License-Identifier: MIT
"""Redlock and MultiRedlock with redis-py's DEFAULT clients (socket timeout 5 s, 10 retries
with back-off) when masters fail, sync and asyncio.

- Two of five masters refused (process stopped), blackholed (FaultProxy) or paused
  (SIGSTOP): acquire, extend and release each return within ``node_timeout`` plus
  :data:`MARGIN`, round after round (connecting, reconnecting and retries run on the
  master's lane, off the caller's path).
- A paused master holds at most one thread (sync) or task (asyncio) over 200 rounds.
- A grant that reaches a master after its round ended is undone by the release queued
  behind it on that master's lane (the lease is long: expiry cannot explain it).
- An "add" extend whose reply is lost, retried by redis-py, adds its time once.

Five real masters (``tests/masters.py``); every fault is undone in a ``finally`` (restart,
heal, SIGCONT).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import AsyncMultiRedlock, AsyncRedlock, MultiRedlock, Redlock
from redislock._core.keys import LockKeys
from redislock._lanes import CLEANUP_CAP
from redislock.server import RedisProcess
from redislock.testing import FaultProxy
from tests.masters import N_MASTERS, client_state, close_amasters
from tests.support import async_wait_for, wait_for

NODE_TIMEOUT = 0.5
MARGIN = 0.5
"""Seconds a call may take beyond ``node_timeout`` (scheduling on a loaded 2-core machine);
before the lanes, the first acquire after two masters died took 8.6 s."""
TTL = 10.0
FAULTS = ["refused", "blackhole", "sigstop"]
KINDS = ["Redlock", "MultiRedlock"]
NAMES = ["fault:a", "fault:b"]
FOREIGN = "f" * 32 + "|elsewhere|1|0"


def lock_key(name: str) -> str:
    return f"redislock:{{{name}}}"


def fence_key(name: str) -> str:
    """The fencing counter of ``name``: its hash slot's, shared with that slot's names."""
    return LockKeys.for_name(name).fence


def held(admins: Sequence[redis.Redis], key: str, token: str | None) -> list[bool]:
    """Per master, whether ``token`` holds ``key``."""
    out = []
    for admin in admins:
        value = admin.get(key)
        out.append(token is not None and isinstance(value, str) and value.startswith(token))
    return out


def lanes_idle(clients: Sequence[Any]) -> bool:
    """No master's lane is running a command (what a fault left behind has finished)."""
    return not any(client_state(c).lane.running for c in clients)


@pytest.fixture
def proxies(servers: list[RedisProcess]) -> Iterator[list[FaultProxy]]:
    """A FaultProxy in front of masters 0 and 1 each."""
    made: list[FaultProxy] = []
    try:
        for server in servers[:2]:
            assert server.socket_path is not None
            made.append(FaultProxy(server.socket_path).start())
        yield made
    finally:
        for proxy in made:
            proxy.stop()


def endpoints(servers: Sequence[RedisProcess], via: Sequence[FaultProxy]) -> list[dict[str, Any]]:
    """Client keywords per master: the first ``len(via)`` through the proxies."""
    out = [p.client_kwargs() for p in via]
    return out + [s.client_kwargs() for s in servers[len(via) :]]


@contextlib.contextmanager
def failing(
    fault: str, servers: Sequence[RedisProcess], proxies: Sequence[FaultProxy]
) -> Iterator[None]:
    """Masters 0 and 1 fail as ``fault`` inside the block; restored after it."""
    try:
        for i in range(2):
            if fault == "refused":
                servers[i].stop()
            elif fault == "blackhole":
                proxies[i].set_fault("blackhole")
            else:
                servers[i].kill(signal.SIGSTOP)
        yield
    finally:
        for i in range(2):
            if fault == "refused":
                servers[i].start()
            elif fault == "blackhole":
                proxies[i].heal()
            else:
                servers[i].kill(signal.SIGCONT)


@contextlib.contextmanager
def paused(server: RedisProcess) -> Iterator[None]:
    server.kill(signal.SIGSTOP)
    try:
        yield
    finally:
        server.kill(signal.SIGCONT)


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


async def atimed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    result = await call()
    return result, time.monotonic() - start


def make_lock(kind: str, clients: list[Any], *, asyncio_: bool, **options: Any) -> Any:
    if kind == "Redlock":
        cls: Any = AsyncRedlock if asyncio_ else Redlock
        return cls(clients, "fault", **options)
    cls = AsyncMultiRedlock if asyncio_ else MultiRedlock
    return cls(clients, NAMES, **options)


BOUND = NODE_TIMEOUT + MARGIN

# =========================================================================== two of five fail


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fault", FAULTS)
def test_two_failed_masters_delay_no_call_past_node_timeout(
    fault: str,
    kind: str,
    servers: list[RedisProcess],
    admins: list[redis.Redis],
    proxies: list[FaultProxy],
) -> None:
    via = proxies if fault == "blackhole" else []
    clients = [redis.Redis(**kw) for kw in endpoints(servers, via)]
    lock = make_lock(kind, clients, asyncio_=False, ttl=TTL, node_timeout=NODE_TIMEOUT)
    try:
        for _ in range(2):  # every master takes part; each has a pooled connection
            assert lock.acquire(blocking=False)
            assert held(admins, lock.key, lock.token) == [True] * N_MASTERS
            lock.release()
        with failing(fault, servers, proxies):
            for _ in range(3):
                ok, took = timed(lambda: lock.acquire(blocking=False))
                assert ok is True
                assert took < BOUND, f"acquire took {took:.2f} s"
                assert held(admins[2:], lock.key, lock.token) == [True] * 3
                ttl, took = timed(lambda: lock.extend(2))
                assert ttl > TTL
                assert took < BOUND, f"extend took {took:.2f} s"
                token = lock.token
                _, took = timed(lock.release)
                assert took < BOUND, f"release took {took:.2f} s"
                assert held(admins[2:], lock.key, token) == [False] * 3
        wait_for(lambda: lanes_idle(clients), timeout=60)
    finally:
        for client in clients:
            client.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fault", FAULTS)
async def test_async_two_failed_masters_delay_no_call_past_node_timeout(
    fault: str,
    kind: str,
    servers: list[RedisProcess],
    admins: list[redis.Redis],
    proxies: list[FaultProxy],
) -> None:
    via = proxies if fault == "blackhole" else []
    clients = [redis.asyncio.Redis(**kw) for kw in endpoints(servers, via)]
    lock = make_lock(kind, clients, asyncio_=True, ttl=TTL, node_timeout=NODE_TIMEOUT)
    try:
        for _ in range(2):
            assert await lock.acquire(blocking=False)
            assert held(admins, lock.key, lock.token) == [True] * N_MASTERS
            await lock.release()
        with failing(fault, servers, proxies):
            for _ in range(3):
                ok, took = await atimed(lambda: lock.acquire(blocking=False))
                assert ok is True
                assert took < BOUND, f"acquire took {took:.2f} s"
                assert held(admins[2:], lock.key, lock.token) == [True] * 3
                ttl, took = await atimed(lambda: lock.extend(2))
                assert ttl > TTL
                assert took < BOUND, f"extend took {took:.2f} s"
                token = lock.token
                _, took = await atimed(lock.release)
                assert took < BOUND, f"release took {took:.2f} s"
                assert held(admins[2:], lock.key, token) == [False] * 3
        await async_wait_for(lambda: lanes_idle(clients), timeout=60)
    finally:
        await close_amasters(clients)


# =========================================================================== bounded work


def test_a_paused_master_holds_at_most_one_thread(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "stalled", ttl=1)  # node_timeout 0.1 s
    assert lock.acquire()
    lock.release()
    base = threading.active_count()
    peak = base
    lane = client_state(masters[0]).lane
    with paused(servers[0]):
        for _ in range(200):
            assert lock.acquire(blocking=False)
            lock.release()
            peak = max(peak, threading.active_count())
            assert len(lane.queue) <= CLEANUP_CAP
    # One lane thread for the paused master (another may start as an idle one exits).
    assert peak <= base + 2, (base, peak)
    wait_for(lambda: lanes_idle(masters), timeout=30)
    # The releases queued behind its stalled command ran; nothing of ours stays.
    wait_for(lambda: admins[0].get(lock_key("stalled")) is None)


def lane_tasks(client: redis.asyncio.Redis) -> int:
    """Running lane tasks of ``client``'s master (the lane task runs ``_drain(client, ...)``)."""
    from redislock.aio import _fanout

    count = 0
    for task in _fanout._workers:
        frame = getattr(task.get_coro(), "cr_frame", None)
        if not task.done() and frame is not None and frame.f_locals.get("client") is client:
            count += 1
    return count


async def test_async_a_paused_master_holds_at_most_one_task(
    servers: list[RedisProcess], amasters: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    lock = AsyncRedlock(amasters, "astalled", ttl=1)
    assert await lock.acquire()
    await lock.release()
    base = len(asyncio.all_tasks())
    peak, peak_paused = base, 0
    lane = client_state(amasters[0]).lane
    with paused(servers[0]):
        for _ in range(200):
            assert await lock.acquire(blocking=False)
            await lock.release()
            peak = max(peak, len(asyncio.all_tasks()))
            peak_paused = max(peak_paused, lane_tasks(amasters[0]))
            assert len(lane.queue) <= CLEANUP_CAP
    assert peak_paused == 1  # the paused master's lane: one task, however many rounds
    # At most one lane task per master (a loaded machine may make a live master late once).
    assert peak <= base + len(amasters), (base, peak)
    await async_wait_for(lambda: lanes_idle(amasters), timeout=30)
    await async_wait_for(lambda: admins[0].get(lock_key("astalled")) is None)


# =========================================================================== late grants


def late_grant_case(admins: list[redis.Redis], name: str) -> None:
    """Masters 2..4 held by another owner: no majority for us."""
    for admin in admins[2:]:
        admin.set(lock_key(name), FOREIGN, px=60_000)


def test_a_late_grant_is_undone_by_the_release_queued_behind_it(
    servers: list[RedisProcess], admins: list[redis.Redis], proxies: list[FaultProxy]
) -> None:
    """Master 0's requests and replies take 0.6 s each way, the rounds 0.2 s: its grant
    arrives after the round ended. The lease is 60 s, so only the release can remove it
    (its lane reconnects through the slow proxy first: a few round trips)."""
    clients = [redis.Redis(**kw) for kw in endpoints(servers, proxies[:1])]
    try:
        lock = Redlock(clients, "late", ttl=60, node_timeout=0.2)
        assert lock.acquire()
        lock.release()
        proxies[0].set_fault("delay", delay=0.6)
        # Held (4 of 5): the release undoes master 0's late grant too.
        assert lock.acquire(blocking=False)
        lock.release()
        wait_for(
            lambda: admins[0].get(fence_key("late")) == "2", timeout=20
        )  # the late grant happened
        wait_for(lambda: admins[0].get(lock_key("late")) is None, timeout=20)
        # Not held (busy on a majority): the cleanup after the failed try undoes it.
        late_grant_case(admins, "late")
        assert lock.acquire(blocking=False) is False
        # Master 0's try may land late or never be sent (the round was decided busy):
        # either way nothing of ours stays once its lane is idle.
        wait_for(lambda: lanes_idle(clients), timeout=20)
        assert admins[0].get(lock_key("late")) is None
        assert [a.get(lock_key("late")) for a in admins[2:]] == [FOREIGN] * 3
        proxies[0].heal()
        wait_for(lambda: lanes_idle(clients))
    finally:
        for client in clients:
            client.close()


async def test_async_a_late_grant_is_undone_by_the_release_queued_behind_it(
    servers: list[RedisProcess], admins: list[redis.Redis], proxies: list[FaultProxy]
) -> None:
    clients = [redis.asyncio.Redis(**kw) for kw in endpoints(servers, proxies[:1])]
    try:
        lock = AsyncRedlock(clients, "alate", ttl=60, node_timeout=0.2)
        assert await lock.acquire()
        await lock.release()
        proxies[0].set_fault("delay", delay=0.6)
        assert await lock.acquire(blocking=False)
        await lock.release()
        await async_wait_for(lambda: admins[0].get(fence_key("alate")) == "2", timeout=20)
        await async_wait_for(lambda: admins[0].get(lock_key("alate")) is None, timeout=20)
        late_grant_case(admins, "alate")
        assert await lock.acquire(blocking=False) is False
        await async_wait_for(lambda: lanes_idle(clients), timeout=20)
        assert admins[0].get(lock_key("alate")) is None
        assert [a.get(lock_key("alate")) for a in admins[2:]] == [FOREIGN] * 3
        proxies[0].heal()
        await async_wait_for(lambda: lanes_idle(clients))
    finally:
        await close_amasters(clients)


# =========================================================================== lost replies


def test_an_add_extend_retried_by_redis_py_adds_once(
    servers: list[RedisProcess], admins: list[redis.Redis], proxies: list[FaultProxy]
) -> None:
    clients = [redis.Redis(**kw) for kw in endpoints(servers, proxies[:1])]
    try:
        lock = Redlock(clients, "retried", ttl=TTL)
        assert lock.acquire()
        # A lost reply on the fast path (no retry there) makes master 0 suspect: its next
        # command runs on its lane, with the client's retries.
        proxies[0].set_fault("lose_reply")
        assert lock.owned()
        assert proxies[0].lost_replies == 1
        proxies[0].set_fault("lose_reply")
        start = time.monotonic()
        assert lock.extend(5) > TTL
        wait_for(lambda: proxies[0].lost_replies == 2)
        wait_for(lambda: lanes_idle(clients))
        ttls = [int(a.pttl(lock_key("retried"))) for a in admins]
        spent = time.monotonic() - start
        # The retry found its own op id in the done key: 15 s, not 20 s.
        assert all((TTL + 5 - spent - 0.1) * 1000 < t <= (TTL + 5) * 1000 for t in ttls), ttls
        lock.release()
    finally:
        for client in clients:
            client.close()


async def test_async_an_add_extend_retried_by_redis_py_adds_once(
    servers: list[RedisProcess], admins: list[redis.Redis], proxies: list[FaultProxy]
) -> None:
    clients = [redis.asyncio.Redis(**kw) for kw in endpoints(servers, proxies[:1])]
    try:
        lock = AsyncRedlock(clients, "aretried", ttl=TTL)
        assert await lock.acquire()
        proxies[0].set_fault("lose_reply")
        assert await lock.owned()
        assert proxies[0].lost_replies == 1
        proxies[0].set_fault("lose_reply")
        start = time.monotonic()
        assert await lock.extend(5) > TTL
        await async_wait_for(lambda: proxies[0].lost_replies == 2)
        await async_wait_for(lambda: lanes_idle(clients))
        ttls = [int(a.pttl(lock_key("aretried"))) for a in admins]
        spent = time.monotonic() - start
        assert all((TTL + 5 - spent - 0.1) * 1000 < t <= (TTL + 5) * 1000 for t in ttls), ttls
        await lock.release()
    finally:
        await close_amasters(clients)
