#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Many waiters in one process: server connections, errors and wake-up latency.

Scenarios (sizes are options; the defaults are the issue's):

  tasks, one name      --tasks asyncio tasks in one process, all on ONE name
  tasks, N names       --tasks asyncio tasks on --names names (task i on name i % names)
  threads, one name    --threads threads in one process, all on ONE name
  threads, N names     --threads threads on --names names
  tasks, shared        --tasks asyncio tasks on ONE name, held by a watchdog lock on the
                       waiters' own client in their process (the issue's headline case)
  threads, shared      the same with --threads threads

Libraries, each with its own row per scenario: redislock (``AsyncLock`` / ``Lock``), redis-py's
Lock (``redis.asyncio.Redis().lock()`` / ``redis.Redis().lock()``), and python-redis-lock
(threads only: it has no asyncio flavour). Every row's waiters share ONE client made with
redis-py's defaults (a pool of at most 100 connections, socket_timeout 5 s), as an
application would; nothing is tuned.

Method. The script starts its own redis-server (redislock.server.RedisProcess, on a unix
socket, or on loopback TCP with --tcp; stopped at the end, also on Ctrl-C, SIGTERM or an
error) and runs every row in turn in this one run. For each row:

  1. FLUSHALL. The HOLDER, a separate default ``redis.Redis`` client in this (the parent)
     process, takes every name with the row's library (its sync flavour; the keys and the
     wake-up protocol are the same for both flavours) with a fixed lease.
  2. One waiter process is started ("spawn"). It makes its client and one lock object per
     waiter (fixed lease --lease, no watchdog), starts all tasks or threads, parks them on an
     event and reports ready. It has not connected to Redis yet.
  3. The parent reads the baseline INFO clients (its admin, monitor and holder
     connections), sends CONFIG RESETSTAT, starts the MONITOR thread (its own connection:
     INFO clients every --poll-ms) and releases the waiters. Each waiter does once:
         t_req = now; acquire(); t_got = now; t_rel = now; release(); t_done = now
     (hold ~0 ms). An exception is caught per waiter and counted by type and phase
     ("acquire: MaxConnectionsError"); it never ends the row. acquire() gets the time left
     until the row's deadline as its wait limit.
  4. --hold seconds after the start, the holder releases every name (t_rel per name).
  5. The waiter process waits for its waiters until the row's deadline (start +
     --row-timeout); waiters still running then are cancelled (tasks) or abandoned
     (threads) and counted as "unfinished at row timeout". It reports its records and stays
     connected until the parent has read INFO stats, then exits. A waiter process that does
     not report within 20 s after the deadline is killed and the row marked FAILED.

All times are time.monotonic_ns (CLOCK_MONOTONIC, one clock for all processes on Linux).

The two shared-client rows ("tasks-shared", "threads-shared") differ in steps 1 to 4: no
holder in the parent. In the waiter process, on the waiters' client, a watchdog lock takes
name 0 before "ready": redislock ``AsyncLock``/``Lock(watchdog_lease=W)``; redis-py's Lock
``lock(name, timeout=W)`` (sync: ``thread_local=False``) extended with ``extend(W,
replace_ttl=True)`` every W/3 by a task or thread of ours; python-redis-lock
``Lock(expire=W, auto_renewal=True)`` (threads only; its own thread renews every 2W/3, counted
by wrapping the object's ``extend``). The parent's baseline is read before the waiter process
starts, so the holder's connections count with the waiters'. --hold-leases * W seconds after
the start the holder stops its renewals (its own loop; redislock and python-redis-lock stop
theirs in release) and releases, trying again every 0.1 s while the release fails for any
other reason than "not yours" (redis-py's sync release() forgets the token first: a retry
calls do_release(token)), until the row's deadline, which is --row-timeout after that
release time. The holder's report: renewals ok and failed (kinds for redis-py and
python-redis-lock; redislock counts failures and names the last in its loss reason), lost
(the library said so: on_lost, a renewal or the release refused), taken (waiter acquisitions
while the holder still believed it held: before its last release attempt began), and the
release attempts with their errors by kind.

Columns:

  acquired       acquire() returned True, of all waiters
  errors         waiters that ended with an exception or without the lock, by kind below
                 the table (a failed release counts there too; its acquisition is counted)
  peak conns     highest INFO clients connected_clients during the run minus the baseline:
                 the waiter process's own connections (polled until the row's deadline, not
                 while waiters cut off by it are being cancelled)
  peak blocked   highest INFO clients blocked_clients (waiters parked in BLPOP and the like)
  wake-up p50 / p99 / max ms
                 per acquisition by a waiter that was already waiting: t_got minus the
                 t_rel of the release that freed the name (the previous hold of that name,
                 the holder's or another waiter's). It includes the release round trip, the
                 wake-up and the next try. A waiter whose t_req is after that release was not
                 woken ("late" in the JSON) and is left out. A release that failed leaves the
                 name held until its lease runs out: that wait is in the figure.
  wait p99 ms    t_got - t_req, all acquisitions
  wall s         start to the last waiter's end (the row timeout when waiters were cut off)
  requests/acq   INFO stats total_reads_processed since RESETSTAT, minus the monitor's and
                 the parent's own INFO reads, / acquisitions (the holder's included):
                 client requests, a Lua script counts once; connection set-up
                 (CLIENT SETINFO) and a waiter's tries before it failed count too.

Below the table: the errors by kind per row, with the first message of each kind; then per
scenario every peer against redislock (ratios of the same run); then the goals for the
redislock rows as PASS/FAIL: every waiter acquires and releases (no error), and the waiter
process uses at most the pool's 100 connections plus 4; for a shared-client row also: the
holder kept its lock (not lost, never taken) and its first release succeeded. A second
table shows the shared rows' holders: watchdog lease, the hold it wanted, renewals ok /
failed, kept or LOST (when the library noticed, when a waiter took the name), the release.

Exit status: 1 if a row failed (the harness, not the library) or mutual exclusion was
violated (two measured holds of one name overlap; in a shared row a waiter inside the
holder's hold is the holder's lost lease, counted as taken, not as a violation); with
--check also 1 if a goal failed; else 0.

Usage: python bench/waiters.py [--tasks 10000] [--threads 1000] [--names 1000] [--hold 2]
           [--lease 10] [--row-timeout 120] [--watchdog-lease 10] [--hold-leases 3]
           [--quick] [--scenarios ...] [--libs ...]
           [--json PATH] [--tcp] [--redis-server PATH] [--check]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import importlib
import json
import math
import multiprocessing as mp
import os
import platform
import queue
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import Any

import redis
import redis.asyncio
from uncontended import default_server, loadavg, pct, pkg_version

try:
    import redislock  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # run from a checkout without PYTHONPATH=src: use the checkout's src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import redislock  # type: ignore[import-not-found, unused-ignore]
from redislock.server import RedisProcess

NAN = float("nan")
POOL_MAX = 100  # redis-py 8.1's default max_connections, both flavours
GOAL_EXTRA_CONNS = 4  # "at most a few beyond the commands in flight"
READY_TIMEOUT_S = 120.0  # spawn + build 10,000 lock objects on a busy 2-core box
REPORT_GRACE_S = 20.0  # after the row's deadline: the waiter process must have reported
CANCEL_GRACE_S = 3.0  # tasks cancelled at the deadline get this long to unwind
BYE_TIMEOUT_S = 30.0
UNFINISHED = "unfinished at row timeout"
GAVE_UP = "acquire: returned False (row timeout)"

# One waiter's record: name index, t_req, t_got, t_rel, t_done (ns; 0 = did not happen),
# outcome ("" = acquired and released, else the error kind).
Rec = tuple[int, int, int, int, int, str]


@dataclass(frozen=True)
class Scenario:
    slug: str
    title: str
    kind: str  # "tasks" or "threads"
    many: bool  # False: one name; True: --names names
    shared: bool = False  # the holder is a watchdog lock on the waiters' own client


SCENARIOS = (
    Scenario("tasks-one", "asyncio tasks, one name", "tasks", False),
    Scenario("tasks-many", "asyncio tasks, many names", "tasks", True),
    Scenario("threads-one", "threads, one name", "threads", False),
    Scenario("threads-many", "threads, many names", "threads", True),
    Scenario("tasks-shared", "asyncio tasks, holder on their client", "tasks", False, True),
    Scenario("threads-shared", "threads, holder on their client", "threads", False, True),
)
SCENARIOS_BY_SLUG = {s.slug: s for s in SCENARIOS}
LIBS = ("redislock", "redis-py", "python-redis-lock")
LIB_MODULES = {"python-redis-lock": "redis_lock"}
TITLES = {
    ("redislock", "tasks"): "redislock AsyncLock",
    ("redislock", "threads"): "redislock Lock",
    ("redis-py", "tasks"): "redis.asyncio Lock",
    ("redis-py", "threads"): "redis-py Lock",
    ("python-redis-lock", "threads"): "python-redis-lock",
}


class BenchError(RuntimeError):
    """The harness did not behave (a process died, the holder could not take a name)."""


def name_of(i: int) -> str:
    return f"bench:wait:{i}"


def remaining_s(deadline_ns: int) -> float:
    return max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9)


# --------------------------------------------------------------------------- lock adapters

SyncAcquire = Callable[[int], bool]  # argument: the row's deadline (monotonic ns)
AsyncAcquire = Callable[[int], Awaitable[bool]]


def sync_lock(lib: str, client: redis.Redis, name: str, lease: int) -> tuple[SyncAcquire, Any]:
    """A blocking acquire bounded by a deadline, and the release, for one lock object."""
    if lib == "redislock":
        lk = redislock.Lock(client, name, ttl=float(lease))
        return (lambda d: lk.acquire(timeout=remaining_s(d))), lk.release
    if lib == "redis-py":
        rl = client.lock(name, timeout=lease)

        def rp_acquire(d: int) -> bool:
            return bool(rl.acquire(blocking_timeout=max(0.001, remaining_s(d))))

        return rp_acquire, rl.release
    if lib == "python-redis-lock":
        redis_lock: Any = importlib.import_module("redis_lock")  # no type stubs
        pl = redis_lock.Lock(client, name, expire=lease)

        def prl_acquire(d: int) -> bool:
            # Its timeout is whole seconds and at most the lease: wait in slices.
            while True:
                left = remaining_s(d)
                if left <= 0:
                    return bool(pl.acquire(blocking=False))
                if pl.acquire(timeout=max(1, min(lease, math.ceil(left)))):
                    return True

        return prl_acquire, pl.release
    raise ValueError(f"unknown library {lib!r}")


def async_lock(
    lib: str, client: redis.asyncio.Redis, name: str, lease: int
) -> tuple[AsyncAcquire, Callable[[], Awaitable[Any]]]:
    if lib == "redislock":
        lk = redislock.AsyncLock(client, name, ttl=float(lease))

        async def rl_acquire(d: int) -> bool:
            return await lk.acquire(timeout=remaining_s(d))

        return rl_acquire, lk.release
    if lib == "redis-py":
        al = client.lock(name, timeout=lease)

        async def rp_acquire(d: int) -> bool:
            return bool(await al.acquire(blocking_timeout=max(0.001, remaining_s(d))))

        return rp_acquire, al.release
    raise ValueError(f"library {lib!r} has no asyncio row")


# --------------------------------------------------------------------------- shared holder

RELEASE_RETRY_S = 0.1  # a holder whose release failed (not for loss) tries again this often


def lost_types() -> tuple[type[BaseException], ...]:
    """Exceptions by which a library says the hold is no longer the caller's."""
    found: list[type[BaseException]] = [redislock.NotOwnedError, redis.exceptions.LockError]
    with contextlib.suppress(ImportError):
        found.append(importlib.import_module("redis_lock").NotAcquired)
    return tuple(found)


def holder_report() -> dict[str, Any]:
    """What a shared holder reports (a dict: it crosses the process boundary)."""
    return {
        "t_got": 0,  # acquired (before the start)
        "t_rel": 0,  # the first release attempt began: the end of the hold it wanted
        "t_last": 0,  # the last release attempt began: until then it believed it held
        "t_done": 0,  # the last release attempt ended
        "renewals": 0,  # successful renewals
        "renewal_failures": 0,
        "renewal_errors": {},  # kind -> count (redislock counts failures, not their kinds)
        "lost": False,  # the library said so: on_lost, a renewal or the release
        "lost_ns": 0,  # when it first said so
        "lost_reason": "",
        "release_attempts": 0,
        "released": False,  # a release attempt succeeded
        "release_errors": {},  # kind -> count
        "samples": {},  # kind -> first message
    }


class HolderBase:
    """A watchdog holder on the waiters' own client, and its report."""

    def __init__(self, lib: str, lease: int) -> None:
        self.lib = lib
        self.lease = lease
        self.rep = holder_report()
        self.lost_types = lost_types()

    def _count(self, table: str, kind: str, exc: BaseException) -> None:
        self.rep[table][kind] = self.rep[table].get(kind, 0) + 1
        self.rep["samples"].setdefault(kind, str(exc)[:200])

    def renewed(self) -> None:
        self.rep["renewals"] += 1

    def renewal_failed(self, exc: BaseException) -> None:
        self.rep["renewal_failures"] += 1
        self._count("renewal_errors", f"holder renew: {type(exc).__name__}", exc)
        if isinstance(exc, self.lost_types):
            self.lost(str(exc))

    def lost(self, reason: str) -> None:
        if not self.rep["lost"]:
            self.rep.update(lost=True, lost_ns=time.monotonic_ns(), lost_reason=reason[:300])

    def on_lost(self, lock: Any) -> None:  # redislock's callback, from its watchdog
        self.lost(f"on_lost: {lock!r}")

    def release_failed(self, exc: BaseException) -> bool:
        """Count a failed release attempt; True if it is worth another."""
        self._count("release_errors", f"holder release: {type(exc).__name__}", exc)
        if isinstance(exc, self.lost_types):
            self.lost(str(exc))
            return False
        return True

    def finish(self, lock: Any) -> dict[str, Any]:
        if self.lib == "redislock":  # its watchdog's own counters
            st = lock.statistics()
            self.rep["renewals"] = st.renewals
            self.rep["renewal_failures"] = st.renewal_failures
        return self.rep


class SyncHolder(HolderBase):
    """redislock ``Lock`` with its watchdog; redis-py's ``Lock`` with a renewal thread
    (``extend(lease, replace_ttl=True)`` every lease / 3); python-redis-lock with
    ``auto_renewal=True`` (its own thread, every lease * 2 / 3, counted through ``extend``)."""

    def __init__(self, lib: str, client: redis.Redis, name: str, lease: int) -> None:
        super().__init__(lib, lease)
        self.stop = threading.Event()
        self.renewer: threading.Thread | None = None
        self.token: Any = None
        if lib == "redislock":
            self.lk: Any = redislock.Lock(
                client, name, watchdog_lease=float(lease), on_lost=self.on_lost
            )
        elif lib == "redis-py":
            # thread_local=False: its token must be seen by the renewal thread (redis-py's
            # docs: for a lock used by more than one thread).
            self.lk = client.lock(name, timeout=lease, thread_local=False)
        elif lib == "python-redis-lock":
            redis_lock: Any = importlib.import_module("redis_lock")
            self.lk = redis_lock.Lock(client, name, expire=lease, auto_renewal=True)
            extend = self.lk.extend  # its renewal thread calls lock.extend(): count them

            def counted_extend(*a: Any, **kw: Any) -> Any:
                try:
                    out = extend(*a, **kw)
                except Exception as exc:
                    self.renewal_failed(exc)
                    raise  # as unwrapped: the exception ends its renewal thread
                self.renewed()
                return out

            self.lk.extend = counted_extend
        else:
            raise ValueError(f"unknown library {lib!r}")

    def _renew_loop(self) -> None:
        while not self.stop.wait(self.lease / 3):
            try:
                self.lk.extend(self.lease, replace_ttl=True)
            except Exception as exc:
                self.renewal_failed(exc)
                if isinstance(exc, self.lost_types):
                    return
            else:
                self.renewed()

    def acquire(self) -> bool:
        if not self.lk.acquire(blocking=False):
            return False
        self.rep["t_got"] = time.monotonic_ns()
        if self.lib == "redis-py":
            self.token = self.lk.local.token
            self.renewer = threading.Thread(target=self._renew_loop, daemon=True)
            self.renewer.start()
        return True

    def _release_once(self, attempt: int) -> None:
        if self.lib == "redis-py" and attempt:
            # Its release() forgets the token before the round trip: retry with it.
            self.lk.do_release(self.token)
        else:
            self.lk.release()

    def hold_and_release(self, release_at_ns: int, deadline_ns: int) -> dict[str, Any]:
        time.sleep(max(0.0, (release_at_ns - time.monotonic_ns()) / 1e9))
        if self.renewer is not None:
            self.stop.set()
            self.renewer.join()
        rep = self.rep
        rep["t_rel"] = time.monotonic_ns()
        while True:
            rep["t_last"] = time.monotonic_ns()
            try:
                self._release_once(rep["release_attempts"])
            except Exception as exc:
                rep["release_attempts"] += 1
                if not self.release_failed(exc) or time.monotonic_ns() >= deadline_ns:
                    break
                time.sleep(RELEASE_RETRY_S)
            else:
                rep["release_attempts"] += 1
                rep["released"] = True
                break
        rep["t_done"] = time.monotonic_ns()
        return self.finish(self.lk)


class AsyncHolder(HolderBase):
    """redislock ``AsyncLock`` with its watchdog; redis.asyncio's ``Lock`` with a renewal
    task (``extend(lease, replace_ttl=True)`` every lease / 3)."""

    def __init__(self, lib: str, client: redis.asyncio.Redis, name: str, lease: int) -> None:
        super().__init__(lib, lease)
        self.renewer: asyncio.Task[None] | None = None
        self.stop = asyncio.Event()
        if lib == "redislock":
            self.lk: Any = redislock.AsyncLock(
                client, name, watchdog_lease=float(lease), on_lost=self.on_lost
            )
        elif lib == "redis-py":
            self.lk = client.lock(name, timeout=lease)
        else:
            raise ValueError(f"library {lib!r} has no asyncio row")

    async def _renew_loop(self) -> None:
        # Stopped by an event, not by cancellation: on Python 3.11 a redis.asyncio command
        # cancelled in flight may return normally (its send is an asyncio.wait_for, which
        # drops a cancellation arriving as it completes: CPython gh-86296), and the loop
        # would go on renewing while hold_and_release waits for it.
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.lease / 3)
            if self.stop.is_set():
                return
            try:
                await self.lk.extend(self.lease, replace_ttl=True)
            except Exception as exc:
                self.renewal_failed(exc)
                if isinstance(exc, self.lost_types):
                    return
            else:
                self.renewed()

    async def acquire(self) -> bool:
        if not await self.lk.acquire(blocking=False):
            return False
        self.rep["t_got"] = time.monotonic_ns()
        if self.lib == "redis-py":
            self.renewer = asyncio.create_task(self._renew_loop())
        return True

    async def hold_and_release(self, release_at_ns: int, deadline_ns: int) -> dict[str, Any]:
        await asyncio.sleep(max(0.0, (release_at_ns - time.monotonic_ns()) / 1e9))
        if self.renewer is not None:
            self.stop.set()  # a renewal in flight ends within the client's socket timeout
            await asyncio.wait([self.renewer], timeout=remaining_s(deadline_ns))
            self.renewer.cancel()  # only if it is still running at the row's deadline
        rep = self.rep
        rep["t_rel"] = time.monotonic_ns()
        while True:
            rep["t_last"] = time.monotonic_ns()
            try:
                await self.lk.release()  # retryable in both libraries' asyncio flavour
            except Exception as exc:
                rep["release_attempts"] += 1
                if not self.release_failed(exc) or time.monotonic_ns() >= deadline_ns:
                    break
                await asyncio.sleep(RELEASE_RETRY_S)
            else:
                rep["release_attempts"] += 1
                rep["released"] = True
                break
        rep["t_done"] = time.monotonic_ns()
        return self.finish(self.lk)


# --------------------------------------------------------------------------- waiter process


def _error_kind(phase: str, exc: BaseException, samples: dict[str, str]) -> str:
    kind = f"{phase}: {type(exc).__name__}"
    samples.setdefault(kind, str(exc)[:200])
    return kind


def one_sync(
    idx: int, acquire: SyncAcquire, release: Any, deadline_ns: int, samples: dict[str, str]
) -> Rec:
    clock = time.monotonic_ns
    t_req = clock()
    try:
        ok = acquire(deadline_ns)
    except Exception as exc:
        return (idx, t_req, 0, 0, clock(), _error_kind("acquire", exc, samples))
    if not ok:
        return (idx, t_req, 0, 0, clock(), GAVE_UP)
    t_got = t_rel = clock()
    try:
        release()
    except Exception as exc:
        return (idx, t_req, t_got, t_rel, clock(), _error_kind("release", exc, samples))
    return (idx, t_req, t_got, t_rel, clock(), "")


async def one_async(
    idx: int,
    acquire: AsyncAcquire,
    release: Callable[[], Awaitable[Any]],
    deadline_ns: int,
    samples: dict[str, str],
) -> Rec:
    clock = time.monotonic_ns
    t_req = clock()
    try:
        ok = await acquire(deadline_ns)
    except Exception as exc:
        return (idx, t_req, 0, 0, clock(), _error_kind("acquire", exc, samples))
    if not ok:
        return (idx, t_req, 0, 0, clock(), GAVE_UP)
    t_got = t_rel = clock()
    try:
        await release()
    except Exception as exc:
        return (idx, t_req, t_got, t_rel, clock(), _error_kind("release", exc, samples))
    return (idx, t_req, t_got, t_rel, clock(), "")


def _finish(results: Sequence[Rec | None], n_names: int) -> list[Rec]:
    return [
        r if r is not None else (i % n_names, 0, 0, 0, 0, UNFINISHED) for i, r in enumerate(results)
    ]


def run_threads(
    lib: str,
    client_kwargs: dict[str, Any],
    n: int,
    n_names: int,
    lease: int,
    out_q: Any,
    go: Any,
    deadline: Any,
    shared: dict[str, Any] | None = None,
) -> tuple[list[Rec], dict[str, str], redis.Redis, dict[str, Any] | None]:
    client = redis.Redis(**client_kwargs)  # redis-py defaults: pool of 100, 5 s timeout
    locks = [sync_lock(lib, client, name_of(i % n_names), lease) for i in range(n)]
    holder = None
    if shared is not None:  # the holder takes the name first, on this same client
        holder = SyncHolder(lib, client, name_of(0), shared["watchdog_lease"])
        if not holder.acquire():
            raise BenchError(f"the holder could not take {name_of(0)!r}")
    results: list[Rec | None] = [None] * n
    samples: dict[str, str] = {}
    start = threading.Event()

    def body(i: int) -> None:
        start.wait()
        acquire, release = locks[i]
        results[i] = one_sync(i % n_names, acquire, release, deadline.value, samples)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    out_q.put(("ready",))
    go.wait()
    start.set()
    report = None
    if holder is not None and shared is not None:
        release_at = deadline.value - shared["after_release_ns"]
        report = holder.hold_and_release(release_at, deadline.value)
    for t in threads:
        t.join(timeout=remaining_s(deadline.value))
    # Threads still running are abandoned (daemon threads; the process exits soon).
    return _finish(list(results), n_names), dict(samples), client, report


async def run_tasks(
    lib: str,
    client_kwargs: dict[str, Any],
    n: int,
    n_names: int,
    lease: int,
    out_q: Any,
    go: Any,
    deadline: Any,
    shared: dict[str, Any] | None = None,
) -> tuple[list[Rec], dict[str, str], redis.asyncio.Redis, dict[str, Any] | None]:
    client = redis.asyncio.Redis(**client_kwargs)  # redis-py defaults, as above
    locks = [async_lock(lib, client, name_of(i % n_names), lease) for i in range(n)]
    holder = None
    if shared is not None:  # the holder takes the name first, on this same client
        holder = AsyncHolder(lib, client, name_of(0), shared["watchdog_lease"])
        if not await holder.acquire():
            raise BenchError(f"the holder could not take {name_of(0)!r}")
    results: list[Rec | None] = [None] * n
    samples: dict[str, str] = {}
    start = asyncio.Event()

    async def body(i: int) -> None:
        await start.wait()
        acquire, release = locks[i]
        results[i] = await one_async(i % n_names, acquire, release, deadline.value, samples)

    tasks = [asyncio.create_task(body(i)) for i in range(n)]
    await asyncio.sleep(0)  # every task parks on the event
    out_q.put(("ready",))
    await asyncio.get_running_loop().run_in_executor(None, go.wait)
    start.set()
    report = None
    if holder is not None and shared is not None:
        release_at = deadline.value - shared["after_release_ns"]
        report = await holder.hold_and_release(release_at, deadline.value)
    _done, pending = await asyncio.wait(tasks, timeout=remaining_s(deadline.value))
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=CANCEL_GRACE_S)
    return _finish(list(results), n_names), dict(samples), client, report


STUCK_DUMP_S = 5.0  # before the parent gives up on a report: the waiter process says where


def _await_chain(coro: Any) -> str:
    """Where a suspended coroutine waits: its frames down the ``await`` chain, innermost last."""
    lines: list[str] = []
    while coro is not None and len(lines) < 12:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            code = frame.f_code
            lines.append(f"  {code.co_filename}:{frame.f_lineno} in {code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return "\n".join(lines)


def _dump_if_stuck(deadline: Any, reported: threading.Event, loops: list[Any]) -> None:
    """In the waiter process: if it has not reported STUCK_DUMP_S before the parent gives up,
    print where every thread and asyncio task is (stderr), so a hung row explains itself."""
    while not deadline.value:  # set by the parent at the start
        if reported.wait(0.05):
            return
    give_up_ns = deadline.value + int((REPORT_GRACE_S - STUCK_DUMP_S) * 1e9)
    if reported.wait(remaining_s(give_up_ns)):
        return
    print("waiter process: no report yet; its threads and tasks:", file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    for loop in loops:  # the tasks, one stack per shape with its count
        with contextlib.suppress(RuntimeError):  # the set changed while we read it
            shapes: Counter[str] = Counter()
            for task in list(asyncio.all_tasks(loop)):
                shapes[_await_chain(task.get_coro())] += 1
            for shape, count in shapes.most_common():
                print(f"--- {count} asyncio task(s) at:\n{shape}", file=sys.stderr)
    sys.stderr.flush()


def waiter_main(
    kind: str,
    lib: str,
    client_kwargs: dict[str, Any],
    n: int,
    n_names: int,
    lease: int,
    out_q: Any,
    go: Any,
    deadline: Any,
    bye: Any,
    shared: dict[str, Any] | None = None,
) -> None:
    """The waiter process. Messages: ("ready",), then ("done", records, samples, cpu_s,
    holder report or None) or ("error", traceback). It stays connected until ``bye``, then
    exits hard (a waiter stuck in a socket call or a library thread cannot keep it alive).
    With ``shared`` ({"watchdog_lease": s, "after_release_ns": ns}) a watchdog holder on
    the waiters' client takes name 0 before "ready" and releases it ``after_release_ns``
    before the deadline."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us on Ctrl-C
    default_hook = threading.excepthook

    def quiet_renewer(hook_args: threading.ExceptHookArgs) -> None:
        # python-redis-lock's renewal thread ends with the failed extend's exception: that
        # one is counted by the holder, not printed.
        if hook_args.thread is None or "_lock_renewer" not in hook_args.thread.name:
            default_hook(hook_args)

    threading.excepthook = quiet_renewer
    reported = threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []
    threading.Thread(
        target=_dump_if_stuck, args=(deadline, reported, loops), daemon=True, name="bench-stuck"
    ).start()
    try:
        cpu = time.process_time()
        if kind == "tasks":

            async def main() -> None:
                loops.append(asyncio.get_running_loop())
                recs, samples, client, report = await run_tasks(
                    lib, client_kwargs, n, n_names, lease, out_q, go, deadline, shared
                )
                reported.set()
                out_q.put(("done", recs, samples, time.process_time() - cpu, report))
                await asyncio.get_running_loop().run_in_executor(None, bye.wait, BYE_TIMEOUT_S)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.aclose(), 2.0)

            asyncio.run(main())
        else:
            recs, samples, client, report = run_threads(
                lib, client_kwargs, n, n_names, lease, out_q, go, deadline, shared
            )
            reported.set()
            out_q.put(("done", recs, samples, time.process_time() - cpu, report))
            bye.wait(BYE_TIMEOUT_S)  # connected until the parent has read INFO stats
            with contextlib.suppress(Exception):
                client.close()
    except BaseException:
        out_q.put(("error", traceback.format_exc()))
    finally:
        out_q.close()
        out_q.join_thread()
        os._exit(0)


# --------------------------------------------------------------------------- parent side


class Monitor(threading.Thread):
    """Polls INFO clients on its own connection; keeps the peaks."""

    def __init__(self, client_kwargs: dict[str, Any], interval_s: float) -> None:
        super().__init__(daemon=True, name="bench-monitor")
        self.r = redis.Redis(**client_kwargs, single_connection_client=True)
        self.interval_s = interval_s
        self.polls = 0
        self.errors = 0
        self.peak_connected = 0
        self.peak_blocked = 0
        self.until_ns = 0  # the row's deadline: waiters cut off then disconnect; not counted
        self._stop_evt = threading.Event()

    def connected(self) -> int:
        """connected_clients now (this INFO is not counted in ``polls``)."""
        return int(self.r.info("clients")["connected_clients"])

    def run(self) -> None:
        while not self._stop_evt.is_set() and time.monotonic_ns() < self.until_ns:
            try:
                info = self.r.info("clients")
            except redis.RedisError:
                self.errors += 1
            else:
                self.peak_connected = max(self.peak_connected, int(info["connected_clients"]))
                self.peak_blocked = max(self.peak_blocked, int(info["blocked_clients"]))
            self.polls += 1
            self._stop_evt.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_evt.set()
        self.join(timeout=10.0)
        self.r.close()


@dataclass
class RowResult:
    scenario: Scenario
    lib: str
    waiters: int
    names: int
    status: str = "ok"  # "ok", "timed out" (waiters cut off), "FAILED: ..."
    acquired: int = 0
    released: int = 0  # acquired and released without error
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: dict[str, str] = field(default_factory=dict)
    holder_errors: dict[str, int] = field(default_factory=dict)
    baseline_clients: int = 0
    peak_connected_clients: int = 0
    peak_conns: int = 0  # the waiter process's: peak minus baseline
    peak_blocked: int = 0
    rejected_connections: int = 0
    monitor_polls: int = 0
    wakeups: int = 0
    late: int = 0
    wake_p50_ms: float = NAN
    wake_p99_ms: float = NAN
    wake_max_ms: float = NAN
    wait_p50_ms: float = NAN
    wait_p99_ms: float = NAN
    wait_max_ms: float = NAN
    wall_s: float = NAN
    requests: int = 0
    requests_per_acq: float = NAN
    waiter_cpu_s: float = 0.0
    overlaps: int = 0
    # The shared-client scenarios' holder (defaults elsewhere); times in s from the start.
    watchdog_lease_s: float = NAN
    holder_hold_s: float = NAN  # the hold it wanted: the start to its first release attempt
    holder_renewals: int = 0
    holder_renewal_failures: int = 0
    holder_lost: bool = False  # the library said so (on_lost, a renewal, the release)
    holder_lost_at_s: float = NAN
    holder_lost_reason: str = ""
    holder_taken: int = 0  # waiter acquisitions while the holder still believed it held
    holder_taken_at_s: float = NAN  # the first of them
    holder_released: bool = False  # a release attempt succeeded
    holder_release_attempts: int = 0
    holder_release_s: float = NAN  # first attempt to the end of the last

    @property
    def holder_kept(self) -> bool:
        """The shared holder kept its lock to the end and released it."""
        return not self.holder_lost and not self.holder_taken and self.holder_released

    @property
    def title(self) -> str:
        return TITLES[(self.lib, self.scenario.kind)]

    @property
    def failed(self) -> bool:
        return self.status.startswith("FAILED")

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


def analyze(
    res: RowResult,
    recs: Sequence[Rec],
    holder: Sequence[Rec],
    start_ns: int,
    believed: dict[int, int] | None = None,
) -> None:
    """Fill the row's counts, latencies and overlaps from the waiters' and holder's records.

    ``believed`` (the shared rows): per name, until when the holder believed it held (its
    last release attempt began). A waiter's acquisition before that is not a violation of
    mutual exclusion but the holder's lease lost (``holder_taken``); among waiters it still
    is."""
    res.errors = dict(Counter(r[5] for r in recs if r[5]))
    res.acquired = sum(1 for r in recs if r[2])
    res.released = sum(1 for r in recs if not r[5])
    by_name: dict[int, list[tuple[Rec, bool]]] = {}
    for r in holder:
        by_name.setdefault(r[0], []).append((r, False))
    for r in recs:
        if r[2]:
            by_name.setdefault(r[0], []).append((r, True))
    wakes: list[int] = []
    overlaps = late = taken = 0
    first_taken = 0
    for holds in by_name.values():
        holds.sort(key=lambda h: h[0][2])
        max_rel = holder_until = 0
        for j, (h, is_waiter) in enumerate(holds):
            if is_waiter and h[2] < holder_until:
                taken += 1
                first_taken = min(first_taken, h[2]) if first_taken else h[2]
            if h[2] < max_rel:
                overlaps += 1
            if believed is not None and not is_waiter:
                holder_until = max(holder_until, believed.get(h[0], h[3]))
            else:
                max_rel = max(max_rel, h[3])
            if not is_waiter or j == 0:
                continue
            prev = holds[j - 1][0]
            if h[2] < prev[3]:
                continue  # it got the name inside the previous hold: not a wake-up
            if h[1] < prev[3]:
                wakes.append(h[2] - prev[3])
            else:
                late += 1
    wakes.sort()
    waits = sorted(r[2] - r[1] for r in recs if r[2])
    ms = 1e6
    res.wakeups, res.late, res.overlaps = len(wakes), late, overlaps
    res.holder_taken = taken
    if first_taken:
        res.holder_taken_at_s = (first_taken - start_ns) / 1e9
    res.wake_p50_ms, res.wake_p99_ms = pct(wakes, 50) / ms, pct(wakes, 99) / ms
    res.wake_max_ms = wakes[-1] / ms if wakes else NAN
    res.wait_p50_ms, res.wait_p99_ms = pct(waits, 50) / ms, pct(waits, 99) / ms
    res.wait_max_ms = waits[-1] / ms if waits else NAN
    ends = [r[4] for r in recs if r[4]]
    if res.errors.get(UNFINISHED):
        res.status = "timed out"
    res.wall_s = (max(ends, default=start_ns) - start_ns) / 1e9


def _next_message(q: Any, proc: BaseProcess, until: float) -> tuple[Any, ...]:
    while True:
        try:
            msg: tuple[Any, ...] = q.get(timeout=0.5)
        except queue.Empty:
            if proc.exitcode is not None:
                raise BenchError(f"the waiter process died (exit code {proc.exitcode})") from None
            if time.monotonic() > until:
                raise BenchError("the waiter process did not report in time") from None
            continue
        if msg[0] == "error":
            raise BenchError(f"the waiter process failed:\n{msg[1]}")
        return msg


def hold_names(
    lib: str, client: redis.Redis, n_names: int, lease: int
) -> list[tuple[int, Callable[[], Any]]]:
    """The holder takes every name (sync flavour of ``lib``); returns (t_got, release)."""
    held = []
    for i in range(n_names):
        acquire, release = sync_lock(lib, client, name_of(i), lease)
        if not acquire(0):  # deadline 0: one try
            raise BenchError(f"the holder could not take {name_of(i)!r}")
        held.append((time.monotonic_ns(), release))
    return held


def run_row(
    sc: Scenario, lib: str, client_kwargs: dict[str, Any], admin: redis.Redis, args: Any
) -> RowResult:
    n = args.tasks if sc.kind == "tasks" else args.threads
    n_names = args.names if sc.many else 1
    res = RowResult(sc, lib, n, n_names)
    admin.flushall()
    # Shared: the holder lives in the waiter process, on the waiters' client, and wants the
    # name for --hold-leases watchdog leases; the waiters then get --row-timeout as usual.
    shared = None
    hold_s, row_s = args.hold, args.row_timeout
    if sc.shared:
        hold_s = args.hold_leases * args.watchdog_lease
        row_s = hold_s + args.row_timeout
        shared = {"watchdog_lease": args.watchdog_lease,
                  "after_release_ns": int(args.row_timeout * 1e9)}  # fmt: skip
        res.watchdog_lease_s = float(args.watchdog_lease)
    holder_client = redis.Redis(**client_kwargs)  # a separate client, redis-py defaults
    hold_lease = int(args.hold + args.row_timeout + 60)
    held = [] if sc.shared else hold_names(lib, holder_client, n_names, hold_lease)
    ctx = mp.get_context("spawn")
    out_q = ctx.Queue()
    go, bye = ctx.Event(), ctx.Event()
    deadline = ctx.RawValue("q", 0)
    proc = ctx.Process(
        target=waiter_main,
        args=(sc.kind, lib, client_kwargs, n, n_names, args.lease, out_q, go, deadline, bye,
              shared),
        daemon=True,
    )  # fmt: skip
    monitor = Monitor(client_kwargs, args.poll_ms / 1000.0)
    holder_recs: list[Rec] = []
    holder_errors: Counter[str] = Counter()
    samples: dict[str, str] = {}
    try:
        if sc.shared:  # the holder connects before "ready": count it with the waiters
            res.baseline_clients = monitor.connected()
        proc.start()
        _next_message(out_q, proc, time.monotonic() + READY_TIMEOUT_S)  # ("ready",)
        if not sc.shared:
            res.baseline_clients = monitor.connected()
        admin.config_resetstat()
        start_ns = time.monotonic_ns()
        deadline.value = monitor.until_ns = start_ns + int(row_s * 1e9)
        go.set()
        monitor.start()
        if held:
            time.sleep(max(0.0, (start_ns - time.monotonic_ns()) / 1e9 + args.hold))
        for i, (t_got, release) in enumerate(held):
            t_rel = time.monotonic_ns()
            try:
                release()
            except Exception as exc:
                holder_errors[_error_kind("holder release", exc, samples)] += 1
            holder_recs.append((i, 0, t_got, t_rel, time.monotonic_ns(), ""))
        until = time.monotonic() + row_s + REPORT_GRACE_S
        _kind, recs, waiter_samples, cpu, report = _next_message(out_q, proc, until)
        monitor.stop()
        # The waiters are done (or cut off) and still connected: the counters are final.
        stats = admin.info("stats")
        reads = int(stats["total_reads_processed"]) - 1  # minus this INFO
        res.rejected_connections = int(stats["rejected_connections"])
        bye.set()
        proc.join(timeout=10.0)
    finally:
        bye.set()
        if monitor.is_alive():
            monitor.stop()
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5.0)
        out_q.close()
        holder_client.close()
    if report is not None:
        holder_recs.append((0, 0, report["t_got"], report["t_rel"], report["t_done"], ""))
        take_holder_report(res, report, start_ns)
        holder_errors.update(report["renewal_errors"])
        holder_errors.update(report["release_errors"])
        samples.update(report["samples"])
    believed = {0: report["t_last"]} if report is not None else None
    analyze(res, recs, holder_recs, start_ns, believed)
    if res.status == "timed out":
        res.wall_s = max(res.wall_s, row_s)
    samples.update(waiter_samples)
    res.error_samples = samples
    res.holder_errors = dict(holder_errors)
    res.waiter_cpu_s = cpu
    res.monitor_polls = monitor.polls
    res.peak_connected_clients = monitor.peak_connected
    res.peak_conns = max(0, monitor.peak_connected - res.baseline_clients)
    res.peak_blocked = monitor.peak_blocked
    res.requests = reads - monitor.polls
    acquisitions = res.acquired + len(holder_recs)
    res.requests_per_acq = res.requests / acquisitions if acquisitions else NAN
    return res


def take_holder_report(res: RowResult, rep: dict[str, Any], start_ns: int) -> None:
    """The shared holder's report (from the waiter process) into the row."""
    res.holder_hold_s = (rep["t_rel"] - start_ns) / 1e9
    res.holder_renewals = rep["renewals"]
    res.holder_renewal_failures = rep["renewal_failures"]
    res.holder_lost = rep["lost"]
    if rep["lost"]:
        res.holder_lost_at_s = (rep["lost_ns"] - start_ns) / 1e9
        res.holder_lost_reason = rep["lost_reason"]
    res.holder_released = rep["released"]
    res.holder_release_attempts = rep["release_attempts"]
    res.holder_release_s = (rep["t_done"] - rep["t_rel"]) / 1e9


def no_nan(x: Any) -> Any:
    """``x`` with every NaN float replaced by None (JSON has no NaN)."""
    if isinstance(x, float) and x != x:
        return None
    if isinstance(x, dict):
        return {k: no_nan(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [no_nan(v) for v in x]
    return x


# --------------------------------------------------------------------------- report


def num(x: float, spec: str = ".1f") -> str:
    return "n/a" if x != x else format(x, spec)


def table(results: Sequence[RowResult]) -> str:
    lines = [
        "| # | scenario | row | waiters | names | acquired | errors | peak conns | peak blocked "
        "| wake-up p50 / p99 / max ms | wait p99 ms | wall s | requests/acq |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(results, 1):
        head = f"| {i} | {r.scenario.title} | {r.title} | {r.waiters} | {r.names} "
        if r.failed:
            lines.append(head + f"| {r.status} |" + " |" * 7)
            continue
        wall = f"{r.wall_s:.2f}" + (" (cut off)" if r.status == "timed out" else "")
        lines.append(
            head + f"| {r.acquired} | {r.error_count} | {r.peak_conns} | {r.peak_blocked} "
            f"| {num(r.wake_p50_ms, '.2f')} / {num(r.wake_p99_ms)} / {num(r.wake_max_ms)} "
            f"| {num(r.wait_p99_ms)} | {wall} | {num(r.requests_per_acq, '.2f')} |"
        )
    return "\n".join(lines)


def holder_table(results: Sequence[RowResult]) -> str:
    """The shared-client rows: what became of the holder, next to its waiters' errors."""
    lines = [
        "| # | scenario | row | watchdog lease s | held s | renewals ok / failed | holder "
        "| taken by waiters | release | waiter errors | peak conns |",
        "|---:|---|---|---:|---:|---:|---|---:|---|---:|---:|",
    ]
    for i, r in enumerate(results, 1):
        if not r.scenario.shared:
            continue
        head = f"| {i} | {r.scenario.title} | {r.title} | {num(r.watchdog_lease_s, 'g')} "
        if r.failed:
            lines.append(head + f"| {r.status} |" + " |" * 6)
            continue
        if r.holder_kept:
            fate = "kept"
        elif not r.holder_lost and not r.holder_taken:
            fate = "kept, never released"
        else:
            said = f"noticed at {num(r.holder_lost_at_s, '.1f')} s" if r.holder_lost else ""
            took = f"taken at {num(r.holder_taken_at_s, '.1f')} s" if r.holder_taken else ""
            fate = "LOST: " + ", ".join(x for x in (said, took) if x)
        failed = r.holder_release_attempts - int(r.holder_released)
        kinds = [k.split(": ", 1)[1] for k in r.holder_errors if k.startswith("holder release")]
        if not r.holder_released:
            release = f"FAILED: {', '.join(kinds) or '?'}" + (
                f" ({failed} tries)" if failed > 1 else ""
            )
        elif failed:
            release = f"ok after {failed} failed ({', '.join(kinds)}; {r.holder_release_s:.1f} s)"
        else:
            release = "ok"
        lines.append(
            head + f"| {num(r.holder_hold_s, '.1f')} | {r.holder_renewals} / "
            f"{r.holder_renewal_failures} | {fate} | {r.holder_taken} | {release} "
            f"| {r.error_count} | {r.peak_conns} |"
        )
    return "\n".join(lines)


def error_lines(results: Sequence[RowResult]) -> list[str]:
    out = []
    for r in results:
        kinds = {**r.errors, **r.holder_errors}
        if not kinds:
            continue
        parts = []
        for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
            sample = r.error_samples.get(kind)
            parts.append(f"{count} {kind}" + (f" ({sample!r})" if sample else ""))
        out.append(f"{r.scenario.title} / {r.title}: {'; '.join(parts)}")
    return out


def ratio(a: float, b: float) -> str:
    if a != a or b != b or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def ratio_lines(results: Sequence[RowResult]) -> list[str]:
    """Per scenario: every peer row against the redislock row of the same run."""
    out = []
    for sc in SCENARIOS:
        rows = [r for r in results if r.scenario == sc and not r.failed]
        ours = next((r for r in rows if r.lib == "redislock"), None)
        if ours is None:
            continue
        for r in rows:
            if r is ours:
                continue
            out.append(
                f"{sc.title}: {r.title} vs {ours.title}: acquired {r.acquired} vs "
                f"{ours.acquired} ({ratio(r.acquired, ours.acquired)}), errors "
                f"{r.error_count} vs {ours.error_count}, peak conns {r.peak_conns} vs "
                f"{ours.peak_conns}, wake-up p50 {ratio(r.wake_p50_ms, ours.wake_p50_ms)}, "
                f"p99 {ratio(r.wake_p99_ms, ours.wake_p99_ms)}, wall "
                f"{ratio(r.wall_s, ours.wall_s)}, requests/acq "
                f"{ratio(r.requests_per_acq, ours.requests_per_acq)}"
            )
    return out


def goals(results: Sequence[RowResult]) -> list[tuple[bool, str]]:
    out: list[tuple[bool, str]] = []
    limit = POOL_MAX + GOAL_EXTRA_CONNS
    for r in results:
        if r.lib != "redislock" or r.failed:
            continue
        ok = r.error_count == 0 and r.released == r.waiters and not r.holder_errors
        out.append(
            (ok, f"{'PASS' if ok else 'FAIL'}: {r.scenario.title} / {r.title}: {r.released} of "
             f"{r.waiters} waiters acquired and released, {r.error_count} errors (goal: all, 0)")
        )  # fmt: skip
        ok = r.peak_conns <= limit
        out.append(
            (ok, f"{'PASS' if ok else 'FAIL'}: {r.scenario.title} / {r.title}: peak "
             f"{r.peak_conns} connections (goal <= {limit})")
        )  # fmt: skip
        if r.scenario.shared:
            ok = r.holder_kept and r.holder_release_attempts == 1
            out.append(
                (ok, f"{'PASS' if ok else 'FAIL'}: {r.scenario.title} / {r.title}: holder "
                 f"{'kept' if r.holder_kept else 'LOST'} its lock ({r.holder_renewals} "
                 f"renewals, {r.holder_renewal_failures} failed), release "
                 f"{'ok' if r.holder_released else 'FAILED'} after "
                 f"{r.holder_release_attempts} attempt(s) (goal: kept, released at once)")
            )  # fmt: skip
    return out


# --------------------------------------------------------------------------- main


def _sigterm(signum: int, frame: FrameType | None) -> None:
    signal.raise_signal(signal.SIGINT)  # treat SIGTERM as Ctrl-C: the finally blocks run


@contextlib.contextmanager
def server(binary: str, tcp: bool) -> Iterator[RedisProcess]:
    with (
        tempfile.TemporaryDirectory(prefix="rl-bench-", dir="/tmp") as tmp,  # short path
        RedisProcess(Path(tmp), unix_socket=not tcp, binary=binary, name="bench") as srv,
    ):
        yield srv


QUICK = {"tasks": 500, "threads": 150, "names": 50, "hold": 0.5, "lease": 2, "row_timeout": 8.0,
         "watchdog_lease": 2, "hold_leases": 2.0}  # fmt: skip


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--tasks", type=int, help="asyncio tasks per tasks row (default 10000)")
    ap.add_argument("--threads", type=int, help="threads per threads row (default 1000)")
    ap.add_argument("--names", type=int, help="names of the many-names rows (default 1000)")
    ap.add_argument(
        "--hold", type=float, help="seconds the holder keeps every name after the start (2)"
    )
    ap.add_argument("--lease", type=int, help="each waiter's fixed lease, whole seconds (10)")
    ap.add_argument(
        "--row-timeout", type=float, help="seconds a row may run; then waiters are cut off (120)"
    )
    ap.add_argument(
        "--watchdog-lease",
        type=int,
        help="the shared rows' holder: its watchdog lease, whole seconds (10)",
    )
    ap.add_argument(
        "--hold-leases",
        type=float,
        help="the shared rows' holder keeps the name this many watchdog leases (3)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="small sizes for a smoke run: "
        + ", ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in QUICK.items())
        + " (options given explicitly win)",
    )
    ap.add_argument("--poll-ms", type=float, default=10.0, help="INFO clients poll interval")
    ap.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS_BY_SLUG),
        help=f"comma-separated subset of: {', '.join(SCENARIOS_BY_SLUG)} (default: all)",
    )
    ap.add_argument(
        "--libs",
        default=",".join(LIBS),
        help=f"comma-separated subset of: {', '.join(LIBS)} (default: all)",
    )
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    ap.add_argument("--tcp", action="store_true", help="loopback TCP instead of a unix socket")
    ap.add_argument(
        "--redis-server",
        metavar="PATH",
        help="redis-server binary (default: $REDISLOCK_REDIS_SERVER, else the newest "
        "redis-server on PATH, /usr/local/bin or /usr/bin)",
    )
    ap.add_argument("--check", action="store_true", help="exit 1 if a goal fails")
    args = ap.parse_args(argv)
    full = {"tasks": 10000, "threads": 1000, "names": 1000, "hold": 2.0, "lease": 10,
            "row_timeout": 120.0, "watchdog_lease": 10, "hold_leases": 3.0}  # fmt: skip
    for key, value in (QUICK if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    args.libs = [s.strip() for s in args.libs.split(",") if s.strip()]
    unknown = [s for s in args.scenarios if s not in SCENARIOS_BY_SLUG]
    unknown += [s for s in args.libs if s not in LIBS]
    if unknown:
        ap.error(f"unknown --scenarios/--libs {unknown}")
    if min(args.tasks, args.threads, args.names, args.lease, args.watchdog_lease) < 1:
        ap.error("need --tasks, --threads, --names, --lease, --watchdog-lease >= 1")
    if args.hold < 0 or args.hold_leases <= 0:
        ap.error("need --hold >= 0 and --hold-leases > 0")
    if args.row_timeout <= args.hold:
        ap.error("--row-timeout must be longer than --hold")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for lib in args.libs:  # a peer that cannot be imported is an error, not a skipped row
        module = LIB_MODULES.get(lib)
        if module:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                print(
                    f"error: {lib} cannot be imported ({exc}); pip install -e '.[bench]', or "
                    "leave it out with --libs",
                    file=sys.stderr,
                )
                return 2
    plan = [
        (SCENARIOS_BY_SLUG[s], lib)
        for s in args.scenarios
        for lib in args.libs
        if (lib, SCENARIOS_BY_SLUG[s].kind) in TITLES
    ]
    binary = args.redis_server or default_server()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # restore if started with &
    signal.signal(signal.SIGTERM, _sigterm)
    load_before = loadavg()
    t0 = time.monotonic()
    results: list[RowResult] = []
    try:
        with server(binary, args.tcp) as srv:
            client_kwargs = srv.client_kwargs()
            admin = redis.Redis(**client_kwargs, single_connection_client=True)
            server_version = str(admin.info("server")["redis_version"])
            maxclients = admin.config_get("maxclients").get("maxclients", "?")
            for sc, lib in plan:
                print(f"  {sc.title}: {TITLES[(lib, sc.kind)]} ...", file=sys.stderr, flush=True)
                try:
                    results.append(run_row(sc, lib, client_kwargs, admin, args))
                except BenchError as exc:
                    print(f"  FAILED: {exc}", file=sys.stderr, flush=True)
                    n = args.tasks if sc.kind == "tasks" else args.threads
                    row = RowResult(sc, lib, n, args.names if sc.many else 1)
                    row.status = f"FAILED: {str(exc).splitlines()[0]}"
                    results.append(row)
            admin.close()
    except KeyboardInterrupt:
        print("interrupted; waiter processes and redis-server stopped", file=sys.stderr)
        return 130
    runtime = time.monotonic() - t0

    from redis.utils import HIREDIS_AVAILABLE

    env = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "python": platform.python_version(),
        "redis_server": server_version,
        "redis_server_binary": binary,
        "maxclients": maxclients,
        "transport": "tcp 127.0.0.1" if args.tcp else "unix socket",
        "redis_py": pkg_version("redis"),
        "hiredis_available": bool(HIREDIS_AVAILABLE),
        "python_redis_lock": pkg_version("python-redis-lock"),
        "redislock": f"{redislock.__version__} ({Path(redislock.__file__).parent})",
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": loadavg(),
        "runtime_s": round(runtime, 1),
    }
    print(
        f"{env['date']}: Python {env['python']}, redis-server {server_version} ({binary}, "
        f"maxclients {maxclients}) over {env['transport']}, redis-py {env['redis_py']} "
        f"(hiredis: {env['hiredis_available']}), python-redis-lock "
        f"{env['python_redis_lock']}, redislock {env['redislock']}, {env['cpus']} CPUs"
    )
    print(
        f"load average before: {load_before}; after: {env['load_after']}; holder keeps every "
        f"name {args.hold:g} s; waiter lease {args.lease} s; row timeout {args.row_timeout:g} "
        f"s; default redis-py clients (pool of {POOL_MAX}); {runtime:.0f} s in all"
    )
    if any(sc.shared for sc, _lib in plan):
        print(
            f"holder on the waiters' client: watchdog lease {args.watchdog_lease} s, keeps the "
            f"name {args.hold_leases:g} leases ({args.hold_leases * args.watchdog_lease:g} s), "
            f"then the waiters get {args.row_timeout:g} s"
        )
    print()
    print(table(results))
    print()
    if any(r.scenario.shared for r in results):
        print(holder_table(results))
        print()
    for line in error_lines(results):
        print(f"errors: {line}")
    for line in ratio_lines(results):
        print(line)
    verdicts = goals(results)
    for _ok, line in verdicts:
        print(line)
    broken = [r for r in results if r.overlaps]
    for r in broken:
        print(
            f"!!! MUTUAL EXCLUSION VIOLATED: {r.scenario.title} / {r.title}: {r.overlaps} "
            "overlapping holds of one name !!!"
        )
    failed = [r for r in results if r.failed]

    if args.json:
        payload = {
            "params": {
                "tasks": args.tasks,
                "threads": args.threads,
                "names": args.names,
                "hold_s": args.hold,
                "lease_s": args.lease,
                "row_timeout_s": args.row_timeout,
                "watchdog_lease_s": args.watchdog_lease,
                "hold_leases": args.hold_leases,
                "poll_ms": args.poll_ms,
                "quick": args.quick,
                "scenarios": args.scenarios,
                "libs": args.libs,
                "tcp": args.tcp,
                "pool_max_connections": POOL_MAX,
            },
            "env": env,
            "rows": [
                {
                    "scenario": r.scenario.slug,
                    "kind": r.scenario.kind,
                    "shared": r.scenario.shared,
                    "holder_kept": r.holder_kept,
                    "lib": r.lib,
                    "title": r.title,
                    "error_count": r.error_count,
                    **{k: v for k, v in asdict(r).items() if k != "scenario"},
                }
                for r in results
            ],
            "goals": [{"pass": ok, "line": line} for ok, line in verdicts],
        }
        text = json.dumps(no_nan(payload), indent=1, allow_nan=False)
        Path(args.json).write_text(text + "\n", encoding="utf-8")

    if broken or failed:
        return 1
    if args.check and not all(ok for ok, _ in verdicts):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
