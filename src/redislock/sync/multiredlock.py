# SPDX-License-Identifier: MIT
"""``MultiRedlock``: several names all or nothing over N independent masters, sync client."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.lock import DEFAULT_RECHECK, DEFAULT_WATCHDOG_LEASE
from redislock._core.quorum import DEFAULT_DRIFT_FACTOR, DEFAULT_RETRY_DELAY, check_masters
from redislock._core.quorum_multi import MultiRedlockCore
from redislock.sync.redlock import Masters, Redlock

__all__ = ["MultiRedlock"]


class MultiRedlock(Redlock):
    """Several lock names held together, all or nothing, over N independent masters.

    :class:`MultiLock`'s guarantee (no deadlock: names taken in one global order in chunks,
    everything given back before waiting) on every master, with :class:`Redlock`'s rules
    across masters: held only if a majority of masters holds the whole set within the
    validity time; otherwise the set is given back on every master and tried again after a
    random delay. Each name is a plain lock key on every master, so a :class:`Redlock` on
    one of the names over the same masters excludes it. Sources: the Redis docs'
    distributed-locks page (Redlock); Coffman et al. 1971 (deadlock prevention).

    Example::

        masters = [redis.Redis(port=p, socket_timeout=0.5) for p in (7001, 7002, 7003)]
        with MultiRedlock(masters, ["account:7", "account:9"], ttl=10) as accounts:
            transfer(7, 9, fences=accounts.fencing_tokens)

    Args:
        masters: 3 or more ``redis.Redis`` clients, one per independent master.
        names: iterable of lock names (as for :class:`MultiLock`); duplicates dropped.
        ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease, node_timeout,
        drift_factor, retry_delay, fencing, prefix: as for :class:`Redlock` (seconds).

    Raises:
        LockConfigError: bad arguments (before any I/O); on the first acquire, two masters
            that are one server (same run_id).
    """

    __slots__ = ()
    _core: MultiRedlockCore

    def __init__(
        self,
        masters: Sequence[redis.Redis],
        names: Iterable[str],
        *,
        ttl: float | None = None,
        on_lost: Callable[[Any], object] | None = None,
        timeout: float | None = None,
        watchdog_lease: float = DEFAULT_WATCHDOG_LEASE,
        renew_interval: float | None = None,
        max_lease: float | None = None,
        node_timeout: float | None = None,
        drift_factor: float = DEFAULT_DRIFT_FACTOR,
        retry_delay: float = DEFAULT_RETRY_DELAY,
        fencing: bool = True,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        labels = check_masters(
            masters, (redis.Redis,), "a redis.Redis (for asyncio use AsyncMultiRedlock)"
        )
        self._core = MultiRedlockCore.build_multi(
            labels,
            names,
            node_timeout=node_timeout,
            drift_factor=drift_factor,
            retry_delay=retry_delay,
            fencing=fencing,
            ttl=ttl,
            watchdog_lease=watchdog_lease,
            renew_interval=renew_interval,
            max_lease=max_lease,
            timeout=timeout,
            recheck_interval=DEFAULT_RECHECK,
            prefix=prefix,
            on_lost=on_lost,
        )
        self._client = Masters(masters)
        self._core.run_ids = self._client.known_run_ids()

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
