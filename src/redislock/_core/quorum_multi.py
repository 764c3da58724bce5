# SPDX-License-Identifier: MIT
"""``MultiRedlock``: several names taken all or nothing over N independent masters, shared
by :class:`redislock.MultiRedlock` and :class:`redislock.AsyncMultiRedlock`. No I/O.

It composes the two algorithms without changing either: on every master, one try of
:class:`~redislock._core.multi.MultiCore` (every chunk of names taken in the global order,
or everything given back: deadlock-free); across masters, :class:`RedlockCore`'s rules
(a majority of masters must have taken the whole set within the validity time, else it is
given back on every master, random retry delay; extensions counted on a majority; one
fencing token per name by the quorum rule, written back per name when needed).

The per-master flows run side by side with :func:`parallel`: each round sends the next
operation of every unfinished flow to its master in one :class:`FanOut`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from redislock._clients import RESPONSE_ERRORS
from redislock._core.keys import LockKeys
from redislock._core.lock import Holding, LockStatistics
from redislock._core.multi import Busy, MultiCore, MultiHolding, check_names, label
from redislock._core.ops import Call, Eval, FanOut, Flow, as_int, as_str
from redislock._core.options import QuorumOptions
from redislock._core.quorum import RedlockCore, outcome_of

__all__ = ["MultiRedlockCore", "parallel"]


def parallel(
    flows: list[Flow[Any]], timeout: float, *, cleanup: bool = False
) -> Flow[list[object]]:
    """Drive one flow per master side by side: each round is one :class:`FanOut` of the
    next operation of every unfinished flow (``timeout`` seconds per round; ``cleanup``:
    the flows undo earlier ones, see :attr:`FanOut.cleanup`). A command error (a
    ``ResponseError``) is thrown into its master's flow; a master that failed otherwise or
    answered late has its flow closed, so no round waits for it again (what it may have
    taken is undone by the release every master gets after a failed try, or held under
    the lease until released). Returns each flow's result, or the exception it ended
    with."""
    results: list[object] = [None] * len(flows)
    ops: list[Eval | Call | None] = [None] * len(flows)

    def step(i: int, reply: object) -> None:
        flow = flows[i]
        try:
            if reply is _FIRST:
                op = next(flow)
            elif isinstance(reply, BaseException) and not isinstance(reply, RESPONSE_ERRORS):
                flow.close()
                results[i], ops[i] = reply, None
                return
            elif isinstance(reply, BaseException):
                op = flow.throw(reply)
            else:
                op = flow.send(reply)
        except StopIteration as stop:
            results[i], ops[i] = stop.value, None
            return
        except Exception as exc:
            results[i], ops[i] = exc, None
            return
        if not isinstance(op, Eval | Call):
            raise TypeError(f"a per-master flow may only send commands, not {op!r}")
        ops[i] = op

    for i in range(len(flows)):
        step(i, _FIRST)
    while any(op is not None for op in ops):
        replies = yield FanOut(tuple(ops), timeout, cleanup=cleanup)
        for i, op in enumerate(list(ops)):
            if op is not None:
                step(i, replies[i])
    return results


_FIRST = object()


@dataclass(slots=True)
class MultiRedlockCore(RedlockCore):
    """A :class:`RedlockCore` whose unit is a whole set of names. ``name`` is a label."""

    multi: MultiCore | None = None
    """The one-master algorithm (its flows are run on every master)."""

    @classmethod
    def from_quorum(
        cls, labels: tuple[str, ...], name: Any, options: QuorumOptions
    ) -> MultiRedlockCore:
        """Validate ``name`` (here an iterable of names; raises :class:`LockConfigError`)
        and build the core over masters ``labels`` with the validated ``options``."""
        checked = check_names(name)
        core = super(MultiRedlockCore, cls).from_quorum(labels, checked[0], options)
        assert isinstance(core, MultiRedlockCore)
        core.multi = MultiCore.from_base(core, checked, options.prefix, cluster=False)
        core.name = label(checked)
        return core

    @property
    def m(self) -> MultiCore:
        assert self.multi is not None
        return self.multi

    def _each(self, make: Any, *, cleanup: bool = False) -> Flow[list[object]]:
        return parallel([make() for _ in range(self.n)], self.node_timeout, cleanup=cleanup)

    # ------------------------------------------------------------------ acquire

    def _try_flow(self, token: str, meta: str) -> Flow[tuple[list[str], Any]]:
        m = self.m
        results = yield from self._each(lambda: m.take_flow(token, meta, 0))
        outcomes = [
            "ok" if isinstance(r, dict) else "busy" if isinstance(r, Busy) else outcome_of(r)
            for r in results
        ]
        if outcomes.count("ok") < self.quorum:
            return outcomes, None
        counters: list[dict[str, int] | None] = [
            r if isinstance(r, dict) else None for r in results
        ]
        taken = [c for c in counters if c is not None]
        fences = {name: max(c[name] for c in taken) for name in m.names}
        if self.fencing:
            safe = yield from self._publish_fences(counters, fences)
            if not safe:
                return outcomes, None
        return outcomes, fences

    def _holding(self, token: str, grant: Any, sent: float, validity_end: float) -> Holding:
        return MultiHolding(
            token=token,
            fence=0,
            pid=os.getpid(),
            acquired_at=sent,
            expires_at=validity_end,
            fences=dict(grant),
            chunks=dict(enumerate(self.m.chunks)),
        )

    def _fence_key(self, name: str) -> str:
        return LockKeys.for_name(name, self.m.prefix).fence

    # ------------------------------------------------------------------ per-master flows

    def _release_one(self, token: str) -> Flow[str]:
        """Release every chunk on one master: "ok", or the first "gone"/"taken"."""
        m = self.m
        worst = "ok"
        for chunk in m.chunks:
            reply = yield m._op("release", chunk, token)
            status = as_str(reply[0])
            if status != "ok" and worst == "ok":
                worst = status
        return worst

    def _extend_one(self, token: str, ms: int, mode: str) -> Flow[tuple[str, int]]:
        """Extend every chunk on one master: ("ok", least new TTL ms) or (status, 0)."""
        m = self.m
        least: int | None = None
        for chunk in m.chunks:
            reply = yield m._op("extend", chunk, token, ms=ms, mode=mode)
            status = as_str(reply[0])
            if status != "ok":
                return status, 0
            ttl = as_int(reply[1])
            least = ttl if least is None else min(least, ttl)
        return "ok", least or 0

    @staticmethod
    def _words(results: list[object]) -> tuple[list[str], list[float]]:
        outcomes: list[str] = []
        ttls: list[float] = []
        for r in results:
            if isinstance(r, tuple):
                outcomes.append(r[0])
                if r[0] == "ok":
                    ttls.append(r[1])
            else:
                outcomes.append(outcome_of(r))
        return outcomes, ttls

    def _release_all(self, token: str) -> Flow[list[str]]:
        results = yield from self._each(lambda: self._release_one(token), cleanup=True)
        return [r if isinstance(r, str) else outcome_of(r) for r in results]

    def _extend_all(self, token: str, ms: int, mode: str) -> Flow[tuple[list[str], list[float]]]:
        results = yield from self._each(lambda: self._extend_one(token, ms, mode))
        return self._words([(r[0], r[1] / 1000.0) if isinstance(r, tuple) else r for r in results])

    def _status_all(self, token: str) -> Flow[tuple[list[str], list[float]]]:
        m = self.m
        results = yield from self._each(lambda: m.status_flow(token))
        return self._words([(r[0], r[1]) if isinstance(r, tuple) else r for r in results])

    def _locked_all(self) -> Flow[list[object]]:
        m = self.m
        return (yield from self._each(m.locked_flow))

    # ------------------------------------------------------------------ local state

    def statistics(self) -> LockStatistics:
        """As :meth:`LockCore.statistics`, with ``fencing_token`` None (one per name)."""
        return dataclasses.replace(RedlockCore.statistics(self), fencing_token=None)

    def fencing_tokens(self) -> dict[str, int] | None:
        """A copy of the fencing token of every name of the current hold, or None."""
        h = self.current()
        if not isinstance(h, MultiHolding) or not self.fencing:
            return None
        return dict(h.fences)
