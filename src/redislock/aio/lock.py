# SPDX-License-Identifier: MIT
"""``AsyncLock``: a mutex with a lease, a fencing token and loss detection."""

from __future__ import annotations

import time
from typing import Any, Self, Unpack

from redislock._core.fair import NO_QUEUE_LIMIT, FairCore
from redislock._core.lock import LockCore
from redislock._core.options import DEFAULT_WAITER_LEASE, LockKwargs
from redislock.aio import _flavour, _steps
from redislock.aio._driver import run
from redislock.aio._lease import AsyncLease
from redislock.errors import AcquireTimeoutError

__all__ = ["AsyncLock"]


class AsyncLock(AsyncLease):
    """A distributed mutex on one Redis (or one Redis Cluster slot).

    Pick it to run a job once, serialize work on a key, or elect a leader. Algorithm: the
    Redis docs' distributed-locks page for a single instance (``SET NX PX`` with a random
    token, compare-and-delete release), plus a fencing token (Kleppmann 2016) and a
    watchdog lease (Redisson's design). The owner is the lock object (one token per
    acquisition), never a thread-local, so no other object can release its hold.

    Under contention waiters queue (as for :class:`AsyncFairLock`, whose queue they
    share): each keeps a short waiter lease (1 s, renewed by its own retries), and a
    release hands the lock straight to the first live waiter and wakes exactly that one,
    so no wake-up is lost and the releasing client cannot take the lock straight back. A
    waiter that died is skipped once its waiter lease ends. While nobody is queued, an
    acquire and a release are one round trip each.

    Cancellation (asyncio): a cancelled ``acquire()`` deletes a key it may have just set,
    and a cancelled ``release()`` finishes in the background, so the object never believes
    it released while the key remains.

    Example::

        lock = AsyncLock(redis.asyncio.Redis(), "nightly-report")
        async with lock:  # waits; raises AcquireTimeoutError on timeout
            await write(data, fence=lock.fencing_token)

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``, or valkey-py's
            ``valkey.asyncio.Valkey`` or ``valkey.asyncio.ValkeyCluster`` (whose own errors
            are valkey-py's classes); ``decode_responses`` either way. Give it a
            ``socket_timeout`` so a dead network cannot hang renewal.
        name: lock name: non-empty str, at most 1024 UTF-8 bytes, no control characters,
            not starting with ``}``.
        ttl: fixed lease in seconds (>= 0.001); it runs out unless :meth:`extend` is called.
            ``None`` (default) means a watchdog lease of ``watchdog_lease`` seconds renewed
            every ``renew_interval`` seconds while held.
        on_lost: called as ``on_lost(lock)`` once per lost hold, however the loss was
            found: by the watchdog task (the lease gone, or not renewed before it ran out),
            or by this object's own ``release()``/``extend()`` finding the key gone or
            taken (then before that call raises). Keep it short.
            (asyncio) If it returns an awaitable, that is run as a task.
        timeout: default wait limit in seconds for ``async with`` and ``acquire()``; None:
            no limit.
        watchdog_lease: watchdog lease length in seconds (default 30).
        renew_interval: seconds between renewals; default a third of the lease, at most half.
        max_lease: cap in seconds on the total hold under the watchdog (a hung holder stops
            being renewed after it); None: no cap.
        recheck_interval: accepted for the other kinds' sake, in seconds (default 0.5); a
            queued Lock waiter does not use it: the release grants the lock to the first
            waiter and wakes it, and the process renews its waiters' leases (see
            :meth:`acquire`).
        prefix: key prefix (default ``"redislock:"``); no braces.
        replicas: how many replicas must acknowledge every lock write (acquire, extend,
            renewal): an int >= 0, default 0 (no WAIT). After each write, ``WAIT replicas
            replica_timeout`` runs on the connection that wrote. Fewer acknowledgements:
            acquire deletes the key it just set and raises :class:`ReplicationError`;
            extend raises it (the lease estimate is not lengthened); the watchdog retries
            and reports the loss when the lease estimate runs out. WAIT narrows the window
            in which a failover loses the lock, it does not make replication synchronous
            (README, "Replicas and failover"). Not with a ``RedisCluster`` client.
        replica_timeout: seconds WAIT may take (default 1.0; at most half the lease when
            ``replicas`` > 0).
        lock_delay: seconds (>= 0; default 0: off) during which nobody can take the name
            after a hold of this object ended WITHOUT a release (its process died, or its
            lease ran out or was lost), so that a paused holder's late writes drain before
            the next holder starts (Chubby's lock-delay). A ``release()`` ends it at once;
            so does ``redislock force-release``. Kept in the key ``<lock key>:delay``,
            which every renewal and ``extend()`` moves with the lease. Every acquire of the
            name honours it, also one by an object without a ``lock_delay`` (it waits it
            out like a held lock; ``blocking=False`` returns False).

    With ``replicas`` > 0, or a client from ``Sentinel.master_for()``, each hold keeps the
    master's run_id (``INFO server`` on the connection that wrote). When a later extend,
    renewal or release meets another run_id (a failover, a restart), its owner-checked
    script has just looked for the hold on the new master: found, it is kept and counted
    in ``statistics().reverified``; missing, it is lost with a reason naming both run_ids
    (``on_lost``, then :class:`LockLostError`).

    Raises:
        LockConfigError: any invalid argument (before any I/O), also ``replicas`` > 0
            with a ``RedisCluster`` client.
    """

    _clients = _flavour.CLIENTS
    _clients_text = _flavour.CLIENTS_TEXT
    _flavour_name = _flavour.NAME

    __slots__ = ()

    def __init__(
        self, client: _flavour.Client, name: str, **options: Unpack[LockKwargs[Self]]
    ) -> None:
        AsyncLease.__init__(self, client, name, **options)

    def _make_core(self, client: Any, name: Any, options: Any, *args: Any) -> LockCore:
        return self._new_core(FairCore, client, name, options, **self._queue(options))

    def _queue(self, options: Any) -> dict[str, Any]:
        """The :class:`FairCore` fields of its queue: a Lock's waiters keep a 1 s waiter
        lease, and it queues any number of them."""
        return {"waiter_lease": DEFAULT_WAITER_LEASE, "queue_max": NO_QUEUE_LIMIT, "kind": "Lock"}

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take the lock, waiting up to ``timeout`` seconds.

        One round trip when nobody is queued: a script sets the key with a fresh token and
        PX TTL only if absent, and issues the next fencing token. Otherwise the same script
        queues this waiter, which waits for a release to grant it the lock (a message on
        its process's grant channel of the name; all the waiters of the process listen on
        one connection: waiting holds no pooled connection). Meanwhile the process renews the
        waiter leases of all its queued waiters on one client in one call every third of the
        lease (1 s), which also finds a grant whose message was lost, or the lock left free
        by a holder whose lease ran out; the waiter's own try is only a safety net, every
        15-30 s. A waiter that gives up or is cancelled leaves the queue.

        Args:
            blocking: False for a single try.
            timeout: wait limit in seconds; None uses the lock's ``timeout`` (default: no
                limit); 0 means one try.

        Returns:
            True if acquired, False if the wait ended without the lock.

        Raises:
            LockConfigError: bad arguments (before any I/O).
            LockUsageError: this object already holds the lock (it is not reentrant).
            UnexpectedReplyError: the key exists without a TTL (not written by redislock).
            ReplicationError: fewer than ``replicas`` replicas acknowledged the grant within
                ``replica_timeout`` seconds; it was undone (never reported as busy).
            redis.exceptions.RedisError: Redis failed (connection, NOPERM, READONLY, OOM).
            asyncio.CancelledError: cancelled; a key this call may have set is deleted.
        """
        core = self._core
        wait = core.check_acquire_args(blocking, timeout)
        flow = core.acquire_flow(wait, blocking)
        return await _steps.acquire(self, core, flow, single=wait == 0)

    async def locked(self) -> bool:
        """Whether anybody holds the lock now (one round trip).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.locked_flow())

    async def adopt(self, token: str) -> None:
        """Take over a hold by its owner token (from :meth:`detach` in another process).

        The fencing token and lease come from Redis; a watchdog lock resumes renewal here,
        and its ``max_lease`` counts from the adoption.

        Raises:
            LockConfigError: ``token`` is not a token of :meth:`detach` (32-256 lowercase
                hex characters, optionally after ``<hex tag>.``).
            LockUsageError: this object already holds the lock.
            NotOwnedError: no current hold has that token.
            redis.exceptions.RedisError: Redis failed.
        """
        await _steps.adopt(self, self._core, token)

    async def __aenter__(self) -> Self:
        start = time.monotonic()
        if not await self.acquire():
            raise AcquireTimeoutError(self.name, time.monotonic() - start)
        return self
