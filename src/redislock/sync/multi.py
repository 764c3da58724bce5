# SPDX-License-Identifier: MIT
"""``MultiLock``: several names taken all or nothing, over a sync client."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

import redis
import redis.cluster

from redislock._core import validate
from redislock._multibase import MultiBase
from redislock.errors import AcquireTimeoutError
from redislock.sync import _steps
from redislock.sync._driver import run

__all__ = ["MultiLock"]


class MultiLock(MultiBase):
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

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    _client_types = (redis.Redis, redis.cluster.RedisCluster)
    _cluster_types = (redis.cluster.RedisCluster,)
    _client_hint = "a redis.Redis or redis.cluster.RedisCluster (for asyncio use AsyncMultiLock)"

    __slots__ = ()

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take every name, waiting up to ``timeout`` seconds.

        One script per chunk of up to 1000 names (on a cluster: per hash slot), in order.
        A name held by someone else makes the try give back the chunks it took; the waiter
        sleeps in BLPOP until that name is released, at most ``recheck_interval`` seconds,
        and tries again. Nothing is held while waiting.

        Args:
            blocking: False for a single try.
            timeout: wait limit in seconds; None uses the lock's ``timeout`` (default: no
                limit); 0 means one try.

        Returns:
            True if every name was taken, False if the wait ended without them (then none
            is held).

        Raises:
            LockConfigError: bad arguments (before any I/O).
            LockUsageError: this object already holds the names (it is not reentrant).
            UnexpectedReplyError: a name's key exists without a TTL (not written by redislock).
            redis.exceptions.RedisError: Redis failed; names this call took are given back
                as far as Redis allows (else their lease runs out).
        """
        wait = self._core.check_acquire_args(blocking, timeout)
        return _steps.acquire(self, self._core, self._core.acquire_flow(wait, blocking))

    def release(self) -> None:
        """Release every name this object still holds and wake each name's waiters.

        Raises:
            NotOwnedError: this object holds nothing (never acquired, released).
            LockLostError: the set was lost before release (some name expired or was taken);
                the names still ours are released, other holders' keys are never touched.
            redis.exceptions.RedisError: Redis failed; the object still holds the names not
                yet released, and release may be retried.
        """
        _steps.release(self, self._core, self._core.require_holding(allow_lost=True))

    def extend(self, seconds: float, *, replace: bool = False) -> float:
        """Lengthen the lease of every name (owner-checked).

        Args:
            seconds: seconds to add to each remaining TTL, or with ``replace=True`` the new
                TTL in seconds.
            replace: set the TTLs to ``seconds`` instead of adding.

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
        return run(self._client, self._core.extend_flow(h, amount, "set" if replace else "add"))

    def locked(self) -> bool:
        """Whether anybody holds any of the names now.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return run(self._client, self._core.locked_flow())

    def owned(self) -> bool:
        """Whether this object's token holds every name in Redis now.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return run(self._client, self._core.owned_flow())

    def remaining(self) -> float | None:
        """The least lease left over the names, in seconds, if this object holds them all;
        else None.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return run(self._client, self._core.remaining_flow())

    def __enter__(self) -> Self:
        start = time.monotonic()
        if not self.acquire():
            raise AcquireTimeoutError(self._core.name, time.monotonic() - start)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except Exception as err:  # never mask the body's own exception
            exc.add_note(f"redislock: releasing lock {self._core.name!r} also failed: {err!r}")
