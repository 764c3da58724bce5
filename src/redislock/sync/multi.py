# SPDX-License-Identifier: MIT
"""``MultiLock``: several names taken all or nothing, over a sync client."""

from __future__ import annotations

import redis
import redis.cluster

from redislock._multibase import MultiMixin
from redislock.sync.lock import Lock

__all__ = ["MultiLock"]


class MultiLock(MultiMixin, Lock):
    """Several lock names held together, all or nothing, without deadlock.

    Pick it when one job needs several resources at once (two accounts of a transfer, a
    batch of orders). Each name is a plain :class:`Lock` in Redis, so a ``Lock`` and a
    ``MultiLock`` on a shared name exclude each other and share its fencing counter.
    Algorithm: names taken in one global order (sorted; by hash slot first on a Redis
    Cluster), one atomic script per chunk of up to 1000 names; a try that meets a busy name
    gives back what it took and waits for that name's release (Coffman et al. 1971: no
    hold-and-wait, no circular wait). For asyncio use :class:`AsyncMultiLock`.

    Example::

        accounts = MultiLock(redis.Redis(), ["account:7", "account:9"])
        with accounts:                  # waits; raises AcquireTimeoutError on timeout
            fences = accounts.fencing_tokens   # {"account:7": 41, "account:9": 12}
            transfer(7, 9, fences=fences)

    Args:
        client: a ``redis.Redis`` or ``redis.cluster.RedisCluster`` (names are grouped by
            hash slot, one script per slot); ``decode_responses`` either way.
        names: iterable of lock names (1 to 1,000,000 items, each as for :class:`Lock`);
            duplicates are dropped. A single ``str`` is rejected.
        ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
        recheck_interval, prefix: as for :class:`Lock` (seconds). The lease and the
            watchdog cover all names at once; ``on_lost(multilock)`` is called when any
            name is lost, and then the whole set counts as lost.

    The methods are :class:`Lock`'s, over the whole set: ``acquire`` takes every name or
    none, ``release`` releases every name still held, ``extend`` and ``remaining`` give the
    least TTL, ``owned`` means every name is ours, ``locked`` means any name is held by
    anybody. ``detach`` / ``adopt`` are not supported.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    _client_types = (redis.Redis, redis.cluster.RedisCluster)
    _cluster_types = (redis.cluster.RedisCluster,)
    _client_hint = "a redis.Redis or redis.cluster.RedisCluster (for asyncio use AsyncMultiLock)"

    __slots__ = ()
