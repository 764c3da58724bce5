# SPDX-License-Identifier: MIT
"""The acquire and release steps every sync lock kind shares: drive the flow, then start or
resume the watchdog for the hold. Hand-written: its asyncio twin, :mod:`redislock.aio._steps`,
adds what cancellation needs."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from redislock._core import observe
from redislock._core.hold import HoldCore
from redislock._core.lock import Holding, LockCore, tell_to
from redislock._core.ops import Flow
from redislock.errors import LockLostError
from redislock.sync._driver import run
from redislock.sync.renewer import renewer, tell_lost

if TYPE_CHECKING:
    from redislock._handle import Renewable

__all__ = ["acquire", "adopt", "reenter", "release", "shielded"]


def acquire(
    unit: Renewable,
    core: LockCore,
    flow: Flow[bool],
    *,
    single: bool = False,
    polled: bool = False,
) -> bool:
    """Drive an acquire ``flow`` of ``core``; schedule the watchdog on success. ``single``:
    one try, no wait (for the metrics' outcome: busy, not timeout); ``polled``: one poll
    of redis-py's loop (the drop-ins: a busy poll is not counted)."""
    start = observe.acquire_started(core, single)
    try:
        ok = run(unit._client, flow)
    except BaseException as exc:
        observe.acquire_failed(start, error=isinstance(exc, Exception))
        raise
    observe.acquire_ended(start, ok, polled=polled)
    h = core.holding
    if ok and h is not None:
        tell_to(h, unit, tell_lost)
        if core.watchdog:
            renewer().schedule(unit, h, h.acquired_at + core.renew_interval)
    return ok


def adopt(unit: Renewable, core: LockCore, token: str) -> None:
    """Take over the hold of ``token``; a watchdog hold is renewed from now on."""
    run(unit._client, core.adopt_flow(token))
    h = core.holding
    if h is not None:
        tell_to(h, unit, tell_lost)
        if core.watchdog:
            renewer().schedule(unit, h, time.monotonic())


def release(unit: Renewable, core: LockCore, h: Holding) -> None:
    """Release ``h`` for good (the caller checked it is held). If Redis gave no reply the
    object keeps the hold (it may still be ours) and the watchdog resumes renewing it."""
    h.closing = True
    was_lost = h.lost
    try:
        run(unit._client, core.release_flow(h))
    except LockLostError:
        observe.release_ended(core, h, was_lost, lost=True)
        raise
    except Exception:
        if core.release_failed(h):
            renewer().schedule(unit, h, time.monotonic())
        raise
    observe.release_ended(core, h, was_lost, lost=False)


def shielded(client: Any, flow: Flow[Any]) -> Any:
    """Drive a flow that must not be cut in half (a re-entry or a decrement); in the sync
    flavour nothing can cut it."""
    return run(client, flow)


def reenter(client: Any, core: HoldCore, h: Holding) -> bool:
    """Count one more hold for ``h``'s owner."""
    return run(client, core.reenter_flow(h))
