# SPDX-License-Identifier: MIT
"""What the acquire and release steps of both flavours report to :mod:`redislock.metrics`
(one source for the sync and asyncio ``_steps`` modules). No I/O; each call is one flag
check when OpenTelemetry is not installed."""

from __future__ import annotations

import time

from redislock import metrics
from redislock._core.lock import Holding, LockCore

__all__ = ["acquire_ended", "acquire_failed", "acquire_started", "release_ended"]


def acquire_started(core: LockCore, single: bool) -> float:
    """An acquire call begins (``single``: one try, no wait, or one poll of redis-py's
    loop, which the drop-ins' ``do_acquire`` is); returns its start time."""
    if not single:
        metrics.waiting(core.label, core.name, 1)
    return time.monotonic()


def acquire_ended(
    core: LockCore, start: float, single: bool, ok: bool, *, polled: bool = False
) -> None:
    """The acquire call that began at ``start`` returned ``ok`` (``polled``: one poll of
    redis-py's loop: only an acquisition counts, not each busy poll)."""
    if not single:
        metrics.waiting(core.label, core.name, -1)
    if polled and not ok:
        return
    outcome = "acquired" if ok else "busy" if single else "timeout"
    metrics.acquire(core.label, core.name, time.monotonic() - start, outcome)


def acquire_failed(core: LockCore, start: float, single: bool, error: bool) -> None:
    """The acquire call that began at ``start`` raised (``error``: not a cancellation)."""
    if not single:
        metrics.waiting(core.label, core.name, -1)
    if error:
        metrics.acquire(core.label, core.name, time.monotonic() - start, "error")


def release_ended(core: LockCore, h: Holding, was_lost: bool, lost: bool) -> None:
    """The final release of ``h`` ended: released (``lost`` False) or found the lease gone;
    a loss already reported (``was_lost``: the watchdog or an extend marked it) is not
    counted again."""
    if lost and not was_lost:
        metrics.lost(core.label, core.name)
    if not was_lost:
        metrics.held(core.label, core.name, time.monotonic() - h.acquired_at)
