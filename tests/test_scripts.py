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
from redislock._core.keys import LockKeys
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
    }
    assert durations == expected.get(name, [])


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
        assert re.fullmatch(r"KEYS\[\d+\]", first.strip()), f"{command} {first}"
    assert "KEYS[" not in re.sub(r"KEYS\[\d+\]", "", code)  # no computed indices
    assert "#KEYS" not in code
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
    """Matches an integer in [lo, hi]."""

    lo: int
    hi: int

    def __eq__(self, other: object) -> bool:
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


@dataclass
class Case:
    id: str
    script: str
    keys: tuple[str, ...]
    args: tuple[str | int, ...]
    reply: Any
    setup: list[tuple[str | int, ...]] = field(default_factory=list)
    after: list[tuple[tuple[str | int, ...], Any]] = field(default_factory=list)


def held(token: str = TOKEN, px: int | None = 5000) -> tuple[str | int, ...]:
    value = f"{token}|{META}"
    return ("SET", K.lock, value) if px is None else ("SET", K.lock, value, "PX", px)


ACQ = (K.lock, K.fence, K.wait)
REL = (K.lock, K.wait, K.wake)
GONE = 0  # EXISTS reply

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
]


def test_every_script_has_behaviour_cases() -> None:
    assert {c.script for c in CASES} == set(SCRIPTS)
    assert len({c.id for c in CASES}) == len(CASES)


def command(r: redis.Redis, *args: str | int) -> Any:
    return r.execute_command(*args)  # type: ignore[no-untyped-call]


def written_keys(case: Case) -> set[str]:
    return {str(cmd[1]) for cmd in case.setup}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    for cmd in case.setup:
        command(r, *cmd)
    script = SCRIPTS[case.script]
    reply = norm(r.eval(script.source, len(case.keys), *case.keys, *case.args))
    assert reply == case.reply
    for cmd, expected in case.after:
        assert norm(command(r, *cmd)) == expected, cmd
    # Nothing outside KEYS (and what the setup wrote) exists afterwards.
    present = {norm(k) for k in r.keys("*")}
    assert present <= set(case.keys) | written_keys(case)


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


def test_lua_keys_are_hash_tagged_together() -> None:
    """The cases above use the real key layout: every key of one call shares a slot."""
    slot: Callable[[str], int] = lambda k: redis.crc.key_slot(k.encode())  # noqa: E731
    for case in CASES:
        assert len({slot(k) for k in case.keys}) == 1, case.id
