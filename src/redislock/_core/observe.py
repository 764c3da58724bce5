# SPDX-License-Identifier: MIT
"""What the acquire and release steps of both flavours report to :mod:`redislock.metrics`
(one source for the sync and asyncio ``_steps`` modules). No I/O; each call is one flag
check when OpenTelemetry is not installed."""

from __future__ import annotations

import time
from dataclasses import dataclass

from redislock import metrics
from redislock._core.lock import Holding, LockCore

__all__ = ["Started", "acquire_ended", "acquire_failed", "acquire_started", "release_ended"]


@dataclass(slots=True)
class Started:
    """One acquire call in progress: when it began, its attributes (None: no metrics), and
    whether it is a single try (no wait, or one poll of redis-py's loop)."""

    at: float
    attrs: dict[str, str] | None
    single: bool


def acquire_started(core: LockCore, single: bool) -> Started:
    """An acquire call of ``core`` begins (``single``: one try, no wait, or one poll of
    redis-py's loop, which the drop-ins' ``do_acquire`` is)."""
    attrs = metrics.attributes(core.label, core.name)
    if not single:
        metrics.waiting(attrs, 1)
    return Started(time.monotonic(), attrs, single)


def acquire_ended(started: Started, ok: bool, *, polled: bool = False) -> None:
    """The acquire call returned ``ok`` (``polled``: one poll of redis-py's loop: only an
    acquisition counts, not each busy poll)."""
    if not started.single:
        metrics.waiting(started.attrs, -1)
    if polled and not ok:
        return
    outcome = "acquired" if ok else "busy" if started.single else "timeout"
    metrics.acquire(started.attrs, time.monotonic() - started.at, outcome)


def acquire_failed(started: Started, error: bool) -> None:
    """The acquire call raised (``error``: an exception, not a cancellation or exit)."""
    if not started.single:
        metrics.waiting(started.attrs, -1)
    if error:
        metrics.acquire(started.attrs, time.monotonic() - started.at, "error")


def release_ended(core: LockCore, h: Holding, was_lost: bool, lost: bool) -> None:
    """The final release of ``h`` ended: released (``lost`` False) or found the lease gone;
    a loss already reported (``was_lost``: the watchdog or an extend marked it) is not
    counted again."""
    if was_lost or h.lost:  # recorded when it was marked lost (LockCore.mark_lost)
        return
    if lost:
        metrics.lost(core.label, core.name)
    metrics.held(core.label, core.name, time.monotonic() - h.acquired_at)
