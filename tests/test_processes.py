# SPDX-License-Identifier: MIT
"""``Lock`` across real processes: mutual exclusion, a SIGKILLed holder, and fork().

Worker processes use the "spawn" start method and talk to the suite's own redis-server.
``time.monotonic_ns()`` is CLOCK_MONOTONIC on Linux, one clock for the whole system, so
timestamps taken in different processes can be compared.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import signal
import time
import warnings
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Event
from typing import Any

import redis

from redislock import Lock, NotOwnedError
from redislock._core.keys import fence_key
from redislock.server import RedisProcess

CTX = multiprocessing.get_context("spawn")
COUNTER = "test:counter"


def lock_key(name: str) -> str:
    return f"redislock:{{{name}}}"


def get(client: redis.Redis, key: str) -> str | None:
    value = client.get(key)
    return value.decode() if isinstance(value, bytes) else value


# --------------------------------------------------------------------------- mutual exclusion


def _mutex_worker(
    kwargs: dict[str, Any], name: str, cycles: int, barrier: Barrier, out: Queue[Any]
) -> None:
    client = redis.Redis(**kwargs)  # redis-py defaults
    lock = Lock(client, name)  # watchdog lease
    rng = random.Random()
    records: list[tuple[int, int, int]] = []
    try:
        barrier.wait(60)
        for _ in range(cycles):
            if not lock.acquire(timeout=60):
                raise RuntimeError("acquire timed out")
            t_acquired = time.monotonic_ns()
            fence = lock.fencing_token
            assert fence is not None
            value = int(client.get(COUNTER) or 0)  # a non-atomic read-modify-write
            time.sleep(rng.uniform(0.0, 0.0005))
            client.set(COUNTER, value + 1)
            t_release = time.monotonic_ns()
            lock.release()
            records.append((fence, t_acquired, t_release))
        out.put((os.getpid(), records))
    except BaseException as exc:
        out.put((os.getpid(), repr(exc)))
        raise
    finally:
        client.close()


def test_mutual_exclusion_across_processes(redis_server: RedisProcess, admin: redis.Redis) -> None:
    procs_n, cycles = 8, 200
    barrier = CTX.Barrier(procs_n)
    out: Queue[Any] = CTX.Queue()
    args = (redis_server.client_kwargs(), "mutex", cycles, barrier, out)
    procs = [CTX.Process(target=_mutex_worker, args=args) for _ in range(procs_n)]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=90) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join()
        out.close()
        out.join_thread()
    errors = [r for _, r in results if isinstance(r, str)]
    assert errors == []
    assert [p.exitcode for p in procs] == [0] * procs_n
    assert len({pid for pid, _ in results}) == procs_n
    records = sorted(rec for _, recs in results for rec in recs)  # by fencing token

    assert int(get(admin, COUNTER) or -1) == procs_n * cycles  # no lost update
    fences = [fence for fence, _, _ in records]
    assert len(set(fences)) == procs_n * cycles
    assert fences == list(range(1, procs_n * cycles + 1))
    by_time = sorted(records, key=lambda rec: rec[1])
    assert by_time == records  # token order is acquisition-time order
    for (_, _, released), (_, acquired, _) in itertools.pairwise(by_time):
        assert released <= acquired, "two holders at once"
    assert all(len(recs) == cycles for _, recs in results)
    # The processes really contended: holds of different processes interleave.
    owners = [pid for _, _, pid in sorted((t, f, pid) for pid, rs in results for f, t, _ in rs)]
    switches = sum(1 for a, b in itertools.pairwise(owners) if a != b)
    assert switches >= 2 * procs_n
    assert admin.exists(lock_key("mutex")) == 0


# --------------------------------------------------------------------------- SIGKILLed holder


def _holder(kwargs: dict[str, Any], name: str, lock_kwargs: dict[str, Any], ready: Event) -> None:
    client = redis.Redis(**kwargs)  # redis-py defaults
    lock = Lock(client, name, **lock_kwargs)
    if lock.acquire(timeout=10):
        ready.set()
    time.sleep(60)  # until SIGKILLed


def _kill_holder_and_wait(
    redis_server: RedisProcess,
    admin: redis.Redis,
    name: str,
    lock_kwargs: dict[str, Any],
    lease: float,
    hold_before_kill: float,
) -> None:
    ready = CTX.Event()
    proc = CTX.Process(
        target=_holder, args=(redis_server.client_kwargs(), name, lock_kwargs, ready)
    )
    proc.start()
    try:
        assert ready.wait(30), "the holder did not acquire"
        value = get(admin, lock_key(name))
        assert value is not None
        assert str(proc.pid) in value.split("|")  # the holder metadata names the child
        time.sleep(hold_before_kill)
        assert get(admin, lock_key(name)) == value  # still the same hold
        pttl = admin.pttl(lock_key(name)) / 1000.0
        assert 0 < pttl <= lease
        killed_at = time.monotonic()
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        assert proc.exitcode == -signal.SIGKILL
        waiter = Lock(admin, name, ttl=5.0)
        acquired = waiter.acquire(timeout=5)
        took = time.monotonic() - killed_at
        assert acquired
        assert took <= lease + 0.5  # freed by expiry within the lease...
        assert took >= pttl - 0.1  # ...but not before: the dead holder kept it until then
        assert waiter.fencing_token == 2
        waiter.release()
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()


def test_killed_holder_with_fixed_ttl_frees_the_lock_at_expiry(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    _kill_holder_and_wait(
        redis_server, admin, "kill:fixed", {"ttl": 2.0}, lease=2.0, hold_before_kill=0.0
    )


def test_killed_holder_with_watchdog_is_not_renewed(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    # Held 2 s (> the 1.5 s lease) before the kill: the watchdog was renewing it; after the
    # kill nobody does, and it expires within one lease.
    _kill_holder_and_wait(
        redis_server,
        admin,
        "kill:watchdog",
        {"watchdog_lease": 1.5},
        lease=1.5,
        hold_before_kill=2.0,
    )


# --------------------------------------------------------------------------- fork


def _in_fork_child(kwargs: dict[str, Any], kept: Lock, dropped: Lock) -> int:
    """Checks run in the forked child; returns the child's exit code (0: all good)."""
    if kept.fencing_token is not None or kept.token is not None:
        return 10  # the child sees no hold
    for lock in (kept, dropped):
        try:
            lock.release()
        except NotOwnedError as exc:
            if "fork" not in str(exc):
                return 11
        else:
            return 12
        try:
            lock.extend(5.0)
        except NotOwnedError:
            pass
        else:
            return 13
    # The child's own watchdog works (a fresh renewer), and renews only its own lease.
    client = redis.Redis(**kwargs)  # redis-py defaults
    try:
        mine = Lock(client, "fork:child", watchdog_lease=1.0)
        if not mine.acquire(timeout=5):
            return 14
        time.sleep(2.0)
        if not mine.owned():
            return 15
        mine.release()
    finally:
        client.close()
    return 0


def test_fork_child_does_not_own_or_renew_the_parents_lock(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    kept = Lock(admin, "fork:kept")
    dropped = Lock(admin, "fork:dropped", watchdog_lease=1.0)
    assert kept.acquire(timeout=5)
    assert dropped.acquire(timeout=5)
    kept_value = admin.get(lock_key("fork:kept"))
    kwargs = redis_server.client_kwargs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 99
        try:
            code = _in_fork_child(kwargs, kept, dropped)
        finally:
            os._exit(code)
    try:
        # Stop renewing `dropped` here; if the child renewed it, it would outlive its lease.
        dropped.detach()
        detached_at = time.monotonic()
        while admin.exists(lock_key("fork:dropped")):
            assert time.monotonic() - detached_at < 1.0 + 0.7, "somebody renews it"
            time.sleep(0.02)
        deadline = time.monotonic() + 30
        while (status := os.waitpid(pid, os.WNOHANG)) == (0, 0):
            assert time.monotonic() < deadline, "the forked child hangs"
            time.sleep(0.02)
        pid = 0
        assert os.waitstatus_to_exitcode(status[1]) == 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert admin.get(lock_key("fork:kept")) == kept_value  # the child left it alone
    assert admin.get(fence_key(lock_key("fork:child"))) == "1"
    assert admin.exists(lock_key("fork:child")) == 0
    assert kept.owned()
    kept.release()
    assert admin.exists(lock_key("fork:kept")) == 0
