# SPDX-License-Identifier: MIT
"""A distributed count-down latch: a count that parties count down, and waiters that return
once it reached zero. No I/O.

Source: Redisson's ``RCountDownLatch`` (https://redisson.org/docs/data-and-services/
locks-and-synchronizers/, "CountDownLatch": ``trySetCount``, ``countDown``, ``await``,
``getCount``), itself ``java.util.concurrent.CountDownLatch`` across processes, with two
additions: every set starts a *generation* (the next fencing token of the name's hash slot,
``scripts/_fence.lua``), so a waiter knows which count it waits for; and the latch key has a
TTL, so a latch nobody finishes does not stay in Redis for ever.

Keys, for a latch named ``N`` with prefix ``P`` (one hash tag, so one Cluster slot):

    P{N}:latch       hash {count, gen, since} with a TTL (``scripts/_latch.lua``); also the
                     channel a count reaching zero is published on, as ``Z|<gen>``
    P{N}:latch:done  sorted set of the op ids of the last 60 s of sets and count-downs (a
                     client's retry after a lost reply counts once), with a TTL

A waiter (:meth:`LatchCore.wait_flow`) reads the latch, then waits on the process's shared
wake-up channel for ``Z|<its generation>`` (a tagged message: every waiter of the process
wakes), reading again every ``recheck_interval`` seconds and when the latch's TTL would end,
so a wake-up lost without a connection failure delays it by at most that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

from redislock._core import validate
from redislock._core.keys import DEFAULT_PREFIX, LockKeys
from redislock._core.kinds import stored
from redislock._core.lock import DONE_MS, new_op_id
from redislock._core.ops import Eval, Flow, Wait, as_int, as_str
from redislock._core.scripts import SCRIPTS
from redislock.errors import UnexpectedReplyError

__all__ = [
    "DEFAULT_LATCH_RECHECK",
    "DEFAULT_LATCH_TTL",
    "LATCH_SUFFIX",
    "MAX_COUNT",
    "ZERO_TAG",
    "LatchCore",
    "LatchState",
    "check_count",
]

_SET, _DOWN, _READ = SCRIPTS["latch_set"], SCRIPTS["latch_down"], SCRIPTS["latch_read"]

LATCH_SUFFIX: Final = stored("latch").key_suffix  # ":latch", from the kinds table
"""The latch key is the name's lock key plus this (``P{N}:latch``: the name's hash slot)."""

DEFAULT_LATCH_TTL: Final = 86_400.0
"""Seconds a latch key lives after its last set or count-down (one day)."""

DEFAULT_LATCH_RECHECK: Final = 5.0
"""Seconds between a waiter's reads when no message comes (a lost wake-up costs at most
this; a failed wake-up connection makes every waiter read at once)."""

ZERO_TAG: Final = "Z"
"""What the message of a count reaching zero starts with (``Z|<gen>``): every waiter of the
process waits with this match, so each of them wakes."""

MAX_COUNT: Final = 1 << 53
"""The largest count (Lua's numbers are doubles: integers are exact below 2**53)."""


def check_count(value: object) -> int:
    """A latch count: an int from 1 to 2**53 (raises :class:`LockConfigError`)."""
    return validate.check_int("count", value, 1, MAX_COUNT, high_text="2**53")


@dataclass(frozen=True, slots=True)
class LatchState:
    """The latch as read from Redis.

    Attributes:
        count: what is left to count down (0: no latch, or it reached zero).
        gen: its generation (0: no latch).
        since: every generation of the latch from ``since`` up to ``gen`` (excluded)
            reached zero (0: no latch).
        pttl_ms: the latch key's remaining TTL in milliseconds (-2: no latch).
    """

    count: int
    gen: int
    since: int
    pttl_ms: int

    def reached(self, gen: int) -> bool | None:
        """Whether generation ``gen`` reached zero: True, False (it never will: the latch
        expired or was deleted before, or is older than ``gen``), or None (still counting)."""
        if self.gen == gen:
            return True if self.count == 0 else None
        if self.gen > gen:
            return 0 < self.since <= gen
        return False  # no latch (gen 0), or one older than gen: gen's record is gone


def decode_state(reply: Any) -> LatchState:
    """``latch_read.lua``'s reply as a :class:`LatchState`."""
    try:
        count, gen, since, pttl = (as_int(x) for x in reply)
    except (TypeError, ValueError) as exc:
        raise UnexpectedReplyError(f"latch read replied {reply!r}") from exc
    return LatchState(count, gen, since, pttl)


@dataclass(slots=True)
class LatchCore:
    """Configuration of one latch object, and its flows. No I/O, no local state but the
    generation this object last set."""

    name: str
    count: int
    """The count :meth:`set_flow` starts a generation with."""
    ttl: float
    """Seconds the latch key lives after each set and count-down."""
    ttl_ms: int
    recheck_interval: float
    key: str
    """``P{N}:latch``: the hash, and the wake-up channel."""
    done: str
    fence: str
    last_set: int | None = None
    """The generation the latest successful :meth:`set_flow` of this object started."""

    @classmethod
    def create(
        cls, name: Any, count: Any, *, ttl: Any, recheck_interval: Any, prefix: Any
    ) -> LatchCore:
        """Validate every argument (raises :class:`LockConfigError`; no I/O) and build."""
        name = validate.check_name(name)
        count = check_count(count)
        seconds = validate.check_duration("ttl", ttl)
        recheck = validate.check_duration("recheck_interval", recheck_interval)
        keys = LockKeys.for_name(name, validate.check_prefix(prefix))
        key = keys.lock + LATCH_SUFFIX
        return cls(
            name=name,
            count=count,
            ttl=seconds,
            ttl_ms=validate.to_ms(seconds),
            recheck_interval=recheck,
            key=key,
            done=key + ":done",
            fence=keys.fence,
        )

    @classmethod
    def default(cls, name: Any, count: Any) -> LatchCore:
        """A core with the default options (for tests and tools)."""
        return cls.create(
            name,
            count,
            ttl=DEFAULT_LATCH_TTL,
            recheck_interval=DEFAULT_LATCH_RECHECK,
            prefix=DEFAULT_PREFIX,
        )

    # ------------------------------------------------------------------ flows

    def set_flow(self, count: int | None = None) -> Flow[bool]:
        """Start a new generation counting down from ``count`` (None: this object's), if the
        latch is not counting: True; False if it is (nothing written)."""
        n = self.count if count is None else count
        op = Eval(_SET, (self.key, self.done, self.fence), (new_op_id(), n, self.ttl_ms, DONE_MS))
        status, _, gen = self._reply((yield op), "set")
        if status == "ok":
            self.last_set = gen
            return True
        if status != "busy":
            raise UnexpectedReplyError(f"latch set replied {status!r}")
        return False

    def count_down_flow(self) -> Flow[int]:
        """Count one down (never below zero); the count left (0 also when it was not
        counting). Reaching zero publishes the waiters' wake-up."""
        op = Eval(_DOWN, (self.key, self.done), (new_op_id(), self.ttl_ms, DONE_MS))
        status, count, _ = self._reply((yield op), "down")
        if status not in ("ok", "none"):
            raise UnexpectedReplyError(f"latch down replied {status!r}")
        return count

    def read_flow(self) -> Flow[LatchState]:
        """The latch as it is now (one round trip)."""
        return decode_state((yield Eval(_READ, (self.key,), ())))

    def wait_flow(self, timeout: float | None) -> Flow[bool]:
        """Wait up to ``timeout`` seconds (None: no limit) until the count of the generation
        counting now reaches zero: True at once when nothing counts (no latch, or a count of
        zero); False when the time is up, or when that generation's latch expired or was
        deleted before it reached zero (it never will)."""
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        state = yield from self.read_flow()
        if state.count == 0:
            return True
        gen = state.gen
        zero = f"{ZERO_TAG}|{gen}"
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return False
            block = self.recheck_interval
            if state.pttl_ms >= 0:  # read again when the TTL would end
                block = min(block, state.pttl_ms / 1000.0 + 0.001)
            if deadline is not None:
                block = min(block, deadline - now)
            payload = yield Wait(self.key, ZERO_TAG, max(block, 0.001))
            if payload == zero:
                return True
            state = yield from self.read_flow()  # also moves the flow past that message
            reached = state.reached(gen)
            if reached is not None:
                return reached

    @staticmethod
    def _reply(reply: Any, op: str) -> tuple[str, int, int]:
        try:
            return as_str(reply[0]), as_int(reply[1]), as_int(reply[2])
        except (TypeError, IndexError, KeyError) as exc:
            raise UnexpectedReplyError(f"latch {op} replied {reply!r}") from exc
