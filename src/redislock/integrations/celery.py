# SPDX-License-Identifier: MIT
"""Celery: a task base class whose runs with the same arguments never overlap.

    from celery import Celery
    from redislock.integrations.celery import SingletonTask

    app = Celery("shop", broker="redis://...")
    app.conf.redislock_client = redis.Redis.from_url("redis://...")

    @app.task(base=SingletonTask)
    def rebuild_index(shop_id: int) -> None:
        ...

A run takes a :class:`redislock.Lock` named ``celery:<task name>:<digest of the
arguments>`` (the arguments as JSON, SHA-1) before the task's body, and releases it after.
While one run of a task with given arguments is in progress on any worker, another with
the same arguments is skipped (it returns None and logs it) or, with ``lock_wait`` seconds,
waits up to that long and then is skipped. The lock is a watchdog lease: a worker that
dies frees it within ``watchdog_lease`` seconds. Runs with other arguments are not held up.
Like celery-singleton (https://github.com/steinitzu/celery-singleton), but the lock is
taken when the task runs, not when it is queued, so a queued duplicate is not dropped
while the first is still waiting in the queue. Needs ``celery``, not a dependency of
redislock.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, ClassVar

from celery import Task

from redislock.errors import LockConfigError
from redislock.sync.lock import Lock

__all__ = ["SingletonTask", "lock_name"]

log = logging.getLogger("redislock.integrations.celery")


def lock_name(task_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The lock name of one run: the task's name and a digest of its arguments (JSON with
    sorted keys; arguments JSON cannot encode are named by ``repr``).

    Raises:
        LockConfigError: the task has no name.
    """
    if not task_name:
        raise LockConfigError("a SingletonTask needs a task name")
    text = json.dumps([list(args), kwargs], sort_keys=True, default=repr, separators=(",", ":"))
    return f"celery:{task_name}:{hashlib.sha1(text.encode()).hexdigest()}"


class SingletonTask(Task):  # type: ignore[misc]  # celery ships no types
    """A Celery task base (``@app.task(base=SingletonTask)``): runs with equal arguments
    never overlap across workers.

    Class attributes (override in a subclass, or set on the app's config):
        lock_client: a sync redis-py (or valkey-py) client; default
            ``app.conf.redislock_client``.
        lock_wait: seconds a duplicate waits for the running one before it is skipped
            (default 0: skipped at once).
        lock_options: more :class:`redislock.Lock` options (``watchdog_lease``, ...).
    """

    abstract = True
    lock_client: ClassVar[Any] = None
    lock_wait: ClassVar[float] = 0.0
    lock_options: ClassVar[dict[str, Any]] = {}

    def _lock_client(self) -> Any:
        client = self.lock_client or getattr(self.app.conf, "redislock_client", None)
        if client is None:
            raise LockConfigError(
                f"SingletonTask {self.name!r} has no client: set app.conf.redislock_client "
                "or the task's lock_client"
            )
        return client

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task's body while holding its arguments' lock; None when skipped.

        Raises:
            LockConfigError: no client configured, or bad lock options.
            LockLostError: the lease was lost during the body (the body's own exception,
                if any, wins).
            redis.exceptions.RedisError: Redis failed (the body did not run).
        """
        name = lock_name(self.name, args, kwargs)
        lock = Lock(self._lock_client(), name, timeout=self.lock_wait, **self.lock_options)
        if not lock.acquire():
            log.info("task %s skipped: a run with the same arguments is in progress", self.name)
            return None
        try:
            result = super().__call__(*args, **kwargs)
        except BaseException as exc:  # released as `with lock:` would (the body's error wins)
            lock.__exit__(type(exc), exc, exc.__traceback__)
            raise
        lock.__exit__(None, None, None)
        return result
