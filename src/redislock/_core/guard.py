# SPDX-License-Identifier: MIT
"""A critical section that stops in time: the I/O-free part of ``guard()`` and ``check()``,
for both flavours (how a guard is told of a loss: :mod:`redislock._watch`).

A guard watches one hold (:class:`~redislock._core.lock.Holding`) for two things: the hold
being marked lost (:meth:`LockCore.mark_lost` calls the hold's watchers and sets its
``lost_event``), and its *deadline*: the local lease estimate ``expires_at`` minus a safety
margin, re-read whenever it is reached (a renewal or ``extend()`` pushes it later).

Source: .NET DistributedLock's ``HandleLostToken`` (https://github.com/madelson/DistributedLock),
a token cancelled when the lock's handle is lost; here the estimate's end counts too.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from redislock._core import validate
from redislock._core.lock import Holding, LockCore
from redislock.errors import LockLostError, LockUsageError

__all__ = [
    "MARGIN_FLOOR",
    "MARGIN_FRACTION",
    "GuardState",
    "check",
    "deadline",
    "expired_reason",
    "margin_of",
]

MARGIN_FLOOR = 0.1
"""The default margin's floor, seconds (capped at half the lease)."""
MARGIN_FRACTION = 0.1
"""The default margin as a fraction of the lease."""


def margin_of(lease: float, margin: object) -> float:
    """The margin in seconds: ``margin`` validated as a duration (raises
    :class:`~redislock.errors.LockConfigError` when not a finite number of at least 0.001),
    or when None the default, ``min(lease / 2, max(0.1, lease / 10))``: 3 s on the default
    30 s watchdog lease, 0.1 s on a 1 s ``ttl``."""
    if margin is None:
        return min(lease / 2.0, max(MARGIN_FLOOR, lease * MARGIN_FRACTION))
    return validate.check_duration("margin", margin)


def deadline(h: Holding, margin: float) -> float:
    """The monotonic time the guard of ``h`` fires at, as things stand: the local lease
    estimate minus ``margin`` (seconds)."""
    return h.expires_at - margin


def expired_reason(margin: float) -> str:
    """The reason of a :class:`LockLostError` raised when the deadline passed."""
    return (
        f"the local lease estimate ran out (less than the {margin:g} s safety margin was "
        "left; the lease was not renewed or extended in time)"
    )


def check(core: LockCore, h: Holding, margin: float) -> float:
    """Seconds until the deadline of ``h``, if it is ``core``'s current hold and neither
    lost nor past the deadline.

    Raises:
        NotOwnedError: ``h`` is no longer ``core``'s hold (released).
        LockLostError: ``h`` was lost, or its deadline passed.
    """
    current = core.require_holding()  # NotOwnedError, LockLostError
    if current is not h:
        raise LockLostError(core.name, "a newer hold replaced the one this guard watched")
    left = deadline(h, margin) - time.monotonic()
    if left <= 0:
        raise LockLostError(core.name, expired_reason(margin))
    return left


class GuardState:
    """What both flavours' guards (``aio/_guard.py``, ``sync/_guard.py``) keep and read:
    the lease object guarded, the margin, and once entered the core and the hold watched.
    :attr:`_state` goes ``"new"``, ``"active"`` (asyncio: ``"fired"`` when it cancelled
    the body), ``"done"``."""

    __slots__ = ("_core", "_hold", "_lease", "_margin", "_state")

    _CHECKED: ClassVar[tuple[str, ...]] = ("active",)
    """The states in which :meth:`check` answers."""

    def __init__(self, lease: Any, margin: float | None) -> None:
        """``lease``: a holder (raises :class:`~redislock.errors.LockConfigError` for a bad
        ``margin``, before any I/O)."""
        self._lease = lease
        self._margin = margin_of(lease._core.lease, margin)
        self._state = "new"
        self._core: LockCore | None = None
        self._hold: Holding | None = None

    def remaining(self) -> float | None:
        """Seconds until the deadline as things stand (the local lease estimate minus the
        margin; 0.0 once passed), or None when the guard is not active."""
        if self._state != "active" or self._hold is None:
            return None
        return max(0.0, deadline(self._hold, self._margin) - time.monotonic())

    def check(self) -> float:
        """Raise if the body should stop now; else the seconds left until the deadline.

        Raises:
            LockUsageError: the guard was not entered, or was left.
            NotOwnedError: the hold was released.
            LockLostError: the hold was lost, or the deadline passed.
        """
        if self._core is None or self._hold is None or self._state not in self._CHECKED:
            raise LockUsageError("check() needs an entered guard")
        return check(self._core, self._hold, self._margin)  # the module's check()
