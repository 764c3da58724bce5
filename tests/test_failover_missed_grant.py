# SPDX-License-Identifier: MIT
"""A Sentinel failover to a replica that missed the latest grant, on a real deployment
(:mod:`tests.sentinel`: one master, two replicas, three sentinels; redis-py's
``Sentinel.master_for()`` clients with their default settings).

How the replica misses it, deterministically: :meth:`Topology.cut_off` stops the replica
and closes its replication link on the master, holder A acquires, the master is killed
(SIGKILL, no persistence) while the replica is still stopped, and the sentinels fail over
by themselves. ``replica_priority=(1, 100)`` makes ``data[1]`` the replica they promote
whatever its offset, so the test chooses whether the promoted replica has the grant.

* It missed the grant (``replicas=0``; or ``replicas=1`` acknowledged by the other
  replica): client B acquires the same name on the new master while A still believes it
  holds it (A reaches the sentinels through fault proxies, reset from the master's death
  until B has written, so its watchdog cannot find the new master before): the double
  grant. The fencing counter went back with the data, so B's token EQUALS A's. The
  resource is the library's ``fenced_write`` script on a separate Redis (it accepts a
  token only if greater than every token it accepted before), so whichever hold writes
  first, the other's write with the same token is refused: 0 stale writes. (The torture
  oracle's rule, :func:`fenced_accepts`, refuses an equal token from another hold too.)
  Once A can reach the sentinels, its watchdog's first renewal on the new master sees
  another run_id and no hold: ``on_lost``, ``lost``, and ``LockLostError`` from
  ``release()``.
* It has the grant (``replicas=1``, the replica that acknowledged is the one promoted): B
  does not acquire; A's watchdog re-verifies the hold on the new master and keeps it. With
  ``replicas=2`` and one replica cut off, the acquire itself fails (ReplicationError): no
  grant, nothing to lose.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

import redislock
from redislock import (
    AsyncFairLock,
    AsyncLock,
    FairLock,
    Lock,
    LockLostError,
    ReplicationError,
    RLock,
)
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from redislock.testing.oracle import fenced_accepts
from redislock.testing.proxy import FaultProxy, ProxyLoop
from tests.flavors import AsyncFacade, LoopThread
from tests.sentinel import Topology, aclose_master_client, close_master_client, wait_until

NAME = "missed-grant"

WATCHDOG_LEASE = 20.0
"""A's watchdog lease, seconds: longer than the failover (about 5 s here: 3 s to see the
master down, then the promotion) and the steps up to B's writes, during which A cannot
renew; so A's loss is found by a renewal on the new master, not by its lease estimate
running out."""

RENEW_INTERVAL = 1.0
"""A's renewal interval, seconds; after a failed renewal the watchdog retries within 1 s."""

LOSS_BOUND = 10.0
"""Seconds within which A must be told once it can reach the sentinels again: one renewal
retry (at most 1 s) plus redis-py's reconnection to the new master (it retries a failed
connection up to 10 times, at most 1 s apart), with margin for a loaded machine."""


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def topo(short_tmp: Path, request: pytest.FixtureRequest) -> Iterator[Topology]:
    """A deployment of its own whose sentinels promote ``data[1]`` first and see a killed
    master down after 3 s (see :class:`Topology` for why not 1 s)."""
    # A plain directory name: a sentinel given a config path with brackets ignores it.
    tag = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name[-32:])
    with Topology(short_tmp / f"mg-{tag}", replica_priority=(1, 100), down_after=3000) as t:
        yield t


@pytest.fixture
def resource(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """The protected resource: a Redis of its own (not part of the Sentinel deployment)."""
    store = redis.Redis(**redis_server.client_kwargs(), decode_responses=True)
    store.delete(*RESOURCES)
    yield store
    store.delete(*RESOURCES)
    store.close()


A_FIRST = "test:missed-grant:a-first"
"""A resource A writes to before the failover, B after its grant."""
B_FIRST = "test:missed-grant:b-first"
"""A resource B writes to after its grant, then A (the stale holder)."""
RESOURCES = (A_FIRST, B_FIRST)


# ------------------------------------------------------------------ helpers


def fenced_write(store: redis.Redis, resource: str, fence: int | None, hold: str) -> bool:
    """``fenced_write.lua`` at ``resource``: whether the write with ``fence`` was accepted."""
    assert fence is not None
    ok, _last = store.eval(SCRIPTS["fenced_write"].source, 1, resource, fence, "by", hold)
    return int(ok) == 1


class Clients:
    """Sentinel master clients and lock objects of one flavour ("sync" or "async": an
    ``AsyncFacade`` over the asyncio kind, run on ``loop_thread``)."""

    def __init__(self, topo: Topology, flavour: str, lt: LoopThread) -> None:
        self.flavour = flavour
        self.lt = lt
        self.sync: list[redis.Redis] = []
        self.aio: list[redis.asyncio.Redis] = []
        self.topo = topo

    def client(self, via: list[tuple[str, int]] | None = None) -> Any:
        """A new client of the Sentinel master (one per holder: A and B are two apps),
        asking the sentinels through the addresses ``via`` if given."""
        if self.flavour == "sync":
            c = self.topo.master_client(via=via)
            self.sync.append(c)
            return c

        async def make() -> redis.asyncio.Redis:
            return self.topo.async_master_client(via=via)

        ac = self.lt.run(make())
        self.aio.append(ac)
        return ac

    def lock(self, kind: str, client: Any, **kw: Any) -> Any:
        """A lock object of ``kind`` ("lock", "fair", "rlock") named :data:`NAME`."""
        if self.flavour == "sync":
            cls: Any = {"lock": Lock, "fair": FairLock, "rlock": RLock}[kind]
            return cls(client, NAME, **kw)
        acls: Any = {"lock": AsyncLock, "fair": AsyncFairLock}[kind]
        return AsyncFacade(acls(client, NAME, **kw), self.lt)

    def close(self) -> None:
        for c in self.sync:
            close_master_client(c)
        for ac in self.aio:
            self.lt.run(aclose_master_client(ac))


@pytest.fixture
def clients_of(topo: Topology, loop_thread: LoopThread) -> Iterator[dict[str, Clients]]:
    """``clients_of[flavour]``, closed afterwards."""
    made = {f: Clients(topo, f, loop_thread) for f in ("sync", "async")}
    yield made
    for c in made.values():
        c.close()


@pytest.fixture
def sentinel_proxies(topo: Topology) -> Iterator[list[FaultProxy]]:
    """A fault proxy in front of each sentinel, for holder A's client: with them reset, A
    cannot find the new master, so it keeps believing it holds until they heal (as a
    holder cut off from the sentinels, or paused, would)."""
    with ProxyLoop() as loop:
        proxies = [FaultProxy(a, loop=loop).start() for a in topo.sentinel_addresses()]
        try:
            yield proxies
        finally:
            for p in proxies:
                p.stop()


def holds_on(topo: Topology, node: RedisProcess, key: str, token: str) -> bool:
    """Whether ``token``'s hold is in ``key`` on ``node`` (string or hash kinds)."""
    with topo.admin(node) as c:
        kind = c.type(key)
        if kind == "string":
            return str(c.get(key)).startswith(token + "|")
        return kind == "hash" and bool(c.hexists(key, token))


def inner(lock: Any) -> Any:
    """The lock object ``on_lost`` is called with (the asyncio one behind a facade)."""
    return getattr(lock, "inner", lock)


def earlier_holds(clients: Clients, kind: str, client: Any, store: redis.Redis) -> None:
    """Two holds every node has, each writing to both resources: the fencing counter is at
    2 everywhere and each resource has accepted 1 then 2."""
    for i in (1, 2):
        earlier = clients.lock(kind, client, ttl=10)
        assert earlier.acquire(blocking=False)
        assert earlier.fencing_token == i
        for res in RESOURCES:
            assert fenced_write(store, res, earlier.fencing_token, f"earlier-{i}")
        earlier.release()


# ------------------------------------------------------------------ the grant is lost


MISSED = [
    pytest.param("lock", "sync", 0, id="Lock-replicas0"),
    pytest.param("lock", "async", 0, id="AsyncLock-replicas0"),
    pytest.param("fair", "sync", 0, id="FairLock-replicas0"),
    pytest.param("rlock", "sync", 0, id="RLock-replicas0"),
    pytest.param("lock", "sync", 1, id="Lock-replicas1-promoted-replica-did-not-ack"),
]


@pytest.mark.parametrize(("kind", "flavour", "replicas"), MISSED)
def test_failover_to_a_replica_that_missed_the_grant_is_fenced_and_reported(
    kind: str,
    flavour: str,
    replicas: int,
    topo: Topology,
    clients_of: dict[str, Clients],
    sentinel_proxies: list[FaultProxy],
    resource: redis.Redis,
) -> None:
    """The double grant happens: B's token equals A's, the fenced resource accepts only one
    hold's writes for that token (0 stale writes), and A is told of the loss at its first
    renewal on the new master. With ``replicas=1`` the same happens when the replica
    Sentinel promotes is not the one that acknowledged."""
    clients = clients_of[flavour]
    old, promoted, other = topo.data
    client_a = clients.client(via=[p.address for p in sentinel_proxies])
    client_b = clients.client()
    earlier_holds(clients, kind, client_a, resource)
    topo.wait_replicated(old, 2)

    lost: list[object] = []
    a = clients.lock(
        kind,
        client_a,
        replicas=replicas,
        watchdog_lease=WATCHDOG_LEASE,
        renew_interval=RENEW_INTERVAL,
        on_lost=lost.append,
    )
    with topo.cut_off(promoted):
        assert a.acquire(blocking=False)
        token_a = a.fencing_token
        assert token_a == 3
        # The grant reaches the other replica (for replicas=1 WAIT has proved it already).
        wait_until("the grant on the other replica", lambda: holds_on(topo, other, a.key, a.token))
        assert fenced_write(resource, A_FIRST, token_a, "A")  # A's own section: accepted
        for p in sentinel_proxies:
            p.set_fault("reset")  # A cannot find the new master until they heal
        old.kill(signal.SIGKILL)  # the master dies; the promoted replica never gets the grant
    assert not holds_on(topo, promoted, a.key, a.token)

    new = topo.failover()  # automatic: the sentinels see the master down
    assert new is promoted
    with topo.admin(new) as c:
        info = redislock.inspect(c, NAME)
    assert info.holders == ()
    assert info.fencing_counter == token_a - 1  # the counter went back with the data
    assert not holds_on(topo, other, a.key, a.token)  # resynced from the new master: gone

    # The double grant: both believe they hold the lock.
    b = clients.lock(kind, client_b, ttl=30)
    assert b.acquire(blocking=False)
    assert not a.lost
    assert lost == []
    token_b = b.fencing_token
    assert token_b == token_a  # the same token, handed out twice

    # Fencing: an equal token from another hold is refused, whichever hold came first.
    assert not fenced_write(resource, A_FIRST, token_b, "B")  # A wrote token 3 first
    assert fenced_write(resource, B_FIRST, token_b, "B")
    assert not fenced_write(resource, B_FIRST, token_a, "A")  # the stale holder's write
    assert not fenced_accepts("x", token_b, "B", token_a, "A")  # the oracle's rule agrees
    assert not fenced_accepts("x", token_a, "A", token_b, "B")
    # Each resource accepted token 3 from one hold only: no stale write got through.
    assert resource.hgetall(A_FIRST) == {"_fence": "3", "by": "A"}
    assert resource.hgetall(B_FIRST) == {"_fence": "3", "by": "B"}

    # A is told: its first renewal on the new master sees another run_id and no hold.
    for p in sentinel_proxies:
        p.heal()
    wait_until("A's watchdog reports the loss", lambda: lost == [inner(a)], LOSS_BOUND)
    assert a.lost
    assert a.statistics().lost
    with pytest.raises(LockLostError, match=r"master changed .* not on the new master"):
        a.release()

    # B gets through once it takes a new hold: the counter has moved past A's token.
    b.release()
    again = clients.lock(kind, client_b, ttl=30)
    assert again.acquire(blocking=False)
    assert again.fencing_token == token_a + 1
    assert fenced_write(resource, A_FIRST, again.fencing_token, "B again")
    again.release()


# ------------------------------------------------------------------ the grant survives


def test_failover_to_the_replica_that_acknowledged_keeps_the_hold(
    topo: Topology, clients_of: dict[str, Clients], resource: redis.Redis
) -> None:
    """``replicas=1`` with the other replica cut off: WAIT is answered by the replica that
    Sentinel then promotes, so after the master dies the hold is there, B does not acquire,
    and A's watchdog re-verifies the hold on the new master and keeps it (no double grant).
    With ``replicas=2`` the same acquire fails instead: ReplicationError, nothing held."""
    clients = clients_of["sync"]
    old, promoted, cut = topo.data
    client_a, client_b = clients.client(), clients.client()
    earlier_holds(clients, "lock", client_a, resource)
    topo.wait_replicated(old, 2)

    lost: list[object] = []
    a = clients.lock(
        "lock",
        client_a,
        replicas=1,
        watchdog_lease=WATCHDOG_LEASE,
        renew_interval=RENEW_INTERVAL,
        on_lost=lost.append,
    )
    with topo.cut_off(cut):
        both = clients.lock("lock", client_a, ttl=10, replicas=2, replica_timeout=0.3)
        with pytest.raises(ReplicationError) as err:
            both.acquire(blocking=False)
        assert (err.value.wanted, err.value.acknowledged) == (2, 1)
        with topo.admin(old) as c:
            assert c.exists(a.key) == 0  # the shortfall undid the grant

        assert a.acquire(blocking=False)  # acknowledged by the promoted-to-be replica
        assert holds_on(topo, promoted, a.key, a.token)  # no waiting: WAIT proved it
        token_a = a.fencing_token
        assert token_a == 4  # the undone grant used 3
        old.kill(signal.SIGKILL)
    assert not holds_on(topo, cut, a.key, a.token)

    new = topo.failover()
    assert new is promoted
    b = clients.lock("lock", client_b, ttl=30)
    assert not b.acquire(blocking=False)  # no double grant
    with topo.admin(new) as c:
        assert redislock.inspect(c, NAME).fencing_counter == token_a

    wait_until("A's watchdog re-verified the hold", lambda: a.statistics().reverified == 1)
    assert not a.lost
    assert lost == []
    assert a.owned()
    assert a.fencing_token == token_a
    assert holds_on(topo, cut, a.key, a.token)  # the cut replica resynced from the new one
    assert fenced_write(resource, A_FIRST, token_a, "A")
    a.release()
    assert b.acquire(blocking=False)
    assert b.fencing_token == token_a + 1
    b.release()
