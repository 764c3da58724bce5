# Generated from src/redislock/aio/rlock.py by tools/gen_sync.py: do not edit.
# Edit that file, then run `python3 dev.py gen`.
# SPDX-License-Identifier: MIT
"""``RLock`` and ``ReadWriteLock``: reentrant holds, one per thread, in one hash
key."""

from __future__ import annotations

import time
from typing import Any, Self, Unpack, final

from redislock._core.hold import HoldCore
from redislock._core.lock import LockCore
from redislock._core.options import LockKwargs
from redislock._handle import Unit
from redislock.errors import (
    AcquireTimeoutError,
    LockLostError,
    LockUpgradeError,
    NotOwnedError,
)
from redislock.sync import _flavour, _steps
from redislock.sync._driver import run
from redislock.sync._lease import Lease

__all__ = ["RLock", "ReadLock", "ReadWriteLock", "WriteLock"]


class _Reentrant(Lease):
    """Holds of one mode (``w`` or ``r``), one per thread, each reentrant."""

    _clients = _flavour.CLIENTS
    _clients_text = _flavour.CLIENTS_TEXT
    _flavour_name = _flavour.NAME
    _mode = "w"

    __slots__ = ("_units",)

    def __init__(
        self, client: _flavour.Client, name: str, **options: Unpack[LockKwargs[Self]]
    ) -> None:
        Lease.__init__(self, client, name, **options)
        self._units: dict[_flavour.Owner, Unit] = {}

    def _make_core(self, client: Any, name: Any, options: Any, *args: Any) -> LockCore:
        return HoldCore.for_mode(Lease._make_core(self, client, name, options), self._mode)

    # ------------------------------------------------------------------ owners

    def _unit(self) -> Unit:
        """The calling thread's unit, created on first use."""
        key = _flavour.owner()
        unit = self._units.get(key)
        if unit is None:
            assert isinstance(self._core, HoldCore)
            unit = self._units[key] = Unit(self._client, self._core.sibling(), self)
        return unit

    def _mine(self) -> LockCore:
        key = _flavour.current_owner()
        unit = None if key is None else self._units.get(key)
        return self._core if unit is None else unit._core

    def _forget(self) -> None:
        key = _flavour.current_owner()
        unit = None if key is None else self._units.get(key)
        if key is not None and unit is not None and unit._core.holding is None:
            del self._units[key]

    def _companion(self) -> str:
        return ""

    def _before_acquire(self) -> None:
        return

    # ------------------------------------------------------------------ API

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take a hold for the calling thread, or count one more if it already holds one.

        Re-entry never waits: one round trip increments the hold count in Redis and
        refreshes the lease. A new hold waits up to ``timeout`` seconds, woken by the
        release that lets it in (on the shared wake-up channel), re-checking every
        ``recheck_interval`` seconds.

        Args:
            blocking: False for a single try.
            timeout: wait limit in seconds; None uses the object's ``timeout`` (default:
                no limit); 0 means one try.

        Returns:
            True if held (or re-entered), False if the wait ended without it.

        Raises:
            LockConfigError: bad arguments (before any I/O).
            LockUpgradeError: a read hold of this thread asked for the write lock.
            LockLostError: re-entry, but this thread's hold was lost.
            UnexpectedReplyError: the key holds data not written by redislock.
            ReplicationError: fewer than ``replicas`` replicas acknowledged the grant within
                ``replica_timeout`` seconds; it was undone (never reported as busy).
            redis.exceptions.RedisError: Redis failed (connection, NOPERM, READONLY, OOM,
                WRONGTYPE if a plain Lock uses the same name).
        """
        wait = self._core.check_acquire_args(blocking, timeout)
        unit = self._unit()
        core = unit._core
        assert isinstance(core, HoldCore)
        h = core.current()
        if h is not None:  # re-entry; a lost hold stays the thread's until it releases
            if h.lost:
                raise LockLostError(self.name, h.lost_reason)
            return _steps.reenter(self._client, core, h)
        try:
            self._before_acquire()
            flow = core.acquire_flow(wait, blocking, self._companion())
            return _steps.acquire(unit, core, flow, single=wait == 0)
        finally:
            self._forget()

    def release(self) -> None:
        """Drop one count of the calling thread's hold; at zero the hold is removed and
        waiters that may now enter are woken.

        Raises:
            NotOwnedError: the calling thread holds nothing (never acquired, or released
                more often than acquired).
            LockLostError: the hold was lost (expired, deleted); nothing else is touched.
            redis.exceptions.RedisError: Redis failed; the hold is kept and release may be
                retried.
        """
        key = _flavour.current_owner()
        unit = None if key is None else self._units.get(key)
        if unit is None:
            raise NotOwnedError(self.name, "the calling thread holds nothing")
        core = unit._core
        h = core.require_holding(allow_lost=True)
        try:
            if h.count > 1 and not h.lost:  # a decrement: renewal goes on
                _steps.shielded(self._client, core.release_flow(h))
            else:
                _steps.release(unit, core, h)
        finally:
            self._forget()

    def hold_count(self) -> int:
        """How many times the calling thread holds this lock now (0 if not held); local,
        mirrors the count kept in Redis."""
        h = self._mine().live()
        return 0 if h is None else h.count

    def locked(self) -> bool:
        """Whether anybody holds the key now: a writer or reader (one round trip).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return run(self._client, self._core.locked_flow())

    def adopt(self, token: str) -> None:
        """Make a hold detached elsewhere (``detach()``) the calling thread's, count and all.

        Raises:
            LockConfigError: ``token`` is not a token of :meth:`detach` (32-256 lowercase
                hex characters, optionally after ``<hex tag>.``).
            LockUsageError: the calling thread already holds this lock.
            NotOwnedError: no current hold of this kind has that token.
            redis.exceptions.RedisError: Redis failed.
        """
        unit = self._unit()
        core = unit._core
        try:
            _steps.adopt(unit, core, token)
        finally:
            self._forget()

    def __enter__(self) -> Self:
        start = time.monotonic()
        if not self.acquire():
            raise AcquireTimeoutError(self.name, time.monotonic() - start)
        return self


@final
class RLock(_Reentrant):
    """A reentrant distributed mutex: the thread that holds it may acquire it again.

    The hold count lives in Redis, in a hash ``owner token -> hold`` (as in Redisson's
    ``RLock``), so the watchdog and ``redislock inspect`` see it. Each thread has its own
    hold and token (as ``threading.RLock`` per thread): a thread can never release another
    thread's hold. The fencing token is issued on the first acquisition and kept while the
    hold is re-entered. ``release()`` drops one count; at zero the hold is
    removed and one waiter is woken.

    Example::

        lock = RLock(redis.Redis(), "account:7")
        with lock:
            with lock:  # same thread: re-entered, hold_count() == 2
                ...

    Args:
        lock options: client, name, ttl, on_lost, timeout, watchdog_lease, renew_interval,
            max_lease, recheck_interval, prefix: as for :class:`~redislock.Lock` (seconds).
        replicas, replica_timeout: as for :class:`~redislock.Lock`: how many replicas must
            acknowledge each lock write (an int, default 0: no WAIT), and WAIT's limit in
            seconds (default 1.0).
        lock_delay: Lock's and FairLock's only: accepted as 0 (seconds; off).

    Raises:
        LockConfigError: any invalid argument (before any I/O), also ``lock_delay`` > 0.
    """

    __slots__ = ()


@final
class ReadLock(_Reentrant):
    """The read side of a :class:`ReadWriteLock` (from ``rw.read()``): shared, reentrant
    per thread, each reader with its own lease. Not built directly."""

    __slots__ = ("_rw",)
    _mode = "r"
    _rw: ReadWriteLock

    def _companion(self) -> str:
        # A writer may also read (write -> read downgrade): pass the write token along.
        h = self._rw._writer._mine().live()
        return "" if h is None else h.token


@final
class WriteLock(_Reentrant):
    """The write side of a :class:`ReadWriteLock` (from ``rw.write()``): exclusive,
    reentrant per thread. Not built directly."""

    __slots__ = ("_rw",)
    _rw: ReadWriteLock

    def _before_acquire(self) -> None:
        if self._rw._reader._mine().live() is not None:
            raise LockUpgradeError(
                f"the calling thread holds a read lock of {self.name!r}; upgrading to a "
                "write lock could deadlock (release the read lock first)"
            )


class ReadWriteLock:
    """Many readers or one writer, in one hash key (cluster-safe); holds are per thread.

    Every reader's hold has its own lease, so a crashed reader frees its share when its
    lease ends. Writers are preferred: while a writer waits, new readers wait too, so a
    stream of readers cannot starve it (readers already holding may re-enter). A writer may
    take a read hold and then release the write hold (downgrade); a reader asking for the
    write lock gets :class:`~redislock.LockUpgradeError` at once (it would deadlock).
    Releases wake the side that may now enter (a wake-up channel per side). Design:
    Redisson's ``RReadWriteLock`` with per-hold leases in one hash (``scripts/_hold.lua``).

    Example::

        rw = ReadWriteLock(redis.Redis(), "catalog")
        with rw.read():
            ...
        with rw.write():
            ...

    Args:
        lock options: client, name, ttl, on_lost, timeout, watchdog_lease, renew_interval,
            max_lease, recheck_interval, prefix: as for :class:`~redislock.Lock` (seconds); they
            apply to both sides. ``on_lost`` receives the :class:`ReadLock` or
            :class:`WriteLock`.
        replicas, replica_timeout: as for :class:`~redislock.Lock` (WAIT after each lock
            write), for both sides.
        lock_delay: Lock's and FairLock's only: accepted as 0 (seconds; off).

    Raises:
        LockConfigError: any invalid argument (before any I/O), also ``lock_delay`` > 0.
    """

    __slots__ = ("__weakref__", "_reader", "_writer")

    def __init__(
        self,
        client: _flavour.Client,
        name: str,
        **options: Unpack[LockKwargs[ReadLock | WriteLock]],
    ) -> None:
        reader = ReadLock(client, name, **options)
        writer = WriteLock(client, name, **options)
        reader._rw = writer._rw = self
        self._reader = reader
        self._writer = writer

    @property
    def name(self) -> str:
        """The lock name."""
        return self._reader.name

    def read(self) -> ReadLock:
        """The read side (the same object every call); use it as a context manager."""
        return self._reader

    def write(self) -> WriteLock:
        """The write side (the same object every call); use it as a context manager."""
        return self._writer

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self._reader!r} {self._writer!r}>"


ReadWriteLock.__signature__ = ReadLock.__signature__  # type: ignore[attr-defined]
