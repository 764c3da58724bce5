# SPDX-License-Identifier: MIT
"""``AsyncRedisPyLock``: a drop-in for redis-py's ``Lock`` (``lock_class=`` of
``redis.asyncio.Redis.lock()``), wire-compatible with it, plus a fencing token, a lease that
never leaves a key without a TTL, and loss detection (:mod:`redislock._core.compat`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Self

from redis.exceptions import LockError, LockNotOwnedError

from redislock._core import validate
from redislock._core.compat import CompatArgumentError, CompatCore, check_name, lease_lost
from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.options import DEFAULT_WATCHDOG_LEASE, LockOptions
from redislock._handle import Unit, _follows_sentinel
from redislock.aio import _flavour, _steps
from redislock.aio._driver import run
from redislock.errors import LockConfigError, LockLostError, NotOwnedError

__all__ = ["AsyncRedisPyLock"]


class AsyncRedisPyLock(_flavour.RedisPyLockBase):
    """redis-py's ``Lock`` for ``redis.asyncio.Redis``, on redislock's lease.

    Pass it where redis-py takes a lock class (``client.lock(name, lock_class=
    AsyncRedisPyLock, ...)``) or build it as redis-py's: same arguments, methods and
    exceptions (:class:`redis.exceptions.LockError`, :class:`~redis.exceptions.LockNotOwnedError`),
    and the same key and value in Redis (the key is ``name``, the value the token), so
    processes still on redis-py's ``Lock`` and processes on this class exclude each other on
    one name. Algorithm: redis-py's (``SET NX PX``, compare-and-delete, polling every
    ``sleep`` seconds while busy), plus a fencing token per acquisition (Kleppmann 2016) and a
    watchdog lease (Redisson's design).

    What differs from redis-py's, by design:

    - ``timeout=None`` (redis-py: a key without TTL, held for ever if the holder dies) is a
      watchdog lease: the key gets ``watchdog_lease`` seconds, renewed every third of it
      while held; ``extend()`` and ``reacquire()`` still raise ``LockError`` for it, as
      redis-py's do.
    - A lease that is gone when ``release()``, ``extend()`` or ``reacquire()`` runs raises
      :class:`redislock.compat.LeaseLostError`, a ``LockNotOwnedError``; the watchdog also
      reports it at once through ``on_lost``.
    - A call sent again by the client's retry after a lost reply answers as the first one
      (redis-py's scripts would report a retried release as "not owned").
    - redis-py's ``timeout`` is the lease; redislock's own classes call the lease ``ttl``
      and use ``timeout`` for the wait limit (redis-py's ``blocking_timeout``).

    Args:
        redis: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` (redis-py
            passes itself).
        name: the lock's key: a non-empty str (or UTF-8 bytes) of at most 1024 bytes.
        timeout: the lease in seconds; None (or 0): a watchdog lease.
        sleep: seconds between two tries while the lock is busy (redis-py's).
        blocking: whether ``acquire()`` waits by default.
        blocking_timeout: default longest wait of ``acquire()``, seconds; None: no limit.
        thread_local: keep the token per thread (redis-py's default) or per object.
        raise_on_release_error: whether ``async with`` raises when the release finds the
            lock no longer owned (else it logs a warning, as redis-py does).
        on_lost: called as ``on_lost(lock)`` when the watchdog finds the lease gone or
            cannot renew it before it ends. (asyncio) If it returns an awaitable, that is
            run as a task.
        watchdog_lease: the watchdog's lease, seconds (default 30), for ``timeout=None``.
        prefix: the prefix of the fencing counter and done keys (default ``"redislock:"``;
            the lock key is ``name`` itself).

    Raises:
        LockConfigError: a bad argument or client type (before any I/O).
    """

    def __init__(
        self,
        redis: Any,
        name: Any,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
        *,
        on_lost: Callable[[Self], object] | None = None,
        watchdog_lease: float = DEFAULT_WATCHDOG_LEASE,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if not isinstance(redis, _flavour.REDIS_PY_CLIENTS):
            raise LockConfigError(
                f"{type(self).__name__} needs {_flavour.REDIS_PY_CLIENTS_TEXT} (redis-py's "
                f"clients only), got {type(redis).__name__}"
            )
        self._name = check_name(name)
        validate.check_timeout("sleep", sleep)
        validate.check_timeout("blocking_timeout", blocking_timeout)
        self._options = LockOptions(
            ttl=timeout if timeout else None,
            watchdog_lease=watchdog_lease,
            on_lost=on_lost,
            prefix=prefix,
        )
        self._sentinel = _follows_sentinel(redis)
        super().__init__(
            redis,
            self._name,
            timeout=timeout,
            sleep=sleep,
            blocking=blocking,
            blocking_timeout=blocking_timeout,
            thread_local=thread_local,
            raise_on_release_error=raise_on_release_error,
        )
        self.local.unit = None

    # ------------------------------------------------------------------ what redislock adds

    def _unit(self) -> Unit | None:
        """The hold of the calling owner (thread, or this object with thread_local=False)."""
        unit: Unit | None = getattr(self.local, "unit", None)
        return unit

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of the calling owner's hold, or None: strictly increasing
        across all holders of this name that use redislock (Kleppmann, "How to do
        distributed locking", 2016)."""
        unit = self._unit()
        h = None if unit is None else unit._core.current()
        return None if h is None else h.fence

    @property
    def lost(self) -> bool:
        """Whether the calling owner's latest hold was lost, or its lease may have run out
        (the local estimate passed without a renewal). No I/O."""
        unit = self._unit()
        return unit is not None and unit._core.is_lost()

    # ------------------------------------------------------------------ redis-py's steps

    async def do_acquire(self, token: str | bytes) -> bool:
        """One try for ``token`` (redis-py's step; ``acquire()`` loops over it).

        Raises:
            redis.exceptions.RedisError: Redis failed (never reported as busy).
        """
        wire = token.encode() if isinstance(token, str) else token
        core = CompatCore.for_redis_py(self._name, self._options, sentinel=self._sentinel)
        unit = Unit(self.redis, core, self)
        flow = core.try_flow(wire)
        if not await _steps.acquire(unit, core, flow, single=True, polled=True):
            return False
        self.local.unit = unit
        return True

    async def do_release(self, expected_token: str | bytes) -> None:
        """Compare-and-delete of the calling owner's hold.

        Raises:
            LeaseLostError: the lease was gone (expired, deleted, taken, unrenewable).
            redis.exceptions.LockNotOwnedError: no hold of this object has that token.
            redis.exceptions.RedisError: Redis failed; the lease then ends by its TTL.
        """
        unit = self._unit()
        core = None if unit is None else unit._core
        h = None if core is None else core.current()
        wire = expected_token.encode() if isinstance(expected_token, str) else expected_token
        if unit is None or core is None or h is None or h.token != wire.decode("latin-1"):
            raise LockNotOwnedError(
                "Cannot release a lock that's no longer owned", lock_name=self._name
            )
        try:
            await _steps.release(unit, core, h)
        except LockLostError as exc:
            self.local.unit = None
            raise lease_lost(
                self._name, "Cannot release a lock that's no longer owned", exc
            ) from exc
        self.local.unit = None

    async def do_extend(self, additional_time: float, replace_ttl: bool) -> Literal[True]:
        """Owner-checked extend (redis-py's ``extend()`` checked the token and timeout).

        Raises:
            CompatArgumentError: ``additional_time`` is not a positive number of seconds (a
                ``LockError`` and a ``LockConfigError``), before any I/O.
            redis.exceptions.LockError: the lock has no timeout (a watchdog lease).
            LeaseLostError: the lease was gone; it is never re-created.
            redis.exceptions.RedisError: Redis failed.
        """
        try:
            seconds = validate.check_duration("additional_time", additional_time)
        except LockConfigError as exc:
            raise CompatArgumentError(str(exc)) from None
        validate.warn_long_lease("additional_time", seconds)
        self._timed("extend")
        await self._extend(seconds, "set" if replace_ttl else "add", "extend")
        return True

    async def do_reacquire(self) -> Literal[True]:
        """Set the TTL back to ``timeout`` (redis-py's ``reacquire()`` checked the rest).

        Raises:
            redis.exceptions.LockError: the lock has no timeout (a watchdog lease).
            LeaseLostError: the lease was gone; it is never re-created.
            redis.exceptions.RedisError: Redis failed.
        """
        self._timed("reacquire")
        await self._extend(float(self.timeout or 0), "set", "reacquire")
        return True

    def _timed(self, verb: str) -> None:
        """redis-py checks ``timeout is None``; a ``timeout=0`` lock has a watchdog lease
        too (redis-py: no TTL), which extend and reacquire must not cut short."""
        if not self.timeout:
            raise LockError(f"Cannot {verb} a lock with no timeout", lock_name=self._name)

    async def _extend(self, seconds: float, mode: str, verb: str) -> None:
        message = f"Cannot {verb} a lock that's no longer owned"
        unit = self._unit()
        if unit is None:
            raise LockNotOwnedError(message, lock_name=self._name)
        core = unit._core
        try:
            h = core.require_holding()
            await run(self.redis, core.extend_flow(h, seconds, mode))
        except LockLostError as exc:
            raise lease_lost(self._name, message, exc) from exc
        except NotOwnedError as exc:
            raise LockNotOwnedError(message, lock_name=self._name) from exc
