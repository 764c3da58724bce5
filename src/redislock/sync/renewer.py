# SPDX-License-Identifier: MIT
"""The watchdog for sync locks: ONE scheduler thread per process renews every held lease.

The scheduler hands each renewal to a pool of daemon I/O threads (grown on demand) and
declares a lease lost when its renewal has not answered by the end of the local lease
estimate, so neither a hung connection nor a slow Redis makes a loss silent or late.

The threads start lazily, stop at interpreter exit, and are forgotten in a forked child
(the child holds none of its parent's locks).
"""

from __future__ import annotations

import atexit
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redislock._clients import SYNC_SINGLE
from redislock._core.lock import Holding, LockCore
from redislock._core.ops import Batch
from redislock._core.schedule import COALESCE, RenewCall, Schedule, batches
from redislock._registry import PerProcess
from redislock.sync._driver import execute, run_batch

if TYPE_CHECKING:
    from redislock._handle import Renewable

__all__ = ["Renewer", "renewer"]

log = logging.getLogger(__name__)

_MAX_IO_THREADS = 64
"""Renewal I/O threads at most; one hung renewal holds one thread until it answers."""

_IDLE_EXIT = 10.0
"""Seconds an idle renewal I/O thread waits for work before it exits."""


class Renewer:
    """The process-wide watchdog: a scheduler thread, I/O workers, and loss deadlines.

    The scheduler never does I/O. Each due renewal goes to a worker thread, and a deadline
    at the end of the local lease estimate is set for it: if the renewal has not answered
    by then (a hung connection, a client without socket_timeout), the scheduler declares
    the lease lost. A slow Redis therefore delays nobody else's renewals.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._schedule: Schedule[Renewable] = Schedule()
        self._deadlines: Schedule[Renewable] = Schedule()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._wake_at = -math.inf  # when the sleeping scheduler wakes by itself
        self._workers = Workers(_MAX_IO_THREADS)

    def schedule(self, lock: Renewable, h: Holding, due: float) -> None:
        """Renew ``h`` (held by ``lock``) at monotonic time ``due``."""
        self.schedule_many([(lock, h, due)])

    def schedule_many(self, items: list[tuple[Renewable, Holding, float]]) -> None:
        """Several :meth:`schedule` calls under one lock; wakes the scheduler only if one
        of them is due before it would wake anyway."""
        with self._cond:
            if self._stopped:
                return
            for _, h, _ in items:
                self._deadlines.discard(h)
            self._schedule.add_many(items)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="redislock-renewer", daemon=True
                )
                self._thread.start()
            if min(due for _, _, due in items) < self._wake_at:
                self._cond.notify()

    def discard(self, h: Holding) -> None:
        """Stop renewing ``h``."""
        with self._cond:
            self._schedule.discard(h)
            self._deadlines.discard(h)

    def stop(self) -> None:
        """Stop the thread (held leases are no longer renewed and run out in Redis)."""
        with self._cond:
            self._stopped = True
            self._schedule.clear()
            self._deadlines.clear()
            self._cond.notify()

    def _next(self) -> tuple[Renewable, Holding] | list[tuple[Renewable, Holding]] | None:
        """A missed deadline (lock, h), or the list of renewals due now."""
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                late = self._deadlines.pop_due(now)
                if isinstance(late, tuple):
                    return late
                due: list[tuple[Renewable, Holding]] = []
                # Renewals due within the next few ms go along: one round trip for more.
                while isinstance(item := self._schedule.pop_due(now + COALESCE), tuple):
                    due.append(item)
                if due:
                    self._deadlines.add_many([(lock, h, h.expires_at) for lock, h in due])
                    return due
                # Sleep until the earliest renewal is due (pop_due measured from now + COALESCE).
                waits = [
                    w for w in (late, None if item is None else item + COALESCE) if w is not None
                ]
                wait = min(waits) if waits else None
                self._wake_at = math.inf if wait is None else now + wait
                self._cond.wait(wait)
                self._wake_at = -math.inf  # awake: no need to be notified
            return None

    def _run(self) -> None:
        while (item := self._next()) is not None:
            if isinstance(item, list):
                for group in batches(item, _client_of, _pipelines, _lock_renew):
                    self._workers.submit(self._renew, group)
            else:
                # The renewal sent for h has not answered and the lease estimate ran out.
                lock, h = item
                # a loss is told by mark_lost (tell_lost: on a worker, not on this thread)
                lock._core.renewal_error(
                    h, TimeoutError("no answer to the renewal before the lease ran out")
                )
            del item

    def _renew(self, group: list[tuple[Renewable, Holding]]) -> None:
        """Renewals of locks sharing one client, on a worker thread: one pipelined round
        trip for all of them."""
        client = group[0][0]._client
        results: list[object]
        if _pipelines(client) and group[0][0]._core.lock_renew:
            # Plain locks on a single-node client: ONE lock_renew call built from the holds.
            call = RenewCall(group)
            if call.op is not None:
                try:
                    call.settle(execute(client, call.op))
                except Exception as exc:  # Redis failed, or a closed client: failed renewals
                    call.fail(exc)
            results = list(call.results)
        else:
            merge = _pipelines(client)
            batch = Batch([lock._core.renew_flow(h) for lock, h in group], merge=merge)
            try:
                run_batch(client, batch)
            except Exception as exc:  # a bug; keep serving the other locks
                batch.results = [exc if r is None else r for r in batch.results]
            results = list(batch.results)
        again: list[tuple[Renewable, Holding, float]] = []
        for (lock, h), result in zip(group, results, strict=True):
            if not isinstance(result, tuple):
                # Not an answer from Redis (a closed client, a bug): a failed renewal like
                # any other, retried until the local estimate runs out, then reported lost.
                log.error("renewing lock %r failed unexpectedly: %r", lock._core.name, result)
                failure = result if isinstance(result, BaseException) else RuntimeError(result)
                result = lock._core.renewal_error(h, failure)
            due, _ = result  # a loss was told by mark_lost, here on this worker
            if due is None:
                with self._cond:
                    self._deadlines.discard(h)
            else:
                again.append((lock, h, due))
        if again:
            self.schedule_many(again)


def _client_of(lock: Renewable) -> object:
    return lock._client


def _pipelines(client: object) -> bool:
    # A RedisCluster pipeline may span nodes; one hung node must not hold up the others.
    return isinstance(client, SYNC_SINGLE)


def _lock_renew(lock: Renewable) -> bool:
    return lock._core.lock_renew


def tell_lost(core: LockCore, h: Holding) -> None:
    """A sync hold's :attr:`~redislock._core.lock.Holding.teller`: called once by
    ``mark_lost`` whoever found the loss. In the thread that found it (the holder's own
    release or extend, a renewal worker), except on the scheduler thread, which hands it to
    a worker: a slow callback must not hold up the other leases' renewals."""
    found = _RENEWER.made()
    if found is not None and threading.current_thread() is found._thread:
        found._workers.submit(_notify_lost, core, h)
    else:
        _notify_lost(core, h)


def _notify_lost(core: LockCore, h: Holding) -> None:
    log.warning("lease of lock %r lost: %s", core.name, h.lost_reason)
    ref = h.renewer_ref
    lock: Renewable | None = None if ref is None else ref()
    if core.on_lost is not None and lock is not None:
        try:
            core.on_lost(lock._subject())
        except Exception:
            log.exception("on_lost callback of lock %r raised", core.name)


class Workers:
    """Daemon threads for renewal I/O, started while queued work outnumbers idle threads.

    Unlike ThreadPoolExecutor's threads, a hung one never blocks interpreter exit.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on a worker thread."""
        with self._lock:
            self._queued += 1
            start = self._queued > self._idle and self._threads < self._limit
            if start:
                self._threads += 1
        self._queue.put(lambda: fn(*args))
        if start:
            threading.Thread(target=self._work, name="redislock-renewal-io", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            try:
                task = self._queue.get(timeout=_IDLE_EXIT)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    if self._queue.empty():  # nothing arrived between timeout and lock
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            task()


_RENEWER: PerProcess[Renewer] = PerProcess(Renewer)


def renewer() -> Renewer:
    """The process-wide renewer, created on first use."""
    return _RENEWER.get()


def _stop_at_exit() -> None:
    found = _RENEWER.made()
    if found is not None:
        found.stop()


atexit.register(_stop_at_exit)
