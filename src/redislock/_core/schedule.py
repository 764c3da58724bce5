# SPDX-License-Identifier: MIT
"""The renewal schedule shared by the sync (thread) and asyncio (task) watchdogs.

A heap of (due time, lock, holding). Each holding is scheduled at most once at a time; a
released or detached holding is discarded at once, so the schedule knows when nothing is
left to renew. Locks are referenced weakly: a lock object that is garbage-collected stops
being renewed and its lease runs out in Redis.
"""

from __future__ import annotations

import heapq
import itertools
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from redislock._core.lock import COALESCE, Holding

__all__ = ["BATCH", "COALESCE", "Schedule", "batches"]

L = TypeVar("L")


class Schedule(Generic[L]):
    """Due renewals, earliest first. Not thread-safe: the shells guard it."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, weakref.ref[L], Holding]] = []
        self._seq = itertools.count()
        self._pending: dict[Holding, int] = {}  # holding -> seq of its one live entry

    def __len__(self) -> int:
        """Number of holdings waiting for renewal."""
        return len(self._pending)

    def add(self, lock: L, h: Holding, due: float) -> None:
        """Renew ``h`` of ``lock`` at monotonic time ``due``, replacing any earlier entry
        for ``h`` (older heap entries are skipped when they come up)."""
        seq = next(self._seq)
        self._pending[h] = seq
        heapq.heappush(self._heap, (due, seq, weakref.ref(lock), h))

    def discard(self, h: Holding) -> None:
        """Stop renewing ``h`` (released or detached)."""
        self._pending.pop(h, None)

    def clear(self) -> None:
        """Forget everything."""
        self._heap.clear()
        self._pending.clear()

    def pop_due(self, now: float) -> tuple[L, Holding] | float | None:
        """The next due (lock, holding); else seconds until the next one; None if empty."""
        while self._heap:
            due, seq, ref, h = self._heap[0]
            lock = ref()
            if lock is None or h.closing or self._pending.get(h) != seq:
                heapq.heappop(self._heap)  # dead, closed, or replaced by a newer entry
                if (lock is None or h.closing) and self._pending.get(h) == seq:
                    del self._pending[h]
                continue
            if due > now:
                return due - now
            heapq.heappop(self._heap)
            del self._pending[h]
            return lock, h
        self._pending.clear()
        return None


BATCH = 256
"""Renewals sent in one pipelined round trip at most."""


def batches(
    due: list[tuple[L, Holding]], key: Callable[[L], object], pipelines: Callable[[object], bool]
) -> list[list[tuple[L, Holding]]]:
    """Due renewals grouped by client ``key(lock)``: at most :data:`BATCH` a group for a
    client that ``pipelines``, one a group for any other (so nobody waits behind a node
    that hangs)."""
    groups: dict[int, tuple[object, list[tuple[L, Holding]]]] = {}
    for item in due:
        client = key(item[0])
        groups.setdefault(id(client), (client, []))[1].append(item)
    out: list[list[tuple[L, Holding]]] = []
    for client, group in groups.values():
        size = BATCH if pipelines(client) else 1
        out.extend(group[k : k + size] for k in range(0, len(group), size))
    return out
