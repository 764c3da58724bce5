# SPDX-License-Identifier: MIT
"""``AsyncMultiLock``: several names taken all or nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Self, Unpack

from redislock._core.lock import LockCore, token_tag
from redislock._core.multi import MultiCore, check_names
from redislock._core.options import MultiKwargs, MultiOptions
from redislock._handle import Holder, is_cluster
from redislock.aio import _flavour
from redislock.aio.lock import AsyncLock
from redislock.errors import LockUsageError

__all__ = ["AsyncMultiLock"]


class AsyncMultiLock(AsyncLock):
    """Several lock names held together, all or nothing, without deadlock.

    Pick it when one job needs several resources at once (two accounts of a transfer, a
    batch of orders). Each name is a plain :class:`AsyncLock` in Redis, so an
    ``AsyncLock`` and an ``AsyncMultiLock`` on a shared name exclude each other and share
    its fencing counter. Algorithm: names taken in one global order (sorted; by hash slot
    first on a Redis Cluster), one atomic script per chunk of up to 1000 names; a try that
    meets a busy name gives back what it took and waits for that name's release (Coffman
    et al. 1971: no hold-and-wait, no circular wait). The owner is the object (one token
    for all names).

    Cancellation (asyncio): a cancelled ``acquire()`` gives back every name it may have
    taken, and a cancelled ``release()`` finishes in the background.

    Example::

        accounts = AsyncMultiLock(redis.asyncio.Redis(), ["account:7", "account:9"])
        async with accounts:  # waits; raises AcquireTimeoutError on timeout
            fences = accounts.fencing_tokens  # {"account:7": 41, "account:9": 12}
            await transfer(7, 9, fences=fences)

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``, or valkey-py's
            ``valkey.asyncio.Valkey`` or ``valkey.asyncio.ValkeyCluster`` (names are
            grouped by hash slot, one script per slot); ``decode_responses`` either way.
        names: iterable of lock names (1 to 1,000,000 items, each as for
            :class:`AsyncLock`); duplicates are dropped. A single ``str`` is rejected.
        lock options: ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
            recheck_interval, prefix: as for :class:`AsyncLock` (seconds). The lease and the
            watchdog cover all names at once; ``on_lost(multilock)`` is called when any name is
            lost, and then the whole set counts as lost.

    The methods are :class:`AsyncLock`'s, over the whole set: ``acquire`` takes every name
    or none, ``release`` releases every name still held, ``extend`` and ``remaining`` give
    the least TTL, ``owned`` means every name is ours, ``locked`` means any name is held by
    anybody. ``detach`` / ``adopt`` are not supported.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    __slots__ = ()
    _core: MultiCore
    _options = MultiOptions

    def __init__(
        self, client: _flavour.Client, names: Iterable[str], **options: Unpack[MultiKwargs[Self]]
    ) -> None:
        Holder.__init__(self, client, names, **options)

    def _make_core(self, client: Any, name: Any, options: Any, *args: Any) -> LockCore:
        names = check_names(name)
        base = LockCore.from_options(names[0], options)
        return MultiCore.from_base(base, names, options.prefix, is_cluster(client))

    @property
    def names(self) -> tuple[str, ...]:
        """The distinct names, sorted."""
        return self._core.names

    @property
    def fencing_tokens(self) -> dict[str, int] | None:
        """The fencing token of every name (a new dict) for the current hold, or None.

        Each name keeps its own counter, shared with ``AsyncLock`` on that name: strictly
        increasing across all holders of the name (Kleppmann, "How to do distributed
        locking", 2016). Pass a name's token with each write to the resource it guards.
        """
        return self._core.fencing_tokens()

    @property
    def fencing_token(self) -> int | None:
        """None: a set has one fencing token per name (see :attr:`fencing_tokens`)."""
        return None

    def detach(self) -> str:
        """Not supported for a set of names.

        Raises:
            LockUsageError: always.
        """
        raise LockUsageError("MultiLock holds cannot be detached (nor adopted)")

    def __repr__(self) -> str:
        h = self._core.current()
        if h is None:
            state = "unlocked"
        else:
            state = f"{'lost' if h.lost else 'held'} token~{token_tag(h.token)}"
        return f"<{type(self).__name__} {self._core.name!r} {state}>"
