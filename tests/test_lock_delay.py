# SPDX-License-Identifier: MIT
"""``lock_delay=``: after a hold ends WITHOUT a release (its holder died, its lease ran out),
nobody takes the name for that many seconds (Chubby's lock-delay, Consul's ``LockDelay``);
a release ends it at once.

Real servers only: the holder "dies" by a fixed ``ttl`` that is never released, or by a
process holding under the watchdog that is killed with SIGKILL.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster

from redislock import (
    AsyncLock,
    Election,
    FairLock,
    Lock,
    MultiLock,
    ReadWriteLock,
    Redlock,
    RLock,
    Semaphore,
)
from redislock._core.keys import FENCE_SUFFIX, RING_SUFFIX
from redislock.cli.force_release import force_release_command
from redislock.errors import LockConfigError, LockLostError
from redislock.server import RedisProcess
from tests.support import Background, wait_for

LOCK_KEY = "redislock:{job}"
DELAY_KEY = "redislock:{job}:delay"
SLACK = 0.25
"""Seconds a refusal may end early: Redis expires keys to the millisecond, our clock reads
the acquire's send time (before the lease started)."""
LATE = 3.0
"""Seconds the first successful acquire may come after the delay ended (a loaded machine)."""


def assert_every_key_expires(client: Any) -> None:
    """Every key has a TTL, but the slot's fencing counter and release ring (never expire
    by design: the counter must only rise; see redislock/_core/keys.py)."""
    keys = [k.decode() if isinstance(k, bytes) else k for k in client.keys("*")]
    assert keys, "no keys at all: the test looked at the wrong server"
    for key in keys:
        if key.endswith((FENCE_SUFFIX, RING_SUFFIX)):
            continue
        assert client.pttl(key) != -1, f"{key} has no TTL"


def pttls(client: redis.Redis) -> tuple[int, int]:
    """The PTTLs of the lock key and its delay key, read together (MULTI)."""
    pipe = client.pipeline(transaction=True)
    pipe.pttl(LOCK_KEY)
    pipe.pttl(DELAY_KEY)
    lock_ms, delay_ms = pipe.execute()
    return int(lock_ms), int(delay_ms)


def deadlines(client: redis.Redis) -> tuple[int, int]:
    """The server times (Unix ms, ``PEXPIRETIME``) at which the lock key and its delay key
    end, read together (MULTI): absolute, so their difference is exact whatever the
    server's clock did between the two reads (-2: no such key)."""
    pipe = client.pipeline(transaction=True)
    pipe.execute_command("PEXPIRETIME", LOCK_KEY)  # type: ignore[no-untyped-call]
    pipe.execute_command("PEXPIRETIME", DELAY_KEY)  # type: ignore[no-untyped-call]
    lock_at, delay_at = pipe.execute()
    return int(lock_at), int(delay_at)


def first_free(lock: Lock, limit: float) -> float:
    """Poll single tries until ``lock`` is taken; the monotonic time of the first success."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if lock.acquire(blocking=False):
            return time.monotonic()
        time.sleep(0.02)
    raise AssertionError(f"not taken within {limit} s")


# ------------------------------------------------------------------ the delay


@pytest.mark.parametrize("cls", [Lock, FairLock])
def test_a_lease_that_ends_without_release_holds_the_name_off_for_the_delay(
    sr: redis.Redis, admin_r: redis.Redis, cls: type[Lock]
) -> None:
    holder = cls(sr, "job", ttl=0.5, lock_delay=1.5)
    sent = time.monotonic()
    assert holder.acquire()
    delay_pttl = admin_r.pttl(DELAY_KEY)
    assert 1500 < delay_pttl <= 2000  # the lease (500 ms) + the delay (1500 ms)
    assert admin_r.get(DELAY_KEY) == "1500"
    assert_every_key_expires(admin_r)
    # the holder "dies": it never releases; its key expires 0.5 s in
    other = cls(sr, "job")  # no lock_delay of its own: the delay is the dead hold's
    time.sleep(0.7)
    assert admin_r.exists(LOCK_KEY) == 0
    assert admin_r.exists(DELAY_KEY) == 1
    assert not other.acquire(blocking=False)
    assert not other.locked()
    assert_every_key_expires(admin_r)
    got = first_free(other, 10.0)
    assert got - sent >= 0.5 + 1.5 - SLACK
    assert got - sent <= 0.5 + 1.5 + LATE
    assert admin_r.exists(DELAY_KEY) == 0  # other has no delay of its own
    other.release()


@pytest.mark.parametrize("cls", [Lock, FairLock])
def test_a_release_ends_the_delay_at_once(
    sr: redis.Redis, admin_r: redis.Redis, cls: type[Lock]
) -> None:
    holder = cls(sr, "job", lock_delay=30.0)
    assert holder.acquire()
    assert admin_r.exists(DELAY_KEY) == 1
    holder.release()
    assert admin_r.exists(LOCK_KEY, DELAY_KEY) == 0
    other = cls(sr, "job", lock_delay=30.0)
    assert other.acquire(blocking=False)
    other.release()
    with cls(sr, "job", ttl=5.0, lock_delay=30.0):
        pass
    assert admin_r.exists(DELAY_KEY) == 0
    assert other.acquire(blocking=False)
    assert_every_key_expires(admin_r)
    other.release()


def test_a_waiter_with_a_timeout_waits_the_delay_out(sr: redis.Redis, admin_r: redis.Redis) -> None:
    holder = Lock(sr, "job", ttl=0.5, lock_delay=1.5)
    sent = time.monotonic()
    assert holder.acquire()
    short = Lock(sr, "job")
    assert not short.acquire(timeout=0.8)  # the lease ends at 0.5 s, the delay at 2 s
    assert time.monotonic() - sent < 0.5 + 1.5 - SLACK
    waiter = Lock(sr, "job", lock_delay=1.0)
    assert waiter.acquire(timeout=10.0)
    got = time.monotonic()
    assert got - sent >= 0.5 + 1.5 - SLACK
    assert got - sent <= 0.5 + 1.5 + LATE
    assert 30_000 < admin_r.pttl(DELAY_KEY) <= 31_000  # the waiter's own: 30 s lease + 1 s
    assert_every_key_expires(admin_r)
    waiter.release()
    assert admin_r.exists(DELAY_KEY) == 0


def test_a_late_release_of_an_expired_hold_grants_no_waiter_before_the_delay(
    sr: redis.Redis, admin_r: redis.Redis
) -> None:
    """The holder wakes after its lease ran out and releases: "gone" (LockLostError), and
    fair.lua's grant to the queued waiter on that path waits for the delay too."""
    holder = Lock(sr, "job", ttl=0.5, lock_delay=1.5)
    sent = time.monotonic()
    assert holder.acquire()
    waiter = Lock(sr, "job")
    bg = Background(lambda: waiter.acquire(timeout=10.0))
    time.sleep(0.8)
    assert admin_r.exists(LOCK_KEY) == 0
    wait_for(lambda: admin_r.llen("redislock:{job}:queue") == 1)  # the waiter's thread is up
    with pytest.raises(LockLostError):
        holder.release()
    assert admin_r.exists(LOCK_KEY) == 0  # not granted
    assert admin_r.exists(DELAY_KEY) == 1  # a late release does not end the delay
    assert bg.join(timeout=10.0) is True
    assert bg.at is not None
    assert bg.at - sent >= 0.5 + 1.5 - SLACK
    assert bg.at - sent <= 0.5 + 1.5 + LATE
    waiter.release()


def test_a_granted_waiter_gets_its_own_delay(sr: redis.Redis, admin_r: redis.Redis) -> None:
    """A release hands the lock to the queued waiter (fair.lua's grant): the grant writes
    the waiter's lock-delay with its hold, and the waiter's lease ending without release
    holds the name off for the waiter's delay."""
    first = FairLock(sr, "job", ttl=10.0)
    assert first.acquire()
    waiter = FairLock(sr, "job", ttl=0.6, lock_delay=1.2, waiter_lease=5.0)
    bg = Background(lambda: waiter.acquire(timeout=10.0))
    if True:
        deadline = time.monotonic() + 5.0
        while admin_r.llen("redislock:{job}:queue") == 0:
            assert time.monotonic() < deadline, "the waiter never queued"
            time.sleep(0.02)
        first.release()  # grants the waiter the lock in the same script
        assert bg.join(timeout=10.0) is True
    granted = time.monotonic()
    assert admin_r.get(DELAY_KEY) == "1200"
    assert 1200 < admin_r.pttl(DELAY_KEY) <= 1800
    assert_every_key_expires(admin_r)
    other = Lock(sr, "job")
    time.sleep(0.9)  # the waiter's lease (0.6 s) ran out without a release
    assert admin_r.exists(LOCK_KEY) == 0
    assert not other.acquire(blocking=False)
    got = first_free(other, 10.0)
    assert got - granted >= 0.6 + 1.2 - SLACK - 0.2  # (granted: read after the grant)
    other.release()


def test_renewals_keep_the_delay_key_ahead_of_the_lease(
    sr: redis.Redis, admin_r: redis.Redis
) -> None:
    """The watchdog's renewals and extend() move the delay key with the lease: it always
    ends the delay after the lock key."""
    holder = Lock(sr, "job", watchdog_lease=1.0, lock_delay=2.0)
    assert holder.acquire()
    end = time.monotonic() + 2.5  # several renewals (every third of the lease)
    samples = 0
    while time.monotonic() < end:
        lock_ms, _ = pttls(admin_r)
        assert lock_ms > 0, "the lease ran out under the watchdog"
        lock_at, delay_at = deadlines(admin_r)
        # one deadline for both keys (one TIME in the script): exactly the delay apart
        assert delay_at == lock_at + 2000
        samples += 1
        time.sleep(0.05)
    assert samples > 10
    assert holder.extend(20.0) > 20.0  # "add"
    lock_ms, _ = pttls(admin_r)
    assert lock_ms > 20_000
    lock_at, delay_at = deadlines(admin_r)
    assert delay_at == lock_at + 2000
    holder.extend(3.0, replace=True)  # "set": shorter; the delay key follows
    lock_ms, _ = pttls(admin_r)
    assert 0 < lock_ms <= 3000
    lock_at, delay_at = deadlines(admin_r)
    assert delay_at == lock_at + 2000
    assert_every_key_expires(admin_r)
    holder.release()
    assert admin_r.exists(LOCK_KEY, DELAY_KEY) == 0


HOLDER = textwrap.dedent(
    """
    import sys, time, redis
    from redislock import Lock
    r = redis.Redis(unix_socket_path=sys.argv[1])
    lock = Lock(r, "job", watchdog_lease=1.0, lock_delay=1.5)
    assert lock.acquire(timeout=10)
    print("held", flush=True)
    time.sleep(600)
    """
)


def test_a_killed_holder_holds_the_name_off_until_lease_and_delay_ran_out(
    redis_server: RedisProcess, sr: redis.Redis, admin_r: redis.Redis
) -> None:
    socket = redis_server.client_kwargs()["unix_socket_path"]
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, socket], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        time.sleep(1.2)  # a few renewals
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        killed = time.monotonic()
        lock_ms = admin_r.pttl(LOCK_KEY)
        assert 0 < lock_ms <= 1000
        lock_at, delay_at = deadlines(admin_r)
        assert delay_at == lock_at + 1500
        other = Lock(sr, "job")
        assert not other.acquire(blocking=False)
        got = first_free(other, 15.0)
        # the lease ends within 1 s of the kill, the delay 1.5 s after it
        assert got - killed >= lock_ms / 1000.0 + 1.5 - SLACK
        assert got - killed <= 1.0 + 1.5 + LATE
        assert_every_key_expires(admin_r)
        other.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_an_operator_force_release_ends_the_delay(
    redis_server: RedisProcess,
    sr: redis.Redis,
    admin_r: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``redislock force-release`` is an override: it deletes the delay key too (documented;
    to keep the delay, let the lease run out)."""
    holder = Lock(sr, "job", ttl=30.0, lock_delay=30.0)
    assert holder.acquire()
    assert admin_r.exists(DELAY_KEY) == 1
    assert force_release_command(sr, "job", "redislock:") == 0
    said = capsys.readouterr().out
    assert said.startswith("released lock 'job'")
    assert "its lock-delay was ended" in said
    assert admin_r.exists(LOCK_KEY, DELAY_KEY) == 0
    other = Lock(sr, "job")
    assert other.acquire(blocking=False)
    other.release()


def test_a_force_release_during_the_delay_says_it_ended_it(
    sr: redis.Redis, admin_r: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lease ran out without a release: only the delay keeps the name off. The override
    ends it, and says so (not "was not held" alone, which reads as "nothing happened")."""
    holder = Lock(sr, "job", ttl=0.3, lock_delay=30.0)
    assert holder.acquire()
    wait_for(lambda: admin_r.exists(LOCK_KEY) == 0)
    assert admin_r.exists(DELAY_KEY) == 1
    assert not Lock(sr, "job").acquire(blocking=False)  # held off by the delay
    assert force_release_command(sr, "job", "redislock:") == 0
    said = capsys.readouterr().out.strip()
    assert said == "lock 'job' was not held; its lock-delay was ended (the name is free now)"
    assert admin_r.exists(DELAY_KEY) == 0
    other = Lock(sr, "job")
    assert other.acquire(blocking=False)
    other.release()
    assert force_release_command(sr, "job", "redislock:") == 0  # nothing held, no delay
    assert capsys.readouterr().out.strip() == "lock 'job' was not held"


# ------------------------------------------------------------------ bad values


DEAD = "/nonexistent/redislock-delay-test.sock"


@pytest.mark.parametrize(
    "value", [-1, -0.001, math.nan, math.inf, True, False, "1", None, 0.0001, 10**9]
)
@pytest.mark.parametrize("cls", [Lock, FairLock, AsyncLock])
def test_bad_lock_delay_values_raise_before_any_io(cls: Any, value: Any) -> None:
    client: Any = (
        redis.asyncio.Redis(unix_socket_path=DEAD)
        if cls is AsyncLock
        else redis.Redis(unix_socket_path=DEAD)
    )
    with pytest.raises(LockConfigError, match="lock_delay"):
        cls(client, "job", lock_delay=value)


def test_zero_is_off_and_other_kinds_refuse_a_delay(admin_r: redis.Redis) -> None:
    client = redis.Redis(unix_socket_path=DEAD)
    assert Lock(client, "job", lock_delay=0).name == "job"
    assert Lock(client, "job", lock_delay=2).name == "job"
    assert RLock(client, "job", lock_delay=0).name == "job"
    for make in (
        lambda: RLock(client, "job", lock_delay=1.0),
        lambda: ReadWriteLock(client, "job", lock_delay=1.0),
        lambda: Semaphore(client, "job", 2, lock_delay=1.0),
        lambda: Election(client, "job", identity="a", lock_delay=1.0),
    ):
        with pytest.raises(LockConfigError, match="lock_delay"):
            make()
    delay: dict[str, Any] = {"lock_delay": 1.0}
    with pytest.raises(TypeError, match="lock_delay"):  # not offered
        MultiLock(client, ["a", "b"], **delay)
    with pytest.raises(TypeError, match="lock_delay"):
        Redlock([client], "job", **delay)


# ------------------------------------------------------------------ asyncio


async def test_async_dead_holder_then_release(
    cl: redis.asyncio.Redis, admin_r: redis.Redis
) -> None:
    holder = AsyncLock(cl, "job", ttl=0.5, lock_delay=1.5)
    sent = time.monotonic()
    assert await holder.acquire()
    assert 1500 < admin_r.pttl(DELAY_KEY) <= 2000
    other = AsyncLock(cl, "job", lock_delay=1.0)
    await _sleep(0.7)
    assert not await other.acquire(blocking=False)
    assert await other.acquire(timeout=10.0)  # waits the delay out
    got = time.monotonic()
    assert got - sent >= 0.5 + 1.5 - SLACK
    assert got - sent <= 0.5 + 1.5 + LATE
    assert admin_r.get(DELAY_KEY) == "1000"
    assert_every_key_expires(admin_r)
    await other.release()
    assert admin_r.exists(LOCK_KEY, DELAY_KEY) == 0
    again = AsyncLock(cl, "job", lock_delay=1.0)
    assert await again.acquire(blocking=False)
    await again.release()


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


# ------------------------------------------------------------------ Cluster


def test_cluster_the_delay_key_shares_the_slot_and_holds_the_name_off(
    rc: redis.cluster.RedisCluster,
) -> None:
    holder = Lock(rc, "job", ttl=0.5, lock_delay=1.0)
    sent = time.monotonic()
    assert holder.acquire()
    assert rc.pttl(DELAY_KEY) > 1000
    other = Lock(rc, "job")
    time.sleep(0.7)
    assert not other.acquire(blocking=False)
    got = first_free(other, 10.0)
    assert got - sent >= 0.5 + 1.0 - SLACK
    assert got - sent <= 0.5 + 1.0 + LATE
    assert rc.exists(DELAY_KEY) == 0
    assert rc.pttl(LOCK_KEY) > 0
    other.release()
