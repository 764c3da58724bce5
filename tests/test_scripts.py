# SPDX-License-Identifier: MIT
"""The Lua scripts: inventory, header documentation, SHA1s, and their behaviour on a real
redis-server through EVAL (no Python lock logic involved)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.crc

import redislock
from redislock._core.fair import FairCore
from redislock._core.hold import HoldCore
from redislock._core.keys import FairKeys, HoldKeys, LockKeys
from redislock._core.lock import LockCore
from redislock._core.multi import MultiCore
from redislock._core.scripts import SCRIPTS, Script
from redislock.server import RedisProcess

SCRIPT_DIR = Path(redislock.__file__).parent / "scripts"
LUA_FILES = sorted(SCRIPT_DIR.glob("*.lua"))
NAMES = sorted(SCRIPTS)


def header(script: Script) -> list[str]:
    """The leading ``--`` comment lines, without the ``--``."""
    lines = []
    for line in script.source.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return lines


def code_lines(script: Script) -> list[str]:
    """Lines of code with ``--`` comments removed."""
    return [line.split("--", 1)[0] for line in script.source.splitlines()]


# ------------------------------------------------------------------ inventory


def test_there_are_scripts() -> None:
    assert len(LUA_FILES) >= 6
    assert {"lock_acquire", "lock_release", "lock_extend", "lock_status"} <= set(SCRIPTS)


def test_every_lua_file_is_loaded_and_vice_versa() -> None:
    assert sorted(p.stem for p in LUA_FILES) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_script_object_matches_its_file(name: str) -> None:
    script = SCRIPTS[name]
    raw = (SCRIPT_DIR / f"{name}.lua").read_bytes()
    assert script.name == name
    assert script.source.encode("utf-8") == raw
    assert script.sha == hashlib.sha1(raw, usedforsecurity=False).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{40}", script.sha)


# ------------------------------------------------------------------ headers


@pytest.mark.parametrize("name", NAMES)
def test_header_documents_purpose_keys_args_and_reply(name: str) -> None:
    lines = header(SCRIPTS[name])
    assert lines, "no header"
    purpose = re.fullmatch(r"(\w+): (.+)", lines[0])
    assert purpose is not None, lines[0]
    assert purpose[1] == name
    assert len(purpose[2].split()) >= 5  # a sentence, not a placeholder
    text = "\n".join(lines)
    assert re.search(r"^KEYS\[1\] ", text, re.M)
    assert re.search(r"^ARGV\[1\] ", text, re.M) or re.search(r"^ARGV: none", text, re.M)
    assert re.search(r"^returns\b", text, re.M)


@pytest.mark.parametrize("name", NAMES)
def test_every_key_and_arg_used_is_documented(name: str) -> None:
    script = SCRIPTS[name]
    text = "\n".join(header(script))
    code = "\n".join(code_lines(script))
    for kind in ("KEYS", "ARGV"):
        used = {int(n) for n in re.findall(rf"\b{kind}\[(\d+)\]", code)}
        documented = {int(n) for n in re.findall(rf"^{kind}\[(\d+)", text, re.M)}
        assert used <= documented, f"{kind} used but not documented: {used - documented}"
        # numbered from 1 without gaps
        assert documented == set(range(1, len(documented) + 1))
    assert "unpack(ARGV" not in code or re.search(r"^ARGV\[\d+\.\.\]", text, re.M)


_DURATION_ARG = re.compile(r"ttl|timeout|wait|lease|interval|delay|expire|(^|_)ms$")
_ARGV_LINE = re.compile(r"ARGV\[[\d.]+\]\s+(\S+)\s+(.*)")


@pytest.mark.parametrize("name", NAMES)
def test_duration_args_say_milliseconds(name: str) -> None:
    """An ARGV that is a duration is named ``*_ms`` and described in milliseconds."""
    durations = []
    for line in header(SCRIPTS[name]):
        m = _ARGV_LINE.fullmatch(line)
        if m is None or not _DURATION_ARG.search(m[1]):
            continue
        durations.append(m[1])
        assert re.search(r"(^|_)ms$", m[1]), line
        assert "millisecond" in m[2], line
        assert not re.search(r"(?<!milli)seconds?\b", m[2]), line
    expected = {
        "lock_acquire": ["ttl_ms", "wait_ms"],
        "lock_extend": ["ms"],
        "lock_release": ["wake_ttl_ms"],
        "lock_force_release": ["wake_ttl_ms"],
        "fair": ["lease_ms", "waiter_ms"],
        "hold": ["ms", "marker_ms", "wake_ms"],
        "multi": ["ttl_ms", "wait_ms", "wake_ttl_ms"],
    }
    assert durations == expected.get(name, [])


# multi.lua's key arguments: KEYS[<index of name i>], or a local holding only such keys.
_MULTI_KEY = r"KEYS\[[^\]]+\]?\]|locks\[i\]|unpack\((locks|gone|markers)\)?|wake"

_CALL = re.compile(r"redis\.p?call\(\s*'(\w+)'\s*(?:,\s*([^,)]+))?")


@pytest.mark.parametrize("name", NAMES)
def test_scripts_touch_only_keys_passed_in_keys(name: str) -> None:
    """Every command's key argument is literally ``KEYS[n]``: no key is built in Lua (which
    would break Redis Cluster routing and could collide with another lock's keys)."""
    code = "\n".join(code_lines(SCRIPTS[name]))
    calls = _CALL.findall(code)
    assert calls, "no redis.call found"
    assert code.count("redis.call(") + code.count("redis.pcall(") == len(calls)
    for command, first in calls:
        if command.upper() == "TIME":  # no key
            continue
        if name == "fair" and first.strip() == "g":
            # The one documented exception: a waiter's grant list, named from the declared
            # prefix ARGV[7] (same hash tag, so the same slot) and the waiter's token.
            assert "local g = grant_key(" in code
            assert re.search(r"return ARGV\[7\] \.\. string\.sub\(redis\.sha1hex\(tok\)", code)
            continue
        if name == "multi":
            # The documented exception: one script over a chunk of names. Its keys are
            # KEYS entries picked by the name's index, or locals filled only from them.
            assert re.fullmatch(_MULTI_KEY, first.strip()), f"{command} {first}"
            continue
        if name == "redlock_fence":
            # Any number of fence keys, each read and written as KEYS[i] in one loop.
            assert first.strip() == "KEYS[i]"
            assert "for i = 1, #KEYS do" in code
            continue
        assert re.fullmatch(r"KEYS\[\d+\]", first.strip()), f"{command} {first}"
    if name == "multi":
        for index in re.findall(r"KEYS\[([^\]]*\]?)\]", code):
            assert re.fullmatch(r"[\d ]*[*+\- \w()\[\]#]*", index), index
            assert set(re.findall(r"[a-z_]+", index)) <= {"i", "stride", "ours", "j"}, index
        for local in ("locks", "gone", "markers", "wake"):
            for value in re.findall(rf"\b{local}(?:\[[^\]]*\])? = (.+)", code):
                assert re.fullmatch(r"KEYS\[[^\]]*\]?\]|locks\[i\]|\{\}.*", value), value
    elif name == "redlock_fence":
        assert set(re.findall(r"KEYS\[([^\]]*)\]", code)) == {"i"}  # the loop index only
    else:
        assert "KEYS[" not in re.sub(r"KEYS\[\d+\]", "", code)  # no computed indices
    assert "#KEYS" not in code or name == "redlock_fence"
    assert "redislock:" not in code  # no key prefix spelled out in Lua
    assert not {cmd.upper() for cmd, _ in calls} & {"KEYS", "SCAN", "SELECT", "RENAME"}


# ------------------------------------------------------------------ on the server


@pytest.fixture(scope="module")
def loader(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """A client for SCRIPT LOAD; it reads and writes no keys."""
    client = redis.Redis(**redis_server.client_kwargs())
    yield client
    client.close()


@pytest.mark.parametrize("name", NAMES)
def test_script_load_returns_the_local_sha(loader: redis.Redis, name: str) -> None:
    script = SCRIPTS[name]
    sha = norm(loader.script_load(script.source))
    assert sha == script.sha
    assert loader.script_exists(script.sha) == [True]


# ------------------------------------------------------------------ behaviour through EVAL

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
    """A hold.lua hash field "<mode>|<count>|<expires_ms>|<fence>|<meta>" whose expires_ms
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
    # keys outside KEYS the script may write: only fair.lua's grant lists (documented)
    extra: tuple[str, ...] = ()


def held(token: str = TOKEN, px: int | None = 5000) -> tuple[str | int, ...]:
    value = f"{token}|{META}"
    return ("SET", K.lock, value) if px is None else ("SET", K.lock, value, "PX", px)


ACQ = (K.lock, K.fence, K.wait)
REL = (K.lock, K.wait, K.wake)
GONE = 0  # EXISTS reply

# hold.lua and fair.lua: their own key layouts, ARGV as the cores build them.
H = HoldKeys.for_name("job")
HOLD = tuple(H)
F = FairKeys.for_name("job")
FAIR = (F.lock, F.fence, F.queue, F.leases, F.info)
THIRD = "c" * 32
FOURTH = "d" * 32
WMETA = "waiter-host|456|1700000000001"
SLACK = 1000  # ms the server clock may advance between the case's TIME and its EVAL
WAKE_MS = 2000
INSPECT = (K.lock, K.fence, K.wait, H.rwait, H.permits, F.queue, F.leases)


def hold_args(
    op: str,
    token: str = TOKEN,
    mode: str = "w",
    ms: int = 0,
    *,
    meta: str = "",
    marker_ms: int = 0,
    reenter: bool = False,
    companion: str = "",
    permits: int = 0,
    extend_mode: str = "",
) -> tuple[Arg, ...]:
    """hold.lua's ARGV, laid out as ``HoldCore._op`` lays it out."""
    return (
        op,
        token,
        mode,
        ms,
        meta,
        marker_ms,
        "1" if reenter else "0",
        companion,
        permits,
        WAKE_MS,
        extend_mode,
    )


def acq(token: str = TOKEN, mode: str = "w", ms: int = 10000, **kw: Any) -> tuple[Arg, ...]:
    """hold.lua acquire of a new hold (``reenter=True`` for a re-entry)."""
    return hold_args("acquire", token, mode, ms, meta=META, **kw)


def hold(
    token: str = TOKEN, mode: str = "w", lease_ms: int = 5000, *, count: int = 1, fence: int = 1
) -> tuple[Arg, ...]:
    """Setup: a hold whose lease ends ``lease_ms`` after the case's server time (< 0: ended)."""
    return ("HSET", H.lock, token, At(lease_ms, f"{mode}|{count}|{{}}|{fence}|{META}"))


def ttl(key: str, ms: int) -> tuple[Arg, ...]:
    return ("PEXPIRE", key, ms)


def marker(key: str, ms: int = 3000) -> tuple[Arg, ...]:
    return ("SET", key, "1", "PX", ms)


WAITER = "e" * 32


def waiting(ms: int = 3000, token: str = WAITER) -> tuple[Arg, ...]:
    """Setup: ``token`` registered as a waiting writer / permit waiter for ``ms`` more."""
    return ("ZADD", H.wait, At(ms), token)


def woken(key: str) -> list[tuple[tuple[Arg, ...], Any]]:
    """Checks: ``key`` holds exactly one wake-up, expiring after wake_ms."""
    return [(("LRANGE", key, 0, -1), ["1"]), (("PTTL", key), Between(WAKE_MS - SLACK, WAKE_MS))]


def absent(*keys: str) -> list[tuple[tuple[Arg, ...], Any]]:
    return [(("EXISTS", key), GONE) for key in keys]


def fair_args(
    op: str,
    token: str = TOKEN,
    lease_ms: int | str = "",
    meta: str = "",
    waiter_ms: int | str = "",
    queue_max: int | str = "",
) -> tuple[Arg, ...]:
    """fair.lua's ARGV, laid out as ``FairCore._fair`` lays it out."""
    return (op, token, lease_ms, meta, waiter_ms, queue_max, F.grant_prefix)


def facq(
    token: str = TOKEN, waiter_ms: int = 1000, queue_max: int = 10, lease_ms: int = 10000
) -> tuple[Arg, ...]:
    return fair_args("acquire", token, lease_ms, META, waiter_ms, queue_max)


def fheld(token: str = TOKEN, px: int = 5000, meta: str = META) -> tuple[Arg, ...]:
    return ("SET", F.lock, f"{token}|{meta}", "PX", px)


def waiter(token: str, lease_ms: int = 8000, waiter_ms: int = 1000) -> list[tuple[Arg, ...]]:
    """Setup: a queued waiter whose waiter lease ends ``waiter_ms`` from now (< 0: dead)."""
    return [
        ("RPUSH", F.queue, token),
        ("ZADD", F.leases, At(waiter_ms), token),
        ("HSET", F.info, token, f"{lease_ms}|{WMETA}"),
    ]


def not_queued(token: str) -> list[tuple[tuple[Arg, ...], Any]]:
    return [(("ZSCORE", F.leases, token), None), (("HEXISTS", F.info, token), 0)]


def queue_ttl(lo: int, hi: int) -> list[tuple[tuple[Arg, ...], Any]]:
    """Checks: the three queue keys live as long as the latest waiter lease."""
    return [(("PTTL", key), Between(lo, hi)) for key in (F.queue, F.leases, F.info)]


def granted(token: str, fence: int, lease_ms: int) -> list[tuple[tuple[Arg, ...], Any]]:
    """Checks: ``token`` was handed the lock with ``fence`` (its waiter meta, its lease)."""
    return [
        (("GET", F.lock), f"{token}|{WMETA}"),
        (("PTTL", F.lock), Between(lease_ms - SLACK, lease_ms)),
        (("GET", F.fence), str(fence)),
        (("LRANGE", F.grant(token), 0, -1), [str(fence)]),
        (("PTTL", F.grant(token)), Between(lease_ms - SLACK, lease_ms)),
        *not_queued(token),
    ]


# multi.lua: two names of one slot ("job}2" has the hash tag "job", as co-located names do).
M1, M2 = LockKeys.for_name("job"), LockKeys.for_name("job}2")
M3 = LockKeys.for_name("job}3")
MACQ = (M1.lock, M1.fence, M1.wait, M2.lock, M2.fence, M2.wait)
MREL = (M1.lock, M1.wait, M1.wake, M2.lock, M2.wait, M2.wake)
MLOCKS = (M1.lock, M2.lock)


def multi_args(
    op: str,
    n: int = 2,
    token: str = TOKEN,
    *,
    ms: int | str = "",
    meta: str = "",
    marker_ms: int | str = "",
    wake_ms: int | str = "",
    mode: str = "",
) -> tuple[Arg, ...]:
    """multi.lua's ARGV, laid out as ``MultiCore._op`` lays it out."""
    return (op, n, token, ms, meta, marker_ms, wake_ms, mode)


def macq(marker_ms: int = 0, token: str = TOKEN) -> tuple[Arg, ...]:
    """multi.lua acquire of both names with a 10 s lease."""
    return multi_args("acquire", token=token, ms=10000, meta=META, marker_ms=marker_ms)


def mheld(keys: LockKeys, token: str = TOKEN, px: int = 5000) -> tuple[Arg, ...]:
    """Setup: ``token`` holds ``keys`` as a Lock would (for ``px`` ms more)."""
    return ("SET", keys.lock, f"{token}|{META}", "PX", px)


CASES = [
    # ---------------------------------------------------------------- lock_acquire
    Case(
        "acquire-free",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 0),
        ["ok", 1],
        after=[
            (("GET", K.lock), f"{TOKEN}|{META}"),
            (("PTTL", K.lock), Between(9000, 10000)),
            (("GET", K.fence), "1"),
            (("PTTL", K.fence), -1),  # the fence counter never expires
            (("EXISTS", K.wait), GONE),
        ],
    ),
    Case(
        "acquire-free-continues-the-fence",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 1500),
        ["ok", 42],
        setup=[("SET", K.fence, 41)],
        after=[
            (("GET", K.lock), f"{TOKEN}|{META}"),
            (("EXISTS", K.wait), GONE),  # acquiring never leaves a waiters marker
        ],
    ),
    Case(
        "acquire-busy-single-try",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 0),
        ["busy", Between(4000, 5000)],
        setup=[held(OTHER), ("SET", K.fence, 7)],
        after=[
            (("GET", K.lock), f"{OTHER}|{META}"),
            (("GET", K.fence), "7"),  # no fencing token burnt on failure
            (("EXISTS", K.wait), GONE),
        ],
    ),
    Case(
        "acquire-busy-waiting-sets-marker",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 1500),
        ["busy", Between(4000, 5000)],
        setup=[held(OTHER), ("SET", K.fence, 7)],
        after=[
            (("GET", K.wait), "1"),
            (("PTTL", K.wait), Between(1000, 1500)),
            (("GET", K.fence), "7"),
        ],
    ),
    Case(
        "acquire-key-without-ttl",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 0),
        ["busy", -1],
        setup=[("SET", K.lock, "not ours")],
        after=[(("GET", K.lock), "not ours"), (("EXISTS", K.fence), GONE)],
    ),
    # ---------------------------------------------------------------- lock_release
    Case(
        "release-ok-no-waiters",
        "lock_release",
        REL,
        (TOKEN, 2000),
        "ok",
        setup=[held()],
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.wake), GONE)],
    ),
    Case(
        "release-ok-wakes-a-waiter",
        "lock_release",
        REL,
        (TOKEN, 2000),
        "ok",
        setup=[held(), ("SET", K.wait, "1", "PX", 5000)],
        after=[
            (("EXISTS", K.lock), GONE),
            (("LRANGE", K.wake, 0, -1), ["1"]),
            (("PTTL", K.wake), Between(1500, 2000)),
        ],
    ),
    Case(
        "release-ok-replaces-stale-wakeups",
        "lock_release",
        REL,
        (TOKEN, 2000),
        "ok",
        setup=[held(), ("SET", K.wait, "1", "PX", 5000), ("RPUSH", K.wake, "x", "y", "z")],
        after=[(("LRANGE", K.wake, 0, -1), ["1"])],
    ),
    Case(
        "release-gone",
        "lock_release",
        REL,
        (TOKEN, 2000),
        "gone",
        setup=[("SET", K.wait, "1", "PX", 5000)],
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.wake), GONE)],
    ),
    Case(
        "release-taken",
        "lock_release",
        REL,
        (TOKEN, 2000),
        "taken",
        setup=[held(OTHER), ("SET", K.wait, "1", "PX", 5000)],
        after=[
            (("GET", K.lock), f"{OTHER}|{META}"),
            (("PTTL", K.lock), Between(4000, 5000)),
            (("EXISTS", K.wake), GONE),
        ],
    ),
    Case(
        "release-token-prefix-is-not-ownership",
        "lock_release",
        REL,
        (TOKEN, 2000),
        "taken",
        setup=[("SET", K.lock, f"{TOKEN}0|{META}", "PX", 5000)],
        after=[(("GET", K.lock), f"{TOKEN}0|{META}")],
    ),
    # ---------------------------------------------------------------- lock_extend
    Case(
        "extend-add",
        "lock_extend",
        (K.lock,),
        (TOKEN, 3000, "add"),
        ["ok", Between(7000, 8000)],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(7000, 8000)), (("GET", K.lock), f"{TOKEN}|{META}")],
    ),
    Case(
        "extend-set-shortens",
        "lock_extend",
        (K.lock,),
        (TOKEN, 2000, "set"),
        ["ok", 2000],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(1500, 2000))],
    ),
    Case(
        "extend-set-lengthens",
        "lock_extend",
        (K.lock,),
        (TOKEN, 60000, "set"),
        ["ok", 60000],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(59000, 60000))],
    ),
    Case(
        "extend-max-never-shortens",
        "lock_extend",
        (K.lock,),
        (TOKEN, 2000, "max"),
        ["ok", Between(4000, 5000)],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(4000, 5000))],
    ),
    Case(
        "extend-max-lengthens",
        "lock_extend",
        (K.lock,),
        (TOKEN, 9000, "max"),
        ["ok", 9000],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(8500, 9000))],
    ),
    Case(
        "extend-add-to-key-without-ttl",
        "lock_extend",
        (K.lock,),
        (TOKEN, 3000, "add"),
        ["ok", 3000],
        setup=[held(px=None)],
        after=[(("PTTL", K.lock), Between(2500, 3000))],
    ),
    *[
        Case(
            f"extend-{mode}-gone-never-creates",
            "lock_extend",
            (K.lock,),
            (TOKEN, 3000, mode),
            ["gone", 0],
            after=[(("EXISTS", K.lock), GONE)],
        )
        for mode in ("add", "set", "max")
    ],
    *[
        Case(
            f"extend-{mode}-taken",
            "lock_extend",
            (K.lock,),
            (TOKEN, 30000, mode),
            ["taken", 0],
            setup=[held(OTHER)],
            after=[
                (("PTTL", K.lock), Between(4000, 5000)),
                (("GET", K.lock), f"{OTHER}|{META}"),
            ],
        )
        for mode in ("add", "set", "max")
    ],
    # ---------------------------------------------------------------- lock_status
    Case(
        "status-ok",
        "lock_status",
        (K.lock, K.fence),
        (TOKEN,),
        ["ok", Between(4000, 5000), 17],
        setup=[held(), ("SET", K.fence, 17)],
        after=[(("GET", K.lock), f"{TOKEN}|{META}")],
    ),
    Case("status-gone", "lock_status", (K.lock, K.fence), (TOKEN,), ["gone", 0, 0]),
    Case(
        "status-taken",
        "lock_status",
        (K.lock, K.fence),
        (TOKEN,),
        ["taken", 0, 0],
        setup=[held(OTHER)],
    ),
    Case(
        "status-token-prefix-is-not-ownership",
        "lock_status",
        (K.lock, K.fence),
        (TOKEN[:-1],),
        ["taken", 0, 0],
        setup=[held()],
    ),
    # ---------------------------------------------------------------- lock_force_release
    Case(
        "force-release-with-waiters",
        "lock_force_release",
        REL,
        (2000,),
        1,
        setup=[held(OTHER), ("SET", K.wait, "1", "PX", 5000), ("SET", K.fence, 1)],
        after=[
            (("EXISTS", K.lock), GONE),
            (("LRANGE", K.wake, 0, -1), ["1"]),
            (("PTTL", K.wake), Between(1500, 2000)),
            (("GET", K.fence), "1"),  # the fence counter survives
        ],
    ),
    Case(
        "force-release-no-waiters",
        "lock_force_release",
        REL,
        (2000,),
        1,
        setup=[held(OTHER)],
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.wake), GONE)],
    ),
    Case(
        "force-release-nothing-held",
        "lock_force_release",
        REL,
        (2000,),
        0,
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.wake), GONE)],
    ),
    # ---------------------------------------------------------------- fenced_write
    Case(
        "fenced-write-first",
        "fenced_write",
        (TARGET,),
        (5, "data", "x", "owner", "w1"),
        [1, 5],
        after=[(("HGETALL", TARGET), {"_fence": "5", "data": "x", "owner": "w1"})],
    ),
    Case(
        "fenced-write-higher",
        "fenced_write",
        (TARGET,),
        (6, "data", "new"),
        [1, 6],
        setup=[("HSET", TARGET, "_fence", 5, "data", "old")],
        after=[(("HGETALL", TARGET), {"_fence": "6", "data": "new"})],
    ),
    Case(
        "fenced-write-equal-rejected",
        "fenced_write",
        (TARGET,),
        (5, "data", "new"),
        [0, 5],
        setup=[("HSET", TARGET, "_fence", 5, "data", "old")],
        after=[(("HGETALL", TARGET), {"_fence": "5", "data": "old"})],
    ),
    Case(
        "fenced-write-lower-rejected",
        "fenced_write",
        (TARGET,),
        (4, "data", "new"),
        [0, 5],
        setup=[("HSET", TARGET, "_fence", 5, "data", "old")],
        after=[(("HGETALL", TARGET), {"_fence": "5", "data": "old"})],
    ),
    Case(
        "fenced-write-fence-only",
        "fenced_write",
        (TARGET,),
        (9,),
        [1, 9],
        after=[(("HGETALL", TARGET), {"_fence": "9"})],
    ),
    # ---------------------------------------------------------------- hold: acquire
    *[
        Case(
            f"hold-acquire-free-{mode}",
            "hold",
            HOLD,
            acq(mode=mode, permits=permits),
            ["ok", 1, 1, 10000],
            after=[
                (("HGET", H.lock, TOKEN), HoldValue(mode, 1, 1, 10000, 10000 + SLACK)),
                (("HLEN", H.lock), 1),
                (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
                (("GET", H.fence), "1"),
                (("PTTL", H.fence), -1),  # the fence counter never expires
                *absent(H.wait, H.wake, H.rwait, H.rwake),
            ],
        )
        for mode, permits in (("w", 0), ("r", 0), ("p", 3))
    ],
    Case(
        "hold-acquire-continues-the-fence",
        "hold",
        HOLD,
        acq(mode="r"),
        ["ok", 42, 1, 10000],
        setup=[("SET", H.fence, 41)],
        after=[(("HGET", H.lock, TOKEN), HoldValue("r", 1, 42, 10000, 10000 + SLACK))],
    ),
    Case(
        "hold-reenter",
        "hold",
        HOLD,
        acq(ms=10000, reenter=True),
        ["ok", 7, 2, 10000],
        setup=[hold(lease_ms=5000, fence=7), ttl(H.lock, 5000), ("SET", H.fence, 7)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 2, 7, 10000, 10000 + SLACK)),
            (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
            (("GET", H.fence), "7"),  # no new fencing token for a re-entry
        ],
    ),
    Case(
        "hold-reenter-keeps-a-longer-lease",
        "hold",
        HOLD,
        acq(ms=10000, reenter=True),
        ["ok", 7, 3, Between(20000 - SLACK, 20000)],
        setup=[hold(lease_ms=20000, count=2, fence=7), ttl(H.lock, 20000), ("SET", H.fence, 7)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 3, 7, 20000, 20000)),
            (("PTTL", H.lock), Between(20000 - SLACK, 20000)),
        ],
    ),
    Case(
        "hold-reenter-gone",
        "hold",
        HOLD,
        acq(reenter=True),
        ["gone", 0],
        setup=[hold(OTHER, "r"), ttl(H.lock, 5000), ("SET", H.fence, 3)],
        after=[
            (("HEXISTS", H.lock, TOKEN), 0),  # never recreated
            (("HGET", H.lock, OTHER), HoldValue("r", 1, 1, 5000, 5000)),
            (("GET", H.fence), "3"),
        ],
    ),
    Case(
        "hold-reenter-expired-is-gone",
        "hold",
        HOLD,
        acq(reenter=True),
        ["gone", 0],
        setup=[hold(lease_ms=-1000)],
        after=absent(H.lock, H.fence),
    ),
    *[
        Case(
            f"hold-repeat-of-first-acquisition-count-{count}",
            "hold",
            HOLD,
            acq(ms=10000),  # reenter "0", but TOKEN already holds: a retry after a lost reply
            ["ok", 3, count, Between(5000 - SLACK, 5000)],
            setup=[
                hold(lease_ms=5000, count=count, fence=3),
                ttl(H.lock, 5000),
                ("SET", H.fence, 3),
            ],
            after=[
                (("HGET", H.lock, TOKEN), HoldValue("w", count, 3, 5000, 5000)),  # unchanged
                (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
                (("GET", H.fence), "3"),
            ],
        )
        for count in (1, 2)
    ],
    Case(
        "hold-r-shares-with-readers",
        "hold",
        HOLD,
        acq(mode="r"),
        ["ok", 2, 1, 10000],
        setup=[hold(OTHER, "r", 20000), ttl(H.lock, 20000), ("SET", H.fence, 1)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("r", 1, 2, 10000, 10000 + SLACK)),
            (("HGET", H.lock, OTHER), HoldValue("r", 1, 1, 20000, 20000)),
            (("PTTL", H.lock), Between(20000 - SLACK, 20000)),  # the latest lease
        ],
    ),
    *[
        Case(
            f"hold-w-blocked-by-{mode}-single-try",
            "hold",
            HOLD,
            acq(mode="w"),
            ["busy", Between(3000 - SLACK, 3000)],
            setup=[
                hold(OTHER, mode, 3000),
                hold(THIRD, mode, 8000),
                ttl(H.lock, 8000),
                ("SET", H.fence, 2),
            ],
            after=[
                (("HEXISTS", H.lock, TOKEN), 0),
                (("GET", H.fence), "2"),  # no fencing token burnt on failure
                (("PTTL", H.lock), Between(8000 - SLACK, 8000)),
                *absent(H.wait, H.rwait),  # a single try leaves no marker
            ],
        )
        for mode in ("r", "p")
    ],
    Case(
        "hold-w-blocked-by-writer-sets-wait-marker",
        "hold",
        HOLD,
        acq(mode="w", marker_ms=1500),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000), ("SET", H.fence, 1)],
        after=[
            (("ZSCORE", H.wait, TOKEN), Clock(1500 - SLACK, 1500 + SLACK)),
            (("PTTL", H.wait), Between(1500 - SLACK, 1500)),
            (("GET", H.fence), "1"),
            (("HEXISTS", H.lock, TOKEN), 0),
            *absent(H.rwait, H.wake, H.rwake),
        ],
    ),
    Case(
        "hold-r-blocked-by-writer-sets-rwait-marker",
        "hold",
        HOLD,
        acq(mode="r", marker_ms=1500),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000)],
        after=[
            (("GET", H.rwait), "1"),
            (("PTTL", H.rwait), Between(1500 - SLACK, 1500)),
            (("HEXISTS", H.lock, TOKEN), 0),
            *absent(H.wait, H.fence),
        ],
    ),
    Case(
        "hold-r-blocked-by-writer-single-try",
        "hold",
        HOLD,
        acq(mode="r"),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000)],
        after=absent(H.wait, H.rwait, H.fence),
    ),
    Case(
        "hold-r-blocked-by-waiting-writer",
        "hold",
        HOLD,
        acq(mode="r"),
        ["busy", Between(3000 - SLACK, 3000)],  # no hold: the marker's remaining TTL
        setup=[waiting(3000)],
        after=[(("ZSCORE", H.wait, WAITER), Clock(3000 - SLACK, 3000)), *absent(H.lock, H.fence)],
    ),
    Case(
        "hold-w-acquired-stops-counting-as-waiting",
        "hold",
        HOLD,
        acq(mode="w", marker_ms=1500),
        ["ok", 1, 1, Between(10000 - SLACK, 10000)],
        setup=[waiting(3000, TOKEN), waiting(3000)],
        # the writer that got in no longer blocks readers; the other waiter still does
        after=[(("ZSCORE", H.wait, TOKEN), None), (("ZCARD", H.wait), 1)],
    ),
    Case(
        "hold-r-not-blocked-by-an-expired-waiting-writer",
        "hold",
        HOLD,
        acq(mode="r"),
        ["ok", 1, 1, Between(10000 - SLACK, 10000)],
        setup=[waiting(-5)],
        after=[(("EXISTS", H.wait), 0)],
    ),
    Case(
        "hold-leave",
        "hold",
        HOLD,
        hold_args("leave"),
        1,
        setup=[waiting(3000, TOKEN), waiting(3000)],
        after=[(("ZSCORE", H.wait, TOKEN), None), (("ZCARD", H.wait), 1)],
    ),
    Case(
        "hold-r-blocked-by-waiting-writer-beside-readers",
        "hold",
        HOLD,
        acq(mode="r", marker_ms=1500),
        ["busy", Between(3000 - SLACK, 3000)],
        setup=[hold(OTHER, "r", 3000), ttl(H.lock, 3000), waiting(3000)],
        after=[
            (("HEXISTS", H.lock, TOKEN), 0),
            (("GET", H.rwait), "1"),
            (("PTTL", H.rwait), Between(1500 - SLACK, 1500)),
        ],
    ),
    Case(
        "hold-r-beside-own-write-despite-waiting-writer",  # downgrade
        "hold",
        HOLD,
        acq(mode="r", companion=FOURTH),
        ["ok", 5, 1, 10000],
        setup=[
            hold(FOURTH, "w", 5000, fence=4),
            ttl(H.lock, 5000),
            ("SET", H.fence, 4),
            waiting(),
            marker(H.rwait),
        ],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("r", 1, 5, 10000, 10000 + SLACK)),
            (("HGET", H.lock, FOURTH), HoldValue("w", 1, 4, 5000, 5000)),
            (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
            *absent(H.rwake),  # a writer waits: the wake-up is not passed on to readers
        ],
    ),
    *[
        Case(
            f"hold-r-companion-{what}-is-no-write-hold",
            "hold",
            HOLD,
            acq(mode="r", companion=FOURTH),
            ["busy", Between(3000 - SLACK, 3000)],
            setup=[*setup, waiting(3000)],
            after=[(("HEXISTS", H.lock, TOKEN), 0)],
        )
        for what, setup in (
            ("read", [hold(FOURTH, "r", 3000), ttl(H.lock, 3000)]),
            ("expired", [hold(FOURTH, "w", -1000)]),
            ("missing", []),
        )
    ],
    Case(
        "hold-r-passes-the-wake-up-on",
        "hold",
        HOLD,
        acq(mode="r"),
        ["ok", 1, 1, 10000],
        setup=[hold(OTHER, "r"), ttl(H.lock, 5000), marker(H.rwait), ("RPUSH", H.rwake, "x")],
        after=[*woken(H.rwake), *absent(H.wake)],
    ),
    Case(
        "hold-p-up-to-permits",
        "hold",
        HOLD,
        acq(mode="p", permits=3),
        ["ok", 3, 1, 10000],
        setup=[
            hold(OTHER, "p", 5000),
            hold(THIRD, "p", 5000, fence=2),
            ttl(H.lock, 5000),
            ("SET", H.fence, 2),
            waiting(),
        ],
        after=[
            (("HLEN", H.lock), 3),
            (("HGET", H.lock, TOKEN), HoldValue("p", 1, 3, 10000, 10000 + SLACK)),
            *absent(H.wake),  # the last permit: nothing to pass on
        ],
    ),
    Case(
        "hold-p-passes-the-wake-up-on",
        "hold",
        HOLD,
        acq(mode="p", permits=3),
        ["ok", 2, 1, 10000],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.fence, 1), waiting()],
        after=[*woken(H.wake), *absent(H.rwake)],
    ),
    Case(
        "hold-p-blocked-at-permits",
        "hold",
        HOLD,
        acq(mode="p", permits=2, marker_ms=1500),
        ["busy", Between(3000 - SLACK, 3000)],
        setup=[
            hold(OTHER, "p", 6000),
            hold(THIRD, "p", 3000),
            ttl(H.lock, 6000),
            ("SET", H.fence, 2),
        ],
        after=[
            (("HEXISTS", H.lock, TOKEN), 0),
            (("GET", H.fence), "2"),
            (
                ("ZSCORE", H.wait, TOKEN),
                Clock(1500 - SLACK, 1500 + SLACK),
            ),  # a permit waiter uses the w/p marker
            (("PTTL", H.wait), Between(1500 - SLACK, 1500)),
            *absent(H.rwait),
        ],
    ),
    Case(
        "hold-p-blocked-by-lower-permits-key",
        "hold",
        HOLD,
        acq(mode="p", permits=3),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.permits, 1)],
        after=[(("HLEN", H.lock), 1), (("GET", H.permits), "1"), *absent(H.fence, H.wait)],
    ),
    Case(
        "hold-p-higher-permits-key-admits",
        "hold",
        HOLD,
        acq(mode="p", permits=1),
        ["ok", 1, 1, 10000],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.permits, 2)],
        after=[(("HLEN", H.lock), 2), (("PTTL", H.permits), -1)],
    ),
    Case(
        "hold-p-blocked-by-writer",
        "hold",
        HOLD,
        acq(mode="p", permits=3),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000)],
        after=[(("HLEN", H.lock), 1)],
    ),
    *[
        Case(
            f"hold-{what}-hold-is-pruned-and-does-not-block",
            "hold",
            HOLD,
            acq(mode="w"),
            ["ok", 1, 1, 10000],
            setup=[expired],
            after=[
                (("HEXISTS", H.lock, OTHER), 0),
                (("HLEN", H.lock), 1),
                (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
            ],
        )
        for what, expired in (
            ("expired", hold(OTHER, "w", -1000)),
            ("long-expired", ("HSET", H.lock, OTHER, f"w|1|1|1|{META}")),
            ("just-expired", hold(OTHER, "r", 0)),  # expires_ms <= now: over
        )
    ],
    # ---------------------------------------------------------------- hold: release
    Case(
        "hold-release-decrements",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 1],
        setup=[hold(count=2, fence=3), ttl(H.lock, 5000), waiting()],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 3, 5000, 5000)),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
            *absent(H.wake, H.rwake),  # still held: nobody to wake
        ],
    ),
    Case(
        "hold-release-last-deletes-the-key",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[hold(fence=3), ttl(H.lock, 5000), ("SET", H.fence, 3)],
        after=[(("GET", H.fence), "3"), *absent(H.lock, H.wake, H.rwake)],
    ),
    Case(
        "hold-release-last-wakes-a-writer-first",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[
            hold(mode="r"),
            ttl(H.lock, 5000),
            waiting(),
            marker(H.rwait),
            ("RPUSH", H.wake, "x", "y"),
        ],
        after=[*woken(H.wake), *absent(H.lock, H.rwake)],
    ),
    Case(
        "hold-release-keeps-other-holds-and-shrinks-the-key-ttl",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[
            hold(TOKEN, "r", 9000),
            hold(OTHER, "r", 5000),
            ttl(H.lock, 9000),
            waiting(),
            marker(H.rwait),
        ],
        after=[
            (("HGET", H.lock, OTHER), HoldValue("r", 1, 1, 5000, 5000)),
            (("HEXISTS", H.lock, TOKEN), 0),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),  # the latest remaining lease
            *absent(H.wake, H.rwake),  # a reader still holds; a writer waits: no reader wake
        ],
    ),
    Case(
        "hold-release-write-beside-own-read-wakes-no-writer",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[hold(TOKEN, "w"), hold(FOURTH, "r"), ttl(H.lock, 5000), waiting()],
        after=[(("HLEN", H.lock), 1), *absent(H.wake, H.rwake)],
    ),
    Case(
        "hold-release-wakes-readers",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[hold(mode="w"), ttl(H.lock, 5000), marker(H.rwait)],
        after=[*woken(H.rwake), *absent(H.lock, H.wake)],
    ),
    Case(
        "hold-release-reader-wakes-readers-beside-readers",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[hold(mode="r"), hold(OTHER, "r"), ttl(H.lock, 5000), marker(H.rwait)],
        after=[*woken(H.rwake), *absent(H.wake)],
    ),
    Case(
        "hold-release-permit-wakes-below-permits",
        "hold",
        HOLD,
        hold_args("release", mode="p", permits=2),
        ["ok", 0],
        setup=[hold(mode="p"), hold(OTHER, "p"), ttl(H.lock, 5000), waiting()],
        after=[*woken(H.wake), (("HLEN", H.lock), 1)],
    ),
    Case(
        "hold-release-permit-no-wake-while-at-permits-key",
        "hold",
        HOLD,
        hold_args("release", mode="p", permits=5),
        ["ok", 0],
        setup=[
            hold(mode="p"),
            hold(OTHER, "p"),
            hold(THIRD, "p"),
            ttl(H.lock, 5000),
            ("SET", H.permits, 1),
            waiting(),
        ],
        after=[(("HLEN", H.lock), 2), *absent(H.wake)],
    ),
    Case(
        "hold-release-unknown-token",
        "hold",
        HOLD,
        hold_args("release"),
        ["gone", 0],
        setup=[
            hold(OTHER, "w", 5000, count=2, fence=6),
            ttl(H.lock, 5000),
            ("SET", H.fence, 6),
            waiting(),
            marker(H.rwait),
        ],
        after=[
            (("HGET", H.lock, OTHER), HoldValue("w", 2, 6, 5000, 5000)),
            (("HLEN", H.lock), 1),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
            (("GET", H.fence), "6"),
            (("ZSCORE", H.wait, WAITER), Clock(3000 - SLACK, 3000)),
            *absent(H.wake, H.rwake),
        ],
    ),
    Case(
        "hold-release-expired-own-hold-is-gone",
        "hold",
        HOLD,
        hold_args("release"),
        ["gone", 0],
        setup=[hold(lease_ms=-1000)],
        after=absent(H.lock, H.wake, H.rwake),
    ),
    # ---------------------------------------------------------------- hold: extend
    Case(
        "hold-extend-add",
        "hold",
        HOLD,
        hold_args("extend", ms=3000, extend_mode="add"),
        ["ok", Between(8000 - SLACK, 8000)],
        setup=[hold(mode="r", count=2, fence=4), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("r", 2, 4, 8000, 8000)),
            (("PTTL", H.lock), Between(8000 - SLACK, 8000)),
        ],
    ),
    Case(
        "hold-extend-set-shortens",
        "hold",
        HOLD,
        hold_args("extend", ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(lease_ms=5000), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 2000, 2000 + SLACK)),
            (("PTTL", H.lock), Between(2000 - SLACK, 2000)),
        ],
    ),
    Case(
        "hold-extend-set-shortens-key-to-latest-other-lease",
        "hold",
        HOLD,
        hold_args("extend", ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(mode="p", lease_ms=9000), hold(OTHER, "p", 5000), ttl(H.lock, 9000)],
        after=[(("PTTL", H.lock), Between(5000 - SLACK, 5000))],
    ),
    Case(
        "hold-extend-set-keeps-key-for-longer-other-lease",
        "hold",
        HOLD,
        hold_args("extend", ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(mode="p", lease_ms=5000), hold(OTHER, "p", 8000), ttl(H.lock, 8000)],
        after=[(("PTTL", H.lock), Between(8000 - SLACK, 8000))],
    ),
    Case(
        "hold-extend-set-lengthens",
        "hold",
        HOLD,
        hold_args("extend", ms=60000, extend_mode="set"),
        ["ok", 60000],
        setup=[hold(), ttl(H.lock, 5000)],
        after=[(("PTTL", H.lock), Between(60000 - SLACK, 60000))],
    ),
    Case(
        "hold-extend-max-never-shortens",
        "hold",
        HOLD,
        hold_args("extend", ms=2000, extend_mode="max"),
        ["ok", Between(5000 - SLACK, 5000)],
        setup=[hold(), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 5000, 5000)),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
        ],
    ),
    Case(
        "hold-extend-max-lengthens",
        "hold",
        HOLD,
        hold_args("extend", ms=9000, extend_mode="max"),
        ["ok", 9000],
        setup=[hold(), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 9000, 9000 + SLACK)),
            (("PTTL", H.lock), Between(9000 - SLACK, 9000)),
        ],
    ),
    *[
        Case(
            f"hold-extend-{mode}-gone",
            "hold",
            HOLD,
            hold_args("extend", ms=30000, extend_mode=mode),
            ["gone", 0],
            setup=[hold(OTHER, "r"), ttl(H.lock, 5000), hold(lease_ms=-1000)],
            after=[
                (("HEXISTS", H.lock, TOKEN), 0),  # the expired hold is not revived
                (("HGET", H.lock, OTHER), HoldValue("r", 1, 1, 5000, 5000)),
                (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
            ],
        )
        for mode in ("add", "set", "max")
    ],
    # ---------------------------------------------------------------- hold: status, count, force
    Case(
        "hold-status-ok",
        "hold",
        HOLD,
        hold_args("status"),
        ["ok", Between(5000 - SLACK, 5000), 9, 2, "r"],
        setup=[hold(mode="r", count=2, fence=9), ttl(H.lock, 5000), ("SET", H.fence, 12)],
        after=[(("HGET", H.lock, TOKEN), HoldValue("r", 2, 9, 5000, 5000))],
    ),
    Case(
        "hold-status-gone",
        "hold",
        HOLD,
        hold_args("status"),
        ["gone", 0, 0, 0, ""],
        setup=[hold(OTHER), ttl(H.lock, 5000), hold(lease_ms=-1000)],
        after=[(("HEXISTS", H.lock, TOKEN), 0)],
    ),
    Case(
        "hold-count-read-write",
        "hold",
        HOLD,
        hold_args("count", ""),
        [1, 2, 0, 0],
        setup=[
            hold(TOKEN, "w"),
            hold(OTHER, "r"),
            hold(THIRD, "r"),
            hold(FOURTH, "r", -1000),  # expired: not counted
            ttl(H.lock, 5000),
        ],
    ),
    Case(
        "hold-count-permits",
        "hold",
        HOLD,
        hold_args("count", "", permits=3),
        [0, 0, 2, 3],
        setup=[hold(TOKEN, "p"), hold(OTHER, "p"), hold(THIRD, "p", -1000), ttl(H.lock, 5000)],
    ),
    Case(
        "hold-count-permits-key",
        "hold",
        HOLD,
        hold_args("count", "", permits=3),
        [0, 0, 1, 5],
        setup=[hold(TOKEN, "p"), ttl(H.lock, 5000), ("SET", H.permits, 5)],
    ),
    Case("hold-count-empty", "hold", HOLD, hold_args("count", ""), [0, 0, 0, 0]),
    Case(
        "hold-force",
        "hold",
        HOLD,
        hold_args("force", ""),
        2,
        setup=[
            hold(TOKEN, "r"),
            hold(OTHER, "r"),
            hold(THIRD, "w", -1000),  # already over: not counted
            ttl(H.lock, 5000),
            ("SET", H.fence, 8),
            waiting(),
            marker(H.rwait),
        ],
        after=[*woken(H.wake), *woken(H.rwake), (("GET", H.fence), "8"), *absent(H.lock)],
    ),
    Case(
        "hold-force-nothing-held",
        "hold",
        HOLD,
        hold_args("force", ""),
        0,
        after=absent(H.lock, H.wake, H.rwake),
    ),
    # ---------------------------------------------------------------- hold: errors
    *[
        Case(
            f"hold-{op}-malformed-field",
            "hold",
            HOLD,
            hold_args(op, mode="w", ms=1000, meta=META),
            Error("holds a field not written by redislock"),
            setup=[("HSET", H.lock, OTHER, value)],
            after=[(("HGET", H.lock, OTHER), value), *absent(H.fence)],
        )
        for op, value in (("acquire", "garbage"), ("release", f"x|1|99999999999999|1|{META}"))
    ],
    Case(
        "hold-on-a-lock-key-is-wrongtype",
        "hold",
        HOLD,
        acq(),
        Error("WRONGTYPE"),
        setup=[("SET", H.lock, f"{OTHER}|{META}", "PX", 5000)],
        after=[(("GET", H.lock), f"{OTHER}|{META}"), *absent(H.fence)],
    ),
    Case(
        "hold-unknown-op",
        "hold",
        HOLD,
        hold_args("steal"),
        Error("unknown hold op steal"),
        setup=[hold(OTHER), ttl(H.lock, 5000)],
        after=[(("HGET", H.lock, OTHER), HoldValue("w", 1, 1, 5000, 5000))],
    ),
    # ---------------------------------------------------------------- fair: acquire
    Case(
        "fair-acquire-free",
        "fair",
        FAIR,
        facq(),
        ["ok", 1, 10000],
        after=[
            (("GET", F.lock), f"{TOKEN}|{META}"),
            (("PTTL", F.lock), Between(10000 - SLACK, 10000)),
            (("GET", F.fence), "1"),
            (("PTTL", F.fence), -1),
            *absent(F.queue, F.leases, F.info),
        ],
    ),
    Case(
        "fair-acquire-free-continues-the-fence",
        "fair",
        FAIR,
        facq(waiter_ms=0),
        ["ok", 42, 10000],
        setup=[("SET", F.fence, 41)],
        after=[(("GET", F.lock), f"{TOKEN}|{META}"), (("GET", F.fence), "42")],
    ),
    Case(
        "fair-acquire-busy-enqueues",
        "fair",
        FAIR,
        facq(waiter_ms=3000),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[fheld(OTHER), ("SET", F.fence, 7)],
        after=[
            (("LRANGE", F.queue, 0, -1), [TOKEN]),
            (("ZSCORE", F.leases, TOKEN), Clock(3000, 3000 + SLACK)),
            (("HGET", F.info, TOKEN), f"10000|{META}"),
            *queue_ttl(3000 - SLACK, 3000),
            (("GET", F.lock), f"{OTHER}|{META}"),
            (("GET", F.fence), "7"),  # no fencing token burnt on failure
        ],
    ),
    Case(
        "fair-acquire-busy-joins-the-tail",
        "fair",
        FAIR,
        facq(waiter_ms=3000),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[fheld(OTHER), *waiter(THIRD), *waiter(FOURTH)],
        after=[
            (("LRANGE", F.queue, 0, -1), [THIRD, FOURTH, TOKEN]),
            (("ZCARD", F.leases), 3),
            (("HLEN", F.info), 3),
            *queue_ttl(3000 - SLACK, 3000),
        ],
    ),
    Case(
        "fair-acquire-busy-renews-a-queued-waiter-in-place",
        "fair",
        FAIR,
        facq(waiter_ms=3000, queue_max=2),  # already queued: a full queue does not refuse it
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[fheld(OTHER), *waiter(TOKEN, waiter_ms=200), *waiter(THIRD)],
        after=[
            (("LRANGE", F.queue, 0, -1), [TOKEN, THIRD]),  # same place, not queued twice
            (("ZSCORE", F.leases, TOKEN), Clock(3000, 3000 + SLACK)),
            (("HGET", F.info, TOKEN), f"10000|{META}"),
            *queue_ttl(3000 - SLACK, 3000),
        ],
    ),
    Case(
        "fair-acquire-single-try-does-not-queue",
        "fair",
        FAIR,
        facq(waiter_ms=0),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[fheld(OTHER), ("SET", F.fence, 7)],
        after=[
            (("GET", F.lock), f"{OTHER}|{META}"),
            (("GET", F.fence), "7"),
            *absent(F.queue, F.leases, F.info),
        ],
    ),
    Case(
        "fair-acquire-single-try-behind-a-full-queue",
        "fair",
        FAIR,
        facq(waiter_ms=0, queue_max=1),
        ["busy", Between(5000 - SLACK, 5000)],  # not "full": a single try never queues
        setup=[fheld(OTHER), *waiter(THIRD)],
        after=[(("LRANGE", F.queue, 0, -1), [THIRD]), *not_queued(TOKEN)],
    ),
    Case(
        "fair-acquire-full",
        "fair",
        FAIR,
        facq(queue_max=2),
        ["full", 2],
        setup=[fheld(OTHER), *waiter(THIRD), *waiter(FOURTH)],
        after=[(("LRANGE", F.queue, 0, -1), [THIRD, FOURTH]), *not_queued(TOKEN)],
    ),
    Case(
        "fair-acquire-key-without-ttl",
        "fair",
        FAIR,
        facq(waiter_ms=0),
        ["busy", -1],
        setup=[("SET", F.lock, "not ours")],
        after=[(("GET", F.lock), "not ours"), *absent(F.fence, F.queue)],
    ),
    Case(
        "fair-acquire-free-by-the-head",
        "fair",
        FAIR,
        facq(),
        ["ok", 1, 10000],
        setup=[*waiter(TOKEN), *waiter(THIRD, waiter_ms=3000)],
        after=[
            (("GET", F.lock), f"{TOKEN}|{META}"),
            (("LRANGE", F.queue, 0, -1), [THIRD]),
            *not_queued(TOKEN),
            *queue_ttl(3000 - SLACK, 3000),
            *absent(F.grant(TOKEN)),
        ],
    ),
    Case(
        "fair-acquire-free-grants-the-live-head-first",
        "fair",
        FAIR,
        facq(waiter_ms=3000),
        ["busy", Between(8000 - SLACK, 8000)],
        setup=[*waiter(OTHER, lease_ms=8000), ("SET", F.fence, 4)],
        after=[
            *granted(OTHER, 5, 8000),
            (("LRANGE", F.queue, 0, -1), [TOKEN]),
            (("HGET", F.info, TOKEN), f"10000|{META}"),
            *queue_ttl(3000 - SLACK, 3000),
        ],
        extra=(F.grant(OTHER),),
    ),
    Case(
        "fair-acquire-free-single-try-still-grants-the-head",
        "fair",
        FAIR,
        facq(waiter_ms=0),
        ["busy", Between(8000 - SLACK, 8000)],
        setup=[*waiter(OTHER, lease_ms=8000), ("SET", F.fence, 4)],
        after=[*granted(OTHER, 5, 8000), *absent(F.queue, F.leases, F.info)],
        extra=(F.grant(OTHER),),
    ),
    Case(
        "fair-acquire-prunes-dead-waiters",
        "fair",
        FAIR,
        facq(),
        ["ok", 1, 10000],
        setup=[*waiter(OTHER, waiter_ms=-1000), *waiter(THIRD, waiter_ms=0)],
        after=[
            (("GET", F.lock), f"{TOKEN}|{META}"),
            *absent(F.queue, F.leases, F.info, F.grant(OTHER), F.grant(THIRD)),
        ],
    ),
    Case(
        "fair-acquire-granted",
        "fair",
        FAIR,
        facq(),
        ["ok", 5, Between(8000 - SLACK, 8000)],
        setup=[fheld(TOKEN, 8000, WMETA), ("SET", F.fence, 5), ("RPUSH", F.grant(TOKEN), 5)],
        after=[
            (("GET", F.lock), f"{TOKEN}|{WMETA}"),  # the hold the grant wrote stays
            (("PTTL", F.lock), Between(8000 - SLACK, 8000)),
            (("GET", F.fence), "5"),
            *absent(F.grant(TOKEN)),
        ],
        extra=(F.grant(TOKEN),),
    ),
    Case(
        "fair-acquire-repeat-of-own-hold",
        "fair",
        FAIR,
        facq(),
        ["ok", 2, Between(5000 - SLACK, 5000)],
        setup=[fheld(TOKEN), ("SET", F.fence, 2), *waiter(OTHER, waiter_ms=3000)],
        after=[
            (("GET", F.lock), f"{TOKEN}|{META}"),
            (("GET", F.fence), "2"),
            (("LRANGE", F.queue, 0, -1), [OTHER]),
            *queue_ttl(3000 - SLACK, 3000),
        ],
    ),
    # ---------------------------------------------------------------- fair: release
    Case(
        "fair-release-grants-the-head",
        "fair",
        FAIR,
        fair_args("release"),
        "ok",
        setup=[
            fheld(TOKEN),
            *waiter(OTHER, lease_ms=8000, waiter_ms=3000),
            *waiter(THIRD, lease_ms=6000, waiter_ms=2000),
            ("SET", F.fence, 3),
        ],
        after=[
            *granted(OTHER, 4, 8000),
            (("LRANGE", F.queue, 0, -1), [THIRD]),
            (("HGET", F.info, THIRD), f"6000|{WMETA}"),
            *queue_ttl(2000 - SLACK, 2000),  # the latest remaining waiter lease
        ],
        extra=(F.grant(OTHER),),
    ),
    Case(
        "fair-release-skips-a-dead-head",
        "fair",
        FAIR,
        fair_args("release"),
        "ok",
        setup=[
            fheld(TOKEN),
            *waiter(OTHER, waiter_ms=-1000),
            *waiter(THIRD, lease_ms=6000),
            ("SET", F.fence, 3),
        ],
        after=[
            *granted(THIRD, 4, 6000),
            *not_queued(OTHER),
            *absent(F.queue, F.leases, F.info, F.grant(OTHER)),
        ],
        extra=(F.grant(THIRD),),
    ),
    Case(
        "fair-release-replaces-a-stale-grant",
        "fair",
        FAIR,
        fair_args("release"),
        "ok",
        setup=[fheld(TOKEN), *waiter(OTHER), ("RPUSH", F.grant(OTHER), "x", "y")],
        after=granted(OTHER, 1, 8000),
        extra=(F.grant(OTHER),),
    ),
    Case(
        "fair-release-empty-queue",
        "fair",
        FAIR,
        fair_args("release"),
        "ok",
        setup=[fheld(TOKEN), ("SET", F.fence, 3)],
        after=[(("GET", F.fence), "3"), *absent(F.lock, F.queue)],
    ),
    Case(
        "fair-release-taken",
        "fair",
        FAIR,
        fair_args("release"),
        "taken",
        setup=[fheld(OTHER), *waiter(THIRD), ("SET", F.fence, 3)],
        after=[
            (("GET", F.lock), f"{OTHER}|{META}"),
            (("PTTL", F.lock), Between(5000 - SLACK, 5000)),
            (("GET", F.fence), "3"),
            (("LRANGE", F.queue, 0, -1), [THIRD]),
            *absent(F.grant(THIRD)),
        ],
    ),
    Case(
        "fair-release-token-prefix-is-not-ownership",
        "fair",
        FAIR,
        fair_args("release"),
        "taken",
        setup=[("SET", F.lock, f"{TOKEN}0|{META}", "PX", 5000)],
        after=[(("GET", F.lock), f"{TOKEN}0|{META}")],
    ),
    Case(
        "fair-release-gone",
        "fair",
        FAIR,
        fair_args("release"),
        "gone",
        after=absent(F.lock, F.fence, F.queue),
    ),
    Case(
        "fair-release-gone-grants-the-next-waiter",
        "fair",
        FAIR,
        fair_args("release"),
        "gone",
        setup=[*waiter(OTHER)],
        after=[*granted(OTHER, 1, 8000), *absent(F.queue, F.leases, F.info)],
        extra=(F.grant(OTHER),),
    ),
    # ---------------------------------------------------------------- fair: cancel, force
    Case(
        "fair-cancel-leaves-the-queue",
        "fair",
        FAIR,
        fair_args("cancel"),
        ["left", 0],
        setup=[
            fheld(OTHER),
            *waiter(TOKEN, waiter_ms=5000),
            *waiter(THIRD, waiter_ms=2000),
            *[ttl(key, 5000) for key in (F.queue, F.leases, F.info)],
        ],
        after=[
            (("LRANGE", F.queue, 0, -1), [THIRD]),
            *not_queued(TOKEN),
            *queue_ttl(2000 - SLACK, 2000),  # now the latest waiter lease is THIRD's
            (("GET", F.lock), f"{OTHER}|{META}"),
        ],
    ),
    Case(
        "fair-cancel-last-waiter-clears-the-queue",
        "fair",
        FAIR,
        fair_args("cancel"),
        ["left", 0],
        setup=[fheld(OTHER), *waiter(TOKEN)],
        after=[(("GET", F.lock), f"{OTHER}|{META}"), *absent(F.queue, F.leases, F.info)],
    ),
    Case(
        "fair-cancel-not-queued",
        "fair",
        FAIR,
        fair_args("cancel"),
        ["left", 0],
        setup=[fheld(OTHER), *waiter(THIRD)],
        after=[(("LRANGE", F.queue, 0, -1), [THIRD]), (("GET", F.lock), f"{OTHER}|{META}")],
    ),
    Case(
        "fair-cancel-granted",
        "fair",
        FAIR,
        fair_args("cancel"),
        ["ok", 5, Between(8000 - SLACK, 8000)],
        setup=[
            fheld(TOKEN, 8000, WMETA),
            ("SET", F.fence, 5),
            ("RPUSH", F.grant(TOKEN), 5),
            *waiter(OTHER),
        ],
        after=[
            (("GET", F.lock), f"{TOKEN}|{WMETA}"),  # it holds the lock now
            (("LRANGE", F.queue, 0, -1), [OTHER]),
            *absent(F.grant(TOKEN)),
        ],
        extra=(F.grant(TOKEN),),
    ),
    Case(
        "fair-cancel-while-free-grants-the-next-waiter",
        "fair",
        FAIR,
        fair_args("cancel"),
        ["left", 0],
        setup=[*waiter(TOKEN), *waiter(OTHER), ("SET", F.fence, 2)],
        after=[
            *granted(OTHER, 3, 8000),
            *not_queued(TOKEN),
            *absent(F.queue, F.leases, F.info, F.grant(TOKEN)),
        ],
        extra=(F.grant(OTHER),),
    ),
    Case(
        "fair-force-grants-the-next-waiter",
        "fair",
        FAIR,
        fair_args("force", ""),
        1,
        setup=[fheld(OTHER), *waiter(THIRD, lease_ms=6000), ("SET", F.fence, 2)],
        after=[*granted(THIRD, 3, 6000), *absent(F.queue)],
        extra=(F.grant(THIRD),),
    ),
    Case(
        "fair-force-nothing-held",
        "fair",
        FAIR,
        fair_args("force", ""),
        0,
        after=absent(F.lock, F.fence),
    ),
    Case(
        "fair-force-free-lock-grants-the-next-waiter",
        "fair",
        FAIR,
        fair_args("force", ""),
        0,
        setup=[*waiter(THIRD)],
        after=granted(THIRD, 1, 8000),
        extra=(F.grant(THIRD),),
    ),
    # ---------------------------------------------------------------- fair: errors
    Case(
        "fair-unknown-op",
        "fair",
        FAIR,
        fair_args("steal"),
        Error("unknown fair op steal"),
        setup=[fheld(OTHER)],
        after=[(("GET", F.lock), f"{OTHER}|{META}")],
    ),
    Case(
        "fair-malformed-waiter-info-is-dropped",
        "fair",
        FAIR,
        facq(),
        Error("is malformed"),
        setup=[
            ("RPUSH", F.queue, OTHER),
            ("ZADD", F.leases, At(3000), OTHER),
            ("HSET", F.info, OTHER, "garbage"),
            *waiter(THIRD),
        ],
        after=[
            *not_queued(OTHER),
            (("LRANGE", F.queue, 0, -1), [THIRD]),
            *absent(F.lock, F.fence),
        ],
    ),
    # ---------------------------------------------------------------- multi: acquire
    Case(
        "multi-acquire-takes-every-name",
        "multi",
        MACQ,
        macq(),
        ["ok", 42, 1],
        setup=[("SET", M1.fence, 41)],
        after=[
            (("GET", M1.lock), f"{TOKEN}|{META}"),  # exactly Lock's value and TTL
            (("PTTL", M1.lock), Between(9000, 10000)),
            (("GET", M2.lock), f"{TOKEN}|{META}"),
            (("PTTL", M2.lock), Between(9000, 10000)),
            (("GET", M2.fence), "1"),
            (("PTTL", M2.fence), -1),  # fence counters never expire
            *absent(M1.wait, M2.wait),
        ],
    ),
    Case(
        "multi-acquire-busy-takes-nothing",
        "multi",
        MACQ,
        macq(marker_ms=0),
        ["busy", Between(4000, 5000), 2],
        setup=[("SET", M2.lock, f"{OTHER}|{META}", "PX", 5000), ("SET", M1.fence, 7)],
        after=[
            (("GET", M2.lock), f"{OTHER}|{META}"),
            (("GET", M1.fence), "7"),  # no fencing token burnt
            *absent(M1.lock, M2.fence, M1.wait, M2.wait),
        ],
    ),
    Case(
        "multi-acquire-busy-waiting-marks-the-busy-name",
        "multi",
        MACQ,
        macq(marker_ms=1500),
        ["busy", Between(4000, 5000), 2],
        setup=[("SET", M2.lock, f"{OTHER}|{META}", "PX", 5000)],
        after=[
            (("GET", M2.wait), "1"),
            (("PTTL", M2.wait), Between(1000, 1500)),
            *absent(M1.lock, M1.fence, M1.wait, M2.fence),
        ],
    ),
    Case(
        "multi-acquire-retry-keeps-its-fence",
        "multi",
        MACQ,
        macq(),
        ["ok", 3, 1],
        setup=[("SET", M1.lock, f"{TOKEN}|{META}", "PX", 5000), ("SET", M1.fence, 3)],
        after=[(("GET", M1.fence), "3"), (("GET", M2.lock), f"{TOKEN}|{META}")],
    ),
    Case(
        "multi-acquire-key-without-ttl",
        "multi",
        MACQ,
        macq(marker_ms=0),
        ["busy", -1, 2],
        setup=[("SET", M2.lock, "not ours")],
        after=[(("GET", M2.lock), "not ours"), *absent(M1.lock, M1.fence, M2.fence)],
    ),
    Case(
        "multi-acquire-other-kind-is-wrongtype",
        "multi",
        MACQ,
        macq(),
        Error("WRONGTYPE"),
        setup=[("HSET", M2.lock, OTHER, "w|1|0|1|x")],
        after=absent(M1.lock, M1.fence, M2.fence),
    ),
    # ---------------------------------------------------------------- multi: release
    Case(
        "multi-release-all-wakes-each-waited-name",
        "multi",
        MREL,
        multi_args("release", wake_ms=WAKE_MS),
        ["ok", 2, 0],
        setup=[mheld(M1), mheld(M2), marker(M2.wait)],
        after=[*absent(M1.lock, M2.lock, M1.wake), *woken(M2.wake)],
    ),
    Case(
        "multi-release-leaves-another-owners-name",
        "multi",
        MREL,
        multi_args("release", wake_ms=WAKE_MS),
        ["taken", 1, 2],
        setup=[mheld(M1), mheld(M2, OTHER), marker(M1.wait), marker(M2.wait)],
        after=[
            (("GET", M2.lock), f"{OTHER}|{META}"),
            *absent(M1.lock, M2.wake),
            *woken(M1.wake),
        ],
    ),
    Case(
        "multi-release-gone",
        "multi",
        MREL,
        multi_args("release", wake_ms=WAKE_MS),
        ["gone", 1, 1],
        setup=[mheld(M2)],
        after=absent(M1.lock, M2.lock),
    ),
    # ---------------------------------------------------------------- multi: extend, status
    Case(
        "multi-extend-add",
        "multi",
        MLOCKS,
        multi_args("extend", ms=10000, mode="add"),
        ["ok", Between(14000, 15000), 0],
        setup=[mheld(M1), mheld(M2)],
        after=[
            (("PTTL", M1.lock), Between(14000 - SLACK, 15000)),
            (("PTTL", M2.lock), Between(14000 - SLACK, 15000)),
        ],
    ),
    Case(
        "multi-extend-max-never-shortens",
        "multi",
        MLOCKS,
        multi_args("extend", ms=10000, mode="max"),
        ["ok", 10000, 0],
        setup=[mheld(M1), mheld(M2, px=20000)],
        after=[
            (("PTTL", M1.lock), Between(10000 - SLACK, 10000)),
            (("PTTL", M2.lock), Between(19000 - SLACK, 20000)),
        ],
    ),
    Case(
        "multi-extend-set",
        "multi",
        MLOCKS,
        multi_args("extend", ms=3000, mode="set"),
        ["ok", 3000, 0],
        setup=[mheld(M1), mheld(M2, px=20000)],
        after=[(("PTTL", M2.lock), Between(3000 - SLACK, 3000))],
    ),
    Case(
        "multi-extend-one-gone-changes-nothing",
        "multi",
        MLOCKS,
        multi_args("extend", ms=10000, mode="add"),
        ["gone", 0, 2],
        setup=[mheld(M1)],
        after=[(("PTTL", M1.lock), Between(4000, 5000)), *absent(M2.lock)],
    ),
    Case(
        "multi-status-ok",
        "multi",
        MLOCKS,
        multi_args("status"),
        ["ok", Between(4000, 5000), 0],
        setup=[mheld(M1), mheld(M2, px=8000)],
    ),
    Case(
        "multi-status-taken",
        "multi",
        MLOCKS,
        multi_args("status"),
        ["taken", 0, 1],
        setup=[mheld(M1, OTHER), mheld(M2)],
    ),
    # ---------------------------------------------------------------- redlock_fence
    Case(
        "redlock-fence-raises-a-lower-counter",
        "redlock_fence",
        (K.fence,),
        (7,),
        1,
        setup=[("SET", K.fence, 3)],
        after=[(("GET", K.fence), "7"), (("PTTL", K.fence), -1)],
    ),
    Case(
        "redlock-fence-creates-a-missing-counter",
        "redlock_fence",
        (K.fence,),
        (5,),
        1,
        after=[(("GET", K.fence), "5"), (("PTTL", K.fence), -1)],
    ),
    Case(
        "redlock-fence-never-lowers",
        "redlock_fence",
        (K.fence, M2.fence, M3.fence),
        (4, 9, 2),
        3,
        setup=[("SET", K.fence, 10), ("SET", M3.fence, 2)],
        after=[
            (("GET", K.fence), "10"),
            (("GET", M2.fence), "9"),
            (("GET", M3.fence), "2"),
        ],
    ),
    Case(
        "multi-unknown-op",
        "multi",
        MLOCKS,
        multi_args("steal"),
        Error("unknown multi op steal"),
        setup=[mheld(M1, OTHER)],
        after=[(("GET", M1.lock), f"{OTHER}|{META}")],
    ),
    # inspect.lua: reads every key of a name, writes nothing (the after checks and the
    # "nothing outside KEYS" check show it).
    Case(
        "inspect-absent",
        "inspect",
        INSPECT,
        (),
        ["none", None, [], -2, None, 0, 0, None, [], [], Clock(0, SLACK)],
    ),
    Case(
        "inspect-lock-with-waiter-marker",
        "inspect",
        INSPECT,
        (),
        [
            "string",
            f"{TOKEN}|{META}",
            [],
            Between(5000 - SLACK, 5000),
            "3",
            1,
            0,
            None,
            [],
            [],
            Clock(0, SLACK),
        ],
        setup=[held(), ("SET", K.fence, 3), marker(K.wait)],
        after=[(("GET", K.lock), f"{TOKEN}|{META}"), (("GET", K.fence), "3")],
    ),
    Case(
        "inspect-lock-without-ttl",
        "inspect",
        INSPECT,
        (),
        ["string", f"{TOKEN}|{META}", [], -1, None, 0, 0, None, [], [], Clock(0, SLACK)],
        setup=[held(px=None)],
    ),
    Case(
        "inspect-holds-waiters-and-permits",
        "inspect",
        INSPECT,
        (),
        [
            "hash",
            None,
            [TOKEN, HoldValue("r", 1, 1, 5000, 5000), OTHER, HoldValue("r", 2, 2, -10, -10)],
            Between(5000 - SLACK, 5000),
            "2",
            1,
            1,
            "4",
            [],
            [],
            Clock(0, SLACK),
        ],
        setup=[
            hold(TOKEN, "r"),
            hold(OTHER, "r", -10, count=2, fence=2),  # ended: shown, not removed
            ttl(H.lock, 5000),
            ("SET", H.fence, 2),
            waiting(),
            marker(H.rwait),
            ("SET", H.permits, 4),
        ],
        after=[(("HLEN", H.lock), 2), (("ZCARD", H.wait), 1)],
    ),
    Case(
        "inspect-fair-queue",
        "inspect",
        INSPECT,
        (),
        [
            "string",
            f"{TOKEN}|{META}",
            [],
            Between(5000 - SLACK, 5000),
            "7",
            0,
            0,
            None,
            [OTHER, THIRD],
            [THIRD, Clock(-5, -5), OTHER, Clock(1000, 1000)],
            Clock(0, SLACK),
        ],
        setup=[
            held(),
            ("SET", F.fence, 7),
            ("RPUSH", F.queue, OTHER, THIRD),
            ("ZADD", F.leases, At(1000), OTHER, At(-5), THIRD),  # THIRD's lease ended
        ],
        after=[(("LLEN", F.queue), 2), (("ZCARD", F.leases), 2)],
    ),
    Case(
        "inspect-foreign-type",
        "inspect",
        INSPECT,
        (),
        ["list", None, [], -1, None, 0, 0, None, [], [], Clock(0, SLACK)],
        setup=[("RPUSH", K.lock, "x")],
        after=[(("LRANGE", K.lock, 0, -1), ["x"])],
    ),
]


def test_every_script_has_behaviour_cases() -> None:
    assert {c.script for c in CASES} == set(SCRIPTS)
    assert len({c.id for c in CASES}) == len(CASES)


def command(r: redis.Redis, *args: str | int) -> Any:
    return r.execute_command(*args)  # type: ignore[no-untyped-call]


def written_keys(case: Case) -> set[str]:
    return {str(cmd[1]) for cmd in case.setup}


def server_ms(r: redis.Redis) -> int:
    """The server's TIME in milliseconds, computed as the scripts compute ``now``."""
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    now = server_ms(r)
    for cmd in resolve(case.setup, now):
        command(r, *cmd)
    script = SCRIPTS[case.script]
    args = resolve(case.args, now)
    if isinstance(case.reply, Error):
        with pytest.raises(redis.ResponseError, match=re.escape(case.reply.text)):
            r.eval(script.source, len(case.keys), *case.keys, *args)
    else:
        reply = norm(r.eval(script.source, len(case.keys), *case.keys, *args))
        assert reply == resolve(case.reply, now)
    for cmd, expected in resolve(case.after, now):
        assert norm(command(r, *cmd)) == expected, cmd
    # Nothing outside KEYS (and what the setup wrote, and the documented extras) exists.
    present = {norm(k) for k in r.keys("*")}
    assert present <= set(case.keys) | written_keys(case) | set(case.extra)


def test_evalsha_runs_the_loaded_script(r: redis.Redis) -> None:
    script = SCRIPTS["lock_status"]
    r.script_load(script.source)
    command(r, *held())
    command(r, "SET", K.fence, 3)
    reply = norm(r.evalsha(script.sha, 2, K.lock, K.fence, TOKEN))
    assert reply == ["ok", Between(4000, 5000), 3]


def test_fenced_write_sequence(r: redis.Redis) -> None:
    """Writers arriving out of order: only strictly increasing fences get through."""
    script = SCRIPTS["fenced_write"]
    accepted = []
    for fence in (1, 3, 2, 3, 4, 1, 10, 9):
        ok, last = norm(r.eval(script.source, 1, TARGET, fence, "data", f"v{fence}"))
        if ok == 1:
            accepted.append(fence)
            assert last == fence
        else:
            assert last == max(accepted)
            assert last >= fence
    assert accepted == [1, 3, 4, 10]
    assert norm(r.hget(TARGET, "data")) == "v10"


def test_acquire_release_cycle_issues_increasing_fences(r: redis.Redis) -> None:
    """The scripts compose: acquire, release, acquire again gives the next fence."""
    acquire, release = SCRIPTS["lock_acquire"], SCRIPTS["lock_release"]
    fences = []
    for token in (TOKEN, OTHER, TOKEN):
        status, fence = norm(r.eval(acquire.source, 3, *ACQ, token, 10000, META, 0))
        assert status == "ok"
        fences.append(fence)
        assert norm(r.eval(release.source, 3, *REL, token, 2000)) == "ok"
    assert fences == [1, 2, 3]


def test_case_keys_and_argv_are_laid_out_as_the_cores_lay_them_out() -> None:
    """The hold/fair cases call the scripts exactly as HoldCore and FairCore do."""
    base = LockCore.create(
        "job",
        ttl=10.0,
        watchdog_lease=30.0,
        renew_interval=None,
        max_lease=None,
        timeout=None,
        recheck_interval=0.1,
        prefix="redislock:",
        on_lost=None,
        socket_timeout=None,
    )
    hold_core = HoldCore.for_mode(base, "p", 3)
    op = hold_core._op(
        "acquire", TOKEN, ms=10000, meta=META, marker_ms=1500, reenter=True, companion=FOURTH
    )
    expected = acq(TOKEN, "p", 10000, marker_ms=1500, reenter=True, companion=FOURTH, permits=3)
    assert op.script is SCRIPTS["hold"]
    assert op.keys == HOLD
    assert op.args == (*expected[:9], hold_core.wake_ms, *expected[10:])
    op = hold_core._op("extend", TOKEN, ms=3000, extend_mode="add")
    expected = hold_args("extend", TOKEN, "p", 3000, permits=3, extend_mode="add")
    assert op.args == (*expected[:9], hold_core.wake_ms, *expected[10:])
    fair_core = FairCore.from_base(base, 1.0, 10)
    op = fair_core._fair("acquire", TOKEN, 10000, META, 1000, 10)
    assert op.script is SCRIPTS["fair"]
    assert op.keys == FAIR
    assert op.args == facq()
    assert fair_core._fair("release", TOKEN).args == fair_args("release")
    assert fair_core._fair("force", "").args == fair_args("force", "")


def test_multi_keys_and_argv_are_laid_out_as_the_core_lays_them_out() -> None:
    """The multi cases call the script exactly as MultiCore does."""
    base = LockCore.create(
        "job",
        ttl=10.0,
        watchdog_lease=30.0,
        renew_interval=None,
        max_lease=None,
        timeout=None,
        recheck_interval=0.1,
        prefix="redislock:",
        on_lost=None,
        socket_timeout=None,
    )
    core = MultiCore.from_base(base, ("job", "job}2"), "redislock:", False)
    (chunk,) = core.chunks
    op = core._op("acquire", chunk, TOKEN, ms=10000, meta=META, marker_ms=1500)
    assert op.script is SCRIPTS["multi"]
    assert (op.keys, op.args) == (MACQ, macq(marker_ms=1500))
    op = core._op("release", chunk, TOKEN)
    assert (op.keys, op.args) == (MREL, multi_args("release", wake_ms=core.wake_ms))
    op = core._op("extend", chunk, TOKEN, ms=3000, mode="add")
    assert (op.keys, op.args) == (MLOCKS, multi_args("extend", ms=3000, mode="add"))
    op = core._op("status", chunk, TOKEN)
    assert (op.keys, op.args) == (MLOCKS, multi_args("status"))


def test_lua_keys_are_hash_tagged_together() -> None:
    """The cases above use the real key layout: every key of one call shares a slot."""
    slot: Callable[[str], int] = lambda k: redis.crc.key_slot(k.encode())  # noqa: E731
    for case in CASES:
        assert len({slot(k) for k in (*case.keys, *case.extra)}) == 1, case.id
