# SPDX-License-Identifier: MIT
"""Server-side audit of lock keys while a torture run goes on: hold intervals, keys without
a TTL, and foreign touches seen through MONITOR.

An :class:`Auditor` connects DIRECTLY to every Redis server (never through the fault
proxies) and runs daemon threads, two per server, so a server that is SIGSTOPped, killed,
restarted, in ``DEBUG SLEEP`` or ``CLIENT PAUSE`` delays only its own threads (every socket
has a 0.2 s timeout; connections are re-made after errors):

* the **snapshot poller** reads, every ``poll_interval`` seconds and in one MULTI/EXEC of
  read-only commands (atomic, and allowed under ``CLIENT PAUSE WRITE``), the server ``TIME``
  and for each lock name ``N`` the key ``<prefix>{N}``: a Lock/Redlock/FairLock string
  ``"<token>|<host>|<pid>|<unix_ms>"`` with its fencing counter ``<prefix>{N}:fence``, or an
  RLock/ReadWriteLock/Semaphore hash ``token -> "<mode>|<count>|<expires_ms>|<fence>|<host>|
  <pid>|<acquired_unix_ms>"`` (holds whose ``expires_ms`` is not after the server ``TIME``
  are logically expired and skipped). It keeps one :class:`HoldInterval` per hold and server:
  first seen, last seen present, first seen absent (``gone``). A failed poll is not an
  absence: an interval closes only on a successful snapshot that lacks the hold (after a
  restart without persistence that is the first successful poll). Every ``scan_every``
  polls it also SCANs ``<prefix>*`` and PTTLs every key: a key that is not a fencing counter
  (``…:fence``) nor a permit count (``…:permits``) with no TTL is a :class:`TtlViolation`.
* the **MONITOR reader** keeps a shadow of every lock key (string value and expiry, hash
  fields) from the writes it sees, and flags a :class:`ForeignTouch` when a script deletes,
  expires or overwrites a lock key or hold that, per the shadow, belonged to another token
  and was still live (the exact rules are in :class:`Auditor`).

Timestamps: every ``t``, ``first``, ``last`` and ``gone`` is ``time.monotonic()`` in
seconds, comparable across processes on Linux. A snapshot's time is the server ``TIME`` read
inside the snapshot (the atomic instant the keys were read), moved onto the monotonic clock
with this process's wall-minus-monotonic offset and clamped into [request sent, reply
received]; so it is never later than the monotonic time taken right after the reply. A
MONITOR line's time is its server wall-clock stamp moved onto the monotonic clock the same
way. Both conversions assume the wall clock does not jump during the run (same machine).

MONITOR is a test-only tool: the server copies every command of every client to the
monitoring connection (the Redis documentation measured one MONITOR client cutting a
server's throughput by more than half), its output buffer has no limit by default, and
this process parses every line in Python (tens of thousands of lines per second cost a
good part of one core). Never point an Auditor at a production server.

Known blind spots (the rules err towards missing a touch rather than inventing one):

* key expiry and eviction do not show in MONITOR; the shadow tracks each key's expiry from
  the ``PX``/``PEXPIRE`` arguments, and a touch within 5 ms of the owner's expiry is not
  flagged (clock granularity);
* between a MONITOR (re)connection and the re-read of the keys of ``names`` (a few
  milliseconds) lines are not audited, and lock keys of names not in ``names`` are unknown
  until the next write seen for them;
* commands run while a MONITOR connection is down (server stopped, restarting) are lost;
* plain client commands other than DEL/UNLINK/GETDEL are not audited, only tracked, and
  commands the shadow does not model (RENAME, RESTORE, ...) make the keys they name
  unknown;
* only the database of each server's ``db`` keyword (default 0) is audited;
* Redis Cluster is not supported (one server per entry of ``servers``; Redlock masters are
  separate servers and fine), nor TLS connections.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, NamedTuple, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock._core.keys import DEFAULT_PREFIX, LockKeys
from redislock._core.scripts import SCRIPTS

__all__ = [
    "AuditResult",
    "Auditor",
    "ForeignTouch",
    "HoldInterval",
    "MonitorLine",
    "RestartNote",
    "TtlViolation",
    "parse_monitor_line",
]

_SOCKET_TIMEOUT: Final = 0.2  # seconds, every connection of the auditor
_RECONNECT_DELAY: Final = 0.05  # seconds between reconnection attempts
_TTL_DEDUPE: Final = 1.0  # seconds: one TtlViolation record per key per second at most
_SLACK: Final = 0.005  # seconds: expiry margin under which a touch is not flagged
_TOKEN_CHARS: Final = 8  # tokens in records are cut to this many characters
_MAX_ERRORS: Final = 20  # error messages kept in the result
_MARKER: Final = "redislock-audit:"
_STRING_MODE: Final = "x"
_HASH_MODES: Final = {"w": "x", "r": "s", "p": "p"}
_INF: Final = math.inf

# ---------------------------------------------------------------------------- records


@dataclass
class TtlViolation:
    """A key under the prefix seen without a TTL (PTTL -1) that must have one.

    Attributes:
        t: monotonic time of the observation, seconds.
        server: index of the server in ``Auditor(servers=...)``.
        key: the key.
        type: its Redis type (``"string"``, ``"hash"``, ...; ``"?"`` if unknown).
    """

    t: float
    server: int
    key: str
    type: str


@dataclass
class HoldInterval:
    """One hold as seen on one server by the snapshot poller.

    Attributes:
        server: index of the server.
        name: lock name.
        pid: holder pid, from the hold's metadata.
        fence: fencing token: the hold's own for a hash hold; for a string (Lock, Redlock)
            the server's fencing counter read in the same atomic step, the largest seen
            during the hold (a Redlock master's counter is raised to the hold's token right
            after the grant, on the masters that raise reaches).
        first: monotonic time of the first snapshot that showed the hold, seconds.
        last: monotonic time of the last snapshot that showed it, seconds.
        gone: monotonic time of the first successful snapshot without it, seconds; None
            while it is still present (or the server never answered again).
        mode: ``"x"`` (Lock, RLock, write side), ``"s"`` (read side) or ``"p"`` (permit).
        token: the first 8 characters of the owner token.
        host: holder host name, from the hold's metadata.
    """

    server: int
    name: str
    pid: int
    fence: int
    first: float
    last: float
    gone: float | None = None
    mode: str = _STRING_MODE
    token: str = ""
    host: str = ""


@dataclass
class ForeignTouch:
    """A write on a lock key or hold owned by another token that was still live.

    Attributes:
        server: index of the server.
        t: monotonic time of the command, seconds.
        script: the script that wrote: a library script as ``"<file stem>"`` or
            ``"<file stem>:<op>"`` (``"hold:release"``), ``"eval:<sha1 prefix>"`` for a
            script not shipped by redislock, or ``"(plain)"`` for a plain client command.
        key: the lock key.
        caller: first 8 characters of the caller's token (a library script's token
            argument; for another script its first argument that looks like a token), or
            None (plain commands).
        owner: first 8 characters of the token that owned the key or hold, or None.
        command: the command, with tokens cut to 8 characters (``"DEL <key>"``,
            ``"HDEL <key> 0123abcd…"``).
        client: the client address MONITOR showed for the caller.
        server_time: the server's wall-clock time of the command, Unix seconds.
    """

    server: int
    t: float
    script: str
    key: str
    caller: str | None
    owner: str | None
    command: str
    client: str = ""
    server_time: float = 0.0


@dataclass
class RestartNote:
    """A server restart reported through :meth:`Auditor.note_restart`.

    Attributes:
        server: index of the server.
        t: monotonic time of the call, seconds.
        persistent: whether the server kept its data across the restart.
    """

    server: int
    t: float
    persistent: bool


@dataclass
class AuditResult:
    """What an :class:`Auditor` saw; JSON-serialisable with :meth:`to_json`.

    Attributes:
        ttl_violations: keys without a TTL (at most one record per key per second).
        ttl_observations: how many times a key without a TTL was observed (every scan that
            saw one counts once per key).
        holds: hold intervals, sorted by server and first sighting.
        foreign_touches: writes on others' live lock keys or holds.
        monitor_lines: MONITOR lines processed (all servers).
        audited_scripts: script calls whose writes were audited (library scripts that
            carry a caller token, and other scripts).
        polls: successful snapshots per server (index = server).
        poll_errors: failed snapshots and scans, all servers.
        ttl_checks: keys whose TTL was checked (all scans).
        admin_overrides: force-release calls seen (``lock_force_release``, ``hold`` and
            ``fair`` op ``force``): deliberate operator actions, never foreign touches.
        monitor_connects: MONITOR connections made and seeded, per server.
        restarts: restarts reported with :meth:`Auditor.note_restart`.
        errors: the first unexpected error messages (at most 20), for diagnosis.
    """

    ttl_violations: list[TtlViolation] = field(default_factory=list)
    ttl_observations: int = 0
    holds: list[HoldInterval] = field(default_factory=list)
    foreign_touches: list[ForeignTouch] = field(default_factory=list)
    monitor_lines: int = 0
    audited_scripts: int = 0
    polls: list[int] = field(default_factory=list)
    poll_errors: int = 0
    ttl_checks: int = 0
    admin_overrides: int = 0
    monitor_connects: list[int] = field(default_factory=list)
    restarts: list[RestartNote] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The result as plain dicts, lists and scalars (``json.dumps`` takes it)."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """The result as one JSON object (no newline inside)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditResult:
        """Rebuild a result from :meth:`to_dict` output.

        Raises:
            TypeError: a record has missing or unknown fields.
            KeyError, ValueError: ``data`` is not a result.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        plain = {k: v for k, v in data.items() if k in known}
        plain["ttl_violations"] = [TtlViolation(**d) for d in data.get("ttl_violations", [])]
        plain["holds"] = [HoldInterval(**d) for d in data.get("holds", [])]
        plain["foreign_touches"] = [ForeignTouch(**d) for d in data.get("foreign_touches", [])]
        plain["restarts"] = [RestartNote(**d) for d in data.get("restarts", [])]
        plain["polls"] = list(data.get("polls", []))
        plain["monitor_connects"] = list(data.get("monitor_connects", []))
        plain["errors"] = list(data.get("errors", []))
        return cls(**plain)

    @classmethod
    def from_json(cls, text: str) -> AuditResult:
        """Rebuild a result from :meth:`to_json` output.

        Raises:
            json.JSONDecodeError: ``text`` is not JSON.
            TypeError, KeyError, ValueError: it is not a result.
        """
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("an AuditResult is a JSON object")
        return cls.from_dict(data)


# ---------------------------------------------------------------------------- MONITOR lines


class MonitorLine(NamedTuple):
    """One parsed MONITOR line.

    Attributes:
        time: server wall-clock time, Unix seconds.
        db: database number.
        client: the client address (``"127.0.0.1:5000"``, ``"unix:/path"``) or ``"lua"``
            for a command run by a script (it follows the EVAL/EVALSHA line that ran it).
        args: the command and its arguments, unescaped.
    """

    time: float
    db: int
    client: str
    args: tuple[bytes, ...]


_ESCAPES: Final = {
    ord("n"): b"\n",
    ord("r"): b"\r",
    ord("t"): b"\t",
    ord("a"): b"\a",
    ord("b"): b"\b",
    ord("\\"): b"\\",
    ord('"'): b'"',
}
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_REPR: Final = {ord(v): b"\\" + bytes([k]) for k, v in _ESCAPES.items() if k not in b'\\"'}


def _parse_args(data: bytes) -> tuple[bytes, ...] | None:
    """Split the quoted arguments of a MONITOR line (Redis ``sdscatrepr`` escaping)."""
    args: list[bytes] = []
    i, n = 0, len(data)
    while i < n:
        if data[i] != ord('"'):
            return None
        i += 1
        out = bytearray()
        while True:
            if i >= n:
                return None
            c = data[i]
            if c == ord('"'):
                i += 1
                break
            if c == ord("\\") and i + 1 < n:
                e = data[i + 1]
                if e == ord("x") and i + 3 < n and data[i + 2] in _HEX and data[i + 3] in _HEX:
                    out.append(int(data[i + 2 : i + 4], 16))
                    i += 4
                    continue
                esc = _ESCAPES.get(e)
                if esc is not None:
                    out += esc
                    i += 2
                    continue
            out.append(c)
            i += 1
        args.append(bytes(out))
        if i < n:
            if data[i] != ord(" "):
                return None
            i += 1
    return tuple(args) if args else None


def _monitor_repr(data: bytes) -> bytes:
    """``data`` as MONITOR shows it inside an argument (the inverse of the unescaping)."""
    out = bytearray()
    for c in data:
        if c in (ord("\\"), ord('"')):
            out += b"\\" + bytes([c])
        elif c in _REPR:
            out += _REPR[c]
        elif 32 <= c <= 126:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    return bytes(out)


def parse_monitor_line(line: bytes) -> MonitorLine | None:
    """Parse one MONITOR reply line, with or without its leading ``+`` and trailing CRLF.

    The format is ``<unix seconds>.<micros> [<db> <client>] "arg" "arg" ...`` with each
    argument escaped by Redis (``\\"``, ``\\\\``, ``\\n``, ``\\r``, ``\\t``, ``\\a``,
    ``\\b``, ``\\xHH``). Unlike redis-py's ``Monitor``, the arguments come back exactly.

    Returns:
        The parsed line, or None for anything else (``OK``, a malformed line).
    """
    line = line.rstrip(b"\r\n")
    if line.startswith(b"+"):
        line = line[1:]
    sp = line.find(b" [")
    if sp <= 0:
        return None
    try:
        stamp = float(line[:sp])
    except ValueError:
        return None
    close = line.find(b'] "', sp)
    if close < 0:
        return None
    db_text, _, client = line[sp + 2 : close].partition(b" ")
    if not db_text.isdigit():
        return None
    args = _parse_args(line[close + 2 :])
    if args is None:
        return None
    return MonitorLine(stamp, int(db_text), client.decode("utf-8", "replace"), args)


# ---------------------------------------------------------------------------- helpers


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _short(token: str | None) -> str | None:
    return None if token is None else token[:_TOKEN_CHARS]


def _looks_like_token(value: str) -> bool:
    return len(value) >= 32 and all(c in "0123456789abcdef" for c in value.lower())


class _StringHold(NamedTuple):
    token: str
    host: str
    pid: int


def _parse_string(value: str) -> _StringHold | None:
    """``"<token>|<host>|<pid>|<unix_ms>"`` -> its parts, or None."""
    parts = value.split("|")
    if len(parts) < 4 or not parts[-2].isdigit():
        return None
    return _StringHold(parts[0], "|".join(parts[1:-2]), int(parts[-2]))


class _HashHold(NamedTuple):
    mode: str
    expires_ms: int
    fence: int
    host: str
    pid: int


def _parse_hash(value: str) -> _HashHold | None:
    """``"<mode>|<count>|<expires_ms>|<fence>|<host>|<pid>|<acquired_unix_ms>"`` or None."""
    parts = value.split("|")
    if len(parts) < 7 or parts[0] not in _HASH_MODES:
        return None
    exp, fence, pid = parts[2], parts[3], parts[-2]
    if not (exp.isdigit() and fence.isdigit() and pid.isdigit()):
        return None
    return _HashHold(parts[0], int(exp), int(fence), "|".join(parts[4:-2]), int(pid))


def _client(kwargs: Mapping[str, Any]) -> redis.Redis:
    """A bytes client with short timeouts and no retries (a failed poll just fails)."""
    options = dict(kwargs)
    options.update(
        socket_timeout=_SOCKET_TIMEOUT,
        socket_connect_timeout=_SOCKET_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
        decode_responses=False,
        health_check_interval=0,
    )
    return redis.Redis(**options)


def _mono_of_wall(wall: float) -> float:
    """Move a wall-clock instant (Unix seconds) onto the monotonic clock."""
    return time.monotonic() - (time.time() - wall)


def _resp(*args: str | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg.encode() if isinstance(arg, str) else arg
        out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


# ---------------------------------------------------------------------------- script table


class _ScriptInfo(NamedTuple):
    label: str
    op_index: int | None  # ARGV index of the op (0-based), None: the script has one op
    token_index: int | None  # ARGV index of the caller token, None: no token (admin)
    admin_ops: frozenset[str]  # ops that are operator overrides


_LIBRARY: Final = {
    "lock_acquire": _ScriptInfo("lock_acquire", None, 0, frozenset()),
    "lock_release": _ScriptInfo("lock_release", None, 0, frozenset()),
    "lock_extend": _ScriptInfo("lock_extend", None, 0, frozenset()),
    "lock_status": _ScriptInfo("lock_status", None, 0, frozenset()),
    # An operator override, deliberately deleting whoever holds the lock: counted in
    # AuditResult.admin_overrides, never a foreign touch.
    "lock_force_release": _ScriptInfo("lock_force_release", None, None, frozenset()),
    "hold": _ScriptInfo("hold", 0, 1, frozenset({"force"})),
    "fair": _ScriptInfo("fair", 0, 1, frozenset({"force"})),
    "multi": _ScriptInfo("multi", 0, 2, frozenset()),
}
# Other library scripts (redlock_fence, fenced_write) never touch a lock key: their
# writes are tracked but not audited.


def _library_by_sha() -> dict[str, tuple[str, _ScriptInfo | None]]:
    table: dict[str, tuple[str, _ScriptInfo | None]] = {}
    for name, script in SCRIPTS.items():
        table[script.sha] = (name, _LIBRARY.get(name))
    return table


# ---------------------------------------------------------------------------- shadow


@dataclass
class _Str:
    """Shadow of a string lock key: value (None: known absent), expiry bounds (server
    seconds; inf: no TTL)."""

    value: str | None
    lo: float = _INF
    hi: float = _INF


@dataclass
class _Hash:
    """Shadow of a hash lock key: field -> expiry (server seconds; None: not a hold)."""

    fields: dict[str, float | None] = field(default_factory=dict)
    lo: float = _INF
    hi: float = _INF


@dataclass
class _Ctx:
    """The script whose lua lines follow."""

    label: str
    client: str
    start: float  # server time of the EVAL line
    audited: bool = False
    caller: str | None = None  # library script: the caller token
    allowed: frozenset[str] | None = None  # other scripts: their arguments
    shown: str | None = None  # the caller token shown in records (cut to 8 characters)
    pending: tuple[str, _Str] | None = None  # a SET NX waiting for the next line


class _Touch(NamedTuple):
    key: str
    owner: str | None
    command: str


# Commands that cannot change a lock key: reads, and writes that only ever touch other
# keys (counters, lists, sorted sets: on a lock key they fail with WRONGTYPE or "not an
# integer" and change nothing).
_NO_EFFECT_NAMES: Final = """
    get mget strlen getrange hget hmget hgetall hexists hlen hkeys hvals hstrlen hscan hrandfield
    pttl ttl expiretime pexpiretime type exists touch dump object scan keys time echo ping
    info dbsize randomkey multi exec discard watch unwatch select hello auth client wait
    script incr incrby decr decrby rpush lpush blpop brpop lpop rpop lrem lindex llen
    lrange zadd zrem zcard zrange zscore zrangebyscore zremrangebyscore publish"""
_NO_EFFECT: Final = frozenset(_NO_EFFECT_NAMES.split())


class _Shadow:
    """The MONITOR reader's model of one server's lock keys; one thread uses it."""

    def __init__(
        self,
        prefix: str,
        scripts: Mapping[str, tuple[str, _ScriptInfo | None]],
        *,
        plain_dels: bool,
        unknown_scripts: bool,
        report: Callable[[_Ctx | None, float, str, _Touch], None],
        count_script: Callable[[bool], None],
    ) -> None:
        self.prefix = prefix
        self.scripts = scripts
        self.plain_dels = plain_dels
        self.unknown_scripts = unknown_scripts
        self.report = report
        self.count_script = count_script
        self.strings: dict[str, _Str] = {}
        self.hashes: dict[str, _Hash] = {}
        self.ctx: _Ctx | None = None
        self.last_client = ""  # the client of the latest plain command

    # -- state

    def reset(self) -> None:
        self.strings.clear()
        self.hashes.clear()
        self.ctx = None

    def is_lock_key(self, key: str) -> bool:
        return LockKeys.name_of(key, self.prefix) is not None

    def seed_string(self, key: str, value: str | None, expires: float) -> None:
        self.hashes.pop(key, None)
        self.strings[key] = _Str(value, expires - 0.002, expires + 0.002)

    def seed_hash(self, key: str, fields: Mapping[str, str], expires: float) -> None:
        self.strings.pop(key, None)
        self.hashes[key] = _Hash(
            {f: self._field_expiry(v) for f, v in fields.items()},
            expires - 0.002,
            expires + 0.002,
        )

    @staticmethod
    def _field_expiry(value: str) -> float | None:
        hold = _parse_hash(value)
        return None if hold is None else hold.expires_ms / 1000.0

    # -- liveness (ts: server seconds)

    @staticmethod
    def _alive(lo: float, ts: float) -> bool:
        """Definitely not expired at ``ts``."""
        return lo - _SLACK > ts

    @staticmethod
    def _expired(hi: float, ts: float) -> bool:
        """Definitely expired at ``ts``."""
        return hi + _SLACK <= ts

    def _live_string(self, key: str, ts: float) -> _Str | None:
        s = self.strings.get(key)
        if s is None or s.value is None or not self._alive(s.lo, ts):
            return None
        return s

    def _live_fields(self, key: str, ts: float) -> dict[str, float]:
        h = self.hashes.get(key)
        if h is None or not self._alive(h.lo, ts):
            return {}
        return {f: e for f, e in h.fields.items() if e is not None and self._alive(e, ts)}

    # -- audit

    def _foreign(self, ctx: _Ctx, owner: str) -> bool:
        if ctx.caller is not None:
            return owner != ctx.caller
        return ctx.allowed is not None and owner not in ctx.allowed

    def _check_string(self, ctx: _Ctx, key: str, ts: float, command: str) -> None:
        s = self._live_string(key, ts)
        if s is None or s.value is None:
            return
        owner = s.value.split("|", 1)[0]
        if self._foreign(ctx, owner):
            self.report(ctx, ts, ctx.label, _Touch(key, owner, f"{command} {key}"))

    def _check_fields(
        self, ctx: _Ctx | None, key: str, names: Sequence[str] | None, ts: float, cmd: str
    ) -> None:
        """Fields ``names`` (None: all) of hash ``key`` removed or overwritten."""
        live = self._live_fields(key, ts)
        targets = live if names is None else [f for f in names if f in live]
        for f in targets:
            if ctx is None or self._foreign(ctx, f):
                command = f"{cmd} {key}" + ("" if names is None else f" {f[:_TOKEN_CHARS]}…")
                label = "(plain)" if ctx is None else ctx.label
                self.report(ctx, ts, label, _Touch(key, f, command))
                return

    def _check_shorten(self, ctx: _Ctx, key: str, ts: float, new_hi: float, cmd: str) -> None:
        """A hash key's TTL set to end before a foreign live hold's lease."""
        for f, exp in self._live_fields(key, ts).items():
            if self._foreign(ctx, f) and new_hi + _SLACK < exp:
                self.report(ctx, ts, ctx.label, _Touch(key, f, f"{cmd} {key}"))
                return

    # -- line dispatch

    def feed(self, line: MonitorLine) -> None:
        """Apply one line (of the audited database)."""
        if line.client == "lua":
            ctx = self.ctx
            if ctx is not None and ctx.pending is not None:
                self._resolve(ctx, line)
            self._command(ctx, line, in_script=True)
            return
        self._end_script()
        name = line.args[0].decode("latin-1").lower()
        if name in ("eval", "evalsha", "eval_ro", "evalsha_ro"):
            self._begin_script(name, line)
            return
        self._command(None, line, in_script=False)

    def feed_other(self, line_is_lua: bool) -> None:
        """A line that cannot touch a lock key (so it was not parsed in full)."""
        if not line_is_lua:
            self._end_script()
        elif self.ctx is not None and self.ctx.pending is not None:
            self._apply_pending(self.ctx)

    def _end_script(self) -> None:
        ctx = self.ctx
        if ctx is not None and ctx.pending is not None:
            self._apply_pending(ctx)
        self.ctx = None

    def _apply_pending(self, ctx: _Ctx) -> None:
        assert ctx.pending is not None
        key, value = ctx.pending
        ctx.pending = None
        self.hashes.pop(key, None)
        self.strings[key] = value

    def _resolve(self, ctx: _Ctx, line: MonitorLine) -> None:
        """A script's SET NX of a lock key: lock_acquire reads the key next iff it failed."""
        assert ctx.pending is not None
        key = ctx.pending[0]
        args = line.args
        if len(args) == 2 and args[0].lower() == b"get" and _text(args[1]) == key:
            ctx.pending = None  # not set: the key existed
        else:
            self._apply_pending(ctx)

    def _begin_script(self, name: str, line: MonitorLine) -> None:
        args = line.args
        if len(args) < 3:
            return
        if name.startswith("evalsha"):
            sha = args[1].decode("latin-1").lower()
        else:
            sha = hashlib.sha1(args[1], usedforsecurity=False).hexdigest()
        try:
            numkeys = int(args[2])
        except ValueError:
            return
        argv = [_text(a) for a in args[3 + numkeys :]]
        found = self.scripts.get(sha)
        ctx = _Ctx(label=f"eval:{sha[:8]}", client=line.client, start=line.time)
        if found is None:
            ctx.audited = self.unknown_scripts
            ctx.allowed = frozenset(argv)
            ctx.shown = next((a for a in argv if _looks_like_token(a)), None)
        else:
            stem, info = found
            ctx.label = stem
            if info is not None:
                op = None
                if info.op_index is not None and info.op_index < len(argv):
                    op = argv[info.op_index]
                    ctx.label = f"{stem}:{op}"
                if info.token_index is None or op in info.admin_ops:
                    self.count_script(True)
                elif info.token_index < len(argv):
                    ctx.caller = ctx.shown = argv[info.token_index]
                    ctx.audited = True
        if ctx.audited:
            self.count_script(False)
        self.ctx = ctx

    def _expiry(self, ctx: _Ctx | None, ts: float, ms: float) -> tuple[float, float]:
        """Expiry bounds of a relative TTL of ``ms`` set by a command at ``ts``."""
        base_lo = (ctx.start if ctx is not None else ts) - 0.002
        return base_lo + ms / 1000.0, ts + 0.002 + ms / 1000.0

    def _command(self, ctx: _Ctx | None, line: MonitorLine, *, in_script: bool) -> None:
        args = line.args
        name = args[0].decode("latin-1").lower()
        ts = line.time
        audit = ctx if (ctx is not None and ctx.audited) else None
        if name in _NO_EFFECT:
            return
        if name in ("flushall", "flushdb", "swapdb"):
            self.reset()
            return
        keys = [_text(a) for a in args[1:]]
        if name in ("del", "unlink", "getdel"):
            targets = keys if name != "getdel" else keys[:1]
            for key in targets:
                if not self.is_lock_key(key):
                    continue
                upper = name.upper()
                if audit is not None:
                    self._check_string(audit, key, ts, upper)
                    self._check_fields(audit, key, None, ts, upper)
                elif not in_script and self.plain_dels:
                    self._check_plain_del(key, ts, upper)
                self.hashes[key] = _Hash()
                self.strings[key] = _Str(None)
            return
        if not keys or not self.is_lock_key(keys[0]):
            for k in keys:  # a lock key elsewhere (RENAME x key, ...): forget it
                self.strings.pop(k, None)
                self.hashes.pop(k, None)
            return
        key = keys[0]
        rest = keys[1:]
        if name in ("set", "setex", "psetex", "setnx", "getset"):
            self._set(ctx, audit, key, name, rest, ts, in_script=in_script)
        elif name in ("pexpire", "expire", "pexpireat", "expireat", "persist"):
            self._expire(audit, ctx, key, name, rest, ts)
        elif name in ("hset", "hmset"):
            if audit is not None:
                self._check_fields(audit, key, rest[0::2], ts, name.upper())
            s = self.strings.get(key)
            if s is not None and s.value is not None and self._alive(s.lo, ts):
                return  # WRONGTYPE
            self.strings.pop(key, None)
            h = self.hashes.get(key)
            if h is None or self._expired(h.hi, ts):
                h = self.hashes[key] = _Hash()
            for f, v in zip(rest[0::2], rest[1::2], strict=False):
                h.fields[f] = self._field_expiry(v)
        elif name == "hdel":
            if audit is not None:
                self._check_fields(audit, key, rest, ts, "HDEL")
            h2 = self.hashes.get(key)
            if h2 is not None:
                for f in rest:
                    h2.fields.pop(f, None)
        else:  # not modelled (RENAME, HSETNX, APPEND, ...): the key becomes unknown
            self.strings.pop(key, None)
            self.hashes.pop(key, None)

    def _check_plain_del(self, key: str, ts: float, cmd: str) -> None:
        s = self._live_string(key, ts)
        if s is not None and s.value is not None:
            owner = s.value.split("|", 1)[0]
            self.report(None, ts, "(plain)", _Touch(key, owner, f"{cmd} {key}"))
            return
        self._check_fields(None, key, None, ts, cmd)

    def _set(
        self,
        ctx: _Ctx | None,
        audit: _Ctx | None,
        key: str,
        name: str,
        rest: list[str],
        ts: float,
        *,
        in_script: bool,
    ) -> None:
        if name == "setex" or name == "psetex":
            if len(rest) < 2:
                return
            ms = float(rest[0]) * (1000.0 if name == "setex" else 1.0)
            value, options = rest[1], ["PX", str(ms)]
        else:
            if not rest:
                return
            value, options = rest[0], [o.upper() for o in rest[1:]]
            if name == "setnx":
                options = ["NX"]
        old = self.strings.get(key)
        lo, hi = _INF, _INF
        i = 0
        while i < len(options):
            opt = options[i]
            if opt in ("EX", "PX", "EXAT", "PXAT") and i + 1 < len(options):
                n = float(options[i + 1])
                if opt == "EX":
                    lo, hi = self._expiry(ctx, ts, n * 1000.0)
                elif opt == "PX":
                    lo, hi = self._expiry(ctx, ts, n)
                else:
                    lo = hi = n if opt == "EXAT" else n / 1000.0
                i += 2
                continue
            if opt == "KEEPTTL" and old is not None and old.value is not None:
                lo, hi = old.lo, old.hi
            i += 1
        new = _Str(value, lo, hi)
        if "NX" in options:
            if old is not None and old.value is not None and self._alive(old.lo, ts):
                return  # refused: the key is there
            if old is not None and (old.value is None or self._expired(old.hi, ts)):
                self._store(key, new)  # done: the key was not there
            elif in_script and ctx is not None:
                ctx.pending = (key, new)  # lock_acquire reads the key next iff it failed
            else:
                self.strings.pop(key, None)  # it may or may not have been set
            return
        if "XX" in options:
            if old is None or not (old.value is None or self._alive(old.lo, ts)):
                self.strings.pop(key, None)
                return
            if old.value is None:
                return
        if audit is not None:
            self._check_string(audit, key, ts, "SET")
        self._store(key, new)

    def _store(self, key: str, value: _Str) -> None:
        self.hashes.pop(key, None)
        self.strings[key] = value

    def _expire(
        self,
        audit: _Ctx | None,
        ctx: _Ctx | None,
        key: str,
        name: str,
        rest: list[str],
        ts: float,
    ) -> None:
        lo, hi = _INF, _INF
        if name != "persist":
            if not rest:
                return
            n = float(rest[0])
            if name == "pexpire":
                lo, hi = self._expiry(ctx, ts, n)
            elif name == "expire":
                lo, hi = self._expiry(ctx, ts, n * 1000.0)
            else:
                lo = hi = n / 1000.0 if name == "pexpireat" else n
            if len(rest) > 1:  # NX / XX / GT / LT: applied or not, we cannot tell
                lo, hi = -_INF, _INF
        if audit is not None:
            self._check_string(audit, key, ts, name.upper())
            if name != "persist":
                self._check_shorten(audit, key, ts, hi, name.upper())
        s = self.strings.get(key)
        if s is not None and s.value is not None:
            s.lo, s.hi = lo, hi
        h = self.hashes.get(key)
        if h is not None:
            h.lo, h.hi = lo, hi


# ---------------------------------------------------------------------------- auditor


class _Seed(NamedTuple):
    time: float  # server TIME of the read, Unix seconds
    replies: list[Any]  # per name: GET, HGETALL, PTTL of the lock key


class _Server:
    """Per-server state; counters are guarded by the auditor's lock."""

    def __init__(self, index: int, kwargs: Mapping[str, Any]) -> None:
        self.index = index
        self.kwargs = dict(kwargs)
        self.db = int(self.kwargs.get("db", 0) or 0)
        self.polls = 0
        self.monitor_connects = 0
        self.monitor_live = False  # a seeded MONITOR connection is being read
        self.reseed = threading.Event()
        self.sync_seen: set[str] = set()
        self.open: dict[tuple[str, Any], HoldInterval] = {}
        self.ttl_last: dict[str, float] = {}


class Auditor:
    """Watch lock keys on every server: hold intervals, keys without TTL, foreign touches.

    Use as a context manager (or :meth:`start` / :meth:`stop`), then read :meth:`result`::

        with Auditor([server.client_kwargs()], names=["job"]) as auditor:
            run_workers()
            auditor.sync()
        report = auditor.result()

    Foreign-touch rules (MONITOR): every script call is identified by its SHA1 (EVALSHA)
    or the SHA1 of its body (EVAL). A redislock script that carries a caller token
    (``lock_acquire``, ``lock_release``, ``lock_extend``, ``lock_status``, ``hold``,
    ``fair``, ``multi``) is audited with that token; its ``force`` ops and
    ``lock_force_release`` are operator overrides (only counted). A script that is not
    redislock's is audited when ``audit_unknown_scripts`` is true, with its arguments as
    the tokens it may present. Inside an audited script:

    * ``DEL``/``UNLINK``/``PEXPIRE``/``EXPIRE``/``PEXPIREAT``/``EXPIREAT``/``PERSIST``/
      ``SET`` of a string lock key whose shadow value is live (its expiry more than 5 ms
      after the command) and does not start with the caller token + ``|`` is a touch;
    * ``HDEL``/``HSET`` of a hold field other than the caller's token whose lease
      (``expires_ms``) is still in the future at the command's server time, ``DEL`` of a
      hash with such a hold, or a TTL that ends before such a hold's lease, is a touch.
      Removing holds already expired is legitimate cleanup.

    ``SET … NX`` changes nothing it could steal; ``lock_acquire`` reads the key right after
    a refused ``SET NX``, which tells the shadow whether the write happened. With
    ``foreign_plain_dels`` a plain (non-script) ``DEL``/``UNLINK``/``GETDEL`` of a lock key
    with a live owner is a touch too: redislock never deletes a lock key outside a
    script, so this catches, for instance, a deliberately broken lock that releases without
    checking its token.

    Args:
        servers: redis client keyword arguments, one dict per server (for example
            ``RedisProcess.client_kwargs()``); the list index is the ``server`` field of
            every record. Supported keys: ``unix_socket_path`` or ``host``/``port``,
            ``db``, ``username``, ``password`` (others are passed to ``redis.Redis`` for
            polling only).
        prefix: the locks' key prefix.
        names: lock names whose holds are polled (all kinds share the key ``P{N}``).
        poll_interval: seconds between snapshots of one server (> 0).
        monitor: run the MONITOR readers (foreign touches); False polls only.
        scan_every: run the TTL scan every this many polls (>= 1).
        foreign_plain_dels: flag plain DEL/UNLINK/GETDEL of a live lock key.
        audit_unknown_scripts: audit scripts that are not redislock's.

    Raises:
        ValueError: no servers, a bad ``poll_interval`` or ``scan_every``, an empty prefix.
    """

    def __init__(
        self,
        servers: Sequence[Mapping[str, Any]],
        *,
        prefix: str = DEFAULT_PREFIX,
        names: Sequence[str],
        poll_interval: float = 0.02,
        monitor: bool = True,
        scan_every: int = 10,
        foreign_plain_dels: bool = True,
        audit_unknown_scripts: bool = True,
    ) -> None:
        if not servers:
            raise ValueError("servers must name at least one server")
        if isinstance(names, str):
            raise ValueError("names must be a sequence of lock names, not a string")
        if not 0 < poll_interval < math.inf:
            raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval!r}")
        if isinstance(scan_every, bool) or scan_every < 1:
            raise ValueError(f"scan_every must be an int >= 1, got {scan_every!r}")
        if not prefix:
            raise ValueError("prefix must not be empty")
        self._prefix = prefix
        self._names = list(dict.fromkeys(names))
        self._keys = [LockKeys.for_name(n, prefix) for n in self._names]
        self._poll_interval = float(poll_interval)
        self._monitor = monitor
        self._scan_every = scan_every
        self._plain_dels = foreign_plain_dels
        self._unknown_scripts = audit_unknown_scripts
        self._servers = [_Server(i, kw) for i, kw in enumerate(servers)]
        self._scripts = _library_by_sha()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        # results, guarded by self._lock
        self._closed: list[HoldInterval] = []
        self._ttl: list[TtlViolation] = []
        self._ttl_observations = 0
        self._ttl_checks = 0
        self._touches: list[ForeignTouch] = []
        self._monitor_lines = 0
        self._audited = 0
        self._admin = 0
        self._poll_errors = 0
        self._restarts: list[RestartNote] = []
        self._errors: list[str] = []

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Start the threads (two per server; daemon threads).

        Raises:
            RuntimeError: already started.
        """
        if self._started:
            raise RuntimeError("this Auditor was already started")
        self._started = True
        for srv in self._servers:
            self._spawn(self._poll_loop, srv, f"audit-poll-{srv.index}")
            if self._monitor:
                self._spawn(self._monitor_loop, srv, f"audit-monitor-{srv.index}")

    def _spawn(self, target: Callable[[_Server], None], srv: _Server, name: str) -> None:
        thread = threading.Thread(target=target, args=(srv,), name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the threads and wait for them, at most ``timeout`` seconds each.

        Idempotent. The collected data stays available through :meth:`result`.
        """
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    def __enter__(self) -> Auditor:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ public

    def note_restart(self, server: int, persistent: bool) -> None:
        """Tell the auditor that ``server`` was restarted.

        Recorded in :attr:`AuditResult.restarts`; the MONITOR reader of that server
        reconnects and re-reads its keys. Hold intervals need nothing: without persistence
        the first successful poll after the restart closes them (``gone``).

        Raises:
            IndexError: no such server.
        """
        srv = self._servers[server]
        with self._lock:
            self._restarts.append(RestartNote(server, time.monotonic(), bool(persistent)))
        srv.reseed.set()

    def sync(self, timeout: float = 2.0) -> bool:
        """Wait until every server has been polled twice more and, with MONITOR, until its
        reader has seen everything the server ran before this call.

        The MONITOR part sends an ``ECHO`` marker to each server (again every 0.1 s while
        its reader is reconnecting) and waits until the reader has seen it.

        Args:
            timeout: the longest wait, seconds.

        Returns:
            True if every server caught up, False if one did not within ``timeout`` (it is
            down, paused or restarting) or the auditor is stopped.
        """
        deadline = time.monotonic() + timeout
        nonce = f"{_MARKER}sync:{os.urandom(8).hex()}"
        with self._lock:
            wanted = {srv.index: srv.polls + 2 for srv in self._servers}
        sent_at: dict[int, float] = {}
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                with self._lock:
                    unseen = [s for s in self._servers if nonce not in s.sync_seen]
                    behind = [s for s in self._servers if s.polls < wanted[s.index]]
                if not self._monitor:
                    unseen = []
                if not unseen and not behind:
                    return True
                if now >= deadline:
                    return False
                for srv in unseen:
                    if srv.monitor_live and now - sent_at.get(srv.index, -math.inf) >= 0.1:
                        sent_at[srv.index] = now
                        with (
                            contextlib.suppress(redis.RedisError, OSError),
                            _client(srv.kwargs) as client,
                        ):
                            client.echo(nonce)
                with self._cond:
                    self._cond.wait(min(max(deadline - time.monotonic(), 0.0), 0.02))
            return False
        finally:
            with self._lock:
                for srv in self._servers:
                    srv.sync_seen.discard(nonce)

    def result(self) -> AuditResult:
        """A copy of everything collected so far (callable while running)."""
        with self._lock:
            holds = list(self._closed)
            for srv in self._servers:
                holds.extend(dataclasses.replace(h) for h in srv.open.values())
            holds.sort(key=lambda h: (h.server, h.first, h.name))
            return AuditResult(
                ttl_violations=[dataclasses.replace(v) for v in self._ttl],
                ttl_observations=self._ttl_observations,
                holds=holds,
                foreign_touches=[dataclasses.replace(t) for t in self._touches],
                monitor_lines=self._monitor_lines,
                audited_scripts=self._audited,
                polls=[srv.polls for srv in self._servers],
                poll_errors=self._poll_errors,
                ttl_checks=self._ttl_checks,
                admin_overrides=self._admin,
                monitor_connects=[srv.monitor_connects for srv in self._servers],
                restarts=[dataclasses.replace(r) for r in self._restarts],
                errors=list(self._errors),
            )

    # ------------------------------------------------------------------ poller

    def _error(self, where: str, err: BaseException) -> None:
        with self._lock:
            if len(self._errors) < _MAX_ERRORS:
                self._errors.append(f"{where}: {type(err).__name__}: {err}")

    def _poll_loop(self, srv: _Server) -> None:
        client = _client(srv.kwargs)
        n = 0
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                try:
                    self._poll_once(srv, client)
                    n += 1
                    if n % self._scan_every == 0:
                        self._scan_once(srv, client)
                except (redis.RedisError, OSError):
                    with self._lock:
                        self._poll_errors += 1
                    with contextlib.suppress(Exception):
                        client.connection_pool.disconnect()
                except Exception as err:  # a bug must not end the audit silently
                    with self._lock:
                        self._poll_errors += 1
                    self._error(f"poll server {srv.index}", err)
                self._stop.wait(max(0.0, self._poll_interval - (time.monotonic() - began)))
        finally:
            client.close()

    def _poll_once(self, srv: _Server, client: redis.Redis) -> None:
        pipe = client.pipeline(transaction=True)
        pipe.time()
        for keys in self._keys:
            pipe.get(keys.lock)
            pipe.hgetall(keys.lock)
            pipe.get(keys.fence)
        sent = time.monotonic()
        replies = pipe.execute(raise_on_error=False)
        got = time.monotonic()
        wall = time.time()
        now = replies[0]
        if isinstance(now, BaseException):
            raise now
        sec, usec = int(now[0]), int(now[1])
        now_ms = sec * 1000 + usec // 1000
        t = min(max(got - (wall - (sec + usec / 1e6)), sent), got)
        seen: dict[tuple[str, Any], HoldInterval] = {}
        for i, name in enumerate(self._names):
            value, fields, fence = replies[1 + 3 * i : 4 + 3 * i]
            if isinstance(value, bytes):
                hold = _parse_string(_text(value))
                if hold is None:
                    continue
                fence_n = int(fence) if isinstance(fence, bytes) and fence.isdigit() else 0
                seen[(name, ("s", _text(value)))] = HoldInterval(
                    srv.index, name, hold.pid, fence_n, t, t, None, _STRING_MODE,
                    hold.token[:_TOKEN_CHARS], hold.host,
                )  # fmt: skip
            elif isinstance(fields, dict):
                for raw_f, raw_v in fields.items():
                    h = _parse_hash(_text(raw_v))
                    if h is None or h.expires_ms <= now_ms:
                        continue
                    token = _text(raw_f)
                    seen[(name, ("h", token, h.fence))] = HoldInterval(
                        srv.index, name, h.pid, h.fence, t, t, None, _HASH_MODES[h.mode],
                        token[:_TOKEN_CHARS], h.host,
                    )  # fmt: skip
        with self._cond:
            for ident, fresh in seen.items():
                cur = srv.open.get(ident)
                if cur is None:
                    srv.open[ident] = fresh
                else:
                    cur.last = t
                    cur.fence = max(cur.fence, fresh.fence)
            for ident in [i for i in srv.open if i not in seen]:
                gone = srv.open.pop(ident)
                gone.gone = t
                self._closed.append(gone)
            srv.polls += 1
            self._cond.notify_all()

    def _scan_once(self, srv: _Server, client: redis.Redis) -> None:
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in self._prefix) + "*"
        keys: list[bytes] = []
        cursor: int = 0
        while True:
            cursor, batch = client.scan(cursor, match=pattern, count=1000)
            keys.extend(cast(list[bytes], batch))
            if int(cursor) == 0:
                break
        checked = [k for k in keys if not k.endswith((b":fence", b":permits"))]
        if not checked:
            return
        pipe = client.pipeline(transaction=False)
        for key in checked:
            pipe.pttl(key)
        ttls = pipe.execute(raise_on_error=False)
        t = time.monotonic()
        bad = [k for k, ttl in zip(checked, ttls, strict=True) if ttl == -1]
        types: list[Any] = []
        if bad:
            pipe = client.pipeline(transaction=False)
            for key in bad:
                pipe.type(key)
            types = pipe.execute(raise_on_error=False)
        with self._lock:
            self._ttl_checks += len(checked)
            self._ttl_observations += len(bad)
            for key, kind in zip(bad, types, strict=True):
                text = _text(key)
                last = srv.ttl_last.get(text)
                if last is not None and t - last < _TTL_DEDUPE:
                    continue
                srv.ttl_last[text] = t
                kind_s = _text(kind) if isinstance(kind, bytes | str) else "?"
                self._ttl.append(TtlViolation(t, srv.index, text, kind_s))

    # ------------------------------------------------------------------ MONITOR

    def _reporter(
        self, srv: _Server, shadow: _Shadow
    ) -> Callable[[_Ctx | None, float, str, _Touch], None]:
        def report(ctx: _Ctx | None, ts: float, label: str, touch: _Touch) -> None:
            record = ForeignTouch(
                server=srv.index,
                t=_mono_of_wall(ts),
                script=label,
                key=touch.key,
                caller=_short(ctx.shown if ctx is not None else None),
                owner=_short(touch.owner),
                command=touch.command,
                client=ctx.client if ctx is not None else shadow.last_client,
                server_time=ts,
            )
            with self._lock:
                self._touches.append(record)

        return report

    def _count_script(self, admin: bool) -> None:
        with self._lock:
            if admin:
                self._admin += 1
            else:
                self._audited += 1

    def _monitor_loop(self, srv: _Server) -> None:
        shadow = _Shadow(
            self._prefix,
            self._scripts,
            plain_dels=self._plain_dels,
            unknown_scripts=self._unknown_scripts,
            report=lambda *a: None,
            count_script=self._count_script,
        )
        shadow.report = self._reporter(srv, shadow)
        while not self._stop.is_set():
            sock: socket.socket | None = None
            try:
                sock = self._monitor_connect(srv)
                self._monitor_read(srv, sock, shadow)
            except (OSError, ValueError, redis.RedisError):
                pass
            except Exception as err:  # a bug must not end the audit silently
                self._error(f"monitor server {srv.index}", err)
            finally:
                srv.monitor_live = False
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()
            shadow.reset()
            self._stop.wait(_RECONNECT_DELAY)

    def _monitor_connect(self, srv: _Server) -> socket.socket:
        kw = srv.kwargs
        path = kw.get("unix_socket_path")
        if path:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(_SOCKET_TIMEOUT)
            try:
                sock.connect(str(path))
            except OSError:
                sock.close()
                raise
        else:
            host = kw.get("host") or "localhost"
            port = int(kw.get("port") or 6379)
            sock = socket.create_connection((host, port), timeout=_SOCKET_TIMEOUT)
        password = kw.get("password")
        if password:
            username = kw.get("username")
            sock.sendall(_resp("AUTH", *([username] if username else []), password))
        sock.sendall(_resp("MONITOR"))
        return sock

    def _lines(self, sock: socket.socket) -> Iterator[bytes | None]:
        """MONITOR lines; None after each idle socket timeout (to check for stop)."""
        buf = b""
        while not self._stop.is_set():
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                yield None
                continue
            if not chunk:
                raise ConnectionError("server closed the MONITOR connection")
            buf += chunk
            *lines, buf = buf.split(b"\r\n")
            yield from lines

    def _monitor_read(self, srv: _Server, sock: socket.socket, shadow: _Shadow) -> None:
        """Read one MONITOR connection until it fails, the auditor stops or a reseed.

        Right after MONITOR is on, the keys of ``names`` are read in one MULTI that also
        ECHOes a marker; lines before the marker are skipped and the shadow starts from
        that read at the marker, exactly where the server ran it.
        """
        srv.reseed.clear()
        acks = 2 if srv.kwargs.get("password") else 1
        marker = f"{_MARKER}seed:{os.urandom(8).hex()}"
        marker_b = marker.encode()
        prefix_b = _monitor_repr(self._prefix.encode())
        seed: _Seed | None = None
        seeded = False
        for raw in self._lines(sock):
            if srv.reseed.is_set():
                return
            if raw is None:
                if seed is not None and not seeded:
                    return  # the seed's marker never showed: start over
                continue
            if acks:
                if raw.startswith(b"-"):
                    raise ConnectionError(raw.decode("utf-8", "replace"))
                acks -= 1
                if not acks:
                    seed = self._read_seed(srv, marker)
                    if seed is None:
                        return
                continue
            if not seeded:
                if seed is not None and marker_b in raw:
                    self._install_seed(shadow, seed)
                    seeded = True
                    with self._cond:
                        srv.monitor_connects += 1
                        srv.monitor_live = True
                        self._cond.notify_all()
                continue
            self._monitor_line(srv, shadow, raw, prefix_b)

    def _monitor_line(self, srv: _Server, shadow: _Shadow, raw: bytes, prefix_b: bytes) -> None:
        with self._lock:
            self._monitor_lines += 1
        # Cheap path: lines that cannot touch a lock key are not parsed in full.
        head = raw.find(b'] "')
        is_lua = raw.find(b" lua] ", 0, head + 2) >= 0 if head > 0 else False
        name_end = raw.find(b'"', head + 3)
        command = raw[head + 3 : name_end].lower() if head > 0 and name_end > 0 else b""
        relevant = (
            prefix_b in raw
            or command.startswith(b"eval")
            or command in (b"flushall", b"flushdb", b"swapdb", b"echo")
        )
        if not relevant:
            shadow.feed_other(is_lua)
            return
        line = parse_monitor_line(raw)
        if line is None:
            shadow.feed_other(is_lua)
            return
        if line.args[0].lower() == b"echo" and len(line.args) == 2:
            text = _text(line.args[1])
            if text.startswith(f"{_MARKER}sync:"):
                with self._cond:  # seen even if another database: sync() only waits
                    srv.sync_seen.add(text)
                    self._cond.notify_all()
        if line.db != srv.db:
            shadow.feed_other(is_lua)
            return
        if not is_lua:
            shadow.last_client = line.client
        try:
            shadow.feed(line)
        except (ValueError, IndexError) as err:  # a malformed argument: forget everything
            shadow.reset()
            self._error(f"monitor server {srv.index}", err)

    def _read_seed(self, srv: _Server, marker: str) -> _Seed | None:
        """Read the keys of ``names`` atomically, with a marker MONITOR will show."""
        try:
            with _client(srv.kwargs) as client:
                pipe = client.pipeline(transaction=True)
                pipe.echo(marker)
                pipe.time()
                for keys in self._keys:
                    pipe.get(keys.lock)
                    pipe.hgetall(keys.lock)
                    pipe.pttl(keys.lock)
                replies = pipe.execute(raise_on_error=False)
        except (redis.RedisError, OSError):
            return None
        now = replies[1]
        if isinstance(now, BaseException):
            return None
        return _Seed(int(now[0]) + int(now[1]) / 1e6, list(replies[2:]))

    def _install_seed(self, shadow: _Shadow, seed: _Seed) -> None:
        shadow.reset()
        now, replies = seed
        for i, keys in enumerate(self._keys):
            value, fields, pttl = replies[3 * i : 3 * i + 3]
            if not isinstance(pttl, int) or pttl == -2:
                shadow.seed_string(keys.lock, None, _INF)
                continue
            expires = _INF if pttl < 0 else now + pttl / 1000.0
            if isinstance(value, bytes):
                shadow.seed_string(keys.lock, _text(value), expires)
            elif isinstance(fields, dict):
                shadow.seed_hash(
                    keys.lock, {_text(f): _text(v) for f, v in fields.items()}, expires
                )
