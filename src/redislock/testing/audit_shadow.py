# SPDX-License-Identifier: MIT
"""The MONITOR reader's model of one server's lock keys, and the foreign-touch rules.

A :class:`Shadow` is fed the parsed MONITOR lines of one server
(:func:`~redislock.testing.monitor.parse_monitor_line`) in order. It keeps every lock key's
string value or hash fields with their expiry bounds (server seconds), recognises the script
each EVAL/EVALSHA runs (by SHA1, from :data:`LIBRARY`), and reports a :class:`Touch` when an
audited script, or a plain ``DEL``/``UNLINK``/``GETDEL``, removes, overwrites or shortens a
lock key or hold that belonged to another token and was still live. The rules are spelled
out in :class:`~redislock.testing.audit.Auditor`. One thread uses a shadow; it does no I/O.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from redislock._core.codec import decode_hold_value, lock_value_owner
from redislock._core.keys import LockKeys
from redislock._core.scripts import SCRIPTS
from redislock.testing.audit_records import TOKEN_CHARS
from redislock.testing.monitor import MonitorLine, arg_text

__all__ = [
    "LIBRARY",
    "ScriptContext",
    "ScriptInfo",
    "Shadow",
    "Touch",
    "library_by_sha",
]

_SLACK: Final = 0.005  # seconds: expiry margin under which a touch is not flagged
_INF: Final = math.inf


def _looks_like_token(value: str) -> bool:
    return len(value) >= 32 and all(c in "0123456789abcdef" for c in value.lower())


# ---------------------------------------------------------------------------- script table


class ScriptInfo(NamedTuple):
    """How to audit one library script: where its op and caller token are in ARGV."""

    label: str
    op_index: int | None  # ARGV index of the op (0-based), None: the script has one op
    token_index: int | None  # ARGV index of the caller token, None: no token (admin)
    admin_ops: frozenset[str]  # ops that are operator overrides
    owns_nothing: bool = False  # no caller token, and no live hold is its to touch


LIBRARY: Final = {
    "lock_acquire": ScriptInfo("lock_acquire", None, 0, frozenset()),
    "lock_release": ScriptInfo("lock_release", None, 0, frozenset()),
    "lock_extend": ScriptInfo("lock_extend", None, 0, frozenset()),
    "lock_status": ScriptInfo("lock_status", None, 0, frozenset()),
    # An operator override, deliberately deleting whoever holds the lock: counted in
    # AuditResult.admin_overrides, never a foreign touch.
    "lock_force_release": ScriptInfo("lock_force_release", None, None, frozenset()),
    **{
        stem: ScriptInfo(stem, None, 0, frozenset())
        for stem in (
            "hold_acquire_write",
            "hold_acquire_read",
            "hold_acquire_permit",
            "hold_reenter",
            "hold_release",
            "hold_release_permit",
            "hold_extend",
            "hold_status",
            "hold_leave",
        )
    },
    "hold_count": ScriptInfo("hold_count", None, None, frozenset(), owns_nothing=True),
    "hold_force": ScriptInfo("hold_force", None, None, frozenset()),
    "fair_acquire": ScriptInfo("fair_acquire", None, 0, frozenset()),
    "fair_release": ScriptInfo("fair_release", None, 0, frozenset()),
    "fair_cancel": ScriptInfo("fair_cancel", None, 0, frozenset()),
    "fair_force": ScriptInfo("fair_force", None, None, frozenset()),  # an operator override
    "multi_acquire": ScriptInfo("multi_acquire", None, 0, frozenset()),
    "multi_release": ScriptInfo("multi_release", None, 0, frozenset()),
    "multi_extend": ScriptInfo("multi_extend", None, 0, frozenset()),
    "multi_status": ScriptInfo("multi_status", None, 0, frozenset()),
}
# Other library scripts (redlock_fence, fenced_write) never touch a lock key: their
# writes are tracked but not audited. lock_renew (the watchdogs' renewal of many Lock holds
# in one call) only lengthens the TTL of keys that hold the tokens it was given, as
# lock_extend "max" does: tracked, not audited.


def library_by_sha() -> dict[str, tuple[str, ScriptInfo | None]]:
    """Every library script's SHA1 (hex) -> its file stem and audit info (None: not
    audited, see :data:`LIBRARY`)."""
    table: dict[str, tuple[str, ScriptInfo | None]] = {}
    for name, script in SCRIPTS.items():
        table[script.sha] = (name, LIBRARY.get(name))
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
class ScriptContext:
    """The script whose ``lua`` MONITOR lines follow: its label, caller and audit state."""

    label: str
    client: str
    start: float  # server time of the EVAL line
    audited: bool = False
    caller: str | None = None  # library script: the caller token
    allowed: frozenset[str] | None = None  # other scripts: their arguments
    shown: str | None = None  # the caller token shown in records (cut to 8 characters)
    pending: tuple[str, _Str] | None = None  # a SET NX waiting for the next line


class Touch(NamedTuple):
    """A write on a lock key or hold of another live owner (``owner``: its full token)."""

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


class Shadow:
    """The MONITOR reader's model of one server's lock keys; one thread uses it."""

    def __init__(
        self,
        prefix: str,
        scripts: Mapping[str, tuple[str, ScriptInfo | None]],
        *,
        plain_dels: bool,
        unknown_scripts: bool,
        report: Callable[[ScriptContext | None, float, str, Touch], None],
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
        self.ctx: ScriptContext | None = None
        self.last_client = ""  # the client of the latest plain command
        self.high = -_INF  # the latest server time seen (see _observe)

    # -- state

    def reset(self) -> None:
        self.strings.clear()
        self.hashes.clear()
        self.ctx = None
        self.high = -_INF

    def _observe(self, ts: float) -> None:
        """A line's server time. Expiry is modelled from times alone, so a step back of the
        server's wall clock would bring back keys that expired before it, which Redis may
        have deleted by then (a deleted key stays deleted): at a step back, every key not
        definitely alive at the latest time seen becomes unknown."""
        if ts >= self.high - _SLACK:
            self.high = max(self.high, ts)
            return
        for key, s in list(self.strings.items()):
            if s.value is not None and not self._alive(s.lo, self.high):
                del self.strings[key]
        for key, h in list(self.hashes.items()):
            if not self._alive(h.lo, self.high):
                del self.hashes[key]
        self.high = ts

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
        hold = decode_hold_value(value)
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

    def _foreign(self, ctx: ScriptContext, owner: str) -> bool:
        if ctx.caller is not None:
            return owner != ctx.caller
        return ctx.allowed is not None and owner not in ctx.allowed

    def _check_string(self, ctx: ScriptContext, key: str, ts: float, command: str) -> None:
        s = self._live_string(key, ts)
        if s is None or s.value is None:
            return
        owner = lock_value_owner(s.value)
        if self._foreign(ctx, owner):
            self.report(ctx, ts, ctx.label, Touch(key, owner, f"{command} {key}"))

    def _check_fields(
        self, ctx: ScriptContext | None, key: str, names: Sequence[str] | None, ts: float, cmd: str
    ) -> None:
        """Fields ``names`` (None: all) of hash ``key`` removed or overwritten."""
        live = self._live_fields(key, ts)
        targets = live if names is None else [f for f in names if f in live]
        for f in targets:
            if ctx is None or self._foreign(ctx, f):
                command = f"{cmd} {key}" + ("" if names is None else f" {f[:TOKEN_CHARS]}…")
                label = "(plain)" if ctx is None else ctx.label
                self.report(ctx, ts, label, Touch(key, f, command))
                return

    def _check_shorten(
        self, ctx: ScriptContext, key: str, ts: float, new_hi: float, cmd: str
    ) -> None:
        """A hash key's TTL set to end before a foreign live hold's lease."""
        for f, exp in self._live_fields(key, ts).items():
            if self._foreign(ctx, f) and new_hi + _SLACK < exp:
                self.report(ctx, ts, ctx.label, Touch(key, f, f"{cmd} {key}"))
                return

    # -- line dispatch

    def feed(self, line: MonitorLine) -> None:
        """Apply one line (of the audited database)."""
        self._observe(line.time)
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

    def _apply_pending(self, ctx: ScriptContext) -> None:
        assert ctx.pending is not None
        key, value = ctx.pending
        ctx.pending = None
        self.hashes.pop(key, None)
        self.strings[key] = value

    def _resolve(self, ctx: ScriptContext, line: MonitorLine) -> None:
        """A script's SET NX of a lock key: lock_acquire reads the key next iff it failed."""
        assert ctx.pending is not None
        key = ctx.pending[0]
        args = line.args
        if len(args) == 2 and args[0].lower() == b"get" and arg_text(args[1]) == key:
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
        argv = [arg_text(a) for a in args[3 + numkeys :]]
        found = self.scripts.get(sha)
        ctx = ScriptContext(label=f"eval:{sha[:8]}", client=line.client, start=line.time)
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
                if info.owns_nothing:
                    ctx.caller = ""
                    ctx.audited = True
                elif info.token_index is None or op in info.admin_ops:
                    self.count_script(True)
                elif info.token_index < len(argv):
                    ctx.caller = ctx.shown = argv[info.token_index]
                    ctx.audited = True
        if ctx.audited:
            self.count_script(False)
        self.ctx = ctx

    def _expiry(self, ctx: ScriptContext | None, ts: float, ms: float) -> tuple[float, float]:
        """Expiry bounds of a relative TTL of ``ms`` set by a command at ``ts``: Redis counts
        it from the command's time or from its script's start, so the bounds span both. A
        server clock stepped back while the script ran puts its start after ``ts`` (a torture
        run saw Redis expire such a key by the later step, while the bounds, taken from the
        start alone, still called it alive: a false foreign touch)."""
        start = ctx.start if ctx is not None else ts
        return min(start, ts) - 0.002 + ms / 1000.0, max(start, ts) + 0.002 + ms / 1000.0

    def _command(self, ctx: ScriptContext | None, line: MonitorLine, *, in_script: bool) -> None:
        args = line.args
        name = args[0].decode("latin-1").lower()
        ts = line.time
        audit = ctx if (ctx is not None and ctx.audited) else None
        if name in _NO_EFFECT:
            return
        if name in ("flushall", "flushdb", "swapdb"):
            self.reset()
            return
        keys = [arg_text(a) for a in args[1:]]
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
            owner = lock_value_owner(s.value)
            self.report(None, ts, "(plain)", Touch(key, owner, f"{cmd} {key}"))
            return
        self._check_fields(None, key, None, ts, cmd)

    def _set(
        self,
        ctx: ScriptContext | None,
        audit: ScriptContext | None,
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
        audit: ScriptContext | None,
        ctx: ScriptContext | None,
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
