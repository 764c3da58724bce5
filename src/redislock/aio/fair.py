# SPDX-License-Identifier: MIT
"""``AsyncFairLock``: a mutex granted in arrival (FIFO) order, with direct hand-off."""

from __future__ import annotations

from typing import final

from redislock._fairbase import FairMixin
from redislock.aio.lock import AsyncLock

__all__ = ["AsyncFairLock"]


@final
class AsyncFairLock(FairMixin, AsyncLock):
    """The asyncio flavour of :class:`~redislock.FairLock`: grants in strict arrival
    order with direct hand-off; the API of :class:`AsyncLock` (cancel-safe: a cancelled
    waiter leaves the queue, and a lock granted to it meanwhile is released to the next).

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``.
        name, ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
        recheck_interval, prefix, waiter_lease, queue_max: as for
            :class:`~redislock.FairLock` (seconds).
        replicas, replica_timeout: as for :class:`~redislock.Lock`: how many replicas must
            acknowledge each lock write (an int, default 0: no WAIT), and WAIT's limit in
            seconds (default 1.0).

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    __slots__ = ()
