# SPDX-License-Identifier: MIT
"""redis-py's own asyncio lock tests (redis-py 8.1.0's tests/test_asyncio/test_lock.py,
vendored verbatim in upstream_lock.py) run against
:class:`redislock.compat.AsyncRedisPyLock`, through ``redis.asyncio.Redis.lock(...,
lock_class=AsyncRedisPyLock)`` as its users would.

The tests the drop-in does not pass, by design, are marked ``xfail(strict=True)`` with the
reason, and listed in docs/migrating-from-redis-py.md.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

from redislock.compat import AsyncRedisPyLock
from tests.redispy.aio import upstream_lock

pytestmark = pytest.mark.dropins  # dev.py's STAGES: where else it runs

NO_TTL = (
    "redis-py's timeout=None writes the key without a TTL (held for ever if the holder "
    "dies); the drop-in gives it a watchdog lease, so r.ttl() is the lease, not -1"
)


class TestDropInAsyncLock(upstream_lock.TestLock):
    """Every test of redis-py's asyncio ``TestLock``, with the drop-in as the lock class."""

    def get_lock(self, redis: redis.asyncio.Redis, *args: Any, **kwargs: Any) -> Any:
        kwargs["lock_class"] = AsyncRedisPyLock
        return redis.lock(*args, **kwargs)

    @pytest.mark.xfail(reason=NO_TTL, raises=AssertionError, strict=True)
    async def test_lock(self, r: redis.asyncio.Redis) -> None:
        await super().test_lock(r)  # type: ignore[no-untyped-call]

    @pytest.mark.xfail(reason=NO_TTL, raises=AssertionError, strict=True)
    async def test_lock_token(self, r: redis.asyncio.Redis) -> None:
        await super().test_lock_token(r)  # type: ignore[no-untyped-call]

    @pytest.mark.xfail(reason=NO_TTL, raises=AssertionError, strict=True)
    async def test_lock_token_thread_local_false(self, r: redis.asyncio.Redis) -> None:
        await super().test_lock_token_thread_local_false(r)  # type: ignore[no-untyped-call]


def test_the_drop_in_is_what_the_tests_ran() -> None:
    """The harness checks itself: ``get_lock`` gives the drop-in, not redis-py's Lock."""
    client = redis.asyncio.Redis(unix_socket_path="/nonexistent")  # no I/O: only built
    lock = TestDropInAsyncLock().get_lock(client, "foo")
    assert type(lock) is AsyncRedisPyLock
