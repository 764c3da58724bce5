# SPDX-License-Identifier: MIT
"""``AsyncMultiLock``: the asyncio flavour of :class:`redislock.MultiLock`, safe under
cancellation."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

import redis.asyncio
import redis.asyncio.cluster

from redislock._core import validate
from redislock._multibase import MultiBase
from redislock.aio import _safe
from redislock.aio._driver import run
from redislock.errors import AcquireTimeoutError

__all__ = ["AsyncMultiLock"]


class AsyncMultiLock(MultiBase):
    """Several names held together, all or nothing, for asyncio; the same API as
    :class:`MultiLock`, with ``await``.

    The owner is the object (one token for all names). Cancellation is safe: a cancelled
    ``acquire()`` gives back every name it may have taken, and a cancelled ``release()``
    finishes in the background. Algorithm: as :class:`MultiLock` (one global order, one
    script per chunk, give back before waiting: Coffman et al. 1971); the watchdog is one
    task per event loop.

    Example::

        accounts = AsyncMultiLock(redis.asyncio.Redis(), ["account:7", "account:9"])
        async with accounts:
            await transfer(7, 9, fences=accounts.fencing_tokens)

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``.
        names, ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
        recheck_interval, prefix: as for :class:`MultiLock` (seconds). ``on_lost(lock)``
            runs in the watchdog task; if it returns an awaitable, that is run as a task.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    _client_types = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
    _cluster_types = (redis.asyncio.cluster.RedisCluster,)
    _client_hint = "a redis.asyncio.Redis or redis.asyncio.RedisCluster (for sync use MultiLock)"

    __slots__ = ()

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take every name, waiting up to ``timeout`` seconds. See :meth:`MultiLock.acquire`.

        Raises:
            LockConfigError: bad arguments (before any I/O).
            LockUsageError: this object already holds the names (it is not reentrant).
            UnexpectedReplyError: a name's key exists without a TTL (not written by redislock).
            redis.exceptions.RedisError: Redis failed; names this call took are given back.
            asyncio.CancelledError: cancelled; every name this call may have taken is given
                back.
        """
        core = self._core
        wait = core.check_acquire_args(blocking, timeout)
        return await _safe.acquire(self, core, core.acquire_flow(wait, blocking))

    async def release(self) -> None:
        """Release every name still held and wake their waiters. See :meth:`MultiLock.release`.

        If cancelled, the release still completes in the background and updates the object.

        Raises:
            NotOwnedError: this object holds nothing.
            LockLostError: the set was lost before release; no other holder is touched.
            redis.exceptions.RedisError: Redis failed; the object still holds the names not
                yet released.
        """
        core = self._core
        await _safe.release(self, core, core.require_holding(allow_lost=True))

    async def extend(self, seconds: float, *, replace: bool = False) -> float:
        """Lengthen the lease of every name. See :meth:`MultiLock.extend`.

        Returns:
            The least new TTL, in seconds.

        Raises:
            LockConfigError: bad ``seconds`` (before any I/O).
            NotOwnedError: this object does not hold the names.
            LockLostError: some name was lost (the whole set is); nothing is re-created.
            redis.exceptions.RedisError: Redis failed.
        """
        amount = validate.check_duration("seconds", seconds)
        h = self._core.require_holding()
        mode = "set" if replace else "add"
        return await run(self._client, self._core.extend_flow(h, amount, mode))

    async def locked(self) -> bool:
        """Whether anybody holds any of the names now.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.locked_flow())

    async def owned(self) -> bool:
        """Whether this object's token holds every name in Redis now.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.owned_flow())

    async def remaining(self) -> float | None:
        """The least lease left over the names, in seconds, if this object holds them all;
        else None.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.remaining_flow())

    async def __aenter__(self) -> Self:
        start = time.monotonic()
        if not await self.acquire():
            raise AcquireTimeoutError(self._core.name, time.monotonic() - start)
        return self

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
            exc.add_note(f"redislock: releasing lock {self._core.name!r} also failed: {err!r}")
