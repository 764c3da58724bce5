# SPDX-License-Identifier: MIT
"""``AsyncGuard``: the critical section of an asyncio hold that stops in time (what
``guard()`` returns). Hand-written: the sync twin, :mod:`redislock.sync._guard`, cannot
interrupt a thread and only checks.

The guard cancels the task that entered it when the hold is marked lost (the watchdog's
loss report, a failed ``extend()``) or when its deadline, the local lease estimate minus a
safety margin, passes; on the way out it turns that cancellation into
:class:`~redislock.errors.LockLostError`, with the bookkeeping of ``asyncio.timeout``
(``Task.cancelling()`` / ``Task.uncancel()``), so a cancellation from outside stays one.
Source: .NET DistributedLock's ``HandleLostToken``
(https://github.com/madelson/DistributedLock).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, Self

from redislock import _watch
from redislock._core import guard
from redislock._core.lock import Holding
from redislock.aio._block import AsyncBlock
from redislock.errors import LockLostError, LockUsageError

if TYPE_CHECKING:
    from redislock._handle import Holder

__all__ = ["AsyncGuard"]

_NEW, _ACTIVE, _FIRED, _DONE = "new", "active", "fired", "done"


class AsyncGuard(AsyncBlock, guard.GuardState):
    """``async with lock.guard():``: a body that is cancelled, with
    :class:`~redislock.errors.LockLostError`, once its hold is lost or about to be.

    Enter it from inside ``async with lock:`` (or after ``acquire()``), in the task that
    holds the lock; each guard object is entered once. The body's task is cancelled:

    - at once (on the event loop's next turn) when the hold is marked lost: the watchdog
      found the key gone or taken, could not renew it before the lease estimate ran out, or
      ``extend()`` found it gone;
    - when the deadline passes: the local lease estimate minus ``margin`` seconds; a
      renewal or ``extend()`` moves the deadline later.

    The ``CancelledError`` that ends the body becomes ``LockLostError`` when it leaves the
    guard (chained to it). A cancellation from outside (``task.cancel()``, an enclosing
    ``asyncio.timeout``) stays a cancellation. If the body swallows the cancellation and
    ends normally after the guard fired, the guard still raises ``LockLostError``: the
    section did not end in time. A body that ends before: nothing happens, nothing is left
    behind. Releasing the lock inside the body stops the guard watching.
    """

    __slots__ = ("_cancelling", "_loop", "_reason", "_task", "_thread", "_timer")
    _CHECKED = (_ACTIVE, _FIRED)

    def __init__(self, lease: Holder, margin: float | None = None) -> None:
        """See ``guard()`` (raises :class:`~redislock.errors.LockConfigError` for a bad
        ``margin``, before any I/O)."""
        super().__init__(lease, margin)
        self._reason = ""
        self._cancelling = 0
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def margin(self) -> float:
        """The safety margin in seconds: how long before the end of the local lease estimate
        the body is cancelled."""
        return self._margin

    @property
    def fired(self) -> bool:
        """Whether the guard has cancelled (or is cancelling) its body."""
        return self._state == _FIRED or (self._state == _DONE and bool(self._reason))

    async def __aenter__(self) -> Self:
        """Start watching the calling task's hold.

        Raises:
            LockUsageError: not inside a task, or this guard was entered before.
            NotOwnedError: nothing is held (by the calling task, for a reentrant kind).
            LockLostError: the hold was lost, or less than ``margin`` seconds are left on
                its local lease estimate.
        """
        if self._state != _NEW:
            raise LockUsageError("a guard is entered once; call guard() again for a new one")
        task = asyncio.current_task()
        if task is None:
            raise LockUsageError("guard() must be entered from inside an asyncio task")
        core = self._lease._mine()
        h = core.require_holding()
        guard.check(core, h, self._margin)
        self._core, self._hold, self._task = core, h, task
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._cancelling = task.cancelling()
        self._state = _ACTIVE
        _watch.watch(h, self._on_lost)
        self._arm()
        return self

    async def _end(self, exc: BaseException | None) -> None:
        fired = self._state == _FIRED
        self._stop()
        if not fired:
            return
        assert self._task is not None
        assert self._core is not None
        # As asyncio.timeout: take back our cancellation request; only when no other
        # request is pending is the CancelledError ours to convert.
        if self._task.uncancel() <= self._cancelling and type(exc) is asyncio.CancelledError:
            raise LockLostError(self._core.name, self._reason) from exc
        if exc is None:
            raise LockLostError(self._core.name, self._reason)

    # ------------------------------------------------------------------ watching

    def _stop(self) -> None:
        self._state = _DONE
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._hold is not None:
            _watch.unwatch(self._hold, self._on_lost)

    def _arm(self) -> None:
        """Call :meth:`_due` at the deadline as it stands now."""
        assert self._loop is not None
        assert self._hold is not None
        delay = max(0.0, guard.deadline(self._hold, self._margin) - time.monotonic())
        self._timer = self._loop.call_later(delay, self._due)

    def _due(self) -> None:
        """The deadline the timer was set for was reached: fire, or re-arm if it moved."""
        self._timer = None
        h, core = self._hold, self._core
        if self._state != _ACTIVE or h is None or core is None:
            return
        if h.closing or core.holding is not h:
            return  # released in the body: nothing left to guard
        if h.lost:
            self._fire(h.lost_reason)
        elif time.monotonic() < guard.deadline(h, self._margin):
            self._arm()  # renewed or extended meanwhile
        else:
            self._fire(guard.expired_reason(self._margin))

    def _on_lost(self, h: Holding) -> None:
        """Called by ``mark_lost`` in the thread that marked ``h`` lost: cancel the body
        on the loop's next turn (never from inside the body's own step, so a body that
        sees the loss itself, from ``extend()``, and leaves at once is not cancelled
        later)."""
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._thread:
            loop.call_soon(self._lost)
        else:
            with contextlib.suppress(RuntimeError):  # the loop was closed
                loop.call_soon_threadsafe(self._lost)

    def _lost(self) -> None:
        h = self._hold
        if self._state == _ACTIVE and h is not None:
            self._fire(h.lost_reason or "the lease was lost")

    def _fire(self, reason: str) -> None:
        assert self._task is not None
        self._state = _FIRED
        self._reason = reason
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._task.cancel(f"redislock: {reason}")
