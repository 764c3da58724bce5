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

    Holdings due at the very same time (the watchdog renews a whole ``lock_renew`` call at
    one send time, so its holds are next due together) share ONE heap entry, a *cohort*
    (:meth:`add_many`): with 100,000 leases, one heap push and pop per hold were a third of
    the watchdog's CPU. A cohort member that is discarded or scheduled anew is skipped
    when the cohort comes up.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._seq = itertools.count()
        self._pending: dict[Holding, int] = {}  # holding -> seq of its one live entry
        self._by_seq: dict[int, Holding | list[Holding]] = {}  # entry -> its holding(s)
        self._ready: list[Holding] = []  # members of a due cohort, not yet returned
        self._ready_seq = -1  # the seq of the cohort in _ready

    def __len__(self) -> int:
        """Number of holdings waiting for renewal."""
        return len(self._pending)

    def add(self, lock: L, h: Holding, due: float) -> None:
        """Renew ``h`` of ``lock`` at monotonic time ``due``, replacing any earlier entry
        for ``h`` (older heap entries are skipped when they come up)."""
        seq = next(self._seq)
        old = self._pending.get(h)
        if old is not None and self._by_seq.get(old) is h:
            del self._by_seq[old]
        self._pending[h] = seq
        self._by_seq[seq] = h
        ref = h.renewer_ref
        if ref is None or ref() is not lock:
            h.renewer_ref = weakref.ref(lock)
        heapq.heappush(self._heap, (due, seq))

    def add_many(self, items: list[tuple[L, Holding, float]]) -> None:
        """:meth:`add` each ``(lock, h, due)``; those with the same ``due`` share one heap
        entry."""
        by_due: dict[float, list[tuple[L, Holding]]] = {}
        for lock, h, due in items:
            same = by_due.get(due)
            if same is None:
                by_due[due] = [(lock, h)]
            else:
                same.append((lock, h))
        pending, by_seq = self._pending, self._by_seq
        for due, group in by_due.items():
            if len(group) == 1:
                self.add(group[0][0], group[0][1], due)
                continue
            seq = next(self._seq)
            members: list[Holding] = []
            for lock, h in group:
                old = pending.get(h)
                if old is not None and by_seq.get(old) is h:
                    del by_seq[old]
                pending[h] = seq
                ref = h.renewer_ref
                if ref is None or ref() is not lock:
                    h.renewer_ref = weakref.ref(lock)
                members.append(h)
            by_seq[seq] = members
            heapq.heappush(self._heap, (due, seq))

    def discard(self, h: Holding) -> None:
        """Stop renewing ``h`` (released or detached)."""
        seq = self._pending.pop(h, None)
        if seq is not None and self._by_seq.get(seq) is h:
            del self._by_seq[seq]

    def clear(self) -> None:
        """Forget everything."""
        self._heap.clear()
        self._pending.clear()
        self._by_seq.clear()
        self._ready.clear()

    def pop_due(self, now: float) -> tuple[L, Holding] | float | None:
        """The next due (lock, holding); else seconds until the next one; None if empty."""
        heap, by_seq, pending, ready = self._heap, self._by_seq, self._pending, self._ready
        lock: L | None
        while True:
            while ready:  # the rest of a due cohort: due already
                h = ready.pop()
                if pending.get(h) != self._ready_seq:  # discarded, or scheduled anew
                    continue
                del pending[h]
                lock = h.renewer_ref()
                if lock is None or h.closing:  # garbage-collected, or being released
                    continue
                return lock, h
            if not heap:
                break
            if not pending:  # only entries left behind by discarded cohort members
                heap.clear()
                break
            due, seq = heap[0]
            entry = by_seq.get(seq)
            if entry is None:  # replaced by a newer entry, or discarded
                heapq.heappop(heap)
                continue
            if isinstance(entry, list):
                if due > now:
                    return due - now
                heapq.heappop(heap)
                del by_seq[seq]
                entry.reverse()  # members go out in the order they were added
                self._ready, self._ready_seq = entry, seq
                ready = entry
                continue
            h = entry
            lock = h.renewer_ref()
            if lock is None or h.closing:  # garbage-collected, or being released
                heapq.heappop(heap)
                del by_seq[seq], pending[h]
                continue
            if due > now:
                return due - now
            heapq.heappop(heap)
            del by_seq[seq], pending[h]
            return lock, h
        pending.clear()
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
