# SPDX-License-Identifier: MIT
"""Drop-ins for redis-py's ``Lock``: :class:`RedisPyLock` (``redis.Redis.lock(...,
lock_class=RedisPyLock)``) and :class:`AsyncRedisPyLock` (``redis.asyncio.Redis.lock(...,
lock_class=AsyncRedisPyLock)``).

They take redis-py's arguments, have its methods and raise its exceptions, and write the
same key and value, so a fleet moves from redis-py's ``Lock`` process by process while old
and new processes exclude each other on one name. They add a fencing token
(``fencing_token``), a watchdog lease instead of a key without TTL for ``timeout=None``,
loss detection (``lost``, ``on_lost``) and idempotent calls under the client's retries.
docs/migrating-from-redis-py.md lists every difference and the redis-py tests that do not
pass (and why).
"""

from __future__ import annotations

from redislock._core.compat import CompatArgumentError, LeaseLostError
from redislock.aio.compat import AsyncRedisPyLock
from redislock.sync.compat import RedisPyLock

__all__ = ["AsyncRedisPyLock", "CompatArgumentError", "LeaseLostError", "RedisPyLock"]
