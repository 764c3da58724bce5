# SPDX-License-Identifier: MIT
"""``AsyncElection``: leader election over a Lock, with terms, a proclaimed value and
pushed leader changes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, Self, Unpack

from redislock._core.election import (
    OBSERVE_RECHECK,
    ElectionCore,
    LeaderInfo,
    check_identity,
    check_recheck,
    check_value,
    default_identity,
)
from redislock._core.fair import NO_QUEUE_LIMIT
from redislock._core.lock import Holding, LockCore
from redislock._core.options import DEFAULT_WAITER_LEASE, LockKwargs
from redislock.aio import _flavour, _steps
from redislock.aio._block import noting
from redislock.aio._driver import run
from redislock.aio._lease import AsyncLease
from redislock.errors import AcquireTimeoutError, LockLostError

__all__ = ["AsyncElection", "LeaderInfo"]


class AsyncElection(AsyncLease):
    """Leader election: at most one leader per name at a time, each with a term (a fencing
    token strictly increasing across leaders), an identity and an advertised value.

    Leadership is holding the election's lock (an :class:`AsyncLock` of the same name,
    same key): contenders queue in arrival order, a resignation hands leadership straight
    to the next live contender, and the watchdog renews the leader's lease while it leads;
    a leader whose process died is replaced once its lease ends (``watchdog_lease``, or
    ``ttl``, seconds). Loss of leadership is reported as a lost lock is: ``on_lost(election)``
    from the watchdog, :attr:`lost`, and :class:`LockLostError` from :meth:`resign` (and the
    end of :meth:`campaign`).

    The leader advertises its identity and value in the leader key ``<lock key>:leader``
    (same hash slot), with a TTL of four times the lock's remaining lease, refreshed by the
    watchdog only when it could end before the lease (a renewal is one round trip); readers
    trust it only while its term is the lock's current fencing token, so a dead leader is
    never reported after its lease ended. Every change is published on the channel named
    like that key, which :meth:`observe` waits on through the process's shared wake-up
    connection (no connection of its own).

    Modelled on etcd's v3 election API (campaign, proclaim, leader, observe, resign:
    https://etcd.io/docs/v3.5/dev-guide/api_concurrency_reference_v3/), Kubernetes
    client-go's leaderelection (https://pkg.go.dev/k8s.io/client-go/tools/leaderelection)
    and kazoo's ``Election`` (https://kazoo.readthedocs.io/en/latest/api/recipe/election.html).

    Example::

        election = AsyncElection(redis.asyncio.Redis(), "scheduler", identity="node-a")
        async with election.campaign() as term:  # waits until this process leads
            await election.proclaim("http://node-a:8080")
            await run_scheduler(fence=term)
        # resigned: the next contender leads at once

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``, or valkey-py's
            ``valkey.asyncio.Valkey`` or ``valkey.asyncio.ValkeyCluster``.
        name: the election name (rules as for :class:`~redislock.Lock`; the election's lock
            is the Lock of that name).
        identity: what this contender advertises as leader: a non-empty str of at most 256
            UTF-8 bytes without ``|`` or control characters; default ``<host>:<pid>``.
        lock options: ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
            recheck_interval, prefix, replicas, replica_timeout: as for :class:`~redislock.Lock`
            (seconds); ``on_lost`` receives this election and ``timeout`` is :meth:`campaign`'s
            default wait limit.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    _clients = _flavour.CLIENTS
    _clients_text = _flavour.CLIENTS_TEXT
    _flavour_name = _flavour.NAME
    _noun = "leadership of"

    __slots__ = ()

    def __init__(
        self,
        client: _flavour.Client,
        name: str,
        *,
        identity: str | None = None,
        **options: Unpack[LockKwargs[Self]],
    ) -> None:
        AsyncLease.__init__(self, client, name, identity, **options)

    def _make_core(self, client: Any, name: Any, options: Any, *args: Any) -> LockCore:
        identity = default_identity() if args[0] is None else check_identity(args[0])
        return self._new_core(
            ElectionCore,
            client,
            name,
            options,
            waiter_lease=DEFAULT_WAITER_LEASE,
            queue_max=NO_QUEUE_LIMIT,
            kind="Election",
            identity=identity,
        )

    @property
    def _election(self) -> ElectionCore:
        core = self._core
        assert isinstance(core, ElectionCore)
        return core

    @property
    def identity(self) -> str:
        """This contender's identity."""
        return self._election.identity

    @property
    def term(self) -> int | None:
        """The term while this object leads (its fencing token), else None."""
        return self.fencing_token

    @contextlib.asynccontextmanager
    async def campaign(self, timeout: float | None = None) -> AsyncIterator[int]:
        """Wait until this contender leads, advertise it, and yield the term; resign when the
        block ends (also on an exception): :meth:`lead`, then :meth:`resign`.

        Args:
            timeout: as for :meth:`lead`.

        Yields:
            The term, as :meth:`lead` returns it.

        Raises:
            LockConfigError: bad ``timeout`` (before any I/O).
            LockUsageError: this object already leads.
            AcquireTimeoutError: ``timeout`` seconds passed without leadership.
            LockLostError: at the end of the block, when leadership was lost meanwhile
                (``on_lost`` was called then); also at the start, when the lease ended
                before it could be advertised.
            redis.exceptions.RedisError: Redis failed.
            asyncio.CancelledError: cancelled while waiting; nothing is left queued.
        """
        term = await self.lead(timeout)
        try:
            yield term
        except BaseException as exc:
            with noting(exc, f"resigning election {self.name!r}"):
                await self.resign()
            raise
        await self.resign()

    async def lead(self, timeout: float | None = None) -> int:
        """Wait until this contender leads, advertise it, and return the term, for a
        leadership that does not fit one block (:meth:`campaign` is this plus
        :meth:`resign` at the block's end): the caller must call :meth:`resign`.

        Args:
            timeout: wait limit in seconds; None uses the election's ``timeout`` (default:
                no limit); 0 means one try.

        Returns:
            The term: this leadership's fencing token, above every earlier leader's.

        Raises:
            LockConfigError: bad ``timeout`` (before any I/O).
            LockUsageError: this object already leads.
            AcquireTimeoutError: ``timeout`` seconds passed without leadership.
            LockLostError: the lease ended before it could be advertised (nothing is held).
            redis.exceptions.RedisError: Redis failed; nothing is held (a lock granted but
                not advertised is released, or if that fails too, no longer renewed).
            asyncio.CancelledError: cancelled while waiting; nothing is left queued.
        """
        core = self._election
        wait = core.check_acquire_args(True, timeout)
        start = time.monotonic()
        flow = core.acquire_flow(wait, True)
        if not await _steps.acquire(self, core, flow, single=wait == 0):
            raise AcquireTimeoutError(self.name, time.monotonic() - start)
        h = core.require_holding()
        try:
            advertised = await run(self._client, core.advertise_flow(h))
        except BaseException:
            await self._withdraw(core, h)
            raise
        if not advertised:
            core.mark_lost(h, "the lease ended before the leader was advertised")
            await self._withdraw(core, h)
            raise LockLostError(self.name, h.lost_reason)
        return h.fence

    async def _withdraw(self, core: ElectionCore, h: Holding) -> None:
        # Release h, a leadership never advertised (its caller gets an exception, so nobody
        # would resign it); if the release fails too, h is marked lost, which stops the
        # watchdog: the lease then ends by itself and the next contender leads.
        try:
            await _steps.release(self, core, h)
        except Exception:
            core.mark_lost(h, "the campaign failed before the leader was advertised")

    async def resign(self) -> None:
        """Stop leading: withdraw the advertised leader (published to observers), then
        release the lock, which hands leadership to the next contender at once.

        Raises:
            NotOwnedError: this object does not lead.
            LockLostError: leadership was lost before (expired, taken, unrenewable); the
                new leader's key is never touched.
            redis.exceptions.RedisError: Redis failed; this object still leads and
                ``resign()`` may be called again.
        """
        core = self._election
        h = core.require_holding(allow_lost=True)
        await run(self._client, core.clear_flow(h.fence))
        await _steps.release(self, core, h)

    async def release(self) -> None:
        """The same as :meth:`resign`.

        Raises:
            NotOwnedError: this object does not lead.
            LockLostError: leadership was lost before.
            redis.exceptions.RedisError: Redis failed.
        """
        await self.resign()

    async def proclaim(self, value: str) -> None:
        """Advertise ``value`` as this leader's (published to observers); the term stays.

        Args:
            value: a str of at most 65,536 UTF-8 bytes (an address, a version...).

        Raises:
            LockConfigError: ``value`` is not such a str (before any I/O).
            NotOwnedError: this object does not lead.
            LockLostError: leadership was lost.
            redis.exceptions.RedisError: Redis failed.
        """
        text = check_value(value)
        await run(self._client, self._election.proclaim_flow(text))

    async def leader(self) -> LeaderInfo | None:
        """The current leader (one round trip): its identity, term and value, or None when
        nobody leads (no lock key; or a new leader that has not yet advertised itself,
        the one round trip after its grant).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        info, _ = await run(self._client, self._election.read_flow())
        return info

    def observe(self, *, recheck: float = OBSERVE_RECHECK) -> AsyncIterator[LeaderInfo | None]:
        """Iterate over leader changes: the current leader (or None) first, then each
        change (a new term, a proclaimed value, None when the leader resigned or its
        lease ended) as it happens.

        Changes are pushed: every write of the leader key is published on its channel,
        which this waits on through the client's shared wake-up connection (one pub/sub
        connection per client and process, for every waiter and observer). With no
        message, it reads again when the leader's lease would end (a dead leader is seen
        within its lease) and every ``recheck`` seconds (a lock key deleted by hand).
        Changes closer together than one round trip may be seen as one.

        Args:
            recheck: seconds between reads when nothing is published (default 5.0, > 0).

        Raises:
            LockConfigError: bad ``recheck`` (at the call, before any I/O).
            redis.exceptions.RedisError: Redis failed (from the iteration).
        """
        every = check_recheck(recheck)
        return self._observe(every)

    async def _observe(self, every: float) -> AsyncIterator[LeaderInfo | None]:
        core = self._election
        last: LeaderInfo | None = None
        first = True
        while True:
            last = await run(self._client, core.observe_flow(last, first, every))
            first = False
            yield last
