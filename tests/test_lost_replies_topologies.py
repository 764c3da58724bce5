# SPDX-License-Identifier: MIT
"""A reply lost after the command ran, through Redis Cluster and Sentinel clients.

``tests/test_lost_replies.py`` proves the scripts idempotent for every primitive through a
standalone ``redis.Redis``; this module does the same through the two other kinds of client
redis-py has, against real deployments (``tests/cluster.py``, ``tests/sentinel.py``). A
:class:`~redislock.testing.FaultProxy` sits in front of the one master that serves the lock,
and only the client under test is routed through it. Right before each call under test
the client's connection to that master is warmed (one command, so the next reply on it is
the call's, not a connection handshake's) and the proxy is set to lose its next reply
(``lose_reply``: the command ran, its reply never arrives, the connection is reset). Each
call checks that the fault hit (``lost_replies`` grew by one) and, from the master's
``INFO commandstats``, that the command really ran there twice when the client sent it
again (once for the lost reply, once for the retry).

Routing (redis-py 8.1):

* **Cluster**: ``address_remap``, a documented ``RedisCluster`` option that maps every
  address the cluster announces (``CLUSTER SLOTS``) to the one to connect to, here the
  lock's master to the proxy; the client's retry settings stay the defaults. The other
  route the issue suggested, ``CONFIG SET cluster-announce-port <proxy port>`` on the
  master, does show the proxy port in ``CLUSTER SLOTS``, but the master's replica then
  reconnects its replication link to the announced port too (seen: its ``master_port``
  becomes the proxy's), so the one-shot fault could hit the replication stream instead of
  the client's reply.
* **Sentinel**: a ``redis.sentinel.Sentinel`` subclass whose ``discover_master`` (the one
  place ``SentinelConnectionPool`` learns the master's address, for every new connection
  and for its ``owns_connection`` check) answers the proxy's address for that master. The
  pool class is still redis-py's ``SentinelConnectionPool``, so redislock still sees a
  Sentinel client (it tracks the master's run_id and sends its writes as one pipeline:
  script, ``WAIT`` with ``replicas=1``, ``INFO server``). The sentinels and the servers
  know nothing of the proxy, so no replication or sentinel traffic passes it.

What redis-py does with the lost reply, read from its 8.1 source and seen here:

* ``RedisCluster`` (sync and asyncio, defaults): every node client has
  ``Retry(NoBackoff(), 0)``; the cluster client itself retries ``ConnectionError`` and
  ``TimeoutError`` up to 10 times (``cluster_error_retry_attempts``; its ``Retry`` object
  only gives that count, no backoff sleep). Before sending again it drops the node's idle
  connections (``disconnect_free_connections``), moves the failed node to the end of its
  lists, and reloads the slot map (``NodesManager.initialize``: ``CLUSTER SLOTS`` from
  another node first; sync: at once, asyncio: before the next attempt); then it looks the
  slot up again and sends the command to the node serving it now, here the same master
  through the proxy again. The test checks that the slot map was read again
  (``cluster|slots`` calls grew on the nodes).
* ``Sentinel.master_for()`` with default settings does **not** send a command again:
  ``master_for`` builds its client with ``Redis.from_pool``, so the standalone default
  retry (``ExponentialWithJitterBackoff(0.01, 1)``, 10 retries) never reaches the pool,
  and the connection falls back to ``Retry(NoBackoff(), 0)`` (sync and asyncio). The lost
  reply reaches the caller as ``redis.exceptions.ConnectionError`` after the command ran
  once. So the Sentinel tests come in two parts: with the defaults, what the lock does
  with that error (acquire undone, extend applied once, the lock still owned, a repeated
  release no error); and with ``retry=`` the standalone client's default policy (a test
  about that setting), the same checks as through the standalone and cluster clients.

What must hold when the client sends the command again (as in ``test_lost_replies``):
acquire holds once, with a TTL, the local lease estimate ending no later than the key;
``extend(s)`` adds ``s`` seconds once, ``extend(s, replace=True)`` sets them; ``owned()``
and ``locked()`` are True; a re-entry (RLock) counts once; release is a normal release
(no false ``LockLostError``) and leaves nothing held. Lock, RLock, Semaphore and FairLock on
the cluster; Lock and RLock with Sentinel, ``replicas=0`` and ``replicas=1``. Every call is
bounded (``LIMIT`` seconds) and so is every test (``pytest.mark.timeout``).

With the Sentinel defaults an RLock's counts must match what the caller was told: a
re-entry that raised counts nothing, and a decrement that raised ran once and its retry
(its docstring says release "may be retried") counts once. These tests found both broken
(the re-entry stayed counted in Redis, so the lock outlived the caller's last release; the
retried decrement counted twice, so the lock was freed while the caller still held it
once); ``HoldCore`` now settles the re-entry and reuses the decrement's op id.
"""

from __future__ import annotations

import asyncio
import copy
import inspect as pyinspect
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.exceptions
import redis.sentinel

import redislock
from redislock._core.scripts import SCRIPTS
from redislock.aio import _driver as aio_driver
from redislock.server import RedisProcess
from redislock.sync import _driver as sync_driver
from redislock.testing import FaultProxy
from tests.cluster import LocalCluster, Node
from tests.primitives import KINDS, Actor, Env, Kind, Subject
from tests.sentinel import MASTER, Topology

pytestmark = pytest.mark.timeout(120)

NAME = "lost"
KEY = f"redislock:{{{NAME}}}"  # every key of every kind lies in this key's slot
TTL = 10.0
SLACK = 0.3  # seconds: round trips and scheduling between reading and acting
LIMIT = 10.0  # seconds one call may take; longer fails the test

CLUSTER_KINDS = [
    pytest.param(k, id=f"{k.id}-{k.flavour}")
    for k in KINDS
    if k.id in {"Lock", "RLock", "Semaphore", "FairLock"}
]
SENTINEL_KINDS = [
    pytest.param(k, id=f"{k.id}-{k.flavour}") for k in KINDS if k.id in {"Lock", "RLock"}
]


# ------------------------------------------------------------------ the route and its checks


@dataclass
class Route:
    """The client under test reaches the lock's master through ``proxy``."""

    proxy: FaultProxy
    admin: redis.Redis
    """A decoded client of the master itself (not through the proxy)."""
    warm: Callable[[], Awaitable[object]]
    """One command through the client under test to the lock's master."""
    topology_reads: Callable[[], int] | None = None
    """For a cluster: how many times the nodes answered ``CLUSTER SLOTS`` so far."""


def calls(admin: redis.Redis, command: str) -> int:
    """How many times the server ran ``command`` (``INFO commandstats``)."""
    stats = admin.info("commandstats")
    entry = stats.get(f"cmdstat_{command}", {})
    return int(entry.get("calls", 0)) if isinstance(entry, dict) else 0


async def armed(route: Route) -> tuple[int, int]:
    """Warm the connection, then set the fault; the lost count and the calls of EVALSHA and
    EXISTS (the commands the calls under test send) before it."""
    await route.warm()
    lost = route.proxy.lost_replies
    ran = calls(route.admin, "evalsha") + calls(route.admin, "exists")
    route.proxy.set_fault("lose_reply")
    return lost, ran


async def lost_once(route: Route, call: Callable[[], Awaitable[Any]]) -> Any:
    """``await call()`` with its reply lost and the command sent again by the client."""
    reads = route.topology_reads() if route.topology_reads is not None else 0
    lost, ran = await armed(route)
    try:
        async with asyncio.timeout(LIMIT):  # in this task: an RLock's owner is the task
            result = await call()
    finally:
        route.proxy.heal()
    assert route.proxy.lost_replies == lost + 1, "the fault did not hit: no reply was lost"
    now = calls(route.admin, "evalsha") + calls(route.admin, "exists")
    assert now >= ran + 2, "the command did not run twice (once lost, once sent again)"
    if route.topology_reads is not None:
        assert route.topology_reads() > reads, "the cluster client did not reload its slots"
    return result


async def lost_unretried(route: Route, call: Callable[[], Awaitable[Any]]) -> None:
    """``await call()`` with its reply lost, by a client that does not send it again: the
    call must raise ``redis.exceptions.ConnectionError`` after the command ran."""
    lost, ran = await armed(route)
    try:
        with pytest.raises(redis.exceptions.ConnectionError):
            async with asyncio.timeout(LIMIT):
                await call()
    finally:
        route.proxy.heal()
    assert route.proxy.lost_replies == lost + 1, "the fault did not hit: no reply was lost"
    now = calls(route.admin, "evalsha") + calls(route.admin, "exists")
    assert now >= ran + 1, "the command did not reach the server"


def held(route: Route) -> bool:
    """Whether the name is held in Redis."""
    return redislock.inspect(route.admin, NAME).held


def counts(route: Route) -> list[int]:
    """The hold count of each holder of the name (an RLock's re-entries)."""
    return [h.hold_count for h in redislock.inspect(route.admin, NAME).holders]


def pttl(route: Route) -> float:
    """The lock key's TTL, in seconds."""
    return int(route.admin.pttl(KEY)) / 1000.0


async def estimate_within_key(route: Route, lock: Subject) -> None:
    """The local lease estimate ends no later than the key."""
    before = time.monotonic()
    estimate = await lock.remaining()
    least = pttl(route)
    after = time.monotonic()  # after the PTTL's reply: the key ends by after + least
    assert estimate is not None
    # the key's end (as of `after`) is at least the estimate's end (as of `before`); PTTL
    # counts whole milliseconds
    assert before + estimate <= after + least + 0.002, (estimate, least)


MS = 0.002  # PTTL counts whole milliseconds


def assert_added_once(remaining: float, least: float, elapsed: float) -> None:
    """After ``extend(5)`` on a lock whose local estimate was ``remaining`` seconds (the key
    lives at least that long, :func:`estimate_within_key`): the key's TTL ``least`` (read
    ``elapsed`` seconds after the estimate) shows 5 s added once. Its lower bound is the
    estimate's own end plus 5, so however slowly the lost reply was sent again, a TTL that
    got nothing added fails; 5 s added twice exceeds the upper bound."""
    assert remaining + 5 - elapsed - MS <= least <= remaining + 5 + SLACK, (remaining, elapsed)


async def acts_once_when_sent_again(kind: Kind, route: Route, env: Env, **options: Any) -> None:
    """Every operation, each with its reply lost and sent again by the client."""
    actor = Actor(kind)
    try:
        lock = Subject(kind, kind.build(env, NAME, {"ttl": TTL, **options}), actor)

        assert await lost_once(route, lambda: lock.acquire(blocking=False))
        assert held(route)
        assert 0 < pttl(route) <= TTL
        await estimate_within_key(route, lock)

        began = time.monotonic()
        remaining = await lock.remaining()
        assert remaining is not None
        await lost_once(route, lambda: actor.call(lock.holder.extend, 5))
        assert_added_once(remaining, pttl(route), time.monotonic() - began)

        began = time.monotonic()
        await lost_once(route, lambda: actor.call(lock.holder.extend, 20, replace=True))
        assert 20 - (time.monotonic() - began) - MS <= pttl(route) <= 20
        await estimate_within_key(route, lock)

        assert await lost_once(route, lambda: actor.call(lock.holder.owned))
        assert await lost_once(route, lambda: actor.call(lock.obj.locked))

        if kind.id == "RLock":  # a re-entry counts once
            assert await lost_once(route, lambda: lock.acquire(blocking=False))
            assert counts(route) == [2]
            await lost_once(route, lock.release)
            assert counts(route) == [1]

        await lost_once(route, lock.release)  # no false LockLostError
        assert not held(route)
        stats = await actor.call(lock.holder.statistics)
        assert not stats.held
        assert not stats.lost
    finally:
        actor.close()


# ------------------------------------------------------------------ Cluster


def slots_reads(cluster: LocalCluster) -> int:
    """``CLUSTER SLOTS`` calls answered by all nodes so far (7.x counts ``cluster|slots``
    apart; 6.2 counts every ``cluster`` subcommand together)."""
    return sum(calls(n.admin, "cluster|slots") + calls(n.admin, "cluster") for n in cluster.nodes)


@dataclass
class ClusterRoute:
    master: Node
    proxy: FaultProxy

    def remap(self, address: tuple[str, int]) -> tuple[str, int]:
        """``address_remap``: the lock's master goes through the proxy, the rest direct."""
        return self.proxy.address if address == ("127.0.0.1", self.master.port) else address


@pytest.fixture
def cluster_route(cluster: LocalCluster) -> Iterator[ClusterRoute]:
    cluster.wait_healthy()
    cluster.flush()
    master = cluster.node_for(KEY)
    for script in SCRIPTS.values():  # EVALSHA finds them: the lost reply is the script's
        master.admin.script_load(script.source)
    with FaultProxy(("127.0.0.1", master.port)) as proxy:
        yield ClusterRoute(master, proxy)


@pytest.mark.parametrize("kind", CLUSTER_KINDS)
async def test_cluster_client_sends_again_and_the_lock_acts_once(
    kind: Kind, cluster: LocalCluster, cluster_route: ClusterRoute
) -> None:
    master, proxy = cluster_route.master, cluster_route.proxy
    if kind.asyncio:
        aclient = redis.asyncio.cluster.RedisCluster(
            **cluster.startup(), address_remap=cluster_route.remap
        )
        await aclient.initialize()
        try:
            node = aclient.get_node_from_key(KEY)
            assert node is not None
            assert (node.host, node.port) == proxy.address  # routed through the proxy

            async def awarm() -> object:
                await aio_driver.features(aclient)  # the INFO asked once per client
                return await aclient.exists(KEY)

            route = Route(proxy, master.admin, awarm, lambda: slots_reads(cluster))
            env = Env(None, aclient, [], [], [master.admin])
            await acts_once_when_sent_again(kind, route, env)
        finally:
            await aclient.aclose()
        return
    client = redis.cluster.RedisCluster(**cluster.startup(), address_remap=cluster_route.remap)
    try:
        node = client.get_node_from_key(KEY)  # type: ignore[no-untyped-call]
        assert (node.host, node.port) == proxy.address  # routed through the proxy

        async def warm() -> object:
            sync_driver.features(client)  # the INFO asked once per client, before the fault
            return client.exists(KEY)

        route = Route(proxy, master.admin, warm, lambda: slots_reads(cluster))
        env = Env(client, None, [], [], [master.admin])
        await acts_once_when_sent_again(kind, route, env)
    finally:
        client.close()


# ------------------------------------------------------------------ Sentinel


class RoutedSentinel(redis.sentinel.Sentinel):
    """``Sentinel`` that connects to the master at ``route[<address the sentinels give>]``
    (when there is one): ``discover_master`` is where ``SentinelConnectionPool`` gets the
    master's address for each new connection."""

    def __init__(self, route: dict[tuple[str, int], tuple[str, int]], *a: Any, **kw: Any):
        super().__init__(*a, **kw)  # type: ignore[no-untyped-call]
        self.route = route

    def discover_master(self, service_name: str) -> tuple[str, int]:
        host, port = super().discover_master(service_name)  # type: ignore[no-untyped-call]
        return self.route.get((str(host), int(port)), (host, port))


class AsyncRoutedSentinel(redis.asyncio.sentinel.Sentinel):
    """The asyncio twin of :class:`RoutedSentinel`."""

    def __init__(self, route: dict[tuple[str, int], tuple[str, int]], *a: Any, **kw: Any):
        super().__init__(*a, **kw)  # type: ignore[no-untyped-call]
        self.route = route

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        host, port = await super().discover_master(service_name)
        return self.route.get((str(host), int(port)), (host, port))


def default_retry(flavour: str) -> Any:
    """A copy of the ``retry`` a standalone ``redis.Redis`` (or ``redis.asyncio.Redis``)
    gets by default, read from its signature."""
    cls = redis.asyncio.Redis if flavour == "asyncio" else redis.Redis
    return copy.deepcopy(pyinspect.signature(cls.__init__).parameters["retry"].default)


@pytest.fixture(scope="module")
def topology(short_tmp: Path) -> Iterator[Topology]:
    with Topology(short_tmp / "lost-sentinel") as topo:
        yield topo


@pytest.fixture
def sentinel_route(topology: Topology) -> Iterator[tuple[RedisProcess, FaultProxy]]:
    master = topology.master()
    with topology.admin(master) as admin:
        admin.flushall()
        admin.execute_command("WAIT", 2, 2000)
        for script in SCRIPTS.values():
            admin.script_load(script.source)
    assert master.port is not None
    with FaultProxy(("127.0.0.1", master.port)) as proxy:
        yield master, proxy


@dataclass
class SentinelKit:
    route: Route
    env: Env
    close: Callable[[], Awaitable[None]]


async def sentinel_kit(
    kind: Kind, topology: Topology, master: RedisProcess, proxy: FaultProxy, *, retried: bool
) -> SentinelKit:
    """A ``master_for`` client of the kind's flavour through ``proxy`` (redis-py's defaults,
    or with ``retried`` the standalone client's default ``retry``)."""
    assert master.port is not None
    mapping = {("127.0.0.1", master.port): proxy.address}
    sentinel_kwargs = {"socket_timeout": 2}  # the sentinels' connections, not the master's
    extra = {"retry": default_retry(kind.flavour)} if retried else {}
    admin = topology.admin(master)
    if kind.asyncio:
        asentinel = AsyncRoutedSentinel(
            mapping, topology.sentinel_addresses(), sentinel_kwargs=sentinel_kwargs
        )
        aclient = asentinel.master_for(MASTER, **extra)

        async def aclose() -> None:
            await aclient.aclose()
            for s in asentinel.sentinels:
                await s.aclose()
            admin.close()

        route = Route(proxy, admin, lambda: aclient.exists(KEY))
        return SentinelKit(route, Env(None, aclient, [], [], [admin]), aclose)
    sentinel = RoutedSentinel(
        mapping, topology.sentinel_addresses(), sentinel_kwargs=sentinel_kwargs
    )
    client = sentinel.master_for(MASTER, **extra)  # type: ignore[no-untyped-call]

    async def warm() -> object:
        return client.exists(KEY)

    async def close() -> None:
        client.close()
        sentinel.close()
        admin.close()

    return SentinelKit(Route(proxy, admin, warm), Env(client, None, [], [], [admin]), close)


@pytest.mark.parametrize("replicas", [0, 1])
@pytest.mark.parametrize("kind", SENTINEL_KINDS)
async def test_sentinel_client_with_a_retry_sends_again_and_the_lock_acts_once(
    kind: Kind,
    replicas: int,
    topology: Topology,
    sentinel_route: tuple[RedisProcess, FaultProxy],
) -> None:
    master, proxy = sentinel_route
    kit = await sentinel_kit(kind, topology, master, proxy, retried=True)
    try:
        await kit.route.warm()
        assert proxy.connections >= 1  # the client reaches the master through the proxy
        await acts_once_when_sent_again(kind, kit.route, kit.env, replicas=replicas)
    finally:
        await kit.close()


@pytest.mark.parametrize("replicas", [0, 1])
@pytest.mark.parametrize("kind", SENTINEL_KINDS)
async def test_sentinel_client_defaults_report_the_lost_reply_and_the_lock_acts_once(
    kind: Kind,
    replicas: int,
    topology: Topology,
    sentinel_route: tuple[RedisProcess, FaultProxy],
) -> None:
    master, proxy = sentinel_route
    kit = await sentinel_kit(kind, topology, master, proxy, retried=False)
    route = kit.route
    actor = Actor(kind)
    try:
        await route.warm()
        assert proxy.connections >= 1  # the client reaches the master through the proxy
        lock = Subject(kind, kind.build(kit.env, NAME, {"ttl": TTL, "replicas": replicas}), actor)

        # acquire: the script ran, the caller gets the error, and the grant is undone
        await lost_unretried(route, lambda: lock.acquire(blocking=False))
        assert not held(route)
        assert not (await actor.call(lock.obj.statistics)).held
        assert await lock.acquire(blocking=False)
        assert held(route)

        # extend(add): applied once by the one run; the lock is still owned, not lost
        began = time.monotonic()
        remaining = await lock.remaining()
        assert remaining is not None
        await lost_unretried(route, lambda: actor.call(lock.holder.extend, 5))
        assert_added_once(remaining, pttl(route), time.monotonic() - began)
        await estimate_within_key(route, lock)
        began = time.monotonic()
        await lost_unretried(route, lambda: actor.call(lock.holder.extend, 20, replace=True))
        assert 20 - (time.monotonic() - began) - MS <= pttl(route) <= 20
        await estimate_within_key(route, lock)

        await lost_unretried(route, lambda: actor.call(lock.holder.owned))
        assert await actor.call(lock.holder.owned)
        await lost_unretried(route, lambda: actor.call(lock.obj.locked))
        assert await actor.call(lock.obj.locked)

        # release: it ran; the caller gets the error, and a second release is no error
        await lost_unretried(route, lock.release)
        assert not held(route)
        await lock.release()  # no false LockLostError
        stats = await actor.call(lock.holder.statistics)
        assert not stats.held
        assert not stats.lost
    finally:
        actor.close()
        await kit.close()


RLOCKS = [pytest.param(k, id=f"{k.id}-{k.flavour}") for k in KINDS if k.id == "RLock"]


@pytest.mark.parametrize("replicas", [0, 1])
@pytest.mark.parametrize("step", ["reentry", "decrement"])
@pytest.mark.parametrize("kind", RLOCKS)
async def test_sentinel_client_defaults_rlock_counts_match_what_the_caller_was_told(
    kind: Kind,
    step: str,
    replicas: int,
    topology: Topology,
    sentinel_route: tuple[RedisProcess, FaultProxy],
) -> None:
    """A re-entry that raised counts nothing (as an acquire that raised holds nothing);
    a decrement that raised ran once, and its retry (release "may be retried") counts
    once. Before the fix: the count in Redis was one more than the caller's (the lock
    outlived the caller's last release), and a retried decrement counted twice (the lock
    was freed while the caller still held it once)."""
    master, proxy = sentinel_route
    kit = await sentinel_kit(kind, topology, master, proxy, retried=False)
    route = kit.route
    actor = Actor(kind)
    try:
        lock = Subject(kind, kind.build(kit.env, NAME, {"ttl": TTL, "replicas": replicas}), actor)
        assert await lock.acquire(blocking=False)
        if step == "reentry":
            await lost_unretried(route, lambda: lock.acquire(blocking=False))
            assert counts(route) == [1]
            assert await actor.call(lock.obj.hold_count) == 1
        else:
            assert await lock.acquire(blocking=False)
            assert counts(route) == [2]
            await lost_unretried(route, lock.release)
            assert counts(route) == [1]  # it ran
            assert await actor.call(lock.obj.hold_count) == 2  # the caller was not told
            await lock.release()  # the retry
            assert counts(route) == [1]
            assert await actor.call(lock.obj.hold_count) == 1
        await lock.release()  # the caller's last release frees it
        assert counts(route) == []
        assert not held(route)
        stats = await actor.call(lock.holder.statistics)
        assert not stats.held
        assert not stats.lost
    finally:
        actor.close()
        await kit.close()
