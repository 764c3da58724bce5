# SPDX-License-Identifier: MIT
"""Cancellation-safe acquire and release steps shared by every asyncio lock kind.

A cancelled acquire undoes a hold its script may already have created; a cancelled release
finishes in the background, so an object never believes it released while Redis still
holds its key; a cancelled re-entry or decrement of a reentrant hold lets the command
finish and keeps the local count equal to the count in Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from redislock._core import observe
from redislock._core.hold import HoldCore
from redislock._core.lock import Holding, LockCore, tell_to
from redislock._core.ops import Flow
from redislock.aio._driver import run
from redislock.aio.renewer import keep, renewer, tell_lost
from redislock.errors import LockLostError, NotOwnedError

if TYPE_CHECKING:
    from redislock._handle import Renewable

__all__ = ["acquire", "adopt", "reenter", "release", "shielded"]


async def acquire(
    unit: Renewable, core: LockCore, flow: Flow[bool], *, single: bool = False, polled: bool = False
) -> bool:
    """Drive an acquire ``flow`` of ``core``; schedule the watchdog on success. ``single``:
    one try, no wait (for the metrics' outcome: busy, not timeout); ``polled``: one poll
    of redis-py's loop (the drop-ins: a busy poll is not counted).

    On cancellation the flow's pending token is abandoned (its hold deleted if the script
    ran before the cancellation reached us) and the cancellation propagates.
    """
    start = observe.acquire_started(core, single)
    try:
        ok = await run(unit._client, flow)
    except asyncio.CancelledError:
        observe.acquire_failed(start, error=False)
        token = core.pending_token
        flow.close()
        if token is not None:
            cleanup = asyncio.ensure_future(run(unit._client, core.abandon_flow(token)))
            keep(cleanup)
            with contextlib.suppress(BaseException):
                await asyncio.shield(cleanup)
        raise
    except BaseException as exc:  # an error; or the coroutine closed, an interrupt
        observe.acquire_failed(start, error=isinstance(exc, Exception))
        raise
    observe.acquire_ended(start, ok, polled=polled)
    h = core.holding
    if ok and h is not None:
        tell_to(h, unit, tell_lost)
        if core.watchdog:
            renewer().schedule(unit, h, h.acquired_at + core.renew_interval)
    return ok


async def adopt(unit: Renewable, core: LockCore, token: str) -> None:
    """Take over the hold of ``token``; a watchdog hold is renewed from now on."""
    await run(unit._client, core.adopt_flow(token))
    h = core.holding
    if h is not None:
        tell_to(h, unit, tell_lost)
        if core.watchdog:
            renewer().schedule(unit, h, time.monotonic())


async def shielded(client: Any, flow: Flow[Any]) -> Any:
    """Drive a flow that must not be cut in half (a re-entry or a decrement): if the caller
    is cancelled, the command still completes and the flow still updates local state."""
    task = asyncio.ensure_future(run(client, flow))
    keep(task)
    return await asyncio.shield(task)


async def reenter(client: Any, core: HoldCore, h: Holding) -> bool:
    """Count one more hold for ``h``'s owner. If the caller is cancelled, the command still
    completes, and a count it added is given back (the caller never saw it)."""
    task = asyncio.ensure_future(run(client, core.reenter_flow(h)))
    keep(task)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:

        def give_back(done: asyncio.Future[bool]) -> None:
            if not done.cancelled() and done.exception() is None and done.result():
                keep(asyncio.ensure_future(shielded(client, core.release_flow(h))))

        task.add_done_callback(give_back)
        raise


async def release(unit: Renewable, core: LockCore, h: Holding) -> None:
    """Release ``h`` for good (the caller checked it is held)."""
    h.closing = True
    if core.watchdog:
        renewer().discard(h)
    was_lost = h.lost
    try:
        await run(unit._client, core.release_flow(h))
    except LockLostError:
        observe.release_ended(core, h, was_lost, lost=True)
        raise
    except asyncio.CancelledError:
        if core.holding is h:
            # No reply yet; the script may or may not have run. Releasing is idempotent for
            # our token, so finish it in the background: the object keeps the hold until
            # Redis confirms.
            keep(asyncio.ensure_future(_finish_release(unit, core, h)))
        raise
    except Exception:
        if core.release_failed(h):  # no reply: the lock may still be ours
            renewer().schedule(unit, h, time.monotonic())
        raise
    observe.release_ended(core, h, was_lost, lost=False)


async def _finish_release(unit: Renewable, core: LockCore, h: Holding) -> None:
    # Repeats a release whose caller was cancelled before the reply: "gone" then most
    # likely means the first attempt worked.
    try:
        await run(unit._client, core.release_flow(h, retry=True))
    except NotOwnedError:
        pass  # lost before the release: nobody is left to tell
    except Exception:
        if core.release_failed(h):
            renewer().schedule(unit, h, time.monotonic())
        raise
