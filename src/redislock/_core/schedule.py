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
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from redislock._core.lock import COALESCE, Holding
from redislock._core.ops import Eval, _parts
from redislock._core.scripts import SCRIPTS

if TYPE_CHECKING:
    from redislock._handle import Renewable

__all__ = ["BATCH", "COALESCE", "RenewCall", "Schedule", "batches"]

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
    due: list[tuple[L, Holding]],
    key: Callable[[L], object],
    pipelines: Callable[[object], bool],
    kind: Callable[[L], object] | None = None,
) -> list[list[tuple[L, Holding]]]:
    """Due renewals grouped by client ``key(lock)`` (and by ``kind(lock)`` if given): at
    most :data:`BATCH` a group for a client that ``pipelines``, one a group for any other
    (so nobody waits behind a node that hangs)."""
    groups: dict[tuple[int, object], tuple[object, list[tuple[L, Holding]]]] = {}
    for item in due:
        lock = item[0]
        client = key(lock)
        found = groups.get(group_key := (id(client), None if kind is None else kind(lock)))
        if found is None:
            found = groups[group_key] = (client, [])
        found[1].append(item)
    out: list[list[tuple[L, Holding]]] = []
    for client, group in groups.values():
        size = BATCH if pipelines(client) else 1
        out.extend(group[k : k + size] for k in range(0, len(group), size))
    return out


_RENEW = SCRIPTS["lock_renew"]


class RenewCall:
    """Due renewals of plain locks (:attr:`LockCore.lock_renew`) sharing one single-node
    client, as ONE ``lock_renew.lua`` call built straight from the holds: no flow and no
    :class:`~redislock._core.ops.Batch` per hold (with 100,000 watchdog leases those were
    most of the watchdog's CPU).

    The renewals count as sent when the call is built (before it is sent: the local lease
    estimates start no later than the server's TTLs). The shell sends :attr:`op` (if not
    None), then hands the reply to :meth:`settle`, or the error (a failed or timed-out call)
    to :meth:`fail`; :attr:`results` then holds every hold's outcome, as
    :meth:`LockCore.renew_flow` returns.
    """

    __slots__ = ("group", "op", "results", "sent", "waiting")

    def __init__(self, group: list[tuple[Renewable, Holding]]) -> None:
        self.group = group
        self.results: list[tuple[float | None, bool] | None] = [None] * len(group)
        self.sent = now = time.monotonic()
        keys: list[str] = []
        entries: list[str] = []
        self.waiting: list[int] = []  # indices of the holds in the call, in KEYS order
        for i, (lock, h) in enumerate(group):
            core = lock._core
            entry = core.renew_entry(h, now)
            if type(entry) is str:
                keys.append(core.keys.lock)
                entries.append(entry)
                self.waiting.append(i)
            else:
                self.results[i] = entry  # type: ignore[assignment]  # a (due, fire) pair
        self.op = Eval(_RENEW, tuple(keys), (" ".join(entries),)) if keys else None

    def deadline(self) -> float:
        """The earliest local lease end among the holds in the call (monotonic): a reply
        later than that is too late for one of them."""
        group = self.group
        return min(group[i][1].expires_at for i in self.waiting)

    def settle(self, reply: object) -> None:
        """Apply ``lock_renew``'s reply: each hold gets its own entry (an error reply: the
        same error for each)."""
        group, results, sent = self.group, self.results, self.sent
        for i, part in zip(self.waiting, _parts(reply, len(self.waiting)), strict=True):
            lock, h = group[i]
            results[i] = lock._core.renewed(h, part, sent)

    def fail(self, error: BaseException) -> None:
        """The call failed with ``error`` (or got no answer in time): a failed renewal for
        every hold in it that has no outcome yet."""
        group, results, sent = self.group, self.results, self.sent
        for i in self.waiting:
            if results[i] is None:
                lock, h = group[i]
                results[i] = lock._core.renewed(h, error, sent)
