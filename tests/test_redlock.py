# SPDX-License-Identifier: MIT
"""``Redlock`` and ``AsyncRedlock`` on real redis-servers.

Five independent masters (unix sockets) serve the whole module; each test flushes them
and restores any master it stops (``RedisProcess.stop``) or pauses (SIGSTOP) in a
``finally``. The API tests run on the first 3 and on all 5. Nothing is mocked: a master is
"down" when its process is stopped, "late" when it is SIGSTOPped, "held by another" when a
foreign value is written to its key by hand.

The masters' clients use redis-py's default settings (socket timeout 5 s, 10 connection
retries with back-off), as users build them: a master that is down, blackholed or paused
must not delay the others (``test_redlock_faults.py`` times that).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import os
import random
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from redislock import (
    AcquireTimeoutError,
    AsyncRedlock,
    LockConfigError,
    LockLostError,
    LockUsageError,
    NotOwnedError,
    QuorumError,
    Redlock,
)
from redislock._core.keys import LockKeys
from redislock._core.ops import Call, Eval
from redislock._core.scripts import SCRIPTS
from redislock._lanes import Packer, wire
from redislock.server import RedisProcess
from tests.masters import N_MASTERS, amaster, client_state, close_amasters, master
from tests.proxy import DelayProxy
from tests.support import Background, async_wait_for, wait_for

TTL = 10.0
FOREIGN = "f" * 32 + "|elsewhere|1|0"  # another owner's lock value
CTX = multiprocessing.get_context("spawn")


# --------------------------------------------------------------------------- helpers


def lock_key(name: str) -> str:
    return f"redislock:{{{name}}}"


def fence_key(name: str) -> str:
    """The fencing counter of ``name``: its hash slot's, shared with that slot's names."""
    return LockKeys.for_name(name).fence


def text(value: object) -> str:
    assert isinstance(value, str)  # the admin clients decode
    return value


def owners(admins: Sequence[redis.Redis], name: str) -> list[str | None]:
    """The owner token of ``name`` on each master (None: no key)."""
    out: list[str | None] = []
    for admin in admins:
        value = admin.get(lock_key(name))
        out.append(None if value is None else text(value).split("|")[0])
    return out


def assert_held(admins: Sequence[redis.Redis], name: str, token: str | None) -> None:
    """What an acquire promises: a majority of ``admins`` hold ``token`` when it returns, no
    master holds anyone else's, and every master holds it once the lanes of those that
    went through one (late, or busy with an earlier command of the same client) finished:
    the round ends at a majority, the others' commands go on in the background."""
    quorum = len(admins) // 2 + 1
    now = owners(admins, name)
    assert now.count(token) >= quorum, now
    assert set(now) <= {token, None}, now
    wait_for(lambda: owners(admins, name) == [token] * len(admins))


def assert_free(admins: Sequence[redis.Redis], name: str) -> None:
    """What a release promises: a majority of ``admins`` no longer hold ``name`` when it
    returns, and none once the lanes finished (as :func:`assert_held`)."""
    quorum = len(admins) // 2 + 1
    assert owners(admins, name).count(None) >= quorum
    wait_for(lambda: owners(admins, name) == [None] * len(admins))


def pttls(admins: Sequence[redis.Redis], name: str) -> list[int]:
    return [int(admin.pttl(lock_key(name))) for admin in admins]


def counters(admins: Sequence[redis.Redis], name: str) -> list[int]:
    return [int(admin.get(fence_key(name)) or 0) for admin in admins]


def assert_every_key_expires(admins: Sequence[redis.Redis], name: str) -> None:
    """No master has the lock key without a TTL (-1); -2 is "no key"."""
    for ttl in pttls(admins, name):
        assert ttl == -2 or ttl > 0, f"a lock key without TTL: {pttls(admins, name)}"


def assert_late_grants_end(admins: Sequence[redis.Redis], name: str, ttl: float) -> None:
    """Keys left on these masters by grants that arrived late are gone, or expire within
    ``ttl``."""
    assert_every_key_expires(admins, name)
    assert all(t <= ttl * 1000 for t in pttls(admins, name))


def fence(lock: Redlock | AsyncRedlock) -> int | None:
    """The fencing token (a function, so mypy does not narrow the property across calls)."""
    token: int | None = lock.fencing_token
    return token


def is_lost(lock: Redlock | AsyncRedlock) -> bool:
    lost: bool = lock.lost
    return lost


@contextlib.contextmanager
def stopped(servers: Sequence[RedisProcess]) -> Iterator[None]:
    """``servers`` are down (process stopped, socket gone) inside the block."""
    for server in servers:
        server.stop()
    try:
        yield
    finally:
        for server in servers:
            server.start()


@contextlib.contextmanager
def paused(servers: Sequence[RedisProcess]) -> Iterator[None]:
    """``servers`` are SIGSTOPped inside the block: connections open, no answers."""
    for server in servers:
        server.kill(signal.SIGSTOP)
    try:
        yield
    finally:
        for server in servers:
            server.kill(signal.SIGCONT)


def rejoined(masters: Sequence[redis.Redis], admins: Sequence[redis.Redis]) -> None:
    """Wait until every master takes part again (a restarted master's lane may still be in
    redis-py's retries from while it was down): a probe lock is granted on all of them."""
    probe = Redlock(masters, "probe-rejoined", ttl=TTL)

    def all_in() -> bool:
        try:
            if not probe.acquire(blocking=False):
                return False
        except QuorumError:  # a majority is still away
            return False
        try:
            return owners(admins, "probe-rejoined") == [probe.token] * len(admins)
        finally:
            probe.release()

    wait_for(all_in, timeout=30)


async def arejoined(masters: Sequence[redis.asyncio.Redis], admins: Sequence[redis.Redis]) -> None:
    """:func:`rejoined` for asyncio clients."""
    probe = AsyncRedlock(masters, "probe-rejoined", ttl=TTL)

    async def all_in() -> bool:
        try:
            if not await probe.acquire(blocking=False):
                return False
        except QuorumError:  # a majority is still away
            return False
        try:
            return owners(admins, "probe-rejoined") == [probe.token] * len(admins)
        finally:
            await probe.release()

    await async_wait_for(all_in, timeout=30)


def down_word(outcome: str) -> bool:
    """A stopped master's outcome: "late" (its lane is in redis-py's reconnect retries) or a
    connection error."""
    return outcome == "late" or outcome.startswith("error: ConnectionError: ")


def outcome_kinds(err: QuorumError) -> list[str]:
    """Each master's outcome reduced to its first word ("ok", "busy", "late", "error:")."""
    return [value.split(" ")[0] for value in err.outcomes.values()]


@pytest.fixture(params=[3, 5], ids=["3masters", "5masters"])
def n(request: pytest.FixtureRequest) -> int:
    value: int = request.param
    return value


# =========================================================================== sync: Lock API


def test_acquire_release_roundtrip(
    masters: list[redis.Redis], admins: list[redis.Redis], n: int
) -> None:
    lock = Redlock(masters[:n], "job", ttl=TTL)
    assert lock.quorum == n // 2 + 1
    assert len(lock.masters) == n
    assert not lock.locked()
    assert not lock.owned()
    assert lock.remaining() is None
    assert fence(lock) is None
    assert lock.acquire() is True
    assert lock.locked()
    assert lock.owned()
    remaining = lock.remaining()
    assert remaining is not None
    assert 0 < remaining <= TTL
    assert fence(lock) == 1
    assert not lock.lost
    # The key is on every master, with our token and the lease as TTL.
    assert_held(admins[:n], "job", lock.token)
    assert all(0 < ttl <= TTL * 1000 for ttl in pttls(admins[:n], "job"))
    assert counters(admins[:n], "job") == [1] * n
    assert owners(admins[n:], "job") == [None] * (N_MASTERS - n)
    stats = lock.statistics()
    assert stats.held
    assert not stats.lost
    assert stats.fencing_token == 1
    assert stats.acquisitions == 1
    assert stats.failed_acquisitions == 0
    assert stats.lease_remaining is not None
    assert 0 < stats.lease_remaining <= TTL - (0.01 * TTL + 0.002)  # the validity: ttl - drift
    lock.release()
    assert_free(admins, "job")
    assert not lock.locked()
    assert not lock.owned()
    assert fence(lock) is None
    assert not lock.statistics().held
    with pytest.raises(NotOwnedError):
        lock.release()


def test_context_manager(masters: list[redis.Redis], admins: list[redis.Redis], n: int) -> None:
    lock = Redlock(masters[:n], "ctx", ttl=TTL)
    with lock as held:
        assert held is lock
        assert lock.owned()
        assert_held(admins[:n], "ctx", lock.token)
    assert_free(admins, "ctx")


def test_a_second_object_waits_for_the_release(
    masters: list[redis.Redis], admins: list[redis.Redis], n: int
) -> None:
    holder = Redlock(masters[:n], "wait", ttl=TTL)
    assert holder.acquire()
    waiter = Redlock(masters[:n], "wait", ttl=TTL, retry_delay=0.05)
    waiting = Background(lambda: waiter.acquire(timeout=20))
    time.sleep(0.3)
    assert not waiting.done  # blocked while the holder has it
    released_at = time.monotonic()
    holder.release()
    assert waiting.join() is True
    assert waiting.at is not None
    assert waiting.at > released_at
    assert waiter.fencing_token == 2
    assert_held(admins[:n], "wait", waiter.token)
    assert waiter.statistics().acquisitions == 1
    waiter.release()
    assert_free(admins, "wait")


def test_busy_lock_is_not_acquired(
    masters: list[redis.Redis], admins: list[redis.Redis], n: int
) -> None:
    holder = Redlock(masters[:n], "busy", ttl=TTL)
    assert holder.acquire()
    other = Redlock(masters[:n], "busy", ttl=TTL, retry_delay=0.05)
    assert other.acquire(blocking=False) is False
    assert other.acquire(timeout=0.3) is False
    assert other.acquire(timeout=0) is False
    assert fence(other) is None
    assert other.token is None
    stats = other.statistics()
    assert stats.failed_acquisitions == 3
    assert stats.acquisitions == 0
    assert not stats.held
    # Nothing of the loser's is left: every key is the holder's.
    assert owners(admins[:n], "busy") == [holder.token] * n
    assert counters(admins[:n], "busy") == [1] * n  # INCR only on a grant
    with (
        pytest.raises(AcquireTimeoutError) as err,
        Redlock(masters[:n], "busy", ttl=TTL, timeout=0.2),
    ):
        pytest.fail("must not enter")
    assert err.value.name == "busy"
    holder.release()
    assert other.acquire(blocking=False) is True
    assert other.fencing_token == 2
    other.release()


def test_acquire_while_held_is_a_usage_error(masters: list[redis.Redis]) -> None:
    lock = Redlock(masters, "twice", ttl=TTL)
    assert lock.acquire()
    with pytest.raises(LockUsageError):
        lock.acquire(blocking=False)
    assert fence(lock) == 1
    lock.release()


def test_extend_add_and_replace(
    masters: list[redis.Redis], admins: list[redis.Redis], n: int
) -> None:
    lock = Redlock(masters[:n], "ext", ttl=2)
    assert lock.acquire()
    new_ttl = lock.extend(3)
    assert 4.0 < new_ttl <= 5.0
    assert all(4000 < ttl <= 5000 for ttl in pttls(admins[:n], "ext"))
    remaining = lock.remaining()
    assert remaining is not None
    assert 4.0 < remaining <= 5.0
    replaced = lock.extend(1, replace=True)
    assert 0 < replaced <= 1.0
    assert all(0 < ttl <= 1000 for ttl in pttls(admins[:n], "ext"))
    remaining = lock.remaining()
    assert remaining is not None
    assert 0 < remaining <= 1.0
    stats = lock.statistics()
    assert stats.lease_remaining is not None
    assert stats.lease_remaining <= 1.0
    lock.release()
    with pytest.raises(NotOwnedError):
        lock.extend(1)


def test_extend_counts_only_on_a_majority(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "ext-quorum", ttl=TTL)
    assert lock.acquire()
    for admin in admins[:2]:  # a minority lost it: the extension still counts
        admin.delete(lock_key("ext-quorum"))
    assert lock.extend(5) > TTL - 1
    assert owners(admins, "ext-quorum")[:2] == [None, None]  # never re-created
    admins[2].delete(lock_key("ext-quorum"))  # now a majority lost it
    with pytest.raises(LockLostError):
        lock.extend(5)
    assert lock.lost
    with pytest.raises(LockLostError):
        lock.release()
    assert_free(admins, "ext-quorum")


def test_watchdog_keeps_it_held_past_several_leases(
    masters: list[redis.Redis], admins: list[redis.Redis], n: int
) -> None:
    lock = Redlock(masters[:n], "watchdog", watchdog_lease=1.0, node_timeout=0.3)
    assert lock.acquire()
    token = lock.token
    assert_held(admins[:n], "watchdog", token)
    end = time.monotonic() + 3.5  # three and a half leases
    while time.monotonic() < end:
        assert owners(admins[:n], "watchdog") == [token] * n
        time.sleep(0.1)
    assert lock.owned()
    assert not lock.lost
    stats = lock.statistics()
    assert stats.renewals > 0
    assert stats.renewal_failures == 0
    lock.release()
    assert_free(admins, "watchdog")


def test_on_lost_fires_when_a_majority_of_keys_is_deleted(
    masters: list[redis.Redis], admins: list[redis.Redis], n: int
) -> None:
    fired = threading.Event()
    lock = Redlock(
        masters[:n], "lost", watchdog_lease=3.0, renew_interval=0.2, on_lost=lambda _: fired.set()
    )
    assert lock.acquire()
    minority = n - lock.quorum
    for admin in admins[:minority]:
        admin.delete(lock_key("lost"))
    # A minority gone: renewals go on (on the rest), the lock is still held.
    before = lock.statistics().renewals
    wait_for(lambda: lock.statistics().renewals >= before + 2)
    assert not fired.is_set()
    assert not is_lost(lock)
    assert lock.owned()
    admins[minority].delete(lock_key("lost"))  # now a majority
    assert fired.wait(5.0)
    assert is_lost(lock)
    assert lock.statistics().lost
    with pytest.raises(LockLostError):
        lock.release()
    assert is_lost(lock)
    # The release still removed what was left of ours on the other masters.
    assert_free(admins, "lost")


def test_release_after_takeover_raises_and_never_touches_the_new_holder(
    masters: list[redis.Redis], admins: list[redis.Redis], n: int
) -> None:
    lock = Redlock(masters[:n], "taken", ttl=TTL)
    assert lock.acquire()
    majority = lock.quorum
    for admin in admins[:majority]:  # as if it expired there and another client took it
        admin.set(lock_key("taken"), FOREIGN, px=10_000)
    assert not lock.owned()
    with pytest.raises(LockLostError):
        lock.extend(1)
    with pytest.raises(LockLostError):
        lock.release()
    assert lock.lost
    values = [admin.get(lock_key("taken")) for admin in admins[:n]]
    assert values[:majority] == [FOREIGN] * majority  # untouched
    assert values[majority:] == [None] * (n - majority)  # ours removed


def test_a_fixed_lease_that_ran_out_is_lost(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "fixed-out", ttl=0.3)
    assert lock.acquire()
    wait_for(lambda: lock.lost)
    wait_for(lambda: owners(admins, "fixed-out") == [None] * N_MASTERS)
    with pytest.raises(LockLostError):
        lock.release()
    assert lock.acquire(timeout=0) is True  # its old hold is over: no usage error
    lock.release()


def test_detach_and_adopt_are_usage_errors(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "no-handoff", ttl=TTL)
    assert lock.acquire()
    token = lock.token
    assert token is not None
    with pytest.raises(LockUsageError):
        lock.detach()
    assert lock.owned()  # detach did nothing
    other = Redlock(masters, "no-handoff", ttl=TTL)
    with pytest.raises(LockUsageError):
        other.adopt(token)
    assert other.token is None
    lock.release()
    assert_free(admins, "no-handoff")


# =========================================================================== sync: quorum


def test_minority_down_still_acquires(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "minority-down", ttl=TTL)
    assert lock.acquire()  # identify the masters while all are up
    lock.release()
    with stopped(servers[:2]):
        assert lock.acquire(blocking=False)
        assert owners(admins[2:], "minority-down") == [lock.token] * 3
        assert lock.owned()
        assert lock.extend(1) > 0
        lock.release()
        assert owners(admins[2:], "minority-down") == [None] * 3


def test_minority_down_from_the_start_still_acquires(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    """Masters down at the first acquire cannot be identified yet; that must not block."""
    with stopped(servers[3:]):
        lock = Redlock(masters, "down-at-start", ttl=TTL)
        assert lock.acquire()
        assert owners(admins[:3], "down-at-start") == [lock.token] * 3
        lock.release()
    # Back up: once their lanes reach them, they are identified, and take part.
    rejoined(masters, admins)
    assert lock.acquire()
    assert owners(admins, "down-at-start") == [lock.token] * N_MASTERS
    lock.release()


def test_majority_down_is_a_quorum_error_not_false(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "majority-down", ttl=TTL)
    assert lock.acquire()
    lock.release()
    with stopped(servers[:3]):
        with pytest.raises(QuorumError) as err:
            lock.acquire(blocking=False)
        e = err.value
        assert e.name == "majority-down"
        assert e.operation == "acquire"
        assert e.needed == 3
        assert list(e.outcomes) == list(lock.masters)  # one outcome per master, in order
        labels = [str(s.socket_path) for s in servers]
        assert list(e.outcomes) == labels
        for label in labels[:3]:
            assert down_word(e.outcomes[label]), e.outcomes
        assert [e.outcomes[label] for label in labels[3:]] == ["ok", "ok"]
        assert "reached 2 of 5 masters, 3 needed" in str(e)
        # Undone on the masters that granted it.
        assert owners(admins[3:], "majority-down") == [None, None]
        # Blocking does not wait out an outage, and ``with`` raises the same error.
        with pytest.raises(QuorumError):
            lock.acquire()
        with pytest.raises(QuorumError), lock:
            pytest.fail("must not enter")
        assert owners(admins[3:], "majority-down") == [None, None]
        assert lock.token is None


def test_majority_down_while_held_makes_release_a_quorum_error(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "down-held", ttl=TTL)
    assert lock.acquire()
    with stopped(servers[:3]):
        with pytest.raises(QuorumError) as err:
            lock.release()
        assert err.value.operation == "release"
        assert all(down_word(o) for o in list(err.value.outcomes.values())[:3]), err.value
        assert outcome_kinds(err.value)[3:] == ["ok", "ok"]
        assert lock.token is not None  # still ours as far as anyone can tell
    # The restarted masters lost their data (no persistence): a majority says "gone".
    rejoined(masters, admins)
    with pytest.raises(LockLostError):
        lock.release()
    assert_free(admins, "down-held")


def test_minority_held_by_another_token_still_acquires(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    for admin in admins[:2]:
        admin.set(lock_key("minority-held"), FOREIGN, px=60_000)
    lock = Redlock(masters, "minority-held", ttl=TTL)
    assert not lock.locked()  # two keys of five is nobody's lock
    assert lock.acquire(blocking=False)
    assert lock.locked()
    assert owners(admins, "minority-held") == ["f" * 32] * 2 + [lock.token] * 3
    lock.release()
    assert owners(admins, "minority-held") == ["f" * 32] * 2 + [None] * 3
    assert all(ttl > 0 for ttl in pttls(admins[:2], "minority-held"))  # untouched


def test_majority_held_by_others_is_busy_and_leaves_nothing_of_ours(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    for admin in admins[:3]:
        admin.set(lock_key("majority-held"), FOREIGN, px=60_000)
    lock = Redlock(masters, "majority-held", ttl=TTL, retry_delay=0.05)
    assert lock.locked()
    assert lock.acquire(blocking=False) is False  # busy, not an error
    assert lock.acquire(timeout=0.3) is False
    assert lock.statistics().failed_acquisitions == 2
    assert owners(admins, "majority-held") == ["f" * 32] * 3 + [None] * 2
    assert [admin.get(lock_key("majority-held")) for admin in admins[:3]] == [FOREIGN] * 3


def test_sigstopped_master_is_late_and_its_late_grant_is_released(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "paused", ttl=3)
    assert lock.acquire()  # open a pooled connection to every master
    lock.release()
    with paused(servers[:1]):
        assert lock.acquire(blocking=False)  # four of five in time
        assert owners(admins[1:], "paused") == [lock.token] * 4
    # Resumed: master 0 runs the acquire it got while stopped. The key is ours, with a TTL,
    # and the release deletes it there too: on master 0's lane, after the round ended (a
    # majority had answered).
    wait_for(lambda: admins[0].exists(lock_key("paused")) == 1)
    assert owners(admins, "paused") == [lock.token] * N_MASTERS
    assert_every_key_expires(admins, "paused")
    lock.release()
    assert owners(admins[1:], "paused") == [None] * 4
    wait_for(lambda: owners(admins, "paused") == [None] * N_MASTERS)


def test_late_outcome_is_reported_and_late_grants_expire(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "late", ttl=3)
    assert lock.acquire()
    lock.release()
    for admin in admins[1:3]:
        admin.set(lock_key("late"), FOREIGN, px=60_000)
    with paused(servers[:1]):
        # 1 late + 2 busy + 2 ok: no majority, and not for contention alone.
        with pytest.raises(QuorumError) as err:
            lock.acquire(blocking=False)
        assert outcome_kinds(err.value) == ["late", "busy", "busy", "ok", "ok"]
        assert owners(admins[1:], "late") == ["f" * 32] * 2 + [None] * 2
    # Resumed, master 0 runs the acquire it got while stopped (its fence counter moves).
    # The key that made is undone by the release sent after the failure, if that reached
    # it, or expires with its TTL; it never stays.
    wait_for(lambda: counters(admins, "late")[0] == 2)
    assert_late_grants_end(admins[:1], "late", 3.0)
    assert_every_key_expires(admins, "late")
    assert [admin.get(lock_key("late")) for admin in admins[1:3]] == [FOREIGN] * 2


def test_majority_late_is_a_quorum_error(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "majority-late", ttl=3)
    assert lock.acquire()
    lock.release()
    with paused(servers[:3]):
        with pytest.raises(QuorumError) as err:
            lock.acquire(blocking=False)
        assert outcome_kinds(err.value) == ["late", "late", "late", "ok", "ok"]
        assert owners(admins[3:], "majority-late") == [None, None]
    # Resumed, the three run the acquire they got while stopped; those keys are released
    # or expire with their TTL.
    wait_for(lambda: counters(admins, "majority-late")[:3] == [2, 2, 2])
    assert_late_grants_end(admins[:3], "majority-late", 3.0)


# =========================================================================== sync: fencing


def test_fencing_tokens_strictly_increase_across_objects(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    locks = [Redlock(masters, "fenced", ttl=TTL) for _ in range(3)]
    tokens: list[int] = []
    for i in range(15):
        lock = locks[i % 3]
        assert lock.acquire(timeout=5)
        token = fence(lock)
        assert token is not None
        tokens.append(token)
        if i % 2:
            lock.release()
        else:  # as if it expired: the counters must still grow
            for admin in admins:
                admin.delete(lock_key("fenced"))
            with pytest.raises(LockLostError):
                lock.release()
    assert tokens == list(range(1, 16))
    assert counters(admins, "fenced") == [15] * N_MASTERS


def test_fencing_tokens_increase_with_unequal_counters(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    start = [100, 100, 7, 250, 0]
    for admin, value in zip(admins, start, strict=True):
        if value:
            admin.set(fence_key("skewed"), value)
    locks = [Redlock(masters, "skewed", ttl=TTL) for _ in range(3)]
    tokens: list[int] = []
    for i in range(12):
        lock = locks[i % 3]
        if i == 6:  # a minority busy with a stranger while counters are skewed again
            for admin in admins[3:]:
                admin.set(lock_key("skewed"), FOREIGN, px=60_000)
            admins[0].set(fence_key("skewed"), 10_000)
        assert lock.acquire(timeout=5)
        token = fence(lock)
        assert token is not None
        tokens.append(token)
        # The write-back round: a majority now has a counter >= the token.
        assert sum(c >= token for c in counters(admins, "skewed")) >= lock.quorum
        lock.release()
    assert all(a < b for a, b in itertools.pairwise(tokens)), tokens
    assert tokens[0] > 250
    assert tokens[6] > 10_000


def test_fencing_false_has_no_token_and_no_write_back(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    admins[0].set(fence_key("unfenced"), 100)
    lock = Redlock(masters, "unfenced", ttl=TTL, fencing=False)
    assert lock.acquire()
    assert fence(lock) is None
    assert lock.owned()
    # No round to balance the counters.
    assert counters(admins, "unfenced") == [101, 1, 1, 1, 1]
    lock.release()
    assert fence(lock) is None


def test_noscript_after_script_flush_on_every_master(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    def flush() -> None:
        for admin in admins:
            admin.script_flush()

    admins[0].set(fence_key("noscript"), 50)  # so the fence write-back script runs too
    lock = Redlock(masters, "noscript", ttl=TTL)
    flush()
    assert lock.acquire()
    assert lock.fencing_token == 51
    assert counters(admins, "noscript") == [51] * N_MASTERS
    flush()
    assert lock.extend(1) > 0
    flush()
    assert lock.owned()
    flush()
    assert lock.remaining() is not None
    flush()
    lock.release()
    assert_free(admins, "noscript")
    flush()
    assert not lock.locked()


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_the_fan_out_packs_commands_as_redis_py_does(encoding: str) -> None:
    """The fan-out packs with hiredis' packer where it gives redis-py's bytes (UTF-8 text,
    bytes, integers), and with the connection's own packer otherwise."""
    ops: list[Eval | Call] = [
        Eval(SCRIPTS["lock_acquire"], ("redislock:{é}", "k2"), ("tok", 10_000, "h|1|2", 0)),
        Eval(SCRIPTS["lock_release"], ("redislock:{über}",), ("ü", -5, 2**70)),
        Call(("INFO", "server")),
        Call(("EXISTS", "redislock:{x}")),
    ]
    connections: list[Any] = [
        redis.Connection(encoding=encoding),  # type: ignore[no-untyped-call]
        redis.asyncio.Connection(encoding=encoding),
    ]
    for conn in connections:
        for op in ops:
            packed, command = Packer()(conn, op)
            assert b"".join(packed) == b"".join(conn.pack_command(*wire(op)))
            assert command == wire(op)[0]


def kill_lock_connections(admins: Sequence[redis.Redis]) -> int:
    """Every master's server closes all its client connections but the admin's own (as a
    restart, a server-side idle timeout or ``CLIENT KILL`` would); how many it closed."""
    return sum(int(admin.client_kill_filter(_type="normal", skipme=True)) for admin in admins)


def on_the_fast_path(client: Any) -> bool:
    """The next round writes to this master on an idle connection (not through its lane)."""
    memory = client_state(client)
    return not memory.suspect and not memory.lane.running and bool(memory.lane.idle)


def test_idle_connections_closed_by_the_servers_go_through_the_lanes(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    """The fan-out's fast path checks its idle connections before it writes: the ones the
    servers closed go through their lanes (which connect again), so every master grants."""
    lock = Redlock(masters, "killed", ttl=TTL)
    for _ in range(3):  # the masters answered in time: the next rounds take the fast path
        assert lock.acquire()
        lock.release()
    assert kill_lock_connections(admins) >= N_MASTERS
    assert lock.acquire()
    # The round ends at a majority; the lanes of the others may still be granting.
    wait_for(lambda: owners(admins, "killed") == [lock.token] * N_MASTERS)
    lock.release()
    wait_for(lambda: owners(admins, "killed") == [None] * N_MASTERS)
    wait_for(lambda: all(on_the_fast_path(m) for m in masters))
    for _ in range(3):  # every master answers within the round again
        assert lock.acquire()
        assert owners(admins, "killed") == [lock.token] * N_MASTERS
        lock.release()
        assert owners(admins, "killed") == [None] * N_MASTERS


def test_noscript_in_watchdog_renewals(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = Redlock(masters, "noscript-wd", watchdog_lease=1.0, node_timeout=0.3)
    assert lock.acquire()
    for _ in range(5):
        for admin in admins:
            admin.script_flush()
        time.sleep(0.3)
    assert not lock.lost
    assert lock.statistics().renewal_failures == 0
    assert lock.owned()
    lock.release()


# =========================================================================== validation


@pytest.fixture
def dead() -> Iterator[list[redis.Redis]]:
    """Sync clients on five distinct sockets that do not exist (I/O would fail)."""
    clients = [
        redis.Redis(unix_socket_path=f"/nonexistent/redislock-{i}.sock") for i in range(N_MASTERS)
    ]
    yield clients
    for client in clients:
        client.close()


@pytest.fixture
async def adead() -> AsyncIterator[list[redis.asyncio.Redis]]:
    clients = [
        redis.asyncio.Redis(unix_socket_path=f"/nonexistent/redislock-{i}.sock")
        for i in range(N_MASTERS)
    ]
    yield clients
    await close_amasters(clients)


@pytest.mark.parametrize("count", [0, 1, 2])
def test_fewer_than_three_masters(dead: list[redis.Redis], count: int) -> None:
    with pytest.raises(LockConfigError, match="at least 3"):
        Redlock(dead[:count], "x")


@pytest.mark.parametrize("masters_arg", ["redis://a", b"x", None, 3])
def test_masters_must_be_a_list(masters_arg: Any) -> None:
    with pytest.raises(LockConfigError, match="list or tuple"):
        Redlock(masters_arg, "x")


def test_same_client_twice(dead: list[redis.Redis]) -> None:
    with pytest.raises(LockConfigError, match="same endpoint"):
        Redlock([dead[0], dead[1], dead[0]], "x")


def test_same_endpoint_twice(dead: list[redis.Redis]) -> None:
    twin = redis.Redis(unix_socket_path="/nonexistent/redislock-1.sock")
    try:
        with pytest.raises(LockConfigError, match="same endpoint"):
            Redlock([dead[0], dead[1], twin], "x")
        tcp = [redis.Redis(host="10.0.0.1", port=7000), redis.Redis(host="10.0.0.1", port=7000)]
        with pytest.raises(LockConfigError, match="same endpoint"):
            Redlock([dead[0], *tcp], "x")
    finally:
        twin.close()


def test_tuple_of_masters_is_accepted(dead: list[redis.Redis]) -> None:
    lock = Redlock(tuple(dead[:3]), "x")
    assert lock.masters == tuple(f"/nonexistent/redislock-{i}.sock" for i in range(3))
    assert lock.quorum == 2


def test_wrong_client_types(dead: list[redis.Redis], adead: list[redis.asyncio.Redis]) -> None:
    with pytest.raises(LockConfigError, match=r"redis\.Redis"):
        Redlock([dead[0], dead[1], adead[2]], "x")  # type: ignore[list-item]
    with pytest.raises(LockConfigError, match=r"redis\.asyncio\.Redis"):
        AsyncRedlock([adead[0], adead[1], dead[2]], "x")  # type: ignore[list-item]
    with pytest.raises(LockConfigError):
        Redlock([dead[0], dead[1], "redis://localhost"], "x")  # type: ignore[list-item]


def cluster_port() -> int:
    """A free TCP port <= 55535 whose cluster bus port (+10000) is free too."""
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(20_000, 30_000)
        with contextlib.ExitStack() as stack:
            try:
                for p in (port, port + 10_000):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", p))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port pair found")


def test_cluster_clients_are_rejected(
    short_tmp: Path, dead: list[redis.Redis], adead: list[redis.asyncio.Redis]
) -> None:
    args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
    port = cluster_port()
    with RedisProcess(
        short_tmp / "redlock-cluster", port=port, unix_socket=False, args=args
    ) as server:
        admin = redis.Redis(**server.client_kwargs(), decode_responses=True)
        try:
            admin.execute_command("CLUSTER", "ADDSLOTS", *range(16384))  # type: ignore[no-untyped-call]
            wait_for(lambda: admin.cluster("INFO")["cluster_state"] == "ok")
        finally:
            admin.close()
        assert server.port is not None
        cluster = redis.cluster.RedisCluster(host="127.0.0.1", port=server.port)
        try:
            with pytest.raises(LockConfigError, match="no cluster"):
                Redlock([cluster, dead[0], dead[1]], "x")  # type: ignore[list-item]
        finally:
            cluster.close()
        acluster = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=server.port)
        with pytest.raises(LockConfigError, match=r"redis\.asyncio\.Redis"):
            AsyncRedlock([acluster, adead[0], adead[1]], "x")  # type: ignore[list-item]


def test_even_number_of_masters_warns(
    servers: list[RedisProcess], masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    with pytest.warns(RuntimeWarning, match="even number") as warned:
        lock = Redlock(masters[:4], "even", ttl=TTL)
    assert len(warned) == 1  # the masters are checked once per construction
    assert lock.quorum == 3
    with stopped(servers[:1]):  # four tolerate one failure...
        assert lock.acquire(blocking=False)
        lock.release()
    with stopped(servers[:2]), pytest.raises(QuorumError):  # ...and not two, as three would
        lock.acquire(blocking=False)
    wait_for(lambda: owners(admins, "even") == [None] * N_MASTERS)  # undone, maybe on lanes


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"node_timeout": 0}, "node_timeout"),
        ({"node_timeout": -1}, "node_timeout"),
        ({"node_timeout": "1"}, "node_timeout"),
        ({"node_timeout": float("nan")}, "node_timeout"),
        ({"node_timeout": 4.0}, "at most a third"),  # ttl=10
        ({"drift_factor": True}, "drift_factor"),
        ({"drift_factor": "0.01"}, "drift_factor"),
        ({"drift_factor": -0.01}, "drift_factor"),
        ({"drift_factor": 0.5}, "drift_factor"),
        ({"retry_delay": 0}, "retry_delay"),
        ({"retry_delay": -0.1}, "retry_delay"),
        ({"retry_delay": None}, "retry_delay"),
        ({"retry_delay": float("inf")}, "retry_delay"),
        ({"fencing": 1}, "fencing"),
        ({"fencing": "yes"}, "fencing"),
        ({"fencing": None}, "fencing"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": 0.001}, "validity"),  # no validity left after drift
    ],
)
def test_bad_options(
    dead: list[redis.Redis], adead: list[redis.asyncio.Redis], kwargs: dict[str, Any], match: str
) -> None:
    options = {"ttl": TTL, **kwargs}
    with pytest.raises(LockConfigError, match=match):
        Redlock(dead[:3], "x", **options)
    with pytest.raises(LockConfigError, match=match):
        AsyncRedlock(adead[:3], "x", **options)


def test_bad_name(dead: list[redis.Redis]) -> None:
    with pytest.raises(LockConfigError):
        Redlock(dead[:3], "")
    with pytest.raises(LockConfigError):
        Redlock(dead[:3], "}x")


def test_same_server_by_two_addresses_is_found_by_run_id(
    short_tmp: Path, masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    sock = short_tmp / "dual.sock"
    args = ["--unixsocket", str(sock), "--unixsocketperm", "700"]
    with RedisProcess(short_tmp / "redlock-dual", unix_socket=False, args=args) as server:
        by_tcp = master(server)
        by_unix = redis.Redis(unix_socket_path=str(sock))
        try:
            lock = Redlock([by_tcp, masters[0], by_unix], "dup", ttl=TTL)  # looks independent
            with pytest.raises(LockConfigError, match="same server") as err:
                lock.acquire(blocking=False)
            assert "run_id" in str(err.value)
            with pytest.raises(LockConfigError, match="same server"):  # every time
                lock.acquire()
            assert by_tcp.exists(lock_key("dup")) == 0  # found before anything was written
            assert owners(admins, "dup") == [None] * N_MASTERS
            # Two databases of one server are one master too.
            db1 = master(server, db=1)
            try:
                with pytest.raises(LockConfigError, match="same server"):
                    Redlock([by_tcp, db1, masters[0]], "dup", ttl=TTL).acquire()
            finally:
                db1.close()
        finally:
            by_tcp.close()
            by_unix.close()


# =========================================================================== asyncio


async def aowners(admins: Sequence[redis.Redis], name: str) -> list[str | None]:
    return await asyncio.to_thread(owners, admins, name)


async def test_async_roundtrip(
    amasters: list[redis.asyncio.Redis], admins: list[redis.Redis], n: int
) -> None:
    lock = AsyncRedlock(amasters[:n], "ajob", ttl=TTL)
    assert not await lock.locked()
    assert not await lock.owned()
    assert await lock.remaining() is None
    assert await lock.acquire() is True
    assert await lock.locked()
    assert await lock.owned()
    remaining = await lock.remaining()
    assert remaining is not None
    assert 0 < remaining <= TTL
    assert fence(lock) == 1
    assert_held(admins[:n], "ajob", lock.token)
    assert lock.statistics().acquisitions == 1
    new_ttl = await lock.extend(5)
    assert TTL < new_ttl <= TTL + 5
    assert 0 < await lock.extend(2, replace=True) <= 2
    assert all(0 < ttl <= 2000 for ttl in pttls(admins[:n], "ajob"))
    await lock.release()
    assert_free(admins, "ajob")
    assert fence(lock) is None
    with pytest.raises(NotOwnedError):
        await lock.release()
    async with lock:
        assert await lock.owned()
        assert lock.fencing_token == 2
    with pytest.raises(LockUsageError):
        lock.detach()
    with pytest.raises(LockUsageError):
        await lock.adopt("a" * 32)


async def test_async_waiter_gets_it_after_the_release(
    amasters: list[redis.asyncio.Redis], admins: list[redis.Redis], n: int
) -> None:
    holder = AsyncRedlock(amasters[:n], "await", ttl=TTL)
    assert await holder.acquire()
    waiter = AsyncRedlock(amasters[:n], "await", ttl=TTL, retry_delay=0.05)
    assert await waiter.acquire(blocking=False) is False
    assert await waiter.acquire(timeout=0.2) is False
    with pytest.raises(AcquireTimeoutError):
        async with AsyncRedlock(amasters[:n], "await", ttl=TTL, timeout=0.2):
            pytest.fail("must not enter")
    task = asyncio.create_task(waiter.acquire(timeout=20))
    await asyncio.sleep(0.3)
    assert not task.done()
    await holder.release()
    assert await task is True
    assert waiter.fencing_token == 2
    assert owners(admins[:n], "await").count(waiter.token) >= waiter.quorum
    # A master that went through its lane (busy with the holder's release when the try
    # began) may still be granting in the background: the round ended at a majority.
    await async_wait_for(lambda: owners(admins[:n], "await") == [waiter.token] * n)
    assert waiter.statistics().failed_acquisitions == 2
    await waiter.release()


async def test_async_watchdog_and_on_lost(
    amasters: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    fired = asyncio.Event()

    async def on_lost(lock: AsyncRedlock) -> None:
        assert lock.lost
        fired.set()

    lock = AsyncRedlock(
        amasters, "awatchdog", watchdog_lease=1.0, node_timeout=0.3, on_lost=on_lost
    )
    assert await lock.acquire()
    token = lock.token
    assert_held(admins, "awatchdog", token)  # the first round ends at a majority (lanes)
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        assert owners(admins, "awatchdog") == [token] * N_MASTERS
        await asyncio.sleep(0.1)
    assert await lock.owned()
    assert lock.statistics().renewals > 0
    assert not fired.is_set()
    for admin in admins[:3]:
        admin.delete(lock_key("awatchdog"))
    await asyncio.wait_for(fired.wait(), 5.0)
    with pytest.raises(LockLostError):
        await lock.release()
    assert_free(admins, "awatchdog")


async def test_async_quorum_down_and_busy(
    servers: list[RedisProcess], amasters: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    lock = AsyncRedlock(amasters, "aquorum", ttl=TTL)
    assert await lock.acquire()
    await lock.release()
    with stopped(servers[:2]):
        assert await lock.acquire(blocking=False)
        assert owners(admins[2:], "aquorum") == [lock.token] * 3
        await lock.release()
    with stopped(servers[:3]):
        with pytest.raises(QuorumError) as err:
            await lock.acquire()
        assert err.value.operation == "acquire"
        kinds = outcome_kinds(err.value)
        assert kinds[3:] == ["ok", "ok"]
        assert all(down_word(v) for v in list(err.value.outcomes.values())[:3]), err.value
        assert owners(admins[3:], "aquorum") == [None, None]
    await arejoined(amasters, admins)
    for admin in admins[:2]:
        admin.set(lock_key("aquorum"), FOREIGN, px=60_000)
    assert await lock.acquire(blocking=False)  # a minority held by another
    assert owners(admins, "aquorum") == ["f" * 32] * 2 + [lock.token] * 3
    await lock.release()
    admins[2].set(lock_key("aquorum"), FOREIGN, px=60_000)
    assert await lock.acquire(blocking=False) is False  # a majority: busy
    assert owners(admins, "aquorum") == ["f" * 32] * 3 + [None] * 2


async def test_async_late_master(
    servers: list[RedisProcess], amasters: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    lock = AsyncRedlock(amasters, "alate", ttl=3)
    assert await lock.acquire()
    await lock.release()
    with paused(servers[:1]):
        assert await lock.acquire(blocking=False)
        assert owners(admins[1:], "alate") == [lock.token] * 4
    wait_for(lambda: admins[0].exists(lock_key("alate")) == 1)
    assert_every_key_expires(admins, "alate")
    await lock.release()  # master 0's release runs on its lane, after the round
    assert owners(admins[1:], "alate") == [None] * 4
    await async_wait_for(lambda: owners(admins, "alate") == [None] * N_MASTERS)
    with paused(servers[:3]):
        with pytest.raises(QuorumError) as err:
            await lock.acquire(blocking=False)
        assert outcome_kinds(err.value) == ["late", "late", "late", "ok", "ok"]
        assert owners(admins[3:], "alate") == [None, None]
    wait_for(lambda: counters(admins, "alate")[:3] == [3, 3, 3])
    assert_late_grants_end(admins[:3], "alate", 3.0)


async def test_async_fencing_and_noscript(
    amasters: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    for admin, value in zip(admins, [300, 300, 20, 0, 5], strict=True):
        if value:
            admin.set(fence_key("afenced"), value)
    locks = [AsyncRedlock(amasters, "afenced", ttl=TTL) for _ in range(2)]
    tokens: list[int] = []
    for i in range(8):
        for admin in admins:
            admin.script_flush()
        lock = locks[i % 2]
        assert await lock.acquire(timeout=5)
        token = fence(lock)
        assert token is not None
        tokens.append(token)
        assert sum(c >= token for c in counters(admins, "afenced")) >= lock.quorum
        await lock.release()
    assert all(a < b for a, b in itertools.pairwise(tokens)), tokens
    assert tokens[0] > 300
    unfenced = AsyncRedlock(amasters, "afenced", ttl=TTL, fencing=False)
    assert await unfenced.acquire()
    assert unfenced.fencing_token is None
    await unfenced.release()


async def test_async_idle_connections_closed_by_the_servers_go_through_the_lanes(
    amasters: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    lock = AsyncRedlock(amasters, "akilled", ttl=TTL)
    for _ in range(3):
        assert await lock.acquire()
        await lock.release()
    assert kill_lock_connections(admins) >= N_MASTERS
    await asyncio.sleep(0.1)  # the event loop reads the end of each closed connection
    assert await lock.acquire()
    await async_wait_for(lambda: owners(admins, "akilled") == [lock.token] * N_MASTERS)
    await lock.release()
    await async_wait_for(lambda: owners(admins, "akilled") == [None] * N_MASTERS)
    await async_wait_for(lambda: all(on_the_fast_path(m) for m in amasters))
    for _ in range(3):
        assert await lock.acquire()
        assert owners(admins, "akilled") == [lock.token] * N_MASTERS
        await lock.release()
        assert owners(admins, "akilled") == [None] * N_MASTERS


async def test_async_cancelled_waiter_leaves_nothing_of_its_own(
    amasters: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    # A stranger holds a majority: every try of the waiter wins the other two masters and
    # gives them back; a cancellation anywhere in that cycle must leave nothing of it.
    for admin in admins[:3]:
        admin.set(lock_key("acancel"), FOREIGN, px=60_000)
    waiter = AsyncRedlock(amasters, "acancel", ttl=TTL, retry_delay=0.01)
    expected = ["f" * 32] * 3 + [None] * 2  # the stranger's 3, nothing of ours
    rng = random.Random(7)
    for _ in range(15):
        task = asyncio.create_task(waiter.acquire(timeout=30))
        await asyncio.sleep(rng.uniform(0.0, 0.03))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert waiter.token is None
        # A grant that raced the cancellation is undone by the release queued behind it on
        # that master's lane: within moments, not at once.
        await async_wait_for(lambda: owners(admins, "acancel") == expected, timeout=2.0)
    assert waiter.statistics().acquisitions == 0
    for admin in admins[:3]:
        admin.delete(lock_key("acancel"))
    assert await waiter.acquire(blocking=False)  # still usable
    await waiter.release()


@pytest.fixture
async def slow_last(
    servers: list[RedisProcess], amasters: list[redis.asyncio.Redis]
) -> AsyncIterator[list[redis.asyncio.Redis]]:
    """The masters' asyncio clients, the last one behind a DelayProxy: its replies arrive
    0.1 s late, so a fan-out has every master's answer but that one for 0.1 s."""
    proxy = DelayProxy(str(servers[-1].socket_path), reply_delay=0.1)
    async with proxy.running():
        slow = redis.asyncio.Redis(port=proxy.port, socket_timeout=5)
        await slow.ping()  # a warm connection: only the lock's commands are slow
        yield [*amasters[:-1], slow]
        await close_amasters([slow])


async def test_async_cancel_after_the_grant_deletes_every_key(
    slow_last: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    lock = AsyncRedlock(slow_last, "agranted", ttl=TTL)
    assert await lock.acquire()  # identify the masters
    await lock.release()
    task = asyncio.create_task(lock.acquire())
    # Granted on every master; the last reply is still on the way when we cancel.
    await async_wait_for(lambda: None not in owners(admins, "agranted"))
    assert len(set(owners(admins, "agranted"))) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Undone on the four in time; on the slow one by its lane, once it answers.
    assert owners(admins[:-1], "agranted") == [None] * (N_MASTERS - 1)
    await async_wait_for(lambda: owners(admins, "agranted") == [None] * N_MASTERS)
    assert lock.token is None
    assert fence(lock) is None
    assert await lock.acquire()  # the object is still usable
    assert fence(lock) == 3
    await lock.release()
    assert owners(admins, "agranted") == [None] * N_MASTERS


async def test_async_same_server_by_two_addresses(
    short_tmp: Path, amasters: list[redis.asyncio.Redis]
) -> None:
    sock = short_tmp / "adual.sock"
    args = ["--unixsocket", str(sock), "--unixsocketperm", "700"]
    with RedisProcess(short_tmp / "redlock-adual", unix_socket=False, args=args) as server:
        by_tcp = amaster(server)
        by_unix = redis.asyncio.Redis(unix_socket_path=str(sock))
        try:
            lock = AsyncRedlock([by_unix, amasters[0], by_tcp], "adup", ttl=TTL)
            with pytest.raises(LockConfigError, match="same server"):
                await lock.acquire()
            assert await by_tcp.exists(lock_key("adup")) == 0
        finally:
            await by_tcp.aclose()
            await by_unix.aclose()


# =========================================================================== processes


class Section(NamedTuple):
    """One critical section of one worker (times: ``time.monotonic_ns()``, one clock for
    every process on Linux)."""

    pid: int
    fence: int
    start: int  # after acquire() returned
    end: int  # before release() was called
    accepted: int  # fenced_write's verdict: 1 accepted
    seen: int  # the counter read at the start
    wrote: int  # the counter written at the end
    asked: int  # before acquire() was called


RESOURCE = "test:redlock:resource"
COUNTER = "test:redlock:counter"


async def _sections(
    paths: list[str],
    resource: dict[str, Any],
    cycles: int,
    use_async: bool,
    barrier: Barrier,
) -> list[Section]:
    store = redis.Redis(**resource, socket_timeout=10)
    script = SCRIPTS["fenced_write"]
    out: list[Section] = []
    rng = random.Random()
    lock: Any
    closers: list[Any] = [store.close]
    if use_async:
        aclients = [redis.asyncio.Redis(unix_socket_path=p) for p in paths]
        closers += [c.aclose for c in aclients]
        lock = AsyncRedlock(aclients, "procs", ttl=5, retry_delay=0.02)
    else:
        clients = [redis.Redis(unix_socket_path=p) for p in paths]
        closers += [c.close for c in clients]
        lock = Redlock(clients, "procs", ttl=5, retry_delay=0.02)

    async def call(value: Any) -> Any:
        return await value if asyncio.iscoroutine(value) else value

    try:
        barrier.wait(60)
        for _ in range(cycles):
            asked = time.monotonic_ns()
            if not await call(lock.acquire(timeout=60)):
                raise RuntimeError("acquire timed out")
            start = time.monotonic_ns()
            token = lock.fencing_token
            assert token is not None
            seen = int(store.get(COUNTER) or 0)  # a non-atomic read-modify-write
            verdict = store.eval(script.source, 1, RESOURCE, token, "pid", os.getpid())
            await asyncio.sleep(rng.uniform(0.0, 0.002))
            store.set(COUNTER, seen + 1)
            end = time.monotonic_ns()
            await call(lock.release())
            out.append(
                Section(os.getpid(), token, start, end, int(verdict[0]), seen, seen + 1, asked)
            )
    finally:
        for close in closers:
            await call(close())
    return out


def _worker(
    paths: list[str],
    resource: dict[str, Any],
    cycles: int,
    use_async: bool,
    barrier: Barrier,
    out: Queue[Any],
) -> None:
    try:
        out.put((os.getpid(), asyncio.run(_sections(paths, resource, cycles, use_async, barrier))))
    except BaseException as exc:
        out.put((os.getpid(), repr(exc)))
        raise


def test_processes_exclude_each_other_with_accepted_increasing_tokens(
    servers: list[RedisProcess], admins: list[redis.Redis], redis_server: RedisProcess
) -> None:
    store = redis.Redis(**redis_server.client_kwargs(), decode_responses=True)
    store.delete(RESOURCE, COUNTER)
    procs_n, cycles = 4, 25
    paths = [str(s.socket_path) for s in servers]
    barrier = CTX.Barrier(procs_n)
    out: Queue[Any] = CTX.Queue()
    procs = [
        CTX.Process(
            target=_worker,
            args=(paths, redis_server.client_kwargs(), cycles, i % 2 == 1, barrier, out),
        )
        for i in range(procs_n)
    ]
    try:
        for p in procs:
            p.start()
        results = [out.get(timeout=90) for _ in procs]
    finally:
        for p in procs:
            p.join(15)
            if p.is_alive():
                p.kill()
                p.join()
        out.close()
        out.join_thread()
    try:
        errors = [r for _, r in results if isinstance(r, str)]
        assert errors == []
        assert [p.exitcode for p in procs] == [0] * procs_n
        sections = sorted((s for _, ss in results for s in ss), key=lambda s: s.start)
        assert len(sections) == procs_n * cycles
        for a, b in itertools.pairwise(sections):
            assert a.end <= b.start, f"two holders at once: {a} and {b}"
            assert a.fence < b.fence, f"tokens out of order: {a} and {b}"
            assert b.seen == a.wrote, f"lost update between {a} and {b}"
        assert all(s.accepted == 1 for s in sections)  # the resource took every write
        assert int(store.get(COUNTER) or 0) == procs_n * cycles
        assert int(store.hget(RESOURCE, "_fence") or 0) == sections[-1].fence
        # They really contended: every process but the first to hold asked for the lock
        # and then waited through another process's whole section (Redlock is not fair:
        # one may take it many times in a row, so the order alone proves nothing).
        waited = {
            b.pid
            for b in sections
            for a in sections
            if a.pid != b.pid and b.asked < a.start and a.end <= b.start
        }
        assert len(waited) >= procs_n - 1, waited
        assert owners(admins, "procs") == [None] * N_MASTERS
    finally:
        store.delete(RESOURCE, COUNTER)
        store.close()
