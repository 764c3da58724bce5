# SPDX-License-Identifier: MIT
"""Five independent masters for the Redlock family's tests (``test_redlock.py``,
``test_multiredlock.py``, ``test_redlock_faults.py``): their clients with redis-py's default
settings, and the fixtures
``servers`` (module-scoped processes), ``admins``, ``masters`` and ``amasters`` (flushed
per test), registered in ``conftest.py``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock.aio import _fanout
from redislock.server import RedisProcess
from tests import clients

N_MASTERS = 5
LANE_SETTLE = 30.0
"""Seconds a test's end waits for its lanes: a command under redis-py's defaults ends
within a few socket timeouts (5 s each) and retries."""


def client_state(client: Any) -> Any:
    """What redislock keeps about ``client`` in this process (its flavour's
    ``ClientState``: a master's health and lane)."""
    from redislock.aio import _state as aio_state
    from redislock.sync import _state as sync_state

    if inspect.iscoroutinefunction(client.execute_command):
        return aio_state.state_of(client)
    return sync_state.state_of(client)


def master(server: RedisProcess, **kwargs: Any) -> redis.Redis:
    """A master's client as users build it: redis-py's defaults (socket timeout 5 s,
    connection retries with back-off), which Redlock must cope with."""
    return clients.sync_client(**server.client_kwargs(), **kwargs)


def amaster(server: RedisProcess, **kwargs: Any) -> redis.asyncio.Redis:
    """The asyncio twin of :func:`master` (redis-py's defaults)."""
    return clients.async_client(**server.client_kwargs(), **kwargs)


@pytest.fixture(scope="module")
def servers(short_tmp: Path) -> Iterator[list[RedisProcess]]:
    """Five independent masters for the module."""
    procs = [RedisProcess(short_tmp / "redlock" / f"m{i}", name=f"m{i}") for i in range(N_MASTERS)]
    try:
        for proc in procs:
            proc.start()
        yield procs
    finally:
        for proc in procs:
            proc.stop()


@pytest.fixture
def admins(servers: list[RedisProcess]) -> Iterator[list[redis.Redis]]:
    """Decoded clients on every master, flushed (data and script cache)."""
    for server in servers:
        server.start()  # a no-op unless an earlier test failed to restore it
    clients = [
        redis.Redis(**s.client_kwargs(), decode_responses=True, socket_timeout=10) for s in servers
    ]
    for client in clients:
        client.flushall()
        client.script_flush()
    yield clients
    for client in clients:
        client.close()


@pytest.fixture
def masters(servers: list[RedisProcess], admins: list[redis.Redis]) -> Iterator[list[redis.Redis]]:
    """The lock's clients on the five flushed masters (bytes replies)."""
    clients = [master(s) for s in servers]
    yield clients
    for client in clients:
        client.close()


@pytest.fixture
async def amasters(
    servers: list[RedisProcess], admins: list[redis.Redis]
) -> AsyncIterator[list[redis.asyncio.Redis]]:
    """asyncio clients on the five flushed masters (decoded replies, for variety)."""
    clients = [amaster(s, decode_responses=True) for s in servers]
    yield clients
    await close_amasters(clients)


async def close_amasters(clients: Sequence[Any]) -> None:
    """Close asyncio master clients once their lanes' background commands have ended.

    A lane's late command goes on after its round (a paused master's, say); closed under
    it, redis-py's retry reconnects and the lane then keeps that connected connection
    checked out, to be garbage-collected unclosed (a ResourceWarning in a later test:
    CI, stop 33). Waiting for the lanes first leaves every connection for ``aclose()``.
    """
    loop = asyncio.get_running_loop()
    running = [t for t in _fanout._workers if t.get_loop() is loop and not t.done()]
    if running:
        _, pending = await asyncio.wait(running, timeout=LANE_SETTLE)
        assert not pending, f"{len(pending)} lane task(s) still running after {LANE_SETTLE} s"
    for client in clients:
        await client.aclose()
