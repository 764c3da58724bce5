# Generated from src/redislock/aio/semaphore.py by tools/gen_sync.py: do not edit.
# Edit that file, then run `python3 dev.py gen`.
# SPDX-License-Identifier: MIT
"""``Semaphore``: N permits, each with its own id and lease, in one hash key."""

from __future__ import annotations

import time
from typing import Any, Self, Unpack, final

from redislock._core.hold import HoldCore, check_permits, permit_id
from redislock._core.lock import LockCore
from redislock._core.options import LockKwargs
from redislock._handle import Handle
from redislock.errors import AcquireTimeoutError
from redislock.sync import _flavour, _steps
from redislock.sync._driver import run
from redislock.sync._lease import Lease

__all__ = ["Permit", "Semaphore"]


@final
class Permit(Lease):
    """One acquired permit of a :class:`Semaphore` (returned by ``acquire()``).

    It has its own owner token, fencing token and lease (renewed by the watchdog when the
    semaphore has ``ttl=None``); use it as a context manager or call :meth:`release`.
    """

    __slots__ = ()
    _noun = "a permit of"

    @classmethod
    def _of(cls, client: Any, core: HoldCore) -> Self:
        permit = cls.__new__(cls)
        permit._client = client
        permit._core = core
        return permit

    @property
    def id(self) -> str:
        """The permit's id: 16 hex digits of SHA-256 of its owner token (not a secret);
        empty once released."""
        h = self._core.current()
        return "" if h is None else permit_id(h.token)

    def __enter__(self) -> Self:
        return self


@final
class Semaphore(Handle):
    """A distributed counting semaphore: at most N permits held at once.

    Each permit has an id, a fencing token and its own lease, so a crashed holder's permit
    comes back when its lease ends (``ttl=None``: watchdog leases, renewed while held). The
    permit count is ``permits`` unless :meth:`set_permits` stored another one in Redis for
    every client. A release wakes one waiter per process (pub/sub, on the process's shared
    wake-up channel); a waiter that gets in passes the wake-up on while permits are left.
    Design: Redisson's ``RPermitExpirableSemaphore``,
    with per-permit leases in one hash (``scripts/_hold.lua``).

    Example::

        sem = Semaphore(redis.Redis(), "gpu", permits=4)
        with sem.acquire(timeout=30) as permit:
            run_job(fence=permit.fencing_token)

    Args:
        client: a ``redis.Redis`` or ``redis.cluster.RedisCluster``, or valkey-py's
            ``valkey.Valkey`` or ``valkey.cluster.ValkeyCluster``.
        name: the semaphore name (rules as for :class:`~redislock.Lock`).
        permits: the permit count, 1 to 1,000,000.
        lock options: ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
            recheck_interval, prefix: as for :class:`~redislock.Lock` (seconds), per permit;
            ``on_lost`` receives the :class:`Permit`.
        replicas, replica_timeout: as for :class:`~redislock.Lock` (WAIT after each lock
            write), per permit.
        lock_delay: Lock's and FairLock's only: accepted as 0 (seconds; off).

    Raises:
        LockConfigError: any invalid argument (before any I/O), also ``lock_delay`` > 0.
    """

    _clients = _flavour.CLIENTS
    _clients_text = _flavour.CLIENTS_TEXT
    _flavour_name = _flavour.NAME

    __slots__ = ()
    _core: HoldCore

    def __init__(
        self,
        client: _flavour.Client,
        name: str,
        permits: int,
        **options: Unpack[LockKwargs[Permit]],
    ) -> None:
        Handle.__init__(self, client, name, permits, **options)

    def _make_core(self, client: Any, name: Any, options: Any, *args: Any) -> LockCore:
        count = check_permits(args[0])
        assert count is not None
        return HoldCore.for_mode(Handle._make_core(self, client, name, options), "p", count)

    @property
    def permits(self) -> int:
        """The permit count this object was built with (Redis may hold another: see
        :meth:`set_permits`)."""
        return self._core.permits

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} permits={self.permits}>"

    def acquire(
        self, blocking: bool = True, timeout: float | None = None
    ) -> _flavour.Acquiring[Permit]:
        """Take one permit, waiting up to ``timeout`` seconds.

        Use the result in ``with sem.acquire(timeout=30) as permit:`` (the permit is
        released at the end), or ``permit = sem.acquire()``.

        Args:
            blocking: False for a single try.
            timeout: wait limit in seconds; None uses the object's ``timeout`` (default:
                no limit); 0 means one try.

        Returns:
            The :class:`Permit` (a context manager that releases it).

        Raises:
            LockConfigError: bad arguments (before any I/O).
            AcquireTimeoutError: no permit came free in time (or, with a single try, none
                was free).
            ReplicationError: fewer than ``replicas`` replicas acknowledged the grant within
                ``replica_timeout`` seconds; it was undone (never reported as busy).
            redis.exceptions.RedisError: Redis failed.
        """
        return _flavour.acquiring(self._acquire(blocking, timeout))

    def _acquire(self, blocking: bool, timeout: float | None) -> Permit:
        start = time.monotonic()
        permit = self._take(blocking, timeout)
        if permit is None:
            raise AcquireTimeoutError(self.name, time.monotonic() - start)
        return permit

    def try_acquire(self) -> Permit | None:
        """One try: a :class:`Permit`, or None if none is free.

        Raises:
            ReplicationError: fewer than ``replicas`` replicas acknowledged the grant within
                ``replica_timeout`` seconds; it was undone (never reported as busy).
            redis.exceptions.RedisError: Redis failed.
        """
        return self._take(False, None)

    def _take(self, blocking: bool, timeout: float | None) -> Permit | None:
        wait = self._core.check_acquire_args(blocking, timeout)
        core = self._core.sibling()
        permit = Permit._of(self._client, core)
        flow = core.acquire_flow(wait, blocking)
        if not _steps.acquire(permit, core, flow, single=wait == 0):
            return None
        return permit

    def available(self) -> int:
        """Permits free now: the permit count minus the live permits (one round trip).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return run(self._client, self._core.available_flow())

    def set_permits(self, permits: int | None) -> None:
        """Store a permit count in Redis for every client of this name (no TTL), or with
        None remove it so each object's own ``permits`` applies again. Lowering it never
        revokes permits already held; new ones wait until the count allows.

        Raises:
            LockConfigError: ``permits`` is not an int in 1..1,000,000 or None.
            redis.exceptions.RedisError: Redis failed.
        """
        count = check_permits(permits, allow_none=True)
        run(self._client, self._core.set_permits_flow(count))

    def locked(self) -> bool:
        """Whether any permit is held now (one round trip).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return run(self._client, self._core.locked_flow())
