# SPDX-License-Identifier: MIT
"""``redislock server status|start|stop``: the embedded redis-server."""

from __future__ import annotations

import json

from redislock import server
from redislock.cli import _args
from redislock.cli._common import EXIT_UNAVAILABLE, CliError

__all__ = ["add_parser", "run", "server_command"]


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock server`` to the command line (it reads no settings: it works
    whatever the configuration files say)."""
    p = subs.add(
        "server",
        run,
        settings=False,
        help="the embedded redis-server",
        description="status: whether the embedded server of this user runs, and where; "
        "start: start it unless it runs; stop: stop it (its append-only file keeps the "
        "fencing counters).",
        epilog=_args.epilog(
            "status exits 3 when the embedded server is not running (as `systemctl status` "
            "does for a stopped unit), 0 when it runs; start and stop exit 0, or 69 when "
            "the server cannot be started or stopped."
        ),
    )
    p.add_argument("action", choices=["status", "stop", "start"])
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(ctx: _args.Context) -> int:
    """Run ``redislock server ACTION`` (see :func:`server_command`).

    Raises:
        CliError: see :func:`server_command`.
    """
    return server_command(ctx.args.action, as_json_output=ctx.args.json)


def server_command(action: str, *, as_json_output: bool) -> int:
    """Run ``action`` (``status``, ``start`` or ``stop``); returns the exit status (0, or 3
    when ``status``/``start`` find no server running).

    Raises:
        CliError: the embedded server could not be started or stopped.
    """
    try:
        if action == "start":
            server.ensure_embedded()
        if action == "stop":
            stopped = server.stop_embedded()
            print(
                "stopped the embedded server" if stopped else "the embedded server was not running"
            )
            return 0
        status = server.embedded_status()
        record = None if status is not None or as_json_output else server.recorded_binary()
    except server.ServerError as exc:
        raise CliError(str(exc), EXIT_UNAVAILABLE) from exc
    if as_json_output:
        print(json.dumps(status, sort_keys=True, default=str))
    elif status is None:
        print(f"the embedded server is not running (runtime dir {server.runtime_dir()})")
        if record is not None:
            version = record["version"] or "version unknown"
            print(
                f"last started with {record['binary']} ({version}); the next start uses it "
                "unless $REDISLOCK_REDIS_SERVER names another"
            )
    else:
        for key, value in sorted(status.items()):
            print(f"{key}: {value}")
    return 0 if status is not None else 3
