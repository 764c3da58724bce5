# SPDX-License-Identifier: MIT
"""``replicas=k`` (WAIT after every lock write, on the writing connection) and master-change
detection (the master's run_id kept with each hold), on a real Sentinel deployment: one
master, two replicas and three sentinels started by :mod:`tests.sentinel`, reached through
redis-py's ``Sentinel.master_for()``.

What is checked is what Redis holds: after an acquire or extend with ``replicas=2``
returns, both replicas already have the hold; a shortfall leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
import redis.exceptions

from redislock import (
    AsyncFairLock,
    AsyncLock,
    AsyncReadWriteLock,
    AsyncRLock,
    AsyncSemaphore,
    FairLock,
    Lock,
    LockConfigError,
    LockLostError,
    ReadWriteLock,
    ReplicationError,
    RLock,
    Semaphore,
)
from redislock.server import RedisProcess
from tests.flavors import LoopThread
from tests.sentinel import Topology, aclose_master_client, close_master_client, wait_until
from tests.support import async_wait_for, closing_dead_clients

KINDS = ["lock", "rlock", "read", "write", "fair", "semaphore"]


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def topology(short_tmp: Path) -> Iterator[Topology]:
    """One Sentinel deployment for the tests that leave its topology as they found it."""
    with Topology(short_tmp / "sentinel") as topo:
        yield topo


@pytest.fixture
def fresh_topology(short_tmp: Path, request: pytest.FixtureRequest) -> Iterator[Topology]:
    """A deployment of its own, for a test that fails the master over or restarts it."""
    with Topology(short_tmp / f"sentinel-{request.node.name[:20]}") as topo:
        yield topo


@pytest.fixture
def master(topology: Topology) -> RedisProcess:
    """The current master, flushed (the flush reaches the replicas too)."""
    node = topology.master()
    with topology.admin(node) as admin:
        admin.flushall()
        admin.execute_command("WAIT", 2, 2000)
    return node


@pytest.fixture
def client(topology: Topology, master: RedisProcess) -> Iterator[redis.Redis]:
    """A sync client of the Sentinel master (bytes replies)."""
    c = topology.master_client()
    yield c
    close_master_client(c)


@pytest.fixture
async def aclient(topology: Topology, master: RedisProcess) -> AsyncIterator[redis.asyncio.Redis]:
    """An asyncio client of the Sentinel master (decoded replies)."""
    c = topology.async_master_client(decode_responses=True)
    yield c
    await aclose_master_client(c)


# ------------------------------------------------------------------ helpers


def replicas_of(topo: Topology, master: RedisProcess) -> list[RedisProcess]:
    return [n for n in topo.data if n is not master]


def on_node(topo: Topology, node: RedisProcess, key: str, token: str) -> tuple[bool, int]:
    """Whether ``token``'s hold is in ``key`` on ``node``, and the key's PTTL (ms)."""
    with topo.admin(node) as c:
        kind = c.type(key)
        if kind == "string":
            found = str(c.get(key)).startswith(token + "|")
        elif kind == "hash":
            found = bool(c.hexists(key, token))
        else:
            found = False
        return found, int(c.pttl(key))


def assert_on_replicas(topo: Topology, master: RedisProcess, key: str, token: str) -> list[int]:
    """The hold is on both replicas (no waiting: WAIT already proved it); their PTTLs."""
    ttls = []
    for node in replicas_of(topo, master):
        found, ttl = on_node(topo, node, key, token)
        assert found, f"the hold is not on replica {node.url}"
        ttls.append(ttl)
    return ttls


def assert_clean(topo: Topology, master: RedisProcess, key: str) -> None:
    """The lock key is gone from the master and every key left but the fencing counters
    has a TTL."""
    with topo.admin(master) as c:
        assert c.exists(key) == 0
        for k in c.scan_iter("*"):
            if not k.endswith((":slotfence", ":slotrel")):
                assert c.pttl(k) > 0, f"{k!r} has no TTL"


def sync_taker(kind: str, client: Any, name: str, **kw: Any) -> tuple[str, Callable[[], Any]]:
    """``(key, take)``: ``take()`` acquires one hold of ``kind`` and returns the object with
    ``extend``/``release``/``token`` (the lock, a side of a ReadWriteLock, or a Permit)."""
    if kind == "semaphore":
        sem = Semaphore(client, name, 2, **kw)
        return sem.key, lambda: sem.acquire(timeout=5)
    if kind in ("read", "write"):
        rw = ReadWriteLock(client, name, **kw)
        obj: Any = rw.read() if kind == "read" else rw.write()
    else:
        obj = {"lock": Lock, "rlock": RLock, "fair": FairLock}[kind](client, name, **kw)

    def take() -> Any:
        assert obj.acquire(timeout=5)
        return obj

    return obj.key, take


def async_taker(
    kind: str, client: Any, name: str, **kw: Any
) -> tuple[str, Callable[[], Awaitable[Any]]]:
    """:func:`sync_taker` for the asyncio kinds."""
    if kind == "semaphore":
        sem = AsyncSemaphore(client, name, 2, **kw)
        return sem.key, lambda: sem.acquire(timeout=5)
    if kind in ("read", "write"):
        rw = AsyncReadWriteLock(client, name, **kw)
        obj: Any = rw.read() if kind == "read" else rw.write()
    else:
        cls = {"lock": AsyncLock, "rlock": AsyncRLock, "fair": AsyncFairLock}[kind]
        obj = cls(client, name, **kw)

    async def take() -> Any:
        assert await obj.acquire(timeout=5)
        return obj

    return obj.key, take


# ------------------------------------------------------------------ replicas=2, healthy


@pytest.mark.parametrize("kind", KINDS)
def test_sync_hold_is_on_both_replicas_when_acquire_and_extend_return(
    kind: str, topology: Topology, master: RedisProcess, client: redis.Redis
) -> None:
    key, take = sync_taker(kind, client, f"r-{kind}", ttl=5, replicas=2, replica_timeout=2)
    held = take()
    ttls = assert_on_replicas(topology, master, key, held.token)
    assert all(0 < t <= 5000 for t in ttls)
    assert held.extend(60, replace=True) > 50
    ttls = assert_on_replicas(topology, master, key, held.token)
    assert all(t > 50_000 for t in ttls), ttls  # the extension reached both replicas
    assert not held.lost
    held.release()
    assert_clean(topology, master, key)


@pytest.mark.parametrize("kind", KINDS)
async def test_async_hold_is_on_both_replicas_when_acquire_and_extend_return(
    kind: str, topology: Topology, master: RedisProcess, aclient: redis.asyncio.Redis
) -> None:
    key, take = async_taker(kind, aclient, f"a-{kind}", ttl=5, replicas=2, replica_timeout=2)
    held = await take()
    assert_on_replicas(topology, master, key, held.token)
    assert await held.extend(60, replace=True) > 50
    ttls = assert_on_replicas(topology, master, key, held.token)
    assert all(t > 50_000 for t in ttls), ttls
    await held.release()
    assert_clean(topology, master, key)


def test_rlock_reentry_count_is_replicated(
    topology: Topology, master: RedisProcess, client: redis.Redis
) -> None:
    lock = RLock(client, "r-reenter", ttl=5, replicas=2)
    assert lock.acquire()
    assert lock.acquire()
    assert lock.hold_count() == 2
    for node in replicas_of(topology, master):
        with topology.admin(node) as c:
            assert str(c.hget(lock.key, lock.token)).startswith("w|2|")
    lock.release()
    lock.release()


def test_fair_hand_off_is_confirmed_on_the_replicas(
    topology: Topology, master: RedisProcess, client: redis.Redis
) -> None:
    """The waiter that receives a hand-off (written by the releasing client) confirms it
    with a WAIT of its own before acquire returns."""
    first = FairLock(client, "r-fair-handoff", ttl=5, replicas=2)
    second = FairLock(client, "r-fair-handoff", ttl=5, replicas=2)
    assert first.acquire()
    got: list[bool] = []
    waiter = Waiter(lambda: got.append(second.acquire(timeout=10)))
    with topology.admin(master) as c:
        wait_until("the second client is queued", lambda: c.llen(first.key + ":queue") == 1)
    first.release()
    waiter.join()
    assert got == [True]
    assert second.token is not None
    assert_on_replicas(topology, master, second.key, second.token)
    assert second.fencing_token == 2
    second.release()


class Waiter:
    """A thread running ``fn``; ``join`` re-raises its error."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.error: BaseException | None = None

        def body() -> None:
            try:
                fn()
            except BaseException as exc:
                self.error = exc

        self._thread = threading.Thread(target=body)
        self._thread.start()

    def join(self) -> None:
        self._thread.join(30)
        assert not self._thread.is_alive()
        if self.error is not None:
            raise self.error


# ------------------------------------------------------------------ shortfall


@pytest.mark.parametrize("kind", KINDS)
def test_sync_shortfall_undoes_the_acquire(
    kind: str, topology: Topology, master: RedisProcess, client: redis.Redis
) -> None:
    """replicas=3 with two replicas: the grant is undone and ReplicationError raised (a
    blocking acquire does not turn it into a wait or a False)."""
    key, take = sync_taker(kind, client, f"s-{kind}", ttl=5, replicas=3, replica_timeout=0.2)
    with pytest.raises(ReplicationError) as info:
        take()
    err = info.value
    assert (err.name, err.operation, err.wanted, err.acknowledged) == (f"s-{kind}", "acquire", 3, 2)
    assert_clean(topology, master, key)


@pytest.mark.parametrize("kind", KINDS)
async def test_async_shortfall_undoes_the_acquire(
    kind: str, topology: Topology, master: RedisProcess, aclient: redis.asyncio.Redis
) -> None:
    key, take = async_taker(kind, aclient, f"s-{kind}", ttl=5, replicas=3, replica_timeout=0.2)
    with pytest.raises(ReplicationError) as info:
        await take()
    assert (info.value.operation, info.value.wanted, info.value.acknowledged) == ("acquire", 3, 2)
    assert_clean(topology, master, key)


def test_stopped_replica_fails_acquire_extend_and_renewal(
    topology: Topology, master: RedisProcess, client: redis.Redis
) -> None:
    """A replica that stops acknowledging (SIGSTOP): acquire is undone, extend raises and
    leaves the local lease estimate alone, the watchdog treats it as a failed renewal and
    reports the loss when the estimate runs out."""
    held = Lock(client, "stall-held", ttl=10, replicas=2, replica_timeout=0.2)
    assert held.acquire()
    lost: list[object] = []
    renewed = Lock(
        client,
        "stall-renewed",
        replicas=2,
        replica_timeout=0.2,
        watchdog_lease=1.5,
        renew_interval=0.5,
        on_lost=lost.append,
    )
    assert renewed.acquire()
    stopped = replicas_of(topology, master)[0]
    stopped.kill(signal.SIGSTOP)
    try:
        fresh = Lock(client, "stall-new", ttl=10, replicas=2, replica_timeout=0.2)
        with pytest.raises(ReplicationError) as info:
            fresh.acquire()
        assert (info.value.operation, info.value.acknowledged) == ("acquire", 1)
        with topology.admin(master) as c:
            assert c.exists(fresh.key) == 0

        with pytest.raises(ReplicationError) as info:
            held.extend(60, replace=True)
        assert (info.value.operation, info.value.wanted, info.value.acknowledged) == (
            "extend",
            2,
            1,
        )
        remaining = held.statistics().lease_remaining
        assert remaining is not None
        assert remaining <= 10
        assert not held.lost

        wait_until("the watchdog reports the loss", lambda: lost == [renewed], timeout=10)
        stats = renewed.statistics()
        assert stats.lost
        assert stats.renewal_failures >= 1
    finally:
        stopped.kill(signal.SIGCONT)
    # The reason is the last renewal's error or, when the estimate ran out while a renewal
    # was still waiting for acknowledgements, the renewer's deadline.
    with pytest.raises(LockLostError, match="could not renew before the lease ran out"):
        renewed.release()
    topology.wait_replicated(master, 2)
    assert held.extend(60, replace=True) > 50  # acknowledged again
    held.release()


def test_watchdog_batch_shares_one_wait(
    topology: Topology, master: RedisProcess, client: redis.Redis
) -> None:
    """Three watchdog holds on one client are renewed in one pipeline: every renewal is
    acknowledged by both replicas, with one WAIT per round trip, not one per hold."""
    locks = [
        Lock(client, f"batch-{i}", replicas=2, replica_timeout=0.3, watchdog_lease=0.9)
        for i in range(3)
    ]
    for lock in locks:
        assert lock.acquire()
    with topology.admin(master) as c:
        c.config_resetstat()
        wait_until("two renewals each", lambda: all(x.statistics().renewals >= 2 for x in locks))
        stats = c.info("commandstats")
    assert all(x.statistics().renewal_failures == 0 for x in locks)
    assert stats["cmdstat_wait"]["calls"] < stats["cmdstat_evalsha"]["calls"]
    for lock in locks:
        assert_on_replicas(topology, master, lock.key, str(lock.token))
        lock.release()


async def test_async_watchdog_batch_shares_one_wait(
    topology: Topology, master: RedisProcess, aclient: redis.asyncio.Redis
) -> None:
    locks = [
        AsyncLock(aclient, f"abatch-{i}", replicas=2, replica_timeout=0.3, watchdog_lease=0.9)
        for i in range(3)
    ]
    for lock in locks:
        assert await lock.acquire()
    with topology.admin(master) as c:
        c.config_resetstat()
        await async_wait_for(lambda: all(x.statistics().renewals >= 2 for x in locks))
        stats = c.info("commandstats")
    assert all(x.statistics().renewal_failures == 0 for x in locks)
    assert stats["cmdstat_wait"]["calls"] < stats["cmdstat_evalsha"]["calls"]
    for lock in locks:
        await lock.release()


def test_info_refused_by_acl_leaves_the_run_id_unknown(
    topology: Topology, master: RedisProcess
) -> None:
    """A user without INFO still gets replicas=k (the run_id is then unknown)."""
    with topology.admin(master) as c:
        c.execute_command("ACL", "SETUSER", "no-info", "on", "nopass", "~*", "&*", "+@all", "-info")
        try:
            user = redis.Redis(**master.client_kwargs(), username="no-info", password="x")
            with pytest.raises(redis.exceptions.NoPermissionError):
                user.info("server")
            lock = Lock(user, "acl", ttl=5, replicas=2)
            assert lock.acquire()
            assert_on_replicas(topology, master, lock.key, str(lock.token))
            assert lock.extend(5) > 5
            lock.release()
            user.close()
        finally:
            c.execute_command("ACL", "DELUSER", "no-info")


# ------------------------------------------------------------------ nothing extra without need


def test_plain_client_sends_no_wait_and_no_info(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    plain = redis.Redis(**redis_server.client_kwargs())
    admin.config_resetstat()
    lock = Lock(plain, "plain", ttl=5)
    for _ in range(3):
        assert lock.acquire()
        lock.extend(5)
        lock.extend(5, replace=True)
        lock.release()
    stats = admin.info("commandstats")
    assert "cmdstat_wait" not in stats
    # INFO once per client, not per write: what the server has natively (_core/features.py)
    assert stats["cmdstat_info"]["calls"] == 1
    plain.close()


def test_sentinel_client_without_replicas_sends_no_wait(
    topology: Topology, master: RedisProcess, client: redis.Redis
) -> None:
    with topology.admin(master) as c:
        c.config_resetstat()
        lock = Lock(client, "no-wait", ttl=5)
        assert lock.acquire()
        lock.extend(5)
        lock.release()
        assert "cmdstat_wait" not in c.info("commandstats")


# ------------------------------------------------------------------ failover and restart


def test_failover_keeps_a_replicated_hold_and_counts_the_reverification(
    fresh_topology: Topology, loop_thread: LoopThread
) -> None:
    """SENTINEL FAILOVER under two held locks: the watchdog's renewal and an explicit
    extend reach the new master (another run_id), find the hold there and keep it."""
    topo = fresh_topology
    client = topo.master_client()
    lost: list[object] = []
    lock = Lock(
        client, "fo", replicas=2, replica_timeout=0.5, watchdog_lease=6, on_lost=lost.append
    )

    async def make() -> tuple[redis.asyncio.Redis, AsyncFairLock]:
        c = topo.async_master_client()
        return c, AsyncFairLock(c, "fo-async", ttl=30, replicas=2, replica_timeout=0.5)

    aclient, alock = loop_thread.run(make())
    try:
        assert lock.acquire()
        assert loop_thread.run(alock.acquire())
        fence = lock.fencing_token
        old = topo.master()

        new = topo.failover()
        assert new is not old

        assert loop_thread.run(alock.extend(30, replace=True)) > 25
        assert alock.statistics().reverified == 1
        wait_until("the watchdog re-verified", lambda: lock.statistics().reverified == 1)
        assert not lock.lost
        assert lost == []
        assert lock.owned()
        assert lock.fencing_token == fence
        assert_on_replicas(topo, new, lock.key, str(lock.token))
        lock.release()
        loop_thread.run(alock.release())
        with topo.admin(new) as c:
            assert c.exists(lock.key, alock.key) == 0
    finally:
        loop_thread.run(aclose_master_client(aclient))
        close_master_client(client)


def test_master_restart_without_persistence_marks_holds_lost(
    fresh_topology: Topology, loop_thread: LoopThread
) -> None:
    """kill -9 and restart of the master: a new run_id and an empty dataset. The watchdog
    (Sentinel client, replicas=0: the run_id is tracked all the same) marks its hold lost
    naming both run_ids; an asyncio permit's extend raises LockLostError the same way."""
    topo = fresh_topology
    client = topo.master_client()
    lost: list[object] = []
    lock = Lock(client, "rs", watchdog_lease=3, on_lost=lost.append)

    async def make() -> tuple[redis.asyncio.Redis, AsyncSemaphore]:
        c = topo.async_master_client()
        return c, AsyncSemaphore(c, "rs-async", 2, ttl=30, replicas=1, replica_timeout=0.5)

    aclient, sem = loop_thread.run(make())
    try:
        assert lock.acquire()
        permit = loop_thread.run(sem.acquire())
        master = topo.master()
        before = topo.run_id(master)

        master.kill(signal.SIGKILL)
        master.start()
        after = topo.run_id(master)
        assert after != before
        assert topo.master() is master  # no failover: it came back within a second

        wait_until("the watchdog reports the loss", lambda: lost == [lock], timeout=10)
        reason = f"master changed (run_id {before[:8]}… → {after[:8]}…)"
        with pytest.raises(LockLostError, match=reason.replace("(", r"\(").replace(")", r"\)")):
            lock.release()
        with pytest.raises(LockLostError, match="not on the new master"):
            loop_thread.run(permit.extend(5))
        assert permit.lost
    finally:
        loop_thread.run(aclose_master_client(aclient))
        close_master_client(client)


# ------------------------------------------------------------------ bad input, before any I/O


@pytest.fixture(scope="module")
def dead() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    yield from closing_dead_clients()


CONSTRUCTORS: list[tuple[Any, str, dict[str, Any]]] = [
    (Lock, "sync", {}),
    (AsyncLock, "async", {}),
    (RLock, "sync", {}),
    (AsyncRLock, "async", {}),
    (ReadWriteLock, "sync", {}),
    (AsyncReadWriteLock, "async", {}),
    (FairLock, "sync", {}),
    (AsyncFairLock, "async", {}),
    (Semaphore, "sync", {"permits": 2}),
    (AsyncSemaphore, "async", {"permits": 2}),
]
IDS = [c[0].__name__ for c in CONSTRUCTORS]


@pytest.mark.parametrize(("cls", "flavour", "extra"), CONSTRUCTORS, ids=IDS)
@pytest.mark.parametrize(
    "bad",
    [
        {"replicas": True},
        {"replicas": -1},
        {"replicas": 1.0},
        {"replicas": "2"},
        {"replicas": None},
        {"replicas": 1001},
        {"replica_timeout": 0},
        {"replica_timeout": -1},
        {"replica_timeout": float("nan")},
        {"replica_timeout": float("inf")},
        {"replica_timeout": True},
        {"replica_timeout": "1"},
        {"replicas": 1, "ttl": 1, "replica_timeout": 0.6},  # more than half the lease
    ],
    ids=lambda d: "-".join(f"{k}={v!r}" for k, v in d.items()),
)
def test_bad_replica_options_raise_before_io(
    cls: Any,
    flavour: str,
    extra: dict[str, Any],
    bad: dict[str, Any],
    dead: tuple[redis.Redis, redis.asyncio.Redis],
) -> None:
    client = dead[0] if flavour == "sync" else dead[1]
    name = list(bad)[-1]  # the argument the message must name
    with pytest.raises(LockConfigError, match=name):
        cls(client, "job", **extra, **bad)


@pytest.mark.parametrize(("cls", "flavour", "extra"), CONSTRUCTORS, ids=IDS)
def test_good_replica_options_are_accepted(
    cls: Any, flavour: str, extra: dict[str, Any], dead: tuple[redis.Redis, redis.asyncio.Redis]
) -> None:
    client = dead[0] if flavour == "sync" else dead[1]
    cls(client, "job", **extra, replicas=0, replica_timeout=100, ttl=1)  # no WAIT: no bound
    cls(client, "job", **extra, replicas=1000, replica_timeout=0.001)


@pytest.mark.parametrize(("cls", "flavour", "extra"), CONSTRUCTORS, ids=IDS)
def test_cluster_client_rejects_replicas(cls: Any, flavour: str, extra: dict[str, Any]) -> None:
    """WAIT must run on the connection that wrote, which redis-py's cluster clients do not
    offer: ``replicas>0`` is refused (no I/O: the clients below never connected)."""
    if flavour == "sync":
        # A real RedisCluster connects in its constructor; an uninitialized instance is
        # enough for a check that must happen before any I/O.
        client: Any = redis.cluster.RedisCluster.__new__(redis.cluster.RedisCluster)
    else:
        client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=1)  # lazy
    with pytest.raises(LockConfigError, match="Redis Cluster"):
        cls(client, "job", **extra, replicas=1)
    cls(client, "job", **extra, replicas=0)
    if flavour == "async":
        asyncio.run(client.aclose())
