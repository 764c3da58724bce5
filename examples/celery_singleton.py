# SPDX-License-Identifier: MIT
"""Celery: runs of a task with the same arguments never overlap, across workers.

    python examples/celery_singleton.py              # against the embedded redis-server
    python examples/celery_singleton.py redis://...  # or your Redis (also the broker)

Starts a real Celery worker (4 threads) on Redis as broker and result backend, queues three
``rebuild_index(1)`` and one ``rebuild_index(2)`` at once: one run for shop 1 runs, the two
duplicates are skipped (None), shop 2 runs beside it. Needs ``pip install celery``.
tests/test_integrations.py runs it.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from typing import Any

import redis
from celery import Celery
from celery.contrib.testing.worker import start_worker

from redislock.integrations.celery import SingletonTask


def broker_url(url: str) -> str:
    """Kombu's spelling of a unix-socket URL."""
    return "redis+socket://" + url.removeprefix("unix://") if url.startswith("unix://") else url


def create_app(url: str) -> tuple[Celery, list[tuple[int, float, float]]]:
    app = Celery("shop", broker=broker_url(url), backend=broker_url(url))
    app.conf.redislock_client = redis.Redis.from_url(url)
    app.conf.broker_connection_retry_on_startup = True
    runs: list[tuple[int, float, float]] = []  # (shop, start, end)
    guard = threading.Lock()

    @app.task(base=SingletonTask, name="shop.rebuild_index")  # type: ignore[untyped-decorator]
    def rebuild_index(shop_id: int) -> str:
        start = time.monotonic()
        time.sleep(0.5)  # the work
        with guard:
            runs.append((shop_id, start, time.monotonic()))
        return f"rebuilt {shop_id}"

    return app, runs


def main(url: str) -> int:
    app, runs = create_app(url)
    task: Any = app.tasks["shop.rebuild_index"]
    with start_worker(app, pool="threads", concurrency=4, perform_ping_check=False):
        results = [task.delay(1), task.delay(1), task.delay(1), task.delay(2)]
        values = [r.get(timeout=30) for r in results]
    print("results:", values)
    ones = sorted((s, e) for shop, s, e in runs if shop == 1)
    overlap = any(b[0] < a[1] for a, b in itertools.pairwise(ones))
    ok = values.count("rebuilt 2") == 1 and values.count("rebuilt 1") >= 1 and not overlap
    ok = ok and values.count(None) == 3 - values.count("rebuilt 1")
    print("OK: no two runs for one shop at once" if ok else f"FAIL: {runs}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = sys.argv[1]
    else:
        from redislock.server import ensure_embedded

        target = ensure_embedded()
    raise SystemExit(main(target))
