# SPDX-License-Identifier: MIT
"""RLock, ReadWriteLock, Semaphore and FairLock with redis-py's DEFAULT clients when a reply is lost
after the command took effect (the client sends it again on a new connection): a
re-entry and a decrement count once, an "add" extend adds once, a last release sent again
answers "released" (the hold scripts' op ids and tombstones), never a false NotOwnedError.

A :class:`~redislock.testing.FaultProxy` sits in front of the suite's server; its one-shot
``lose_reply`` fault is set right before the call under test.
"""

from __future__ import annotations

import inspect as pyinspect
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import (
    AsyncFairLock,
    AsyncReadWriteLock,
    AsyncRLock,
    AsyncSemaphore,
    FairLock,
    ReadWriteLock,
    RLock,
    Semaphore,
    inspect,
)
from redislock._core.keys import HoldKeys, LockKeys
from redislock.server import RedisProcess
from redislock.testing import FaultProxy

FLAVOURS = ["sync", "asyncio"]


@pytest.fixture
def proxy(redis_server: RedisProcess) -> Iterator[FaultProxy]:
    assert redis_server.socket_path is not None
    made = FaultProxy(redis_server.socket_path).start()
    yield made
    made.stop()


@pytest.fixture
def admin(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    client = redis.Redis(**redis_server.client_kwargs(), decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(params=FLAVOURS)
async def client(request: pytest.FixtureRequest, proxy: FaultProxy) -> AsyncIterator[Any]:
    """A client with redis-py's default settings, through the proxy, already connected."""
    if request.param == "sync":
        sync = redis.Redis(**proxy.client_kwargs())
        sync.ping()
        yield sync
        sync.close()
    else:
        aio = redis.asyncio.Redis(**proxy.client_kwargs())
        await aio.ping()
        yield aio
        await aio.aclose()


def is_async(client: Any) -> bool:
    return isinstance(client, redis.asyncio.Redis)


async def call(value: Any) -> Any:
    """The result of a sync call, or of an asyncio one."""
    return await value if pyinspect.isawaitable(value) else value


def lose_next_reply(proxy: FaultProxy) -> int:
    proxy.set_fault("lose_reply")
    return proxy.lost_replies


def counts(admin: redis.Redis, name: str) -> list[int]:
    return [h.hold_count for h in inspect(admin, name).holders]


async def test_rlock_reentry_and_decrements_count_once(
    client: Any, proxy: FaultProxy, admin: redis.Redis
) -> None:
    lock = (AsyncRLock if is_async(client) else RLock)(client, "rr", ttl=30)
    assert await call(lock.acquire())
    before = lose_next_reply(proxy)
    assert await call(lock.acquire())  # the re-entry's reply is lost; sent again
    assert proxy.lost_replies == before + 1
    assert lock.hold_count() == 2
    assert counts(admin, "rr") == [2]
    lose_next_reply(proxy)
    await call(lock.release())  # a decrement sent again
    assert lock.hold_count() == 1
    assert counts(admin, "rr") == [1]
    lose_next_reply(proxy)
    await call(lock.release())  # the last release sent again: no NotOwnedError
    assert proxy.lost_replies == before + 3
    assert lock.hold_count() == 0
    assert counts(admin, "rr") == []
    assert await call(lock.acquire())  # a new hold replaces the tombstone
    assert counts(admin, "rr") == [1]
    await call(lock.release())


async def test_rlock_add_extend_adds_once(
    client: Any, proxy: FaultProxy, admin: redis.Redis
) -> None:
    lock = (AsyncRLock if is_async(client) else RLock)(client, "re", ttl=10)
    assert await call(lock.acquire())
    before = lose_next_reply(proxy)
    await call(lock.extend(20))
    assert proxy.lost_replies == before + 1
    (holder,) = inspect(admin, "re").holders
    assert holder.lease_remaining is not None
    assert 28.0 <= holder.lease_remaining <= 30.0  # 10 + 20 once, not 50
    remaining = await call(lock.remaining())
    assert remaining is not None
    assert remaining <= holder.lease_remaining + 0.05
    await call(lock.release())


@pytest.mark.parametrize("side", ["read", "write"])
async def test_read_write_release_sent_again_is_no_error(
    client: Any, proxy: FaultProxy, admin: redis.Redis, side: str
) -> None:
    rw = (AsyncReadWriteLock if is_async(client) else ReadWriteLock)(client, "rw", ttl=30)
    lock = rw.read() if side == "read" else rw.write()
    assert await call(lock.acquire())
    before = lose_next_reply(proxy)
    await call(lock.release())
    assert proxy.lost_replies == before + 1
    assert not inspect(admin, "rw").held
    other = rw.write() if side == "read" else rw.read()
    assert await call(other.acquire(blocking=False))  # nothing left that blocks
    await call(other.release())


async def test_semaphore_permit_release_sent_again_is_no_error(
    client: Any, proxy: FaultProxy, admin: redis.Redis
) -> None:
    sem = (AsyncSemaphore if is_async(client) else Semaphore)(client, "sm", 2, ttl=30)
    permit = await call(sem.acquire())
    before = lose_next_reply(proxy)
    await call(permit.release())
    assert proxy.lost_replies == before + 1
    assert await call(sem.available()) == 2
    assert not inspect(admin, "sm").held
    # the hash is gone; the released permit is remembered for a minute, with a TTL
    assert not admin.exists(LockKeys.for_name("sm").lock)
    ttl = admin.pttl(HoldKeys.for_name("sm").released)
    assert 0 < ttl <= 60_000


async def test_fairlock_release_sent_again_is_no_error(
    client: Any, proxy: FaultProxy, admin: redis.Redis
) -> None:
    lock = (AsyncFairLock if is_async(client) else FairLock)(client, "fl", ttl=30)
    assert await call(lock.acquire())
    before = lose_next_reply(proxy)
    await call(lock.release())  # no false LockLostError: the done key remembers it
    assert proxy.lost_replies == before + 1
    assert not inspect(admin, "fl").held
    assert await call(lock.acquire())  # and it can be taken again
    await call(lock.release())
