# SPDX-License-Identifier: MIT
"""A distributed double barrier: ``parties`` processes enter together and leave together.
No I/O.

Source: Apache Curator's ``DistributedDoubleBarrier``
(https://curator.apache.org/docs/recipes-double-barrier) and kazoo's ``DoubleBarrier``
(https://kazoo.readthedocs.io/en/latest/api/recipe/barrier.html): each party registers
itself (there an ephemeral znode, here a member with a lease), ``enter`` returns once
``parties`` are in, ``leave`` removes the party and returns once every party left. A party
is a hold: its lease is renewed by the process's watchdog, like any lock's, so a crashed
party's membership ends with its lease and cannot keep the barrier from opening or closing
for ever.

Rounds (``scripts/_barrier.lua``; one ``barrier_<op>.lua`` script per operation): the first
party to enter when no live party is in starts a *round*, whose generation is the next
fencing token of the name's hash slot (``scripts/_fence.lua``), so generations strictly
increase; a party's fencing token is its round's generation. The round opens when the live
members reach ``parties``; a party that comes to an open round waits until it closed, then
starts or joins the next. The round closes when no live member is left.

Keys, for a barrier named ``N`` with prefix ``P`` (one hash tag, so one Cluster slot):

    P{N}:barrier          hash {gen, state, parties} of the current round; also the channel
                          of its changes, ``B|open|<gen>`` and ``B|closed|<gen>``
    P{N}:barrier:members  sorted set token -> server time its lease ends (ms)
    P{N}:barrier:done     sorted set of the tokens that left in the last 60 s (a leave
                          sent again answers "ok"), with that TTL

The first two expire when the latest member lease ends and are deleted when the round
closes. Waiters wait on the process's shared wake-up channel (a tagged message: every
waiter of the process wakes) and read again every ``recheck_interval`` seconds and when the
earliest member lease ends (a dead party then drops out).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from redislock._core import validate
from redislock._core.kinds import stored
from redislock._core.lock import DONE_MS, Holding, LockCore, new_token
from redislock._core.ops import Eval, Flow, Wait, as_int, as_str, unwrap
from redislock._core.scripts import SCRIPTS
from redislock.errors import LockLostError, LockUsageError, UnexpectedReplyError

__all__ = [
    "BARRIER_SUFFIX",
    "BARRIER_TAG",
    "DEFAULT_BARRIER_LEASE",
    "DEFAULT_BARRIER_RECHECK",
    "MAX_PARTIES",
    "MEMBERS_SUFFIX",
    "BarrierCore",
    "BarrierState",
    "check_parties",
]

_SCRIPTS = {
    op: SCRIPTS[f"barrier_{op}"] for op in ("enter", "check", "renew", "leave", "left", "read")
}

BARRIER_SUFFIX: Final = stored("barrier").key_suffix  # ":barrier", from the kinds table
"""The barrier key is the name's lock key plus this (``P{N}:barrier``: the name's slot)."""

MEMBERS_SUFFIX: Final = ":members"
"""The members key is the barrier key plus this (``P{N}:barrier:members``)."""

BARRIER_TAG: Final = "B"
"""What every message on a barrier's channel starts with (``B|open|<gen>``,
``B|closed|<gen>``): the match of every waiter's Wait, so each of them wakes."""

DEFAULT_BARRIER_LEASE: Final = 30.0
"""A party's lease in seconds (renewed by the watchdog every third of it while it is in)."""

DEFAULT_BARRIER_RECHECK: Final = 5.0
"""Seconds between a waiter's reads when no message comes."""

MAX_PARTIES: Final = 1_000_000


def check_parties(value: object) -> int:
    """A party count: an int from 1 to 1,000,000 (raises :class:`LockConfigError`)."""
    return validate.check_int("parties", value, 1, MAX_PARTIES)


@dataclass(frozen=True, slots=True)
class BarrierState:
    """The current round of a barrier, as read from Redis.

    Attributes:
        generation: the round's generation (0: no round).
        open: whether the round opened (its parties all entered).
        parties: the party count the round was started with (0: no round).
        entered: the live parties in the round now.
    """

    generation: int
    open: bool
    parties: int
    entered: int


def _five(reply: Any, op: str) -> tuple[str, int, int, int, int]:
    try:
        status, gen, live, parties, nxt = reply
        return as_str(status), as_int(gen), as_int(live), as_int(parties), as_int(nxt)
    except (TypeError, ValueError) as exc:
        raise UnexpectedReplyError(f"barrier {op} replied {reply!r}") from exc


@dataclass(slots=True)
class BarrierCore(LockCore):
    """One party of a barrier: a lease kept by :class:`LockCore` (renewal, loss), and the
    flows of entering and leaving."""

    parties: int = 1
    bkey: str = field(init=False, default="")
    """``P{N}:barrier``: the round's hash, and the channel of its changes."""
    members: str = field(init=False, default="")
    bdone: str = field(init=False, default="")
    opened: bool = False
    """The last join found the round open (or opened it): nothing to wait for."""
    next_ms: int = -1
    """Milliseconds until the earliest member lease ended, at the last reply (-1: none)."""
    left: tuple[int, int, int] = (0, 0, -1)
    """The last leave: the round's generation, the members left in it, and ``next_ms``."""

    def __post_init__(self) -> None:
        self.bkey = self.keys.lock + BARRIER_SUFFIX
        self.members = self.bkey + MEMBERS_SUFFIX
        self.bdone = self.bkey + ":done"

    def _op(self, op: str, token: str = "", *, ms: int = 0, gen: int = 0) -> Eval:
        """The ``barrier_<op>.lua`` call of ``op``, with the keys and arguments it takes."""
        script = _SCRIPTS[op]
        if op == "enter":
            return Eval(
                script, (self.bkey, self.members, self.keys.fence), (token, ms, self.parties)
            )
        if op == "leave":
            return Eval(script, (self.bkey, self.members, self.bdone), (token, DONE_MS))
        args: tuple[str | int, ...] = {
            "check": (token,),
            "renew": (token, ms),
            "left": (gen,),
            "read": (),
        }[op]
        return Eval(script, (self.bkey, self.members), args)

    # ------------------------------------------------------------------ flows

    def _already_held(self) -> str:
        return f"this party of barrier {self.name!r} has entered already"

    def join_flow(self, wait: float | None) -> Flow[bool]:
        """Become a member of the current round (of the next one if it is open already),
        waiting up to ``wait`` seconds (None: no limit) for an open round to close; True
        once a member (the hold: its fencing token is the round's generation), False when
        the time ran out first."""
        token = new_token()
        start, deadline = self._begin(token, wait)
        try:
            while True:
                sent = time.monotonic()
                op = self._op("enter", token, ms=self.lease_ms)
                reply, ack = yield from self._written(op, token)  # undone if it raises
                status, gen, _, parties, nxt = _five(reply, "enter")
                if status in ("wait", "open"):
                    run_id = yield from self._granted(token, ack)
                    self.holding = Holding(
                        token=token,
                        fence=gen,
                        pid=os.getpid(),
                        acquired_at=sent,
                        expires_at=sent + self.lease_ms / 1000.0,
                        run_id=run_id,
                    )
                    self.opened = status == "open"
                    self.next_ms = nxt
                    return self._won(start)
                if status == "mismatch":
                    raise LockUsageError(
                        f"barrier {self.name!r}: its round {gen} counts {parties} parties, "
                        f"this party {self.parties}"
                    )
                if status != "full":
                    raise UnexpectedReplyError(f"barrier enter replied {reply!r}")
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return self._gave_up(start, now)
                # Any message, or the time: try again (a closed round lets this one in).
                yield Wait(
                    self.bkey, BARRIER_TAG, self._pause(self.recheck_interval, nxt, deadline, now)
                )
        finally:
            self.pending_token = None

    def opened_flow(self, h: Holding, deadline: float | None) -> Flow[bool]:
        """After :meth:`join_flow`: wait until the round of ``h`` opens, up to the monotonic
        time ``deadline`` (None: no limit); True once open, False when the time ran out.

        Raises:
            LockLostError: the party's lease ended first (it is no member).
        """
        if self.opened:
            return True

        def check() -> Flow[tuple[bool, int]]:
            status, gen, _, _, nxt = _five((yield self._op("check", h.token)), "check")
            if status == "open" and gen == h.fence:
                return True, nxt
            if status == "gone" or gen != h.fence:
                reason = "the party's lease ended before the round opened"
                self.mark_lost(h, reason)
                raise LockLostError(self.name, h.lost_reason or reason)
            if status != "wait":
                raise UnexpectedReplyError(f"barrier check replied {status!r}")
            return False, nxt

        return (
            yield from self._until(f"{BARRIER_TAG}|open|{h.fence}", self.next_ms, deadline, check)
        )

    def release_flow(self, h: Holding, *, retry: bool = False) -> Flow[None]:
        """Leave: remove the party of ``h`` from its round (the last one closes it and wakes
        the others' :meth:`left_flow`); :attr:`left` says what was left.

        Raises:
            LockLostError: the party's lease had ended (it was no member any more).
        """
        op = self._op("leave", h.token)
        reply, ack = unwrap((yield self._tracked(op)))
        try:
            status = as_str(reply[0])
            live, nxt = as_int(reply[1]), as_int(reply[3])  # reply[2]: the round's gen
        except (TypeError, ValueError, IndexError) as exc:
            raise UnexpectedReplyError(f"barrier leave replied {reply!r}") from exc
        if self.holding is h:
            self.holding = None
        if status not in ("ok", "gone"):
            raise UnexpectedReplyError(f"barrier leave replied {reply!r}")
        self._check_master(h, status, ack)
        self.left = (h.fence, live, nxt)
        self._released(h, status, retry=retry)

    def abandon_flow(self, token: str) -> Flow[None]:
        """After a cancelled or failed enter: remove a membership the script may have made."""
        yield self._op("leave", token)

    def left_flow(self, deadline: float | None) -> Flow[bool]:
        """After :meth:`release_flow`: wait until every party of that round left (or its
        lease ended), up to the monotonic time ``deadline`` (None: no limit); True then,
        False when the time ran out first."""
        gen, live, nxt = self.left
        if live == 0:
            return True

        def check() -> Flow[tuple[bool, int]]:
            reply = yield self._op("left", gen=gen)
            try:
                status, nxt = as_str(reply[0]), as_int(reply[2])
            except (TypeError, ValueError, IndexError) as exc:
                raise UnexpectedReplyError(f"barrier left replied {reply!r}") from exc
            if status not in ("done", "wait"):
                raise UnexpectedReplyError(f"barrier left replied {reply!r}")
            return status == "done", nxt

        return (yield from self._until(f"{BARRIER_TAG}|closed|{gen}", nxt, deadline, check))

    def _until(
        self,
        message: str,
        nxt: int,
        deadline: float | None,
        check: Callable[[], Flow[tuple[bool, int]]],
    ) -> Flow[bool]:
        """Wait on the barrier's channel until ``message`` comes or ``check()`` (a re-check
        of the round: done, and the milliseconds to the next lease end) says done, up to the
        monotonic time ``deadline`` (None: no limit); True then, False when the time ran out.
        A re-check runs after each wake-up that was not ``message`` and at each bound."""
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return False
            payload = yield Wait(
                self.bkey, BARRIER_TAG, self._pause(self.recheck_interval, nxt, deadline, now)
            )
            if payload == message:
                return True
            done, nxt = yield from check()
            if done:
                return True

    def read_flow(self) -> Flow[BarrierState]:
        """The current round (one round trip, read only)."""
        reply = yield self._op("read")
        try:
            gen, state = as_int(reply[0]), as_str(reply[1])
            parties, live = as_int(reply[2]), as_int(reply[3])
        except (TypeError, ValueError, IndexError) as exc:
            raise UnexpectedReplyError(f"barrier read replied {reply!r}") from exc
        return BarrierState(gen, state == "open", parties, live)

    def _extend_op(self, token: str, ms: int, mode: str) -> Eval:
        """The watchdog's renewal of the party's lease (its end only moves later)."""
        return self._op("renew", token, ms=ms)
