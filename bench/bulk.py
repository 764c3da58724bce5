#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Bulk locking: one MultiLock of many names against the peers, and Redis memory per held
lock (SPEC: "MultiLock of 100 000 names >= 30 000 locks/s; Redis memory per held plain lock
<= 200 bytes").

Starts its own redis-server on a unix socket in a temporary directory (persistence off;
stopped at the end, also on Ctrl-C, SIGTERM or an error) and measures, on one client:

Throughput: each row takes --names fresh names (a FLUSHALL before every run) and gives them
back; rows are interleaved, --repeat runs each, the best run is reported.

  1. redislock MultiLock(r, names, ttl=60): one acquire() and one release() of all names
     (all or nothing, a fencing token per name, chunks of 1000 names per script)
  2. redislock Lock one by one: Lock(r, name, ttl=60).acquire(blocking=False) per name,
     then release() each
  3. redis-py Lock one by one: r.lock(name, timeout=60).acquire(blocking=False), then
     release() each
  4. raw SET NX PX, pipelined: SET k tok NX PX 60000 in pipelines of 1000, then the
     compare-and-delete EVALSHA pipelined the same way. A floor, not a lock set: no
     all-or-nothing, no fencing, and nothing undone if a name was busy.
  pottery has no multi-name lock (its Redlock takes one key), so it has no row.

Memory (INFO memory used_memory after FLUSHALL, scripts loaded): hold --mem-names Lock
objects on fresh names (ttl=600), read used_memory, release them, read it again, delete the
done keys (60 s TTL) and read it a fourth time. Reported per name: (a) the lock key of a
held lock, (b) its share of the per-slot fencing counters, which never expire, (a)+(b),
and (c) its done key, which a release leaves for 60 s. The same for one MultiLock over
fresh names, which writes exactly Lock's keys.

Names locked once (bounded memory, issue 13: "1,000,000 distinct names locked once each
leave at most 2 MB"): for redislock Lock, redis-py Lock and python-redis-lock in the same
run, FLUSHALL, then --once-names fresh names each acquired and released once, one by one;
DBSIZE and used_memory growth right after the last release, and again once the longest TTL
of the row's keys has run out (redislock: the 60 s done key; python-redis-lock: its 1 s
signal list) and the server's active expiry has reclaimed them. redislock keeps one fencing
counter per hash slot used (at most 16,384 keys in all), nothing per name.

Prints markdown tables and the goals as PASS/FAIL lines; exits 0 whatever the goals say
unless --check is given (then 1 if a goal fails).

Usage: PYTHONPATH=src python bench/bulk.py [--names 100000] [--repeat 3]
           [--mem-names 100000] [--once-names 1000000] [--json PATH]
           [--redis-server PATH] [--check]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import redis
from uncontended import default_server, loadavg, pkg_version

try:
    import redislock  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # run from a checkout without PYTHONPATH=src: use the checkout's src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import redislock  # type: ignore[import-not-found, unused-ignore]
from redislock import Lock, MultiLock
from redislock._core.lock import DONE_MS, holder_meta, new_token
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess

LEASE_S = 60
PIPELINE = 1000
GOAL_RATE = 30_000.0  # SPEC: MultiLock of 100 000 names >= 30 000 locks/s
GOAL_BYTES = 200.0  # SPEC: <= 200 bytes of Redis memory per held plain lock
GOAL_ONCE_BYTES = 2_000_000  # issue 13: 1,000,000 names locked once leave <= 2 MB
SLOTS = 16384  # at most one fencing counter per hash slot
# The minimal correct release (as in uncontended.py).
RELEASE_LUA = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end"
)


class BenchError(RuntimeError):
    """A row did not behave (a name not taken, a release that did not delete)."""


# --------------------------------------------------------------------------- rows

Step = Callable[[], None]


@dataclass
class Run:
    acquire_s: float
    release_s: float
    client_cpu_s: float
    server_cpu_s: float


@dataclass
class Row:
    slug: str
    title: str
    prepare: Callable[[redis.Redis, list[str]], tuple[Step, Step]]
    """Given the client and the names, return (acquire all, release all); the
    preparation (object construction) is not timed, except where a row says so."""
    runs: list[Run] = field(default_factory=list)
    note: str = ""

    def best(self) -> Run | None:
        return min(self.runs, key=lambda r: r.acquire_s + r.release_s) if self.runs else None


def prep_multilock(r: redis.Redis, names: list[str]) -> tuple[Step, Step]:
    m = MultiLock(r, names, ttl=LEASE_S)

    def acquire() -> None:
        if not m.acquire(blocking=False):
            raise BenchError("MultiLock: not acquired")

    def release() -> None:
        m.release()

    return acquire, release


def prep_redislock(r: redis.Redis, names: list[str]) -> tuple[Step, Step]:
    locks = [Lock(r, n, ttl=LEASE_S) for n in names]

    def acquire() -> None:
        for lock in locks:
            if not lock.acquire(blocking=False):
                raise BenchError(f"Lock {lock.name!r}: not acquired")

    def release() -> None:
        for lock in locks:
            lock.release()

    return acquire, release


def prep_redis_py(r: redis.Redis, names: list[str]) -> tuple[Step, Step]:
    locks = [r.lock(n, timeout=LEASE_S) for n in names]

    def acquire() -> None:
        for lock in locks:
            if not lock.acquire(blocking=False):
                raise BenchError(f"redis-py Lock {lock.name!r}: not acquired")

    def release() -> None:
        for lock in locks:
            lock.release()

    return acquire, release


def prep_raw(r: redis.Redis, names: list[str]) -> tuple[Step, Step]:
    sha = r.script_load(RELEASE_LUA)
    tokens = [new_token() for _ in names]

    def acquire() -> None:
        for i in range(0, len(names), PIPELINE):
            pipe = r.pipeline(transaction=False)
            for name, token in zip(names[i : i + PIPELINE], tokens[i : i + PIPELINE], strict=True):
                pipe.set(name, token, nx=True, px=LEASE_S * 1000)
            if not all(pipe.execute()):
                raise BenchError("raw SET NX PX: a name was not set")

    def release() -> None:
        for i in range(0, len(names), PIPELINE):
            pipe = r.pipeline(transaction=False)
            for name, token in zip(names[i : i + PIPELINE], tokens[i : i + PIPELINE], strict=True):
                pipe.evalsha(sha, 1, name, token)
            if not all(pipe.execute()):
                raise BenchError("raw release: a name was not deleted")

    return acquire, release


ROWS = [
    Row("multilock", "redislock MultiLock (one object, all names)", prep_multilock),
    Row("lock", "redislock Lock, one by one", prep_redislock),
    Row("redis-py", "redis-py Lock, one by one", prep_redis_py),
    Row("raw", "raw SET NX PX, pipelined by 1000 (floor; not a lock set)", prep_raw),
]


def server_cpu(admin: redis.Redis) -> float:
    info = admin.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def run_row(row: Row, r: redis.Redis, admin: redis.Redis, names: list[str]) -> None:
    admin.flushall()
    for script in SCRIPTS.values():  # loaded before timing, as in a running service
        admin.script_load(script.source)
    acquire, release = row.prepare(r, names)
    gc.collect()
    gc.disable()
    try:
        cpu0, srv0 = time.process_time(), server_cpu(admin)
        t0 = time.perf_counter()
        acquire()
        t1 = time.perf_counter()
        release()
        t2 = time.perf_counter()
        cpu, srv = time.process_time() - cpu0, server_cpu(admin) - srv0
    finally:
        gc.enable()
    # Every lock key is gone (redislock's 60 s done keys and slot counters may stay).
    left = sum(
        1
        for k in admin.scan_iter(match="*bulk:*", count=10_000)
        if k.endswith("}") or not k.startswith("redislock:")
    )
    if left:
        raise BenchError(f"{row.title}: {left} lock keys left after release")
    row.runs.append(Run(t1 - t0, t2 - t1, cpu, srv))


# --------------------------------------------------------------------------- memory


@dataclass
class Memory:
    what: str
    n: int
    held_b: float  # (a) + (b): per held lock, its share of the counters included
    lock_b: float  # (a): the lock key alone
    fence_b: float  # (b): its share of the slot counters, which stay for good
    done_b: float  # (c): its done key, which stays 60 s after the release


@dataclass
class Once:
    """One row of the "names locked once" table: memory and keys left by ``n`` names, each
    acquired and released once, right after the releases and once every TTL has run out."""

    what: str
    n: int
    keys_after: int  # DBSIZE right after the last release
    bytes_after: int  # used_memory growth right after the last release
    keys_settled: int  # DBSIZE once the keys with a TTL have expired
    bytes_settled: int  # used_memory growth then
    settle_s: float  # how long after the last release that was
    note: str = ""


def used_memory(admin: redis.Redis) -> int:
    """INFO used_memory once it has settled (a dict resize finishes in serverCron: right
    after a burst of inserts both hash tables may still be allocated)."""
    last = -(1 << 40)
    for _ in range(40):
        time.sleep(0.25)
        now = int(admin.info("memory")["used_memory"])
        if abs(now - last) <= 1024:
            return now
        last = now
    return last


def measure_memory(r: redis.Redis, admin: redis.Redis, n: int) -> list[Memory]:
    out: list[Memory] = []
    for what in ("Lock", "MultiLock"):
        admin.flushall()
        for script in SCRIPTS.values():
            admin.script_load(script.source)
        names = [f"mem:{i}" for i in range(n)]  # the same names: FLUSHALL in between
        m0 = used_memory(admin)
        if what == "Lock":
            locks: list[Any] = [Lock(r, name, ttl=600) for name in names]
            for lock in locks:
                if not lock.acquire(blocking=False):
                    raise BenchError(f"memory: {lock.name!r} not acquired")
        else:
            locks = [MultiLock(r, names, ttl=600)]
            if not locks[0].acquire(blocking=False):
                raise BenchError("memory: MultiLock not acquired")
        m1 = used_memory(admin)
        for lock in locks:
            lock.release()
        m2 = used_memory(admin)
        # The done keys (60 s TTL) deleted instead of waited for: what stays is counters.
        done = list(admin.scan_iter(match="redislock:{mem:*}:done", count=10_000))
        for i in range(0, len(done), PIPELINE):
            admin.unlink(*done[i : i + PIPELINE])
        m3 = used_memory(admin)
        out.append(Memory(what, n, (m1 - m0) / n, (m1 - m3) / n, (m3 - m0) / n, (m2 - m3) / n))
    return out


# A row of the once table: (title, the longest TTL a released name's keys keep in s,
# acquire-and-release of one name).
OnceRow = tuple[str, float, Callable[[redis.Redis, str], None]]


def once_redislock(r: redis.Redis, name: str) -> None:
    lock = Lock(r, name, ttl=LEASE_S)
    if not lock.acquire(blocking=False):
        raise BenchError(f"Lock {name!r}: not acquired")
    lock.release()


def once_redis_py(r: redis.Redis, name: str) -> None:
    lock = r.lock(name, timeout=LEASE_S)
    if not lock.acquire(blocking=False):
        raise BenchError(f"redis-py Lock {name!r}: not acquired")
    lock.release()


def once_python_redis_lock(r: redis.Redis, name: str) -> None:
    redis_lock: Any = importlib.import_module("redis_lock")  # no type stubs
    lock = redis_lock.Lock(r, name, expire=LEASE_S)
    if not lock.acquire(blocking=False):
        raise BenchError(f"python-redis-lock {name!r}: not acquired")
    lock.release()


ONCE_ROWS: list[OnceRow] = [
    ("redislock Lock", DONE_MS / 1000, once_redislock),  # the done key: 60 s
    ("redis-py Lock", 0.0, once_redis_py),
    ("python-redis-lock", 1.0, once_python_redis_lock),  # its signal list: 1 s
]


def measure_once(r: redis.Redis, admin: redis.Redis, n: int) -> list[Once]:
    """Each row: FLUSHALL, lock and release ``n`` fresh names one by one, read DBSIZE and
    used_memory, then again once the longest TTL of the row's keys has run out and the
    server's active expiry has reclaimed them (DBSIZE stable for 3 s)."""
    out: list[Once] = []
    for title, ttl_s, once in ONCE_ROWS:
        admin.flushall()
        for script in SCRIPTS.values():
            admin.script_load(script.source)
        m0 = used_memory(admin)
        try:
            for i in range(n):
                once(r, f"once:{i}")
        except (BenchError, ImportError) as exc:
            out.append(Once(title, n, 0, 0, 0, 0, 0.0, f"FAILED: {exc}"))
            continue
        done = time.monotonic()
        keys_after, m1 = int(admin.dbsize()), used_memory(admin)
        time.sleep(max(0.0, done + ttl_s + 0.5 - time.monotonic()))
        last, stable = -1, time.monotonic()
        while time.monotonic() - stable < 3.0:
            for _ in admin.scan_iter(count=10_000):  # SCAN also expires what it meets
                pass
            size = int(admin.dbsize())
            if size != last:
                last, stable = size, time.monotonic()
            time.sleep(0.5)
        m2 = used_memory(admin)
        out.append(Once(title, n, keys_after, m1 - m0, last, m2 - m0, time.monotonic() - done))
        print(f"  once: {title} done", file=sys.stderr, flush=True)
    return out


# --------------------------------------------------------------------------- report


def rate_table(rows: list[Row], n: int) -> str:
    lines = [
        "| # | row | names | acquire s | release s | acquire locks/s | "
        "acquire+release locks/s | client CPU s | redis-server CPU s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k, row in enumerate(rows, 1):
        best = row.best()
        if best is None:
            lines.append(f"| {k} | {row.title} | {n} | {row.note} | | | | | |")
            continue
        total = best.acquire_s + best.release_s
        lines.append(
            f"| {k} | {row.title} | {n} | {best.acquire_s:.3f} | {best.release_s:.3f} | "
            f"{n / best.acquire_s:,.0f} | {n / total:,.0f} | {best.client_cpu_s:.2f} | "
            f"{best.server_cpu_s:.2f} |"
        )
    return "\n".join(lines)


def memory_table(mem: list[Memory]) -> str:
    lines = [
        "| held with | names | (a) lock key B/lock | (b) slot counters B/name, for good | "
        "(a)+(b) B | (c) done key B/name, 60 s after release |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {m.what} | {m.n} | {m.lock_b:.1f} | {m.fence_b:.1f} | {m.held_b:.1f} | {m.done_b:.1f} |"
        for m in mem
    )
    return "\n".join(lines)


def once_table(rows: list[Once]) -> str:
    lines = [
        "| lock | names | keys right after | B/name right after | keys after TTLs | "
        "B after TTLs | B/name after TTLs | TTLs waited s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for o in rows:
        if o.note:
            lines.append(f"| {o.what} | {o.n} | {o.note} | | | | | |")
            continue
        lines.append(
            f"| {o.what} | {o.n} | {o.keys_after:,} | {o.bytes_after / o.n:.1f} | "
            f"{o.keys_settled:,} | {o.bytes_settled:,} | {o.bytes_settled / o.n:.2f} | "
            f"{o.settle_s:.0f} |"
        )
    return "\n".join(lines)


def goals(
    rows: list[Row], n: int, mem: list[Memory], once: Sequence[Once] = ()
) -> list[tuple[bool, str]]:
    out: list[tuple[bool, str]] = []
    multi = rows[0].best()
    if multi is not None:
        rate = n / (multi.acquire_s + multi.release_s)
        peers = [
            (row.title, n / (b.acquire_s + b.release_s))
            for row in rows[1:]
            if (b := row.best()) is not None
        ]
        peer = ", ".join(f"{title} {value:,.0f}" for title, value in peers)
        out.append(
            (
                rate >= GOAL_RATE,
                f"{'PASS' if rate >= GOAL_RATE else 'FAIL'} MultiLock of {n} names: "
                f"{rate:,.0f} locks/s acquired and released (goal >= {GOAL_RATE:,.0f}; "
                f"same run: {peer})",
            )
        )
    for m in mem:
        if m.what != "Lock":
            continue
        ok = m.lock_b <= GOAL_BYTES
        out.append(
            (
                ok,
                f"{'PASS' if ok else 'FAIL'} Redis memory per held Lock: {m.lock_b:.1f} B for the "
                f"lock key (goal <= {GOAL_BYTES:.0f}), plus {m.fence_b:.1f} B for its share of "
                f"the slot counters ({m.held_b:.1f} B in all; its done key: {m.done_b:.1f} B "
                "for 60 s after the release)",
            )
        )
    for o in once:
        if o.what != "redislock Lock" or o.note:
            continue
        ok = o.bytes_settled <= GOAL_ONCE_BYTES and o.keys_settled <= SLOTS
        scale = "" if o.n >= 1_000_000 else " (the goal is for 1,000,000 names)"
        out.append(
            (
                ok,
                f"{'PASS' if ok else 'FAIL'} {o.n:,} names locked once leave {o.bytes_settled:,} B "
                f"in {o.keys_settled:,} keys once their TTLs ran out (goal <= "
                f"{GOAL_ONCE_BYTES:,} B, <= {SLOTS:,} keys){scale}",
            )
        )
    return out


def _sigterm(signum: int, frame: FrameType | None) -> None:
    signal.raise_signal(signal.SIGINT)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--names", type=int, default=100_000, help="names per throughput run")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row (best is reported)")
    ap.add_argument("--mem-names", type=int, default=100_000, help="locks held for memory")
    ap.add_argument(
        "--once-names",
        type=int,
        default=1_000_000,
        help="names locked once each for the bounded-memory table (0: skip it)",
    )
    ap.add_argument(
        "--rows", default=",".join(r.slug for r in ROWS), help="comma-separated subset of rows"
    )
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    ap.add_argument("--redis-server", metavar="PATH", default=None, help="redis-server binary")
    ap.add_argument("--check", action="store_true", help="exit 1 if a goal fails")
    args = ap.parse_args(argv)
    wanted = args.rows.split(",")
    rows = [row for row in ROWS if row.slug in wanted]
    if args.names < 1 or args.repeat < 1 or args.mem_names < 0 or args.once_names < 0 or not rows:
        ap.error(
            "need --names >= 1, --repeat >= 1, --mem-names >= 0, --once-names >= 0 and known --rows"
        )
    binary = args.redis_server or default_server()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm)
    tmp = Path(tempfile.mkdtemp(prefix="rl-bulk-"))
    load_before = loadavg()
    t0 = time.monotonic()
    mem: list[Memory] = []
    once: list[Once] = []
    try:
        with RedisProcess(tmp, name="bulk", binary=binary) as srv:
            r = redis.Redis(**srv.client_kwargs(), socket_timeout=30)
            admin = redis.Redis(**srv.client_kwargs(), decode_responses=True, socket_timeout=30)
            info = admin.info("server")
            server_version = str(info["redis_version"])
            allocator = str(admin.info("memory").get("mem_allocator", "?"))
            for rnd in range(args.repeat):
                for row in rows:
                    names = [f"bulk:{rnd}:{i}" for i in range(args.names)]
                    try:
                        run_row(row, r, admin, names)
                    except BenchError as exc:
                        row.note = f"FAILED: {exc}"
                        print(f"  {row.title}: {row.note}", file=sys.stderr, flush=True)
                print(f"  run {rnd + 1}/{args.repeat} done", file=sys.stderr, flush=True)
            if args.mem_names:
                mem = measure_memory(r, admin, args.mem_names)
            if args.once_names:
                once = measure_once(r, admin, args.once_names)
            r.close()
            admin.close()
    except KeyboardInterrupt:
        print("interrupted; redis-server stopped", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    runtime = time.monotonic() - t0
    meta = holder_meta()
    from redis.utils import HIREDIS_AVAILABLE

    env = {
        "python": platform.python_version(),
        "redis_server": server_version,
        "redis_server_binary": binary,
        "mem_allocator": allocator,
        "redis_py": pkg_version("redis"),
        "hiredis_available": bool(HIREDIS_AVAILABLE),
        "redislock": redislock.__version__,
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": loadavg(),
        "runtime_s": runtime,
        "lock_value_bytes": 32 + 1 + len(meta.encode()),  # and "<fence>|"
        "host_name_bytes": len(meta.split("|")[0].encode()),
    }
    print(
        f"Python {env['python']}, redis-server {server_version} ({binary}, {allocator}), "
        f"redis-py {env['redis_py']} (hiredis: {env['hiredis_available']}), "
        f"redislock {env['redislock']}, {env['cpus']} CPUs; unix socket"
    )
    print(
        f"load average before: {env['load_before']}; after: {env['load_after']}; "
        f"{args.repeat} interleaved runs per row, best shown; {runtime:.1f} s"
    )
    print()
    print(rate_table(rows, args.names))
    if mem:
        print()
        print(
            f"Memory per name, {args.mem_names} fresh names (lock value {env['lock_value_bytes']} "
            f"B with a {env['host_name_bytes']}-byte host name, plus the fencing token's "
            "digits and a '|'):"
        )
        print()
        print(memory_table(mem))
    if once:
        print()
        print(
            f"Names locked once: {args.once_names} fresh names, each acquired and released "
            "once, one by one; Redis memory (used_memory growth over the empty server) and "
            "keys (DBSIZE) right after the last release and once every TTL has run out:"
        )
        print()
        print(once_table(once))
    print()
    results = goals(rows, args.names, mem, once)
    for _ok, line in results:
        print(line)
    print("pottery: no row; it has no multi-name lock (its Redlock takes one key).")
    if args.json:
        payload = {
            "params": {
                "names": args.names,
                "repeat": args.repeat,
                "mem_names": args.mem_names,
                "once_names": args.once_names,
            },
            "env": env,
            "rows": [
                {
                    "slug": row.slug,
                    "title": row.title,
                    "note": row.note,
                    "runs": [run.__dict__ for run in row.runs],
                    "best": None if (best := row.best()) is None else best.__dict__,
                }
                for row in rows
            ],
            "memory": [m.__dict__ for m in mem],
            "once": [o.__dict__ for o in once],
            "goals": [{"pass": ok, "line": line} for ok, line in results],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    if args.check and not all(ok for ok, _ in results):
        return 1
    return 0


if __name__ == "__main__":
    os.environ.pop("REDIS_URL", None)
    sys.exit(main())
