# SPDX-License-Identifier: MIT
"""``AsyncLease``: the I/O every holder of a lease has (release, extend, owned, remaining,
the end of ``async with``), shared by :class:`AsyncLock`, the reentrant kinds and
:class:`AsyncPermit`."""

from __future__ import annotations

import threading
from typing import ClassVar

from redislock import _watch
from redislock._core import guard, validate
from redislock._handle import Holder
from redislock.aio import _steps
from redislock.aio._block import AsyncBlock, noting
from redislock.aio._driver import run
from redislock.aio._guard import AsyncGuard

__all__ = ["AsyncLease"]


class AsyncLease(Holder, AsyncBlock):
    """A holder's own I/O. The hold is the calling owner's (``_mine()``): this object's,
    or for a reentrant lock the calling task's."""

    __slots__ = ()
    _noun: ClassVar[str] = "lock"
    """What a failed release names in the note it adds to the body's exception."""

    async def release(self) -> None:
        """Release the hold if it is still this object's (compare-and-delete, one round trip).

        Wakes one waiter. Stops the watchdog for this hold.
        (asyncio) If cancelled, the release still completes in the background and updates
            the object.

        Raises:
            NotOwnedError: nothing is held (never acquired, or released).
            LockLostError: the lease was lost before release (expired, taken, unrenewable);
                the key of another holder is never touched.
            redis.exceptions.RedisError: Redis failed; the hold is kept and release may be
                retried.
        """
        core = self._core
        await _steps.release(self, core, core.require_holding(allow_lost=True))

    async def extend(self, seconds: float, *, replace: bool = False) -> float:
        """Lengthen the lease of the current hold (owner-checked, one round trip).

        Args:
            seconds: seconds to add to the remaining TTL, or with ``replace=True`` the new
                TTL in seconds.
            replace: set the TTL to ``seconds`` instead of adding.

        Returns:
            The new TTL in seconds.

        Warns:
            LongLeaseWarning: ``seconds`` is over an hour (milliseconds meant?).

        Raises:
            LockConfigError: bad ``seconds`` (before any I/O).
            NotOwnedError: nothing is held.
            LockLostError: the lease was lost; an expired hold is never re-created.
            ReplicationError: fewer than ``replicas`` replicas acknowledged the new TTL; the
                master has it, the local lease estimate was not lengthened.
            redis.exceptions.RedisError: Redis failed.
        """
        amount = validate.check_duration("seconds", seconds)
        validate.warn_long_lease("seconds", amount)
        core = self._mine()
        h = core.require_holding()
        mode = "set" if replace else "add"
        return await run(self._client, core.extend_flow(h, amount, mode))

    async def owned(self) -> bool:
        """Whether the hold still exists in Redis now (one round trip if held).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._mine().owned_flow())

    async def remaining(self) -> float | None:
        """Seconds left on the lease of the current hold, or None when nothing is held.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._mine().remaining_flow())

    def guard(self, margin: float | None = None) -> AsyncGuard:
        """A critical section that stops in time: ``async with lock.guard(): ...`` inside
        ``async with lock:``.

        (asyncio) The body's task is cancelled when the hold is marked lost (the
            watchdog's report, a failed ``extend()``), or ``margin`` seconds before its
            local lease estimate runs out (renewals and ``extend()`` move that later); the
            body then ends with :class:`~redislock.errors.LockLostError` instead of a
            bare ``CancelledError``. A cancellation from outside stays a cancellation.
        A thread cannot be interrupted: the sync guard offers ``check()`` (raises once the
        hold is lost or the deadline passed) and ``lost_event`` to the body, and raises
        ``LockLostError`` when a body that overran ends. Either raises ``LockLostError``
        on the way out if the section did not end in time. Modelled on .NET
        DistributedLock's ``HandleLostToken`` (https://github.com/madelson/DistributedLock).

        Args:
            margin: seconds before the end of the local lease estimate at which the body
                must stop; None: ``min(lease / 2, max(0.1, lease / 10))`` (3 s on the
                default 30 s watchdog lease, 0.1 s on a 1 s ``ttl``).

        Raises:
            LockConfigError: bad ``margin`` (not a finite number of at least 0.001 seconds),
                here, before any I/O.
            NotOwnedError: (on entering) nothing is held by the caller.
            LockLostError: (on entering) the hold was lost, or less than ``margin`` seconds
                are left on its local lease estimate; (on leaving) the guard fired.
            LockUsageError: (on entering) the guard was entered before.
            LockUsageError: (asyncio) entered outside a task.
        """
        return AsyncGuard(self, margin)

    @property
    def lost_event(self) -> threading.Event:
        """A ``threading.Event`` set when the current hold is marked lost: by the watchdog
        (key gone or taken, or not renewable before the local lease estimate ran out), a
        failed ``extend()`` or release. One event per hold: a new acquisition has a new,
        clear event, and an event kept from an earlier hold stays as it was. A fixed
        ``ttl`` that merely runs out does not set it (nothing watches it then): call
        :meth:`check` for that. I/O-free; safe to wait on from another thread.

        Raises:
            NotOwnedError: nothing is held (never acquired, or released).
        """
        return _watch.lost_event(self._mine().require_holding(allow_lost=True))

    def check(self, margin: float | None = None) -> float:
        """Raise if a critical section should stop now; else the seconds left before the
        local lease estimate, less ``margin``, runs out. I/O-free: for loops that stop
        themselves (``while work: lock.check(); step()``).

        Args:
            margin: seconds of safety before the end of the local lease estimate; None: as
                :meth:`guard`'s default.

        Raises:
            LockConfigError: bad ``margin``.
            NotOwnedError: nothing is held.
            LockLostError: the hold was lost, or less than ``margin`` seconds are left on
                its local lease estimate.
        """
        core = self._mine()
        amount = guard.margin_of(core.lease, margin)
        return guard.check(core, core.require_holding(), amount)

    async def _end(self, exc: BaseException | None) -> None:
        if exc is None:
            await self.release()
            return
        with noting(exc, f"releasing {self._noun} {self.name!r}"):
            await self.release()
