#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Redlock, uncontended: redislock's Redlock over 3 and 5 masters against pottery and
aioredlock, and against our single-master Lock, in one run.

Method. The script starts five redis-servers of its own (redislock.server.RedisProcess,
each on a unix socket in a temporary directory, or on a free loopback TCP port with
--tcp; no persistence; all stopped at the end, also on Ctrl-C, SIGTERM or an error). Every
row uses its own clients (default options) and ONE lock object on ONE lock name, and
times acquire+release cycles on it, one after the other, in this one process:

    t = perf_counter_ns(); acquire(); release(); latency = perf_counter_ns() - t

A row is measured in segments: --warmup untimed cycles, then --seconds of timed cycles
(or exactly --iterations). The rows are interleaved: round 1 runs a segment of every
row, then round 2, and so on (--repeat rounds); each row's samples are pooled over the
rounds, so a burst of load from elsewhere hits all rows alike.

Rows (--rows picks a subset; a baseline row is added when a row needs it):

  lock               redislock Lock(r, name, ttl=10), 1 master: the sync baseline
  asynclock          redislock AsyncLock(ar, name, ttl=10), 1 master: the asyncio baseline
  redlock-3/-5       redislock Redlock(masters, name, ttl=10) (fencing on, the default)
  redlock-5-nofence  the same with fencing=False
  redlock-5-new      a new Redlock object per cycle (``with Redlock(...):`` written
                     inline): each object asks every master for its run_id (INFO server)
                     on its first acquire, one more round per cycle (and a new object's
                     masters start "suspect", so that round goes through threads)
  asyncredlock-3/-5  redislock AsyncRedlock(masters, name, ttl=10)
  pottery-3/-5       pottery.Redlock(key=name, masters={...}, auto_release_time=10)
  aioredlock-3/-5    aioredlock.Aioredlock([...]); lock(name, lock_timeout=10) and unlock()
                     (a fixed lock_timeout: no auto-extend task)
  raw-1, raw-5       reference, no library: SET k tok NX PX 10000 then a compare-and-delete
                     EVALSHA in hand-written RESP on plain sockets; over 5 masters each
                     command is written to all five, then the replies are read as poll()
                     reports them (the floor of any fan-out on this machine)

Every lock has a fixed 10 s lease (no watchdog). Sync rows are compared with the sync
baseline, asyncio rows with the asyncio baseline, on the same transport in the same run.

Columns: cycles/s (cycles per second of timed loop), p50/p90/p99 µs (nearest rank,
pooled), requests/cycle (the change of INFO stats total_reads_processed summed over all
five servers, minus the INFO calls' own reads: client requests, a Lua script counts
once; the method of uncontended.py), client CPU µs/cycle (time.process_time of this
process, all threads, over the timed loop), servers CPU µs/cycle (INFO cpu of the five
servers), p50 ÷ baseline p50. The header gives the load average before and after and
the CPU steal during the run (/proc/stat).

No network-latency table: see bench/README.md (this VM's kernel has no netem).

The goal (SPEC.md) is printed as PASS/FAIL: Redlock over 5 masters p50 <= 1.5x Lock p50,
with the ratio of every round. Exit status 0 unless a row failed, or --check is given and
the goal failed.

Usage: python bench/redlock.py [--seconds 1] [--iterations N] [--warmup 100] [--repeat 3]
           [--rows lock,redlock-5,...] [--tcp] [--json PATH] [--redis-server PATH] [--check]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib
import json
import os
import platform
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import redis
import redis.asyncio
from uncontended import RELEASE_LUA, _reply, _resp, default_server, loadavg, pct, pkg_version

try:
    import redislock  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # run from a checkout without PYTHONPATH=src: use the checkout's src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import redislock  # type: ignore[import-not-found, unused-ignore]
from redislock.server import RedisProcess

NAN = float("nan")
SERVERS = 5
LEASE_S = 10.0
GOAL_RATIO = 1.5  # SPEC.md: Redlock over 5 masters p50 <= 1.5x our single-master Lock
SETTLE_S = 0.05  # before reading the counters: let pottery's bail-out threads finish

SyncCycle = Callable[[], None]
AsyncCycle = Callable[[], Awaitable[None]]


class BenchError(RuntimeError):
    """A cycle did not behave (acquire refused)."""


class RowUnavailableError(Exception):
    """The row's library cannot be imported or cannot run here; the message says why."""


# --------------------------------------------------------------------------- rows


@dataclass
class Clients:
    """Per library its own clients, one per server (index i = server i)."""

    ours: list[redis.Redis]
    ours_async: list[redis.asyncio.Redis]
    pottery: list[redis.Redis]
    aioredlock_addresses: list[Any]  # aioredlock's own connection specs
    raw_kwargs: list[dict[str, Any]]  # where the raw rows open their plain sockets
    aioredlock_managers: list[Any] = field(default_factory=list)  # to destroy at the end
    raw_sockets: list[socket.socket] = field(default_factory=list)  # to close at the end


@dataclass(frozen=True)
class RowSpec:
    slug: str
    title: str
    kind: str  # "sync" or "async"
    masters: int
    library: str  # "redislock", "pottery", "aioredlock" or "raw"


ROWS = (
    RowSpec("lock", "redislock Lock", "sync", 1, "redislock"),
    RowSpec("asynclock", "redislock AsyncLock", "async", 1, "redislock"),
    RowSpec("redlock-3", "redislock Redlock", "sync", 3, "redislock"),
    RowSpec("redlock-5", "redislock Redlock", "sync", 5, "redislock"),
    RowSpec("redlock-5-nofence", "redislock Redlock, fencing=False", "sync", 5, "redislock"),
    RowSpec("redlock-5-new", "redislock Redlock, new object per cycle", "sync", 5, "redislock"),
    RowSpec("asyncredlock-3", "redislock AsyncRedlock", "async", 3, "redislock"),
    RowSpec("asyncredlock-5", "redislock AsyncRedlock", "async", 5, "redislock"),
    RowSpec("pottery-3", "pottery Redlock", "sync", 3, "pottery"),
    RowSpec("pottery-5", "pottery Redlock", "sync", 5, "pottery"),
    RowSpec("aioredlock-3", "aioredlock", "async", 3, "aioredlock"),
    RowSpec("aioredlock-5", "aioredlock", "async", 5, "aioredlock"),
    RowSpec("raw-1", "ref: raw pair, plain socket", "sync", 1, "raw"),
    RowSpec("raw-5", "ref: raw pair, plain sockets, all at once", "sync", 5, "raw"),
)
ROWS_BY_SLUG = {r.slug: r for r in ROWS}
BASELINE = {"sync": "lock", "async": "asynclock"}


def lock_name(spec: RowSpec) -> str:
    return f"bench:redlock:{spec.slug}"


def raw_cycle(spec: RowSpec, c: Clients) -> SyncCycle:
    """The floor of a fan-out on this box: ``SET k tok NX PX 10000`` to every master at
    once (hand-written RESP on plain sockets, written one after the other, the replies read
    as ``poll`` reports them), then the compare-and-delete EVALSHA the same way; no client
    library, no fencing, no lanes. One master: the same pair, one round trip each."""
    name = lock_name(spec).encode()
    socks: list[socket.socket] = []
    shas: set[str] = set()
    for kwargs, client in zip(c.raw_kwargs[: spec.masters], c.ours, strict=False):
        if "unix_socket_path" in kwargs:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(kwargs["unix_socket_path"]))
        else:
            sock = socket.create_connection((kwargs["host"], int(kwargs["port"])))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks.append(sock)
        shas.add(str(client.script_load(RELEASE_LUA)))
    c.raw_sockets.extend(socks)
    (sha,) = shas
    sha_b = sha.encode()

    def everywhere(command: bytes, want: bytes) -> None:
        for sock in socks:
            sock.sendall(command)
        poller = select.poll()
        by_fd = {sock.fileno(): sock for sock in socks}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        while by_fd:
            for fd, _ in poller.poll():
                poller.unregister(fd)
                if _reply(by_fd.pop(fd)) != want:
                    raise BenchError(
                        f"{spec.title} ({spec.masters}): a master did not answer {want!r}"
                    )

    def cycle() -> None:
        token = secrets.token_hex(16).encode()
        everywhere(_resp(b"SET", name, token, b"NX", b"PX", b"10000"), b"+OK\r\n")
        everywhere(_resp(b"EVALSHA", sha_b, b"1", name, token), b":1\r\n")

    return cycle


def sync_cycle(spec: RowSpec, c: Clients) -> SyncCycle:
    name = lock_name(spec)
    n = spec.masters
    if spec.library == "raw":
        return raw_cycle(spec, c)
    if spec.slug == "lock":
        lock: Any = redislock.Lock(c.ours[0], name, ttl=LEASE_S)
    elif spec.slug == "redlock-5-new":
        masters = c.ours[:n]
        redlock_class = redislock.Redlock

        def new_each_time() -> None:
            fresh = redlock_class(masters, name, ttl=LEASE_S)
            if not fresh.acquire():
                raise BenchError(f"{spec.title} refused {name!r}")
            fresh.release()

        return new_each_time
    elif spec.library == "redislock":
        fencing = spec.slug != "redlock-5-nofence"
        lock = redislock.Redlock(c.ours[:n], name, ttl=LEASE_S, fencing=fencing)
    else:
        assert spec.library == "pottery"
        try:
            pottery: Any = importlib.import_module("pottery")  # no type stubs
        except ImportError as exc:
            raise RowUnavailableError(f"pottery is not installed ({exc})") from exc
        lock = pottery.Redlock(key=name, masters=set(c.pottery[:n]), auto_release_time=LEASE_S)

    def cycle() -> None:
        if not lock.acquire():
            raise BenchError(f"{spec.title} refused {name!r}")
        lock.release()

    return cycle


def import_aioredlock() -> Any:
    """aioredlock, or RowUnavailableError saying why it cannot run here."""
    try:
        with warnings.catch_warnings():
            # aioredlock imports distutils.version (deprecated in 3.10, gone in 3.12)
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module("aioredlock")
    except Exception as exc:  # ImportError, or aioredis failing at import on this Python
        raise RowUnavailableError(
            f"aioredlock cannot be imported on Python {platform.python_version()}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


async def async_cycle(spec: RowSpec, c: Clients) -> AsyncCycle:
    name = lock_name(spec)
    n = spec.masters
    if spec.library == "aioredlock":
        aioredlock = import_aioredlock()
        manager = aioredlock.Aioredlock(list(c.aioredlock_addresses[:n]))
        c.aioredlock_managers.append(manager)

        async def aio_cycle() -> None:
            held = await manager.lock(name, lock_timeout=LEASE_S)  # raises LockError if not
            await manager.unlock(held)

        return aio_cycle

    if spec.slug == "asynclock":
        lock: Any = redislock.AsyncLock(c.ours_async[0], name, ttl=LEASE_S)
    else:
        lock = redislock.AsyncRedlock(c.ours_async[:n], name, ttl=LEASE_S)

    async def cycle() -> None:
        if not await lock.acquire():
            raise BenchError(f"{spec.title} refused {name!r}")
        await lock.release()

    return cycle


@dataclass
class Row:
    spec: RowSpec
    sync: SyncCycle | None = None
    aio: AsyncCycle | None = None
    note: str = ""  # why the row has no numbers
    samples: list[int] = field(default_factory=list)
    elapsed_ns: int = 0
    cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    requests: int = 0
    round_p50_ns: list[float] = field(default_factory=list)


# --------------------------------------------------------------------------- timing


def time_sync(cycle: SyncCycle, count: int | None, seconds: float) -> tuple[list[int], int]:
    """Run ``count`` cycles, or (count None) cycles until ``seconds`` have passed."""
    lat: list[int] = []
    append = lat.append
    clock = time.perf_counter_ns
    t0 = clock()
    end = t0 + int(seconds * 1e9)
    if count is not None:
        for _ in range(count):
            a = clock()
            cycle()
            append(clock() - a)
    else:
        b = t0
        while b < end:
            a = clock()
            cycle()
            b = clock()
            append(b - a)
    return lat, clock() - t0


async def time_async(cycle: AsyncCycle, count: int | None, seconds: float) -> tuple[list[int], int]:
    lat: list[int] = []
    append = lat.append
    clock = time.perf_counter_ns
    t0 = clock()
    end = t0 + int(seconds * 1e9)
    if count is not None:
        for _ in range(count):
            a = clock()
            await cycle()
            append(clock() - a)
    else:
        b = t0
        while b < end:
            a = clock()
            await cycle()
            b = clock()
            append(b - a)
    return lat, clock() - t0


def counters(admins: Sequence[redis.Redis]) -> tuple[int, float]:
    """Client reads processed and CPU seconds, summed over the servers (each INFO call's
    own read included)."""
    reads, cpu = 0, 0.0
    for a in admins:
        info = a.info()
        reads += int(info["total_reads_processed"])
        cpu += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return reads, cpu


def run_segment(
    row: Row, args: argparse.Namespace, admins: Sequence[redis.Redis], runner: asyncio.Runner
) -> None:
    """Warm ``row`` up, then time its cycles and read the servers' counters around them."""
    if row.sync is not None:
        time_sync(row.sync, args.warmup, 0.0)
    else:
        assert row.aio is not None
        runner.run(time_async(row.aio, args.warmup, 0.0))
    time.sleep(SETTLE_S)
    gc.collect()
    reads0, srv0 = counters(admins)
    cpu0 = time.process_time()
    if row.sync is not None:
        lat, elapsed = time_sync(row.sync, args.iterations, args.seconds)
    else:
        assert row.aio is not None
        lat, elapsed = runner.run(time_async(row.aio, args.iterations, args.seconds))
    cpu = time.process_time() - cpu0
    time.sleep(SETTLE_S)
    reads1, srv1 = counters(admins)
    row.requests += reads1 - reads0 - len(admins)  # minus the second INFO's own reads
    row.server_cpu_s += srv1 - srv0
    row.cpu_s += cpu
    row.samples.extend(lat)
    row.elapsed_ns += elapsed
    row.round_p50_ns.append(pct(sorted(lat), 50))


# --------------------------------------------------------------------------- report


@dataclass
class Summary:
    slug: str
    title: str
    kind: str
    masters: int
    cycles: int
    cycles_per_s: float
    p50_us: float
    p90_us: float
    p99_us: float
    requests_per_cycle: float
    client_cpu_us: float
    servers_cpu_us: float
    baseline: str
    ratio: float
    round_ratios: list[float]
    note: str = ""


def summarize(rows: Sequence[Row]) -> list[Summary]:
    by_slug = {r.spec.slug: r for r in rows}
    out: list[Summary] = []
    for r in rows:
        base_slug = BASELINE[r.spec.kind]
        base = by_slug.get(base_slug)
        base_p50 = pct(sorted(base.samples), 50) if base is not None and base.samples else NAN
        if not r.samples:
            out.append(
                Summary(
                    r.spec.slug, r.spec.title, r.spec.kind, r.spec.masters, 0, NAN, NAN, NAN,
                    NAN, NAN, NAN, NAN, base_slug, NAN, [], r.note,
                )
            )  # fmt: skip
            continue
        s = sorted(r.samples)
        n = len(s)
        p50 = pct(s, 50)
        rounds = (
            [a / b for a, b in zip(r.round_p50_ns, base.round_p50_ns, strict=False)]
            if base is not None
            else []
        )
        out.append(
            Summary(
                slug=r.spec.slug,
                title=r.spec.title,
                kind=r.spec.kind,
                masters=r.spec.masters,
                cycles=n,
                cycles_per_s=n / (r.elapsed_ns / 1e9),
                p50_us=p50 / 1e3,
                p90_us=pct(s, 90) / 1e3,
                p99_us=pct(s, 99) / 1e3,
                requests_per_cycle=r.requests / n,
                client_cpu_us=1e6 * r.cpu_s / n,
                servers_cpu_us=1e6 * r.server_cpu_s / n,
                baseline=base_slug,
                ratio=p50 / base_p50,
                round_ratios=rounds,
                note=r.note,
            )
        )
    return out


def num(x: float, spec: str) -> str:
    return "n/a" if x != x else format(x, spec)


def table(summaries: Sequence[Summary]) -> str:
    lines = [
        "| # | row | masters | cycles/s | p50 µs | p90 µs | p99 µs | requests/cycle "
        "| client CPU µs/cycle | servers CPU µs/cycle | p50 ÷ baseline p50 |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, s in enumerate(summaries, 1):
        if not s.cycles:
            lines.append(f"| {i} | {s.title} | {s.masters} | {s.note} |" + " |" * 7)
            continue
        base = "Lock" if s.baseline == "lock" else "AsyncLock"
        ratio = "1 (baseline)" if s.slug == s.baseline else f"{num(s.ratio, '.2f')} ({base})"
        lines.append(
            f"| {i} | {s.title} | {s.masters} | {s.cycles_per_s:,.0f} | {s.p50_us:,.0f} "
            f"| {s.p90_us:,.0f} | {s.p99_us:,.0f} | {s.requests_per_cycle:.2f} "
            f"| {s.client_cpu_us:,.0f} | {s.servers_cpu_us:,.0f} | {ratio} |"
        )
    return "\n".join(lines)


def goal_lines(summaries: Sequence[Summary]) -> list[tuple[bool | None, str]]:
    """The SPEC goal (judged) and the asyncio counterpart (info, never judged)."""
    by_slug = {s.slug: s for s in summaries}
    out: list[tuple[bool | None, str]] = []
    for slug, base, judged in (("redlock-5", "Lock", True), ("asyncredlock-5", "AsyncLock", False)):
        s = by_slug.get(slug)
        if s is None or not s.cycles or s.ratio != s.ratio:
            continue
        rounds = ", ".join(f"{x:.2f}" for x in s.round_ratios)
        text = (
            f"{s.title} over 5 masters p50 {s.p50_us:.0f} µs = {s.ratio:.2f}x our "
            f"single-master {base}"
        )
        if judged:
            ok = s.ratio <= GOAL_RATIO
            verdict = "PASS" if ok else "FAIL"
            out.append((ok, f"{verdict}: {text} (goal <= {GOAL_RATIO}x; per round: {rounds})"))
        else:
            out.append((None, f"info: {text} (not judged; per round: {rounds})"))
    return out


def redislock_origin() -> str:
    """Where the imported redislock comes from: its directory, and for a checkout the
    commit, marked "+ uncommitted changes" when ``git status`` shows any under it."""
    pkg = Path(redislock.__file__).resolve().parent
    try:

        def git(*argv: str) -> str:
            return subprocess.run(
                ["git", "-C", str(pkg), *argv],
                capture_output=True, text=True, timeout=5.0, check=False,
            ).stdout.strip()  # fmt: skip

        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", ".")
    except (OSError, subprocess.SubprocessError):
        head = dirty = ""
    if not head:
        return str(pkg)
    return f"{pkg}, git {head}{' + uncommitted changes' if dirty else ''}"


def cpu_ticks() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs from /proc/stat (Linux), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    steal = fields[7] if len(fields) > 7 else 0
    return steal, sum(fields[:8])  # guest time is already inside user time


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float:
    """The share of CPU time the hypervisor gave to others between two cpu_ticks()."""
    if before is None or after is None or after[1] <= before[1]:
        return NAN
    return (after[0] - before[0]) / (after[1] - before[1])


# --------------------------------------------------------------------------- main


def _sigterm(signum: int, frame: FrameType | None) -> None:
    signal.raise_signal(signal.SIGINT)  # treat SIGTERM as Ctrl-C: the finally blocks run


@contextlib.contextmanager
def servers(binary: str, tcp: bool) -> Iterator[list[RedisProcess]]:
    """SERVERS redis-servers of our own, all stopped on the way out."""
    with (
        tempfile.TemporaryDirectory(prefix="rl-redlock-", dir="/tmp") as tmp,  # short path
        contextlib.ExitStack() as stack,
    ):
        yield [
            stack.enter_context(
                RedisProcess(Path(tmp), unix_socket=not tcp, binary=binary, name=f"m{i}")
            )
            for i in range(SERVERS)
        ]


def aioredlock_address(kwargs: dict[str, Any]) -> Any:
    if "unix_socket_path" in kwargs:
        return str(kwargs["unix_socket_path"])  # aioredlock: a plain path is a unix socket
    return {"host": kwargs["host"], "port": int(kwargs["port"])}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--seconds", type=float, default=1.0, help="timed seconds per row per round (default 1)"
    )
    ap.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="timed cycles per row per round instead of --seconds",
    )
    ap.add_argument("--warmup", type=int, default=100, help="untimed cycles per row per round")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, rows interleaved (default 3)")
    ap.add_argument(
        "--rows",
        default=",".join(ROWS_BY_SLUG),
        help=f"comma-separated subset of: {', '.join(ROWS_BY_SLUG)} (default: all); the "
        "baseline of each kind (lock, asynclock) is added when missing",
    )
    ap.add_argument("--tcp", action="store_true", help="loopback TCP instead of unix sockets")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    ap.add_argument(
        "--redis-server",
        metavar="PATH",
        help="redis-server binary (default: $REDISLOCK_REDIS_SERVER, else the newest "
        "redis-server on PATH, /usr/local/bin or /usr/bin)",
    )
    ap.add_argument("--check", action="store_true", help="exit 1 if the goal fails")
    args = ap.parse_args(argv)
    rows = [s.strip() for s in args.rows.split(",") if s.strip()]
    unknown = [s for s in rows if s not in ROWS_BY_SLUG]
    if unknown:
        ap.error(f"unknown --rows {unknown}; choose from {', '.join(ROWS_BY_SLUG)}")
    for kind, base in BASELINE.items():
        if base not in rows and any(ROWS_BY_SLUG[s].kind == kind for s in rows):
            rows.insert(0, base)
    args.rows = [s for s in ROWS_BY_SLUG if s in rows]  # the table's order
    if args.seconds <= 0 or args.warmup < 0 or args.repeat < 1:
        ap.error("need --seconds > 0, --warmup >= 0, --repeat >= 1")
    if args.iterations is not None and args.iterations < 1:
        ap.error("need --iterations >= 1")
    return args


def build_rows(specs: Sequence[RowSpec], c: Clients, runner: asyncio.Runner) -> list[Row]:
    rows: list[Row] = []
    for spec in specs:
        row = Row(spec)
        try:
            if spec.kind == "sync":
                row.sync = sync_cycle(spec, c)
            else:
                row.aio = runner.run(async_cycle(spec, c))
        except RowUnavailableError as exc:
            row.note = f"cannot run: {exc}"
            print(f"  {spec.title} ({spec.masters}): {row.note}", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def measure(srvs: Sequence[RedisProcess], args: argparse.Namespace) -> dict[str, Any]:
    kwargs = [s.client_kwargs() for s in srvs]
    admins = [redis.Redis(**k, single_connection_client=True) for k in kwargs]
    clients = Clients(
        ours=[redis.Redis(**k) for k in kwargs],
        ours_async=[redis.asyncio.Redis(**k) for k in kwargs],
        pottery=[redis.Redis(**k) for k in kwargs],
        aioredlock_addresses=[aioredlock_address(k) for k in kwargs],
        raw_kwargs=kwargs,
    )
    server_version = str(admins[0].info("server")["redis_version"])
    specs = [ROWS_BY_SLUG[s] for s in args.rows]
    with asyncio.Runner() as runner:
        try:
            rows = build_rows(specs, clients, runner)
            load_before = loadavg()
            ticks_before = cpu_ticks()
            t0 = time.monotonic()
            for rnd in range(args.repeat):
                for row in rows:
                    if row.sync is None and row.aio is None:
                        continue
                    try:
                        run_segment(row, args, admins, runner)
                    except Exception as exc:  # report the row as failed, keep going
                        row.note = f"failed: {type(exc).__name__}: {exc}"
                        row.sync = row.aio = None
                        row.samples.clear()
                        print(f"  {row.spec.slug}: {row.note}", file=sys.stderr, flush=True)
                print(f"  round {rnd + 1}/{args.repeat} done", file=sys.stderr, flush=True)
            runtime = time.monotonic() - t0
            load_after = loadavg()
            steal = steal_share(ticks_before, cpu_ticks())
        finally:
            for manager in clients.aioredlock_managers:
                with contextlib.suppress(Exception):
                    runner.run(manager.destroy())
            for ac in clients.ours_async:
                runner.run(ac.aclose())
    for c in (*clients.ours, *clients.pottery, *admins):
        c.close()
    for sock in clients.raw_sockets:
        sock.close()
    return {
        "rows": rows,
        "server_version": server_version,
        "load_before": load_before,
        "load_after": load_after,
        "runtime_s": runtime,
        "steal": steal,
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    binary = args.redis_server or default_server()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # restore if started with &
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        with servers(binary, args.tcp) as srvs:
            res = measure(srvs, args)
    except KeyboardInterrupt:
        print("interrupted; redis-servers stopped", file=sys.stderr)
        return 130

    from redis.utils import HIREDIS_AVAILABLE

    transport = "tcp 127.0.0.1" if args.tcp else "unix socket"
    env = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "python": platform.python_version(),
        "redis_server": res["server_version"],
        "redis_server_binary": binary,
        "transport": transport,
        "redis_py": pkg_version("redis"),
        "hiredis_available": bool(HIREDIS_AVAILABLE),
        "pottery": pkg_version("pottery"),
        "aioredlock": pkg_version("aioredlock"),
        "aioredis": pkg_version("aioredis"),
        "redislock": f"{redislock.__version__} ({redislock_origin()})",
        "cpus": os.cpu_count(),
        "load_before": res["load_before"],
        "load_after": res["load_after"],
        "runtime_s": round(res["runtime_s"], 1),
        "cpu_steal_percent": round(100 * res["steal"], 1),
    }
    amount = f"{args.iterations} cycles" if args.iterations is not None else f"{args.seconds:g} s"
    print(
        f"{env['date']}: Python {env['python']}, {SERVERS} x redis-server "
        f"{env['redis_server']} ({binary}) over {transport}, redis-py {env['redis_py']} "
        f"(hiredis: {env['hiredis_available']}), pottery {env['pottery']}, aioredlock "
        f"{env['aioredlock']} (aioredis {env['aioredis']}), redislock {env['redislock']}, "
        f"{env['cpus']} CPUs"
    )
    print(
        f"load average before: {env['load_before']}; after: {env['load_after']}; "
        f"CPU steal {num(100 * res['steal'], '.1f')} %; {args.repeat} interleaved rounds "
        f"x {amount} per row (+{args.warmup} warm-up cycles each), {env['runtime_s']:.0f} s"
    )
    print()
    summaries = summarize(res["rows"])
    print(table(summaries))
    print()
    verdicts = goal_lines(summaries)
    for _ok, line in verdicts:
        print(line)

    if args.json:
        payload = {
            "params": {
                "seconds": args.seconds,
                "iterations": args.iterations,
                "warmup": args.warmup,
                "repeat": args.repeat,
                "rows": args.rows,
                "tcp": args.tcp,
            },
            "env": env,
            "rows": [s.__dict__ for s in summaries],
            "goals": [{"pass": ok, "line": line} for ok, line in verdicts],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")

    failed = [s for s in summaries if s.note.startswith("failed")]
    if failed:
        return 1
    if args.check and not all(ok for ok, _ in verdicts if ok is not None):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
