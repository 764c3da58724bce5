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
    """Due renewals, earliest first. Not thread-safe: the shells guard it.

    The heap holds ``(due, seq)`` pairs only, and each holding keeps its lock's weak
    reference (:attr:`Holding.renewer_ref`, made once): a renewal leaves no container
    object that the garbage collector must track until the next one. With 100,000 leases,
    heap entries that each referenced their lock made the collector's full passes over
    every lock object take most of the watchdog's CPU.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._seq = itertools.count()
        self._pending: dict[Holding, int] = {}  # holding -> seq of its one live entry
        self._by_seq: dict[int, Holding] = {}  # the reverse of _pending

    def __len__(self) -> int:
        """Number of holdings waiting for renewal."""
        return len(self._pending)

    def add(self, lock: L, h: Holding, due: float) -> None:
        """Renew ``h`` of ``lock`` at monotonic time ``due``, replacing any earlier entry
        for ``h`` (older heap entries are skipped when they come up)."""
        seq = next(self._seq)
        old = self._pending.get(h)
        if old is not None:
            del self._by_seq[old]
        self._pending[h] = seq
        self._by_seq[seq] = h
        ref = h.renewer_ref
        if ref is None or ref() is not lock:
            h.renewer_ref = weakref.ref(lock)
        heapq.heappush(self._heap, (due, seq))

    def discard(self, h: Holding) -> None:
        """Stop renewing ``h`` (released or detached)."""
        seq = self._pending.pop(h, None)
        if seq is not None:
            del self._by_seq[seq]

    def clear(self) -> None:
        """Forget everything."""
        self._heap.clear()
        self._pending.clear()
        self._by_seq.clear()

    def pop_due(self, now: float) -> tuple[L, Holding] | float | None:
        """The next due (lock, holding); else seconds until the next one; None if empty."""
        heap, by_seq = self._heap, self._by_seq
        while heap:
            due, seq = heap[0]
            h = by_seq.get(seq)
            if h is None:  # replaced by a newer entry, or discarded
                heapq.heappop(heap)
                continue
            lock: L | None = h.renewer_ref()
            if lock is None or h.closing:  # garbage-collected, or being released
                heapq.heappop(heap)
                del by_seq[seq], self._pending[h]
                continue
            if due > now:
                return due - now
            heapq.heappop(heap)
            del by_seq[seq], self._pending[h]
            return lock, h
        self._pending.clear()
        by_seq.clear()
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
