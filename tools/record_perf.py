#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Record the data behind docs/performance.md: every benchmark the page charts, one at a
time, in a short mode (about two minutes in all on 2 cores), each with ``--json`` into
``docs/data/<bench>.json``.

    PYTHONPATH=src python tools/record_perf.py                  # all of them
    PYTHONPATH=src python tools/record_perf.py contention bulk  # only these
    PYTHONPATH=src python tools/record_perf.py --list           # the command lines

Run it on an otherwise idle machine: the charts show ratios of rows of one run, but a loaded
machine still moves them (each benchmark prints the load average before and after). A
benchmark that fails keeps its old data file; the script then exits 1.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data"

# name -> the benchmark's arguments (before --json). Short modes; the page quotes them.
RUNS: dict[str, list[str]] = {
    name: line.split()
    for name, line in {
        "uncontended": "bench/uncontended.py --n 1000 --warmup 200 --repeat 3",
        "waiters": "bench/waiters.py --quick",
        "contention": "bench/contention.py --seconds 1",
        "redlock": "bench/redlock.py --seconds 0.2 --warmup 50 --repeat 2",
        "bulk": "bench/bulk.py --names 10000 --repeat 1 --mem-names 10000 --once-names 0",
        "renewals": "bench/renewals.py --locks 10000 --lease 30 --window 10 --flavor both",
    }.items()
}


def command(name: str) -> str:
    """The command line recorded for ``name``, as the page shows it."""
    return "python " + shlex.join([*RUNS[name], "--json", f"docs/data/{name}.json"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"some of: {', '.join(RUNS)} (default: all)")
    ap.add_argument("--list", action="store_true", help="print the command lines and exit")
    args = ap.parse_args(argv)
    names = args.names or list(RUNS)
    if unknown := [n for n in names if n not in RUNS]:
        ap.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(RUNS)}")
    if args.list:
        for name in names:
            print(command(name))
        return 0
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("REDIS_URL", None)
    failed: list[str] = []
    start = time.monotonic()
    for name in names:  # one at a time: they would disturb each other
        with tempfile.TemporaryDirectory(prefix="rl-perf-") as tmp:
            out = Path(tmp) / f"{name}.json"
            print(f"[record_perf] $ {command(name)}", flush=True)
            t0 = time.monotonic()
            cmd = [sys.executable, *RUNS[name], "--json", str(out)]
            rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
            took = time.monotonic() - t0
            if rc != 0 or not out.exists():
                print(f"[record_perf] {name}: FAILED (exit {rc}) after {took:.0f} s", flush=True)
                failed.append(name)
                continue
            (DATA / f"{name}.json").write_text(out.read_text(), encoding="utf-8")
            print(f"[record_perf] {name}: {took:.0f} s -> docs/data/{name}.json", flush=True)
    total = time.monotonic() - start
    print(f"[record_perf] {len(names) - len(failed)}/{len(names)} recorded in {total:.0f} s")
    if failed:
        print(f"[record_perf] failed (old data kept): {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
