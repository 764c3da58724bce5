# SPDX-License-Identifier: MIT
"""The Lua scripts: inventory, header documentation, SHA1s, and checks over every behaviour
case. The cases themselves run in ``tests/test_scripts_<family>.py`` (lock, hold, fair, multi,
fencing, inspect, once, election, latch, barrier), with the vocabulary of
``tests/scriptcases.py``."""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.crc

import redislock
from redislock._core.keys import GRANT_SUFFIX
from redislock._core.scripts import SCRIPTS, Script
from redislock.server import RedisProcess
from tests import clients
from tests.scriptcases import norm

pytestmark = [pytest.mark.servers, pytest.mark.pythons]  # dev.py's STAGES: where else it runs

SCRIPT_DIR = Path(redislock.__file__).parent / "scripts"
LUA_FILES = sorted(p for p in SCRIPT_DIR.glob("*.lua") if not p.name.startswith("_"))
PARTS = {  # the shared parts, included where a script says so
    p.name: p.read_bytes() for p in SCRIPT_DIR.glob("_*.lua")
}
FENCE_PART = PARTS["_fence.lua"]
QUEUE_PART = PARTS["_queue.lua"]
RING_PART = PARTS["_ring.lua"]
FAIR_PART = PARTS["_fair.lua"]
MULTI_PART = PARTS["_multi.lua"]
WAKE_PART = PARTS["_wake.lua"]
NAMES = sorted(SCRIPTS)
CASE_MODULES = tuple(
    importlib.import_module(f"tests.{path.stem}")
    for path in sorted(Path(__file__).parent.glob("test_scripts_*.py"))
)
"""The script families' case files, ``tests/test_scripts_<family>.py``, each with its
``CASES`` (found by name: a new family's file needs no entry here)."""
CASES = [case for module in CASE_MODULES for case in module.CASES]


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
    for part, text in PARTS.items():
        raw = raw.replace(f"-- include: {part}\n".encode(), text)
    assert script.name == name
    assert script.source.encode("utf-8") == raw
    assert not re.search(rb"^-- include: ", raw, re.M)  # every include expanded
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
        "lock_extend": ["ms", "done_ms", "delay_ms"],
        "lock_release": ["done_ms"],
        "hold_acquire_write": ["lease_ms", "marker_ms"],
        "hold_acquire_read": ["lease_ms", "marker_ms"],
        "hold_acquire_permit": ["lease_ms", "marker_ms"],
        "hold_reenter": ["lease_ms"],
        "hold_release": ["done_ms"],
        "hold_release_permit": ["done_ms"],
        "hold_extend": ["ms"],
        "fair_acquire": ["lease_ms", "waiter_ms", "delay_ms"],
        "multi_acquire": ["ttl_ms", "wait_ms"],
        "multi_release": ["done_ms"],
        "multi_extend": ["ms", "done_ms"],
        "compat_acquire": ["ttl_ms", "done_ms"],
        "once_record": ["ttl_ms"],
        "latch_set": ["ttl_ms", "done_ms"],
        "latch_down": ["ttl_ms", "done_ms"],
        "barrier_enter": ["lease_ms"],
        "barrier_renew": ["lease_ms"],
        "barrier_leave": ["done_ms"],
    }
    assert durations == expected.get(name, [])


_CALL = re.compile(r"redis\.p?call\(\s*'(\w+)'\s*(?:,\s*([^,)]+))?")


_FENCE_USE = re.compile(
    r"\b(next_fence|peek_fence|held_fence|ring_issue|ring_mark|ring_unmark|ring_released)"
    r"\(([^)]*)\)"
)
_RING_KEYS = {"ring_issue": 1, "ring_mark": 2, "ring_unmark": 1, "ring_released": 2}
"""How many of a _ring.lua helper's first arguments are keys (the rest: a fencing token)."""
_PART_KEYS = {
    "drop_ended": (0, 3),
    "forget": (0, 3),
    "settle": (0, 3),
    "issue": (0, 2),
    "grant_next": (0, 7),
    "open_queue": (1, 10),
    "wake_marked": (0, 2),
    "chunk_values": (0, 1),
}
"""Which arguments of a _fair.lua, _wake.lua or _multi.lua helper are keys: a slice (the
rest are a server time, a token, the script's own preflight list, a stride and a count;
chunk_values takes KEYS itself)."""
_PART_USE = {
    part: re.compile(rf"\b({'|'.join(helpers)})\(([^)]*)\)")
    for part, helpers in (
        ("_fair.lua", ("open_queue", "drop_ended", "forget", "settle", "issue", "grant_next")),
        ("_wake.lua", ("wake_marked",)),
        ("_multi.lua", ("chunk_values",)),
    )
}
"""The calls of each shared part's helpers, looked for in the scripts that include it."""
_KEY_LOCALS = re.compile(r"^local ([a-z_]+(?:, [a-z_]+)*) = (KEYS\[\d+\](?:, KEYS\[\d+\])*)$", re.M)


def key_locals(code: str) -> set[str]:
    """The locals a script binds to literal ``KEYS[n]`` (``local lock, queue = KEYS[1],
    KEYS[3]``), each bound once and never assigned again, nor declared again."""
    names: set[str] = set()
    for left, right in _KEY_LOCALS.findall(code):
        bound = left.split(", ")
        assert len(bound) == len(right.split(", ")), left
        names.update(bound)
    for name in names:
        assert len(re.findall(rf"\b{name}\b(?:, \w+)* =(?!=)", code)) == 1, name
        assert len(re.findall(rf"\blocal (?:\w+, )*{name}\b", code)) == 1, name
        assert not re.search(rf"function \w*\([^)]*\b{name}\b", code), name
    return names


def test_fence_part_touches_only_the_keys_it_is_given() -> None:
    """_fence.lua's helpers run commands on their key parameters only (the scripts pass
    ``KEYS[n]``: see the next test)."""
    code = "\n".join(line.split("--", 1)[0] for line in FENCE_PART.decode().splitlines())
    calls = _CALL.findall(code)
    assert {(cmd, first.strip()) for cmd, first in calls} == {
        ("GET", "counter"),
        ("INCR", "counter"),
    }
    assert "KEYS" not in code
    assert re.findall(r"^local function (\w+)\((.*)\)", code, re.M) == [
        ("next_fence", "counter"),
        ("peek_fence", "counter"),
        ("held_fence", "v"),
    ]


def test_ring_part_touches_only_the_keys_it_is_given() -> None:
    """_ring.lua's helpers run commands on their key parameters only (the scripts pass
    ``KEYS[n]``: see the next test): GETBIT and SETBIT on the ring, GET on the counter."""
    code = "\n".join(line.split("--", 1)[0] for line in RING_PART.decode().splitlines())
    calls = _CALL.findall(code)
    assert {(cmd, first.strip()) for cmd, first in calls} == {
        ("GETBIT", "ring"),
        ("SETBIT", "ring"),
        ("GET", "counter"),
    }
    assert "KEYS" not in code
    assert re.findall(r"^local function (\w+)\((.*)\)", code, re.M) == [
        ("ring_issue", "ring, f"),
        ("ring_window", "counter, f"),
        ("ring_mark", "ring, counter, f"),
        ("ring_unmark", "ring, f"),
        ("ring_released", "ring, counter, f"),
    ]


FAMILY_PARTS = {
    "hold_": (
        "_hold.lua",
        {"hash", "index", "counter", "waiters", "wake", "rwait", "rwake", "pkey", "released"},
    ),
    "election_": ("_election.lua", {"lock", "leader"}),
    "latch_": ("_latch.lua", {"latch", "done"}),
    "barrier_": ("_barrier.lua", {"bkey", "members"}),
}
"""The script families whose shared part is written into each of their scripts: the part, and
the names of its functions' key parameters (each gets its keys as parameters of these names;
``counter``, the fencing counter, goes to _fence.lua's helpers only)."""
_HELPER = re.compile(r"^local function (\w+)\(([^)]*)\)", re.M)


def assigned(code: str, name: str) -> int:
    """How many assignments (``name = ...``, ``a, name = ...``) have ``name`` as a target."""
    return len(re.findall(rf"(?<![\w.])(?:[\w.]+\s*,\s*)*{name}(?:\s*,\s*[\w.]+)*\s*=(?!=)", code))


def part_code(part: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in PARTS[part].decode().splitlines())


@pytest.mark.parametrize("family", sorted(FAMILY_PARTS))
def test_family_part_touches_only_the_keys_it_is_given(family: str) -> None:
    """A family's shared part (_hold.lua, _election.lua, _latch.lua, _barrier.lua): its
    functions run commands on their key parameters only, which they never assign, pass only
    those to each other as keys, and it reads no KEYS or ARGV; the family's scripts pass
    them their KEYS[n] (see the next test)."""
    part, key_params = FAMILY_PARTS[family]
    code = part_code(part)
    assert "KEYS" not in code
    assert "ARGV" not in code
    calls = _CALL.findall(code)
    assert calls
    for command, first in calls:
        if command != "TIME":
            assert first.strip() in key_params, f"{command} {first}"
    for name in key_params:
        assert assigned(code, name) == 0, name
    params = {p.strip() for _, args in _HELPER.findall(code) for p in args.split(",")}
    assert params & key_params == key_params - {"counter"}
    # one helper of the part calls another with its own key parameters in the key places
    # (or forwards its own ``...``: the pairs its callers pass, checked at their calls)
    check_helper_calls(code, helper_keys(part, key_params), "|".join([*key_params, r"\.\.\."]))


def helper_keys(part: str, key_params: set[str]) -> dict[str, tuple[list[int], int | None]]:
    """A shared part's functions -> the positions of their key parameters, and where their
    ``...`` starts (pairs key, ON_* list, as _hold.lua's ``check`` takes them), if any."""
    out = {}
    for name, args in _HELPER.findall(part_code(part)):
        params = [p.strip() for p in args.split(",")]
        pairs = params.index("...") if "..." in params else None
        out[name] = ([i for i, p in enumerate(params) if p in key_params], pairs)
    return out


def call_args(text: str) -> list[str]:
    """The arguments of a call, split at the commas outside parentheses and braces."""
    args, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c in "({") - (c in ")}")
        if c == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
    return [*args, text[start:].strip()]


def check_helper_calls(
    code: str, helpers: dict[str, tuple[list[int], int | None]], key: str
) -> None:
    """Every call in ``code`` of a family part's function passes, at each of its key
    parameters' positions, a key (``key``, a regular expression) or ``nil``."""
    for helper, (positions, pairs) in helpers.items():
        for call in re.finditer(rf"(?<![\w.]){helper}\(((?:[^()]|\([^()]*\))*)\)", code):
            if code[: call.start()].endswith("function "):
                continue  # its definition
            args = call_args(call[1])
            spots = [*positions, *(range(pairs, len(args), 2) if pairs is not None else ())]
            for i in spots:
                assert re.fullmatch(key, args[i]) or args[i] == "nil", call[0]


def part_calls(part: bytes) -> set[tuple[str, str]]:
    """(command, first argument) of every redis.call/pcall of a shared part."""
    code = "\n".join(line.split("--", 1)[0] for line in part.decode().splitlines())
    assert "KEYS" not in code
    assert "ARGV" not in code
    return {(cmd, first.strip()) for cmd, first in _CALL.findall(code)}


def test_fair_part_touches_only_the_keys_it_is_given() -> None:
    """_fair.lua's helpers (the queue of Lock and FairLock) run commands on their key
    parameters only, and PUBLISH on a grant channel of the lock key they are given."""
    assert part_calls(FAIR_PART) == {
        ("LREM", "queue"),
        ("ZREM", "leases"),
        ("HDEL", "info"),
        ("ZRANGEBYSCORE", "leases"),
        ("TIME", ""),
        ("ZCARD", "leases"),
        ("DEL", "queue"),
        ("EXISTS", "delay_key"),
        ("LINDEX", "queue"),
        ("HGET", "info"),
        ("SET", "lock"),
        ("SET", "delay_key"),
        ("PUBLISH", "channel"),
    }
    code = FAIR_PART.decode()
    # the channel: the waiter's process's grant channel of the lock key (_queue.lua)
    assert "local channel = grant_channel(lock .. GRANT, head)" in code
    assert "local GRANT = ':grant'" in code
    assert GRANT_SUFFIX == ":grant"
    assert re.findall(r"^local function (\w+)\((.*)\)", code, re.M) == [
        ("owns", "v, token"),
        ("forget", "queue, leases, info, tok"),
        ("drop_ended", "queue, leases, info, now"),
        ("open_queue", "own, lock, counter, queue, leases, info, ring, delay_key, waiters, wake"),
        ("settle", "queue, leases, info"),
        ("issue", "counter, ring"),
        ("grant_next", "lock, counter, queue, leases, info, ring, delay_key, now"),
    ]


def test_wake_and_multi_parts_touch_only_the_keys_they_are_given() -> None:
    """_wake.lua's wake_marked runs commands on its key parameters only (the scripts pass
    ``KEYS[n]`` or a local bound to one: see the next test), and _multi.lua's chunk_values
    on the lock keys of the KEYS it is given, one a name, by the name's stride."""
    assert part_calls(WAKE_PART) == {("EXISTS", "waiters"), ("PUBLISH", "wake")}
    assert part_calls(MULTI_PART) == {("MGET", "unpack(locks")}
    code = MULTI_PART.decode()
    assert "local function chunk_values(keys, stride, n)" in code
    assert (
        "  for i = 1, n or #keys / stride do\n    locks[i] = keys[stride * (i - 1) + 1]\n" in code
    )
    assert re.findall(r"\blocks\b(?:\[[^\]]*\])? =", code) == ["locks =", "locks[i] ="]


MULTI_KEYS: dict[str, tuple[set[str], str, set[str], list[str]]] = {
    "multi_acquire": (
        {"3 * i - 1", "3 * i"},
        "3 * i - 2",
        {"locks[i]", "KEYS[3 * i]", "KEYS[3 * i - 1]", "unpack(locks)", "unpack(set)", "KEYS"},
        [
            "local locks, values = chunk_values(KEYS, 3)",
            "local n = #locks",
            "set[#set + 1] = locks[i]",
        ],
    ),
    "multi_release": (
        {"6 * i - 4", "6 * i - 3", "6 * i - 2", "6 * i - 1", "6 * i"},
        "6 * i - 5",
        {
            *("locks[i]", "done", "KEYS[6 * i - 3]", "KEYS[6 * i - 1]", "KEYS[6 * i]", "KEYS"),
            *("unpack(gone)", "unpack(markers)", "unpack(dones)"),
        },
        [
            "local locks, values = chunk_values(KEYS, 6)",
            "local n = #locks",
            "gone[#gone + 1] = locks[i]",
            "markers[#markers + 1] = KEYS[6 * i - 4]",
            "done = done or KEYS[6 * i - 2]",
            "dones[i] = KEYS[6 * i - 2]",
        ],
    ),
    "multi_extend": (
        {"n + 1"},
        "i",
        {"locks[i]", "KEYS", "done"},
        [
            "local n = tonumber(ARGV[2])",
            "local locks, values = chunk_values(KEYS, 1, n)",
            "local done = KEYS[n + 1]",
        ],
    ),
    "multi_status": (
        set(),
        "i",
        {"locks[i]", "KEYS"},
        ["local locks, values = chunk_values(KEYS, 1)", "local n = #locks"],
    ),
}
"""MultiLock's scripts, each over a chunk of n names with a fixed number of keys a name (its
stride): the KEYS indices each uses itself (name i's keys, by the loop index i over 1 .. n;
extend's done key after the names), the index of name i's lock key (chunk_values, by the
stride: KEYS[stride * (i - 1) + 1]), the key arguments of its commands and of the shared
parts' helpers (a name's KEYS entry, or a local or list filled only from them), and the
lines that fill those locals and lists (the only assignments to them)."""
_MULTI_LISTS = ("locks", "set", "gone", "markers", "dones", "done")


def check_multi_keys(name: str, code: str, header_text: str) -> None:
    """The strict check of a MultiLock script's keys (see :data:`MULTI_KEYS`)."""
    indices, lock, _, fills = MULTI_KEYS[name]
    assert set(re.findall(r"KEYS\[([^\]]*)\]", code)) == indices
    for index in (*indices, lock):  # the header names each of them
        assert f"KEYS[{index}]" in header_text, index
    stride = int(lock.split(" ")[0]) if " " in lock else 1
    assert f"chunk_values(KEYS, {stride}" in code  # name i's lock key, by that stride
    assert f"KEYS[{stride} * i]" in header_text or stride == 1
    for line in fills:
        assert re.search(rf"^\s*{re.escape(line)}\s*$", code, re.M), line
    for line in code.splitlines():  # nothing else is put in them
        target = re.match(r"^\s*(?:local )?([\w\[\]#+ ,]+?) = (.+)$", line)
        if target is None:
            continue
        names = set(re.findall(r"\b([a-z_]+)\b", re.sub(r"\[[^\]]*\]", "", target[1])))
        if names & {*_MULTI_LISTS, "n"}:
            assert line.strip() in fills or re.fullmatch(r"\{\}(, \{\})*", target[2]), line
    # the loop index: every loop over the names is "for i = 1, n do", i is set nowhere else
    assert re.findall(r"\bfor i = [^\n]*", code) == ["for i = 1, n do"] * code.count("for i =")
    assert not re.search(r"\blocal i\b|(?<![\w.])i = ", code.replace("for i = ", ""))


@pytest.mark.parametrize("name", NAMES)
def test_scripts_touch_only_keys_passed_in_keys(name: str) -> None:
    """Every command's key argument is literally ``KEYS[n]``, or a local bound to one and
    nothing else: no key is built in Lua (which would break Redis Cluster routing and could
    collide with another lock's keys)."""
    source = SCRIPTS[name].source
    family = next((f for f in FAMILY_PARTS if name.startswith(f)), None)
    parts = [FENCE_PART, RING_PART, QUEUE_PART, FAIR_PART, MULTI_PART, WAKE_PART]
    if family is not None:  # the parts' functions: checked by the tests above
        parts += [PARTS[FAMILY_PARTS[family][0]], PARTS["_acl.lua"]]
    for part in parts:
        source = source.replace(part.decode(), "")
    own = Script(name, source, "")
    code = "\n".join(code_lines(own))
    if name in MULTI_KEYS:
        key = "|".join(re.escape(k) for k in MULTI_KEYS[name][2])
    else:  # the plain check: KEYS[n] or a local bound only from one
        key = "|".join((r"KEYS\[\d+\]", *sorted(key_locals(code))))
    if family is not None:
        # no parameter shadows a key local (a callback without parameters is fine), and the
        # key arguments of the family part's functions are keys too
        assert not re.search(r"\bfunction\b[\s\w]*\((?!\))", code)
        check_helper_calls(code, helper_keys(*FAMILY_PARTS[family]), key)
    uses = _FENCE_USE.findall(code)
    for included, use in _PART_USE.items():
        if PARTS[included].decode() in SCRIPTS[name].source:
            uses += use.findall(code)
    for helper, args in uses:  # the parts' keys are the caller's KEYS
        keys = [a.strip() for a in args.split(",")]
        if helper == "held_fence":
            keys = []  # its one argument is a lock value, not a key
        elif helper in _RING_KEYS:
            keys = keys[: _RING_KEYS[helper]]  # then a fencing token
        elif helper in _PART_KEYS:
            start, end = _PART_KEYS[helper]
            keys = keys[start:end]
        assert all(re.fullmatch(key, k) for k in keys), f"{helper}({args})"
    calls = _CALL.findall(code)
    assert calls or family is not None, "no redis.call found"  # else in the family's part
    assert code.count("redis.call(") + code.count("redis.pcall(") == len(calls)
    for command, first in calls:
        if command.upper() == "TIME":  # no key
            continue
        if name == "multi_release" and command.upper() == "PUBLISH" and first.strip() == "g[1]":
            # Not a key: a freed name's waiter's process's grant channel, from its lock key
            # (KEYS), ARGV[3] and the waiter's token (_queue.lua).
            assert "local channel = grant_channel(locks[i] .. ARGV[3], head)" in code
            assert "heads[#heads + 1] = {channel, " in code
            continue
        if name in MULTI_KEYS:
            # One script over a chunk of names: name i's KEYS entries, by the loop index,
            # or a local or list filled only from them (check_multi_keys).
            first = first.strip()
            first += ")" if first.startswith("unpack(") else ""  # _CALL stops at the ")"
            assert re.fullmatch(key, first), f"{command} {first}"
            continue
        if name in ("redlock_fence", "lock_renew"):
            # Any number of keys, each read and written as KEYS[i] in one loop.
            assert first.strip() == "KEYS[i]"
            assert "for i = 1, #KEYS do" in code
            continue
        if name == "waiter_keep":
            # Four keys a waiter, any number of waiters: the parameters of keep(), given
            # KEYS[i] .. KEYS[i + 3] in one loop; `key` runs over three of them.
            assert first.strip() in {"lock", "queue", "leases", "info", "key"}, first
            assert "for i = 1, #KEYS, 4 do" in code
            assert "keep(KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], " in code
            assert "for _, key in ipairs({leases, queue, info}) do" in code
            continue
        assert re.fullmatch(key, first.strip()), f"{command} {first}"
    if name in MULTI_KEYS:
        acl = "\n".join(code_lines(Script("_acl", PARTS["_acl.lua"].decode(), "")))
        check_multi_keys(name, code.replace(acl, ""), "\n".join(header(SCRIPTS[name])))
    elif name in ("redlock_fence", "lock_renew"):
        assert set(re.findall(r"KEYS\[([^\]]*)\]", code)) == {"i"}  # the loop index only
    elif name == "waiter_keep":
        assert set(re.findall(r"KEYS\[([^\]]*)\]", code)) == {"i", "i + 1", "i + 2", "i + 3"}
    else:
        assert "KEYS[" not in re.sub(r"KEYS\[\d+\]", "", code)  # no computed indices
    assert "#KEYS" not in code or name in ("redlock_fence", "lock_renew", "waiter_keep")
    # no key prefix spelled out in Lua (the ACL refusal's message is not a key)
    assert "redislock:" not in code.replace("'NOPERM redislock: '", "")
    assert not {cmd.upper() for cmd, _ in calls} & {"KEYS", "SCAN", "SELECT", "RENAME"}


# ------------------------------------------------------------------ on the server


@pytest.fixture(scope="module")
def loader(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """A client for SCRIPT LOAD; it reads and writes no keys."""
    client = clients.sync_client(**redis_server.client_kwargs())
    yield client
    client.close()


@pytest.mark.parametrize("name", NAMES)
def test_script_load_returns_the_local_sha(loader: redis.Redis, name: str) -> None:
    script = SCRIPTS[name]
    sha = norm(loader.script_load(script.source))
    assert sha == script.sha
    assert loader.script_exists(script.sha) == [True]


# ------------------------------------------------------------------ every behaviour case


def test_every_script_has_behaviour_cases() -> None:
    assert {c.script for c in CASES} == set(SCRIPTS)
    assert len({c.id for c in CASES}) == len(CASES)


def test_lua_keys_are_hash_tagged_together() -> None:
    """The cases use the real key layout: every key of one call shares a slot."""
    slot: Callable[[str], int] = lambda k: redis.crc.key_slot(k.encode())  # noqa: E731
    for case in CASES:
        if case.script in ("lock_renew", "waiter_keep"):
            # The exceptions: the watchdog renews holds, and a process its queued waiters'
            # leases, of many names in one call (a cluster client sends one call per slot).
            continue
        assert len({slot(k) for k in (*case.keys, *case.extra)}) == 1, case.id
