# SPDX-License-Identifier: MIT
"""The watchdog for asyncio locks: ONE scheduler task per event loop renews every lease.

The scheduler starts with the first held watchdog lease of its loop and ends when none is
left. Each renewal runs in a short task of its own, bounded by the end of the local lease
estimate: a slow Redis delays nobody else, and a dead network is reported as a loss in
time, whatever the client's socket timeout.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import weakref
from typing import TYPE_CHECKING

from redislock._core.lock import Holding
from redislock._core.schedule import Schedule
from redislock.aio._driver import run

if TYPE_CHECKING:
    from redislock.aio.lock import AsyncLock

__all__ = ["AsyncRenewer", "renewer"]

log = logging.getLogger(__name__)

_background: set[asyncio.Task[object]] = set()


def keep(task: asyncio.Task[object]) -> None:
    """Keep a fire-and-forget task alive until done, and log its failure."""
    _background.add(task)

    def done(t: asyncio.Task[object]) -> None:
        _background.discard(t)
        if not t.cancelled() and (exc := t.exception()) is not None:
            log.warning("redislock background task failed: %r", exc)

    task.add_done_callback(done)


class AsyncRenewer:
    """The watchdog task of one event loop and its schedule."""

    def __init__(self) -> None:
        self._schedule: Schedule[AsyncLock] = Schedule()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def schedule(self, lock: AsyncLock, h: Holding, due: float) -> None:
        """Renew ``h`` (held by ``lock``) at monotonic time ``due``."""
        self._schedule.add(lock, h, due)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="redislock-renewer"
            )
        else:
            self._wake.set()

    def discard(self, h: Holding) -> None:
        """Stop renewing ``h``; the task ends once nothing is left."""
        self._schedule.discard(h)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            item = self._schedule.pop_due(time.monotonic())
            if item is None:
                return
            if not isinstance(item, tuple):
                self._wake.clear()
                try:
                    async with asyncio.timeout(item):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            lock, h = item
            keep(asyncio.ensure_future(self._renew(lock, h)))
            del lock

    async def _renew(self, lock: AsyncLock, h: Holding) -> None:
        # Its own task, so a slow Redis delays nobody else's renewal; bounded by the end of
        # the local lease estimate, after which the lease counts as lost.
        core = lock._core
        limit = max(0.001, h.expires_at - time.monotonic())
        try:
            async with asyncio.timeout(limit):
                due, fire = await run(lock._client, core.renew_flow(h))
        except TimeoutError:
            due, fire = core.renewal_error(
                h, TimeoutError("no answer to the renewal before the lease ran out")
            )
        except Exception:  # a bug; keep serving the other locks
            log.exception("renewing lock %r failed unexpectedly", core.name)
            return
        if fire:
            log.warning("lease of lock %r lost: %s", core.name, h.lost_reason)
            if core.on_lost is not None:
                try:
                    result = core.on_lost(lock)
                    if inspect.isawaitable(result):
                        keep(asyncio.ensure_future(result))
                except Exception:
                    log.exception("on_lost callback of lock %r raised", core.name)
        if due is not None:
            self.schedule(lock, h, due)


_renewers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncRenewer] = (
    weakref.WeakKeyDictionary()
)


def renewer() -> AsyncRenewer:
    """The renewer of the running event loop, created on first use."""
    loop = asyncio.get_running_loop()
    found = _renewers.get(loop)
    if found is None:
        found = _renewers[loop] = AsyncRenewer()
    return found
