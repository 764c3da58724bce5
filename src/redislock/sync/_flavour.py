# SPDX-License-Identifier: MIT
"""What the sync shells need that differs from the asyncio flavour by design: the client
types, who owns a reentrant hold (the thread), and how to sleep. Hand-written; its asyncio
twin is :mod:`redislock.aio._flavour`."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Annotated, Final, TypeAlias, TypeVar, Union

import redis
import redis.cluster
import redis.lock

from redislock import _clients

NAME: Final = "sync"
CLIENTS: Final = _clients.SYNC_CLIENTS
"""The client classes the shells take: redis-py's, and valkey-py's when it is installed."""
CLIENTS_TEXT: Final = _clients.SYNC_CLIENTS_TEXT

REDIS_PY_CLIENTS: Final = (redis.Redis, redis.cluster.RedisCluster)
"""The client classes the redis-py drop-in takes (:mod:`redislock.compat`: redis-py's only)."""
REDIS_PY_CLIENTS_TEXT: Final = "a redis.Redis or redis.cluster.RedisCluster"

MASTERS: Final = _clients.SYNC_MASTERS
"""The client classes of one Redlock master."""
MASTER_TEXT: Final = _clients.SYNC_MASTERS_TEXT

if TYPE_CHECKING:
    import valkey
    import valkey.cluster

    Client: TypeAlias = (
        redis.Redis | redis.cluster.RedisCluster | valkey.Valkey | valkey.cluster.ValkeyCluster
    )
    """The client types the shells take (an asyncio client or a URL fails the type check)."""

    Master: TypeAlias = redis.Redis | valkey.Valkey
    """The client type of one Redlock master."""
else:  # the same unions, of the libraries installed (valkey-py is optional)
    Client = Union[CLIENTS]  # noqa: UP007
    Master = Union[MASTERS]  # noqa: UP007

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
