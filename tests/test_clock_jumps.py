# SPDX-License-Identifier: MIT
"""Server clock jumps: every single-server primitive, and Redlock, when a redis-server's wall
clock steps forward or back (an NTP step, a VM restored from a snapshot, an operator's
``date -s``) while locks are held.

The servers run under libfaketime (``RedisProcess(clock_file=...)``, Debian package
``faketime``): ``set_clock_offset(s)`` moves CLOCK_REALTIME (``gettimeofday``, ``time``) by
``s`` seconds at the server's next clock read; its monotonic clocks do not move, as with an
NTP step. What Redis 7.0.15 (Debian's redis-server) was seen to do, checked first by hand
with redis-cli and then by :func:`test_time_key_expiry_and_blpop_follow_the_wall_clock`:

- ``TIME`` follows the offset at once (``+30s``: 30 s ahead; ``-20.5``: 20.5 s behind).
- Key expiry is on the wall clock (a key stores an absolute Unix-ms deadline; ``mstime()``).
  A forward jump past a key's TTL removes it at once (PTTL -2 on the next read); a backward
  jump makes every key live longer by the jump (a 5 s key set at +30 s showed PTTL 55 s at
  -20 s). The hash kinds' own per-hold deadlines come from ``TIME`` and move the same way.
- Blocking commands time out on the wall clock too: a ``BLPOP`` with a 0.5 s timeout that
  is blocked when the clock steps back 3 s returns after 3.5 s; stepping forward 5 s ends a
  2 s ``BLPOP`` at once. The server's own timers stay on the monotonic clock.

What the primitives do (sync: Lock, RLock, the write side of ReadWriteLock, Semaphore with
one permit, FairLock; asyncio: AsyncLock; each with redis-py's default client):

- **Forward past the lease**: the hold is gone server-side at once; a rival may acquire it
  straight away, with a greater fencing token (tokens come from INCR, not from time). The
  watchdog's next renewal finds the hold gone: ``on_lost`` runs, ``lost`` is true, and
  ``release()`` raises ``LockLostError`` without touching the rival's hold. With a fixed
  ``ttl`` nothing tells the holder before it asks (``owned()`` false, ``release()`` raises);
  until then it believes it holds the lock: only the fencing token protects the resource.
- **Backward**: nobody else gets in, and the holder keeps its lock (renewals set the lease
  again from the server's new "now"). A holder that died keeps the name busy for its lease
  plus the jump, while its own local estimate (monotonic) ran out after the lease. A waiter
  waits on the client's clock (the shared wake-up channel, not a server-timed BLPOP):
  ``acquire(timeout=t)`` returns after about ``t`` (never with the lock).
- **Redlock over 3 masters**: one master's clock jumping forward drops the hold on that
  master only; the lock keeps its quorum (no ``on_lost``, a rival is refused). A second
  master jumping too takes the quorum away, and the holder is told.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import (
    AcquireTimeoutError,
    AsyncLock,
    FairLock,
    Lock,
    LockLostError,
    ReadWriteLock,
    Redlock,
    RLock,
    Semaphore,
)
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from redislock.testing.audit import Auditor
from tests.scriptcases import META, TOKEN, H, acq, command, expires_at, norm, resolve
from tests.support import async_wait_for, wait_for

LEASE = 3.0
"""The watchdog lease of the holders, seconds: a loss told within :data:`TOLD` was found by
a renewal, not by the holder's local lease estimate running out."""
RENEW = 0.2
"""Their renewal interval, seconds."""
JUMP = 10.0
"""A jump well past the lease, seconds."""
TOLD = RENEW + 0.8
"""Seconds within which a renewal must have found the hold gone (on a loaded machine)."""
KINDS = ("Lock", "RLock", "ReadWriteLock.write", "Semaphore", "FairLock")


def take(
    kind: str, client: redis.Redis, name: str, *, timeout: float | None = None, **opts: Any
) -> Any:
    """One hold of ``kind`` on ``name``: the object with ``lost``, ``owned()``, ``release()``
    and ``fencing_token`` (a ``Permit`` for Semaphore), or None when not granted. One try,
    or a wait of ``timeout`` seconds."""
    blocking = timeout is not None
    if kind == "Semaphore":
        sem = Semaphore(client, name, 1, **opts)
        with contextlib.suppress(AcquireTimeoutError):
            return sem.acquire(blocking=blocking, timeout=timeout)
        return None
    lock: Any
    if kind == "ReadWriteLock.write":
        lock = ReadWriteLock(client, name, **opts).write()
    else:
        lock = {"Lock": Lock, "RLock": RLock, "FairLock": FairLock}[kind](client, name, **opts)
    return lock if lock.acquire(blocking=blocking, timeout=timeout) else None


def is_lost(lock: Any) -> bool:
    """``lock.lost``, read through a call so that mypy does not narrow the property."""
    return bool(lock.lost)


def server_offset(client: redis.Redis) -> float:
    """The server's ``TIME`` minus ours, seconds."""
    sec, usec = client.time()
    return sec + usec / 1e6 - time.time()


@pytest.fixture(scope="module")
def clock_server(short_tmp: Path) -> Iterator[RedisProcess]:
    """One redis-server whose wall clock the tests move."""
    directory = short_tmp / "clock"
    with RedisProcess(directory, name="clk", clock_file=directory / "offset") as proc:
        yield proc


@pytest.fixture
def server(clock_server: RedisProcess) -> Iterator[RedisProcess]:
    """The clock server, flushed, its clock on the real time (again at the end)."""
    clock_server.set_clock_offset(0)
    with redis.Redis(**clock_server.client_kwargs()) as admin:
        admin.flushall()
    yield clock_server
    clock_server.set_clock_offset(0)


@pytest.fixture
def r(server: RedisProcess) -> Iterator[redis.Redis]:
    """A client with redis-py's defaults."""
    client = redis.Redis(**server.client_kwargs())
    yield client
    client.close()


# ----------------------------------------------------------------------------- the server


def test_time_key_expiry_and_blpop_follow_the_wall_clock(
    server: RedisProcess, r: redis.Redis
) -> None:
    assert abs(server_offset(r)) < 0.5
    r.set("a", "1", px=5000)
    server.set_clock_offset(30)
    assert server_offset(r) == pytest.approx(30, abs=0.5)
    assert r.pttl("a") == -2  # its absolute deadline is now in the past
    r.set("b", "1", px=5000)
    server.set_clock_offset(-20.5)  # 50.5 s back
    assert server_offset(r) == pytest.approx(-20.5, abs=0.5)
    assert 54_000 < r.pttl("b") <= 55_500  # lives 50.5 s longer
    server.set_clock_offset(0)
    # A BLPOP blocked while the clock steps back times out that much later.
    timer = threading.Timer(0.2, server.set_clock_offset, args=(-2.0,))
    start = time.monotonic()
    timer.start()
    assert r.blpop(["nothing"], timeout=0.5) is None
    waited = time.monotonic() - start
    timer.join()
    assert 2.3 <= waited < 4.0, waited
    # And one blocked while it steps forward ends at once.
    server.set_clock_offset(0)
    timer = threading.Timer(0.2, server.set_clock_offset, args=(5.0,))
    start = time.monotonic()
    timer.start()
    assert r.blpop(["nothing"], timeout=3) is None
    waited = time.monotonic() - start
    timer.join()
    assert waited < 1.5, waited


# ----------------------------------------------------------------------------- forward


@pytest.mark.parametrize("kind", KINDS)
def test_forward_jump_past_the_lease_ends_the_hold_and_the_holder_is_told(
    kind: str, server: RedisProcess, r: redis.Redis
) -> None:
    fired: list[object] = []
    holder = take(kind, r, "fwd", watchdog_lease=LEASE, renew_interval=RENEW, on_lost=fired.append)
    assert holder is not None
    old = holder.fencing_token
    server.set_clock_offset(JUMP)
    rival = take(kind, r, "fwd", ttl=30)  # the hold expired at once: the name is free
    assert rival is not None
    assert rival.fencing_token > old  # INCR, not time: tokens never go back
    wait_for(lambda: bool(fired), timeout=TOLD)  # the next renewal finds it gone
    assert fired == [holder]
    assert holder.lost
    with pytest.raises(LockLostError):
        holder.release()
    assert rival.owned()  # the loser's release left the rival's hold alone
    assert not rival.lost
    rival.release()


def test_forward_jump_with_a_fixed_ttl_is_found_only_when_the_holder_asks(
    server: RedisProcess, r: redis.Redis
) -> None:
    holder = Lock(r, "fixed", ttl=5)
    assert holder.acquire()
    server.set_clock_offset(JUMP)
    rival = Lock(r, "fixed", ttl=5)
    assert rival.acquire(blocking=False)
    assert rival.fencing_token is not None
    assert holder.fencing_token is not None
    assert rival.fencing_token > holder.fencing_token
    assert not holder.lost  # its local lease estimate (monotonic) has 5 s left...
    assert not holder.owned()  # ...but the server says otherwise
    with pytest.raises(LockLostError):
        holder.extend(5)
    with pytest.raises(LockLostError):
        holder.release()
    assert rival.owned()
    rival.release()


def test_once_after_a_forward_jump_runs_in_the_servers_new_period_not_the_same_again(
    server: RedisProcess, r: redis.Redis
) -> None:
    """A server clock stepped forward (+240 s, period 120 s) ends the record of the period
    at once. The periods follow the server's clock, so the next turn is a later period's
    (a new key), never a second run of the period already recorded: no two records of one
    period key. (On the caller's clock, the next turn took the same period again, found no
    record, and ran it twice.)"""
    from redislock import Once

    once = Once(r, "jump", period=120.0)
    with once.run() as first:
        assert first.mine
    assert r.exists(f"redislock:{{jump}}:once:{first.key}") == 1
    server.set_clock_offset(240.0)
    wait_for(lambda: server_offset(r) > 200)
    with once.run() as second:
        assert second.key != first.key  # the server's new period
    assert second.mine
    assert second.key > first.key  # ISO timestamps: later sorts after
    with once.run() as third:  # the same period again: its record is there
        assert not third.mine or third.key != second.key
    assert third.record is not None


# ----------------------------------------------------------------------------- backward


@pytest.mark.parametrize("kind", KINDS)
def test_backward_jump_keeps_the_holder_and_grants_nobody_else(
    kind: str, server: RedisProcess, r: redis.Redis
) -> None:
    fired: list[object] = []
    holder = take(kind, r, "back", watchdog_lease=LEASE, renew_interval=RENEW, on_lost=fired.append)
    assert holder is not None
    server.set_clock_offset(-JUMP)
    renewals = holder.statistics().renewals
    wait_for(lambda: holder.statistics().renewals >= renewals + 3, timeout=5.0)
    assert take(kind, r, "back", ttl=5) is None  # no double grant
    assert holder.owned()
    assert not holder.lost
    assert fired == []
    token = holder.fencing_token
    holder.release()
    rival = take(kind, r, "back", ttl=5)
    assert rival is not None
    assert rival.fencing_token > token
    rival.release()


@pytest.mark.parametrize("kind", KINDS)
def test_backward_jump_keeps_a_dead_holders_name_busy_for_the_jump_too(
    kind: str, server: RedisProcess, r: redis.Redis
) -> None:
    dead = take(kind, r, "dead", ttl=0.5)  # never released: as if its process died
    assert dead is not None
    acquired = time.monotonic()
    server.set_clock_offset(-2.0)
    time.sleep(0.8)
    assert dead.lost  # the holder's own estimate ran out after its 0.5 s lease...
    assert take(kind, r, "dead", ttl=5) is None  # ...the server's lease lasts 2 s more
    waiter = take(kind, r, "dead", ttl=5, timeout=6.0)
    waited = time.monotonic() - acquired
    assert waiter is not None
    assert waiter.fencing_token > dead.fencing_token
    assert 2.2 <= waited < 4.5, waited  # 0.5 s lease + 2 s jump, then a recheck
    waiter.release()


@pytest.mark.parametrize("kind", KINDS)
def test_backward_jump_during_a_wait_does_not_stretch_the_wait(
    kind: str, server: RedisProcess, r: redis.Redis
) -> None:
    holder = take(kind, r, "wait", ttl=30)
    assert holder is not None
    timer = threading.Timer(0.3, server.set_clock_offset, args=(-2.0,))
    start = time.monotonic()
    timer.start()
    waiter = take(kind, r, "wait", ttl=5, timeout=1.0)
    waited = time.monotonic() - start
    timer.join()
    assert waiter is None  # never granted while held
    # The wait is timed on the client's monotonic clock: the 1 s limit holds.
    assert 0.9 <= waited < 1.9, waited
    assert holder.owned()
    holder.release()


# ----------------------------------------------------------------------------- the auditor


def test_the_auditor_does_not_bring_back_a_key_deleted_before_a_step_back(
    server: RedisProcess, r: redis.Redis
) -> None:
    """Found by a torture run: a lock that expired when the clock stepped forward, and that
    Redis deleted, did not come back when the clock stepped back; the MONITOR shadow, which
    models expiry from times alone, believed it had, and flagged the next holder's extend
    and release as touches of a foreign lock."""
    with Auditor([server.client_kwargs()], names=["aud"], poll_interval=0.01) as auditor:
        assert auditor.sync(timeout=3.0)
        first = Lock(r, "aud", ttl=1.0)
        assert first.acquire()
        server.set_clock_offset(2.0)  # past its lease: it expires...
        assert r.exists(first.key) == 0  # ...and this read deletes it
        server.set_clock_offset(0.0)  # 2 s back: its deadline is ahead again
        second = Lock(r, "aud", ttl=5)
        assert second.acquire(blocking=False)  # the key is gone for Redis
        assert second.fencing_token is not None
        assert first.fencing_token is not None
        assert second.fencing_token > first.fencing_token
        assert second.extend(5) > 5
        second.release()
        assert auditor.sync(timeout=3.0)
        result = auditor.result()
    assert result.foreign_touches == []
    assert result.monitor_lines > 0


def wait_until_busy(r: redis.Redis, stall: float = 0.1, timeout: float = 5.0) -> None:
    """Return once a PING has gone unanswered for ``stall`` seconds: the server is running
    the script another thread sent."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ping = threading.Thread(target=r.ping, daemon=True)
        ping.start()
        ping.join(stall)
        if ping.is_alive():
            return
    raise AssertionError(f"the server answered every PING within {stall} s")


def test_a_step_back_during_a_hold_call_ends_no_key_before_its_holds(
    server: RedisProcess, r: redis.Redis
) -> None:
    """Found by torture runs (rwlock, semaphore: foreign touches a few ms after steps
    back): a hold script reads the server's clock once, when a call begins, and Redis reads it
    again at each command. Keys whose TTL a call set to "latest lease - now" ms ended that
    much before the latest lease their own holds record when the clock stepped back while
    the call ran (until the next call, a reader's status told of a lease its hash would not
    last; the auditor flagged the PEXPIRE). They now expire when the latest lease ends
    (PEXPIREAT). The call here takes a read hold and rebuilds the expiry index of 20,000
    readers' holds (written without one, as a hash filled by hand is): the step lands
    inside it."""
    with Auditor([server.client_kwargs()], names=["job"], poll_interval=1.0) as auditor:
        assert auditor.sync(timeout=3.0)
        sec, usec = r.time()
        latest = int(sec) * 1000 + int(usec) // 1000 + 60_000
        holds = [(f"{i:032x}", f"r|1|{latest - i % 1000}|{i}|{META}") for i in range(1, 20_001)]
        command(r, "HSET", H.lock, *(a for hold in holds for a in hold))
        r.pexpire(H.lock, 60_000)
        name, keys, call_args = acq(mode="r")
        script = SCRIPTS[name]
        r.script_load(script.source)
        replied: list[float] = []

        def acquire() -> None:
            args = resolve(call_args, 0)  # no time in acq's ARGV
            if norm(command(r, "EVALSHA", script.sha, len(keys), *keys, *args))[0] == "ok":
                replied.append(time.monotonic())

        thread = threading.Thread(target=acquire)
        thread.start()
        wait_until_busy(r)
        server.set_clock_offset(-5.0)
        stepped = time.monotonic()
        thread.join()
        assert len(replied) == 1
        assert replied[0] > stepped  # granted after the step...
        own = r.hget(H.lock, TOKEN)
        assert own is not None
        sec, usec = r.time()
        began = int(norm(own).split("|")[2]) - 10_000  # ...by a call that read the
        assert began > int(sec) * 1000 + int(usec) // 1000  # time before it
        for key in (H.lock, H.expiry):
            assert expires_at(r, key) == pytest.approx(latest, abs=1)  # not 5 s before it
        assert auditor.sync(timeout=10.0)
        result = auditor.result()
    assert result.foreign_touches == []
    assert result.audited_scripts > 0


# ----------------------------------------------------------------------------- asyncio


async def test_async_lock_forward_jump_is_told_and_fenced(server: RedisProcess) -> None:
    client = redis.asyncio.Redis(**server.client_kwargs())
    fired: list[object] = []
    try:
        holder = AsyncLock(
            client, "afwd", watchdog_lease=LEASE, renew_interval=RENEW, on_lost=fired.append
        )
        assert await holder.acquire()
        old = holder.fencing_token
        assert old is not None
        server.set_clock_offset(JUMP)
        rival = AsyncLock(client, "afwd", ttl=30)
        assert await rival.acquire(blocking=False)
        assert rival.fencing_token is not None
        assert rival.fencing_token > old
        await async_wait_for(lambda: bool(fired), timeout=TOLD)
        assert fired == [holder]
        assert holder.lost
        with pytest.raises(LockLostError):
            await holder.release()
        assert await rival.owned()
        await rival.release()
    finally:
        await client.aclose()


async def test_async_lock_backward_jump_keeps_the_holder(server: RedisProcess) -> None:
    client = redis.asyncio.Redis(**server.client_kwargs())
    fired: list[object] = []
    try:
        holder = AsyncLock(
            client, "aback", watchdog_lease=LEASE, renew_interval=RENEW, on_lost=fired.append
        )
        assert await holder.acquire()
        server.set_clock_offset(-JUMP)
        renewals = holder.statistics().renewals
        await async_wait_for(lambda: holder.statistics().renewals >= renewals + 3, timeout=5.0)
        assert not await AsyncLock(client, "aback", ttl=5).acquire(blocking=False)
        assert await holder.owned()
        assert not holder.lost
        assert fired == []
        token = holder.fencing_token
        await holder.release()
        rival = AsyncLock(client, "aback", ttl=5)
        assert await rival.acquire(blocking=False)
        assert rival.fencing_token is not None
        assert token is not None
        assert rival.fencing_token > token
        await rival.release()
    finally:
        await client.aclose()


# ----------------------------------------------------------------------------- Redlock


@pytest.fixture(scope="module")
def clock_masters(short_tmp: Path) -> Iterator[list[RedisProcess]]:
    """Three independent masters, each with a clock of its own."""
    procs = []
    try:
        for i in range(3):
            directory = short_tmp / "clockrl" / f"m{i}"
            proc = RedisProcess(directory, name=f"m{i}", clock_file=directory / "offset")
            procs.append(proc)
            proc.start()
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def test_redlock_keeps_its_quorum_when_one_masters_clock_jumps_forward(
    clock_masters: list[RedisProcess],
) -> None:
    clients = [redis.Redis(**m.client_kwargs()) for m in clock_masters]
    admins = [redis.Redis(**m.client_kwargs(), decode_responses=True) for m in clock_masters]
    key = "redislock:{rl}"
    try:
        for m, admin in zip(clock_masters, admins, strict=True):
            m.set_clock_offset(0)
            admin.flushall()
        fired: list[object] = []
        lock = Redlock(
            clients, "rl", watchdog_lease=LEASE, renew_interval=RENEW, on_lost=fired.append
        )
        assert lock.acquire()
        token = lock.fencing_token
        assert token is not None

        def owners() -> list[str | None]:
            return [None if (v := a.get(key)) is None else str(v).split("|")[0] for a in admins]

        clock_masters[0].set_clock_offset(JUMP)
        assert owners() == [None, lock.token, lock.token]  # gone from that master at once
        renewals = lock.statistics().renewals
        wait_for(lambda: lock.statistics().renewals >= renewals + 3, timeout=5.0)
        assert fired == []  # two of three is still a majority
        assert not lock.lost
        assert lock.owned()
        assert owners() == [None, lock.token, lock.token]  # renewals never re-create it
        rival = Redlock(clients, "rl", ttl=5)
        assert rival.acquire(blocking=False) is False  # one free master is no quorum
        # A second master's clock jumps too: the quorum is gone, and the holder is told.
        clock_masters[1].set_clock_offset(JUMP)
        wait_for(lambda: bool(fired), timeout=TOLD)
        assert fired == [lock]
        assert is_lost(lock)
        with pytest.raises(LockLostError):
            lock.release()
        assert rival.acquire(blocking=False)
        assert rival.fencing_token is not None
        assert rival.fencing_token > token
        rival.release()
    finally:
        for m in clock_masters:
            m.set_clock_offset(0)
        for client in (*clients, *admins):
            client.close()
