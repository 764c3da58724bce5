# SPDX-License-Identifier: MIT
"""``redislock run NAME -- CMD``: hold a lock while a command runs (like ``flock``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from types import FrameType
from typing import Any

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
    between SIGTERM and SIGKILL when the lease is lost.

    Signals: when stdin is not a terminal, CMD runs in its own process group and SIGINT,
    SIGTERM, SIGHUP and SIGQUIT sent to us are forwarded to that group (so a shell script's
    children get them too). When stdin is a terminal, CMD stays in the terminal's foreground
    group (so it can read the terminal); the terminal delivers Ctrl-C and Ctrl-\\ to it
    directly, we ignore them, and forward SIGTERM and SIGHUP.

    Returns:
        CMD's exit status (128+N if killed by signal N); 75 if the lock was busy or the
        wait timed out; 79 if the lease was lost (CMD was stopped); 126/127 if CMD could
        not be started.
    """
    from redislock.cli import EXIT_BUSY, EXIT_LOST

    try:
        interactive = os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        interactive = False
    child = _Child(group=not interactive)
    lost = threading.Event()

    def stop_child() -> None:
        # Runs in the renewer: SIGTERM now, SIGKILL after the grace period.
        lost.set()
        child.send(signal.SIGTERM)
        timer = threading.Timer(grace, child.send, (signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    lock = Lock(client, name, watchdog_lease=ttl, prefix=prefix, on_lost=lambda _: stop_child())
    if not lock.acquire(timeout=wait):
        print(f"redislock: lock {name!r} is busy", file=sys.stderr)
        return EXIT_BUSY
    previous: dict[int, Any] = {}
    try:
        # Handlers go in before the child exists: a signal in between is kept and delivered.
        for sig in _FORWARDED:
            terminal_sends_it = interactive and sig in (signal.SIGINT, signal.SIGQUIT)
            previous[sig] = signal.signal(sig, _ignore if terminal_sends_it else child.forward)
        try:
            child.start(cmd)
        except FileNotFoundError:
            print(f"redislock: command not found: {cmd[0]}", file=sys.stderr)
            return 127
        except PermissionError:
            print(f"redislock: cannot execute: {cmd[0]}", file=sys.stderr)
            return 126
        if lost.is_set():  # lost between acquire and start
            stop_child()
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
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


def _ignore(_signum: int, _frame: FrameType | None) -> None:
    pass


class _Child:
    """The command's process, and how to signal it (its own group, or just itself)."""

    def __init__(self, *, group: bool) -> None:
        self.group = group
        self.proc: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []

    def start(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, process_group=0 if self.group else None)
        for sig in self.pending:
            self.send(sig)

    def forward(self, signum: int, _frame: FrameType | None) -> None:
        self.send(signum)

    def send(self, sig: int) -> None:
        proc = self.proc
        if proc is None:
            self.pending.append(sig)
            return
        if proc.poll() is not None:
            return
        try:
            if self.group:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self) -> int:
        assert self.proc is not None
        return self.proc.wait()
