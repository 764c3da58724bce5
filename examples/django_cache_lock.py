# SPDX-License-Identifier: MIT
"""Django: ``cache.lock()`` through django-redis, on redislock's lease and fencing token.

    python examples/django_cache_lock.py              # against the embedded redis-server
    python examples/django_cache_lock.py redis://...  # or your Redis

Configures a minimal Django with django-redis and redislock's client class, takes the cache
lock twice (the fencing token grows), and shows that a plain redis-py lock on the same key
is refused while it is held. Needs ``pip install django django-redis``.
tests/test_integrations.py runs it.
"""

from __future__ import annotations

import sys


def main(url: str) -> int:
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            CACHES={
                "default": {
                    "BACKEND": "django_redis.cache.RedisCache",
                    "LOCATION": url,
                    "OPTIONS": {"CLIENT_CLASS": "redislock.integrations.django.RedisLockClient"},
                }
            }
        )
        django.setup()
    from django.core.cache import cache
    from django_redis import get_redis_connection

    tokens = []
    refused = False
    for _ in range(2):
        with cache.lock("nightly-report", timeout=30) as lock:
            tokens.append(lock.fencing_token)
            plain = get_redis_connection("default").lock(
                cache.make_key("nightly-report"), timeout=5
            )
            refused = not plain.acquire(blocking=False)  # redis-py's own Lock, same key
            if not refused:
                plain.release()
            print(f"{type(lock).__name__} held, fencing token {lock.fencing_token}; "
                  f"redis-py's Lock on the same key refused: {refused}")  # fmt: skip
    ok = tokens[0] is not None and tokens[1] is not None and tokens[1] > tokens[0] and refused
    print("OK: cache.lock() is redislock's, fenced, and excludes redis-py's" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = sys.argv[1]
    else:
        from redislock.server import ensure_embedded

        target = ensure_embedded()
    raise SystemExit(main(target))
