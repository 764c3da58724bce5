# SPDX-License-Identifier: MIT
"""``AsyncCountDownLatch``: a count that parties count down across processes, and waiters
that return once it reached zero."""

from __future__ import annotations

from typing import Any

from redislock._clients import wrong_client
from redislock._core import validate
from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.latch import (
    DEFAULT_LATCH_RECHECK,
    DEFAULT_LATCH_TTL,
    LatchCore,
    check_count,
)
from redislock.aio import _flavour
from redislock.aio._driver import run
from redislock.errors import LockConfigError

__all__ = ["AsyncCountDownLatch"]


class AsyncCountDownLatch:
    """A distributed count-down latch: :meth:`try_set_count` starts a count, parties call
    :meth:`count_down`, and every :meth:`wait` returns once the count reached zero.

    Each :meth:`try_set_count` that succeeds starts a new *generation*: an integer that
    strictly increases per name (the next fencing token of the name's hash slot, as a
    lock's fencing token), so a waiter knows which count it waits for. A count that reaches
    zero publishes one wake-up on the channel named like the latch key, which every waiter
    hears through its process's shared wake-up connection (no pooled connection is held
    while waiting); a waiter also reads the latch again every ``recheck_interval`` seconds
    and when its TTL would end, so a lost wake-up delays it by at most that.

    The count is set explicitly: a latch that is not counting (never set, reached zero,
    or expired) reads as count 0, :meth:`wait` returns True at once and :meth:`count_down`
    does nothing. Set it before the parties and waiters start (one coordinator, or every
    party with :meth:`try_set_count`: only the first of a generation succeeds).

    The latch key ``<prefix>{<name>}:latch`` (a hash: count, generation) has a TTL of
    ``ttl`` seconds, refreshed by every set and count-down, so a latch nobody finishes does
    not stay in Redis: once it ran out the latch reads as count 0 again, and a waiter of
    that generation returns False (its count never reached zero) instead of True.

    Modelled on Redisson's ``RCountDownLatch`` (trySetCount, countDown, await, getCount:
    https://redisson.org/docs/data-and-services/locks-and-synchronizers/) and Java's
    ``java.util.concurrent.CountDownLatch``.

    Example::

        latch = AsyncCountDownLatch(redis.asyncio.Redis(), "batch-42", 3)
        await latch.try_set_count()            # the coordinator, before the workers start
        ...                                    # each of 3 workers, when done:
        await latch.count_down()
        ...                                    # whoever needs all three done:
        if await latch.wait(timeout=600):
            await publish_results()

    Construction does no I/O.

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``, or valkey-py's
            ``valkey.asyncio.Valkey`` or ``valkey.asyncio.ValkeyCluster``.
        name: the latch name (rules as for :class:`~redislock.Lock`; a latch and a lock of
            one name do not meet: their keys differ).
        count: the count :meth:`try_set_count` starts a generation with, an int from 1 to
            2**53.
        ttl: seconds the latch key lives after its last set or count-down (default 86400:
            one day; at most a year).
        recheck_interval: seconds between a waiter's reads when no wake-up comes (default
            5.0).
        prefix: the key prefix (default ``"redislock:"``), as for :class:`~redislock.Lock`.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    __slots__ = ("_client", "_core")

    def __init__(
        self,
        client: _flavour.Client,
        name: str,
        count: int,
        *,
        ttl: float = DEFAULT_LATCH_TTL,
        recheck_interval: float = DEFAULT_LATCH_RECHECK,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if not isinstance(client, _flavour.CLIENTS):
            raise LockConfigError(wrong_client(type(self).__name__, _flavour.CLIENTS_TEXT, client))
        self._client: Any = client
        self._core = LatchCore.create(
            name, count, ttl=ttl, recheck_interval=recheck_interval, prefix=prefix
        )

    @property
    def name(self) -> str:
        """The latch name."""
        return self._core.name

    @property
    def key(self) -> str:
        """The Redis key of the latch (``<prefix>{<name>}:latch``)."""
        return self._core.key

    @property
    def initial_count(self) -> int:
        """The count :meth:`try_set_count` starts a generation with (no I/O)."""
        return self._core.count

    @property
    def last_generation(self) -> int | None:
        """The generation this object's latest successful :meth:`try_set_count` started, or
        None (no I/O)."""
        return self._core.last_set

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} count={self.initial_count}>"

    async def try_set_count(self, count: int | None = None) -> bool:
        """Start a new generation counting down from ``count``, unless the latch is counting.

        Succeeds when the latch is not counting (never set, reached zero, or expired): the
        new generation is above every earlier one of the name (:attr:`last_generation`), and
        the key's TTL is ``ttl`` again. Sent again after a lost reply (a client's retry), it
        counts once.

        Args:
            count: the count, an int from 1 to 2**53; None: the object's ``count``.

        Returns:
            True if this call started a generation; False if the latch was counting (it is
            left as it was).

        Raises:
            LockConfigError: a bad ``count`` (before any I/O).
            UnexpectedReplyError: the latch key holds something redislock did not write.
            redis.exceptions.RedisError: Redis failed.
        """
        n = None if count is None else check_count(count)
        return await run(self._client, self._core.set_flow(n))

    async def count_down(self) -> int:
        """Count one down, never below zero; at zero every waiter is woken. The key's TTL is
        ``ttl`` again. Sent again after a lost reply (a client's retry), it counts once.

        Returns:
            The count left after this call (0 also when the latch was not counting: then
            nothing changed).

        Raises:
            UnexpectedReplyError: the latch key holds something redislock did not write.
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.count_down_flow())

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until the count of the generation counting now reaches zero.

        Returns at once when nothing counts (no latch, or its count is zero). The wait is on
        the client's shared wake-up connection (no pooled connection held).

        Args:
            timeout: the longest wait, in seconds (None: no limit; 0: one read).

        Returns:
            True when the count reached zero (or nothing counted); False when ``timeout``
            seconds passed first, or when the latch expired (its ``ttl``) or was deleted
            before its count reached zero: it never will, and that is not a success.

        Raises:
            LockConfigError: a bad ``timeout`` (before any I/O).
            UnexpectedReplyError: the latch key holds something redislock did not write.
            redis.exceptions.RedisError: Redis failed.
            asyncio.CancelledError: cancelled while waiting (nothing to undo).
        """
        limit = validate.check_timeout("timeout", timeout)
        return await run(self._client, self._core.wait_flow(limit))

    async def count(self) -> int:
        """The count left now (one round trip): 0 when the latch is not counting (never
        set, reached zero, expired or deleted).

        Raises:
            UnexpectedReplyError: the latch key holds something redislock did not write.
            redis.exceptions.RedisError: Redis failed.
        """
        state = await run(self._client, self._core.read_flow())
        return state.count

    async def generation(self) -> int:
        """The generation of the latch now (one round trip): that of its latest set, also
        once it reached zero while its key lives; 0 when there is no latch key.

        Raises:
            UnexpectedReplyError: the latch key holds something redislock did not write.
            redis.exceptions.RedisError: Redis failed.
        """
        state = await run(self._client, self._core.read_flow())
        return state.gen
