# SPDX-License-Identifier: MIT
"""The I/O-free layer under every public lock class, for both flavours.

- :class:`Handle`: what every object has: the client, the core, the name, ``statistics()``,
  ``repr``, and the ONE construction path (check the client, build the validated options,
  build the core) that each kind adapts by overriding :meth:`Handle._make_core`.
- :class:`Holder`: a handle that holds a lease itself: token, fencing token, ``lost``,
  ``detach()``. ``Lock``, ``RLock``, the sides of a ``ReadWriteLock``, ``FairLock``,
  ``MultiLock``, ``Redlock``, ``MultiRedlock`` and each ``Permit`` are holders;
  ``Semaphore`` and ``ReadWriteLock`` are not (they hand out holders).

Each kind's shell in :mod:`redislock.aio` (and the sync one generated from it) subclasses
one of them, adds the methods that do I/O and, where its core differs, overrides
:meth:`Handle._make_core`. docs/architecture.md draws the layers.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any, ClassVar, Protocol, TypeVar

from redislock import _clients
from redislock._core import kinds
from redislock._core.lock import LockCore, LockStatistics, token_tag
from redislock._core.options import LockOptions, MultiOptions, signature
from redislock.errors import LockConfigError

__all__ = ["Handle", "Holder", "Renewable", "Unit", "is_cluster"]


_SENTINEL_POOLS = _clients.SENTINEL_POOLS
_CLUSTERS = _clients.CLUSTERS
CoreT = TypeVar("CoreT", bound=LockCore)

_KINDS = kinds.metrics_labels()
"""The kinds metrics name (:mod:`redislock.metrics`): the public classes of the kinds table
(:mod:`redislock._core.kinds`) and the holders they hand out, sync or asyncio."""


_SENTINEL_TYPES: dict[type, bool] = {}
"""Per connection-pool type: a Sentinel pool? (an ``isinstance`` against the pool classes
goes through ``ABCMeta.__instancecheck__``: looked up once per type, not per lock)."""


def _follows_sentinel(client: Any) -> bool:
    """Whether ``client``'s pool follows a Sentinel master."""
    kind = type(getattr(client, "connection_pool", None))
    known = _SENTINEL_TYPES.get(kind)
    if known is None:
        known = _SENTINEL_TYPES[kind] = issubclass(kind, _SENTINEL_POOLS)
    return known


def _label(cls: type) -> str:
    """The metrics kind of a public class: its name without ``Async``; a user's subclass
    counts as the first of its bases that is a kind."""
    for base in cls.__mro__:
        name = base.__name__.removeprefix("Async")
        if name in _KINDS:
            return name
    return "Lock"


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is a Redis Cluster client (sync or asyncio, redis-py's or
    valkey-py's)."""
    return isinstance(client, _CLUSTERS)


class Renewable(Protocol):
    """What the watchdogs need of a lock object: its client, its core, and what to pass
    to ``on_lost``."""

    _client: Any

    @property
    def _core(self) -> LockCore: ...  # read-only here, so a subclass's core type fits

    def _subject(self) -> object: ...


class Unit:
    """One owner's hold of a shared lock object (a thread's or a task's hold of an RLock):
    what the watchdog renews. ``on_lost`` receives the public object."""

    __slots__ = ("__weakref__", "_client", "_core", "_ref")

    def __init__(self, client: Any, core: LockCore, subject: object) -> None:
        self._client = client
        self._core = core
        self._ref = weakref.ref(subject)

    def _subject(self) -> object:
        subject = self._ref()
        return self if subject is None else subject


class Handle:
    """What every public lock object has, and its one construction path.

    A kind sets ``_options`` (its frozen options type) and overrides :meth:`_make_core` to
    build its core; the flavour's shells set ``_clients``, ``_clients_text`` and
    ``_flavour_name``. A kind whose first argument is not one client (Redlock's masters)
    also overrides :meth:`_connect`.
    """

    __slots__ = ("__weakref__", "_client", "_core")

    _options: ClassVar[type[MultiOptions]] = LockOptions
    _clients: ClassVar[tuple[type, ...]] = ()
    _clients_text: ClassVar[str] = ""
    _flavour_name: ClassVar[str] = ""

    def __init__(self, client: Any, name: Any, *args: Any, **options: Any) -> None:
        self._options.check_keywords(type(self).__name__, options)  # as Python would
        self._client = self._connect(client)  # the client before the other arguments
        opts = self._options.of(options)
        self._core = self._make_core(client, name, opts, *args)
        self._core.label = _label(type(self))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:  # help() shows every option as a keyword, with its default
            leading = tuple(
                (p.name, p.annotation)
                for p in list(inspect.signature(init).parameters.values())[1:]
                if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
            )
            setattr(cls, "__signature__", signature(cls._options, leading))  # noqa: B010

    # ------------------------------------------------------------------ construction

    def _connect(self, client: Any) -> Any:
        """Check the client's type (raises :class:`LockConfigError`); the object's client."""
        if not isinstance(client, self._clients):
            raise LockConfigError(
                f"{type(self).__name__} needs {self._clients_text} ({self._counterpart()}), "
                f"got {type(client).__name__}"
            )
        return client

    def _counterpart(self) -> str:
        name = type(self).__name__
        if self._flavour_name == "asyncio":
            return f"for sync use {name.removeprefix('Async')}"
        return f"for asyncio use Async{name}"

    def _make_core(self, client: Any, name: Any, options: Any, *args: Any) -> LockCore:
        """The core of a new object (raises :class:`LockConfigError`): ``options`` are the
        validated options, ``args`` a kind's further positional arguments (permits)."""
        return self._new_core(LockCore, client, name, options)

    def _new_core(
        self, cls: type[CoreT], client: Any, name: Any, options: Any, **extra: Any
    ) -> CoreT:
        """A core of type ``cls`` for ``client`` over the validated ``options``; ``extra``
        holds the subclass's own (validated) fields (raises :class:`LockConfigError`)."""
        core = cls.from_options(
            name,
            options,
            sentinel=_follows_sentinel(client),
            **extra,
        )
        if core.replicas and is_cluster(client):
            raise LockConfigError(
                f"replicas={core.replicas} does not work with a Redis Cluster client: "
                "WAIT must run on the connection that wrote the lock key, and the cluster "
                "client routes every command on its own; use replicas=0 on a cluster"
            )
        return core

    # ------------------------------------------------------------------ local state

    @property
    def name(self) -> str:
        """The lock name."""
        return self._core.name

    @property
    def key(self) -> str:
        """The Redis key of the lock (``<prefix>{<name>}``)."""
        return self._core.keys.lock

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


class Holder(Handle):
    """A handle that holds a lease itself: its token, fencing token and loss."""

    __slots__ = ()

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
        the lock. Hand it to ``adopt()`` in another process after :meth:`detach`."""
        h = self._mine().current()
        return None if h is None else h.token

    def detach(self) -> str:
        """Stop managing the current hold without touching Redis, and return its token.

        The lease keeps running in Redis (and is no longer renewed here); another process
        takes it over with ``adopt(token)``.

        Raises:
            NotOwnedError: this object holds nothing.
            LockLostError: the lease was already lost.
            LockUsageError: the kind cannot hand holds over (MultiLock, Redlock).
        """
        core = self._mine()
        h = core.require_holding()
        h.closing = True
        core.holding = None
        self._forget()
        return h.token
