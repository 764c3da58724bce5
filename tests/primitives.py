# SPDX-License-Identifier: MIT
"""The table of primitives that ``tests/test_generic.py`` runs its behaviour tests over.

After trio's generic lock tests (``trio/_tests/test_sync.py``: one body per behaviour, a
table of lock factories): a new primitive gets every common test, in both flavours, by its
row in the kinds table (``redislock._core.kinds.KINDS``), from which :data:`KINDS` is made.
A row says what it can do (``exclusive``, ``fences``, ``woken``), and each test takes the
rows that have what it tests.

Both flavours run from one async test body. An :class:`Actor` is one owner: for the sync
flavour a thread of its own (every call on it runs there, so a reentrant lock sees one
thread), for asyncio the task the actor's coroutine runs in. A :class:`Subject` is one lock
object used by one actor, with the same calls whatever the kind (a ``Semaphore`` of one
permit acquires by taking its permit).

The primitives without the common lock API (a ``CountDownLatch``, a ``Barrier``: the kinds
table's rows that are no ``lock_api`` and no use of another kind) are :data:`OTHERS`, rows
with ``lock_api=False``: they get the generic tests that are about any primitive (bad input
before I/O, a TTL on every key, no secret in ``repr``), through :meth:`Subject.take` and
:meth:`Subject.give` (their own first and last step), not the lock API's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

import redislock
from redislock import AcquireTimeoutError
from redislock._core import kinds


@dataclass
class Env:
    """The clients of one test: the lock's own client(s) per flavour, and admin clients
    (decoded) that look at and tamper with what is in Redis."""

    client: Any
    """A ``redis.Redis`` (tests of bad input swap the flavours' clients)."""
    aclient: Any
    """A ``redis.asyncio.Redis``."""
    masters: list[Any]
    amasters: list[Any]
    admins: list[redis.Redis]
    """One admin per server the kind uses (the single server, or each Redlock master)."""


Build = Callable[[Env, str, dict[str, Any]], Any]


@dataclass(frozen=True)
class Kind:
    """One primitive in one flavour."""

    id: str
    flavour: str
    """``"sync"`` or ``"asyncio"``."""
    build: Build
    """A new lock object on ``name`` with keyword ``options``."""
    exclusive: bool = True
    """One holder at a time (False: a shared read lock)."""
    fences: str = "one"
    """``"one"``: ``fencing_token``; ``"per_name"``: ``fencing_tokens`` (a set of names)."""
    woken: bool = True
    """A waiter is woken by the release (False: Redlock retries after a random delay)."""
    quorum: bool = False
    """Over the Redlock masters instead of the single server."""
    permit: bool = False
    """Acquired by taking a permit (``Semaphore``)."""
    lock_api: bool = True
    """Its holds follow the common lock API (False: one of :data:`OTHERS`)."""
    duration: str = "ttl"
    """Its keyword in seconds (a latch's ``ttl``, a barrier's party ``lease``)."""
    take: str = "acquire"
    """Its method that starts a use (a latch's ``try_set_count``, a barrier's ``enter``)."""
    give: str = "release"
    """Its method that ends it (a latch's ``count_down``, a barrier's ``leave``)."""
    secret: bool = True
    """It holds an owner token while in use, which nothing may show (a latch holds none)."""

    @property
    def asyncio(self) -> bool:
        return self.flavour == "asyncio"

    def names(self, name: str) -> list[str]:
        """The lock names an object built on ``name`` uses."""
        return [name, f"{name}:b"] if self.fences == "per_name" else [name]


REQUIRED: dict[str, dict[str, Any]] = {
    "Semaphore": {"permits": 1},
    "CountDownLatch": {"count": 1},
    "Barrier": {"parties": 1},
}
"""The arguments a kind needs besides its client(s) and name(s), for a generic row (a
``Semaphore`` of one permit acquires as a lock does; a latch of count 1 is done by one
count-down; a barrier of one party opens as it enters)."""

USES: dict[str, dict[str, Any]] = {
    "CountDownLatch": {
        "take": "try_set_count",
        "give": "count_down",
        "secret": False,  # its op ids are new per call, and nothing is held
    },
    "Barrier": {"take": "enter", "give": "leave", "duration": "lease"},
}
"""How each of :data:`OTHERS` is used: its first and last step, its keyword in seconds."""


def _maker(row: kinds.KindSpec, flavour: str, part: kinds.Part | None) -> Build:
    """A builder of ``row``'s object in ``flavour`` (then its ``part``, if one: a side)."""
    cls = getattr(redislock, row.name if flavour == "sync" else row.asyncio_name)
    extra = REQUIRED.get(row.name, {})

    def build(e: Env, name: str, options: dict[str, Any]) -> Any:
        if row.clients == "masters":
            where = e.masters if flavour == "sync" else e.amasters
        else:
            where = e.client if flavour == "sync" else e.aclient
        what: Any = _names(name) if row.names == "several" else name
        obj = cls(where, what, **extra, **options)
        return getattr(obj, part.method)() if part is not None else obj

    return build


def _rows(row: kinds.KindSpec) -> list[Kind]:
    """The generic rows of one kinds-table row, both flavours: the kind itself if it is a
    holder, a row per side it hands out (a ReadWriteLock's), or the kind acquired by taking
    a permit (a Semaphore's ``acquire`` returns the holder)."""
    caps: dict[str, Any] = {
        "fences": "per_name" if row.names == "several" else "one",
        "quorum": row.clients == "masters",
        "woken": row.clients == "one",  # Redlock retries after a random delay
    }
    targets: list[tuple[str, kinds.Part | None, dict[str, Any]]]
    if row.holder:
        targets = [(row.name, None, caps)]
    else:
        targets = [
            (row.name, None, {**caps, "permit": True, "exclusive": part.exclusive})
            if part.method == "acquire"
            else (part.name, part, {**caps, "exclusive": part.exclusive})
            for part in row.parts
        ]
    return [
        Kind(kind_id, flavour, _maker(row, flavour, part), **kind_caps)
        for kind_id, part, kind_caps in targets
        for flavour in ("sync", "asyncio")
    ]


def _names(name: str) -> list[str]:
    return [name, f"{name}:b"]


KINDS: list[Kind] = [kind for row in kinds.KINDS if row.lock_api for kind in _rows(row)]
"""Every primitive whose holds follow the common lock API (the kinds table's ``lock_api``
rows, redislock._core.kinds), in both flavours: a new kind's row there gives it these."""

OTHERS: list[Kind] = [
    Kind(row.name, flavour, _maker(row, flavour, None), exclusive=False, lock_api=False, **use)
    for row in kinds.KINDS
    if not row.lock_api and row.primitive
    for use in [USES[row.name]]
    for flavour in ("sync", "asyncio")
]
"""Every primitive without the common lock API (the kinds table's rows that are neither
``lock_api`` nor a use of another kind), in both flavours; :data:`USES` says how."""


def held_in_redis(kind: Kind, admins: list[redis.Redis], name: str) -> bool:
    """Whether a majority of ``admins``' servers show a hold of the kind's names built on
    ``name`` (the single server, or the Redlock masters)."""
    votes = 0
    for admin in admins:
        infos = [redislock.inspect(admin, n) for n in kind.names(name)]
        votes += any(info.held for info in infos)
    return votes > len(admins) // 2


def rows(*, every: bool = False, **wanted: Any) -> list[Any]:
    """pytest params of the rows whose capabilities equal ``wanted`` (ids
    ``<Kind>-<flavour>``): of :data:`KINDS`, and with ``every`` of :data:`OTHERS` too."""
    import pytest

    return [
        pytest.param(k, id=f"{k.id}-{k.flavour}")
        for k in (KINDS + OTHERS if every else KINDS)
        if all(getattr(k, cap) == value for cap, value in wanted.items())
    ]


class Actor:
    """One owner of holds: a thread of its own (sync), or the calling task (asyncio)."""

    def __init__(self, kind: Kind) -> None:
        self._pool = None if kind.asyncio else concurrent.futures.ThreadPoolExecutor(1)

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` as this owner; awaited if it is a coroutine."""
        if self._pool is None:
            result = fn(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class Subject:
    """One lock object used by one actor, with the same calls for every kind."""

    def __init__(self, kind: Kind, obj: Any, actor: Actor) -> None:
        self.kind = kind
        self.obj = obj
        self.actor = actor
        self.permit: Any = None

    @property
    def holder(self) -> Any:
        """What holds the lease: the object, or a semaphore's permit (None before one)."""
        return self.permit if self.kind.permit else self.obj

    async def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        if not self.kind.permit:
            return bool(await self.actor.call(self.obj.acquire, blocking, timeout))
        try:
            self.permit = await self.actor.call(self.obj.acquire, blocking, timeout)
        except AcquireTimeoutError:
            return False
        return True

    async def release(self) -> None:
        await self.actor.call(self.holder.release)

    async def take(self) -> bool:
        """A use's first step: :meth:`acquire`, or the kind's own (``Kind.take``)."""
        if self.kind.lock_api:
            return await self.acquire()
        return bool(await self.actor.call(getattr(self.obj, self.kind.take)))

    async def give(self) -> None:
        """A use's last step: :meth:`release`, or the kind's own (``Kind.give``)."""
        if self.kind.lock_api:
            await self.release()
            return
        await self.actor.call(getattr(self.obj, self.kind.give))

    async def token(self) -> str | None:
        """The owner token the object holds now (None: it holds none): a holder's
        ``token`` (read as this actor); a barrier party's is its lease core's."""
        if self.kind.lock_api:
            token: str | None = await self.view("token")
            return token
        holding = getattr(self.obj._core, "holding", None)  # a Barrier's LockCore
        return None if holding is None else str(holding.token)

    async def enter(self) -> None:
        """What ``with`` / ``async with`` does on entry."""
        if self.kind.permit:
            self.permit = await self.actor.call(self.obj.acquire)
            return
        await self.actor.call(self.obj.__aenter__ if self.kind.asyncio else self.obj.__enter__)

    async def remaining(self) -> float | None:
        value: float | None = await self.actor.call(self.holder.remaining)
        return value

    async def view(self, attribute: str) -> Any:
        """An attribute of the holder (``fencing_token``, ``lost``, ``token``), read as
        this actor (a reentrant lock answers for the calling thread or task); None before
        a semaphore's first permit."""
        holder = self.holder
        if holder is None:
            return None
        return await self.actor.call(getattr, holder, attribute)

    async def fence(self) -> Any:
        """The hold's fencing token(s): an int, a dict per name, or None when not held."""
        per_name = self.kind.fences == "per_name"
        return await self.view("fencing_tokens" if per_name else "fencing_token")
