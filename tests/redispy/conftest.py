# SPDX-License-Identifier: MIT
"""Fixtures that redis-py's own lock tests (upstream_lock.py) expect, on the suite's server:
``r`` (a bytes client on a flushed server, redis-py's default settings) and ``_get_client``
(redis-py's helper for more clients), plus its ``onlynoncluster`` marker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from redislock.server import RedisProcess


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "onlynoncluster: redis-py's marker (not on a cluster)")


def _get_client(cls: type[redis.Redis], request: pytest.FixtureRequest, **kwargs: Any) -> Any:
    """redis-py's helper: a client of ``cls`` on the suite's server (``kwargs`` override)."""
    server: RedisProcess = request.getfixturevalue("redis_server")
    client = cls(**{**server.client_kwargs(), **kwargs})
    request.addfinalizer(client.close)
    return client


@pytest.fixture
def r(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """redis-py's ``r``: a bytes client on a flushed server."""
    client = redis.Redis(**redis_server.client_kwargs())
    client.flushall()
    yield client
    client.close()
