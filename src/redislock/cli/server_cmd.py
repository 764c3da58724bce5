# SPDX-License-Identifier: MIT
"""``redislock server status|start|stop``: the embedded redis-server."""

from __future__ import annotations

import json

from redislock import server
from redislock.cli import EXIT_UNAVAILABLE, CliError

__all__ = ["server_command"]


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
