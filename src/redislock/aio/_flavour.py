# SPDX-License-Identifier: MIT
"""What the asyncio shells need that differs from the sync flavour by design: the client
types, who owns a reentrant hold (the running task), and how to sleep. Hand-written; its
sync twin is :mod:`redislock.sync._flavour`."""

from __future__ import annotations

import asyncio
from typing import Any, Final, TypeAlias

import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.lock

from redislock.errors import LockUsageError

NAME: Final = "asyncio"
CLIENTS: Final = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
CLIENTS_TEXT: Final = "a redis.asyncio.Redis or redis.asyncio.RedisCluster"

Master: TypeAlias = redis.asyncio.Redis
"""The client type of one Redlock master."""
MASTER_TEXT: Final = "a redis.asyncio.Redis"

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
