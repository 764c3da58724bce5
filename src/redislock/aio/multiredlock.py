# SPDX-License-Identifier: MIT
"""``AsyncMultiRedlock``: the asyncio flavour of :class:`redislock.MultiRedlock`."""

from __future__ import annotations

import redis.asyncio

from redislock._quorumbase import MultiQuorumMixin
from redislock.aio.redlock import AsyncRedlock

__all__ = ["AsyncMultiRedlock"]


class AsyncMultiRedlock(MultiQuorumMixin[redis.asyncio.Redis], AsyncRedlock):
    """Several lock names held together, all or nothing, over N independent masters, for
    asyncio: the same API as :class:`AsyncRedlock` and the algorithm of
    :class:`MultiRedlock` (Redlock across masters; Coffman et al. 1971 on each). A
    cancelled acquire gives the set back on every master.

    Args:
        masters: 3 or more ``redis.asyncio.Redis`` clients, one per independent master.
        names, ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
        node_timeout, drift_factor, retry_delay, fencing, prefix: as for
            :class:`MultiRedlock` (seconds).

    Raises:
        LockConfigError: bad arguments (before any I/O); on the first acquire, two masters
            that are one server (same run_id).
    """

    __slots__ = ()
