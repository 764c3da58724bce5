# SPDX-License-Identifier: MIT
"""Fixtures that redis-py's asyncio lock tests (upstream_lock.py) expect, on the suite's
server: ``r`` (a ``redis.asyncio.Redis`` on a flushed server, redis-py's default settings)
and ``create_redis`` (a factory of more such clients, closed at the end)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio

from redislock.server import RedisProcess


@pytest.fixture
async def r(redis_server: RedisProcess) -> AsyncIterator[redis.asyncio.Redis]:
    """redis-py's ``r``: a bytes asyncio client on a flushed server."""
    client = redis.asyncio.Redis(**redis_server.client_kwargs())
    await client.flushall()
    yield client
    await client.aclose()


@pytest.fixture
async def create_redis(
    redis_server: RedisProcess,
) -> AsyncIterator[Callable[..., Awaitable[redis.asyncio.Redis]]]:
    """redis-py's ``create_redis``: ``await create_redis(**kwargs)`` makes another client."""
    made: list[redis.asyncio.Redis] = []

    async def create(**kwargs: Any) -> redis.asyncio.Redis:
        client = redis.asyncio.Redis(**{**redis_server.client_kwargs(), **kwargs})
        made.append(client)
        return client

    yield create
    for client in made:
        await client.aclose()
