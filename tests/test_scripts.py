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
        "fair": ["lease_ms", "waiter_ms", "delay_ms"],
        "multi": ["ttl_ms", "wait_ms", "done_ms"],
        "compat_acquire": ["ttl_ms", "done_ms"],
        "once_record": ["ttl_ms"],
        "latch_set": ["ttl_ms", "done_ms"],
        "latch_down": ["ttl_ms", "done_ms"],
        "barrier_enter": ["lease_ms"],
        "barrier_renew": ["lease_ms"],
        "barrier_leave": ["done_ms"],
    }
    assert durations == expected.get(name, [])


# multi.lua's key arguments: KEYS[<index of name i>], or a local holding only such keys.
_MULTI_KEY = r"KEYS\[[^\]]+\]?\]|locks\[i\]|unpack\((locks|gone|markers|dones|set)\)?|wake|done"

_CALL = re.compile(r"redis\.p?call\(\s*'(\w+)'\s*(?:,\s*([^,)]+))?")


_FENCE_USE = re.compile(
    r"\b(next_fence|peek_fence|held_fence|ring_issue|ring_mark|ring_unmark|ring_released)"
    r"\(([^)]*)\)"
)
_RING_KEYS = {"ring_issue": 1, "ring_mark": 2, "ring_unmark": 1, "ring_released": 2}
"""How many of a _ring.lua helper's first arguments are keys (the rest: a fencing token)."""


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
_KEY_BINDING = re.compile(r"^local ([\w, ]+) = (KEYS\[\d+\](?:, KEYS\[\d+\])*)[ \t]*$", re.M)


def assigned(code: str, name: str) -> int:
    """How many assignments (``name = ...``, ``a, name = ...``) have ``name`` as a target."""
    return len(re.findall(rf"(?<![\w.])(?:[\w.]+\s*,\s*)*{name}(?:\s*,\s*[\w.]+)*\s*=(?!=)", code))


def key_locals(code: str) -> set[str]:
    """The locals of a script bound from literal ``KEYS[n]`` only (``local a, b = KEYS[1],
    KEYS[2]``), and never assigned again."""
    names: set[str] = set()
    for m in _KEY_BINDING.finditer(code):
        left = [n.strip() for n in m[1].split(",")]
        assert len(left) == len(re.findall(r"KEYS\[\d+\]", m[2])), m[0]
        names |= set(left)
    for name in names:
        assert assigned(code, name) == 1, f"{name} is assigned more than once"
    return names


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


@pytest.mark.parametrize("name", NAMES)
def test_scripts_touch_only_keys_passed_in_keys(name: str) -> None:
    """Every command's key argument is literally ``KEYS[n]``: no key is built in Lua (which
    would break Redis Cluster routing and could collide with another lock's keys)."""
    source = SCRIPTS[name].source.replace(FENCE_PART.decode(), "")
    source = source.replace(RING_PART.decode(), "")
    family = next((f for f in FAMILY_PARTS if name.startswith(f)), None)
    if family is not None:  # the parts' functions: checked by the previous test
        source = source.replace(PARTS[FAMILY_PARTS[family][0]].decode(), "")
        source = source.replace(PARTS["_acl.lua"].decode(), "")
    own = Script(name, source.replace(QUEUE_PART.decode(), ""), "")
    code = "\n".join(code_lines(own))
    key = r"KEYS\[[^\]]+\]?\]" if name == "multi" else r"KEYS\[\d+\]"
    if family is not None:
        # The plain check: a key argument is KEYS[n] or a local bound only from one; so are
        # the key arguments of the family part's functions (previous test).
        # no parameter shadows a key local (a callback without parameters is fine)
        assert not re.search(r"\bfunction\b[\s\w]*\((?!\))", code)
        key = "|".join([r"KEYS\[\d+\]", *sorted(key_locals(code))])
        check_helper_calls(code, helper_keys(*FAMILY_PARTS[family]), key)
    for helper, args in _FENCE_USE.findall(code):  # _fence.lua's keys are the caller's KEYS
        keys = [a.strip() for a in args.split(",")]
        if helper == "held_fence":
            keys = []  # its one argument is a lock value, not a key
        elif helper in _RING_KEYS:
            keys = keys[: _RING_KEYS[helper]]  # then a fencing token
        assert all(re.fullmatch(key, k) for k in keys), f"{helper}({args})"
    calls = _CALL.findall(code)
    assert calls or family is not None, "no redis.call found"  # else in the family's part
    assert code.count("redis.call(") + code.count("redis.pcall(") == len(calls)
    for command, first in calls:
        if command.upper() == "TIME":  # no key
            continue
        if name == "fair" and command.upper() == "PUBLISH" and first.strip() == "channel":
            # Not a key: a waiter's process's grant channel, from the base of the name's
            # grant channels (its lock key KEYS[1] and GRANT_SUFFIX) and the waiter's token
            # (_queue.lua).
            assert "local grant = KEYS[1] .. ':grant'" in code
            assert "local channel = grant_channel(grant, head)" in code
            assert GRANT_SUFFIX == ":grant"
            continue
        if name == "multi" and command.upper() == "PUBLISH" and first.strip() == "g[1]":
            # Not a key: a freed name's waiter's process's grant channel, from its lock key
            # (KEYS), ARGV[10] and the waiter's token (_queue.lua).
            assert "local channel = grant_channel(locks[i] .. ARGV[10], head)" in code
            assert "heads[#heads + 1] = {channel, " in code
            continue
        if name == "multi":
            # The documented exception: one script over a chunk of names. Its keys are
            # KEYS entries picked by the name's index, or locals filled only from them.
            assert re.fullmatch(_MULTI_KEY, first.strip()), f"{command} {first}"
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
    if name == "multi":
        for index in re.findall(r"KEYS\[([^\]]*\]?)\]", code):
            assert re.fullmatch(r"[\d ]*[*+\- \w()\[\]#]*", index), index
            # n + 1: the done key after the names (extend with an op id)
            assert set(re.findall(r"[a-z_]+", index)) <= {"i", "stride", "ours", "j", "n"}, index
        for local in ("locks", "gone", "markers", "wake", "dones", "done", "set"):
            for value in re.findall(rf"\b{local}(?:\[[^\]]*\])? = (.+)", code):
                assert re.fullmatch(r"KEYS\[[\w *+\-()\[\]]*\]|locks\[i\]|\{\}.*", value), value
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
