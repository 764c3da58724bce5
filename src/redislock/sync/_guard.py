# SPDX-License-Identifier: MIT
"""``Guard``: the critical section of a sync hold that knows when to stop (what
``guard()`` returns). Hand-written: a thread cannot be interrupted, so unlike its asyncio
twin (:mod:`redislock.aio._guard`, which cancels the body) this one gives the body a
:meth:`Guard.check` to call between steps and an event to wait on, and reports a section
that overran when it ends.
Source: .NET DistributedLock's ``HandleLostToken``
(https://github.com/madelson/DistributedLock).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Self

from redislock import _watch
from redislock._core import guard
from redislock.errors import LockLostError, LockUsageError
from redislock.sync._block import Block

if TYPE_CHECKING:
    from redislock._handle import Holder

__all__ = ["Guard"]


class Guard(Block, guard.GuardState):
    """``with lock.guard() as g:``: a body that stops itself in time.

    Enter it from inside ``with lock:`` (or after ``acquire()``), in the thread that holds
    the lock; each guard object is entered once. Nothing can interrupt the thread, so the
    body calls :meth:`check` between steps (it raises
    :class:`~redislock.errors.LockLostError` once the hold is lost or its deadline, the
    local lease estimate minus ``margin`` seconds, passed) or waits on :attr:`lost_event`.
    When the body ends normally but the hold was lost meanwhile or the deadline passed, the
    guard raises ``LockLostError`` on the way out: the section did not end in time. An
    exception from the body passes unchanged. Releasing the lock inside the body ends the
    guard's watch.
    """

    __slots__ = ()

    def __init__(self, lease: Holder, margin: float | None = None) -> None:
        """See ``guard()`` (raises :class:`~redislock.errors.LockConfigError` for a bad
        ``margin``, before any I/O)."""
        super().__init__(lease, margin)

    @property
    def margin(self) -> float:
        """The safety margin in seconds: how long before the end of the local lease estimate
        :meth:`check` starts raising."""
        return self._margin

    @property
    def lost_event(self) -> threading.Event:
        """The guarded hold's ``threading.Event``, set when the hold is marked lost (see the
        lock's ``lost_event``).

        Raises:
            LockUsageError: the guard was not entered.
        """
        if self._hold is None:
            raise LockUsageError("lost_event needs an entered guard")
        return _watch.lost_event(self._hold)

    def __enter__(self) -> Self:
        """Start watching the calling thread's hold.

        Raises:
            LockUsageError: this guard was entered before.
            NotOwnedError: nothing is held (by the calling thread, for a reentrant kind).
            LockLostError: the hold was lost, or less than ``margin`` seconds are left on
                its local lease estimate.
        """
        if self._state != "new":
            raise LockUsageError("a guard is entered once; call guard() again for a new one")
        core = self._lease._mine()
        h = core.require_holding()
        guard.check(core, h, self._margin)
        self._core, self._hold = core, h
        self._state = "active"
        return self

    def _end(self, exc: BaseException | None) -> None:
        self._state = "done"
        h, core = self._hold, self._core
        if exc is not None or h is None or core is None:
            return
        if h.closing or core.holding is not h:
            return  # released in the body
        if h.lost:
            raise LockLostError(core.name, h.lost_reason or "the lease was lost")
        if time.monotonic() >= guard.deadline(h, self._margin):
            raise LockLostError(core.name, guard.expired_reason(self._margin))
