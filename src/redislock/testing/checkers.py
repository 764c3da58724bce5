# SPDX-License-Identifier: MIT
"""Checkers: pure functions from the records of a torture run to a pass/fail report.

Sources: Kleppmann, "How to do distributed locking" (2016, fencing); Jepsen's lock/set checkers.

Metrics (one :class:`Line` each in :func:`check_run`; exact definitions in each function):

* ``stale_writes_accepted`` / ``stale_writes_rejected`` (:func:`stale_writes`): ``x`` writes
  at the oracle whose fence is below the largest accepted fence of that resource, or equal to
  it from another hold; accepted ones are the failure (goal 0 when the oracle is fenced).
* ``token_regressions`` (:func:`token_regressions`): acquire oks whose fence does not exceed
  that of an acquire ok on the same name that completed before they were invoked (goal 0 with
  persistent servers).
* ``overlapping_holders`` (:func:`overlaps`): pairs of critical sections interleaved at the
  oracle (``x`` vs anything; ``p`` over the permit count). Reported: fencing makes them
  harmless, and their count documents what an unfenced resource would suffer.
* ``foreign_touches``, ``keys_without_ttl``: server-side audit findings (goal 0).
* ``leases_alive_after_death`` (:func:`leases_alive_after_death`): holds of a killed worker
  still present ``lease + eps`` seconds (plus any backward step of that server's clock)
  after it could last touch a server (goal 0).
* ``loss_notifications`` (:func:`loss_notifications`): the share of unexpected server-side
  losses the worker was told about within ``bound + slack`` seconds (goal 100 %).
* scenario ``election`` (:func:`election_checks`, over the workers' act records):
  ``stale_leader_reads`` (goal 0), ``leader_reads`` and ``leaderships_lost`` (reported).
* scenario ``once`` (:func:`once_checks`): ``double_runs`` (goal 0), ``once_runs``,
  ``failed_periods_rerun`` and ``failed_periods_undone`` (reported).

Inputs are lists of plain dicts, exactly as read back from the JSON Lines files (see
``docs/torture.md`` and :mod:`redislock.testing.history`, :mod:`redislock.testing.oracle`):

* history events ``{"t", "w", "pid", "hold", "op", "ph", "name", "mode", "fence", "err"}``;
* oracle records ``{"t", "seq", "res", "fence", "hold", "w", "phase", "mode", "accepted",
  "last"}``;
* nemesis entries ``{"t0", "t1", "kind", "target", "pid", "w", "params"}`` (+ ``"t_death"``
  for ``client_kill``);
* audit data: hold intervals ``{"server", "name", "pid", "fence", "first", "last", "gone"}``,
  TTL violations ``{"t", "server", "key", "type"}``, foreign touches ``{"server", "t",
  "script", "key", "caller", "owner", "command"}``.

All times are ``time.monotonic()`` seconds; every duration argument is in seconds. A hold is
identified in the history by ``(pid, hold)`` (hold ids are ``f"{w}.{n}"``; the pid guards
against a worker id reused by a restarted worker) and at the oracle by ``(res, hold)``, so
worker ids must not be reused within one run for the oracle checks to be exact.

:func:`check_run` puts everything in a :class:`Report`, one :class:`Line` per metric.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "Line",
    "LossResult",
    "Record",
    "Report",
    "check_run",
    "election_checks",
    "leases_alive_after_death",
    "loss_notifications",
    "match_holds",
    "once_checks",
    "op_counts",
    "overlaps",
    "stale_writes",
    "token_regressions",
]

#: One record of any kind: a JSON object as read back from a log.
Record = Mapping[str, Any]

_OPS = ("acquire", "reenter", "release", "extend", "lost")
_PHASES = ("invoke", "ok", "fail", "unknown", "info")
_EXAMPLES = 3


# --------------------------------------------------------------------------- report


@dataclass
class Line:
    """One metric of a :class:`Report`.

    ``ok`` is True (goal met), False (violated) or None (reported only, no goal). ``detail``
    names up to three concrete examples (hold ids, fences, times) to find in the records.
    """

    name: str
    value: str | int | float
    goal: str
    ok: bool | None
    detail: str = ""

    @property
    def result(self) -> str:
        """``"pass"``, ``"FAIL"`` or ``"reported"``."""
        return "reported" if self.ok is None else "pass" if self.ok else "FAIL"


@dataclass
class Report:
    """The result of :func:`check_run`: metric lines and operation counts.

    ``counts`` is JSON-serialisable: ``{"ops": op_counts(...), "cycles": int, ...}``.
    """

    lines: list[Line]
    counts: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when no line has ``ok is False``."""
        return all(line.ok is not False for line in self.lines)

    def line(self, name: str) -> Line:
        """The line called ``name``. Raises KeyError if there is none."""
        for line in self.lines:
            if line.name == name:
                return line
        raise KeyError(name)

    def table(self) -> str:
        """A markdown table ``| check | value | goal | result |``, one row per line."""

        def cell(value: object) -> str:
            return str(value).replace("|", "\\|").replace("\n", " ")

        rows = ["| check | value | goal | result |", "|---|---|---|---|"]
        rows.extend(
            f"| {cell(ln.name)} | {cell(ln.value)} | {cell(ln.goal)} | {ln.result} |"
            for ln in self.lines
        )
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict: ``{"passed", "lines": [{name, value, goal, ok, detail,
        result}], "counts"}``; :meth:`from_json` reads it back."""
        return {
            "passed": self.passed,
            "lines": [{**dataclasses.asdict(ln), "result": ln.result} for ln in self.lines],
            "counts": self.counts,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Report:
        """The report :meth:`to_json` returned. Raises KeyError / TypeError on other data."""
        lines = [
            Line(name=d["name"], value=d["value"], goal=d["goal"], ok=d["ok"], detail=d["detail"])
            for d in data["lines"]
        ]
        return cls(lines=lines, counts=dict(data["counts"]))


# --------------------------------------------------------------------------- helpers


def _dict(obj: Any) -> Record:
    """Accept an audit dataclass instance as well as a dict."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return obj  # type: ignore[no-any-return]


def _dicts(objs: Iterable[Any]) -> list[Record]:
    return [_dict(o) for o in objs]


def _t(value: Any) -> str:
    return "?" if value is None else f"{float(value):.3f}"


def _examples(items: Sequence[Any], fmt: Any) -> str:
    shown = "; ".join(fmt(item) for item in items[:_EXAMPLES])
    more = len(items) - _EXAMPLES
    return shown + (f"; ... {more} more" if more > 0 else "")


def _count_line(name: str, items: Sequence[Any], goal: str, ok: bool | None, fmt: Any) -> Line:
    """A line whose value is ``len(items)``, with the first items, formatted, as its detail."""
    return Line(name, len(items), goal, ok, _examples(items, fmt))


def _zero_line(name: str, items: Sequence[Any], fmt: Any, *, unless: str | None = None) -> Line:
    """A :func:`_count_line` whose goal is no items, or, when ``unless`` gives a reason
    (``"unfenced oracle"``), one that is only reported."""
    if unless is None:
        return _count_line(name, items, "0", not items, fmt)
    return _count_line(name, items, f"reported ({unless})", None, fmt)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- oracle checks


def stale_writes(oracle_records: Iterable[Record]) -> tuple[list[Record], list[Record]]:
    """Stale ``x`` writes at the oracle: ``(accepted_stale, rejected_stale)``, in seq order.

    Recomputed from the records, independently of the oracle's own decision: walking the
    writes to each ``res`` in ``seq`` order, an ``x`` write is *stale* when some ``x`` write to
    ``res`` was accepted before it and its fence is below the largest accepted fence ``F`` so
    far, or equal to ``F`` while its hold is not the hold whose accepted write first reached
    ``F``. ``s`` / ``p`` writes are never stale. With a correct fenced oracle every stale write
    is rejected (``accepted_stale == []``); an unfenced oracle accepts them, which shows how
    often fencing saved the resource.
    """
    top: dict[str, tuple[int, str]] = {}
    accepted_stale: list[Record] = []
    rejected_stale: list[Record] = []
    for rec in sorted(oracle_records, key=lambda r: int(r["seq"])):
        if rec["mode"] != "x":
            continue
        res, fence, hold = rec["res"], int(rec["fence"]), rec["hold"]
        best = top.get(res)
        stale = best is not None and (fence < best[0] or (fence == best[0] and hold != best[1]))
        if rec["accepted"]:
            if stale:
                accepted_stale.append(rec)
            if best is None or fence > best[0]:
                top[res] = (fence, hold)
        elif stale:
            rejected_stale.append(rec)
    return accepted_stale, rejected_stale


@dataclass
class _Section:
    res: str
    hold: str
    w: Any
    fence: Any
    mode: str
    seq_first: int
    seq_last: int
    t_first: float
    t_last: float

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _sections(oracle_records: Iterable[Record]) -> dict[str, list[_Section]]:
    by_key: dict[tuple[str, str], _Section] = {}
    for rec in sorted(oracle_records, key=lambda r: int(r["seq"])):
        key = (rec["res"], rec["hold"])
        seq, t = int(rec["seq"]), float(rec["t"])
        sec = by_key.get(key)
        if sec is None:
            by_key[key] = _Section(
                rec["res"], rec["hold"], rec.get("w"), rec["fence"], rec["mode"], seq, seq, t, t
            )
        else:
            sec.seq_last, sec.t_last = seq, t
            if rec["mode"] == "x" or (rec["mode"] == "s" and sec.mode == "p"):
                sec.mode = rec["mode"]  # a mixed hold counts as its strongest mode
    out: dict[str, list[_Section]] = defaultdict(list)
    for sec in by_key.values():
        out[sec.res].append(sec)
    for secs in out.values():
        secs.sort(key=lambda s: s.seq_first)
    return out


def overlaps(oracle_records: Iterable[Record], permits: int | None = None) -> list[dict[str, Any]]:
    """Critical sections that interleave at the oracle, in the order they were detected.

    The *section* of a hold on ``res`` is the seq span from its first to its last write to
    ``res`` at the oracle, rejected writes included (a hold with only a ``begin`` write spans
    just that write). Two sections overlap when their spans intersect. Reported:

    * ``{"kind": "x/x" | "x/s" | "x/p", ...}``: an ``x`` section overlapping any other
      section, one entry per pair;
    * ``{"kind": "p>permits", ...}``: a ``p`` section starting while ``permits`` or more other
      ``p`` sections of ``res`` are open (one entry per such start; skipped when ``permits``
      is None);

    ``s`` vs ``s`` (and ``s`` vs ``p``) is allowed. Each entry is ``{"res", "kind", "holds":
    [hold ids], "sections": [{"res", "hold", "w", "fence", "mode", "seq_first", "seq_last",
    "t_first", "t_last"}]}``, the earlier section first.
    """
    found: list[dict[str, Any]] = []
    for res, secs in _sections(oracle_records).items():
        open_: list[_Section] = []
        for sec in secs:
            open_ = [o for o in open_ if o.seq_last >= sec.seq_first]
            for other in open_:
                if "x" in (other.mode, sec.mode):
                    pair = [other, sec]
                    kind = "/".join(sorted((other.mode, sec.mode), key="xsp".index))
                    found.append(_overlap(res, kind, pair))
            if sec.mode == "p" and permits is not None:
                held = [o for o in open_ if o.mode == "p"]
                if len(held) + 1 > permits:
                    found.append(_overlap(res, "p>permits", [*held, sec]))
            open_.append(sec)
    return found


def _overlap(res: str, kind: str, secs: list[_Section]) -> dict[str, Any]:
    return {
        "res": res,
        "kind": kind,
        "holds": [s.hold for s in secs],
        "sections": [s.to_json() for s in secs],
    }


# --------------------------------------------------------------------------- history checks


def op_counts(history: Iterable[Record]) -> dict[str, dict[str, int]]:
    """Events per op and phase: ``{op: {"invoke", "ok", "fail", "unknown", "info": int}}``.

    Every op of the history format is present (zeros included); unknown ops / phases are
    counted under their own names.
    """
    counts: dict[str, dict[str, int]] = {op: dict.fromkeys(_PHASES, 0) for op in _OPS}
    for ev in history:
        per = counts.setdefault(str(ev["op"]), dict.fromkeys(_PHASES, 0))
        per[str(ev["ph"])] = per.get(str(ev["ph"]), 0) + 1
    return counts


def token_regressions(history: Iterable[Record]) -> list[tuple[Record, Record]]:
    """Fencing tokens that went backwards: ``[(earlier_ok, regressed_ok)]``.

    For every ``acquire`` ``ok`` event B with a fence (``reenter`` excluded; all modes, the
    counter is per name), A is the ``acquire`` ``ok`` on the same name with the largest fence
    among those whose ``ok`` was logged before B's ``invoke`` (B's ``ok`` time if its invoke is
    missing). B is a regression when ``B.fence <= A.fence``: the library handed out a token
    that does not exceed one it had already confirmed. Needs servers that keep their counters
    (persistence) to be a goal.
    """
    events = list(history)
    invoked: dict[tuple[Any, Any], float] = {}
    for ev in events:
        if ev["op"] == "acquire" and ev["ph"] == "invoke":
            key = (ev.get("pid"), ev["hold"])
            invoked[key] = min(float(ev["t"]), invoked.get(key, math.inf))
    oks: dict[str, list[Record]] = defaultdict(list)
    for ev in events:
        if ev["op"] == "acquire" and ev["ph"] == "ok" and _is_int(ev.get("fence")):
            oks[ev["name"]].append(ev)
    found: list[tuple[Record, Record]] = []
    for evs in oks.values():
        by_ok = sorted(evs, key=lambda e: float(e["t"]))

        def start(e: Record) -> float:
            return invoked.get((e.get("pid"), e["hold"]), float(e["t"]))

        best: Record | None = None
        i = 0
        for b in sorted(evs, key=start):
            t_b = start(b)
            while i < len(by_ok) and float(by_ok[i]["t"]) < t_b:
                if best is None or by_ok[i]["fence"] > best["fence"]:
                    best = by_ok[i]
                i += 1
            if best is not None and b["fence"] <= best["fence"]:
                found.append((best, b))
    found.sort(key=lambda pair: float(pair[1]["t"]))
    return found


# --------------------------------------------------------------------------- audit checks


_STALLS = frozenset({"server_pause", "server_debug_sleep", "server_client_pause"})


def _is_kill(ev: Record) -> bool:
    """A nemesis entry that killed its worker: a ``client_kill``, or a crash point
    (``client_crash_unreplied``) that fired (it has a ``t_death``)."""
    kind = ev.get("kind")
    return kind == "client_kill" or (
        kind == "client_crash_unreplied" and ev.get("t_death") is not None
    )


def _server_of(target: Any) -> int:
    """The server index of a nemesis ``target`` (``"server:2"``) or audit ``server`` field."""
    if isinstance(target, str):
        target = target.rpartition(":")[2]
    try:
        return int(target)
    except (TypeError, ValueError):
        return 0


def _clock_steps(events: Iterable[Record], *, back: bool) -> dict[int, list[tuple[float, float]]]:
    """Per server: ``(time, seconds)`` of every step of its wall clock in one direction,
    from the ``server_clock_jump`` entries: a jump at ``t0``, then its heal, the other way,
    at ``t1`` (``t0`` if it has none)."""
    steps: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for ev in events:
        if ev.get("kind") != "server_clock_jump":
            continue
        jump = float((ev.get("params") or {}).get("jump", 0.0))
        server = _server_of(ev.get("target"))
        healed = float(ev["t0"] if ev.get("t1") is None else ev["t1"])
        if jump != 0.0:
            steps[server].append((float(ev["t0"]) if (jump < 0) == back else healed, abs(jump)))
    return steps


def _clock_steps_back(events: Iterable[Record]) -> dict[int, list[tuple[float, float]]]:
    """Per server: ``(time, seconds)`` of every backward step of its wall clock."""
    return _clock_steps(events, back=True)


def leases_alive_after_death(
    audit_holds: Iterable[Any],
    nemesis: Iterable[Record],
    lease: float,
    eps: float = 0.25,
    handoff: float = 0.0,
) -> list[dict[str, Any]]:
    """Holds of a killed worker seen on a server after ``t_death + handoff + lease + eps``.

    For every nemesis ``client_kill`` (or fired ``client_crash_unreplied``) with a pid,
    ``t_death`` (the kill time or, if later, the
    last time the worker's proxy delivered bytes upstream; ``t0`` if absent) is the moment
    after which the dead holder cannot touch a server, so every key it held must be gone
    within ``lease`` seconds (``eps`` covers Redis' active-expiry cycle and the audit's poll).
    Returns ``[{**hold interval, "t_death", "deadline", "excess"}]`` for each hold interval of
    that pid whose ``last`` (last seen present) is after ``deadline = t_death + handoff +
    lease + eps``; ``excess = last - deadline`` (seconds). ``handoff``: how long after its
    death a killed waiter may still be handed the lock by another's release (Lock, FairLock: its
    waiter lease, after which the queue skips it; 0 for kinds without hand-off).

    A request the dead worker handed to a server that was stalled at ``t_death``
    (``server_pause``, ``server_debug_sleep``, ``server_client_pause``) runs when the stall
    ends, so ``t_death`` moves to the end of such a stall (repeatedly, for back-to-back
    stalls).

    Redis expires keys by its wall clock, so a backward step of that clock
    (``server_clock_jump``: a negative ``params["jump"]`` at ``t0``, or the heal at ``t1``
    of a positive one) makes every key then alive on that server live as much longer. The
    deadline of a hold on server ``s`` grows by the size of every backward step of ``s``
    within ``[t_death - lease - extra, deadline + extra]``, ``extra`` being what the steps
    added so far (until it stops growing). Forward steps only shorten leases.
    """
    events = list(nemesis)
    steps_back = _clock_steps_back(events)
    stalls = sorted(
        (float(ev["t0"]), float(ev["t1"]))
        for ev in events
        if ev.get("kind") in _STALLS and ev.get("t1") is not None
    )
    deaths: dict[int, float] = {}
    for ev in events:
        if _is_kill(ev) and _is_int(ev.get("pid")):
            t_death = ev.get("t_death")
            t = float(ev["t0"] if t_death is None else t_death)
            for t0, t1 in stalls:
                if t0 <= t <= t1:
                    t = t1
            deaths[ev["pid"]] = min(t, deaths.get(ev["pid"], math.inf))
    found: list[dict[str, Any]] = []
    for hold in _dicts(audit_holds):
        pid = hold.get("pid")
        t_death_pid = deaths.get(pid) if isinstance(pid, int) else None
        if t_death_pid is None:
            continue
        base = t_death_pid + handoff + lease + eps
        steps = steps_back.get(_server_of(hold.get("server")), [])
        extra = 0.0
        while True:
            low, high = t_death_pid - lease - extra, base + extra
            grown = sum(size for t, size in steps if low <= t <= high)
            if grown <= extra:
                break
            extra = grown
        deadline = base + extra
        if float(hold["last"]) > deadline:
            found.append(
                {
                    **hold,
                    "t_death": t_death_pid,
                    "deadline": deadline,
                    "excess": float(hold["last"]) - deadline,
                }
            )
    found.sort(key=lambda h: float(h["last"]))
    return found


@dataclass
class _Hold:
    """What the history says about one hold, keyed (pid, hold)."""

    pid: Any
    hold: str
    w: Any
    name: str
    mode: str
    invoke: float
    ok: float | None = None
    fence: int | None = None
    release_invoke: float | None = None
    release_ok: float | None = None
    release_fail: float | None = None
    extend_fail: float | None = None  # invoke time of the first extend that completed "fail"
    lost: float | None = None


def _index_history(history: Iterable[Record]) -> dict[tuple[Any, str], _Hold]:
    holds: dict[tuple[Any, str], _Hold] = {}
    extends: dict[tuple[Any, str], list[float]] = defaultdict(list)
    for ev in sorted(history, key=lambda e: float(e["t"])):
        key = (ev.get("pid"), ev["hold"])
        op, ph, t = ev["op"], ev["ph"], float(ev["t"])
        if op == "acquire" and ph == "invoke":
            holds.setdefault(key, _Hold(key[0], ev["hold"], ev.get("w"), ev["name"], ev["mode"], t))
            continue
        h = holds.get(key)
        if h is None:
            if op != "acquire":
                continue
            # a completion whose invoke was not logged: start the hold at the completion
            h = holds[key] = _Hold(key[0], ev["hold"], ev.get("w"), ev["name"], ev["mode"], t)
        if op == "acquire" and ph == "ok" and h.ok is None:
            h.ok, h.fence = t, ev.get("fence")
        elif op == "release" and ph == "invoke" and h.release_invoke is None:
            h.release_invoke = t
        elif op == "release" and ph == "ok" and h.release_ok is None:
            h.release_ok = t
        elif op == "release" and ph == "fail" and h.release_fail is None:
            h.release_fail = t
        elif op == "extend" and ph == "invoke":
            extends[key].append(t)
        elif op == "extend" and ph in ("ok", "fail", "unknown"):
            started = extends[key].pop(0) if extends[key] else t
            if ph == "fail" and h.extend_fail is None:
                h.extend_fail = started
        elif op == "lost" and h.lost is None:
            h.lost = t
    return holds


def match_holds(
    history: Iterable[Record], audit_holds: Iterable[Any], *, exact_fence: bool = False
) -> tuple[dict[tuple[Any, str], list[Record]], list[Record]]:
    """Map audit hold intervals to history holds: ``({(pid, hold): [intervals]}, unmatched)``.

    An interval ``{server, name, pid, fence, first, ...}`` belongs to the hold of the same pid
    and name whose ``acquire`` was invoked last before ``first`` (a worker runs one acquire of a
    name at a time); among several such holds still unreleased at ``first`` the one with the
    same fence wins (several permits of a name in one process). It is unmatched when there is
    no such hold or that hold's acquire never logged ``ok`` (the worker did not know it held
    it). Fences are used only to break ties because a Redlock master's own counter may differ
    from the hold's token (the largest counter of the majority).

    With ``exact_fence`` (one server: the lock key's fence IS the hold's token) an interval
    matches only a hold with its fence; one that matches none is a ghost (an acquire whose
    reply was lost, applied while the worker went on) and stays unmatched. Without it, such
    a ghost that appeared after a later acquire was invoked would be blamed on that hold.
    """
    holds = _index_history(history)
    by_pid_name: dict[tuple[Any, str], list[_Hold]] = defaultdict(list)
    for h in holds.values():
        by_pid_name[(h.pid, h.name)].append(h)
    starts: dict[tuple[Any, str], list[float]] = {}
    for key, hs in by_pid_name.items():
        hs.sort(key=lambda h: h.invoke)
        starts[key] = [h.invoke for h in hs]
    matched: dict[tuple[Any, str], list[Record]] = defaultdict(list)
    unmatched: list[Record] = []
    # The intervals of one token (on every server) are one hold's: they are matched as a
    # group, by the earliest of them. Matched one by one, a Redlock grant that reached a
    # late master after its hold had been released (then undone by the release queued
    # behind it) was blamed on the worker's next hold, acquired meanwhile: "gone" 9 ms after
    # that hold's acquire, a loss never told (CI run with a CPU hog, redlock scenario).
    groups: dict[tuple[Any, str, str], list[Record]] = defaultdict(list)
    alone: list[list[Record]] = []
    for interval in _dicts(audit_holds):
        token = interval.get("token")
        if token and not exact_fence:  # several servers: a Redlock token is one acquire's
            groups[(interval.get("pid"), str(interval.get("name")), str(token))].append(interval)
        else:
            alone.append([interval])
    for group in [*groups.values(), *alone]:
        interval = min(group, key=lambda iv: float(iv["first"]))
        key = (interval.get("pid"), str(interval.get("name")))
        hs = by_pid_name.get(key, [])
        first = float(interval["first"])
        n = bisect.bisect_right(starts.get(key, []), first)
        if n == 0:
            unmatched.extend(group)
            continue
        chosen = hs[n - 1]
        same_fence = [
            h
            for h in hs[:n]
            if h.fence == interval.get("fence")
            and (h.release_ok is None or h.release_ok >= first)
            and h.ok is not None
        ]
        if same_fence:
            chosen = same_fence[-1]
        elif exact_fence:
            unmatched.extend(group)
            continue
        if chosen.ok is None:
            unmatched.extend(group)
        else:
            matched[(chosen.pid, chosen.hold)].extend(group)
    for ivs in matched.values():
        ivs.sort(key=lambda iv: float(iv["first"]))
    return dict(matched), unmatched


def _quorum_gone(
    intervals: Sequence[Record], servers: int, since: float | None = None
) -> float | None:
    """When the hold dropped below a majority of ``servers`` after having held one at or
    after ``since`` (the worker's acquire ``ok``). A majority that was seen, and went, while
    the acquire call was still running is no loss: a Redlock try whose grants came too late
    undoes them and tries again, and the worker never held that try."""
    quorum = servers // 2 + 1
    events: list[tuple[float, int, Any]] = []
    for iv in intervals:
        events.append((float(iv["first"]), 0, iv.get("server", 0)))
        if iv.get("gone") is not None:
            events.append((float(iv["gone"]), 1, iv.get("server", 0)))
    events.sort(key=lambda e: (e[0], e[1]))  # at equal times a start before an end
    present: Counter[Any] = Counter()
    reached = False
    judging = since is None
    for t, kind, server in events:
        if not judging and since is not None and t >= since:
            judging = True  # from here on; a majority present at ``since`` counts
            reached = sum(1 for v in present.values() if v > 0) >= quorum
        present[server] += 1 if kind == 0 else -1
        up = sum(1 for v in present.values() if v > 0)
        if up >= quorum:
            reached = reached or judging
        elif reached:
            return t
    return None


_CUT_OFF_SERVER = _STALLS | {"server_restart"}


def _cut_off(
    faults: Sequence[Record],
    h: _Hold,
    servers: set[int],
    start: float,
    end: float,
    hits: Any,
) -> bool:
    """Whether a fault kept worker ``h`` from its servers during ``[start, end]``: a proxy
    fault of that worker, or a stall or restart of one of ``servers``."""
    for ev in faults:
        t0 = float(ev["t0"])
        t1 = t0 if ev.get("t1") is None else float(ev["t1"])
        if t1 < start or t0 > end:
            continue
        kind = str(ev.get("kind"))
        if kind.startswith("proxy_") and hits(ev, h):
            return True
        if kind in _CUT_OFF_SERVER and _server_of(ev.get("target")) in servers:
            return True
    return False


class LossResult(NamedTuple):
    """The holds :func:`loss_notifications` judged, in three lists of dicts.

    Each entry: ``{"hold", "pid", "w", "name", "mode", "fence", "gone", "deadline", "lost":
    float | None, "delay": lost - gone | None, "reason": str}``; ``reason`` is ``"on time"``,
    ``"late"``, ``"missing"``, ``"told by its release"`` (on time: see
    :func:`loss_notifications`), ``"released as if held"`` (late or missing), or why the
    hold was excused: ``"paused"``, ``"killed"``, ``"releasing"``, ``"run ended"`` (the
    deadline fell after the history's end), ``"no majority seen"``.
    """

    on_time: list[dict[str, Any]]
    late_or_missing: list[dict[str, Any]]
    excused: list[dict[str, Any]]


def loss_notifications(
    history: Iterable[Record],
    audit_holds: Iterable[Any],
    nemesis: Iterable[Record],
    *,
    lease: float,
    bound: float,
    slack: float,
    servers: int | None = None,
    until: float | None = None,
) -> LossResult:
    """Loss notifications for the holds that vanished server-side unexpectedly.

    Audit intervals are tied to history holds by :func:`match_holds` (holds whose acquire never
    logged ``ok`` are not judged). A hold's ``gone`` time is when it stopped being present on a
    majority of the ``servers`` (default: inferred from the intervals' ``server`` fields) after
    having been present on one at or after the acquire's ``ok`` (a Redlock try undone inside
    the acquire call was never the worker's): for a single server, the audit's ``gone``; for
    Redlock, the moment the quorum was lost, which is what the library's watchdog must
    detect (a key lost on one master of five is no loss).

    A gone hold is *unexpected* unless, before ``gone`` and before any ``lost`` event for it,
    the worker invoked its ``release`` or invoked an ``extend`` that completed ``fail`` (the
    worker then already knew). Each unexpected loss is then, in this order:

    * ``on_time`` if the worker logged op ``lost`` for that hold by ``deadline = gone + bound +
      slack`` (``bound = renew_interval + socket_timeout``; ``slack`` covers the poll period of
      the audit and the watchdog);
    * if the worker invoked ``release`` after ``gone`` and by ``deadline`` (not told yet, it
      went to the server itself), that release is what tells it: ``on_time`` with reason
      ``"told by its release"`` if a ``lost`` event followed (a ``LockLostError``, however
      long faults held the call up), ``late_or_missing`` with reason ``"released as if
      held"`` if the release logged ``ok`` first, else excused ``"releasing"`` (the worker
      was killed or stopped while the call was still under way);
    * excused ``"paused"`` if a nemesis ``client_pause`` of that worker (matched by pid, else
      by worker id) overlapped ``[gone - lease, deadline]``, or ``"killed"`` if a
      ``client_kill`` of it happened before ``deadline`` (a dead process cannot log; the
      lower end does not apply since death is permanent). Server stalls, restarts and clock
      jumps are never excused: the watchdog must see through them;
    * excused ``"run ended"`` if ``deadline`` is after ``until`` (default: the last history
      event), since the worker was stopped before it could be judged;
    * otherwise ``late_or_missing``.

    Server clock jumps (``server_clock_jump`` entries). Redis expires keys by its wall clock,
    so a forward step of it ends a hold early, with no client fault: the next renewal must
    find it gone, within the same ``deadline``. Only when, besides, the worker could not
    reach the server (a proxy fault of that worker, or a stall or restart of one of the
    hold's servers, overlapping ``[gone, gone + bound + slack]``), after a forward step of
    one of the hold's servers within ``[gone - lease, gone]``, the deadline is ``gone +
    max(bound, lease) + slack``: the watchdog's own lease estimate, which no server clock
    moves, runs out at most one lease after the step, and then it reports the loss.
    """
    events = list(history)
    holds = _index_history(events)
    intervals_all = _dicts(audit_holds)
    if servers is None:
        servers = 1 + max((int(iv.get("server", 0)) for iv in intervals_all), default=0)
    matched, _ = match_holds(events, intervals_all, exact_fence=servers == 1)
    intervals_all = [iv for ivs in matched.values() for iv in ivs]
    if until is None:
        until = max((float(e["t"]) for e in events), default=-math.inf)
    faults = list(nemesis)
    pauses: list[Record] = []
    kills: list[Record] = []
    for ev in faults:
        if ev.get("kind") == "client_pause":
            pauses.append(ev)
        elif _is_kill(ev):
            kills.append(ev)
    steps_forward = _clock_steps(faults, back=False)

    def hits(ev: Record, h: _Hold) -> bool:
        if ev.get("pid") is not None:
            return bool(ev["pid"] == h.pid)
        return ev.get("w") is not None and ev.get("w") == h.w

    result = LossResult([], [], [])
    for key, intervals in sorted(matched.items(), key=lambda kv: str(kv[0])):
        h = holds[key]
        entry: dict[str, Any] = {
            "hold": h.hold,
            "pid": h.pid,
            "w": h.w,
            "name": h.name,
            "mode": h.mode,
            "fence": h.fence,
            "gone": None,
            "deadline": None,
            "lost": h.lost,
            "delay": None,
            "reason": "",
        }
        gone = _quorum_gone(intervals, servers, h.ok)
        if gone is None:
            if all(iv.get("gone") is not None for iv in intervals) and servers > 1:
                result.excused.append({**entry, "reason": "no majority seen"})
            continue
        told = math.inf if h.lost is None else h.lost
        knew = [t for t in (h.release_invoke, h.extend_fail) if t is not None]
        if any(t <= gone and t < told for t in knew):
            continue  # released / failed an extend first: not a loss to be notified of
        deadline = gone + bound + slack
        hold_servers = {_server_of(iv.get("server", 0)) for iv in intervals}
        if any(
            gone - lease <= t <= gone for s in hold_servers for t, _ in steps_forward.get(s, [])
        ) and _cut_off(faults, h, hold_servers, gone, deadline, hits):
            deadline = gone + max(bound, lease) + slack
        entry.update(gone=gone, deadline=deadline)
        if h.lost is not None:
            entry["delay"] = h.lost - gone
        releasing = h.release_invoke is not None and gone < h.release_invoke <= deadline
        if h.lost is not None and h.lost <= deadline:
            result.on_time.append({**entry, "reason": "on time"})
        elif releasing:
            said_ok = h.release_ok is not None and (
                h.release_fail is None or h.release_ok < h.release_fail
            )
            if said_ok and (h.lost is None or (h.release_ok or 0.0) < h.lost):
                result.late_or_missing.append({**entry, "reason": "released as if held"})
            elif h.lost is not None:
                result.on_time.append({**entry, "reason": "told by its release"})
            else:
                result.excused.append({**entry, "reason": "releasing"})
        elif any(
            hits(ev, h)
            and float(ev["t0"]) <= deadline
            and (ev.get("t1") is None or float(ev["t1"]) >= gone - lease)
            for ev in pauses
        ):
            result.excused.append({**entry, "reason": "paused"})
        elif any(hits(ev, h) and float(ev["t0"]) <= deadline for ev in kills):
            result.excused.append({**entry, "reason": "killed"})
        elif deadline > until:
            result.excused.append({**entry, "reason": "run ended"})
        else:
            reason = "missing" if h.lost is None else "late"
            result.late_or_missing.append({**entry, "reason": reason})
    for entries in result:
        entries.sort(key=lambda e: (e["gone"] is None, e["gone"] or 0.0))
    return result


# --------------------------------------------------------------------------- the report


def _audit_list(audit: Mapping[str, Any], *keys: str) -> list[Record] | None:
    for key in keys:
        if key in audit and audit[key] is not None:
            return _dicts(audit[key])
    return None


def _pct(part: int, whole: int) -> str:
    value = math.floor(1000 * part / whole) / 10  # never rounds 99.96 up to 100
    return f"{value:g}"


def check_run(
    history: Iterable[Record],
    oracle_records: Iterable[Record],
    nemesis: Iterable[Record],
    audit: Mapping[str, Any] | str,
    *,
    fenced: bool,
    lease: float,
    bound: float,
    permits: int | None,
    persistent: bool,
    slack: float = 0.25,
    eps: float = 0.25,
    servers: int | None = None,
    until: float | None = None,
    handoff: float = 0.0,
) -> Report:
    """Run every checker over one run's records and build the :class:`Report`.

    ``audit`` (a mapping, its JSON text, or an audit result dataclass) holds the audit data
    as lists of dicts (or audit dataclasses) under ``"holds"``
    (alias ``"hold_intervals"``), ``"ttl_violations"`` (alias ``"keys_without_ttl"``) and
    ``"foreign_touches"``; a missing list makes its line ``"not audited"`` (reported only).
    ``fenced``: the oracle ran fenced (stale accepted writes are then a failure); ``lease`` the
    lock's TTL, ``bound`` = renew interval + socket timeout, ``slack`` the loss check's poll
    slack and ``eps`` the expiry slack, all in seconds; ``permits`` the semaphore's limit
    (None: not a semaphore); ``persistent``: the servers keep their fence counters across
    restarts (token regressions are then a failure); ``servers`` / ``until``: see
    :func:`loss_notifications`; ``handoff``: see :func:`leases_alive_after_death`.

    Lines, in order: ``stale_writes_accepted``, ``stale_writes_rejected``,
    ``token_regressions``, ``overlapping_holders``, ``foreign_touches``, ``keys_without_ttl``,
    ``leases_alive_after_death``, ``loss_notifications``.
    """
    if isinstance(audit, str):
        audit = json.loads(audit)
    audit = _dict(audit)
    if not isinstance(audit, Mapping):
        raise TypeError(f"audit must be a mapping, its JSON text or a dataclass: {audit!r:.80}")
    events = list(history)
    oracle = list(oracle_records)
    faults = list(nemesis)
    lines: list[Line] = []

    accepted, rejected = stale_writes(oracle)

    def fmt_write(r: Record) -> str:
        return (
            f"{r['res']} seq {r['seq']} t={_t(r['t'])}: hold {r['hold']} "
            f"fence {r['fence']} {r['phase']} (last {r['last']})"
        )

    unfenced = None if fenced else "unfenced oracle"
    lines.append(_zero_line("stale_writes_accepted", accepted, fmt_write, unless=unfenced))
    lines.append(_count_line("stale_writes_rejected", rejected, "reported", None, fmt_write))

    regressions = token_regressions(events)

    def fmt_regression(pair: tuple[Record, Record]) -> str:
        a, b = pair
        return (
            f"{b['name']}: hold {b['hold']} (pid {b.get('pid')}) got fence {b['fence']} "
            f"at t={_t(b['t'])} after hold {a['hold']} got {a['fence']} at t={_t(a['t'])}"
        )

    volatile = None if persistent else "servers not persistent"
    lines.append(_zero_line("token_regressions", regressions, fmt_regression, unless=volatile))

    found = overlaps(oracle, permits)

    def fmt_overlap(o: dict[str, Any]) -> str:
        secs = " vs ".join(
            f"{s['hold']} ({s['mode']} fence {s['fence']}, seq {s['seq_first']}-{s['seq_last']}"
            f", t={_t(s['t_first'])}-{_t(s['t_last'])})"
            for s in o["sections"]
        )
        return f"{o['res']} {o['kind']}: {secs}"

    lines.append(_count_line("overlapping_holders", found, "reported", None, fmt_overlap))

    touches = _audit_list(audit, "foreign_touches")
    if touches is None:
        lines.append(Line("foreign_touches", "not audited", "0", None))
    else:
        lines.append(
            _zero_line(
                "foreign_touches",
                touches,
                lambda r: (
                    f"server {r.get('server')} t={_t(r.get('t'))} {r.get('script')} "
                    f"{r.get('command')} on {r.get('key')}: caller {r.get('caller')} "
                    f"owner {r.get('owner')}"
                ),
            )
        )

    no_ttl = _audit_list(audit, "ttl_violations", "keys_without_ttl")
    if no_ttl is None:
        lines.append(Line("keys_without_ttl", "not audited", "0", None))
    else:
        keys = sorted({(r.get("server"), str(r.get("key"))) for r in no_ttl}, key=str)
        lines.append(
            Line(
                "keys_without_ttl",
                len(keys),
                "0",
                not keys,
                _examples(
                    no_ttl,
                    lambda r: (
                        f"server {r.get('server')} {r.get('key')} ({r.get('type')}) "
                        f"at t={_t(r.get('t'))}"
                    ),
                ),
            )
        )

    audit_holds = _audit_list(audit, "holds", "hold_intervals")
    if audit_holds is None:
        lines.append(Line("leases_alive_after_death", "not audited", "0", None))
        lines.append(Line("loss_notifications", "not audited", "100 %", None))
        unmatched = 0
        excused_by: Counter[str] = Counter()
    else:
        alive = leases_alive_after_death(audit_holds, faults, lease, eps, handoff)
        lines.append(
            _zero_line(
                "leases_alive_after_death",
                alive,
                lambda h: (
                    f"server {h.get('server')} {h.get('name')} pid {h.get('pid')} "
                    f"fence {h.get('fence')}: seen at t={_t(h['last'])}, "
                    f"{h['excess']:.3f} s after t_death {_t(h['t_death'])} + lease + eps"
                ),
            )
        )
        losses = loss_notifications(
            events,
            audit_holds,
            faults,
            lease=lease,
            bound=bound,
            slack=slack,
            servers=servers,
            until=until,
        )
        unmatched = len(match_holds(events, audit_holds, exact_fence=servers in (None, 1))[1])
        excused_by = Counter(e["reason"] for e in losses.excused)
        excused = ", ".join(f"{n} {why}" for why, n in sorted(excused_by.items()))
        excused_note = f"excused: {excused}" if excused else ""
        on, bad = len(losses.on_time), len(losses.late_or_missing)
        if on + bad == 0:
            lines.append(Line("loss_notifications", "0 losses", "100 %", None, excused_note))
        else:

            def fmt_loss(e: dict[str, Any]) -> str:
                told = (
                    "no lost event"
                    if e["lost"] is None
                    else f"lost logged {e['delay']:.3f} s after"
                )
                return (
                    f"hold {e['hold']} (pid {e['pid']}, {e['name']}, fence {e['fence']}): "
                    f"gone at t={_t(e['gone'])}, {told}"
                )

            detail = "; ".join(
                p for p in (_examples(losses.late_or_missing, fmt_loss), excused_note) if p
            )
            lines.append(
                Line(
                    "loss_notifications",
                    f"{on}/{on + bad} ({_pct(on, on + bad)} %)",
                    "100 %",
                    bad == 0,
                    detail,
                )
            )

    ops = op_counts(events)
    counts: dict[str, Any] = {
        "ops": ops,
        "cycles": ops["acquire"]["ok"],
        "oracle_writes": len(oracle),
        "oracle_accepted": sum(1 for r in oracle if r["accepted"]),
        "faults": dict(Counter(str(f.get("kind")) for f in faults)),
        "audit_holds": 0 if audit_holds is None else len(audit_holds),
        "audit_holds_unmatched": unmatched,
        "losses_excused": dict(excused_by),
    }
    return Report(lines=lines, counts=counts)


# --------------------------------------------------------------------------- election, once


def stale_leader_reads(history: Iterable[Record], acts: Iterable[Record]) -> list[dict[str, Any]]:
    """``leader()`` reads that reported a term below a term already granted.

    A grant is an acquire ok of the ``election`` scenario (the campaign returned: the new
    leader is advertised, its term is the lock's fencing token). A read (act record
    ``{"kind": "leader", "name", "t0", "t1", "term"}``) invoked at ``t0`` after a grant of
    term ``T`` on its name completed must report nobody or a term ``>= T``: a leader is only
    reported while its term is the current one, and terms never go back. Returns one
    ``{"read": record, "granted": term, "hold": hold id}`` per violation.
    """
    grants: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for ev in history:
        if ev.get("op") == "acquire" and ev.get("ph") == "ok" and _is_int(ev.get("fence")):
            grants[str(ev["name"])].append((float(ev["t"]), int(ev["fence"]), str(ev["hold"])))
    best: dict[str, tuple[list[float], list[tuple[int, str]]]] = {}
    for name, items in grants.items():
        items.sort()
        times: list[float] = []
        maxima: list[tuple[int, str]] = []
        top: tuple[int, str] = (-1, "")
        for t, fence, hold in items:
            if fence > top[0]:
                top = (fence, hold)
            times.append(t)
            maxima.append(top)
        best[name] = (times, maxima)
    out: list[dict[str, Any]] = []
    for read in acts:
        if read.get("kind") != "leader" or not _is_int(read.get("term")):
            continue
        entry = best.get(str(read.get("name")))
        if entry is None:
            continue
        times, maxima = entry
        i = bisect.bisect_left(times, float(read["t0"])) - 1
        if i >= 0 and int(read["term"]) < maxima[i][0]:
            out.append({"read": read, "granted": maxima[i][0], "hold": maxima[i][1]})
    return out


def election_checks(history: Iterable[Record], acts: Iterable[Record]) -> list[Line]:
    """The ``election`` scenario's lines (the generic ones already cover the rest:
    ``stale_writes_accepted`` is "never two leaders acting with the same or a lower term",
    ``token_regressions`` "terms never go back").

    * ``stale_leader_reads`` (goal 0): :func:`stale_leader_reads`;
    * ``leader_reads``: reads that named this worker / another / nobody / failed (reported);
    * ``leaderships_lost``: loss notifications (``lost`` events) of leaders (reported: a
      paused or cut-off leader must lose, and hear about it).
    """
    events = list(history)
    records = [a for a in acts if a.get("kind") == "leader"]
    stale = stale_leader_reads(events, records)
    lines = [
        _zero_line(
            "stale_leader_reads",
            stale,
            lambda v: (
                f"{v['read'].get('name')}: w{v['read'].get('w')} read term {v['read']['term']} "
                f"({v['read'].get('identity')}) at t={_t(v['read']['t0'])}, after term "
                f"{v['granted']} was granted (hold {v['hold']})"
            ),
        )
    ]
    kinds: Counter[str] = Counter()
    for r in records:
        if r.get("err"):
            kinds["failed"] += 1
        elif r.get("term") is None:
            kinds["nobody"] += 1
        elif r.get("term") == r.get("mine"):
            kinds["self"] += 1
        else:
            kinds["other"] += 1
    value = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "0"
    lines.append(Line("leader_reads", value, "reported", None))
    lost = [e for e in events if e.get("op") == "lost"]
    lines.append(
        _count_line(
            "leaderships_lost",
            lost,
            "reported",
            None,
            lambda e: f"{e.get('name')} hold {e.get('hold')} t={_t(e.get('t'))}: {e.get('err')}",
        )
    )
    return lines


_SUCCESS = ("ok", "ok-foreign")


def once_checks(acts: Iterable[Record]) -> list[Line]:
    """The ``once`` scenario's lines, over the act records ``{"kind": "once", "name", "key",
    "t", "outcome", "fence"}`` (outcomes: see ``docs/torture.md``).

    * ``double_runs`` (goal 0): periods (name, key) with two or more runs whose block ended
      well (``ok``, or ``ok-foreign``: ended well but the record is another run's);
    * ``once_runs``: outcomes counted (reported);
    * ``failed_periods_rerun``: periods whose run failed (``failed``, ``lost``, ``error``)
      and that some later run then completed (reported);
    * ``failed_periods_undone``: periods whose run failed and that no run completed (the
      period or the run ended first; reported).
    """
    runs: dict[tuple[str, str], list[Record]] = defaultdict(list)
    outcomes: Counter[str] = Counter()
    for a in acts:
        if a.get("kind") != "once":
            continue
        outcomes[str(a.get("outcome"))] += 1
        runs[(str(a.get("name")), str(a.get("key")))].append(a)
    doubles: list[tuple[tuple[str, str], list[Record]]] = []
    rerun = undone = 0
    for period, items in sorted(runs.items()):
        items.sort(key=lambda a: float(a["t"]))
        good = [a for a in items if a.get("outcome") in _SUCCESS]
        if len(good) > 1:
            doubles.append((period, good))
        failed = [a for a in items if a.get("outcome") in ("failed", "lost", "error")]
        if failed:
            if any(float(g["t"]) > float(failed[0]["t"]) for g in good):
                rerun += 1
            elif not good:
                undone += 1
    lines = [
        _zero_line(
            "double_runs",
            doubles,
            lambda d: (
                f"{d[0][0]} {d[0][1]}: "
                + ", ".join(
                    f"w{a.get('w')} fence {a.get('fence')} {a.get('outcome')}" for a in d[1]
                )
            ),
        )
    ]
    value = ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())) or "0"
    lines.append(Line("once_runs", value, "reported", None))
    lines.append(Line("failed_periods_rerun", rerun, "reported", None))
    lines.append(Line("failed_periods_undone", undone, "reported", None))
    return lines
