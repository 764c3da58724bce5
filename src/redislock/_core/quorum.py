# SPDX-License-Identifier: MIT
"""Redlock: the mutex over N independent masters, shared by :class:`redislock.Redlock` and
:class:`redislock.AsyncRedlock`.

Source: the Redis docs' distributed-locks page ("The Redlock Algorithm"): send the same
``SET NX PX`` (our ``lock_acquire`` script) to every master at once with a per-master
timeout much shorter than the TTL; the lock is held only if a majority (``N // 2 + 1``)
granted it and the *validity* ``ttl - elapsed - drift`` (drift = ``drift_factor * ttl +
2 ms``, elapsed measured with ``time.monotonic()`` from before the first send) is still
positive; otherwise release on every master, including those that seemed to fail, and try
again after a random delay. An extension counts only if a majority extended it in time.

**Fencing (our addition).** Kleppmann (2016) shows that Redlock's random value cannot
serve as a fencing token and that independent counters do not agree. We give a token
anyway, with a rule that makes it monotonic without consensus on the happy path:

1. every master INCRs its own ``fence`` counter when it grants the lock (as for ``Lock``);
2. the hold's token ``F`` is the largest value among the granting majority;
3. before acquire returns, a majority of masters must have a counter ``>= F``: the masters
   that returned exactly ``F`` count; if they are fewer than the quorum, the others are
   raised to ``F`` (``redlock_fence.lua``) and must confirm.

Claim: if grant G1 returned before grant G2 started, then ``F2 > F1``. Any two majorities
meet, so some master is in both G1's "counter >= F1" set and G2's granting set; it reached
``>= F1`` before G1 returned, hence before G2's INCR there, which therefore returned
``> F1``, and ``F2`` is the largest of G2's values. The claim needs no timing assumption
(it holds even when clock jumps break mutual exclusion), only that masters do not lose
their counters (persistence with ``appendfsync always``, or a restart delayed past the
largest TTL, as the distlock page already requires). ``tests/test_quorum_model.py`` checks
the rule on a model over every interleaving hypothesis finds, and that dropping step 3
breaks it. With balanced counters (the normal case) step 3 sends nothing.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

from redislock._clients import RESPONSE_ERRORS
from redislock._core import validate
from redislock._core.lock import Holding, LockCore, LockStatistics, holder_meta, new_token
from redislock._core.ops import Call, Eval, FanOut, Flow, NodeLateError, Sleep, as_int, as_str
from redislock._core.options import DEFAULT_DRIFT_FACTOR, DEFAULT_RETRY_DELAY, QuorumOptions
from redislock._core.scripts import SCRIPTS
from redislock.errors import (
    LockConfigError,
    LockLostError,
    LockUsageError,
    QuorumError,
    UnexpectedReplyError,
)

__all__ = [
    "DEFAULT_DRIFT_FACTOR",
    "DEFAULT_RETRY_DELAY",
    "IDENTIFY",
    "MasterMemory",
    "RedlockCore",
    "check_masters",
    "outcome_of",
]


IDENTIFY = Call(("INFO", "server"))
"""The command that reads a master's run_id (the quorum clients remember the answers)."""

_ACQUIRE = SCRIPTS["lock_acquire"]
_RELEASE = SCRIPTS["lock_release"]
_STATUS = SCRIPTS["lock_status"]
_FENCE = SCRIPTS["redlock_fence"]


def outcome_of(reply: object) -> str:
    """One master's answer as an outcome word: "ok", "busy", "gone", "taken", "late" or
    "error: <type>: <message>"."""
    if isinstance(reply, NodeLateError):
        return "late"
    if isinstance(reply, BaseException):
        return f"error: {type(reply).__name__}: {reply}"
    if isinstance(reply, list | tuple):
        return as_str(reply[0]) if reply else "error: empty reply"
    return as_str(reply)


@dataclass(slots=True)
class RedlockCore(LockCore):
    """Configuration, local state and flows of one Redlock object. No I/O.

    Every flow yields :class:`FanOut` operations (one operation per master) and
    :class:`Sleep`; the shells' quorum client performs them.
    """

    labels: tuple[str, ...] = ()
    quorum: int = 0
    node_timeout: float = 0.0
    drift: float = 0.0
    retry_delay: float = DEFAULT_RETRY_DELAY
    fencing: bool = True
    memories: tuple[MasterMemory, ...] = ()
    """What is remembered of each master's client (shared by every lock over it)."""

    @classmethod
    def build(cls, labels: tuple[str, ...], name: Any, **options: Any) -> Self:
        """Validate ``name`` and the option keywords (as :class:`QuorumOptions`; raises
        :class:`LockConfigError`) and build the core over masters ``labels``."""
        return cls.from_quorum(labels, name, QuorumOptions(**options))

    @classmethod
    def from_quorum(cls, labels: tuple[str, ...], name: Any, options: QuorumOptions) -> Self:
        """Validate ``name`` and build the core over masters ``labels`` with the validated
        ``options``."""
        core = cls.from_options(name, options)
        core.labels = labels
        core.memories = tuple(MasterMemory() for _ in labels)
        core.quorum = len(labels) // 2 + 1
        assert options.node_timeout is not None  # resolved by the options
        core.node_timeout = options.node_timeout
        core.drift = options.drift
        core.retry_delay = options.retry_delay
        core.fencing = options.fencing
        return core

    @property
    def n(self) -> int:
        """The number of masters."""
        return len(self.labels)

    def _all(
        self,
        op: Eval | Call,
        decided: Callable[[Sequence[object]], bool] | None = None,
        *,
        cleanup: bool = False,
    ) -> FanOut:
        return FanOut((op,) * self.n, self.node_timeout, decided, cleanup)

    def _decider(self, against: tuple[str, ...]) -> Callable[[Sequence[object]], bool]:
        """When a round's outcome is known before every master answered: a majority said
        "ok", or more masters than the majority can spare said one of ``against`` (e.g.
        "busy"), or failed. A master that has not answered yet can change neither."""
        quorum, spare = self.quorum, self.n - self.quorum

        def decided(answers: Sequence[object]) -> bool:
            ok = no = failed = 0
            for reply in answers:
                word = "error" if isinstance(reply, BaseException) else _word(reply)
                if word == "ok":
                    ok += 1
                elif word in against:
                    no += 1
                else:
                    failed += 1
            return ok >= quorum or no > spare or failed > spare

        return decided

    def _error(self, operation: str, outcomes: list[str]) -> QuorumError:
        """A :class:`QuorumError` naming each master's outcome word."""
        by_master = dict(zip(self.labels, outcomes, strict=True))
        return QuorumError(self.name, operation, self.quorum, by_master)

    # ------------------------------------------------------------------ identity

    def identify_flow(self) -> Flow[None]:
        """Ask every master whose run_id is not remembered for it; two masters with one
        run_id are one server counted twice, which would fake a majority."""
        memories = self.memories
        replies = yield FanOut(
            tuple(None if m.run_id is not None else IDENTIFY for m in memories),
            self.node_timeout,
        )
        for m, reply in zip(memories, replies, strict=True):
            if m.run_id is not None:
                continue
            if isinstance(reply, dict):
                found = reply.get("run_id")
                m.run_id = "" if found is None else as_str(found)
            elif isinstance(reply, RESPONSE_ERRORS):  # INFO refused (ACL): stop asking
                m.run_id = ""
        seen: dict[str, int] = {}
        for i, m in enumerate(memories):
            rid = m.run_id
            if not rid:
                continue
            if rid in seen:
                # Forget every id: the next acquire (of any lock over these clients) asks
                # again and refuses again, instead of counting one server twice.
                for other in memories:
                    other.run_id = None
                raise LockConfigError(
                    f"masters {self.labels[seen[rid]]} and {self.labels[i]} are the same "
                    f"server (run_id {rid[:12]}…): Redlock needs independent masters"
                )
            seen[rid] = i

    # ------------------------------------------------------------------ acquire

    def acquire_flow(self, wait: float | None, blocking: bool) -> Flow[bool]:
        """Take the lock on a majority of masters within the validity time, waiting up to
        ``wait`` seconds (None: no limit) with random pauses between tries.

        Returns False only when the lock is busy (held elsewhere on enough masters that no
        majority is possible); raises :class:`QuorumError` when failures or late answers
        are what kept the majority away.
        """
        if self.live() is not None:
            raise LockUsageError(
                f"lock {self.name!r} is already held by this object (it is not reentrant)"
            )
        if any(m.run_id is None for m in self.memories):
            yield from self.identify_flow()
        token = new_token()
        self.pending_token = token
        start = time.monotonic()
        deadline = None if wait is None else start + wait
        meta = holder_meta()
        try:
            while True:
                sent = time.monotonic()
                outcomes, grant = yield from self._try_flow(token, meta)
                validity_end = sent + self.lease - self.drift
                if grant is not None and time.monotonic() < validity_end:
                    self.holding = self._holding(token, grant, sent, validity_end)
                    self.last_lost = False
                    self.counters.acquisitions += 1
                    self.counters.total_wait += time.monotonic() - start
                    return True
                # Not held: undo on every master, including those that seemed to fail.
                yield from self.abandon_flow(token)
                if outcomes.count("ok") >= self.quorum:  # a majority said yes, but too late
                    outcomes = ["late" if o == "ok" else o for o in outcomes]
                busy = outcomes.count("busy")
                failed = len(outcomes) - busy - outcomes.count("ok")
                if failed > self.n - self.quorum:
                    raise self._error("acquire", outcomes)  # an outage, not contention
                now = time.monotonic()
                if not blocking or wait == 0 or (deadline is not None and now >= deadline):
                    if busy > self.n - self.quorum or failed == 0:
                        self.counters.failed_acquisitions += 1
                        self.counters.total_wait += now - start
                        return False
                    raise self._error("acquire", outcomes)
                pause = random.uniform(0.0, self.retry_delay)
                if deadline is not None:
                    pause = min(pause, deadline - now)
                yield Sleep(max(pause, 0.0))
        finally:
            self.pending_token = None

    def _try_flow(self, token: str, meta: str) -> Flow[tuple[list[str], Any]]:
        """One try on every master: (the outcome word of each master, the grant: the
        fencing token, or None when no majority granted it or the token could not be made
        safe)."""
        keys = self.keys
        op = Eval(
            _ACQUIRE,
            (keys.lock, keys.fence, keys.wait),
            (token, self.lease_ms, meta, 0),
        )
        replies = yield self._all(op, self._decider(("busy",)))
        outcomes = [outcome_of(r) for r in replies]
        counters: list[dict[str, int] | None] = [
            {self.name: as_int(r[1])} if o == "ok" and isinstance(r, list | tuple) else None
            for r, o in zip(replies, outcomes, strict=True)
        ]
        if outcomes.count("ok") < self.quorum:
            return outcomes, None
        fence = max(c[self.name] for c in counters if c is not None)
        if self.fencing:
            safe = yield from self._publish_fences(counters, {self.name: fence})
            if not safe:
                return outcomes, None
        return outcomes, fence

    def _holding(self, token: str, grant: Any, sent: float, validity_end: float) -> Holding:
        return Holding(
            token=token,
            fence=int(grant),
            pid=os.getpid(),
            acquired_at=sent,
            expires_at=validity_end,
        )

    def _fence_key(self, name: str) -> str:
        """The fence key of ``name`` (this lock's own for a single name)."""
        return self.keys.fence

    def _publish_fences(
        self, counters: list[dict[str, int] | None], fences: dict[str, int]
    ) -> Flow[bool]:
        """Step 3 of quorum fencing: make a majority of masters hold, for every name, a
        counter >= its token. ``counters[i]``: the values master i returned when it granted
        (None: it did not). Masters that returned a smaller value, or did not grant, are
        raised in one script each; True when every name reaches a majority."""
        have = {
            name: sum(1 for c in counters if c is not None and c.get(name) == fence)
            for name, fence in fences.items()
        }
        short = sorted(name for name, count in have.items() if count < self.quorum)
        if not short:
            return True
        needs: list[list[str]] = [
            [name for name in short if c is None or c.get(name) != fences[name]] for c in counters
        ]
        answers = yield FanOut(
            tuple(
                Eval(
                    _FENCE,
                    tuple(self._fence_key(name) for name in need),
                    tuple(fences[name] for name in need),
                )
                if need
                else None
                for need in needs
            ),
            self.node_timeout,
        )
        for need, answer in zip(needs, answers, strict=True):
            if need and isinstance(answer, int) and answer == len(need):
                for name in need:
                    have[name] += 1
        return all(have[name] >= self.quorum for name in short)

    # ------------------------------------------------------------------ release

    def release_flow(self, h: Holding, *, retry: bool = False) -> Flow[None]:
        """Compare-and-delete on every master.

        Raises :class:`LockLostError` if the hold was lost (known before, or no majority
        still had it), :class:`QuorumError` if failures kept the answer from a majority
        (the object keeps the hold; the keys left run out with their TTL).
        """
        outcomes = yield from self._release_all(h.token)
        ok = outcomes.count("ok")
        lost = sum(1 for o in outcomes if o in ("gone", "taken"))
        if ok < self.quorum and lost <= self.n - self.quorum and not h.lost:
            raise self._error("release", outcomes)
        if self.holding is h:
            self.holding = None
        if retry and ok < self.quorum and not h.lost:
            return
        if h.lost:
            self.last_lost = True
            raise LockLostError(self.name, h.lost_reason)
        if ok < self.quorum:
            self.mark_lost(h, "fewer than a majority of masters still had it", releasing=True)
            raise LockLostError(self.name, h.lost_reason)

    def abandon_flow(self, token: str) -> Flow[None]:
        """Delete ``token``'s keys on every master (cleanup after a failed or cancelled
        acquire)."""
        yield from self._release_all(token)

    def _release_all(self, token: str) -> Flow[list[str]]:
        """Owner-checked delete on every master; the outcome word of each. A master still
        busy with an earlier command (the acquire this undoes, say) gets it afterwards."""
        op = self._release_op(token)
        replies = yield self._all(op, self._decider(("gone", "taken")), cleanup=True)
        return [outcome_of(r) for r in replies]

    # ------------------------------------------------------------------ extend, status

    def _extend_step(self, h: Holding, seconds: float, mode: str) -> Flow[tuple[str, float]]:
        """Owner-checked PEXPIRE on every master: ("ok", validity in seconds; the local
        estimate ``h.expires_at`` moved), or ("gone"/"taken", 0.0) when no majority can
        still have it. Raises :class:`QuorumError` when failures decide."""
        sent = time.monotonic()
        outcomes, ttls = yield from self._extend_all(h.token, validate.to_ms(seconds), mode)
        if len(ttls) >= self.quorum:
            end = sent + _quorum_value_f(ttls, self.quorum) - self.drift
            if time.monotonic() < end:
                h.expires_at = end
                return "ok", end - sent
        gone = outcomes.count("gone")
        taken = outcomes.count("taken")
        if gone + taken > self.n - self.quorum:
            return ("taken" if taken else "gone"), 0.0
        raise self._error("extend", outcomes)

    def _extend_all(self, token: str, ms: int, mode: str) -> Flow[tuple[list[str], list[float]]]:
        """Owner-checked PEXPIRE on every master: the outcome word of each, and the new
        TTL in seconds of each that extended. An "add" carries one op id (the same on every
        master, remembered in each one's done key), so a client's retry adds nothing."""
        op = self._extend_op(token, ms, mode)
        replies = yield self._all(op, self._decider(("gone", "taken")))
        return _with_ttls(replies)

    def status_flow(self, token: str) -> Flow[tuple[str, float, int]]:
        """What ``token`` holds on a majority: (status, validity seconds, fencing token)."""
        sent = time.monotonic()
        outcomes, ttls = yield from self._status_all(token)
        for o in outcomes:
            if o not in ("ok", "gone", "taken", "late") and not o.startswith("error:"):
                raise UnexpectedReplyError(f"status replied {o!r}")
        if len(ttls) >= self.quorum:
            left = _quorum_value_f(ttls, self.quorum) - self.drift - (time.monotonic() - sent)
            if left > 0:
                h = self.current()
                return "ok", left, 0 if h is None else h.fence
        if outcomes.count("gone") + outcomes.count("taken") > self.n - self.quorum:
            return ("taken" if "taken" in outcomes else "gone"), 0.0, 0
        if len(ttls) >= self.quorum:
            return "gone", 0.0, 0  # a majority has it, but its validity has run out
        raise self._error("status", outcomes)

    def _status_all(self, token: str) -> Flow[tuple[list[str], list[float]]]:
        """What ``token`` holds on every master: outcome words, and the TTL in seconds of
        each master where it holds."""
        replies = yield self._all(Eval(_STATUS, (self.keys.lock,), (token,)))
        return _with_ttls(replies)

    def locked_flow(self) -> Flow[bool]:
        """Whether a majority of masters has the lock (anybody's)."""
        replies = yield from self._locked_all()
        have = sum(1 for r in replies if r is True)
        absent = sum(1 for r in replies if r is False)
        if have >= self.quorum:
            return True
        if absent > self.n - self.quorum:
            return False
        words = ["held" if r is True else "free" if r is False else outcome_of(r) for r in replies]
        raise self._error("locked", words)

    def _locked_all(self) -> Flow[list[object]]:
        """Per master: whether the lock key exists, or the exception it failed with."""
        replies = yield self._all(Call(("EXISTS", self.keys.lock)))
        return [r > 0 if isinstance(r, int) else r for r in replies]

    def statistics(self) -> LockStatistics:
        """As :meth:`LockCore.statistics`; ``fencing_token`` is None with ``fencing=False``."""
        stats = LockCore.statistics(self)
        return stats if self.fencing else dataclasses.replace(stats, fencing_token=None)

    def adopt_flow(self, token: Any) -> Flow[None]:
        """Not supported: a Redlock hold's fencing token cannot be recovered from masters."""
        raise LockUsageError(
            "Redlock holds cannot be adopted (nor detached): the fencing token of a "
            "quorum hold cannot be read back from the masters"
        )


def _word(reply: object) -> str:
    """:func:`outcome_of`, never raising (an unexpected reply is an "error")."""
    try:
        return outcome_of(reply)
    except Exception:
        return "error"


def _with_ttls(replies: list[object]) -> tuple[list[str], list[float]]:
    """Outcome words of ``{status, pttl_ms, ...}`` replies, and the TTLs (seconds) of the
    "ok" ones."""
    outcomes = [outcome_of(r) for r in replies]
    ttls = [
        as_int(r[1]) / 1000.0
        for r, o in zip(replies, outcomes, strict=True)
        if o == "ok" and isinstance(r, list | tuple)
    ]
    return outcomes, ttls


def _quorum_value_f(values: list[float], quorum: int) -> float:
    """The value a majority reaches: the quorum-th largest (values has >= quorum entries)."""
    return sorted(values, reverse=True)[quorum - 1]


@dataclass(slots=True)
class MasterMemory:
    """What the quorum cores remember about one master's client, across lock objects (the
    fan-out driver keeps it in the client's state): its server's ``run_id`` once read
    ("" when it cannot be read, None until asked)."""

    run_id: str | None = None


def check_masters(clients: Any, client_types: tuple[type, ...], hint: str) -> tuple[str, ...]:
    """Validate a Redlock's masters before any I/O; returns one label per master.

    Raises :class:`LockConfigError` for a non-sequence, fewer than 3 masters, a client of
    the wrong type, or one endpoint given twice (the same object, or the same host, port or
    socket path and database). Warns (:class:`RuntimeWarning`) on an even count: it
    tolerates no more failures than one master fewer.
    """
    if isinstance(clients, str | bytes) or not isinstance(clients, list | tuple):
        raise LockConfigError(f"masters must be a list or tuple of clients, got {clients!r}")
    if len(clients) < 3:
        raise LockConfigError(
            f"Redlock needs at least 3 independent masters, got {len(clients)}; "
            "with one Redis use Lock"
        )
    labels: list[str] = []
    seen: dict[tuple[object, ...], int] = {}
    for i, client in enumerate(clients):
        if not isinstance(client, client_types):
            raise LockConfigError(f"master {i} must be {hint}, got {type(client).__name__}")
        kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
        path = kwargs.get("path")
        host, port, db = (
            kwargs.get("host", "localhost"),
            kwargs.get("port", 6379),
            kwargs.get("db", 0),
        )
        label = str(path) if path else f"{host}:{port}"
        if db:
            label += f"/{db}"
        endpoint = ("unix", path, db) if path else ("tcp", host, port, db)
        if endpoint in seen or any(c is client for c in clients[:i]):
            raise LockConfigError(
                f"masters {seen.get(endpoint, i)} and {i} are the same endpoint ({label}): "
                "Redlock needs independent masters"
            )
        seen[endpoint] = i
        labels.append(label if label not in labels else f"{label}#{i}")
    if len(clients) % 2 == 0:
        warnings.warn(
            f"Redlock over an even number of masters ({len(clients)}) tolerates no more "
            f"failures than {len(clients) - 1} would; use an odd number",
            RuntimeWarning,
            stacklevel=4,
        )
    return tuple(labels)
