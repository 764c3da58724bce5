# SPDX-License-Identifier: MIT
"""The watchdog for sync locks: ONE scheduler thread per process renews every held lease.

The scheduler hands each renewal to a small pool of daemon I/O threads and waits at most
until the lease must count as lost, so a hung connection cannot make a loss silent.

The threads start lazily, stop at interpreter exit, and are forgotten in a forked child
(the child holds none of its parent's locks).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from redislock._core.lock import Holding
from redislock._core.schedule import Schedule
from redislock.sync._driver import run

if TYPE_CHECKING:
    from redislock.sync.lock import Lock

__all__ = ["Renewer", "renewer"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Renewer:
    """The process-wide watchdog thread and its schedule."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._schedule: Schedule[Lock] = Schedule()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._workers = _Workers(4)

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
            self._renew(lock, h)
            del lock, item

    def _renew(self, lock: Lock, h: Holding) -> None:
        # The I/O runs on a worker thread so that a hung connection (a client without
        # socket_timeout, a blackholed network) cannot hold the scheduler past the point
        # where the lease must be declared lost.
        core = lock._core
        limit = max(0.05, min(core.renew_interval / 2.0, h.expires_at - time.monotonic()))
        future = self._workers.submit(run, lock._client, core.renew_flow(h))
        try:
            due, fire = future.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            future.add_done_callback(lambda late: self._late(lock, h, late))
            due, fire = core.renewal_error(
                h, TimeoutError(f"no answer to the renewal within {limit:.3f} s")
            )
        except Exception:  # a bug; keep serving the other locks
            log.exception("renewing lock %r failed unexpectedly", core.name)
            return
        if fire:
            _notify_lost(lock, h)
        if due is not None:
            self.schedule(lock, h, due)

    @staticmethod
    def _late(
        lock: Lock, h: Holding, future: concurrent.futures.Future[tuple[float | None, bool]]
    ) -> None:
        # A renewal that answered after we stopped waiting may still have found the loss.
        if not future.cancelled() and future.exception() is None and future.result()[1]:
            _notify_lost(lock, h)


def _notify_lost(lock: Lock, h: Holding) -> None:
    core = lock._core
    log.warning("lease of lock %r lost: %s", core.name, h.lost_reason)
    if core.on_lost is not None:
        try:
            core.on_lost(lock)
        except Exception:
            log.exception("on_lost callback of lock %r raised", core.name)


class _Workers:
    """A few daemon threads for renewal I/O (unlike ThreadPoolExecutor's, a hung one never
    blocks interpreter exit)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]
        self._queue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put((lambda: fn(*args), future))
        with self._lock:
            if self._idle == 0 and len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._work, name="redislock-renewal-io", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            fn, future = self._queue.get()
            with self._lock:
                self._idle -= 1
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)


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
