#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How much CPU the watchdog needs to keep many leases alive (SPEC: 10 000 held leases with
< 10 % of one core).

Starts its own redis-server on a unix socket, acquires N watchdog locks (``ttl=None``) in
one process, then measures that process's CPU time (user + system, all threads) over a
window while the one renewal scheduler renews them, and checks that none was lost.
The Redis server's CPU is reported separately. Run:

    PYTHONPATH=src python bench/renewals.py [--locks 10000] [--lease 30] [--window 30]
        [--flavor sync|async]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import redis
import redis.asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from redislock import AsyncLock, Lock
from redislock.server import RedisProcess


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
) -> None:
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--locks", type=int, default=10_000)
    p.add_argument("--lease", type=float, default=30.0)
    p.add_argument("--window", type=float, default=30.0)
    p.add_argument("--flavor", choices=["sync", "async"], default="sync")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rl-bench-"))
    try:
        with RedisProcess(tmp, name="bench") as server:
            admin = redis.Redis(**server.client_kwargs())
            if args.flavor == "sync":
                run_sync(args, server, admin)
            else:
                asyncio.run(run_async(args, server, admin))
            admin.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def run_sync(args: argparse.Namespace, server: RedisProcess, admin: redis.Redis) -> None:
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
    report(args, cpu, wall, srv, renewals, lost, alive)
    for lock in locks:
        lock.release()
    client.close()


async def run_async(args: argparse.Namespace, server: RedisProcess, admin: redis.Redis) -> None:
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
    report(args, cpu, wall, srv, renewals, lost, alive)
    for lock in locks:
        await lock.release()
    await client.aclose()


if __name__ == "__main__":
    os.environ.pop("REDIS_URL", None)
    raise SystemExit(main())
