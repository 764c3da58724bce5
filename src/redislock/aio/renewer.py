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
import math
import time
import weakref
from typing import TYPE_CHECKING

from redislock._clients import ASYNC_SINGLE
from redislock._core.lock import Holding, LockCore
from redislock._core.ops import Batch
from redislock._core.schedule import COALESCE, RenewCall, Schedule, batches
from redislock.aio._driver import execute, run_batch

if TYPE_CHECKING:
    from redislock._handle import Renewable

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
        self._schedule: Schedule[Renewable] = Schedule()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._wake_at = -math.inf  # when the sleeping scheduler wakes by itself

    def schedule(self, lock: Renewable, h: Holding, due: float) -> None:
        """Renew ``h`` (held by ``lock``) at monotonic time ``due``."""
        self._schedule.add(lock, h, due)
        self._started(due)

    def schedule_many(self, items: list[tuple[Renewable, Holding, float]]) -> None:
        """Several :meth:`schedule` calls (those due at the same time share one entry)."""
        self._schedule.add_many(items)
        self._started(min(due for _, _, due in items))

    def _started(self, due: float) -> None:
        """Start the scheduler task, or wake it if it would sleep past ``due``."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="redislock-renewer"
            )
        elif due < self._wake_at:  # wake the scheduler only if it would sleep past this
            self._wake.set()

    def discard(self, h: Holding) -> None:
        """Stop renewing ``h``; the task ends once nothing is left."""
        self._schedule.discard(h)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            now = time.monotonic()
            due: list[tuple[Renewable, Holding]] = []
            # Renewals due within the next few ms go along: one round trip for more.
            while isinstance(item := self._schedule.pop_due(now + COALESCE), tuple):
                due.append(item)
            if due:
                for group in batches(due, _client_of, _pipelines, _lock_renew):
                    keep(asyncio.ensure_future(self._renew(group)))
                del due
                continue  # look again: an eager task may have rescheduled already
            if item is None:
                return
            self._wake.clear()
            wait = item + COALESCE  # until the earliest is due (pop_due measured from now + C)
            self._wake_at = time.monotonic() + wait
            try:
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake_at = -math.inf  # awake: no need to be woken

    async def _renew(self, group: list[tuple[Renewable, Holding]]) -> None:
        # Renewals of locks sharing one client: one pipelined round trip, in a task of its
        # own so a slow Redis delays nobody else, bounded by the end of the earliest local
        # lease estimate among those that need I/O, after which they count as lost.
        client = group[0][0]._client
        if _pipelines(client) and group[0][0]._core.lock_renew:
            results = await _renew_call(client, group)
        else:
            results = await _renew_flows(client, group)
        again: list[tuple[Renewable, Holding, float]] = []
        for (lock, h), result in zip(group, results, strict=True):
            core = lock._core
            if not isinstance(result, tuple):
                # Not an answer from Redis (a closed client, a bug): a failed renewal like
                # any other, retried until the local estimate runs out, then reported lost.
                log.error("renewing lock %r failed unexpectedly: %r", core.name, result)
                failure = result if isinstance(result, BaseException) else RuntimeError(result)
                result = core.renewal_error(h, failure)
            due, _ = result  # a loss was told by mark_lost (tell_lost)
            if due is not None:
                again.append((lock, h, due))
        if again:
            self.schedule_many(again)


def tell_lost(core: LockCore, h: Holding) -> None:
    """An asyncio hold's :attr:`~redislock._core.lock.Holding.teller`: called once by
    ``mark_lost`` whoever found the loss (a renewal, the holder's own release or extend),
    on the event loop: one WARNING, then ``on_lost`` of the object that holds it (an
    awaitable it returns runs as a task of its own)."""
    log.warning("lease of lock %r lost: %s", core.name, h.lost_reason)
    ref = h.renewer_ref
    lock: Renewable | None = None if ref is None else ref()
    if core.on_lost is None or lock is None:
        return
    try:
        outcome = core.on_lost(lock._subject())
        if inspect.isawaitable(outcome):
            keep(asyncio.ensure_future(outcome))
    except Exception:
        log.exception("on_lost callback of lock %r raised", core.name)


async def _renew_call(client: object, group: list[tuple[Renewable, Holding]]) -> list[object]:
    """Plain locks on a single-node client: ONE lock_renew call built from the holds."""
    call = RenewCall(group)
    if call.op is not None:
        limit = max(0.001, call.deadline() - time.monotonic())
        try:
            async with asyncio.timeout(limit):
                reply = await execute(client, call.op)
        except TimeoutError:
            call.fail(TimeoutError("no answer to the renewal before the lease ran out"))
        except Exception as exc:  # Redis failed, or a closed client: failed renewals
            call.fail(exc)
        else:
            call.settle(reply)
    return list(call.results)


async def _renew_flows(client: object, group: list[tuple[Renewable, Holding]]) -> list[object]:
    """Any other kind or client: each hold's renewal flow, driven side by side. Lock
    renewals go as one lock_renew call when the client is one node (steps without I/O
    until run_batch)."""
    batch = Batch([lock._core.renew_flow(h) for lock, h in group], merge=_pipelines(client))
    waiting = [i for i, _, _ in batch.pending]
    if waiting:
        limit = max(0.001, min(group[i][1].expires_at for i in waiting) - time.monotonic())
        try:
            async with asyncio.timeout(limit):
                await run_batch(client, batch)
        except TimeoutError:
            error = TimeoutError("no answer to the renewal before the lease ran out")
            for i in waiting:
                if batch.results[i] is None:
                    lock, h = group[i]
                    batch.results[i] = lock._core.renewal_error(h, error)
        except Exception as exc:  # a bug; keep serving the other locks
            batch.results = [exc if r is None else r for r in batch.results]
    return list(batch.results)


def _lock_renew(lock: Renewable) -> bool:
    return lock._core.lock_renew


def _client_of(lock: Renewable) -> object:
    return lock._client


def _pipelines(client: object) -> bool:
    # A RedisCluster pipeline may span nodes; one hung node must not hold up the others.
    return isinstance(client, ASYNC_SINGLE)


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
