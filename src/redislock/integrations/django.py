# SPDX-License-Identifier: MIT
"""Django's cache lock through django-redis, on redislock's lease.

django-redis's ``cache.lock(key, ...)`` returns redis-py's ``Lock``. With this client class
it returns :class:`redislock.compat.RedisPyLock` instead: the same arguments, key and value
(so processes still on plain django-redis exclude each other with these, both ways), plus a
fencing token, a watchdog lease for ``timeout=None`` (never a key without a TTL) and loss
detection (see docs/migrating-from-redis-py.md)::

    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://localhost:6379/0",
            "OPTIONS": {"CLIENT_CLASS": "redislock.integrations.django.RedisLockClient"},
        }
    }

    from django.core.cache import cache

    with cache.lock("nightly-report", timeout=60) as lock:
        store(report, fence=lock.fencing_token)

Needs ``django`` and ``django-redis`` (https://github.com/jazzband/django-redis), not
dependencies of redislock.
"""

from __future__ import annotations

from typing import Any

from django_redis.client import DefaultClient

from redislock.compat import RedisPyLock

__all__ = ["RedisLockClient"]


class RedisLockClient(DefaultClient):  # type: ignore[misc]  # django-redis ships no types
    """django-redis's ``DefaultClient`` whose ``lock()`` is redislock's drop-in."""

    def lock(
        self,
        key: str,
        version: int | None = None,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        client: Any = None,
        thread_local: bool = True,
    ) -> RedisPyLock:
        """``cache.lock()``: a :class:`~redislock.compat.RedisPyLock` on the cache's key.

        Args:
            key: the cache key (made into the Redis key by the cache's key function and
                version, as django-redis does).
            version: the cache key version.
            timeout: the lease in seconds (redis-py's ``timeout``); None: a watchdog lease.
            sleep: seconds between tries while waiting.
            blocking: whether ``acquire()`` waits.
            blocking_timeout: the wait limit in seconds; None: no limit.
            client: a redis-py client to use instead of the cache's write client.
            thread_local: redis-py's ``thread_local``.

        Raises:
            LockConfigError: a bad argument (before any I/O).
        """
        if client is None:
            client = self.get_client(write=True)
        return RedisPyLock(
            client,
            str(self.make_key(key, version=version)),
            timeout=timeout,
            sleep=sleep,
            blocking=blocking,
            blocking_timeout=blocking_timeout,
            thread_local=thread_local,
        )
