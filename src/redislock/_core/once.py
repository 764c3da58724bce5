# SPDX-License-Identifier: MIT
"""Exactly once per period (``Once``, ``AsyncOnce``): periods, records and flows. No I/O.

Many instances of a service race to run one job per period (a day, an hour, or a period
named by the caller). Each takes the Lock of the job's name (waiting, so that late arrivals
see what the winner wrote), looks for the period's *record*, and runs the job only when
there is none. A job that ends well writes the record, owner-checked against the lock's
token in one script (``scripts/once_record.lua``), so a holder whose lease was lost cannot
write it; a job that fails writes nothing and the next attempt runs it.

Keys, for a job named ``N`` with prefix ``P`` (all in the name's hash slot)::

    P{N}                the Lock of the name (held while a caller decides and runs the job)
    P{N}:once:<K>       the record of period ``K``: "<fence>|<host>|<pid>|<unix_ms>", with a
                        TTL until the period's end plus :data:`MARGIN` (an explicit key:
                        ``period`` seconds), so records never pile up

A period key ``K`` is the period's start in UTC (periods are aligned on multiples of the
period since the Unix epoch, so a period of 86400 s starts at midnight UTC), or a key
given by the caller (``key="2026-11-23"``).
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any, Final

from redislock._core import validate
from redislock._core.codec import holder_meta
from redislock._core.keys import DEFAULT_PREFIX, LockKeys, once_key
from redislock._core.ops import Call, Eval, Flow, as_int, as_str
from redislock._core.scripts import SCRIPTS
from redislock.errors import LockConfigError, LockLostError, UnexpectedReplyError

__all__ = [
    "DEFAULT_PERIOD",
    "MARGIN",
    "OnceCore",
    "OnceRecord",
    "check_period_key",
    "period_key",
    "period_start",
]

_RECORD = SCRIPTS["once_record"]
DEFAULT_PERIOD: Final = 86400.0
"""Seconds in the default period (a UTC day)."""
MARGIN: Final = 60.0
"""Seconds a period-aligned record outlives its period (on the server's clock, which the
periods follow): a caller that read the period just before it ended still finds its record
when it looks again after a wait for the lock, and a server clock stepped back by up to this
much does not run a period twice."""
MAX_KEY_BYTES: Final = 256
"""Longest explicit period key, in UTF-8 bytes."""


def period_start(period: float, now: float) -> int:
    """The start, in Unix milliseconds, of the period of ``period`` seconds holding the
    Unix time ``now`` (seconds): the greatest multiple of the period not after ``now``."""
    ms = validate.to_ms(period)
    return (math.floor(now * 1000.0) // ms) * ms


def period_key(period: float, now: float) -> str:
    """The key of the period holding ``now`` (Unix seconds): its start in UTC as an ISO
    8601 timestamp, ``2026-11-23T12:00:00Z`` (with milliseconds, ``...T12:00:00.500Z``, when
    the start is not a whole second)."""
    start = period_start(period, now)
    when = datetime.datetime.fromtimestamp(start // 1000, datetime.UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}Z" if start % 1000 == 0 else f"{text}.{start % 1000:03d}Z"


def check_period_key(value: Any) -> str | None:
    """An explicit period key: None, or a non-empty ``str`` of at most 256 UTF-8 bytes
    without braces or control characters (raises :class:`LockConfigError`)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise LockConfigError(f"key must be a str or None, got {type(value).__name__}")
    if not value:
        raise LockConfigError("key must not be empty")
    if "{" in value or "}" in value:
        raise LockConfigError(f"key must not contain '{{' or '}}' (the hash tag), got {value!r}")
    validate.check_size("key", value, MAX_KEY_BYTES)
    validate._check_printable("key", value)
    return value


@dataclass(frozen=True, slots=True)
class OnceRecord:
    """Who ran a job for one period: what ``once_record.lua`` stored when the run ended well.

    Attributes:
        key: the period key (``2026-11-23T12:00:00Z``, or the explicit key).
        fencing_token: the fencing token of the Lock the run held.
        host: the host name of the process that ran it.
        pid: its process id.
        at: when its run ended, Unix time in seconds.
    """

    key: str
    fencing_token: int
    host: str
    pid: int
    at: float

    @classmethod
    def decode(cls, key: str, value: object) -> OnceRecord:
        """The record stored as ``value`` (``"<fence>|<host>|<pid>|<unix_ms>"``) for ``key``.

        Raises:
            UnexpectedReplyError: ``value`` is not a record.
        """
        text = as_str(value)
        fence, _, rest = text.partition("|")
        host, _, rest = rest.rpartition("|")  # a host name has no "|", but be lenient
        host, _, pid = host.rpartition("|")
        try:
            return cls(key, int(fence), host, int(pid), int(rest) / 1000.0)
        except ValueError:
            raise UnexpectedReplyError(f"not a once record: {text!r}") from None

    def describe(self) -> str:
        """``host H pid P at <UTC time> (fencing token F)``, for messages."""
        when = datetime.datetime.fromtimestamp(self.at, datetime.UTC)
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
        return f"host {self.host} pid {self.pid} at {stamp} (fencing token {self.fencing_token})"


@dataclass(frozen=True, slots=True)
class OnceCore:
    """The validated settings of one ``Once`` and its flows (no I/O)."""

    name: str
    period: float
    """Seconds (> 0)."""
    key: str | None
    """The explicit period key, or None: periods aligned on multiples of ``period``."""
    prefix: str = DEFAULT_PREFIX

    @classmethod
    def create(cls, name: Any, period: Any, key: Any, prefix: Any = DEFAULT_PREFIX) -> OnceCore:
        """Check every argument (raises :class:`LockConfigError`, before any I/O)."""
        return cls(
            validate.check_name(name),
            validate.check_duration("period", period),
            check_period_key(key),
            validate.check_prefix(prefix),
        )

    def current(self, now: float) -> tuple[str, int]:
        """The period key at Unix time ``now`` (seconds) and how long, in milliseconds, a
        record written now lives: until the period's end plus :data:`MARGIN` (an explicit
        key: ``period`` seconds)."""
        ms = validate.to_ms(self.period)
        if self.key is not None:
            return self.key, ms
        start = period_start(self.period, now)
        left = start + ms - math.floor(now * 1000.0)
        return period_key(self.period, now), max(1, left + validate.to_ms(MARGIN))

    def now_flow(self) -> Flow[float]:
        """The server's clock (``TIME``), Unix seconds. Aligned periods follow it, not the
        caller's: hosts whose clocks disagree agree on the period and on when its record
        ends (a host minutes ahead or behind neither runs a period twice nor skips one)."""
        reply = yield Call(("TIME",))
        if not isinstance(reply, list | tuple) or len(reply) != 2:
            raise UnexpectedReplyError(f"TIME replied {reply!r}")
        return as_int(reply[0]) + as_int(reply[1]) / 1_000_000.0

    def period_flow(self) -> Flow[tuple[str, int]]:
        """:meth:`current` on the server's clock (:meth:`now_flow`): the period key and how
        long, in milliseconds, a record written now lives. An explicit key needs no clock
        (no I/O)."""
        if self.key is not None:
            return self.current(0.0)
        return self.current((yield from self.now_flow()))

    def peek_now_flow(self) -> Flow[OnceRecord | None]:
        """The record of the period now on the server's clock, or None (TIME, then GET)."""
        key, _ = yield from self.period_flow()
        return (yield from self.peek_flow(key))

    def record_key(self, period_key: str) -> str:
        """The Redis key of the record of ``period_key``."""
        return once_key(LockKeys.for_name(self.name, self.prefix).lock, period_key)

    def peek_flow(self, period_key: str) -> Flow[OnceRecord | None]:
        """The record of ``period_key``, or None (one GET)."""
        reply = yield Call(("GET", self.record_key(period_key)))
        return None if reply is None else OnceRecord.decode(period_key, reply)

    def record_flow(
        self, token: str, fence: int, period_key: str, ttl_ms: int
    ) -> Flow[tuple[bool, OnceRecord]]:
        """Write the record of ``period_key`` if the Lock is still held by ``token``.

        Returns ``(True, the record written)``, or ``(False, the record found)`` if the
        period already had one (kept as it is).

        Raises:
            LockLostError: the Lock is no longer ``token``'s: nothing was written.
            UnexpectedReplyError: the script answered something else.
        """
        value = f"{fence}|{holder_meta()}"
        lock = LockKeys.for_name(self.name, self.prefix).lock
        op = Eval(_RECORD, (lock, self.record_key(period_key)), (token, value, ttl_ms))
        reply = yield op
        status = as_str(reply[0])
        if status in ("ok", "done"):
            return status == "ok", OnceRecord.decode(period_key, reply[1])
        if status in ("gone", "taken"):
            what = "expired or was deleted" if status == "gone" else "was taken by another holder"
            raise LockLostError(self.name, f"the lease {what} before the run's record was written")
        raise UnexpectedReplyError(f"once_record replied {reply!r}")
