# SPDX-License-Identifier: MIT
"""The watchdog for sync locks: ONE daemon thread per process renews every held lease.

The thread is started lazily, stopped at interpreter exit,
and forgotten in a forked child (the child holds none of its parent's locks).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from redislock._core.lock import Holding
from redislock._core.schedule import Schedule
from redislock.sync._driver import run

if TYPE_CHECKING:
    from redislock.sync.lock import Lock

__all__ = ["Renewer", "renewer"]

log = logging.getLogger(__name__)


class Renewer:
    """The process-wide watchdog thread and its schedule."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._schedule: Schedule[Lock] = Schedule()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def schedule(self, lock: Lock, h: Holding, due: float) -> None:
        """Renew ``h`` (held by ``lock``) at monotonic time ``due``."""
        with self._cond:
            if self._stopped:
                return
            self._schedule.add(lock, h, due)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="redislock-renewer", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def discard(self, h: Holding) -> None:
        """Stop renewing ``h``."""
        with self._cond:
            self._schedule.discard(h)

    def stop(self) -> None:
        """Stop the thread (held leases are no longer renewed and run out in Redis)."""
        with self._cond:
            self._stopped = True
            self._schedule.clear()
            self._cond.notify()

    def _next(self) -> tuple[Lock, Holding] | None:
        with self._cond:
            while not self._stopped:
                item = self._schedule.pop_due(time.monotonic())
                if isinstance(item, tuple):
                    return item
                self._cond.wait(item)
            return None

    def _run(self) -> None:
        while (item := self._next()) is not None:
            lock, h = item
            core = lock._core
            try:
                due, fire = run(lock._client, core.renew_flow(h))
            except Exception:  # a bug; keep serving the other locks
                log.exception("renewing lock %r failed unexpectedly", core.name)
                continue
            if fire:
                log.warning("lease of lock %r lost: %s", core.name, h.lost_reason)
                if core.on_lost is not None:
                    try:
                        core.on_lost(lock)
                    except Exception:
                        log.exception("on_lost callback of lock %r raised", core.name)
            if due is not None:
                self.schedule(lock, h, due)
            del lock


_renewer: Renewer | None = None
_guard = threading.Lock()


def renewer() -> Renewer:
    """The process-wide renewer, created on first use."""
    global _renewer
    with _guard:
        if _renewer is None:
            _renewer = Renewer()
        return _renewer


def _forget_in_child() -> None:
    global _renewer, _guard
    _renewer = None
    _guard = threading.Lock()


def _stop_at_exit() -> None:
    if _renewer is not None:
        _renewer.stop()


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(_stop_at_exit)
