# SPDX-License-Identifier: MIT
"""Leader election over a Lock: who leads, their term and advertised value. No I/O.

Leadership IS holding the election's lock (:class:`~redislock._core.fair.FairCore`: queued
contenders, hand-off on release, the watchdog lease): a campaign is an acquire, a
resignation a release, and the term is the hold's fencing token, so terms strictly increase
across leaders. What the leader advertises (its identity and a value) lives next to the
lock, in the leader key ``<lock key>:leader`` (same hash slot) as
``"<term>|<identity>|<value>"``, written by ``scripts/election_*.lua`` only while the writer
holds the lock, with a TTL of :data:`LEADER_TTL_FACTOR` times the lock's PTTL. The watchdog
refreshes it only when that TTL could end before the lease it just renewed (plus one renewal
interval): about one renewal in nine with the default interval, so a renewal is one round
trip, not two (:meth:`ElectionCore.renew_flow`). A reader trusts the leader key only when
its term equals the fencing token in the lock key (:func:`decode_read`), so a dead leader
is never reported once its lock lease ended, and a leader key left by an earlier leader is
never reported for a new one.

Every change is published on the channel named like the leader key (``L|<term>|...`` or
``L|0``), which observers wait on through the process's shared wake-up channel
(:class:`~redislock._core.ops.Wait` with match ``"L"``).

Sources: etcd's v3 election API (campaign / proclaim / leader / observe / resign,
https://etcd.io/docs/v3.5/dev-guide/api_concurrency_reference_v3/), Kubernetes client-go's
leaderelection (a lease renewed by the leader, identity in the record,
https://pkg.go.dev/k8s.io/client-go/tools/leaderelection), kazoo's ``Election``
(https://kazoo.readthedocs.io/en/latest/api/recipe/election.html) and tooz's group
leadership (https://docs.openstack.org/tooz/latest/).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from redislock._core import validate
from redislock._core.fair import FairCore
from redislock._core.lock import Holding
from redislock._core.ops import Eval, Flow, Wait, as_int, as_str
from redislock._core.scripts import SCRIPTS
from redislock.errors import LockConfigError, LockLostError, UnexpectedReplyError

__all__ = [
    "LEADER_SUFFIX",
    "LEADER_TAG",
    "LEADER_TTL_FACTOR",
    "MAX_IDENTITY",
    "MAX_VALUE",
    "OBSERVE_RECHECK",
    "ElectionCore",
    "LeaderInfo",
    "advertised",
    "check_identity",
    "check_recheck",
    "check_value",
    "decode_read",
    "default_identity",
]

_ADVERTISE = {"advertise": SCRIPTS["election_advertise"], "keep": SCRIPTS["election_keep"]}
_CLEAR = SCRIPTS["election_clear"]
_READ = SCRIPTS["election_read"]
LEADER_TAG: Final = "L"
"""What every message on a leader channel starts with (``L|...``): the match of an
observer's :class:`Wait`, so every observer of the process wakes on it."""
LEADER_TTL_FACTOR: Final = 4
"""The leader key's TTL is this many times the lock's PTTL when written
(``election_advertise.lua``, ``election_keep.lua``): a garbage bound only, as readers check
its term against the lock's."""
MAX_IDENTITY: Final = 256
"""Longest identity, in UTF-8 bytes."""
MAX_VALUE: Final = 65_536
"""Longest proclaimed value, in UTF-8 bytes."""
OBSERVE_RECHECK: Final = 5.0
"""Default seconds between an observer's re-reads when no message comes (a lock key deleted
by hand publishes nothing); an observer also re-reads when the leader's lease would end."""


LEADER_SUFFIX: Final = ":leader"
"""The leader key is the lock key plus this (the same hash slot: the lock key's hash tag)."""


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    """The current leader of an election, as advertised.

    Attributes:
        identity: the leader's identity (``Election(..., identity=...)``).
        term: its term: the fencing token of its hold, strictly increasing across leaders.
        value: the value it advertises (``""`` until it proclaims one).
    """

    identity: str
    term: int
    value: str


def default_identity() -> str:
    """``<host>:<pid>`` of this process (host without ``|`` or control characters)."""
    host = "".join(ch for ch in socket.gethostname() if ch.isprintable() and ch != "|")
    return f"{host[:200]}:{os.getpid()}"


def check_identity(value: Any) -> str:
    """An identity: a non-empty ``str`` of at most 256 UTF-8 bytes, without ``|`` or control
    characters (raises :class:`LockConfigError`)."""
    if not isinstance(value, str):
        raise LockConfigError(f"identity must be a str, got {type(value).__name__}")
    if not value:
        raise LockConfigError("identity must not be empty")
    if "|" in value:
        raise LockConfigError(f"identity must not contain '|', got {value!r}")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_IDENTITY:
        raise LockConfigError(f"identity must be at most {MAX_IDENTITY} bytes")
    validate._check_printable("identity", value)
    return value


def check_value(value: Any) -> str:
    """A proclaimed value: a ``str`` of at most 65,536 UTF-8 bytes (raises
    :class:`LockConfigError`)."""
    if not isinstance(value, str):
        raise LockConfigError(f"value must be a str, got {type(value).__name__}")
    validate.check_size("value", value, MAX_VALUE)
    return value


def check_recheck(value: Any) -> float:
    """An observer's re-read interval in seconds (> 0; raises :class:`LockConfigError`)."""
    return validate.check_duration("recheck", value)


def decode_read(reply: Any) -> tuple[LeaderInfo | None, int]:
    """``election_read.lua``'s reply: the leader (None: no lock key, or no leader key of the
    lock's current term) and the lock's PTTL in milliseconds (0 without a lock key)."""
    try:
        fence, pttl, raw = as_int(reply[0]), as_int(reply[1]), reply[2]
    except (TypeError, IndexError, KeyError) as exc:
        raise UnexpectedReplyError(f"election read replied {reply!r}") from exc
    if fence <= 0:
        return None, 0
    return advertised(raw, fence), pttl


def advertised(raw: Any, term: int) -> LeaderInfo | None:
    """The leader key's value ``raw`` (``"<term>|<identity>|<value>"``, or nil) as the leader
    of ``term``: None when absent, or of another term (a key left by an earlier leader)."""
    if raw is None or raw is False:  # nil; over RESP3 a script's false may arrive as False
        return None
    got, _, rest = as_str(raw).partition("|")
    identity, _, value = rest.partition("|")
    if got != str(term) or not identity:
        return None
    return LeaderInfo(identity, term, value)


@dataclass(slots=True)
class ElectionCore(FairCore):
    """A Lock's core whose holder advertises itself in the leader key."""

    _LOCK_DELAY: ClassVar[bool] = False
    """No ``lock_delay``: its renewal (election_keep.lua) does not move the delay key."""

    identity: str = ""
    value: str = ""
    """The value advertised (the last :meth:`proclaim_flow`)."""
    leader_key: str = field(init=False)
    """``<lock key>:leader``: the advertised leader; also the channel of its changes."""
    _keys2: tuple[str, str] = field(init=False)
    advertised_until: float = 0.0
    """Monotonic time before which the leader key of the current hold surely exists (the
    send time of its last write + its TTL); 0.0 when not advertised."""

    def __post_init__(self) -> None:
        FairCore.__post_init__(self)
        self.leader_key = self.keys.lock + LEADER_SUFFIX
        self._keys2 = (self.keys.lock, self.leader_key)

    # ------------------------------------------------------------------ flows

    def _entry(self) -> str:
        return f"{self.identity}|{self.value}"

    def advertise_flow(self, h: Holding, op: str = "advertise") -> Flow[bool]:
        """Write the leader key for hold ``h`` (and publish it): True, or False when the
        lock is no longer ``h``'s."""
        sent = time.monotonic()
        script = _ADVERTISE[op]  # "keep": refresh the TTL, write it again if it went
        reply = yield Eval(script, self._keys2, (h.token, str(h.fence), self._entry()))
        try:
            status, pttl = as_str(reply[0]), as_int(reply[1])
        except (TypeError, IndexError, KeyError) as exc:
            raise UnexpectedReplyError(f"election {op} replied {reply!r}") from exc
        if status not in ("ok", "gone"):
            raise UnexpectedReplyError(f"election {op} replied {reply!r}")
        if status == "ok" and h is self.holding:
            self.advertised_until = sent + LEADER_TTL_FACTOR * pttl / 1000.0
        return status == "ok"

    def advertisement_due(self, h: Holding) -> bool:
        """Whether the leader key of hold ``h`` must be refreshed now: its TTL could end
        before ``h``'s lease estimate plus one renewal interval (the next renewal may come
        that late), so a leader would read as None while it leads."""
        return self.advertised_until < h.expires_at + self.renew_interval

    def proclaim_flow(self, value: str) -> Flow[None]:
        """Advertise ``value`` for the current hold, without a new term.

        Raises:
            NotOwnedError: nothing is held.
            LockLostError: the hold was lost (also when the script finds it gone).
        """
        h = self.require_holding()
        old, self.value = self.value, value
        try:
            ok = yield from self.advertise_flow(h)
        except BaseException:
            self.value = old
            raise
        if not ok:
            self.mark_lost(h, "the lease expired or another holder has the lock")
            raise LockLostError(self.name, h.lost_reason)

    def clear_flow(self, term: int) -> Flow[None]:
        """Delete the leader key if it is of ``term`` (and publish that nobody leads)."""
        yield Eval(_CLEAR, (self.leader_key,), (str(term),))

    def read_flow(self) -> Flow[tuple[LeaderInfo | None, int]]:
        """The advertised leader (or None) and the lock's PTTL in ms (one round trip)."""
        reply = yield Eval(_READ, self._keys2, ())
        return decode_read(reply)

    def observe_flow(
        self, last: LeaderInfo | None, first: bool, recheck: float
    ) -> Flow[LeaderInfo | None]:
        """Wait until the leader differs from ``last`` (at once when ``first``) and return
        it: a read, then a wait on the leader channel (pushed by every change), up to
        ``recheck`` seconds or until the lock's lease would end, then a read again."""
        while True:
            info, pttl = yield from self.read_flow()
            if first or info != last:
                return info
            timeout = recheck if pttl <= 0 else min(recheck, pttl / 1000.0 + 0.005)
            yield Wait(self.leader_key, LEADER_TAG, max(timeout, 0.001))

    def renew_flow(self, h: Holding) -> Flow[tuple[float | None, bool]]:
        """The lock's renewal (one round trip); then, only when :meth:`advertisement_due`,
        the leader key's TTL refreshed (written again if it went). A failure of that second
        step is not a loss (the next renewal retries it)."""
        result = yield from FairCore.renew_flow(self, h)
        nxt, lost = result
        intact = nxt is not None and not lost and h is self.holding and not h.closing
        if intact and self.advertisement_due(h):
            with contextlib.suppress(Exception):
                yield from self.advertise_flow(h, "keep")
        return result

    def extend_flow(self, h: Holding, seconds: float, mode: str) -> Flow[float]:
        """The lock's extension, then the leader key's TTL refreshed when it could end
        before the new lease (a failure of that step is raised: the extension stands)."""
        ttl = yield from FairCore.extend_flow(self, h, seconds, mode)
        if h is self.holding and not h.closing and self.advertisement_due(h):
            yield from self.advertise_flow(h, "keep")
        return ttl
