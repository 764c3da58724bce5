# SPDX-License-Identifier: MIT
"""The Lua script cases' shared vocabulary: a :class:`Case` (setup, EVAL, reply, checks), the
values that depend on the server's clock, the key layouts and ARGV builders of every script
as the cores lay them out, and :func:`run_case`, which runs one case through EVAL on a real
redis-server (no Python lock logic involved).

Used by ``tests/test_scripts.py`` and the ``tests/test_scripts_*.py`` files, one per script
family.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from redislock._clients import RESPONSE_ERRORS
from redislock._core.codec import encode_lock_value
from redislock._core.keys import GRANT_SUFFIX, FairKeys, HoldKeys, LockKeys
from redislock._core.lock import DONE_MS, LockCore
from redislock._core.scripts import SCRIPTS

K = LockKeys.for_name("job")
TOKEN = "a" * 32
OTHER = "b" * 32
META = "host|123|1700000000000"
TARGET = "resource:{job}"


@dataclass(frozen=True)
class Between:
    """Matches an integer in [lo, hi] (``numeric``: also a float or a str holding a number)."""

    lo: int
    hi: int
    numeric: bool = False

    def __eq__(self, other: object) -> bool:
        if self.numeric and isinstance(other, str | float) and not isinstance(other, bool):
            try:
                other = float(other)
            except ValueError:
                return False
            return self.lo <= other <= self.hi
        return isinstance(other, int) and self.lo <= other <= self.hi

    def __hash__(self) -> int:
        return hash((self.lo, self.hi))


def norm(value: Any) -> Any:
    """Replies with ``decode_responses`` either way, as str/int/list/dict."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [norm(v) for v in value]
    if isinstance(value, dict):
        return {norm(k): norm(v) for k, v in value.items()}
    return value


class Timed:
    """A value that depends on the server's clock: the case runner reads the server's TIME
    (milliseconds, as the scripts compute ``now``) just before the setup and replaces every
    :class:`Timed` in the setup, ARGV, reply and ``after`` checks with ``at(now_ms)``."""

    def at(self, now_ms: int) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class At(Timed):
    """Setup or ARGV text: ``template`` with ``{}`` replaced by ``now + offset_ms``."""

    offset_ms: int
    template: str = "{}"

    def at(self, now_ms: int) -> str:
        return self.template.replace("{}", str(now_ms + self.offset_ms), 1)


@dataclass(frozen=True)
class Clock(Timed):
    """An expected server time in milliseconds, in ``[now + lo, now + hi]`` (an int, a float
    such as a ZSCORE reply, or its text)."""

    lo: int
    hi: int

    def at(self, now_ms: int) -> Between:
        return Between(now_ms + self.lo, now_ms + self.hi, numeric=True)


@dataclass(frozen=True)
class Matches:
    """Matches a str that fully matches ``pattern``; its group ``ms``, if the pattern has
    one, must also equal ``ms``."""

    pattern: str
    ms: Between | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str):
            return False
        m = re.fullmatch(self.pattern, other)
        return m is not None and (self.ms is None or int(m["ms"]) == self.ms)

    def __hash__(self) -> int:
        return hash(self.pattern)


@dataclass(frozen=True)
class HoldValue(Timed):
    """A hold hash field (_hold.lua) "<mode>|<count>|<expires_ms>|<fence>|<meta>" whose expires_ms
    is in ``[now + lo, now + hi]``."""

    mode: str
    count: int
    fence: int
    lo: int
    hi: int
    meta: str = META

    def at(self, now_ms: int) -> Matches:
        pattern = rf"{self.mode}\|{self.count}\|(?P<ms>\d+)\|{self.fence}\|{re.escape(self.meta)}"
        return Matches(pattern, Between(now_ms + self.lo, now_ms + self.hi))


@dataclass(frozen=True)
class Error:
    """The script replies with an error whose message contains ``text``."""

    text: str


Arg = str | int | Timed


def resolve(value: Any, now_ms: int) -> Any:
    """``value`` with every :class:`Timed` in it replaced by its value at ``now_ms``."""
    if isinstance(value, Timed):
        return value.at(now_ms)
    if isinstance(value, tuple):
        return tuple(resolve(v, now_ms) for v in value)
    if isinstance(value, list):
        return [resolve(v, now_ms) for v in value]
    return value


@dataclass
class Case:
    id: str
    script: str
    keys: tuple[str, ...]
    args: tuple[Arg, ...]
    reply: Any
    setup: list[tuple[Arg, ...]] = field(default_factory=list)
    after: list[tuple[tuple[Arg, ...], Any]] = field(default_factory=list)
    # keys outside KEYS the script may write (none today)
    extra: tuple[str, ...] = ()


def held(token: str = TOKEN, px: int | None = 5000, fence: int = 1) -> tuple[str | int, ...]:
    """Setup: ``token`` holds the Lock ``K`` with fencing token ``fence``."""
    value = encode_lock_value(token, META, fence)
    return ("SET", K.lock, value) if px is None else ("SET", K.lock, value, "PX", px)


ACQ = (K.lock, K.fence, K.wait)
REL = (K.lock, K.wait, K.wake, K.done)
GONE = 0  # EXISTS reply

# The hold_* scripts and fair_*.lua: their own key layouts, ARGV as the cores build them.
H = HoldKeys.for_name("job")
F = FairKeys.for_name("job")
FAIR = (F.lock, F.fence, F.queue, F.leases, F.info)
THIRD = "c" * 32
FOURTH = "d" * 32
TAGGED = "0bad." + "e" * 32  # a token of redislock._core.lock.queue_token
TAGGED2 = "c0fe." + "f" * 32  # another process's
# Lock's and FairLock's owner tokens in the fair_*.lua cases: every one is a queue_token, whose
# process tag names the channel its grants go to (these four: four processes).
QTOKEN = "a0a0." + "a" * 28
QOTHER = "b0b0." + "b" * 28
QTHIRD = "c0c0." + "c" * 28
QFOURTH = "d0d0." + "d" * 28
WMETA = "waiter-host|456|1700000000001"
SLACK = 1000  # ms the server clock may advance between the case's TIME and its EVAL


Call = tuple[str, tuple[str, ...], tuple[Arg, ...]]
"""A hold script's call: (script, KEYS, ARGV), as a case's first three fields after its id."""


def acq(
    token: str = TOKEN,
    mode: str = "w",
    ms: int = 10000,
    *,
    marker_ms: int = 0,
    companion: str = "",
    permits: int = 0,
    waiters: bool | None = None,
) -> Call:
    """A try for a new hold of ``mode`` as ``HoldCore._acquire_op`` builds it (``waiters``:
    whether a write try declares the waiters key; the core's: only a try that may wait)."""
    if mode == "w":
        wait = (H.wait,) if (bool(marker_ms) if waiters is None else waiters) else ()
        return (
            "hold_acquire_write",
            (H.lock, H.expiry, H.fence, *wait),
            (token, ms, META, marker_ms),
        )
    if mode == "r":
        keys = (H.lock, H.expiry, H.fence, H.wait, H.rwait, H.rwake)
        return ("hold_acquire_read", keys, (token, ms, META, marker_ms, companion))
    keys = (H.lock, H.expiry, H.fence, H.wait, H.wake, H.permits)
    return ("hold_acquire_permit", keys, (token, ms, META, marker_ms, permits))


def reenter(token: str = TOKEN, ms: int = 10000, op_id: str = "") -> Call:
    """A re-entry (``HoldCore._reenter_op``)."""
    return ("hold_reenter", (H.lock, H.expiry), (token, ms, op_id))


def rel(
    token: str = TOKEN, mode: str = "w", *, permits: int = 0, op_id: str = "", done_ms: int = 0
) -> Call:
    """A release (``HoldCore._release_op``; without ``op_id`` and ``done_ms`` it is not
    deduplicated and leaves no tombstone)."""
    if mode == "p":
        given = (H.lock, H.expiry, H.wait, H.wake, H.permits, H.released)
        return ("hold_release_permit", given, (token, op_id, done_ms, permits))
    keys = (H.lock, H.expiry, H.wait, H.wake, H.rwait, H.rwake, H.released)
    return ("hold_release", keys, (token, op_id, done_ms))


def ext(token: str = TOKEN, ms: int = 0, extend_mode: str = "", op_id: str = "") -> Call:
    """An extend (``HoldCore._extend_op``)."""
    return ("hold_extend", (H.lock, H.expiry), (token, ms, extend_mode, op_id))


def status(token: str = TOKEN) -> Call:
    """A status: a one-key call (``HoldCore._status_op``)."""
    return ("hold_status", (H.lock,), (token,))


def count(permits: int = 0) -> Call:
    """A count (``HoldCore._count_op``): a Semaphore's (``permits`` > 0) declares its permits
    key."""
    keys = (H.lock, H.expiry, H.permits) if permits else (H.lock, H.expiry)
    return ("hold_count", keys, (permits,))


def leave(token: str = TOKEN) -> Call:
    """A waiter's leave (``HoldCore._leave_op``)."""
    return ("hold_leave", (H.wait,), (token,))


def force() -> Call:
    """The operator's override (``HoldCore._force_op``)."""
    return ("hold_force", (H.lock, H.expiry, H.wait, H.wake, H.rwait, H.rwake), ())


def hold(
    token: str = TOKEN,
    mode: str = "w",
    lease_ms: int = 5000,
    *,
    count: int = 1,
    fence: int = 1,
    op: str = "",
) -> tuple[Arg, ...]:
    """Setup: a hold whose lease ends ``lease_ms`` after the case's server time (< 0: ended);
    ``op``: the op id of the last call applied to it; mode ``x``: a released hold's
    tombstone."""
    suffix = f"|o{op}" if op else ""
    return ("HSET", H.lock, token, At(lease_ms, f"{mode}|{count}|{{}}|{fence}|{META}{suffix}"))


def ttl(key: str, ms: int) -> tuple[Arg, ...]:
    return ("PEXPIRE", key, ms)


def marker(key: str, ms: int = 3000) -> tuple[Arg, ...]:
    return ("SET", key, "1", "PX", ms)


WAITER = "e" * 32


def waiting(ms: int = 3000, token: str = WAITER) -> tuple[Arg, ...]:
    """Setup: ``token`` registered as a waiting writer / permit waiter for ``ms`` more."""
    return ("ZADD", H.wait, At(ms), token)


CHANNELS = (":wake", ":rwake", ":grant")
"""Names that are pub/sub channels, not keys (see redislock._core.keys)."""


def woken(channel: str) -> list[tuple[tuple[Arg, ...], Any]]:
    """Checks: exactly one plain wake-up was published on ``channel``."""
    return [(("PUBLISHED", channel), ["*"])]


def absent(*keys: str) -> list[tuple[tuple[Arg, ...], Any]]:
    """Checks: each key does not exist; each channel got no message."""
    return [
        (("PUBLISHED", key), []) if key.endswith(CHANNELS) else (("EXISTS", key), GONE)
        for key in keys
    ]


def fair_args(token: str = QTOKEN, *own: Arg) -> tuple[Arg, ...]:
    """The ARGV of fair_acquire.lua, fair_release.lua and fair_cancel.lua, laid out as
    ``FairCore`` lays it out: the token, then the op's own arguments (acquire: lease_ms,
    meta, waiter_ms, queue_max, delay_ms; release: the hold's fence; cancel: none).
    fair_force.lua takes no ARGV."""
    return (token, *own)


def sent(args: tuple[object, ...]) -> tuple[bytes, ...]:
    """Script arguments as redis-py puts them on the wire: bytes as they are, a str in
    UTF-8, an int in decimal (a core may encode its constant arguments once)."""
    out: list[bytes] = []
    for a in args:
        if isinstance(a, bytes):
            out.append(a)
        elif isinstance(a, str):
            out.append(a.encode())
        elif isinstance(a, int):
            out.append(b"%d" % a)
        else:
            raise TypeError(f"not a script argument: {a!r}")
    return tuple(out)


def facq(
    token: str = QTOKEN, waiter_ms: int = 1000, queue_max: int = 10, lease_ms: int = 10000
) -> tuple[Arg, ...]:
    return fair_args(token, lease_ms, META, waiter_ms, queue_max)


def fheld(token: str = QTOKEN, px: int = 5000, meta: str = META, fence: int = 1) -> tuple[Arg, ...]:
    return ("SET", F.lock, encode_lock_value(token, meta, fence), "PX", px)


QUEUE_PX = 20000
"""Setup: the TTL of a queue's keys (milliseconds) that :func:`waiter` gives them, above
every waiter lease of the cases (fair_acquire.lua's stretch would have given them at least that)."""


def waiter(token: str, lease_ms: int = 8000, waiter_ms: int = 1000) -> list[tuple[Arg, ...]]:
    """Setup: a queued waiter whose waiter lease ends ``waiter_ms`` from now (< 0: dead); the
    queue's keys live :data:`QUEUE_PX` ms."""
    return [
        ("RPUSH", F.queue, token),
        ("ZADD", F.leases, At(waiter_ms), token),
        ("HSET", F.info, token, f"{lease_ms}|{WMETA}"),
        *(("PEXPIRE", key, QUEUE_PX) for key in (F.queue, F.leases, F.info)),
    ]


def not_queued(token: str) -> list[tuple[tuple[Arg, ...], Any]]:
    return [(("ZSCORE", F.leases, token), None), (("HEXISTS", F.info, token), 0)]


def queue_ttl(lo: int, hi: int) -> list[tuple[tuple[Arg, ...], Any]]:
    """Checks: the three queue keys live ``lo`` to ``hi`` ms more (fair_acquire.lua's
    stretch: at least as long as the latest waiter lease, twice a lease when it extends
    them)."""
    return [(("PTTL", key), Between(lo, hi)) for key in (F.queue, F.leases, F.info)]


def granted(token: str, fence: int, lease_ms: int) -> list[tuple[tuple[Arg, ...], Any]]:
    """Checks: ``token`` was handed the lock with ``fence`` (its waiter meta, its lease)."""
    return [
        (("GET", F.lock), f"{token}|{fence}|{WMETA}"),
        (("PTTL", F.lock), Between(lease_ms - SLACK, lease_ms)),
        (("GET", F.fence), str(fence)),
        # on the channel of the waiter's process
        (("PUBLISHED", F.grant_for(token)), [f"{FairKeys.tag(token)}|{fence}"]),
        *not_queued(token),
    ]


# multi_*.lua: two names of one slot ("job}2" has the hash tag "job", as co-located names do),
# so of one fencing counter (M1.fence == M2.fence).
M1, M2 = LockKeys.for_name("job"), LockKeys.for_name("job}2")
M3 = LockKeys.for_name("job}3")
MACQ = (M1.lock, M1.fence, M1.wait, M2.lock, M2.fence, M2.wait)
Q1, Q2 = FairKeys.of(M1.lock), FairKeys.of(M2.lock)  # their queues of Lock / FairLock waiters
MREL = (
    *(M1.lock, M1.wait, M1.wake, M1.done, Q1.queue, Q1.leases),
    *(M2.lock, M2.wait, M2.wake, M2.done, Q2.queue, Q2.leases),
)
MLOCKS = (M1.lock, M2.lock)


def multi_args(
    op: str,
    n: int = 2,
    token: str = TOKEN,
    *,
    ms: int = 0,
    meta: str = "",
    marker_ms: int = 0,
    mode: str = "",
    op_id: str = "",
    done_ms: int = DONE_MS,
) -> tuple[Arg, ...]:
    """The ARGV of ``multi_<op>.lua``, laid out as ``MultiCore._op`` lays it out: the token,
    then the op's own arguments (acquire: ttl_ms, meta, wait_ms; release: done_ms, the grant
    suffix; extend: n, ms, mode, and op_id and done_ms when ``op_id`` is given; status:
    none). A release remembers itself for DONE_MS unless ``done_ms`` says otherwise."""
    if op == "acquire":
        return (token, ms, meta, marker_ms)
    if op == "release":
        return (token, done_ms, GRANT_SUFFIX)
    if op == "extend":
        return (token, n, ms, mode, op_id, done_ms) if op_id else (token, n, ms, mode)
    return (token,)


def macq(marker_ms: int = 0, token: str = TOKEN) -> tuple[Arg, ...]:
    """multi_acquire.lua of both names with a 10 s lease."""
    return multi_args("acquire", token=token, ms=10000, meta=META, marker_ms=marker_ms)


def mheld(keys: LockKeys, token: str = TOKEN, px: int = 5000, fence: int = 1) -> tuple[Arg, ...]:
    """Setup: ``token`` holds ``keys`` as a Lock would (for ``px`` ms more)."""
    return ("SET", keys.lock, encode_lock_value(token, META, fence), "PX", px)


def command(r: redis.Redis, *args: str | int) -> Any:
    return r.execute_command(*args)  # type: ignore[no-untyped-call]


def written_keys(case: Case) -> set[str]:
    return {str(cmd[1]) for cmd in case.setup}


def server_ms(r: redis.Redis) -> int:
    """The server's TIME in milliseconds, computed as the scripts compute ``now``."""
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def expires_at(r: redis.Redis, key: str) -> int:
    """When ``key`` expires, server time in milliseconds (PEXPIRETIME, which Redis 6.2
    lacks: TIME and PTTL in one transaction; at most 1 ms early); -2: no such key, -1: no
    TTL."""
    pipe = r.pipeline(transaction=True)
    pipe.time()
    pipe.pttl(key)
    (seconds, micros), pttl = pipe.execute()
    if pttl < 0:
        return int(pttl)
    return int(seconds) * 1000 + int(micros) // 1000 + int(pttl)


_END = "scriptcases:end"


def _published(r: redis.Redis, ps: Any) -> dict[str, list[str]]:
    """The messages ``ps`` (subscribed to every channel) got, by channel, up to the end
    marker this publishes on ``r``."""
    command(r, "PUBLISH", _END, "end")
    got: dict[str, list[str]] = {}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        msg = ps.get_message(timeout=1)
        if msg is None or msg["type"] != "pmessage":
            continue
        channel, data = norm(msg["channel"]), norm(msg["data"])
        if channel == _END:
            return got
        got.setdefault(channel, []).append(data)
    raise AssertionError("the end marker never came")


def run_case(r: redis.Redis, case: Case) -> None:
    """Run ``case`` on the flushed server behind ``r`` and check its reply, its ``after``
    checks (``("PUBLISHED", channel)``: the messages published on it; ``("EXPIRES_AT",
    key)``: :func:`expires_at`), that nothing outside its keys was written and nothing
    published but what the checks expect."""
    now = server_ms(r)
    for cmd in resolve(case.setup, now):
        command(r, *cmd)
    script = SCRIPTS[case.script]
    args = resolve(case.args, now)
    ps = r.pubsub()  # type: ignore[no-untyped-call]
    try:
        ps.psubscribe("*")
        assert ps.get_message(timeout=5) is not None  # the subscription is live
        if isinstance(case.reply, Error):
            with pytest.raises(RESPONSE_ERRORS, match=re.escape(case.reply.text)):
                r.eval(script.source, len(case.keys), *case.keys, *args)
        else:
            reply = norm(r.eval(script.source, len(case.keys), *case.keys, *args))
            assert reply == resolve(case.reply, now)
        published = _published(r, ps)
    finally:
        ps.close()
    checked: set[str] = set()
    for cmd, expected in resolve(case.after, now):
        if cmd[0] == "PUBLISHED":
            checked.add(cmd[1])
            assert published.get(cmd[1], []) == expected, cmd
            continue
        if cmd[0] == "EXPIRES_AT":
            assert expires_at(r, cmd[1]) == expected, cmd
            continue
        assert norm(command(r, *cmd)) == expected, cmd
    assert set(published) <= checked, f"published unchecked: {published}"
    # Nothing outside KEYS (and what the setup wrote, and the documented extras) exists.
    present = {norm(k) for k in r.keys("*")}
    assert present <= set(case.keys) | written_keys(case) | set(case.extra)


def base_core() -> LockCore:
    """A Lock core for the name ``job`` with the default prefix, as the shells build one."""
    return LockCore.create(
        "job",
        ttl=10.0,
        watchdog_lease=30.0,
        renew_interval=None,
        max_lease=None,
        timeout=None,
        recheck_interval=0.1,
        prefix="redislock:",
        on_lost=None,
    )
