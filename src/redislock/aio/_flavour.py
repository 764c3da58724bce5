# SPDX-License-Identifier: MIT
"""What the asyncio shells need that differs from the sync flavour by design: the client
types, who owns a reentrant hold (the running task), and how to sleep. Hand-written; its
sync twin is :mod:`redislock.sync._flavour`."""

from __future__ import annotations

import asyncio
from typing import Any, Final, TypeAlias

import redis.asyncio
import redis.asyncio.cluster

from redislock.errors import LockUsageError

NAME: Final = "asyncio"
CLIENTS: Final = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
CLIENTS_TEXT: Final = "a redis.asyncio.Redis or redis.asyncio.RedisCluster"

Master: TypeAlias = redis.asyncio.Redis
"""The client type of one Redlock master."""
MASTER_TEXT: Final = "a redis.asyncio.Redis"

Owner: TypeAlias = "asyncio.Task[Any]"
"""Who owns a reentrant hold: the asyncio task (never a thread-local)."""

sleep = asyncio.sleep


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
