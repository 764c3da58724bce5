# SPDX-License-Identifier: MIT
"""An APScheduler job guard: when every instance of a service runs the same schedule, each
scheduled run happens on exactly one of them.

Example::

    from apscheduler.schedulers.background import BackgroundScheduler
    from redislock.integrations.apscheduler import one_instance

    @one_instance(redis.Redis(), "hourly-report", every=3600)
    def hourly_report() -> None:
        ...

    scheduler = BackgroundScheduler()
    scheduler.add_job(hourly_report, "cron", minute=0)   # on every instance
    scheduler.start()

How: the call's run is keyed by the multiple of ``every`` seconds NEAREST to the time it
starts (so instances whose clocks differ by less than ``every / 2``, or that fire a little
late, agree on the key), and goes through a :class:`redislock.Once` with that explicit key
and one try for its lock: the first instance runs the job and records it; the others find
the record, or the lock held by the running one, and skip (the wrapper returns None). A run
that raises records nothing. Meant for schedules on multiples of ``every`` (cron times, or
interval triggers started on such a multiple). Works with APScheduler 3 and with any other
scheduler that calls the function. Needs nothing from APScheduler itself.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from redislock._core import validate
from redislock._core.once import period_key
from redislock.errors import AcquireTimeoutError
from redislock.sync.once import Once

__all__ = ["one_instance"]

log = logging.getLogger("redislock.integrations.apscheduler")

P = ParamSpec("P")
R = TypeVar("R")


def run_key(every: float, now: float) -> str:
    """The key of the scheduled run starting at ``now`` (Unix seconds): the multiple of
    ``every`` nearest to it, as :func:`redislock._core.once.period_key` writes a period's
    start."""
    return period_key(every, now + every / 2.0)


def one_instance(
    client: Any, name: str, *, every: float, **options: Any
) -> Callable[[Callable[P, R]], Callable[P, R | None]]:
    """Decorate a scheduled job so each of its runs happens on one instance only.

    Args:
        client: a sync client (``redis.Redis``, ``redis.cluster.RedisCluster``, valkey-py's).
        name: the job's lock name (as :class:`redislock.Once`'s).
        every: the schedule's spacing in seconds (3600 for an hourly cron job); runs are
            keyed by its nearest multiple, and each record lives ``every`` seconds.
        **options: :class:`redislock.Lock`'s options for the run's lock (``ttl``,
            ``watchdog_lease``, ``on_lost``...); the lock is tried once (no wait).

    Returns:
        A decorator; the job it returns returns the job's result on the instance that ran
        it, and None on the others.

    Raises:
        LockConfigError: a bad name, ``every`` or option (at decoration, no I/O).
    """
    every = validate.check_duration("every", every)
    Once(client, name, period=every, key="check", **options)  # checks everything, no I/O

    def decorate(func: Callable[P, R]) -> Callable[P, R | None]:
        @functools.wraps(func)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R | None:
            key = run_key(every, time.time())
            once = Once(client, name, period=every, key=key, **options)
            try:
                with once.run(timeout=0) as turn:
                    if turn.mine:
                        return func(*args, **kwargs)
                    record = turn.record
            except AcquireTimeoutError:  # another instance is running it now
                log.info("job %r run %s is running on another instance", name, key)
                return None
            if record is not None:
                log.info(
                    "job %r run %s ran on %s (pid %d, fencing token %d)",
                    name, key, record.host, record.pid, record.fencing_token,
                )  # fmt: skip
            return None

        return guarded

    return decorate
