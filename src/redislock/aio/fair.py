# SPDX-License-Identifier: MIT
"""``AsyncFairLock``: a mutex granted in arrival (FIFO) order, with direct hand-off."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

from redislock._core.fair import DEFAULT_QUEUE_MAX, DEFAULT_WAITER_LEASE
from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.lock import DEFAULT_RECHECK, DEFAULT_WATCHDOG_LEASE
from redislock._fairbase import fair_init
from redislock.aio.lock import AsyncLock

__all__ = ["AsyncFairLock"]


@final
class AsyncFairLock(AsyncLock):
    """A mutex that grants the lock in strict arrival order: the API of :class:`AsyncLock`.

    Each waiter joins a queue in Redis and keeps a short *waiter lease* (``waiter_lease``
    seconds, renewed by its own retries every third of it); a release hands the lock
    directly to the first live waiter and wakes exactly that waiter, which then holds the
    lock without another round trip. A waiter that died is dropped once its waiter lease
    runs out (about one second by default), a waiter that times out leaves the queue, and
    the queue holds at most ``queue_max`` waiters. Algorithm: Redisson's
    ``RedissonFairLock`` (a queue of waiters with timeouts), with renewed waiter leases
    and a hand-off in the release script (``scripts/fair.lua``).

    A non-blocking try (``blocking=False`` or ``timeout=0``) never jumps the queue: it
    fails while anybody is queued. A waiter that dies less than one waiter lease before its
    turn may still be granted the lock, which then stays held until its lease ends, as if
    a holder had died.

    Args:
        client, name, ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
        recheck_interval, prefix: as for :class:`AsyncLock` (seconds).
        waiter_lease: seconds a queued waiter stays in the queue without renewing
            (default 1.0, at least 0.05).
        queue_max: most waiters the queue holds (default 10 000); one more raises
            :class:`~redislock.QueueFullError`.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    __slots__ = ()

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        ttl: float | None = None,
        on_lost: Callable[[Any], object] | None = None,
        timeout: float | None = None,
        watchdog_lease: float = DEFAULT_WATCHDOG_LEASE,
        renew_interval: float | None = None,
        max_lease: float | None = None,
        recheck_interval: float = DEFAULT_RECHECK,
        prefix: str = DEFAULT_PREFIX,
        waiter_lease: float = DEFAULT_WAITER_LEASE,
        queue_max: int = DEFAULT_QUEUE_MAX,
    ) -> None:
        fair_init(
            self,
            client,
            name,
            ttl=ttl,
            on_lost=on_lost,
            timeout=timeout,
            watchdog_lease=watchdog_lease,
            renew_interval=renew_interval,
            max_lease=max_lease,
            recheck_interval=recheck_interval,
            prefix=prefix,
            waiter_lease=waiter_lease,
            queue_max=queue_max,
        )
