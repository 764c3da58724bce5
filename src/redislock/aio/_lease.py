# SPDX-License-Identifier: MIT
"""``AsyncLease``: the I/O every holder of a lease has (release, extend, owned, remaining,
the end of ``async with``), shared by :class:`AsyncLock`, the reentrant kinds and
:class:`AsyncPermit`."""

from __future__ import annotations

from types import TracebackType
from typing import ClassVar

from redislock._core import validate
from redislock._handle import Holder
from redislock.aio import _steps
from redislock.aio._driver import run

__all__ = ["AsyncLease"]


class AsyncLease(Holder):
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

        Raises:
            LockConfigError: bad ``seconds`` (before any I/O).
            NotOwnedError: nothing is held.
            LockLostError: the lease was lost; an expired hold is never re-created.
            ReplicationError: fewer than ``replicas`` replicas acknowledged the new TTL; the
                master has it, the local lease estimate was not lengthened.
            redis.exceptions.RedisError: Redis failed.
        """
        amount = validate.check_duration("seconds", seconds)
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

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            await self.release()
            return
        try:
            await self.release()
        except Exception as err:  # never mask the body's own exception
            exc.add_note(f"redislock: releasing {self._noun} {self.name!r} also failed: {err!r}")
