# SPDX-License-Identifier: MIT
"""``redislock torture``: run the fault-injection checks of :mod:`redislock.testing`.

Exit status: 0 when every scenario run held every "must be" line and every negative
control reported its violation; 1 otherwise; 64 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from redislock.cli import _args
from redislock.cli._common import EXIT_USAGE, CliError

__all__ = ["add_parser", "run", "torture_command"]


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock torture`` to the command line."""
    from redislock.testing.faults import ALL_FAULTS, CONTROLS, FLAVOURS, SCENARIOS

    t = subs.add(
        "torture",
        run,
        formatter_class=argparse.HelpFormatter,  # its description reflowed, as ever
        help="prove the locks under faults: fault proxies, pauses, kills, Redis stalls and "
        "restarts, a fenced oracle and history checkers",
        description="Start redis-server(s) (or use --url), fault proxies, a fenced oracle and "
        "worker processes that run lock cycles while a seeded schedule injects faults; then "
        "check the histories. Every run's records stay in its directory; --replay DIR runs "
        "one again from its seed.",
    )
    t.add_argument(
        "--scenario",
        default="lock",
        help=f"{', '.join(SCENARIOS)}, or all (default %(default)s)",
    )
    t.add_argument(
        "--flavour",
        choices=FLAVOURS,
        default="both",
        help="sync or asyncio workers, or both: odd worker ids asyncio (default %(default)s)",
    )
    t.add_argument(
        "--control",
        default=None,
        help=f"a negative control that must report violations: {', '.join(CONTROLS)}, or all",
    )
    t.add_argument("--processes", type=int, default=4, help="worker processes (default 4)")
    t.add_argument("--names", type=int, default=2, help="lock names shared (default 2)")
    t.add_argument("--duration", type=float, default=10.0, help="seconds per run (default 10)")
    t.add_argument("--cycles", type=int, default=None, help="stop after N acquisitions")
    t.add_argument("--seed", type=int, default=1, help="seed of the schedule (default 1)")
    t.add_argument(
        "--faults",
        default="default",
        help="comma-separated fault kinds, default (all but server_clock_jump, which needs "
        f"libfaketime), all, or none; kinds: {', '.join(ALL_FAULTS)}",
    )
    t.add_argument("--lease", type=float, default=1.0, help="watchdog lease, seconds")
    t.add_argument(
        "--socket-timeout",
        type=float,
        default=None,
        help="the workers' redis-py socket timeout, seconds (default: redis-py's, 5)",
    )
    t.add_argument(
        "--long-share",
        type=float,
        default=0.1,
        help="share of critical sections lasting 0.2-1.5 leases (default 0.1)",
    )
    t.add_argument(
        "--gap",
        default="0.2,1.0",
        help="quiet seconds between two faults of one lane, LOW,HIGH (default %(default)s)",
    )
    t.add_argument("--permits", type=int, default=2, help="semaphore permits (default 2)")
    t.add_argument("--masters", type=int, default=5, help="Redlock masters (default 5)")
    t.add_argument("--persistence", choices=["always", "none"], default="always")
    t.add_argument("--restart-delay", type=float, default=0.0, help="seconds a server is down")
    t.add_argument("--section", default=None, help="module:function run in each section")
    t.add_argument("--no-monitor", action="store_true", help="skip the MONITOR audit")
    t.add_argument("--dir", default=None, help="where the runs' records go")
    t.add_argument("--replay", default=None, help="run a recorded run directory again")
    t.add_argument("--json", action="store_true", help="machine-readable output")


def run(ctx: _args.Context) -> int:
    """Run ``redislock torture`` (see :func:`torture_command`); only an explicit ``--url``
    is used: without one the run starts servers of its own.

    Raises:
        CliError: a bad option value (64).
    """
    try:
        return torture_command(ctx.args, ctx.args.url)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _faults(text: str) -> tuple[str, ...]:
    from redislock.testing.faults import ALL_FAULTS, DEFAULT_FAULTS

    if text == "default":
        return DEFAULT_FAULTS
    if text == "all":
        return ALL_FAULTS
    if text == "none":
        return ()
    return tuple(k.strip() for k in text.split(",") if k.strip())


def _pair(text: str) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--gap needs LOW,HIGH in seconds, got {text!r}") from None
    if not 0 <= low <= high:
        raise ValueError(f"--gap needs 0 <= LOW <= HIGH, got {text!r}")
    return low, high


_AS_GIVEN = (
    "flavour",
    "processes",
    "names",
    "duration",
    "cycles",
    "seed",
    "lease",
    "socket_timeout",
    "permits",
    "long_share",
    "masters",
    "persistence",
    "restart_delay",
    "section",
)
"""The options that are :class:`TortureConfig` fields of the same name, taken as parsed."""


def torture_command(args: argparse.Namespace, url: str | None) -> int:
    """Run what ``args`` ask for; print the reports; return the exit status.

    Raises:
        ValueError: a bad option value (the CLI turns it into exit status 64).
    """
    from redislock.testing.torture import (
        CONTROLS,
        QUORUM_SCENARIOS,
        SCENARIOS,
        TortureConfig,
        TortureResult,
        replay,
        run_torture,
    )

    runs: list[TortureConfig] = []
    base = TortureConfig(
        **{field: getattr(args, field) for field in _AS_GIVEN},
        faults=_faults(args.faults),
        gap=_pair(args.gap),
        monitor=not args.no_monitor,
        url=url,
    )
    if args.replay is None:
        if args.control is None or args.scenario != "lock":
            scenarios: tuple[str, ...] = SCENARIOS if args.scenario == "all" else (args.scenario,)
            if url is not None and args.scenario == "all":
                scenarios = tuple(s for s in scenarios if s not in QUORUM_SCENARIOS)
            runs += [replace(base, scenario=s) for s in scenarios]
        if args.control is not None:
            controls = CONTROLS if args.control == "all" else (args.control,)
            runs += [replace(base, control=c) for c in controls]
        for i, cfg in enumerate(runs):
            name = cfg.control or cfg.scenario
            directory = None if args.dir is None else str(Path(args.dir) / f"{i:02d}-{name}")
            runs[i] = replace(cfg, directory=directory).validated()
    results: list[TortureResult] = []
    if args.replay is not None:
        results.append(replay(args.replay, into=args.dir))
    else:
        for cfg in runs:
            if not args.json:
                what = f"control {cfg.control}" if cfg.control else f"scenario {cfg.scenario}"
                print(
                    f"== {what}: {cfg.processes} processes, {cfg.duration:g} s, "
                    f"seed {cfg.seed}, faults: {', '.join(cfg.faults) or 'none'}",
                    flush=True,
                )
            results.append(run_torture(cfg))
            if not args.json:
                _print_result(results[-1])
    ok = all(r.control_detected if r.config.control else r.passed for r in results)
    if args.json:
        json.dump([_result_json(r) for r in results], sys.stdout, indent=1)
        print()
    elif args.replay is not None:
        _print_result(results[0])
    return 0 if ok else 1


def _result_json(result: Any) -> dict[str, Any]:
    return {
        "config": result.config.to_json(),
        "directory": str(result.directory),
        "elapsed": round(result.elapsed, 3),
        "cycles": result.cycles,
        "faults_applied": result.faults_applied,
        "nemesis_errors": result.nemesis_errors,
        "passed": result.passed,
        "control_detected": result.control_detected if result.config.control else None,
        "report": result.report.to_json(),
    }


def _print_result(result: Any) -> None:
    print(result.report.table())
    verdict = (
        ("violation detected, as it must be" if result.control_detected else "NOT DETECTED")
        if result.config.control
        else ("passed" if result.passed else "FAILED")
    )
    print(
        f"-> {verdict}: {result.cycles} cycles, {result.faults_applied} faults in "
        f"{result.elapsed:.1f} s; records in {result.directory}"
    )
    for err in result.nemesis_errors[:5]:
        print(f"   nemesis error: {err}")
    print(flush=True)
