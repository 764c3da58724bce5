# SPDX-License-Identifier: MIT
"""Inspect a lock of any kind from Python: who holds it, who waits, how long the leases last;
for a CountDownLatch its count and generation, for a Barrier its round.

:func:`inspect` (sync client) and :func:`ainspect` (asyncio client) return a frozen
:class:`LockInfo`, what ``redislock inspect`` prints. One read-only script reads every key of
the name at once (one round trip, one consistent snapshot; the keys share a hash tag, so
Redis Cluster clients work too) and nothing is written. No owner token is ever returned:
holds and waiters are identified by their short ``token_tag`` (and a permit by its ``id``).
"""

from __future__ import annotations

from redislock import _clients
from redislock._core.inspection import (
    BarrierInfo,
    HoldInfo,
    Kind,
    LatchInfo,
    LockInfo,
    PermitsInfo,
    Role,
    WaiterInfo,
    inspection_flow,
)
from redislock._core.keys import DEFAULT_PREFIX
from redislock.aio._driver import run as arun_flow
from redislock.aio._flavour import Client as AsyncClient
from redislock.errors import LockConfigError
from redislock.sync._driver import run as run_flow
from redislock.sync._flavour import Client

__all__ = [
    "BarrierInfo",
    "HoldInfo",
    "Kind",
    "LatchInfo",
    "LockInfo",
    "PermitsInfo",
    "Role",
    "WaiterInfo",
    "ainspect",
    "inspect",
]

_ASYNC_CLIENTS = _clients.ASYNC_CLIENTS
_SYNC_CLIENTS = _clients.SYNC_CLIENTS


def inspect(client: Client, name: str, *, prefix: str = DEFAULT_PREFIX) -> LockInfo:
    """What is stored under lock ``name``, whatever its kind (Lock, RLock, ReadWriteLock,
    FairLock, Semaphore, a MultiLock name, CountDownLatch, Barrier), as one snapshot;
    read-only.

    Args:
        client: a sync ``redis.Redis`` or ``redis.cluster.RedisCluster``, or valkey-py's
            ``valkey.Valkey`` or ``valkey.cluster.ValkeyCluster`` (either
            ``decode_responses`` setting).
        name: the lock name, as given to the lock.
        prefix: the key prefix the lock was built with.

    Returns:
        A :class:`LockInfo`; durations in it are seconds, by the server's clock (TIME).
        A name nobody ever used gives ``kind="none"``, ``held=False``.

    Raises:
        LockConfigError: a bad ``name`` or ``prefix``, or ``client`` is not one of those
            (an asyncio client: use :func:`ainspect`); raised before any I/O.
        redis.exceptions.RedisError: from the client, as redis-py raised it (e.g.
            ``ConnectionError``, ``TimeoutError``, ``NoPermissionError``); valkey-py's
            ``valkey.exceptions.ValkeyError`` from a valkey-py client.
        UnexpectedReplyError: the server replied something redislock cannot read.
    """
    if not isinstance(client, _SYNC_CLIENTS):
        raise LockConfigError(
            f"inspect() needs {_clients.SYNC_CLIENTS_TEXT} (for asyncio use "
            f"ainspect()), got {type(client).__name__}"
        )
    return run_flow(client, inspection_flow(name, prefix))


async def ainspect(
    client: AsyncClient,
    name: str,
    *,
    prefix: str = DEFAULT_PREFIX,
) -> LockInfo:
    """The asyncio twin of :func:`inspect`: the same snapshot, through an asyncio client.

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``, or
            valkey-py's ``valkey.asyncio.Valkey`` or ``valkey.asyncio.cluster.ValkeyCluster``
            (either ``decode_responses`` setting).
        name: the lock name, as given to the lock.
        prefix: the key prefix the lock was built with.

    Returns:
        A :class:`LockInfo`, as :func:`inspect` returns it (durations in seconds).

    Raises:
        LockConfigError: a bad ``name`` or ``prefix``, or ``client`` is not one of those
            (a sync client: use :func:`inspect`); raised before any I/O.
        redis.exceptions.RedisError: from the client, as redis-py raised it (a valkey-py
            client raises ``valkey.exceptions.ValkeyError``).
        UnexpectedReplyError: the server replied something redislock cannot read.
    """
    if not isinstance(client, _ASYNC_CLIENTS):
        raise LockConfigError(
            f"ainspect() needs {_clients.ASYNC_CLIENTS_TEXT} "
            f"(for a sync client use inspect()), got {type(client).__name__}"
        )
    return await arun_flow(client, inspection_flow(name, prefix))
