# SPDX-License-Identifier: MIT
"""``AsyncMultiRedlock``: several names all or nothing over N independent masters."""

from __future__ import annotations

from typing import final

from redislock._core.quorum_multi import MultiRedlockCore
from redislock.aio.redlock import AsyncRedlock

__all__ = ["AsyncMultiRedlock"]


@final
class AsyncMultiRedlock(AsyncRedlock):
    """Several lock names held together, all or nothing, over N independent masters.

    :class:`AsyncMultiLock`'s guarantee (no deadlock: names taken in one global order in
    chunks, everything given back before waiting) on every master, with
    :class:`AsyncRedlock`'s rules across masters: held only if a majority of masters holds
    the whole set within the validity time; otherwise the set is given back on every master
    and tried again after a random delay. Each name is a plain lock key on every master, so
    an :class:`AsyncRedlock` on one of the names over the same masters excludes it.
    Sources: the Redis docs' distributed-locks page (Redlock); Coffman et al. 1971
    (deadlock prevention).

    Cancellation (asyncio): a cancelled acquire gives the set back on every master.

    Example::

        masters = [redis.asyncio.Redis(port=p, socket_timeout=0.5) for p in (7001, 7002, 7003)]
        async with AsyncMultiRedlock(masters, ["account:7", "account:9"], ttl=10) as accounts:
            await transfer(7, 9, fences=accounts.fencing_tokens)

    Args:
        masters: 3 or more ``redis.asyncio.Redis`` (or ``valkey.asyncio.Valkey``) clients,
            one per independent master.
        names: iterable of lock names (as for :class:`AsyncMultiLock`); duplicates dropped.
        lock options: ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
            node_timeout, drift_factor, retry_delay, fencing, prefix: as for :class:`AsyncRedlock`
            (seconds).

    Raises:
        LockConfigError: bad arguments (before any I/O); on the first acquire, two masters
            that are one server (same run_id).
    """

    __slots__ = ()
    _core: MultiRedlockCore
    _quorum_core = MultiRedlockCore

    @property
    def names(self) -> tuple[str, ...]:
        """The distinct names, sorted."""
        return self._core.m.names

    @property
    def key(self) -> str:
        """The lock key of the first name (each name has its own: ``<prefix>{<name>}``)."""
        return self._core.m.chunks[0].locks[0]

    @property
    def fencing_token(self) -> int | None:
        """None: a set has one fencing token per name (see :attr:`fencing_tokens`)."""
        return None

    @property
    def fencing_tokens(self) -> dict[str, int] | None:
        """The quorum fencing token of every name (a new dict) for the current hold, or
        None (not held, or ``fencing=False``)."""
        return self._core.fencing_tokens()
