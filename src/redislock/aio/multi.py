# SPDX-License-Identifier: MIT
"""``AsyncMultiLock``: the asyncio flavour of :class:`redislock.MultiLock`, safe under
cancellation."""

from __future__ import annotations

import redis.asyncio
import redis.asyncio.cluster

from redislock._multibase import MultiMixin
from redislock.aio.lock import AsyncLock

__all__ = ["AsyncMultiLock"]


class AsyncMultiLock(MultiMixin, AsyncLock):
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

    The methods are :class:`AsyncLock`'s, over the whole set: ``acquire`` takes every name or
    none, ``release`` releases every name still held, ``extend`` and ``remaining`` give the
    least TTL, ``owned`` means every name is ours, ``locked`` means any name is held by
    anybody. ``detach`` / ``adopt`` are not supported.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    _client_types = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
    _cluster_types = (redis.asyncio.cluster.RedisCluster,)
    _client_hint = "a redis.asyncio.Redis or redis.asyncio.RedisCluster (for sync use MultiLock)"

    __slots__ = ()
