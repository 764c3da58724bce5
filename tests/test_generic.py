# SPDX-License-Identifier: MIT
"""Behaviour every primitive shares, run over every row of ``tests/primitives.py`` (each
kind in both flavours) on real servers: acquire and release, exclusion, timeouts, wake-ups,
fencing, lease expiry, the watchdog, loss detection, bad input before I/O, a TTL on every
key, no secret in ``repr``. A new primitive gets these tests by one row in ``KINDS``.

The primitives without the lock API (``primitives.OTHERS``: CountDownLatch, Barrier) get
the tests marked ``rows(every=True)``: bad input before I/O, a TTL on every key, no secret
in ``repr`` (a Barrier's party token; a latch holds none). The others are about the lock
API and do not apply: a latch is not held by anybody (nothing to acquire, release twice,
exclude, wake, fence, lose or renew), and a barrier's party waits for the other parties,
not for a release; its own tests (tests/test_barrier.py) cover what a party shares with a
lock: its generation as fencing token, a lost membership, the watchdog, cancellation. No
generic fork test exists (tests/test_processes.py forks a Lock; test_latch.py and
test_barrier.py run real processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import AcquireTimeoutError, LockConfigError, LockLostError, NotOwnedError
from redislock.server import RedisProcess
from tests import clients
from tests.masters import amaster, close_amasters, master
from tests.primitives import Actor, Env, Kind, Subject, rows
from tests.primitives import held_in_redis as held_on_majority

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

NAME = "generic"
QUORUM = 3  # Redlock rows use the first three of the five masters


@pytest.fixture
async def env(
    redis_server: RedisProcess, servers: list[RedisProcess]
) -> AsyncIterator[dict[str, Env]]:
    """Clients for both kinds of row: ``"single"`` (one server) and ``"quorum"`` (three
    Redlock masters); the lock clients have redis-py's default settings, the masters' the
    settings the Redlock docs ask for (socket timeout, no connection retries)."""
    used = servers[:QUORUM]
    admin = redis.Redis(**redis_server.client_kwargs(), decode_responses=True)
    admins = [redis.Redis(**s.client_kwargs(), decode_responses=True) for s in used]
    for a in [admin, *admins]:
        a.flushall()
    client = clients.sync_client(**redis_server.client_kwargs())
    aclient = clients.async_client(**redis_server.client_kwargs())
    masters = [master(s) for s in used]
    amasters = [amaster(s) for s in used]
    yield {
        "single": Env(client, aclient, masters, amasters, [admin]),
        "quorum": Env(client, aclient, masters, amasters, admins),
    }
    for c in [client, admin, *admins, *masters]:
        c.close()
    await close_amasters([aclient, *amasters])


def env_of(envs: dict[str, Env], kind: Kind) -> Env:
    return envs["quorum" if kind.quorum else "single"]


@contextlib.contextmanager
def actors(kind: Kind, n: int) -> Iterator[list[Actor]]:
    made = [Actor(kind) for _ in range(n)]
    try:
        yield made
    finally:
        for actor in made:
            actor.close()


def subject(kind: Kind, e: Env, actor: Actor, **options: Any) -> Subject:
    return Subject(kind, kind.build(e, NAME, options), actor)


def held_in_redis(kind: Kind, e: Env) -> bool:
    """Whether Redis shows any hold of the kind's names (on a majority, for a quorum)."""
    return held_on_majority(kind, e.admins, NAME)


def greater(later: Any, earlier: Any) -> bool:
    """Fencing tokens: ``later`` is greater (for every name, for a set of names)."""
    if isinstance(later, dict):
        return set(later) == set(earlier) and all(later[n] > earlier[n] for n in later)
    return bool(later > earlier)


# ---------------------------------------------------------------------------- basics


@pytest.mark.parametrize("kind", rows())
async def test_acquire_release_and_fencing(env: dict[str, Env], kind: Kind) -> None:
    e = env_of(env, kind)
    with actors(kind, 1) as (actor,):
        s = subject(kind, e, actor, ttl=10)
        assert await s.fence() is None
        assert await s.acquire()
        first = await s.fence()
        assert first is not None
        assert held_in_redis(kind, e)
        assert 0 < (await s.remaining() or 0) <= 10
        await s.release()
        assert not held_in_redis(kind, e)
        assert await s.acquire()
        assert greater(await s.fence(), first)
        await s.release()
        assert await s.fence() is None


@pytest.mark.parametrize("kind", rows())
async def test_releasing_twice_raises_not_owned(env: dict[str, Env], kind: Kind) -> None:
    e = env_of(env, kind)
    with actors(kind, 1) as (actor,):
        s = subject(kind, e, actor, ttl=10)
        assert await s.acquire()
        await s.release()
        with pytest.raises(NotOwnedError):
            await s.release()
        if not kind.permit:  # a fresh object holds nothing either
            fresh = subject(kind, e, actor, ttl=10)
            with pytest.raises(NotOwnedError):
                await fresh.release()


@pytest.mark.parametrize("kind", rows(exclusive=True))
async def test_a_second_object_waits_for_the_release(env: dict[str, Env], kind: Kind) -> None:
    e = env_of(env, kind)
    with actors(kind, 2) as (one, two):
        a = subject(kind, e, one, ttl=10)
        b = subject(kind, e, two, ttl=10)
        assert await a.acquire()
        assert not await b.acquire(blocking=False)
        start = time.monotonic()
        assert not await b.acquire(timeout=0.3)
        assert 0.25 <= time.monotonic() - start < 3.0
        await a.release()
        assert await b.acquire(blocking=False)
        assert greater(await b.fence(), _zero(kind))
        await b.release()


def _zero(kind: Kind) -> Any:
    return dict.fromkeys(kind.names(NAME), 0) if kind.fences == "per_name" else 0


@pytest.mark.parametrize("kind", rows(exclusive=False))
async def test_shared_holders_hold_together(env: dict[str, Env], kind: Kind) -> None:
    e = env_of(env, kind)
    with actors(kind, 2) as (one, two):
        a = subject(kind, e, one, ttl=10)
        b = subject(kind, e, two, ttl=10)
        assert await a.acquire()
        assert await b.acquire(blocking=False)
        assert await a.fence() != await b.fence()
        await a.release()
        assert held_in_redis(kind, e)
        await b.release()
        assert not held_in_redis(kind, e)


@pytest.mark.parametrize("kind", rows(exclusive=True))
async def test_with_times_out_with_acquire_timeout_error(env: dict[str, Env], kind: Kind) -> None:
    e = env_of(env, kind)
    with actors(kind, 2) as (one, two):
        a = subject(kind, e, one, ttl=10)
        b = subject(kind, e, two, ttl=10, timeout=0.2)
        assert await a.acquire()
        start = time.monotonic()
        with pytest.raises(AcquireTimeoutError) as caught:
            await b.enter()
        assert isinstance(caught.value, TimeoutError)
        assert 0.15 <= time.monotonic() - start < 3.0
        await a.release()


@pytest.mark.parametrize("kind", rows(exclusive=True, woken=True))
async def test_the_release_wakes_a_waiter(env: dict[str, Env], kind: Kind) -> None:
    """With ``recheck_interval=5``, only the release's wake-up can let the waiter in fast."""
    e = env_of(env, kind)
    with actors(kind, 2) as (one, two):
        a = subject(kind, e, one, ttl=10, recheck_interval=5.0)
        b = subject(kind, e, two, ttl=10, recheck_interval=5.0)
        assert await a.acquire()

        async def wait() -> float:  # one task: a reentrant lock's owner is the task
            assert await b.acquire(timeout=10)
            got = time.monotonic()
            await b.release()
            return got

        waiter = asyncio.ensure_future(wait())
        await asyncio.sleep(0.3)  # the waiter is blocked by now
        assert not waiter.done()
        released = time.monotonic()
        await a.release()
        got = await asyncio.wait_for(waiter, 5)
        assert got - released < 1.0


@pytest.mark.parametrize("kind", rows(exclusive=True))
async def test_contention_loses_no_update_and_fences_grow(env: dict[str, Env], kind: Kind) -> None:
    """Four owners, each with its own object, increment a shared counter with a window
    between read and write; the holds' fencing tokens grow in hold order."""
    e = env_of(env, kind)
    counter = {"n": 0}
    fences: list[Any] = []
    rounds = 4

    async def worker(actor: Actor) -> None:
        s = subject(kind, e, actor, ttl=10)
        for _ in range(rounds):
            assert await s.acquire(timeout=30)
            fences.append(await s.fence())
            seen = counter["n"]
            await asyncio.sleep(0.005)
            counter["n"] = seen + 1
            await s.release()

    with actors(kind, 4) as owners:
        await asyncio.gather(*(worker(actor) for actor in owners))
    assert counter["n"] == 4 * rounds
    assert all(greater(b, a) for a, b in itertools.pairwise(fences))


# ---------------------------------------------------------------------------- leases


@pytest.mark.parametrize("kind", rows())
async def test_an_expired_lease_is_lost_and_never_frees_the_next_holder(
    env: dict[str, Env], kind: Kind
) -> None:
    e = env_of(env, kind)
    with actors(kind, 2) as (one, two):
        a = subject(kind, e, one, ttl=0.3)
        b = subject(kind, e, two, ttl=10)
        assert await a.acquire()
        await asyncio.sleep(0.6)
        assert await a.view("lost")
        assert await b.acquire(timeout=5)
        with pytest.raises(LockLostError):
            await a.release()
        assert held_in_redis(kind, e)  # b's hold is untouched
        assert 0 < (await b.remaining() or 0) <= 10
        await b.release()


@pytest.mark.slow
@pytest.mark.one_server  # waits out leases: the same code on every server
@pytest.mark.parametrize("kind", rows())
async def test_the_watchdog_renews_while_held(env: dict[str, Env], kind: Kind) -> None:
    e = env_of(env, kind)
    with actors(kind, 1) as (actor,):
        s = subject(kind, e, actor, watchdog_lease=1.0)
        assert await s.acquire()
        await asyncio.sleep(2.5)  # more than two leases
        assert not await s.view("lost")
        assert 0 < (await s.remaining() or 0) <= 1.0
        assert held_in_redis(kind, e)
        await s.release()
        assert not held_in_redis(kind, e)


@pytest.mark.slow
@pytest.mark.parametrize("kind", rows())
async def test_a_lease_deleted_behind_its_back_is_reported_lost(
    env: dict[str, Env], kind: Kind
) -> None:
    e = env_of(env, kind)
    lost: list[object] = []
    told = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_lost(obj: object) -> None:  # from the watchdog's thread or task
        lost.append(obj)
        loop.call_soon_threadsafe(told.set)

    with actors(kind, 1) as (actor,):
        s = subject(kind, e, actor, watchdog_lease=1.0, on_lost=on_lost)
        assert await s.acquire()
        for admin in e.admins:
            admin.flushall()
        await asyncio.wait_for(told.wait(), 1.0 / 3 + 2.0)  # the renew interval, and slack
        assert lost == [s.holder]
        assert await s.view("lost")
        with pytest.raises(LockLostError):
            await s.release()


@pytest.mark.parametrize("kind", rows())
async def test_a_loss_the_holders_release_finds_is_told_once(
    env: dict[str, Env], kind: Kind
) -> None:
    """The keys are gone before any renewal could see it (the next is 5 s away): the
    holder's own release() finds the loss, and it is told as every loss is - ``lost``, then
    ``on_lost`` once - before the release raises."""
    e = env_of(env, kind)
    lost: list[object] = []
    with actors(kind, 1) as (actor,):
        s = subject(kind, e, actor, watchdog_lease=15.0, renew_interval=5.0, on_lost=lost.append)
        assert await s.acquire()
        for admin in e.admins:
            admin.flushall()
        with pytest.raises(LockLostError):
            await s.release()
        assert lost == [s.holder]


# ---------------------------------------------------------------------------- cancellation

CANCEL_AFTER = [1e-6, 1e-5, 1e-4, 1e-3, 5e-3, 2e-2, 5e-2]
"""Seconds after which a waiter's acquire is cancelled (``asyncio.wait_for``)."""

CANCEL_SLACK = 1.0
"""Seconds a cancelled acquire may take beyond its timeout (a round trip to undo a grant
that raced the cancellation; the bug this guards against waited for the holder's lease)."""


@pytest.mark.pythons  # CPython gh-86296: 3.12 and later cancel inside redis.asyncio otherwise
@pytest.mark.one_server  # the client's cancellation: the same on every server
@pytest.mark.parametrize("watchdog", [False, True], ids=["ttl", "watchdog"])
@pytest.mark.parametrize("kind", rows(flavour="asyncio", exclusive=True))
async def test_a_cancelled_acquire_returns_at_once_and_leaves_nothing(
    env: dict[str, Env], kind: Kind, watchdog: bool
) -> None:
    # Python 3.11 loses a cancellation inside redis.asyncio's wait_for around a send or read
    # (CPython gh-86296) whenever socket_timeout is set, as it is by default; the lock
    # clients here have redis-py's defaults.
    e = env_of(env, kind)
    with actors(kind, 2) as (a, b):
        lease: dict[str, Any] = {"ttl": None, "watchdog_lease": 3.0} if watchdog else {"ttl": 3}
        holder = subject(kind, e, a, **lease)
        assert await holder.acquire()
        late: list[tuple[float, float]] = []
        for after in CANCEL_AFTER * 2:
            waiter = subject(kind, e, b, ttl=3)
            started = time.monotonic()
            with contextlib.suppress(TimeoutError):
                assert not await asyncio.wait_for(waiter.acquire(), after)
            took = time.monotonic() - started
            if took > after + CANCEL_SLACK:
                late.append((after, round(took, 3)))
        assert late == []
        assert await holder.view("lost") is False
        assert held_in_redis(kind, e)
        await holder.release()
        assert not held_in_redis(kind, e)  # no cancelled waiter got the lock behind our back
        for admin in e.admins:
            keys = [k.decode() if isinstance(k, bytes) else k for k in admin.keys("*")]
            kept = (":slotfence", ":slotrel")
            no_ttl = [k for k in keys if admin.pttl(k) == -1 and not k.endswith(kept)]
            assert no_ttl == []


# ---------------------------------------------------------------------------- input


@pytest.mark.parametrize("kind", rows(every=True))
def test_bad_input_raises_before_any_io(kind: Kind, short_tmp: Path) -> None:
    """Clients on a socket nobody listens on: a connection would fail, so a
    LockConfigError proves the check ran first."""
    paths = [str(short_tmp / f"nobody{i}.sock") for i in range(3)]
    masters = [clients.sync_client(unix_socket_path=p) for p in paths]  # 3 distinct endpoints
    amasters = [clients.async_client(unix_socket_path=p) for p in paths]
    own = Env(masters[0], amasters[0], masters, amasters, [])
    with pytest.raises(LockConfigError, match=kind.duration):
        kind.build(own, NAME, {kind.duration: -1})
    with pytest.raises(LockConfigError, match="name"):
        kind.build(own, "", {})
    wrong = Env(amasters[0], masters[0], amasters, masters, [])  # the other flavour's clients
    with pytest.raises(LockConfigError, match=r"needs|must be"):
        kind.build(wrong, NAME, {})


@pytest.mark.parametrize("kind", rows(every=True, secret=True))
async def test_repr_never_shows_the_token(env: dict[str, Env], kind: Kind) -> None:
    e = env_of(env, kind)
    with actors(kind, 1) as (actor,):
        s = subject(kind, e, actor, **{kind.duration: 10})
        assert await s.take()
        token = await s.token()
        assert token
        for obj in (s.obj, s.holder) if kind.lock_api else (s.obj,):
            assert token not in repr(obj)
            assert token not in str(obj)
        if kind.lock_api:
            assert token not in repr(s.holder.statistics())
        await s.give()


KEPT = (":slotfence", ":slotrel", ":permits")
"""The keys meant to stay: the slots' fencing counters and release rings, a Semaphore's
run-time permit count (which its user sets)."""


def keys_without_ttl(e: Env) -> list[str]:
    """The keys on the kind's servers that would never expire, those of ``KEPT`` excepted."""
    return [
        k
        for admin in e.admins
        for k in admin.scan_iter(count=1000)
        if admin.pttl(k) == -1 and not str(k).endswith(KEPT)
    ]


@pytest.mark.parametrize("kind", rows(every=True))
async def test_every_key_has_a_ttl_in_use_and_after(env: dict[str, Env], kind: Kind) -> None:
    """While it is in use (held, counting, entered) and after its last step, every key the
    kind wrote expires: a crashed process leaves nothing for ever."""
    e = env_of(env, kind)
    with actors(kind, 1) as (actor,):
        s = subject(kind, e, actor, **{kind.duration: 10})
        assert await s.take()
        assert any(admin.dbsize() for admin in e.admins)  # it wrote something
        assert keys_without_ttl(e) == []
        await s.give()
        assert keys_without_ttl(e) == []
