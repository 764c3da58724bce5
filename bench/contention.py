#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Contention: N processes (default 8) take turns on ONE lock, redislock against the peers.

Method. The script starts its own redis-server (redislock.server.RedisProcess, on a unix
socket, or on loopback TCP with --tcp; stopped at the end, also on Ctrl-C, SIGTERM or an
error). It measures every row in turn, all in this one run against that one server. For
each row:

  1. FLUSHALL, then start --procs worker processes ("spawn": locks must not be inherited
     over fork). Each makes its own plain ``redis.Redis`` client (the same for every row:
     default options) and one lock object for the name "bench:contend" with a fixed 10 s
     lease, does one warm-up acquire+release (this connects, loads the scripts, runs lazy
     imports) and reports ready.
  2. When all are ready, the parent reads INFO cpu, sends CONFIG RESETSTAT and sets a start
     Event. From then on the parent sends nothing until every worker has reported back.
  3. Each worker loops until the window (--seconds) is over:
         t_req = now; acquire(); t_got = now; hold; t_rel = now; release(); t_done = now
     The hold is time.sleep(--hold-ms): the holder leaves the CPU to the others, as a holder
     waiting for I/O would. time.sleep overshoots by about 0.05-0.1 ms, so the real hold is
     reported ("hold ms"). With --spin the hold is a busy loop instead. A worker that is
     waiting when the window ends still finishes its acquire+release.
  4. The workers send their timestamps and stay connected; the parent reads INFO stats,
     INFO commandstats and INFO cpu, then lets them exit (so no disconnect is counted).
     The clock is time.monotonic_ns (CLOCK_MONOTONIC, one system-wide clock on Linux), so
     intervals from different processes can be compared.

Metrics (the "window" is [start Event, start + --seconds]):

  acq/s          acquisitions whose t_got falls in the window, all processes, / window
  busy %         length of the union of the [t_got, t_rel] intervals inside the window /
                 window: the share of time somebody was inside the critical section
  hold ms        mean t_rel - t_got (the real critical section)
  hand-off p50/p99/max ms
                 for consecutive holds (ordered by t_got) where the next holder is ANOTHER
                 process that was already waiting (its t_req < the previous t_rel):
                 next.t_got - prev.t_rel. It includes the release round trip, the wake-up,
                 the next acquire round trip and the scheduling delays in between. Only
                 hand-offs whose release started inside the window count.
  hand-offs      how many such hand-offs there were
  same-proc %    the next holder is the SAME process although another process was waiting
                 at the release, as a share of all such contended hand-offs (barging: the
                 releaser loops straight back into acquire and often wins). Those gaps are
                 not in the hand-off percentiles; they are the "re-acquire gap" below.
  wait p99/max ms
                 t_got - t_req over all acquisitions
  per-proc min/max
                 acquisitions inside the window of the least and the most lucky process
  requests/acq   client requests the server read since RESETSTAT (INFO stats
                 total_reads_processed, minus the INFO's own), / all acquisitions (also the
                 ones finished after the window, whose requests are counted too). The same
                 method as uncontended.py and peers.py ("Redis requests/acq"): a Lua script
                 is one request. The "<= 3 commands per acquisition" goal is judged on it.
  server cmds/acq
                 INFO commandstats calls summed over all commands except the harness's own
                 (config, info, client, ping, hello), / all acquisitions. Redis also counts
                 every command a Lua script runs (redislock's acquire script, SET + INCR,
                 counts 3 with its EVALSHA), so this is work done by the server, not round
                 trips.
  CPU %          CPU time of the workers (time.process_time, all threads) and of
                 redis-server (INFO cpu) from the start to the last release, as a share of
                 all cores: whether the machine, not the lock, was the limit.
  overlaps       pairs of [t_got, t_rel] intervals that overlap. The measured interval lies
                 inside the real hold in Redis (taken after acquire returned, before release
                 was sent), so any overlap is a real mutual-exclusion failure. Must be 0; the
                 script says so loudly and exits 1 otherwise.

Below the table, one line per row: the commands the processes sent per acquisition,
counted on the client (a redis.Redis subclass that only counts, about 1 µs per command):
EVALSHA by redislock script name (and operation), SET NX, BLPOP split into "woke" (got an
element) and "timed out" (the peers that block in BLPOP); for redislock, whose waiters wait
on one shared pub/sub connection per process instead (no pooled connection, no request per
wait), what that connection sent ("SUBSCRIBE", "UNSUBSCRIBE": requests the server reads,
in requests/acq too) and the messages the server pushed to it ("pub/sub message": every
message on a channel the process listens on, a grant for another waiter of the same process
included; a push, not a request, so not in requests/acq, but its PUBLISH is in server
cmds/acq), and how each wait ended ("wait: message" woke with a message for it, "wait:
none" ended by its timeout or by a re-check of a subscription only just live); the failed
tries per acquisition (acquire attempts that found the lock taken); client and server CPU
µs per acquisition; and the re-acquire gap p50/p99 (next.t_got - prev.t_rel when the same
process took the lock again while others waited).

Rows: redislock Lock, redislock FairLock (skipped with a message if this build has no
FairLock), redis-py Lock with sleep=0.1 (its default) and sleep=0.001, python-redis-lock,
pottery Redlock with one master. pottery and python-redis-lock come with the ``bench``
extra; a selected row whose library cannot be imported stops the script with an error.

The goals (SPEC.md) are printed as PASS/FAIL for the redislock rows, each with the best
peer of this run: busy >= 90 %, hand-off p99 <= 2 ms, <= 3 requests per acquisition, and
a max wait <= 50 ms (Lock and FairLock). Exit status: 1 if a row failed or any row had overlaps;
with --check also 1 if a goal failed; else 0.

Usage: python bench/contention.py [--procs 8] [--hold-ms 1] [--seconds 5] [--spin]
           [--rows lock,fairlock,redis-py-0.1,redis-py-0.001,python-redis-lock,pottery]
           [--json PATH] [--tcp] [--redis-server PATH] [--check]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import heapq
import importlib
import itertools
import json
import multiprocessing as mp
import os
import platform
import queue
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import Any

import redis
from uncontended import default_server, loadavg, pct, pkg_version

try:
    import redislock  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # run from a checkout without PYTHONPATH=src: use the checkout's src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import redislock  # type: ignore[import-not-found, unused-ignore]
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess

# FairLock came with redislock 1bab4fb; with an older build its row is skipped with a message.
FairLock: Any = getattr(redislock, "FairLock", None)

NAN = float("nan")
LOCK_NAME = "bench:contend"
LEASE_S = 10  # every row: a fixed 10 s lease, never reached (holds are ~1 ms)
HARNESS_COMMANDS = frozenset({"config", "info", "client", "ping", "hello"})
GOAL_BUSY = 0.90
GOAL_HANDOFF_P99_MS = 2.0
GOAL_REQUESTS = 3.0
GOAL_MAX_WAIT_MS = 50.0  # SPEC.md: for Lock and FairLock
READY_TIMEOUT_S = 120.0  # spawning 8 interpreters on a busy 2-core box takes a while
DRAIN_TIMEOUT_S = 60.0  # after the window: the last waiters finish

# One hold, all CLOCK_MONOTONIC nanoseconds: t_req, t_got, t_rel, t_done, process index.
Hold = tuple[int, int, int, int, int]
Acquire = Callable[[], bool]
Release = Callable[[], None]


@dataclass(frozen=True)
class RowSpec:
    slug: str  # for --rows
    title: str
    ours: bool  # a redislock row: the goals apply
    module: str | None = None  # a peer's import name, checked before the run
    attempt_keys: tuple[str, ...] = ()  # client tally keys that count acquire attempts


ROWS = (
    # Lock's tries: lock_acquire up to this change, fair.lua's acquire (queue) since, then
    # fair_acquire.lua (one script per operation).
    RowSpec(
        "lock",
        "redislock Lock",
        True,
        attempt_keys=("EVALSHA lock_acquire", "EVALSHA fair acquire", "EVALSHA fair_acquire"),
    ),
    RowSpec(
        "fairlock",
        "redislock FairLock",
        True,
        attempt_keys=("EVALSHA fair acquire", "EVALSHA fair_acquire"),
    ),
    RowSpec("redis-py-0.1", "redis-py Lock (sleep=0.1)", False, None, ("SET NX",)),
    RowSpec("redis-py-0.001", "redis-py Lock (sleep=0.001)", False, None, ("SET NX",)),
    RowSpec("python-redis-lock", "python-redis-lock", False, "redis_lock", ("SET NX",)),
    RowSpec("pottery", "pottery Redlock (1 master)", False, "pottery", ("SET NX",)),
)
ROWS_BY_SLUG = {r.slug: r for r in ROWS}


class BenchError(RuntimeError):
    """A worker or a row did not behave."""


# --------------------------------------------------------------------------- workers


class CountingPubSub(redis.client.PubSub):
    """The PubSub redislock's wake-up channel (its hub) opens on a :class:`CountingRedis`:
    counts the commands it sends (SUBSCRIBE, UNSUBSCRIBE) and the messages the server pushes
    to it, in a tally of its own (the hub reads in a thread of its own)."""

    def __init__(self, *args: Any, tally: Counter[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally = tally

    def execute_command(self, *args: Any) -> Any:
        self.tally[str(args[0]).upper()] += 1
        base: Any = super()  # redis-py's PubSub is untyped
        return base.execute_command(*args)

    def handle_message(self, response: Any, ignore_subscribe_messages: bool = False) -> Any:
        base: Any = super()
        msg = base.handle_message(response, ignore_subscribe_messages)
        if msg and msg.get("type") == "message":
            self.tally["pub/sub message"] += 1
        return msg


class CountingRedis(redis.Redis):
    """A plain ``redis.Redis`` that counts the commands it sends (and BLPOP outcomes), and
    those of its pub/sub connection (:class:`CountingPubSub`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally: Counter[str] = Counter()
        self.pubsub_tally: Counter[str] = Counter()
        self._script_names = {s.sha: s.name for s in SCRIPTS.values()}

    def pubsub(self, **kwargs: Any) -> CountingPubSub:
        return CountingPubSub(
            self.connection_pool,
            event_dispatcher=self._event_dispatcher,
            tally=self.pubsub_tally,
            **kwargs,
        )

    def clear(self) -> None:
        self.tally.clear()
        self.pubsub_tally.clear()

    def tallies(self) -> dict[str, int]:
        """Everything counted: the commands, the pub/sub connection's, the waits' ends."""
        return dict(self.tally + self.pubsub_tally)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        base: Any = super()  # redis-py's execute_command is untyped
        reply = base.execute_command(*args, **options)
        name = str(args[0]).upper()
        if name in ("EVALSHA", "EVAL") and len(args) > 2:
            script = self._script_names.get(str(args[1]), "")
            if script:  # ours: by name, plus the operation of a multi-op script (hold.lua)
                name = f"{name} {script}"
                argv = args[3 + int(args[2]) :]
                if argv and isinstance(argv[0], str) and argv[0].isalpha() and len(argv[0]) <= 10:
                    name = f"{name} {argv[0]}"
        elif name == "BLPOP":
            name = "BLPOP woke" if reply is not None else "BLPOP timed out"
        elif name == "SET" and any(str(a).upper() == "NX" for a in args[3:]):
            name = "SET NX"
        self.tally[name] += 1
        return reply


def count_waits(client: CountingRedis) -> None:
    """Count how redislock's waits on ``client`` end (its sync driver's ``Wait``, on the
    shared wake-up channel): with a message, or with None (timeout, re-check). A build
    without the shared channel (waiters in BLPOP) has nothing to count here."""
    try:
        hub: Any = importlib.import_module("redislock.sync._hub")
    except ImportError:
        return
    wait = hub.Hub.wait

    def counted(self: Any, op: Any, cursor: int) -> Any:
        reply = wait(self, op, cursor)
        if self.client() is client:
            client.tally["wait: message" if reply is not None else "wait: none"] += 1
        return reply

    hub.Hub.wait = counted


def make_lock(slug: str, client: redis.Redis) -> tuple[Acquire, Release]:
    """One lock object on LOCK_NAME for the row ``slug``: its acquire and release."""
    if slug == "lock":
        lk = redislock.Lock(client, LOCK_NAME, ttl=float(LEASE_S))
        return lk.acquire, lk.release
    if slug == "fairlock":
        fl = FairLock(client, LOCK_NAME, ttl=float(LEASE_S))
        return fl.acquire, fl.release
    if slug in ("redis-py-0.1", "redis-py-0.001"):
        rl = client.lock(LOCK_NAME, timeout=LEASE_S, sleep=float(slug.rsplit("-", 1)[1]))
        return rl.acquire, rl.release
    if slug == "python-redis-lock":
        redis_lock: Any = importlib.import_module("redis_lock")  # no type stubs
        pl = redis_lock.Lock(client, LOCK_NAME, expire=LEASE_S)
        return pl.acquire, pl.release
    if slug == "pottery":
        pottery: Any = importlib.import_module("pottery")
        po = pottery.Redlock(key=LOCK_NAME, masters={client}, auto_release_time=LEASE_S)
        return po.acquire, po.release
    raise ValueError(f"unknown row {slug!r}")


def spin(seconds: float) -> None:
    """Busy-wait ``seconds`` (the --spin critical section: keeps a core busy)."""
    end = time.monotonic_ns() + int(seconds * 1e9)
    while time.monotonic_ns() < end:
        pass


def hold_loop(
    acquire: Acquire,
    release: Release,
    hold: Callable[[float], None],
    hold_s: float,
    deadline_ns: int,
    wid: int,
) -> list[Hold]:
    """Acquire, ``hold(hold_s)``, release, until ``deadline_ns``."""
    clock = time.monotonic_ns
    holds: list[Hold] = []
    append = holds.append
    while True:
        t_req = clock()
        if t_req >= deadline_ns:
            return holds
        if not acquire():
            raise BenchError("a blocking acquire() without timeout returned False")
        t_got = clock()
        hold(hold_s)
        t_rel = clock()
        release()
        append((t_req, t_got, t_rel, clock(), wid))


def worker(
    slug: str,
    client_kwargs: dict[str, Any],
    hold_s: float,
    spinning: bool,
    wid: int,
    out_q: Any,
    go: Any,
    deadline: Any,
    bye: Any,
) -> None:
    """One contending process. Messages to the parent: ("ready", wid), then
    ("done", wid, holds, tally, cpu_seconds); or ("error", wid, traceback) at any point.
    After "done" it keeps its connection open until ``bye`` is set, so that the parent
    reads the server's counters before any disconnect adds to them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us on Ctrl-C
    try:
        client = CountingRedis(**client_kwargs)
        count_waits(client)
        acquire, release = make_lock(slug, client)
        if not acquire():  # warm-up: connect, load scripts, lazy imports
            raise BenchError("warm-up acquire() returned False")
        release()
        client.clear()
        out_q.put(("ready", wid))
        go.wait()
        cpu = time.process_time()  # all threads of this process (pottery uses threads)
        hold = spin if spinning else time.sleep
        holds = hold_loop(acquire, release, hold, hold_s, deadline.value, wid)
        cpu = time.process_time() - cpu
        out_q.put(("done", wid, holds, client.tallies(), cpu))
        bye.wait(DRAIN_TIMEOUT_S)
        client.close()
    except BaseException:
        out_q.put(("error", wid, traceback.format_exc()))


# --------------------------------------------------------------------------- analysis


@dataclass
class Metrics:
    acquisitions: int  # all, also those that completed after the window
    in_window: int
    acq_per_s: float
    busy: float  # fraction of the window
    hold_mean_ms: float
    handoffs: int
    handoff_p50_ms: float
    handoff_p99_ms: float
    handoff_max_ms: float
    same_proc: int
    same_proc_share: float
    reacquire_p50_ms: float  # gap between two holds of the same process, others waiting
    reacquire_p99_ms: float
    wait_p50_ms: float
    wait_p99_ms: float
    wait_max_ms: float
    per_proc_min: int
    per_proc_max: int
    overlaps: int


def union_ns(holds: Sequence[Hold], lo: int, hi: int) -> int:
    """Length of the union of the [t_got, t_rel] intervals clipped to [lo, hi]; ``holds``
    sorted by t_got."""
    total = 0
    cur_start = cur_end = -1
    for h in holds:
        start, end = max(h[1], lo), min(h[2], hi)
        if end <= start:
            continue
        if start > cur_end:
            total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + (cur_end - cur_start)


def count_overlaps(holds: Sequence[Hold]) -> int:
    """Pairs of [t_got, t_rel] intervals that overlap; ``holds`` sorted by t_got."""
    ends: list[int] = []
    pairs = 0
    for h in holds:
        while ends and ends[0] <= h[1]:
            heapq.heappop(ends)
        pairs += len(ends)
        heapq.heappush(ends, h[2])
    return pairs


def analyze(holds: list[Hold], procs: int, start_ns: int, deadline_ns: int) -> Metrics:
    holds = sorted(holds, key=lambda h: h[1])
    window_ns = deadline_ns - start_ns
    in_window = [h for h in holds if start_ns <= h[1] < deadline_ns]

    # "Was another process waiting at time T?": a process's holds are sequential, so in
    # t_got order its t_req are sorted too, and it waits at T iff the hold with the last
    # t_req < T has t_got > T.
    reqs: list[list[int]] = [[] for _ in range(procs)]
    gots: list[list[int]] = [[] for _ in range(procs)]
    for h in holds:
        reqs[h[4]].append(h[0])
        gots[h[4]].append(h[1])

    def others_waiting(t: int, me: int) -> bool:
        for w in range(procs):
            if w != me:
                i = bisect.bisect_left(reqs[w], t) - 1
                if i >= 0 and gots[w][i] > t:
                    return True
        return False

    gaps: list[int] = []  # hand-offs to another process that was waiting
    regaps: list[int] = []  # the releaser took it again although others were waiting
    for prev, nxt in itertools.pairwise(holds):
        if prev[2] >= deadline_ns:
            continue
        if nxt[4] != prev[4]:
            if nxt[0] < prev[2]:  # the next holder was already waiting
                gaps.append(nxt[1] - prev[2])
        elif others_waiting(prev[2], prev[4]):
            regaps.append(nxt[1] - prev[2])
    gaps.sort()
    regaps.sort()
    waits = sorted(h[1] - h[0] for h in holds)
    per_proc = Counter(h[4] for h in in_window)
    counts = [per_proc.get(w, 0) for w in range(procs)]
    contended = len(gaps) + len(regaps)
    ms = 1e6
    return Metrics(
        acquisitions=len(holds),
        in_window=len(in_window),
        acq_per_s=len(in_window) / (window_ns / 1e9),
        busy=union_ns(holds, start_ns, deadline_ns) / window_ns,
        hold_mean_ms=(sum(h[2] - h[1] for h in holds) / len(holds) / ms) if holds else 0.0,
        handoffs=len(gaps),
        handoff_p50_ms=pct(gaps, 50) / ms,
        handoff_p99_ms=pct(gaps, 99) / ms,
        handoff_max_ms=(gaps[-1] / ms) if gaps else NAN,
        same_proc=len(regaps),
        same_proc_share=len(regaps) / contended if contended else NAN,
        reacquire_p50_ms=pct(regaps, 50) / ms,
        reacquire_p99_ms=pct(regaps, 99) / ms,
        wait_p50_ms=pct(waits, 50) / ms,
        wait_p99_ms=pct(waits, 99) / ms,
        wait_max_ms=(waits[-1] / ms) if waits else NAN,
        per_proc_min=min(counts),
        per_proc_max=max(counts),
        overlaps=count_overlaps(holds),
    )


# --------------------------------------------------------------------------- one row


@dataclass
class RowResult:
    spec: RowSpec
    metrics: Metrics | None = None
    requests: int = 0  # client requests the server read in the run (total_reads_processed)
    server_calls: int = 0  # commandstats calls, harness commands left out
    client_cpu_s: float = 0.0  # all workers, from the start Event to their last release
    server_cpu_s: float = 0.0
    elapsed_s: float = 0.0  # start Event to the last release
    commandstats: dict[str, int] = field(default_factory=dict)
    tally: dict[str, int] = field(default_factory=dict)
    note: str = ""  # why the row has no numbers

    def per_acq(self, n: float) -> float:
        return n / self.metrics.acquisitions if self.metrics and self.metrics.acquisitions else NAN

    def cpu_share(self) -> float:
        """CPU used by the workers and redis-server, as a share of all cores."""
        cores = os.cpu_count() or 1
        total = self.client_cpu_s + self.server_cpu_s
        return total / (self.elapsed_s * cores) if self.elapsed_s else NAN

    def failed_tries_per_acq(self) -> float | None:
        if not self.spec.attempt_keys or self.metrics is None or not self.metrics.acquisitions:
            return None
        attempts = sum(self.tally.get(k, 0) for k in self.spec.attempt_keys)
        return (attempts - self.metrics.acquisitions) / self.metrics.acquisitions


def _next_message(q: Any, procs: Sequence[BaseProcess], until: float) -> tuple[Any, ...]:
    while True:
        try:
            msg: tuple[Any, ...] = q.get(timeout=0.5)
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise BenchError(f"a worker died (exit codes {dead})") from None
            if time.monotonic() > until:
                raise BenchError("timed out waiting for the workers") from None
            continue
        if msg[0] == "error":
            raise BenchError(f"worker {msg[1]} failed:\n{msg[2]}")
        return msg


def server_cpu(admin: redis.Redis) -> float:
    info = admin.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_row(
    spec: RowSpec, client_kwargs: dict[str, Any], admin: redis.Redis, args: argparse.Namespace
) -> RowResult:
    admin.flushall()
    ctx = mp.get_context("spawn")
    out_q = ctx.Queue()
    go, bye = ctx.Event(), ctx.Event()
    deadline = ctx.RawValue("q", 0)
    hold_s = args.hold_ms / 1000.0
    procs = [
        ctx.Process(
            target=worker,
            args=(spec.slug, client_kwargs, hold_s, args.spin, wid, out_q, go, deadline, bye),
            daemon=True,
        )
        for wid in range(args.procs)
    ]
    res = RowResult(spec)
    holds: list[Hold] = []
    tally: Counter[str] = Counter()
    try:
        for p in procs:
            p.start()
        until = time.monotonic() + READY_TIMEOUT_S
        for _ in procs:
            _next_message(out_q, procs, until)  # ("ready", wid)
        srv_cpu = server_cpu(admin)
        admin.config_resetstat()
        # Nothing is sent to the server from here until all workers are done.
        start_ns = time.monotonic_ns()
        deadline.value = deadline_ns = start_ns + int(args.seconds * 1e9)
        go.set()
        until = time.monotonic() + args.seconds + DRAIN_TIMEOUT_S
        for _ in procs:
            _kind, _wid, worker_holds, worker_tally, cpu = _next_message(out_q, procs, until)
            holds.extend(worker_holds)
            tally.update(worker_tally)
            res.client_cpu_s += cpu
        # The workers are idle and still connected: the counters are final.
        res.requests = int(admin.info("stats")["total_reads_processed"]) - 1  # minus the INFO
        cmdstats = admin.info("commandstats")
        res.server_cpu_s = server_cpu(admin) - srv_cpu
        bye.set()
        for p in procs:
            p.join(timeout=10.0)
    finally:
        bye.set()
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5.0)
        out_q.close()

    res.metrics = analyze(holds, args.procs, start_ns, deadline_ns)
    res.elapsed_s = (max((h[3] for h in holds), default=start_ns) - start_ns) / 1e9
    res.commandstats = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in cmdstats.items()}
    res.server_calls = sum(
        n for k, n in res.commandstats.items() if k.split("|")[0] not in HARNESS_COMMANDS
    )
    res.tally = dict(tally)
    return res


# --------------------------------------------------------------------------- report


def num(x: float, spec: str = ".3f") -> str:
    """``x`` formatted, or "n/a" for NaN (e.g. a percentile of no samples)."""
    return "n/a" if x != x else format(x, spec)


def table(results: Sequence[RowResult]) -> str:
    cores = os.cpu_count() or 1
    lines = [
        "| # | row | acq/s | busy % | hold ms | hand-off p50 / p99 / max ms | hand-offs "
        "| same-proc % | wait p99 / max ms | per-proc min/max | requests/acq "
        f"| server cmds/acq | CPU % of {cores} cores | overlaps |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(results, 1):
        m = r.metrics
        if m is None:
            lines.append(f"| {i} | {r.spec.title} | {r.note} |" + " |" * 11)
            continue
        lines.append(
            f"| {i} | {r.spec.title} | {m.acq_per_s:,.0f} | {100 * m.busy:.1f} "
            f"| {m.hold_mean_ms:.3f} "
            f"| {num(m.handoff_p50_ms)} / {num(m.handoff_p99_ms)} / "
            f"{num(m.handoff_max_ms, '.1f')} "
            f"| {m.handoffs} | {num(100 * m.same_proc_share, '.1f')} "
            f"| {m.wait_p99_ms:.1f} / {m.wait_max_ms:.1f} | {m.per_proc_min}/{m.per_proc_max} "
            f"| {r.per_acq(r.requests):.2f} | {r.per_acq(r.server_calls):.2f} "
            f"| {100 * r.cpu_share():.0f} | {m.overlaps} |"
        )
    return "\n".join(lines)


def detail_lines(results: Sequence[RowResult]) -> list[str]:
    """Per row: the client-side command mix, failed tries, re-acquire gaps, CPU."""
    out = []
    for r in results:
        m = r.metrics
        if m is None or not m.acquisitions:
            continue
        mix = ", ".join(
            f"{k} {r.per_acq(n):.2f}" for k, n in sorted(r.tally.items(), key=lambda kv: -kv[1])
        )
        failed = r.failed_tries_per_acq()
        failed_text = f"; failed tries {failed:.2f}" if failed is not None else ""
        out.append(
            f"{r.spec.title}: per acquisition: {mix}{failed_text}; CPU µs: clients "
            f"{1e6 * r.per_acq(r.client_cpu_s):.0f}, redis-server "
            f"{1e6 * r.per_acq(r.server_cpu_s):.0f}; re-acquire gap p50/p99 "
            f"{num(m.reacquire_p50_ms)}/{num(m.reacquire_p99_ms)} ms"
        )
    return out


def goals(results: Sequence[RowResult]) -> list[tuple[bool, str]]:
    """PASS/FAIL lines for the redislock rows, each with the best peer of this run."""
    peers = [r for r in results if not r.spec.ours and r.metrics is not None]

    def best(key: Callable[[RowResult], float], higher: bool, fmt: str) -> str:
        valued = [(key(r), r.spec.title) for r in peers if key(r) == key(r)]  # not NaN
        if not valued:
            return "no peer measured"
        value, title = max(valued) if higher else min(valued)
        return f"best peer: {title} {fmt.format(value)}"

    def busy(r: RowResult) -> float:
        return r.metrics.busy * 100 if r.metrics else NAN

    def p99(r: RowResult) -> float:
        return r.metrics.handoff_p99_ms if r.metrics else NAN

    def reqs(r: RowResult) -> float:
        return r.per_acq(r.requests)

    def max_wait(r: RowResult) -> float:
        return r.metrics.wait_max_ms if r.metrics else NAN

    out: list[tuple[bool, str]] = []
    for r in results:
        m = r.metrics
        if not r.spec.ours or m is None:
            continue
        checks = [
            (busy(r) >= GOAL_BUSY * 100, f"busy {busy(r):.1f} % (goal >= {GOAL_BUSY:.0%}; "
             f"{best(busy, True, '{:.1f} %')})"),
            (p99(r) <= GOAL_HANDOFF_P99_MS, f"hand-off p99 {p99(r):.3f} ms (goal <= "
             f"{GOAL_HANDOFF_P99_MS:g} ms; {best(p99, False, '{:.3f} ms')})"),
            (reqs(r) <= GOAL_REQUESTS, f"{reqs(r):.2f} requests/acquisition (goal <= "
             f"{GOAL_REQUESTS:g}; {best(reqs, False, '{:.2f}')})"),
        ]  # fmt: skip
        checks.append(
            (max_wait(r) <= GOAL_MAX_WAIT_MS, f"max wait {max_wait(r):.1f} ms (goal "
             f"<= {GOAL_MAX_WAIT_MS:g} ms; {best(max_wait, False, '{:.1f} ms')})")
        )  # fmt: skip
        for ok, text in checks:
            out.append((ok, f"{'PASS' if ok else 'FAIL'}: {r.spec.title} {text}"))
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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--procs", type=int, default=8, help="contending processes (default 8)")
    ap.add_argument("--hold-ms", type=float, default=1.0, help="critical section, ms")
    ap.add_argument(
        "--spin", action="store_true", help="busy-wait the critical section (default: sleep)"
    )
    ap.add_argument("--seconds", type=float, default=5.0, help="window per row, seconds")
    ap.add_argument(
        "--rows",
        default=",".join(ROWS_BY_SLUG),
        help=f"comma-separated subset of: {', '.join(ROWS_BY_SLUG)} (default: all)",
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
    args.rows = [s.strip() for s in args.rows.split(",") if s.strip()]
    unknown = [s for s in args.rows if s not in ROWS_BY_SLUG]
    if unknown:
        ap.error(f"unknown --rows {unknown}; choose from {', '.join(ROWS_BY_SLUG)}")
    if args.procs < 2 or args.hold_ms < 0 or args.seconds <= 0:
        ap.error("need --procs >= 2, --hold-ms >= 0, --seconds > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    specs = [ROWS_BY_SLUG[s] for s in args.rows]
    for spec in specs:  # a peer that cannot be imported is an error, not a skipped row
        if spec.module:
            try:
                importlib.import_module(spec.module)
            except ImportError as exc:
                print(
                    f"error: row {spec.slug!r} needs {spec.module!r}, which cannot be "
                    f"imported ({exc}); pip install -e '.[bench]', or leave the row out "
                    "with --rows",
                    file=sys.stderr,
                )
                return 2
    results: list[RowResult] = []
    if "fairlock" in args.rows and FairLock is None:
        print("FairLock: not available in this build", flush=True)
        results.append(RowResult(ROWS_BY_SLUG["fairlock"], note="not available in this build"))
        specs.remove(ROWS_BY_SLUG["fairlock"])

    binary = args.redis_server or default_server()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # restore if started with &
    signal.signal(signal.SIGTERM, _sigterm)
    load_before = loadavg()
    t0 = time.monotonic()
    try:
        with server(binary, args.tcp) as srv:
            client_kwargs = srv.client_kwargs()
            admin = redis.Redis(**client_kwargs, single_connection_client=True)
            server_version = str(admin.info("server")["redis_version"])
            for spec in specs:
                print(f"  {spec.title} ...", file=sys.stderr, flush=True)
                try:
                    results.append(run_row(spec, client_kwargs, admin, args))
                except BenchError as exc:
                    print(f"  {spec.title}: FAILED: {exc}", file=sys.stderr, flush=True)
                    results.append(RowResult(spec, note=f"FAILED: {str(exc).splitlines()[0]}"))
            admin.close()
    except KeyboardInterrupt:
        print("interrupted; workers and redis-server stopped", file=sys.stderr)
        return 130
    runtime = time.monotonic() - t0
    results.sort(key=lambda r: args.rows.index(r.spec.slug))

    from redis.utils import HIREDIS_AVAILABLE

    env = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "python": platform.python_version(),
        "redis_server": server_version,
        "redis_server_binary": binary,
        "transport": "tcp 127.0.0.1" if args.tcp else "unix socket",
        "redis_py": pkg_version("redis"),
        "hiredis_available": bool(HIREDIS_AVAILABLE),
        "python_redis_lock": pkg_version("python-redis-lock"),
        "pottery": pkg_version("pottery"),
        "redislock": f"{redislock.__version__} ({Path(redislock.__file__).parent})",
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": loadavg(),
        "runtime_s": round(runtime, 1),
    }
    print(
        f"{env['date']}: Python {env['python']}, redis-server {server_version} ({binary}) over "
        f"{env['transport']}, redis-py {env['redis_py']} (hiredis: {env['hiredis_available']}), "
        f"python-redis-lock {env['python_redis_lock']}, pottery {env['pottery']}, "
        f"redislock {env['redislock']}, {env['cpus']} CPUs"
    )
    print(
        f"load average before: {load_before}; after: {env['load_after']}; {args.procs} "
        f"processes, {args.hold_ms:g} ms critical section "
        f"({'busy-wait' if args.spin else 'time.sleep'}), {args.seconds:g} s "
        f"per row, {runtime:.0f} s in all"
    )
    print()
    print(table(results))
    print()
    verdicts = goals(results)
    for _ok, line in verdicts:
        print(line)
    for line in detail_lines(results):
        print(line)
    broken = [r for r in results if r.metrics is not None and r.metrics.overlaps]
    for r in broken:
        assert r.metrics is not None
        print(
            f"!!! MUTUAL EXCLUSION VIOLATED: {r.spec.title}: {r.metrics.overlaps} overlapping "
            "pairs of critical sections !!!"
        )
    failed = [r for r in results if r.note.startswith("FAILED")]

    if args.json:
        payload = {
            "params": {
                "procs": args.procs,
                "hold_ms": args.hold_ms,
                "seconds": args.seconds,
                "spin": args.spin,
                "rows": args.rows,
                "tcp": args.tcp,
            },
            "env": env,
            "rows": [
                {
                    "slug": r.spec.slug,
                    "title": r.spec.title,
                    "note": r.note,
                    "metrics": asdict(r.metrics) if r.metrics else None,
                    "requests": r.requests,
                    "requests_per_acq": r.per_acq(r.requests),
                    "server_calls": r.server_calls,
                    "server_cmds_per_acq": r.per_acq(r.server_calls),
                    "failed_tries_per_acq": r.failed_tries_per_acq(),
                    "client_cpu_s": r.client_cpu_s,
                    "server_cpu_s": r.server_cpu_s,
                    "elapsed_s": r.elapsed_s,
                    "cpu_share": r.cpu_share(),
                    "client_commands": r.tally,
                    "commandstats_calls": r.commandstats,
                }
                for r in results
            ],
            "goals": [{"pass": ok, "line": line} for ok, line in verdicts],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")

    if broken or failed:
        return 1
    if args.check and not all(ok for ok, _ in verdicts):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
