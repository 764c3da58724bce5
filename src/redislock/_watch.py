# SPDX-License-Identifier: MIT
"""How a guard, or a thread waiting on ``lost_event``, hears that a hold was marked lost
(:meth:`redislock._core.lock.LockCore.mark_lost` sets the hold's event and calls its
watchers, :func:`redislock._core.lock.tell_lost`), for both flavours. Runtime plumbing
(a :class:`threading.Event`, a lock), kept out of the I/O-free cores."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from redislock._core.lock import Holding

__all__ = ["lost_event", "unwatch", "watch"]

_EVENT_LOCK = threading.Lock()


def _fresh_lock_in_child() -> None:  # a fork while another thread held it: a fresh one
    global _EVENT_LOCK
    _EVENT_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)


def lost_event(h: Holding) -> threading.Event:
    """The ``threading.Event`` of ``h``, created on first use; set when ``h`` is (or was
    already) marked lost."""
    event: threading.Event | None = h.lost_event
    if event is None:
        with _EVENT_LOCK:  # two threads asking at once get the same event
            event = h.lost_event
            if event is None:
                event = h.lost_event = threading.Event()
    # mark_lost sets ``lost`` before it reads ``lost_event``; this reads them the other way
    # round, so a loss racing the creation is seen by one of the two.
    if h.lost:
        event.set()
    return event


def watch(h: Holding, watcher: Callable[[Holding], object]) -> None:
    """Have :meth:`LockCore.mark_lost` call ``watcher(h)`` when it marks ``h`` lost (in the
    thread that marks it)."""
    with _EVENT_LOCK:
        h.watchers = [*(h.watchers or ()), watcher]


def unwatch(h: Holding, watcher: Callable[[Holding], object]) -> None:
    """Stop calling ``watcher`` (no error if it was not watching)."""
    with _EVENT_LOCK:
        left = [w for w in h.watchers or () if w != watcher]  # (bound methods: equal, not same)
        h.watchers = left or None
