# SPDX-License-Identifier: MIT
"""What the sync shells need that differs from the asyncio flavour by design: the client
types, who owns a reentrant hold (the thread), and how to sleep. Hand-written; its asyncio
twin is :mod:`redislock.aio._flavour`."""

from __future__ import annotations

import threading
import time
from typing import Annotated, Final, TypeAlias, TypeVar

import redis
import redis.cluster
import redis.lock

NAME: Final = "sync"
CLIENTS: Final = (redis.Redis, redis.cluster.RedisCluster)
CLIENTS_TEXT: Final = "a redis.Redis or redis.cluster.RedisCluster"

Client: TypeAlias = redis.Redis | redis.cluster.RedisCluster
"""The client types the shells take (an asyncio client or a URL fails the type check)."""

Master: TypeAlias = redis.Redis
"""The client type of one Redlock master."""
MASTER_TEXT: Final = "a redis.Redis"

RedisPyLockBase: TypeAlias = redis.lock.Lock
"""redis-py's lock class, which :class:`redislock.compat.RedisPyLock` extends."""

Owner: TypeAlias = int
"""Who owns a reentrant hold: the thread (its ``threading.get_ident()``)."""

sleep = time.sleep


def current_owner() -> int | None:
    """The calling thread (never None: every caller is a thread)."""
    return threading.get_ident()


def owner() -> int:
    """The calling thread."""
    return threading.get_ident()


class Cancelled(BaseException):
    """Never raised: threads are not cancelled (the asyncio flavour's is
    ``asyncio.CancelledError``)."""


def cancel_mark() -> int:
    """0: threads are not cancelled (the asyncio flavour counts cancellation requests)."""
    return 0


def cancelled_since(mark: int) -> bool:
    """False: threads are not cancelled (see the asyncio flavour)."""
    return False


HeldT = TypeVar("HeldT")

Acquiring: TypeAlias = Annotated[HeldT, "the hold itself"]
"""What an acquire that returns a hold gives: in the sync flavour the hold itself (already
a context manager); the asyncio flavour's ``AsyncAcquiring`` can also be used in ``async
with`` directly."""


def acquiring(held: HeldT) -> HeldT:
    """The hold itself (see :data:`Acquiring`)."""
    return held
