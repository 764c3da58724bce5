# SPDX-License-Identifier: MIT
"""Every primitive on a real Redis Cluster (3 masters + 3 replicas, ``tests/cluster.py``),
with ``redis.cluster.RedisCluster`` and ``redis.asyncio.cluster.RedisCluster``.

What it shows:

* Each kind (``Lock``, ``RLock``, the read and the write side of ``ReadWriteLock``,
  ``FairLock``, a ``Semaphore`` permit), sync and asyncio, acquires, extends, answers
  ``owned()``/``locked()``, excludes a second client, releases, and hands out strictly
  increasing fencing tokens; a blocked waiter on another client is woken by the release.
  Every key the kind writes (lock, fence, wait markers, the fair queue) lies in the slot of
  the lock key (``redis.crc.key_slot``), as do the names of its wake-up and grant channels,
  so no script gets CROSSSLOT and a slot migration moves a lock whole.
* The watchdog renews many leases whose names fall on all three masters. A ``RedisCluster``
  pipeline refuses EVALSHA, so the renewers batch only plain clients and renew cluster
  leases one request each; the leases stay alive and are never reported lost.
* ``CLUSTER FAILOVER`` and ``CLUSTER FAILOVER FORCE`` of the master holding a lock, while a
  rival client keeps trying to take it: every call returns or raises a redis-py error within
  a bound (a hang fails the test), the rival never gets in, and afterwards the holder's
  extend, renewals and release work on the new master (MOVED followed, NOSCRIPT reloaded).
  A forced failover to a replica whose link was cut loses the lock: the holder is told
  (``on_lost``, ``LockLostError``) at its next renewal, and the fencing counter goes back
  with the data, as the safety model (docs/safety.md) says.
* A slot migration of a held lock: at each stage (``MIGRATING``, part of the keys moved,
  all moved, ``SETSLOT NODE``) every call returns a right answer or raises a redis-py
  error (TRYAGAIN exhausted: ``ClusterError``) within a bound, never a wrong one (a rival
  acquiring, ``owned()`` false, a ``LockLostError``); after it the lock is intact.

The CLI (``redislock inspect``/``list``) takes a single-node URL and does not claim cluster
support, so it is not tested here.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
import redis.exceptions
from redis.crc import key_slot

from redislock import (
    AcquireTimeoutError,
    AsyncFairLock,
    AsyncLock,
    AsyncPermit,
    AsyncReadWriteLock,
    AsyncRLock,
    AsyncSemaphore,
    FairLock,
    Lock,
    LockLostError,
    Permit,
    ReadWriteLock,
    RLock,
    Semaphore,
)
from redislock._core.keys import FairKeys, HoldKeys, LockKeys
from redislock._core.scripts import SCRIPTS
from redislock._core.validate import check_name
from tests.cluster import LocalCluster, Node

T = TypeVar("T")

KINDS = ["lock", "rlock", "read", "write", "fair", "semaphore"]
RIVAL = {"read": "write"}  # the kind that excludes ``kind`` (default: the kind itself)
LIMIT = 20.0  # seconds any single call may take; longer counts as a hang
WAIT_MARKERS = (":wait", ":rwait", ":queue")  # a waiter of some kind is registered


# ------------------------------------------------------------------ adapters


class SyncHold:
    """One hold of any kind behind one interface: ``take``/``release``/``extend``/... (a
    ``Semaphore`` of 1 permit keeps the ``Permit`` it got)."""

    def __init__(self, kind: str, client: Any, name: str, **kw: Any) -> None:
        self.kind = kind
        self.sem: Semaphore | None = None
        self.permit: Permit | None = None
        self.obj: Any = None
        if kind == "lock":
            self.obj = Lock(client, name, **kw)
        elif kind == "rlock":
            self.obj = RLock(client, name, **kw)
        elif kind == "fair":
            self.obj = FairLock(client, name, **kw)
        elif kind == "read":
            self.obj = ReadWriteLock(client, name, **kw).read()
        elif kind == "write":
            self.obj = ReadWriteLock(client, name, **kw).write()
        else:
            self.sem = Semaphore(client, name, 1, **kw)

    @property
    def handle(self) -> Any:
        """The object that holds: the lock, or the permit."""
        return self.obj if self.sem is None else self.permit

    def take(self, blocking: bool = True, timeout: float | None = None) -> bool:
        if self.sem is None:
            return bool(self.obj.acquire(blocking, timeout))
        try:
            self.permit = self.sem.acquire(blocking, timeout)
        except AcquireTimeoutError:
            return False
        return True

    def release(self) -> None:
        self.handle.release()

    def extend(self, seconds: float) -> float:
        return float(self.handle.extend(seconds))

    def owned(self) -> bool:
        return self.handle is not None and bool(self.handle.owned())

    def locked(self) -> bool:
        return bool((self.obj if self.sem is None else self.sem).locked())

    @property
    def fence(self) -> int:
        token = self.handle.fencing_token
        assert isinstance(token, int)
        return token

    @property
    def lost(self) -> bool:
        return bool(self.handle.lost)

    @property
    def renewals(self) -> int:
        return int(self.handle.statistics().renewals)


class AsyncHold:
    """:class:`SyncHold` for the asyncio kinds."""

    def __init__(self, kind: str, client: Any, name: str, **kw: Any) -> None:
        self.kind = kind
        self.sem: AsyncSemaphore | None = None
        self.permit: AsyncPermit | None = None
        self.obj: Any = None
        if kind == "lock":
            self.obj = AsyncLock(client, name, **kw)
        elif kind == "rlock":
            self.obj = AsyncRLock(client, name, **kw)
        elif kind == "fair":
            self.obj = AsyncFairLock(client, name, **kw)
        elif kind == "read":
            self.obj = AsyncReadWriteLock(client, name, **kw).read()
        elif kind == "write":
            self.obj = AsyncReadWriteLock(client, name, **kw).write()
        else:
            self.sem = AsyncSemaphore(client, name, 1, **kw)

    @property
    def handle(self) -> Any:
        return self.obj if self.sem is None else self.permit

    async def take(self, blocking: bool = True, timeout: float | None = None) -> bool:
        if self.sem is None:
            return bool(await self.obj.acquire(blocking, timeout))
        try:
            self.permit = await self.sem.acquire(blocking, timeout)
        except AcquireTimeoutError:
            return False
        return True

    async def release(self) -> None:
        await self.handle.release()

    async def extend(self, seconds: float) -> float:
        return float(await self.handle.extend(seconds))

    async def owned(self) -> bool:
        return self.handle is not None and bool(await self.handle.owned())

    async def locked(self) -> bool:
        return bool(await (self.obj if self.sem is None else self.sem).locked())

    @property
    def fence(self) -> int:
        token = self.handle.fencing_token
        assert isinstance(token, int)
        return token

    @property
    def lost(self) -> bool:
        return bool(self.handle.lost)

    @property
    def renewals(self) -> int:
        return int(self.handle.statistics().renewals)


# ------------------------------------------------------------------ helpers


def lock_key(name: str) -> str:
    return LockKeys.for_name(name).lock


def slot_of(name: str) -> int:
    return key_slot(lock_key(name).encode())


def name_on(cluster: LocalCluster, master: Node, base: str) -> str:
    """A lock name whose slot ``master`` serves."""
    slots = master.view()[master.id].slots
    for i in range(10_000):
        name = f"{base}-{i}"
        if slot_of(name) in slots:
            return name
    raise AssertionError(f"no name for {master}")


def cluster_keys(cluster: LocalCluster) -> list[str]:
    """Every key on every master (SCAN)."""
    return [str(k) for node in cluster.masters() for k in node.admin.scan_iter(count=1000)]


def assert_one_slot(cluster: LocalCluster, name: str, *, at_least: int = 1) -> list[str]:
    """Every key in the (flushed) cluster belongs to lock ``name`` (or is the fencing
    counter of its slot) and lies in its slot."""
    slot = slot_of(name)
    keys = cluster_keys(cluster)
    assert len(keys) >= at_least, keys
    for key in keys:
        assert f"{{{name}}}" in key or key == LockKeys.for_name(name).fence, key
        assert key_slot(key.encode()) == slot, f"{key} is not in slot {slot}"
    return keys


def is_waiting(cluster: LocalCluster, name: str) -> bool:
    node = cluster.node_for(lock_key(name))
    return any(node.admin.exists(lock_key(name) + m) for m in WAIT_MARKERS)


@dataclass
class Outcome:
    """What one bounded call did: its value, or the exception it raised."""

    value: object = None
    error: BaseException | None = None

    def check(self, right: Callable[[object], bool], what: str) -> None:
        """A right answer, or a redis-py error (a failure the caller is told about)."""
        if self.error is None:
            assert right(self.value), f"{what}: wrong answer {self.value!r}"
        else:
            assert isinstance(self.error, redis.exceptions.RedisError), (
                f"{what}: raised {self.error!r}, neither a right answer nor a redis-py error"
            )


class Owner:
    """A daemon thread that makes every call of one holder (an ``RLock`` or a
    ``ReadWriteLock`` hold belongs to the thread that took it), each call bounded."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], object], Outcome, threading.Event] | None]
        self._queue = queue.SimpleQueue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fn, out, done = item
            try:
                out.value = fn()
            except Exception as exc:
                out.error = exc
            done.set()

    def call(self, fn: Callable[[], object]) -> Outcome:
        """Run ``fn`` on the thread; fail the test if it has not returned within LIMIT s."""
        out, done = Outcome(), threading.Event()
        self._queue.put((fn, out, done))
        if not done.wait(LIMIT):
            pytest.fail(f"{fn} did not return within {LIMIT} s (a hang)")
        return out

    def __call__(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the thread, bounded; its result, or raise its exception here."""
        out = self.call(fn)
        if out.error is not None:
            raise out.error
        return out.value  # type: ignore[return-value]

    def close(self) -> None:
        self._queue.put(None)


@pytest.fixture
def owner() -> Iterator[Callable[[], Owner]]:
    """A factory of :class:`Owner` threads (ended at the end)."""
    made: list[Owner] = []

    def make() -> Owner:
        made.append(Owner())
        return made[-1]

    yield make
    for o in made:
        o.close()


async def abounded(call: Awaitable[object]) -> Outcome:
    """:func:`bounded` for a coroutine."""
    out = Outcome()
    try:
        out.value = await asyncio.wait_for(call, LIMIT)
    except TimeoutError:
        pytest.fail(f"{call} did not return within {LIMIT} s (a hang)")
    except Exception as exc:
        out.error = exc
    return out


def is_true(v: object) -> bool:
    return v is True


def is_false(v: object) -> bool:
    return v is False


def is_ttl(v: object) -> bool:
    return isinstance(v, float) and v > 0


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """Note an observation of a fault test (printed: ``pytest -rA`` shows it)."""

    def note(key: str, value: object) -> None:
        print(f"observed in {request.node.name}: {key} = {value!r}")

    return note


@pytest.fixture
def sync_client(cluster: LocalCluster, rc: redis.cluster.RedisCluster) -> Iterator[Any]:
    """A factory of extra sync cluster clients (closed at the end)."""
    made: list[redis.cluster.RedisCluster] = []

    def make(**kw: Any) -> redis.cluster.RedisCluster:
        client = redis.cluster.RedisCluster(**cluster.startup(), **({"socket_timeout": 5} | kw))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
async def async_client(
    cluster: LocalCluster, arc: redis.asyncio.cluster.RedisCluster
) -> AsyncIterator[Any]:
    """A factory of extra asyncio cluster clients (closed at the end)."""
    made: list[redis.asyncio.cluster.RedisCluster] = []

    async def make(**kw: Any) -> redis.asyncio.cluster.RedisCluster:
        client = redis.asyncio.cluster.RedisCluster(
            **cluster.startup(), **({"socket_timeout": 5} | kw)
        )
        await client.initialize()
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()


# ================================================================== keys


def test_every_key_of_every_kind_shares_the_slot_of_its_lock_key() -> None:
    """The key layouts, by construction: a lock's keys (and its wake-up and grant channels,
    declared among a script's KEYS) all hash to the lock key's slot, for names that
    themselves contain braces too."""
    for name in ["job", "a{b}c", "{x}", "a}b", "{}", "ütf-8", "x" * 300]:
        assert check_name(name) == name  # names starting with "}" are refused
        slot = slot_of(name)
        keys = [*LockKeys.for_name(name), *HoldKeys.for_name(name)]
        fair = FairKeys.for_name(name)
        keys += [fair.lock, fair.fence, fair.queue, fair.leases, fair.info, fair.grant]
        assert {key_slot(k.encode()) for k in keys} == {slot}, name


def test_cluster_fixture_is_three_masters_with_one_linked_replica_each(
    cluster: LocalCluster, rc: redis.cluster.RedisCluster
) -> None:
    """The fixture's cluster: 6 nodes, 3 masters covering all 16384 slots, each master with
    one replica whose link is up, and redis-py sees the same layout."""
    assert cluster.healthy()
    masters = cluster.masters()
    assert len(masters) == 3
    assert len(cluster.slot_owners()) == 16384
    for master in masters:
        replica = cluster.replica_of(master)
        assert replica.info("replication")["master_link_status"] == "up"
    primaries = rc.get_primaries()  # type: ignore[no-untyped-call]
    assert {n.name for n in primaries} == {m.name for m in masters}


# ================================================================== every kind, sync


@pytest.mark.parametrize("decode", [False, True], ids=["bytes", "decoded"])
@pytest.mark.parametrize("kind", KINDS)
def test_kind_basics_sync(cluster: LocalCluster, sync_client: Any, kind: str, decode: bool) -> None:
    """Acquire, owned/locked, extend, exclusion of a second client, release, re-acquire with
    a higher fencing token; every key in the lock's slot, on the master serving it."""
    name = f"basics-{kind}"
    a = SyncHold(kind, sync_client(decode_responses=decode), name, ttl=10)
    b = SyncHold(RIVAL.get(kind, kind), sync_client(decode_responses=decode), name, ttl=10)
    assert a.take(blocking=False)
    first = a.fence
    assert a.owned()
    assert a.locked()
    assert 10 < a.extend(5) <= 15.01
    assert not b.take(blocking=False)
    assert b.locked()
    assert_one_slot(cluster, name, at_least=2)  # the lock and its fencing counter
    node = cluster.node_for(lock_key(name))
    assert node.admin.exists(lock_key(name)) == 1  # on the master serving the slot
    a.release()
    assert not a.owned()
    assert not b.locked()
    assert b.take(blocking=False)
    second = b.fence
    assert second > first
    b.release()
    assert a.take(blocking=False)
    assert a.fence > second
    a.release()


@pytest.mark.parametrize("kind", KINDS)
def test_kind_handoff_sync(cluster: LocalCluster, sync_client: Any, kind: str) -> None:
    """A waiter on another client blocks, then is woken by the release: with a 20 s
    recheck interval, a 30 s lease and a 30 s waiter lease, nothing but the release's
    wake-up lets it in within 3 s. Its keys (wait markers, queue) share the slot too. A
    Lock or FairLock release publishes the grant from inside fair.lua on the name's grant
    channel (classic PUBLISH reaches every node, whichever node the waiter's process
    subscribed on), so this hand-off also shows the grant reaches another client."""
    name = f"handoff-{kind}"
    holder = SyncHold(RIVAL.get(kind, kind), sync_client(), name, ttl=30)
    extra = {"waiter_lease": 30.0} if kind == "fair" else {}
    waiter = SyncHold(
        kind, sync_client(socket_timeout=30), name, ttl=30, recheck_interval=20.0, **extra
    )
    assert holder.take(blocking=False)
    result: dict[str, Any] = {}

    def wait() -> None:  # RLock and ReadWriteLock holds belong to this thread
        result["ok"] = waiter.take(timeout=15)
        result["at"] = time.monotonic()
        result["fence"] = waiter.fence
        waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not is_waiting(cluster, name):
            assert time.monotonic() < deadline, "the waiter never registered"
            time.sleep(0.01)
        assert_one_slot(cluster, name, at_least=3)
        assert "ok" not in result
        fence = holder.fence
        released = time.monotonic()
        holder.release()
    finally:
        thread.join(LIMIT)
    assert not thread.is_alive()
    assert result["ok"] is True
    assert result["at"] - released < 3.0
    assert result["fence"] > fence


def test_watchdog_renews_leases_on_every_master_sync(
    cluster: LocalCluster, rc: redis.cluster.RedisCluster
) -> None:
    """Twelve watchdog leases of all kinds, their names spread over the three masters, on
    one ``RedisCluster`` (whose pipeline refuses EVALSHA, so the renewer sends each renewal
    alone): each renewed three times, a whole 1 s lease's worth, none lost, every key still
    alive in Redis."""
    names = [f"wd-{i}" for i in range(12)]
    owners = cluster.slot_owners()
    assert len({owners[slot_of(n)] for n in names}) == 3
    lost: list[object] = []
    holds = [
        SyncHold(KINDS[i % len(KINDS)], rc, n, ttl=None, watchdog_lease=1.0, on_lost=lost.append)
        for i, n in enumerate(names)
    ]
    for h in holds:
        assert h.take(blocking=False)
    deadline = time.monotonic() + 10
    while min(h.renewals for h in holds) < 3:
        assert time.monotonic() < deadline, [h.renewals for h in holds]
        time.sleep(0.05)
    assert lost == []
    for h, n in zip(holds, names, strict=True):
        assert not h.lost
        assert h.owned()
        assert rc.pttl(lock_key(n)) > 0
        h.release()


# ================================================================== every kind, asyncio


@pytest.mark.parametrize("decode", [False, True], ids=["bytes", "decoded"])
@pytest.mark.parametrize("kind", KINDS)
async def test_kind_basics_async(
    cluster: LocalCluster, async_client: Any, kind: str, decode: bool
) -> None:
    """:func:`test_kind_basics_sync` with the asyncio kinds and cluster client."""
    name = f"abasics-{kind}"
    a = AsyncHold(kind, await async_client(decode_responses=decode), name, ttl=10)
    b = AsyncHold(RIVAL.get(kind, kind), await async_client(decode_responses=decode), name, ttl=10)
    assert await a.take(blocking=False)
    first = a.fence
    assert await a.owned()
    assert await a.locked()
    assert 10 < await a.extend(5) <= 15.01
    assert not await b.take(blocking=False)
    assert await b.locked()
    assert_one_slot(cluster, name, at_least=2)
    await a.release()
    assert not await a.owned()
    assert not await b.locked()
    assert await b.take(blocking=False)
    second = b.fence
    assert second > first
    await b.release()
    assert await a.take(blocking=False)
    assert a.fence > second
    await a.release()


@pytest.mark.parametrize("kind", KINDS)
async def test_kind_handoff_async(cluster: LocalCluster, async_client: Any, kind: str) -> None:
    """:func:`test_kind_handoff_sync` with a waiting task."""
    name = f"ahandoff-{kind}"
    holder = AsyncHold(RIVAL.get(kind, kind), await async_client(), name, ttl=30)
    extra = {"waiter_lease": 30.0} if kind == "fair" else {}
    waiter = AsyncHold(
        kind, await async_client(socket_timeout=30), name, ttl=30, recheck_interval=20.0, **extra
    )
    assert await holder.take(blocking=False)

    async def wait() -> tuple[float, int]:  # AsyncRLock holds belong to this task
        assert await waiter.take(timeout=15)
        at, got = time.monotonic(), waiter.fence
        await waiter.release()
        return at, got

    task = asyncio.ensure_future(wait())
    try:
        deadline = time.monotonic() + 10
        while not is_waiting(cluster, name):
            assert time.monotonic() < deadline, "the waiter never registered"
            await asyncio.sleep(0.01)
        assert_one_slot(cluster, name, at_least=3)
        assert not task.done()
        fence = holder.fence
        released = time.monotonic()
        await holder.release()
    finally:
        at, got = await asyncio.wait_for(task, LIMIT)
    assert at - released < 3.0
    assert got > fence


async def test_watchdog_renews_leases_on_every_master_async(
    cluster: LocalCluster, arc: redis.asyncio.cluster.RedisCluster
) -> None:
    """:func:`test_watchdog_renews_leases_on_every_master_sync` on one event loop."""
    names = [f"awd-{i}" for i in range(12)]
    owners = cluster.slot_owners()
    assert len({owners[slot_of(n)] for n in names}) == 3
    lost: list[object] = []
    holds = [
        AsyncHold(KINDS[i % len(KINDS)], arc, n, ttl=None, watchdog_lease=1.0, on_lost=lost.append)
        for i, n in enumerate(names)
    ]
    for h in holds:
        assert await h.take(blocking=False)
    deadline = time.monotonic() + 10
    while min(h.renewals for h in holds) < 3:
        assert time.monotonic() < deadline, [h.renewals for h in holds]
        await asyncio.sleep(0.05)
    assert lost == []
    for h, n in zip(holds, names, strict=True):
        assert not h.lost
        assert await h.owned()
        assert await arc.pttl(lock_key(n)) > 0
        await h.release()


# ================================================================== failover


class Rival:
    """A thread that keeps asking, on its own client, whether the lock is taken and trying
    to take it, until stopped; records every outcome (each call bounded)."""

    def __init__(self, hold: SyncHold, thread: Owner) -> None:
        self.hold = hold
        self.outcomes: list[tuple[str, Outcome]] = []
        self.failure: BaseException | None = None  # a hang (pytest.fail in Owner.call)
        self._owner = thread
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.outcomes.append(("locked", self._owner.call(self.hold.locked)))
                take = self._owner.call(lambda: self.hold.take(blocking=False))
                self.outcomes.append(("try", take))
                time.sleep(0.02)
        except BaseException as exc:
            self.failure = exc

    def stop(self) -> list[tuple[str, Outcome]]:
        self._stop.set()
        self._thread.join(2 * LIMIT)
        assert not self._thread.is_alive()
        if self.failure is not None:
            raise self.failure
        return self.outcomes


def check_rival(outcomes: list[tuple[str, Outcome]]) -> None:
    """The rival saw the lock taken (or got a redis-py error), and never got in."""
    assert outcomes
    for what, outcome in outcomes:
        outcome.check(is_true if what == "locked" else is_false, f"rival {what}")


@pytest.mark.parametrize("force", [False, True], ids=["failover", "force"])
@pytest.mark.parametrize("kind", ["lock", "rlock", "fair"])
def test_failover_of_the_master_holding_a_lock_sync(
    cluster: LocalCluster,
    sync_client: Any,
    owner: Callable[[], Owner],
    kind: str,
    force: bool,
    record: Callable[[str, object], None],
) -> None:
    """``CLUSTER FAILOVER [FORCE]`` of the master serving a held watchdog lock, once its
    replica has the lock: a rival client trying all along never gets in (every call
    answered or raised a redis-py error in time); afterwards the lock survived on the new
    master, the holder's extend, renewals and release work there (MOVED followed; the
    replica's script cache was flushed, so NOSCRIPT was answered with EVAL), and the next
    holder's fencing token is higher."""
    master = cluster.calm_master()
    name = name_on(cluster, master, f"fo-{kind}")
    lost: list[object] = []
    a = SyncHold(kind, sync_client(), name, ttl=None, watchdog_lease=3.0, on_lost=lost.append)
    b = SyncHold(kind, sync_client(), name, ttl=10)
    on_a, on_b = owner(), owner()
    assert on_a(lambda: a.take(blocking=False))
    fence = on_a(lambda: a.fence)
    cluster.wait_replicated(master)
    replica = cluster.replica_of(master)
    replica.cmd("SCRIPT", "FLUSH")  # it may have been a master with the scripts before
    shas = [script.sha for script in SCRIPTS.values()]
    assert replica.cmd("SCRIPT", "EXISTS", *shas) == [0] * len(shas)
    rival = Rival(b, on_b)
    try:
        old, new = cluster.failover(slot_of(name), force=force)
    finally:
        outcomes = rival.stop()
    renewals = on_a(lambda: a.renewals)
    check_rival(outcomes)
    errors = sorted({type(o.error).__name__ for _, o in outcomes if o.error is not None})
    record("rival_errors", errors)
    assert new.admin.exists(lock_key(name)) == 1  # the lock survived the failover
    record("survived", True)
    assert cluster.master_of(slot_of(name)).id == new.id != old.id
    assert on_a(lambda: a.extend(5)) > 5
    assert on_a(a.owned)
    deadline = time.monotonic() + 10
    while on_a(lambda: a.renewals) < renewals + 1:  # the watchdog renews on the new master
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert not on_a(lambda: a.lost)
    assert lost == []
    assert not on_b(lambda: b.take(blocking=False))
    on_a(a.release)
    assert on_b(lambda: b.take(blocking=False))
    assert on_b(lambda: b.fence) > fence
    on_b(b.release)


def test_forced_failover_to_a_replica_without_the_lock_is_reported_as_a_loss(
    cluster: LocalCluster,
    sync_client: Any,
    record: Callable[[str, object], None],
) -> None:
    """The replica is cut off (its ``masterauth`` is set to a password the master refuses,
    then its link is killed, so it cannot resync), the lock is taken on the master, and the
    replica is promoted with ``FAILOVER FORCE``: the new master never got the lock. The
    library cannot prevent the second grant (asynchronous replication; ``replicas=k`` is
    the remedy), but it does not stay silent: the holder's watchdog reports the loss
    (``on_lost``) at its next renewal, and its extend and release raise
    ``LockLostError``. The fencing counter went back with the data (docs/safety.md's safety
    model), so the next holder gets the same token again."""
    master = cluster.calm_master()
    name = name_on(cluster, master, "unsynced")
    warm = Lock(sync_client(), name, ttl=10)  # a replicated first grant: fence 1
    assert warm.acquire(blocking=False)
    warm.release()
    cluster.wait_replicated(master)
    lost = threading.Event()
    a = Lock(sync_client(), name, ttl=None, watchdog_lease=3.0, on_lost=lambda _: lost.set())
    b = Lock(sync_client(), name, ttl=10)
    slot = slot_of(name)
    replica = cluster.replica_of(master)
    cluster.wait_calm(slot)
    # The master has no password, so the replica's AUTH fails and it stays unlinked.
    replica.cmd("CONFIG", "SET", "masterauth", "not-the-password")
    try:
        replica.cmd("CLIENT", "KILL", "TYPE", "master")
        deadline = time.monotonic() + 10
        while replica.info("replication")["master_link_status"] != "down":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert a.acquire(blocking=False)
        fence = a.fencing_token
        assert fence == 2
        _, new = cluster.failover(slot, force=True)
    finally:
        replica.cmd("CONFIG", "SET", "masterauth", "")
    assert new.id == replica.id
    survived = new.admin.exists(lock_key(name)) == 1
    record("survived", survived)
    assert not survived
    assert lost.wait(LIMIT), "the loss was never reported"
    assert a.lost
    with pytest.raises(LockLostError):
        a.extend(1)
    with pytest.raises(LockLostError):
        a.release()
    assert b.acquire(blocking=False)
    record("fences", (fence, b.fencing_token))
    assert b.fencing_token == 2  # the counter went back: fence only as safe as replication
    b.release()


@pytest.mark.parametrize("force", [False, True], ids=["failover", "force"])
@pytest.mark.parametrize("kind", ["lock", "semaphore"])
async def test_failover_of_the_master_holding_a_lock_async(
    cluster: LocalCluster,
    async_client: Any,
    kind: str,
    force: bool,
    record: Callable[[str, object], None],
) -> None:
    """:func:`test_failover_of_the_master_holding_a_lock_sync` with the asyncio kinds: the
    failover runs in a thread while the watchdog task and a rival task keep going."""
    master = cluster.calm_master()
    name = name_on(cluster, master, f"afo-{kind}")
    lost: list[object] = []
    a = AsyncHold(
        kind, await async_client(), name, ttl=None, watchdog_lease=3.0, on_lost=lost.append
    )
    b = AsyncHold(kind, await async_client(), name, ttl=10)
    assert await a.take(blocking=False)
    fence = a.fence
    cluster.wait_replicated(master)
    outcomes: list[tuple[str, Outcome]] = []
    done = asyncio.Event()

    async def rival() -> None:
        while not done.is_set():
            outcomes.append(("locked", await abounded(b.locked())))
            outcomes.append(("try", await abounded(b.take(blocking=False))))
            await asyncio.sleep(0.02)

    task = asyncio.ensure_future(rival())
    try:
        _, new = await asyncio.to_thread(cluster.failover, slot_of(name), force=force)
    finally:
        done.set()
        await asyncio.wait_for(task, 2 * LIMIT)
    renewals = a.renewals
    check_rival(outcomes)
    errors = sorted({type(o.error).__name__ for _, o in outcomes if o.error is not None})
    record("rival_errors", errors)
    assert new.admin.exists(lock_key(name)) == 1
    record("survived", True)
    assert await asyncio.wait_for(a.extend(5), LIMIT) > 5
    assert await asyncio.wait_for(a.owned(), LIMIT)
    deadline = time.monotonic() + 10
    while a.renewals < renewals + 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    assert not a.lost
    assert lost == []
    assert not await b.take(blocking=False)
    await a.release()
    assert await b.take(blocking=False)
    assert b.fence > fence
    await b.release()


# ================================================================== slot migration


def probe_sync(a: SyncHold, on_a: Owner, b: SyncHold, on_b: Owner, stage: str) -> list[str]:
    """Every call on a held lock during one migration stage: a right answer or a redis-py
    error, within LIMIT. Returns the error names seen."""
    results = [
        ("owned", on_a.call(a.owned), is_true),
        ("extend", on_a.call(lambda: a.extend(1)), is_ttl),
        ("locked", on_b.call(b.locked), is_true),
        ("rival try", on_b.call(lambda: b.take(blocking=False)), is_false),
    ]
    if stage == "migrating":  # a blocking acquire, too, ends in time
        results.append(("rival wait", on_b.call(lambda: b.take(timeout=0.5)), is_false))
    for what, outcome, right in results:
        outcome.check(right, f"{stage}: {what}")
    return [f"{stage}: {w} {type(o.error).__name__}" for w, o, _ in results if o.error]


@pytest.mark.parametrize("kind", ["lock", "rlock", "fair"])  # Semaphore: hold scripts as RLock
def test_slot_migration_of_a_held_lock_sync(
    cluster: LocalCluster,
    sync_client: Any,
    owner: Callable[[], Owner],
    kind: str,
    record: Callable[[str, object], None],
) -> None:
    """The slot of a held lock moves to another master, one step at a time. While the slot
    is MIGRATING / IMPORTING, a script whose keys are split between the two masters, or
    partly missing (a lock's wait and wake keys usually do not exist), gets TRYAGAIN, which
    redis-py retries and then raises (``ClusterError``); a single-key script follows ASK.
    No call hangs and none answers wrong. For the hash kinds, which declare per call only
    the keys it touches, the holder's calls all answer, but for an extend while its hash
    and the hash's expiry index are on different masters. Once ``SETSLOT NODE`` is done, the
    lock is intact on the new master: owned, extendable, excluding the rival, and released
    normally."""
    name = f"mig-{kind}"
    lost: list[object] = []
    a = SyncHold(kind, sync_client(), name, ttl=None, watchdog_lease=30.0, on_lost=lost.append)
    b = SyncHold(kind, sync_client(), name, ttl=10)
    on_a, on_b = owner(), owner()
    assert on_a(lambda: a.take(blocking=False))
    fence = on_a(lambda: a.fence)
    slot = slot_of(name)
    src = cluster.master_of(slot)
    to = next(m for m in cluster.masters() if m.id != src.id)
    seen: list[str] = []
    cluster.begin_migration(slot, to)
    try:
        seen += probe_sync(a, on_a, b, on_b, "migrating")
        cluster.move_keys(slot, src, to, [lock_key(name)])  # the lock key only
        seen += probe_sync(a, on_a, b, on_b, "split")
        cluster.move_keys(slot, src, to)
        seen += probe_sync(a, on_a, b, on_b, "moved")
    finally:
        cluster.finish_migration(slot, src, to)
    record("errors", seen)
    if kind == "rlock":
        # the hold scripts declare only the keys a call touches: owned and locked are one-key
        # calls that follow ASK, an extend needs the hash and its expiry index, so it fails
        # only while they are on different masters. A try also declares the fencing counter,
        # which may be absent, so a rival's try may get TRYAGAIN at every stage.
        assert set(seen) <= {
            "split: extend ClusterError",
            "migrating: rival try ClusterError",
            "split: rival try ClusterError",
            "moved: rival try ClusterError",
            "migrating: rival wait ClusterError",
        }
    assert cluster.master_of(slot).id == to.id
    assert to.admin.exists(lock_key(name)) == 1
    assert on_a(a.owned)
    assert on_a(lambda: a.extend(5)) > 5
    assert on_b(b.locked)
    assert not on_b(lambda: b.take(blocking=False))
    assert not on_a(lambda: a.lost)
    assert lost == []
    on_a(a.release)
    assert on_b(lambda: b.take(blocking=False))
    assert on_b(lambda: b.fence) > fence
    on_b(b.release)


async def test_slot_migration_of_a_held_lock_async(
    cluster: LocalCluster,
    async_client: Any,
    record: Callable[[str, object], None],
) -> None:
    """:func:`test_slot_migration_of_a_held_lock_sync` for ``AsyncLock``."""
    name = "amig"
    a = AsyncHold("lock", await async_client(), name, ttl=None, watchdog_lease=30.0)
    b = AsyncHold("lock", await async_client(), name, ttl=10)
    assert await a.take(blocking=False)
    fence = a.fence
    slot = slot_of(name)
    src = cluster.master_of(slot)
    to = next(m for m in cluster.masters() if m.id != src.id)
    seen: list[str] = []

    async def probe(stage: str) -> None:
        results = [
            ("owned", await abounded(a.owned()), is_true),
            ("extend", await abounded(a.extend(1)), is_ttl),
            ("locked", await abounded(b.locked()), is_true),
            ("rival try", await abounded(b.take(blocking=False)), is_false),
        ]
        if stage == "migrating":
            results.append(("rival wait", await abounded(b.take(timeout=0.5)), is_false))
        for what, outcome, right in results:
            outcome.check(right, f"{stage}: {what}")
        seen.extend(f"{stage}: {w} {type(o.error).__name__}" for w, o, _ in results if o.error)

    await asyncio.to_thread(cluster.begin_migration, slot, to)
    try:
        await probe("migrating")
        await asyncio.to_thread(cluster.move_keys, slot, src, to, [lock_key(name)])
        await probe("split")
        await asyncio.to_thread(cluster.move_keys, slot, src, to)
        await probe("moved")
    finally:
        await asyncio.to_thread(cluster.finish_migration, slot, src, to)
    record("errors", seen)
    assert await a.owned()
    assert await a.extend(5) > 5
    assert not await b.take(blocking=False)
    assert not a.lost
    await a.release()
    assert await b.take(blocking=False)
    assert b.fence > fence
    await b.release()
