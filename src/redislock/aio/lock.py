# SPDX-License-Identifier: MIT
"""``AsyncLock``: the asyncio flavour of :class:`redislock.Lock`, safe under cancellation."""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Self

import redis.asyncio
import redis.asyncio.cluster

from redislock._base import LockBase
from redislock._core import validate
from redislock.aio import _safe
from redislock.aio._driver import run
from redislock.errors import AcquireTimeoutError

__all__ = ["AsyncLock"]

log = logging.getLogger(__name__)


class AsyncLock(LockBase):
    """A distributed mutex for asyncio; the same API as :class:`Lock`, with ``await``.

    The owner is the lock object (one token per acquisition), never a thread-local, so tasks
    cannot release each other's holds by accident. Cancellation is safe: a cancelled
    ``acquire()`` deletes a key it may have just set, and a cancelled ``release()`` finishes
    in the background, so the object never believes it released while the key remains.
    Algorithm: as :class:`Lock` (Redis docs' distributed-locks page, Kleppmann 2016
    fencing, Redisson-style watchdog); the watchdog is one task per event loop.

    Example::

        lock = AsyncLock(redis.asyncio.Redis(), "order:42")
        async with lock:
            await db.write(order, fence=lock.fencing_token)

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``.
        name, ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
        recheck_interval, prefix: as for :class:`Lock` (seconds). ``on_lost(lock)`` runs in
            the watchdog task; if it returns an awaitable, that is run as a task.
        replicas, replica_timeout: as for :class:`Lock`: how many replicas must
            acknowledge each lock write (an int, default 0: no WAIT), and WAIT's limit in
            seconds (default 1.0).

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    _client_types = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
    _client_hint = "a redis.asyncio.Redis or redis.asyncio.RedisCluster (for sync use Lock)"

    __slots__ = ()

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock, waiting up to ``timeout`` seconds. See :meth:`Lock.acquire`.

        Raises:
            LockConfigError: bad arguments (before any I/O).
            LockUsageError: this object already holds the lock (it is not reentrant).
            UnexpectedReplyError: the key exists without a TTL (not written by redislock).
            ReplicationError: fewer than ``replicas`` replicas acknowledged the grant within
                ``replica_timeout`` seconds; it was undone (never reported as busy).
            redis.exceptions.RedisError: Redis failed (connection, NOPERM, READONLY, OOM).
            asyncio.CancelledError: cancelled; a key this call may have set is deleted.
        """
        core = self._core
        wait = core.check_acquire_args(blocking, timeout)
        return await _safe.acquire(self, core, core.acquire_flow(wait, blocking))

    async def release(self) -> None:
        """Release the lock if this object still holds it. See :meth:`Lock.release`.

        If cancelled, the release still completes in the background and updates the object.

        Raises:
            NotOwnedError: this object does not hold the lock.
            LockLostError: the lease was lost before release; no other holder is touched.
            redis.exceptions.RedisError: Redis failed; the object still holds the lock.
        """
        core = self._core
        await _safe.release(self, core, core.require_holding(allow_lost=True))

    async def extend(self, seconds: float, *, replace: bool = False) -> float:
        """Lengthen the lease of the current hold. See :meth:`Lock.extend`.

        Returns:
            The new TTL in seconds.

        Raises:
            LockConfigError: bad ``seconds`` (before any I/O).
            NotOwnedError: this object does not hold the lock.
            LockLostError: the lease was lost; an expired lock is never re-created.
            ReplicationError: fewer than ``replicas`` replicas acknowledged the new TTL; the
                master has it, the local lease estimate was not lengthened.
            redis.exceptions.RedisError: Redis failed.
        """
        amount = validate.check_duration("seconds", seconds)
        h = self._core.require_holding()
        mode = "set" if replace else "add"
        return await run(self._client, self._core.extend_flow(h, amount, mode))

    async def locked(self) -> bool:
        """Whether anybody holds the lock now (one round trip).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.locked_flow())

    async def owned(self) -> bool:
        """Whether this object's token holds the lock in Redis now.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.owned_flow())

    async def remaining(self) -> float | None:
        """Seconds left on the lease if this object holds the lock, else None.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.remaining_flow())

    async def adopt(self, token: str) -> None:
        """Take over a hold by its owner token. See :meth:`Lock.adopt`.

        Raises:
            LockConfigError: ``token`` is not 32-256 lowercase hex characters.
            LockUsageError: this object already holds the lock.
            NotOwnedError: no current hold has that token.
            redis.exceptions.RedisError: Redis failed.
        """
        await _safe.adopt(self, self._core, token)

    async def __aenter__(self) -> Self:
        start = time.monotonic()
        if not await self.acquire():
            raise AcquireTimeoutError(self.name, time.monotonic() - start)
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
            exc.add_note(f"redislock: releasing lock {self.name!r} also failed: {err!r}")
