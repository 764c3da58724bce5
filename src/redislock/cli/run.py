# SPDX-License-Identifier: MIT
"""``redislock run NAME -- CMD``: hold a lock while a command runs (like ``flock``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any

import redis

from redislock.errors import NotOwnedError
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

    CMD runs in its own process group, so that everything it starts can be stopped together.
    SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to us are forwarded to that group. When stdin
    is a terminal, the group is made the terminal's foreground group for the duration (as a
    shell does), so CMD can read the terminal and gets Ctrl-C from it directly.

    Returns:
        CMD's exit status (128+N if killed by signal N); 75 if the lock was busy or the
        wait timed out; 79 if the lease was lost (CMD and its group were stopped, or it
        finished after the loss); 69 if Redis failed at release; 126/127 if CMD could not
        be started.
    """
    from redislock.cli import EXIT_BUSY, EXIT_LOST, EXIT_UNAVAILABLE

    child = _Child(_terminal())
    lost = threading.Event()

    def stop_child() -> None:
        # Runs in the renewer: SIGTERM the group now, SIGKILL after the grace period.
        lost.set()
        child.send(signal.SIGTERM)
        child.kill_later(grace)

    lock = Lock(client, name, watchdog_lease=ttl, prefix=prefix, on_lost=lambda _: stop_child())
    if not lock.acquire(timeout=wait):
        print(f"redislock: lock {name!r} is busy", file=sys.stderr)
        return EXIT_BUSY
    previous: dict[int, Any] = {}
    release_error: Exception | None = None
    status = 0
    try:
        # Handlers go in before the child exists: a signal in between is kept and delivered.
        for sig in _FORWARDED:
            previous[sig] = signal.signal(sig, child.forward)
        if not lost.is_set():
            try:
                child.start(cmd)
            except FileNotFoundError:
                print(f"redislock: command not found: {cmd[0]}", file=sys.stderr)
                return 127
            except PermissionError:
                print(f"redislock: cannot execute: {cmd[0]}", file=sys.stderr)
                return 126
            status = child.wait()
            if lost.is_set():
                child.wait_group(grace)
    finally:
        child.done()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        try:
            lock.release()  # after a loss too: a key that is still ours is freed at once
        except NotOwnedError:
            lost.set()
        except Exception as exc:
            release_error = exc
    if lost.is_set():
        print(f"redislock: lease of lock {name!r} was lost while the command ran", file=sys.stderr)
        return EXIT_LOST
    if release_error is not None:
        print(f"redislock: release of {name!r} failed: {release_error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    return 128 - status if status < 0 else status


def _terminal() -> int | None:
    """The fd of our controlling terminal if stdin is it and we are in its foreground."""
    try:
        fd = sys.stdin.fileno()
        if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    except (AttributeError, OSError, ValueError):
        pass
    return None


class _Child:
    """The command's process group, and the terminal hand-over when there is one."""

    def __init__(self, terminal: int | None) -> None:
        self.terminal = terminal
        self.proc: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []
        self.timers: list[threading.Timer] = []
        self.finished = False

    def start(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, process_group=0)
        if self.terminal is not None:
            self._give_terminal(self.proc.pid)
            # If it read the terminal before it was its own, it was stopped: wake it.
            self.send(signal.SIGCONT)
        for sig in self.pending:
            self.send(sig)

    def _give_terminal(self, pgrp: int) -> None:
        assert self.terminal is not None
        # tcsetpgrp from a background group raises SIGTTOU unless it is ignored.
        old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(self.terminal, pgrp)
        except OSError:
            pass
        finally:
            signal.signal(signal.SIGTTOU, old)

    def kill_later(self, grace: float) -> None:
        """SIGKILL the group after ``grace`` seconds (from any thread)."""
        timer = threading.Timer(grace, self.send, (signal.SIGKILL,))
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def done(self) -> None:
        """Take the terminal back and cancel pending kills: the group id may be reused."""
        self.finished = True
        for timer in self.timers:
            timer.cancel()
        if self.terminal is not None and self.proc is not None:
            self._give_terminal(os.getpgrp())

    def forward(self, signum: int, _frame: FrameType | None) -> None:
        self.send(signum)

    def send(self, sig: int) -> None:
        """Signal the whole group, even after its leader (CMD itself) has exited."""
        if self.proc is None:
            self.pending.append(sig)
            return
        if self.finished:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def wait(self) -> int:
        assert self.proc is not None
        return self.proc.wait()

    def wait_group(self, grace: float) -> None:
        """After a loss: wait until no process of the group is left, SIGKILL it after
        ``grace`` seconds."""
        assert self.proc is not None
        deadline = time.monotonic() + grace + 1.0
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)
        self.send(signal.SIGKILL)
