# SPDX-License-Identifier: MIT
"""``AsyncMultiRedlock``: the asyncio flavour of :class:`redislock.MultiRedlock`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis.asyncio

from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.lock import DEFAULT_RECHECK, DEFAULT_WATCHDOG_LEASE
from redislock._core.quorum import DEFAULT_DRIFT_FACTOR, DEFAULT_RETRY_DELAY, check_masters
from redislock._core.quorum_multi import MultiRedlockCore
from redislock.aio.redlock import AsyncMasters, AsyncRedlock

__all__ = ["AsyncMultiRedlock"]


class AsyncMultiRedlock(AsyncRedlock):
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
    _core: MultiRedlockCore

    def __init__(
        self,
        masters: Sequence[redis.asyncio.Redis],
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
            masters, (redis.asyncio.Redis,), "a redis.asyncio.Redis (for sync use MultiRedlock)"
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
        self._client = AsyncMasters(masters)
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
