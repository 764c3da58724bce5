# SPDX-License-Identifier: MIT
"""``redislock run NAME -- CMD``: hold a lock while a command runs (like ``flock``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from types import FrameType

import redis

from redislock.sync.lock import Lock

__all__ = ["run_command"]

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def run_command(
    client: redis.Redis,
    name: str,
    cmd: list[str],
    *,
    ttl: float,
    wait: float | None,
    grace: float,
    prefix: str,
) -> int:
    """Acquire ``name`` (watchdog lease of ``ttl`` seconds), run ``cmd``, release.

    ``wait``: seconds to wait for the lock (None: no limit, 0: one try). ``grace``: seconds
    between SIGTERM and SIGKILL when the lease is lost. CMD runs in its own process group;
    SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to us are forwarded to that group.

    Returns:
        CMD's exit status (128+N if killed by signal N); 75 if the lock was busy or the
        wait timed out; 79 if the lease was lost (CMD was stopped); 126/127 if CMD could
        not be started.
    """
    from redislock.cli import EXIT_BUSY, EXIT_LOST

    lost = threading.Event()
    child: subprocess.Popen[bytes] | None = None

    def stop_child() -> None:
        # Runs in the renewer thread: SIGTERM the group now, SIGKILL after the grace period.
        lost.set()
        if child is not None:
            _signal_group(child, signal.SIGTERM)
            timer = threading.Timer(grace, _signal_group, (child, signal.SIGKILL))
            timer.daemon = True
            timer.start()

    lock = Lock(client, name, watchdog_lease=ttl, prefix=prefix, on_lost=lambda _: stop_child())
    if not lock.acquire(timeout=wait):
        print(f"redislock: lock {name!r} is busy", file=sys.stderr)
        return EXIT_BUSY
    previous: dict[int, object] = {}
    try:
        try:
            child = subprocess.Popen(cmd, process_group=0)
        except FileNotFoundError:
            print(f"redislock: command not found: {cmd[0]}", file=sys.stderr)
            return 127
        except PermissionError:
            print(f"redislock: cannot execute: {cmd[0]}", file=sys.stderr)
            return 126

        def forward(signum: int, _frame: FrameType | None) -> None:
            assert child is not None
            _signal_group(child, signum)

        for sig in _FORWARDED:
            previous[sig] = signal.signal(sig, forward)
        if lost.is_set():  # lost between acquire and Popen
            stop_child()
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        if not lost.is_set():
            try:
                lock.release()
            except Exception as exc:
                lost.set()
                print(f"redislock: release of {name!r} failed: {exc}", file=sys.stderr)
    if lost.is_set():
        print(
            f"redislock: lease of lock {name!r} was lost; the command was stopped", file=sys.stderr
        )
        return EXIT_LOST
    return 128 - status if status < 0 else status


def _signal_group(child: subprocess.Popen[bytes], sig: int) -> None:
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, sig)
