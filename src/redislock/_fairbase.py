# SPDX-License-Identifier: MIT
"""What :class:`~redislock.FairLock` and :class:`~redislock.AsyncFairLock` share: their
construction (the fair core over a validated lock core)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redislock._base import DEFAULT_REPLICA_TIMEOUT, LockBase
from redislock._core.fair import DEFAULT_QUEUE_MAX, DEFAULT_WAITER_LEASE, FairCore, check_fair_args
from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.lock import DEFAULT_RECHECK, DEFAULT_WATCHDOG_LEASE

__all__ = ["FairMixin"]


class FairMixin(LockBase):
    """Builds a lock shell (``Lock`` or ``AsyncLock``, next in the MRO) over a
    :class:`FairCore`; the shell's methods drive the fair flows unchanged."""

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
        replicas: int = 0,
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
    ) -> None:
        super().__init__(
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
            replicas=replicas,
            replica_timeout=replica_timeout,
        )
        lease, limit = check_fair_args(waiter_lease, queue_max)
        self._core = FairCore.from_base(self._core, lease, limit)
