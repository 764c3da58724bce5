# SPDX-License-Identifier: MIT
"""``redislock once NAME --period S -- CMD``: run a command exactly once per period.

Every instance of a job runs this at the same time (a cron line on each host, say); the
first to get the name's lock with no record of the period yet runs CMD under it, as
``redislock run`` would (the same supervision: :func:`redislock.cli.run.run_command`), and
records the run if CMD exits 0. The others, then or later in the period, exit 0 at once and
say on stderr who ran it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import redis

from redislock.cli import _args
from redislock.cli.run import Guard, Held, Settled, run_command
from redislock.errors import AcquireTimeoutError
from redislock.sync.once import Once, OnceTurn

__all__ = ["add_parser", "once_command", "run"]


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock once`` to the command line."""
    p = subs.add(
        "once",
        run,
        cmd=True,
        help="run a command exactly once per period among many processes",
        usage="redislock once [options] NAME --period S [--] CMD [ARGS...]",
        allow_abbrev=False,
        description="Runs CMD if no run of NAME succeeded yet in this period, holding "
        "Lock(NAME) while it runs (as `run` does). Another process of the same period "
        "waits for the lock, finds the record and exits 0 without running CMD, saying on "
        "stderr who ran it (not with -q). Only a CMD that exits 0 counts: after a failure "
        "the next attempt runs it.",
        epilog=_args.epilog(
            _args.CMD_TAIL + "CMD gets the fencing token of its hold in $REDISLOCK_FENCING_TOKEN."
        ),
    )
    p.add_argument("name", help="job name (also the lock's)")
    p.add_argument(
        "--period",
        type=_args.seconds,
        required=True,
        metavar="S",
        help="period in seconds, aligned on UTC multiples since the Unix epoch "
        "(86400: a UTC day); with --key, how long its record lives",
    )
    p.add_argument("--key", metavar="K", help="an explicit period key (e.g. 2026-11-23) instead")
    _args.hold_options(p, subs.files, lease=_args.LEASE_HELP, nowait_alias=False)


def run(ctx: _args.Context) -> int:
    """Run ``redislock once`` (see :func:`once_command`).

    Raises:
        CliError: a usage error found before any I/O (64), or Redis not found (69).
    """
    args = ctx.args
    cmd, hold = _args.hold_settings(ctx)
    return once_command(ctx.client(), args.name, cmd, period=args.period, key=args.key, **hold)


def once_command(
    client: redis.Redis,
    name: str,
    cmd: list[str],
    *,
    period: float,
    key: str | None,
    ttl: float,
    wait: float | None,
    grace: float,
    prefix: str,
    quiet: bool,
    conflict_status: int | None = None,
) -> int:
    """Run ``cmd`` if this process wins the current period of ``name`` (``period`` seconds,
    aligned on UTC multiples, or the explicit ``key``), holding ``Lock(name)`` with a
    watchdog lease of ``ttl`` seconds while it runs; ``wait``: seconds to wait for the lock
    (None: no limit); ``grace``: as for ``run``. ``quiet``: say nothing when the period was
    already done, or busy; ``conflict_status``: as for ``run``.

    Returns:
        0 when the period was already done (stderr names the run unless ``quiet``); else
        as ``run``: CMD's status (only a 0 records the run), 75 if the wait timed out, 79
        if the lease was lost (nothing recorded), 69 if the record could not be written.

    Raises:
        LockConfigError: an invalid argument (before any I/O).
    """
    turns: list[OnceTurn] = []

    def custom(on_lost: Callable[[Any], object]) -> Guard:
        once = Once(
            client,
            name,
            period=period,
            key=key,
            watchdog_lease=ttl,
            prefix=prefix,
            on_lost=on_lost,
        )

        def take(limit: float | None) -> Held | None:
            turn = once.run(timeout=limit)
            try:
                turn.start()
            except AcquireTimeoutError:
                return None
            if not turn.mine:
                if not quiet and turn.record is not None:
                    print(
                        f"redislock: {name!r} for {turn.key} was already run by "
                        f"{turn.record.describe()}",
                        file=sys.stderr,
                    )
                raise Settled(0)
            turns.append(turn)
            return turn.lock

        def commit(_held: Held) -> None:
            turns[-1].commit()

        return Guard("once lock", take, commit)

    return run_command(
        client,
        name,
        cmd,
        ttl=ttl,
        wait=wait,
        grace=grace,
        prefix=prefix,
        custom=custom,
        conflict_status=conflict_status,
        quiet=quiet,
    )
