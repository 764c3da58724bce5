#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Readers and permits at scale: the server time of one hold script call (ReadWriteLock readers,
Semaphore permits) with few and with many holds on one name.

Starts its own redis-server on a unix socket in a temporary directory (persistence off;
stopped at the end, also on Ctrl-C or an error). For each kind (``rwlock``: read holds of a
ReadWriteLock; ``semaphore``: permits of a Semaphore with 1,000,000 permits) and each hold
count in --holds, on a flushed server:

  fill      take that many holds on one name (pipelined, leases of 600 s)
  acquire   a new hold (a read hold / a permit), in batches of --batch
  release   the last release of those holds (removes them, wakes nobody)
  reenter   (rwlock) a re-entry of an existing read hold
  decrement (rwlock) the release of that re-entry (count 2 -> 1)
  extend    a renewal ("set") of an existing hold
  count     the count of live holds (``Semaphore.available()``)

Each op runs --calls times (pipelined in batches); before each batch the server's statistics
are reset (CONFIG RESETSTAT) and after it ``INFO commandstats`` gives ``cmdstat_evalsha``'s
calls and usec; the table shows the mean server microseconds per call over all batches
(``usec_per_call``: the script's whole run inside Redis, without the network). It drives
the hold scripts directly, as the cores build their calls (``HoldCore._acquire_op``, ...),
so it measures the scripts, not the client.

There is no peer row: the peers we compare with elsewhere have no shared or counted lock
with a lease per hold.

Usage: PYTHONPATH=src python bench/holds.py [--holds 10,10000] [--calls 500] [--batch 100]
           [--json PATH] [--redis-server PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
from uncontended import default_server, loadavg, pkg_version

try:
    import redislock  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # run from a checkout without PYTHONPATH=src: use the checkout's src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import redislock  # type: ignore[import-not-found, unused-ignore]
from redislock._core.hold import HoldCore
from redislock._core.lock import LockCore, holder_meta, new_op_id, new_token
from redislock._core.ops import Eval
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess

LEASE_MS = 600_000
PERMITS = 1_000_000
KINDS = {"rwlock": "r", "semaphore": "p"}


def make_core(mode: str) -> HoldCore:
    base = LockCore.create(
        "bench-holds",
        ttl=600.0,
        watchdog_lease=30.0,
        renew_interval=None,
        max_lease=None,
        timeout=None,
        recheck_interval=0.1,
        prefix="redislock:",
        on_lost=None,
    )
    return HoldCore.for_mode(base, mode, PERMITS if mode == "p" else 0)


def send(r: redis.Redis, ops: Sequence[Eval]) -> list[Any]:
    pipe = r.pipeline(transaction=False)
    for op in ops:
        pipe.evalsha(op.script.sha, len(op.keys), *op.keys, *op.args)
    replies: list[Any] = pipe.execute()
    return replies


def timed(r: redis.Redis, admin: redis.Redis, ops: Sequence[Eval]) -> tuple[int, int]:
    """Run ``ops`` in one pipeline; return (evalsha calls, server usec) from commandstats."""
    admin.config_resetstat()
    replies = send(r, ops)
    for reply in replies:
        status = reply[0] if isinstance(reply, list) else reply
        if isinstance(status, bytes) and status not in (b"ok",):
            raise RuntimeError(f"a hold script replied {reply!r}")
    stat = admin.info("commandstats").get("cmdstat_evalsha", {})
    return int(stat.get("calls", 0)), int(stat.get("usec", 0))


def run(
    r: redis.Redis, admin: redis.Redis, kind: str, holds: int, calls: int, batch: int
) -> dict[str, Any]:
    mode = KINDS[kind]
    core = make_core(mode)
    admin.flushall()
    meta = holder_meta()
    tokens = [new_token() for _ in range(holds)]
    t0 = time.monotonic()
    for i in range(0, holds, 1000):
        send(r, [core._acquire_op(t, ms=LEASE_MS, meta=meta) for t in tokens[i : i + 1000]])
    fill_s = time.monotonic() - t0
    stored = int(admin.hlen(core.hkeys.lock))
    if stored != holds:
        raise RuntimeError(f"{kind}: {stored} holds stored, {holds} taken")
    totals: dict[str, list[int]] = {}

    def add(op: str, ops: Sequence[Eval]) -> None:
        n, usec = timed(r, admin, ops)
        got = totals.setdefault(op, [0, 0])
        got[0] += n
        got[1] += usec

    for start in range(0, calls, batch):
        size = min(batch, calls - start)
        fresh = [new_token() for _ in range(size)]
        add("acquire", [core._acquire_op(t, ms=LEASE_MS, meta=meta) for t in fresh])
        add("release", [core._release_op(t, new_op_id()) for t in fresh])
        some = [tokens[(start + j) % holds] for j in range(size)]
        if mode == "r":
            add("reenter", [core._reenter_op(t, ms=LEASE_MS, op_id=new_op_id()) for t in some])
            add("decrement", [core._release_op(t, new_op_id()) for t in some])
        add("extend", [core._extend_op(t, LEASE_MS, "set") for t in some])
        add("count", [core._count_op() for _ in range(size)])
    return {
        "kind": kind,
        "holds": holds,
        "fill_s": fill_s,
        "usec_per_call": {op: usec / n for op, (n, usec) in totals.items() if n},
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--holds", default="10,10000", help="comma-separated hold counts")
    ap.add_argument("--calls", type=int, default=500, help="calls per op and hold count")
    ap.add_argument("--batch", type=int, default=100, help="calls per pipeline")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: rwlock,semaphore")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    ap.add_argument("--redis-server", metavar="PATH", default=None, help="redis-server binary")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.holds.split(",")]
    kinds = args.kinds.split(",")
    if min(sizes) < 1 or args.calls < 1 or args.batch < 1 or not set(kinds) <= set(KINDS):
        ap.error("need --holds >= 1, --calls >= 1, --batch >= 1 and known --kinds")
    binary = args.redis_server or default_server()
    tmp = Path(tempfile.mkdtemp(prefix="rl-holds-"))
    load_before = loadavg()
    results: list[dict[str, Any]] = []
    try:
        with RedisProcess(tmp, name="holds", binary=binary) as srv:
            r = redis.Redis(**srv.client_kwargs(), socket_timeout=120)
            admin = redis.Redis(**srv.client_kwargs(), decode_responses=True, socket_timeout=120)
            version = str(admin.info("server")["redis_version"])
            for script in SCRIPTS.values():
                admin.script_load(script.source)
            for kind in kinds:
                for holds in sizes:
                    results.append(run(r, admin, kind, holds, args.calls, args.batch))
                    print(f"  {kind} {holds} done", file=sys.stderr, flush=True)
            r.close()
            admin.close()
    except KeyboardInterrupt:
        print("interrupted; redis-server stopped", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    env = {
        "python": platform.python_version(),
        "redis_server": version,
        "redis_server_binary": binary,
        "redis_py": pkg_version("redis"),
        "redislock": redislock.__version__,
        "load_before": load_before,
        "load_after": loadavg(),
    }
    print(
        f"redis-server {version} ({binary}), redis-py {env['redis_py']}, "
        f"redislock {env['redislock']}; load average {load_before} -> {env['load_after']}"
    )
    ops = ["acquire", "release", "reenter", "decrement", "extend", "count"]
    print()
    print("| kind | holds | fill s | " + " | ".join(f"{op} µs" for op in ops) + " |")
    print("|---|---:|---:|" + "---:|" * len(ops))
    for res in results:
        per = res["usec_per_call"]
        cells = [f"{per[op]:.1f}" if op in per else "-" for op in ops]
        head = f"| {res['kind']} | {res['holds']} | {res['fill_s']:.2f} | "
        print(head + " | ".join(cells) + " |")
    if args.json:
        payload = {
            "params": {"holds": sizes, "calls": args.calls, "batch": args.batch},
            "env": env,
            "results": results,
        }
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
