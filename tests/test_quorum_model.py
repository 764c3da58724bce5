# SPDX-License-Identifier: MIT
"""Model test of Redlock's quorum fencing tokens (the claim in ``redislock/_core/quorum.py``).

Claim: if Redlock grant G1 returned before grant G2 started, G2's fencing token is greater,
with no timing assumption, as long as no master loses its counter.

The code under test is the real :class:`RedlockCore` (its acquire and release flows, which
hold every decision: majority, largest counter, write-back). Only the masters are a model:
each is a dict, and each script is applied with its documented semantics. Hypothesis's
stateful testing then explores interleavings that real servers would almost never show:

- every per-master operation of every client is delivered at a separate step, in any order
  across clients and masters;
- an operation can be lost (applied or not, its reply never arrives: "late");
- a master can drop a lock key at any moment (a TTL running out early, a clock jump on that
  master, a restart with its counter intact): mutual exclusion is NOT assumed.

The invariant is checked after every step. The negative control runs the same machine with
step 3 of the rule (the write-back) removed and must find a violation, so the test is shown
not to be blind.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from redislock._core.lock import Holding
from redislock._core.ops import Eval, FanOut, Flow, NodeLateError
from redislock._core.quorum import RedlockCore

PREFIX = "m:"


class Master:
    """One master's keys, with the scripts Redlock sends applied as their headers say."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def apply(self, op: Any) -> object:
        assert isinstance(op, Eval), op
        name = op.script.name
        if name == "lock_acquire":
            lock, fence, _wait = op.keys
            token = str(op.args[0])
            held = self.data.get(lock)
            if held is None:
                self.data[fence] = self.data.get(fence, 0) + 1
                self.data[lock] = (token, self.data[fence])  # the value keeps the token
                return ["ok", self.data[fence]]
            if held[0] == token:
                return ["ok", held[1]]
            return ["busy", 1000]
        if name == "lock_release":
            lock = op.keys[0]
            held = self.data.get(lock)
            if held is None:
                return "gone"
            if held[0] != str(op.args[0]):
                return "taken"
            del self.data[lock]
            return "ok"
        if name == "redlock_fence":
            for fence, want in zip(op.keys, op.args, strict=True):
                self.data[fence] = max(self.data.get(fence, 0), int(want))
            return len(op.keys)
        raise AssertionError(f"the model has no script {name}")


@dataclass
class Client:
    core: RedlockCore
    flow: Flow[Any] | None = None
    kind: str = ""  # "acquire" or "release"
    ops: tuple[Any, ...] = ()
    replies: dict[int, object] = field(default_factory=dict)
    started: int = 0
    holding: Holding | None = None


@dataclass(frozen=True)
class Grant:
    fence: int
    started: int
    returned: int


def build_core(n: int) -> RedlockCore:
    core = RedlockCore.build(
        tuple(f"m{i}" for i in range(n)),
        "model",
        node_timeout=None,
        drift_factor=0.01,
        retry_delay=0.2,
        fencing=True,
        ttl=1000.0,  # validity never runs out here: the claim must hold without timing
        watchdog_lease=30.0,
        renew_interval=None,
        max_lease=None,
        timeout=None,
        recheck_interval=0.5,
        prefix=PREFIX,
        on_lost=None,
    )
    for i, memory in enumerate(core.memories):
        memory.run_id = f"run-{i}"  # distinct servers: no INFO round
    return core


class FencingMachine(RuleBasedStateMachine):
    """Clients acquiring and releasing one Redlock name over model masters."""

    masters_count = 3
    clients_count = 3

    def __init__(self) -> None:
        super().__init__()
        self.masters = [Master() for _ in range(self.masters_count)]
        self.clients = [Client(self.make_core()) for _ in range(self.clients_count)]
        self.clock = 0  # logical time: one tick per step
        self.grants: list[Grant] = []

    def make_core(self) -> RedlockCore:
        return build_core(self.masters_count)

    # ------------------------------------------------------------------ driving flows

    def _advance(self, c: Client, reply: object) -> None:
        """Feed ``reply`` into the client's flow and take its next fan-out."""
        assert c.flow is not None
        try:
            op = c.flow.send(reply)
        except StopIteration as stop:
            self._finished(c, stop.value)
            return
        except Exception:  # QuorumError, LockLostError: the client gave up
            self._finished(c, False)
            return
        assert isinstance(op, FanOut), f"unexpected operation {op!r}"
        c.ops, c.replies = op.ops, {}
        for i, sub in enumerate(op.ops):
            if sub is None:
                c.replies[i] = None
        self._maybe_complete(c)

    def _maybe_complete(self, c: Client) -> None:
        if c.flow is not None and len(c.replies) == len(c.ops):
            replies = [c.replies[i] for i in range(len(c.ops))]
            self._advance(c, replies)

    def _finished(self, c: Client, result: object) -> None:
        kind, c.flow, c.ops, c.replies = c.kind, None, (), {}
        if kind == "acquire" and result is True:
            h = c.core.holding
            assert h is not None
            c.holding = h
            self.grants.append(Grant(h.fence, c.started, self.clock))
        elif kind == "release" and c.core.holding is None:
            c.holding = None  # (a release that failed on a quorum keeps the hold: retry it)

    def _start(self, c: Client, kind: str, flow: Flow[Any]) -> None:
        c.kind, c.flow, c.started = kind, flow, self.clock
        try:
            op = next(flow)
        except StopIteration as stop:
            self._finished(c, stop.value)
            return
        assert isinstance(op, FanOut)
        c.ops, c.replies = op.ops, {i: None for i, sub in enumerate(op.ops) if sub is None}
        self._maybe_complete(c)

    # ------------------------------------------------------------------ rules

    def _pending(self) -> list[tuple[Client, int]]:
        return [
            (c, i)
            for c in self.clients
            if c.flow is not None
            for i in range(len(c.ops))
            if i not in c.replies
        ]

    @rule(k=st.integers(0, 99))
    def start_acquire(self, k: int) -> None:
        idle = [c for c in self.clients if c.flow is None and c.holding is None]
        if idle:
            c = idle[k % len(idle)]
            self.clock += 1
            self._start(c, "acquire", c.core.acquire_flow(0.0, False))

    @rule(k=st.integers(0, 99))
    def start_release(self, k: int) -> None:
        holders = [c for c in self.clients if c.flow is None and c.holding is not None]
        if holders:
            c = holders[k % len(holders)]
            assert c.holding is not None
            self.clock += 1
            c.holding.closing = True
            self._start(c, "release", c.core.release_flow(c.holding))

    @rule(k=st.integers(0, 999))
    def deliver(self, k: int) -> None:
        """A master runs one pending operation of a client, and the reply arrives."""
        pending = self._pending()
        if pending:
            c, i = pending[k % len(pending)]
            self.clock += 1
            c.replies[i] = self.masters[i].apply(c.ops[i])
            self._maybe_complete(c)

    @rule(k=st.integers(0, 999), applied=st.booleans())
    def lose(self, k: int, applied: bool) -> None:
        """A pending operation gets no reply in time (it ran on its master or not)."""
        pending = self._pending()
        if pending:
            c, i = pending[k % len(pending)]
            self.clock += 1
            if applied:
                self.masters[i].apply(c.ops[i])
            c.replies[i] = NodeLateError("lost")
            self._maybe_complete(c)

    @rule(m=st.integers(0, 9))
    def expire(self, m: int) -> None:
        """Master m drops the lock key early (TTL, clock jump); its counter survives."""
        self.clock += 1
        self.masters[m % len(self.masters)].data.pop(f"{PREFIX}{{model}}", None)

    # ------------------------------------------------------------------ the claim

    @invariant()
    def later_grants_have_greater_tokens(self) -> None:
        for g1 in self.grants:
            for g2 in self.grants:
                if g1.returned < g2.started:
                    assert g2.fence > g1.fence, (
                        f"grant with token {g2.fence} started at t={g2.started}, after a "
                        f"grant with token {g1.fence} returned at t={g1.returned}"
                    )


class NoWriteBackCore(RedlockCore):
    """The rule without step 3: the token is the largest counter, nothing is written back."""

    def _publish_fences(
        self, counters: list[dict[str, int] | None], fences: dict[str, int]
    ) -> Flow[bool]:
        yield from ()  # a generator, like the real method, that sends nothing
        return True


class NoWriteBackMachine(FencingMachine):
    def make_core(self) -> RedlockCore:
        real = build_core(self.masters_count)
        core = NoWriteBackCore.__new__(NoWriteBackCore)
        for name in RedlockCore.__slots__ + tuple(real.__dataclass_fields__):
            if hasattr(real, name):
                object.__setattr__(core, name, getattr(real, name))
        return core


class FiveMasters(FencingMachine):
    masters_count = 5
    clients_count = 4


SETTINGS = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same examples every run: CI does not flake on a rare find
    database=None,
)


def random_walk(machine: type[FencingMachine], seed: int, steps: int = 200) -> int:
    """One seeded history (replay it with the same seed): clients start acquires and
    releases, masters answer, lose and drop keys, in a random order. Returns the number of
    grants; raises AssertionError at the first violation."""
    rnd = random.Random(seed)
    m = machine()
    for _ in range(steps):
        r = rnd.random()
        if r < 0.12:
            m.start_acquire(rnd.randrange(100))
        elif r < 0.24:
            m.start_release(rnd.randrange(100))
        elif r < 0.82:
            m.deliver(rnd.randrange(1000))
        elif r < 0.97:
            m.lose(rnd.randrange(1000), applied=rnd.random() < 0.5)
        else:
            m.expire(rnd.randrange(10))
        m.later_grants_have_greater_tokens()
    return len(m.grants)


WALKS = 1500


@pytest.mark.parametrize("machine", [FencingMachine, FiveMasters], ids=["3-masters", "5-masters"])
def test_quorum_fencing_tokens_increase_in_real_time_order(
    machine: type[FencingMachine],
) -> None:
    """Hypothesis explores (and would shrink a counterexample); then many seeded random
    histories, longer than hypothesis's, each replayable from its seed."""
    run_state_machine_as_test(machine, settings=SETTINGS)
    grants = sum(random_walk(machine, seed) for seed in range(WALKS))
    assert grants > WALKS  # the histories do grant locks: the invariant is not vacuous


def test_the_model_finds_the_violation_without_the_write_back() -> None:
    """Negative control: the largest counter of a majority alone is not monotonic
    (Kleppmann's objection); the same exploration finds counterexamples."""
    violations = 0
    for seed in range(WALKS):
        try:
            random_walk(NoWriteBackMachine, seed)
        except AssertionError:
            violations += 1
    assert violations > 0


def test_a_known_counterexample_without_the_write_back() -> None:
    """The shortest history: G1 takes masters 0 and 1 (counters 1, 1); G2 takes 0 and 2
    (2, 1) and gets token 2; G3 takes 1 and 2 (2, 2) and gets token 2 again, although G2
    returned before G3 started. With the write-back, G2 raises master 2 to 2 first, and G3
    gets 3."""

    def history(machine: FencingMachine) -> list[int]:
        for lost in (2, 1, 0):  # the master each grant does not reach
            machine.start_acquire(0)
            client = next(c for c in machine.clients if c.flow is not None)
            while client.flow is not None and client.kind == "acquire":
                pending = [i for i in range(len(client.ops)) if i not in client.replies]
                if lost in pending:
                    client.replies[lost] = NodeLateError("lost")
                    machine._maybe_complete(client)
                else:
                    machine.deliver(0)
            machine.start_release(0)
            while machine._pending():
                machine.deliver(0)
        return [g.fence for g in machine.grants]

    assert history(FencingMachine()) == [1, 2, 3]
    broken = NoWriteBackMachine()
    assert history(broken) == [1, 2, 2]
    with pytest.raises(AssertionError, match="started at t="):
        broken.later_grants_have_greater_tokens()


def test_the_model_machine_grants_locks() -> None:
    """The explored histories contain grants at all: a machine that never granted would
    pass the invariant vacuously."""
    m = FencingMachine()
    m.start_acquire(0)
    for _ in range(3):
        m.deliver(0)
    m.start_release(0)
    for _ in range(3):
        m.deliver(0)
    m.start_acquire(1)
    m.deliver(0)
    m.lose(0, applied=True)
    m.deliver(0)
    assert [g.fence for g in m.grants] == [1, 2]
    m.later_grants_have_greater_tokens()
