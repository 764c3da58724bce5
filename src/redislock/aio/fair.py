# SPDX-License-Identifier: MIT
"""``AsyncFairLock``: a mutex granted in arrival (FIFO) order, with direct hand-off."""

from __future__ import annotations

from typing import Any, Self, Unpack, final

from redislock._core.options import FairKwargs, FairOptions
from redislock._handle import Holder
from redislock.aio import _flavour
from redislock.aio.lock import AsyncLock

__all__ = ["AsyncFairLock"]


@final
class AsyncFairLock(AsyncLock):
    """A mutex that grants the lock in strict arrival order: the API of :class:`AsyncLock`.

    Each waiter joins a queue in Redis and keeps a short *waiter lease* (``waiter_lease``
    seconds, renewed every third of it, together with the process's other queued waiters
    on the client: one ``waiter_keep.lua`` call for them all); a release hands the lock
    directly to the first live waiter and wakes exactly that waiter, which then holds the
    lock without another round trip. A waiter that died is dropped once its waiter lease
    runs out (about one second by default), a waiter that times out leaves the queue, and
    the queue holds at most ``queue_max`` waiters. Algorithm: Redisson's
    ``RedissonFairLock`` (a queue of waiters with timeouts), with renewed waiter leases
    and a hand-off in the release script (``scripts/fair_release.lua``).

    A non-blocking try (``blocking=False`` or ``timeout=0``) never jumps the queue: it
    fails while anybody is queued. A waiter that dies less than one waiter lease before its
    turn may still be granted the lock, which then stays held until its lease ends, as if
    a holder had died.

    Cancellation (asyncio): a cancelled waiter leaves the queue, and a lock granted to it
    meanwhile is released to the next.

    Args:
        lock options: client, name, ttl, on_lost, timeout, watchdog_lease, renew_interval,
            max_lease, recheck_interval, prefix: as for :class:`AsyncLock` (seconds).
        replicas, replica_timeout: as for :class:`AsyncLock`: how many replicas must
            acknowledge each lock write (an int, default 0: no WAIT), and WAIT's limit in
            seconds (default 1.0).
        waiter_lease: seconds a queued waiter stays in the queue without renewing
            (default 1.0, at least 0.05).
        queue_max: most waiters the queue holds (default 10 000); one more raises
            :class:`~redislock.QueueFullError`.
        lock_delay: as for :class:`AsyncLock`: seconds (default 0: off) nobody can take
            the name after a hold ended without a release; a waiter granted the lock by a
            release gets its own ``lock_delay`` with the grant.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    __slots__ = ()
    _options = FairOptions

    def __init__(
        self, client: _flavour.Client, name: str, **options: Unpack[FairKwargs[Self]]
    ) -> None:
        Holder.__init__(self, client, name, **options)

    def _queue(self, options: Any) -> dict[str, Any]:
        return {"waiter_lease": options.waiter_lease, "queue_max": options.queue_max}
