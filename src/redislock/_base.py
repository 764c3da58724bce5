# SPDX-License-Identifier: MIT
"""What :class:`~redislock.Lock` and :class:`~redislock.AsyncLock` share without I/O:
construction, local properties, ``detach()``, ``statistics()`` and ``repr``."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel

from redislock._core.hold import HoldCore, check_permits, permit_id
from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.lock import (
    DEFAULT_RECHECK,
    DEFAULT_WATCHDOG_LEASE,
    LockCore,
    LockStatistics,
    token_tag,
)
from redislock.errors import LockConfigError

__all__ = ["LockBase", "PermitBase", "ReadWriteBase", "Renewable", "SemaphoreBase", "Unit"]


def _socket_timeout(client: Any) -> float | None:
    """The client's socket timeout in seconds, or None (no timeout, or not found)."""
    for owner in (getattr(client, "connection_pool", None), getattr(client, "nodes_manager", None)):
        kwargs = getattr(owner, "connection_kwargs", None)
        if isinstance(kwargs, dict):
            value = kwargs.get("socket_timeout")
            return float(value) if isinstance(value, int | float) else None
    return None


_SENTINEL_POOLS = (
    redis.sentinel.SentinelConnectionPool,
    redis.asyncio.sentinel.SentinelConnectionPool,
)
_CLUSTERS = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)

DEFAULT_REPLICA_TIMEOUT = 1.0
"""Seconds ``WAIT`` may take when ``replicas`` > 0."""


class Renewable(Protocol):
    """What the watchdogs need of a lock object: its client, its core, and what to pass
    to ``on_lost``."""

    _client: Any

    @property
    def _core(self) -> LockCore: ...  # read-only here, so a subclass's core type fits

    def _subject(self) -> object: ...


class Unit:
    """One owner's hold of a shared lock object (a thread's or a task's hold of an RLock,
    one permit): what the watchdog renews. ``on_lost`` receives the public object."""

    __slots__ = ("__weakref__", "_client", "_core", "_ref")

    def __init__(self, client: Any, core: LockCore, subject: object) -> None:
        self._client = client
        self._core = core
        self._ref = weakref.ref(subject)

    def _subject(self) -> object:
        subject = self._ref()
        return self if subject is None else subject


class LockBase:
    """Shared, I/O-free part of the lock classes."""

    _client_types: tuple[type, ...] = ()
    _client_hint: str = ""

    __slots__ = ("__weakref__", "_client", "_core")

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
        replicas: int = 0,
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
    ) -> None:
        if not isinstance(client, self._client_types):
            raise LockConfigError(
                f"{type(self).__name__} needs {self._client_hint}, got {type(client).__name__}"
            )
        self._client = client
        self._core = LockCore.create(
            name,
            ttl=ttl,
            watchdog_lease=watchdog_lease,
            renew_interval=renew_interval,
            max_lease=max_lease,
            timeout=timeout,
            recheck_interval=recheck_interval,
            prefix=prefix,
            on_lost=on_lost,
            socket_timeout=_socket_timeout(client),
            replicas=replicas,
            replica_timeout=replica_timeout,
            sentinel=isinstance(getattr(client, "connection_pool", None), _SENTINEL_POOLS),
        )
        if self._core.replicas and isinstance(client, _CLUSTERS):
            raise LockConfigError(
                f"replicas={self._core.replicas} does not work with a Redis Cluster client: "
                "WAIT must run on the connection that wrote the lock key, and the cluster "
                "client routes every command on its own; use replicas=0 on a cluster"
            )

    @property
    def name(self) -> str:
        """The lock name."""
        return self._core.name

    @property
    def key(self) -> str:
        """The Redis key of the lock (``<prefix>{<name>}``)."""
        return self._core.keys.lock

    @property
    def fencing_token(self) -> int | None:
        """Fencing token of the current hold, or None when not held.

        Strictly increasing across all holders of this name (never reset): pass it to the
        protected resource and have it reject writes with a token not greater than the last
        one it accepted (Kleppmann, "How to do distributed locking", 2016).
        """
        h = self._mine().current()
        return None if h is None else h.fence

    @property
    def lost(self) -> bool:
        """True if the latest acquisition was lost: expired, taken over, unrenewable, or
        past its local lease estimate (a fixed ``ttl`` that ran out without ``extend()``)."""
        return self._mine().is_lost()

    @property
    def token(self) -> str | None:
        """The owner token of the current hold, or None. A secret: whoever has it can release
        the lock. Hand it to :meth:`adopt` in another process after :meth:`detach`."""
        h = self._mine().current()
        return None if h is None else h.token

    def detach(self) -> str:
        """Stop managing the current hold without touching Redis, and return its token.

        The lease keeps running in Redis (and is no longer renewed here); another process
        takes it over with ``adopt(token)``.

        Raises:
            NotOwnedError: this object holds nothing.
            LockLostError: the lease was already lost.
        """
        core = self._mine()
        h = core.require_holding()
        h.closing = True
        core.holding = None
        self._forget()
        return h.token

    def statistics(self) -> LockStatistics:
        """A local, I/O-free snapshot (counters since construction and the current hold)."""
        return self._mine().statistics()

    def _subject(self) -> object:
        return self

    def _mine(self) -> LockCore:
        """The core of the calling owner (reentrant kinds keep one per thread or task)."""
        return self._core

    def _forget(self) -> None:
        """Drop the calling owner's state after its hold ended (reentrant kinds)."""

    def __repr__(self) -> str:
        h = self._mine().current()
        if h is None:
            state = "unlocked"
        else:
            tag = token_tag(h.token)
            state = f"{'lost' if h.lost else 'held'} fence={h.fence} token~{tag}"
        return f"<{type(self).__name__} {self.name!r} {state}>"


R = TypeVar("R", bound=LockBase)
W = TypeVar("W", bound=LockBase)


class ReadWriteBase(Generic[R, W]):
    """What ``ReadWriteLock`` and ``AsyncReadWriteLock`` share: two sides over one name,
    built with the same options, each knowing the other (for downgrade and upgrade checks).
    """

    __slots__ = ("__weakref__", "_reader", "_writer")
    _sides: ClassVar[tuple[type[Any], type[Any]]]

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
        replicas: int = 0,
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
    ) -> None:
        options: dict[str, Any] = {
            "ttl": ttl,
            "on_lost": on_lost,
            "timeout": timeout,
            "watchdog_lease": watchdog_lease,
            "renew_interval": renew_interval,
            "max_lease": max_lease,
            "recheck_interval": recheck_interval,
            "prefix": prefix,
            "replicas": replicas,
            "replica_timeout": replica_timeout,
        }
        reader_type, writer_type = self._sides
        reader: Any = reader_type(client, name, _mode="r", **options)
        writer: Any = writer_type(client, name, _mode="w", **options)
        reader._rw = writer._rw = self
        self._reader: R = reader
        self._writer: W = writer

    @property
    def name(self) -> str:
        """The lock name."""
        return self._reader.name

    def read(self) -> R:
        """The read side (the same object every call); use it as a context manager."""
        return self._reader

    def write(self) -> W:
        """The write side (the same object every call); use it as a context manager."""
        return self._writer

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self._reader!r} {self._writer!r}>"


class PermitBase(LockBase):
    """What ``Permit`` and ``AsyncPermit`` share: built by their semaphore, and an id."""

    __slots__ = ()

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


class SemaphoreBase(LockBase):
    """What ``Semaphore`` and ``AsyncSemaphore`` share: construction and local state."""

    __slots__ = ()
    _core: HoldCore

    def __init__(
        self,
        client: Any,
        name: str,
        permits: int,
        *,
        ttl: float | None = None,
        on_lost: Callable[[Any], object] | None = None,
        timeout: float | None = None,
        watchdog_lease: float = DEFAULT_WATCHDOG_LEASE,
        renew_interval: float | None = None,
        max_lease: float | None = None,
        recheck_interval: float = DEFAULT_RECHECK,
        prefix: str = DEFAULT_PREFIX,
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
        count = check_permits(permits)
        assert count is not None
        self._core = HoldCore.for_mode(self._core, "p", count)

    @property
    def permits(self) -> int:
        """The permit count this object was built with (Redis may hold another: see
        ``set_permits()``)."""
        return self._core.permits

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} permits={self.permits}>"
