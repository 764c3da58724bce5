# SPDX-License-Identifier: MIT
"""What the asyncio shells need that differs from the sync flavour by design: the client
types, who owns a reentrant hold (the running task), and how to sleep. Hand-written; its
sync twin is :mod:`redislock.sync._flavour`."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar, Union

import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.lock

from redislock import _clients
from redislock.errors import LockUsageError

NAME: Final = "asyncio"
CLIENTS: Final = _clients.ASYNC_CLIENTS
"""The client classes the shells take: redis-py's, and valkey-py's when it is installed."""
CLIENTS_TEXT: Final = _clients.ASYNC_CLIENTS_TEXT

REDIS_PY_CLIENTS: Final = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
"""The client classes the redis-py drop-in takes (:mod:`redislock.compat`: redis-py's only)."""
REDIS_PY_CLIENTS_TEXT: Final = "a redis.asyncio.Redis or redis.asyncio.RedisCluster"

MASTERS: Final = _clients.ASYNC_MASTERS
"""The client classes of one Redlock master."""
MASTER_TEXT: Final = _clients.ASYNC_MASTERS_TEXT

if TYPE_CHECKING:
    import valkey.asyncio
    import valkey.asyncio.cluster

    Client: TypeAlias = (
        redis.asyncio.Redis
        | redis.asyncio.cluster.RedisCluster
        | valkey.asyncio.Valkey
        | valkey.asyncio.cluster.ValkeyCluster
    )
    """The client types the shells take (a sync client or a URL fails the type check)."""

    Master: TypeAlias = redis.asyncio.Redis | valkey.asyncio.Valkey
    """The client type of one Redlock master."""
else:  # the same unions, of the libraries installed (valkey-py is optional)
    Client = Union[CLIENTS]  # noqa: UP007
    Master = Union[MASTERS]  # noqa: UP007

RedisPyLockBase: TypeAlias = redis.asyncio.lock.Lock
"""redis-py's asyncio lock class, which :class:`redislock.compat.AsyncRedisPyLock` extends."""

Owner: TypeAlias = "asyncio.Task[Any]"
"""Who owns a reentrant hold: the asyncio task (never a thread-local)."""

sleep = asyncio.sleep

Cancelled = asyncio.CancelledError
"""What a cancelled call raises."""


def current_owner() -> asyncio.Task[Any] | None:
    """The running task, or None (also outside a running event loop: local, I/O-free
    accessors such as ``repr()`` and ``hold_count()`` must work anywhere)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def owner() -> asyncio.Task[Any]:
    """The running task.

    Raises:
        LockUsageError: not called from inside an asyncio task.
    """
    task = asyncio.current_task()
    if task is None:
        raise LockUsageError("reentrant asyncio locks must be used from inside a task")
    return task


def cancel_mark() -> int:
    """The running task's count of cancellation requests (``Task.cancelling()``), to compare
    with :func:`cancelled_since` later; 0 outside a task."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


def cancelled_since(mark: int) -> bool:
    """Whether the running task was asked to cancel after :func:`cancel_mark` returned
    ``mark``, even if some library swallowed the ``CancelledError`` (Python 3.11 loses it
    in ``asyncio.wait_for`` around a send or read that completed at the same time, as
    redis.asyncio does whenever ``socket_timeout`` is set: CPython gh-86296)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > mark


HeldT = TypeVar("HeldT", bound=AbstractAsyncContextManager[Any])


class AsyncAcquiring(Coroutine[Any, Any, HeldT], Generic[HeldT]):
    """What an acquire that returns a hold gives (``AsyncSemaphore.acquire()``): await it
    for the hold, or use it directly in ``async with`` (which releases the hold at the
    end), as ``async with rw.read():`` works. It is the acquire's coroutine too
    (``asyncio.create_task(sem.acquire())`` still works). The sync flavour returns the hold
    itself."""

    __slots__ = ("_call", "_held")

    def __init__(self, call: Coroutine[Any, Any, HeldT]) -> None:
        self._call = call
        self._held: HeldT | None = None

    def __await__(self) -> Generator[Any, None, HeldT]:
        return self._call.__await__()

    def send(self, value: Any) -> Any:
        return self._call.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        if val is None and tb is None:  # the one-argument form (3 arguments: deprecated)
            return self._call.throw(typ)
        return self._call.throw(typ, val, tb)

    def close(self) -> None:
        self._call.close()

    async def __aenter__(self) -> HeldT:
        self._held = await self._call
        return self._held

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._held is not None  # (async with entered, so the acquire returned)
        return await self._held.__aexit__(exc_type, exc, tb)


def acquiring(call: Coroutine[Any, Any, HeldT]) -> AsyncAcquiring[HeldT]:
    """``call`` (an acquire) as an awaitable that is also an async context manager."""
    return AsyncAcquiring(call)
