# SPDX-License-Identifier: MIT
"""redislock's pytest plugin (redislock/testing/pytest_plugin.py), used as an application's
test suite would use it: a separate pytest run (``pytester``, in a subprocess, so the plugin
comes from the installed entry point) of a user's test file that asks for the fixtures."""

from __future__ import annotations

import pytest

from redislock.server import RedisProcess

pytest_plugins = ["pytester"]

USER_TESTS = """
import asyncio

import pytest
import redis

from redislock import AsyncLock, Lock


def test_the_job_runs_once(redislock_client):
    first = Lock(redislock_client, "nightly", ttl=10)
    assert first.acquire(blocking=False)
    assert not Lock(redislock_client, "nightly", ttl=10).acquire(blocking=False)
    first.release()


def test_each_test_starts_from_an_empty_server(redislock_client):
    assert redislock_client.dbsize() == 0
    redislock_client.set("left-over", 1)


def test_the_url_reaches_the_same_server(redislock_url, redislock_client):
    redislock_client.set("k", "v")
    other = redis.Redis.from_url(redislock_url)
    assert other.get("k") == b"v"
    other.close()


async def test_asyncio(redislock_async_client):
    lock = AsyncLock(redislock_async_client, "async-job", ttl=10)
    async with lock:
        assert lock.fencing_token is not None
"""


def test_a_users_suite_runs_on_the_plugins_private_server(
    pytester: pytest.Pytester, redis_server: RedisProcess
) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    result = pytester.runpytest_subprocess(
        f"--redislock-server={redis_server.binary}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=4)


def test_no_server_is_an_error_never_a_skip(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    result = pytester.runpytest_subprocess(
        "--redislock-server=/nonexistent/redis-server", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines(["*redis-server*"])
