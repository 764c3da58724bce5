# SPDX-License-Identifier: MIT
"""APScheduler: two instances of a service run the same schedule; each run happens once.

    python examples/apscheduler_report.py              # against the embedded redis-server
    python examples/apscheduler_report.py redis://...  # or your Redis

Two BackgroundSchedulers (standing for two hosts) fire the same job every second for four
seconds; ``one_instance`` lets exactly one of them run each scheduled run. Needs
``pip install 'apscheduler<4'``. tests/test_integrations.py runs it.
"""

from __future__ import annotations

import collections
import datetime
import sys
import threading
import time

import redis
from apscheduler.schedulers.background import BackgroundScheduler

from redislock.integrations.apscheduler import one_instance, run_key

EVERY = 1.0
SECONDS = 4


def main(url: str) -> int:
    client = redis.Redis.from_url(url)
    runs: list[tuple[str, str]] = []  # (run key, instance)
    lock = threading.Lock()
    name = f"report-{time.time_ns()}"  # a fresh job name per demo run

    @one_instance(client, name, every=EVERY)
    def report(instance: str) -> None:
        with lock:
            runs.append((run_key(EVERY, time.time()), instance))
        time.sleep(0.2)  # the work

    first = datetime.datetime.fromtimestamp(int(time.time()) + 1, datetime.UTC)
    schedulers = []
    for instance in ("host-a", "host-b"):
        scheduler = BackgroundScheduler(timezone=datetime.UTC)
        scheduler.add_job(
            report, "interval", seconds=EVERY, start_date=first, args=[instance], max_instances=2
        )
        scheduler.start()
        schedulers.append(scheduler)
    time.sleep(SECONDS + 1.5)
    for scheduler in schedulers:
        scheduler.shutdown(wait=True)
    client.close()
    per_run = collections.Counter(key for key, _ in runs)
    for key, instance in sorted(runs):
        print(f"{key} ran on {instance}")
    ok = len(per_run) >= SECONDS - 1 and all(n == 1 for n in per_run.values())
    print("OK: every scheduled run ran on one instance" if ok else f"FAIL: {dict(per_run)}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = sys.argv[1]
    else:
        from redislock.server import ensure_embedded

        target = ensure_embedded()
    raise SystemExit(main(target))
