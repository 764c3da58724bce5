#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How much CPU the watchdog needs to keep many leases alive (SPEC: 10 000 held leases with
< 10 % of one core).

Starts its own redis-server on a unix socket, acquires N watchdog locks (``ttl=None``) in
one process, then measures that process's CPU time (user + system, all threads) over a
window while the one renewal scheduler renews them, and checks that none was lost.
The Redis server's CPU is reported separately. Run:

    PYTHONPATH=src python bench/renewals.py [--locks 10000] [--lease 30] [--window 30]
        [--flavor sync|async|both] [--json PATH] [--check]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
import redis.asyncio
from uncontended import loadavg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import redislock
from redislock import AsyncLock, Lock
from redislock.server import RedisProcess

GOAL_CPU_PERCENT = 10.0  # SPEC: 10 000 held leases with < 10 % of one core


def server_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def keys_alive(admin: redis.Redis, keys: list[str]) -> int:
    """How many of the lock keys exist (one pipelined EXISTS each)."""
    pipe = admin.pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    return sum(pipe.execute())


def report(
    args: argparse.Namespace,
    cpu: float,
    wall: float,
    srv: float,
    renewals: int,
    lost: int,
    alive: int,
) -> dict[str, Any]:
    print(
        "| flavor | locks | lease s | window s | client CPU % of one core | "
        "redis-server CPU % | renewals | renewals/s | lost | keys alive at end |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {args.flavor} | {args.locks} | {args.lease:g} | {wall:.1f} | "
        f"{100 * cpu / wall:.1f} | {100 * srv / wall:.1f} | {renewals} | "
        f"{renewals / wall:.0f} | {lost} | {alive} |"
    )
    return {
        "flavor": args.flavor,
        "locks": args.locks,
        "lease_s": args.lease,
        "window_s": round(wall, 3),
        "client_cpu_percent": round(100 * cpu / wall, 2),
        "server_cpu_percent": round(100 * srv / wall, 2),
        "renewals": renewals,
        "renewals_per_s": round(renewals / wall, 1),
        "lost": lost,
        "keys_alive": alive,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--locks", type=int, default=10_000)
    p.add_argument("--lease", type=float, default=30.0)
    p.add_argument("--window", type=float, default=30.0)
    p.add_argument("--flavor", choices=["sync", "async", "both"], default="sync")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    p.add_argument("--check", action="store_true", help="exit 1 if a goal fails")
    args = p.parse_args()
    flavors = ["sync", "async"] if args.flavor == "both" else [args.flavor]
    load_before, t0 = loadavg(), time.monotonic()
    rows: list[dict[str, Any]] = []
    version = "?"
    for args.flavor in flavors:  # a fresh server per flavor
        tmp = Path(tempfile.mkdtemp(prefix="rl-bench-"))
        try:
            with RedisProcess(tmp, name="bench") as server:
                admin = redis.Redis(**server.client_kwargs())
                version = str(admin.info("server")["redis_version"])
                if args.flavor == "sync":
                    rows.append(run_sync(args, server, admin))
                else:
                    rows.append(asyncio.run(run_async(args, server, admin)))
                admin.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    goals: list[dict[str, Any]] = []
    for row in rows:
        ok = row["client_cpu_percent"] < GOAL_CPU_PERCENT and row["lost"] == 0
        line = (
            f"{'PASS' if ok else 'FAIL'}: {row['flavor']}, {row['locks']} leases: client CPU "
            f"{row['client_cpu_percent']} % of one core, {row['lost']} lost (goal < "
            f"{GOAL_CPU_PERCENT:g} % for 10000 leases, none lost)"
        )
        print(line)
        goals.append({"pass": ok, "line": line})
    if args.json:
        payload = {
            "params": {
                "locks": args.locks,
                "lease_s": args.lease,
                "window_s": args.window,
                "flavors": flavors,
            },
            "env": {
                "python": platform.python_version(),
                "redis_server": version,
                "redis_py": redis.__version__,
                "redislock": redislock.__version__,
                "cpus": os.cpu_count(),
                "load_before": load_before,
                "load_after": loadavg(),
                "runtime_s": round(time.monotonic() - t0, 1),
            },
            "rows": rows,
            "goals": goals,
        }
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 1 if args.check and not all(g["pass"] for g in goals) else 0


def run_sync(args: argparse.Namespace, server: RedisProcess, admin: redis.Redis) -> dict[str, Any]:
    client = redis.Redis(**server.client_kwargs(), socket_timeout=5, max_connections=None)
    locks = [Lock(client, f"bench:{i}", watchdog_lease=args.lease) for i in range(args.locks)]
    start = time.monotonic()
    for lock in locks:
        assert lock.acquire(blocking=False)
    print(f"acquired {args.locks} locks in {time.monotonic() - start:.1f} s", file=sys.stderr)
    before = sum(lock.statistics().renewals for lock in locks)
    cpu0, srv0, t0 = time.process_time(), server_cpu(admin), time.monotonic()
    time.sleep(args.window)
    cpu, srv, wall = time.process_time() - cpu0, server_cpu(admin) - srv0, time.monotonic() - t0
    renewals = sum(lock.statistics().renewals for lock in locks) - before
    lost = sum(lock.lost for lock in locks)
    alive = keys_alive(admin, [lock.key for lock in locks])
    row = report(args, cpu, wall, srv, renewals, lost, alive)
    for lock in locks:
        lock.release()
    client.close()
    return row


async def run_async(
    args: argparse.Namespace, server: RedisProcess, admin: redis.Redis
) -> dict[str, Any]:
    client = redis.asyncio.Redis(**server.client_kwargs(), socket_timeout=5)
    locks = [AsyncLock(client, f"bench:{i}", watchdog_lease=args.lease) for i in range(args.locks)]
    start = time.monotonic()
    for lock in locks:
        assert await lock.acquire(blocking=False)
    print(f"acquired {args.locks} locks in {time.monotonic() - start:.1f} s", file=sys.stderr)
    before = sum(lock.statistics().renewals for lock in locks)
    cpu0, srv0, t0 = time.process_time(), server_cpu(admin), time.monotonic()
    await asyncio.sleep(args.window)
    cpu, srv, wall = time.process_time() - cpu0, server_cpu(admin) - srv0, time.monotonic() - t0
    renewals = sum(lock.statistics().renewals for lock in locks) - before
    lost = sum(lock.lost for lock in locks)
    alive = keys_alive(admin, [lock.key for lock in locks])
    row = report(args, cpu, wall, srv, renewals, lost, alive)
    for lock in locks:
        await lock.release()
    await client.aclose()
    return row


if __name__ == "__main__":
    os.environ.pop("REDIS_URL", None)
    raise SystemExit(main())
