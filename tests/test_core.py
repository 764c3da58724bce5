# SPDX-License-Identifier: MIT
"""Pure unit tests of ``redislock._core`` and ``redislock.errors``: no server, no I/O."""

from __future__ import annotations

import gc
import hashlib
import math
import os
import pickle
import string
import time
import unicodedata
import weakref
from typing import Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from redislock import (
    AcquireTimeoutError,
    LockConfigError,
    LockLostError,
    LockUsageError,
    NotOwnedError,
    RedisLockError,
    UnexpectedReplyError,
)
from redislock._core import codec, validate
from redislock._core import keys as keymod
from redislock._core import lock as lockmod
from redislock._core.keys import DEFAULT_PREFIX, FairKeys, HoldKeys, LockKeys
from redislock._core.lock import (
    DEFAULT_WATCHDOG_LEASE,
    HolderInfo,
    Holding,
    LockCore,
    new_token,
    process_tag,
    queue_token,
    token_tag,
)
from redislock._core.ops import Keep, as_int, as_str
from redislock._core.schedule import Schedule
from redislock._core.validate import MAX_DURATION, MAX_NAME_BYTES
from redislock._core.wake import Board, keep_op

pytestmark = pytest.mark.pythons  # dev.py's STAGES: where else it runs

# ------------------------------------------------------------------ strategies

# Control, surrogate, format (bidi overrides, zero-width) and line/paragraph separators.
_BAD_CATEGORIES: tuple[
    Literal["Cc"], Literal["Cs"], Literal["Cf"], Literal["Zl"], Literal["Zp"]
] = ("Cc", "Cs", "Cf", "Zl", "Zp")

# Text that stresses hash tags and sub-key suffixes, mixed with arbitrary printable text.
_tricky_alphabet = st.sampled_from([*"{}:ab|é日", ":fence", ":wait", ":wake", "}:"])
_tricky_text = st.lists(_tricky_alphabet, min_size=1, max_size=12).map("".join)
_any_text = st.text(st.characters(exclude_categories=_BAD_CATEGORIES), min_size=1, max_size=40)

valid_names = (
    st.one_of(_tricky_text, _any_text)
    .filter(lambda s: not s.startswith("}"))
    .filter(lambda s: len(s.encode("utf-8")) <= MAX_NAME_BYTES)
)

valid_prefixes = st.one_of(
    st.just(DEFAULT_PREFIX),
    st.text(
        st.characters(exclude_categories=_BAD_CATEGORIES, exclude_characters="{}"),
        max_size=20,
    ),
)


def is_valid_name(s: str) -> bool:
    """The documented rule, written independently of validate.check_name."""
    try:
        size = len(s.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return (
        0 < size <= MAX_NAME_BYTES
        and not s.startswith("}")
        and all(unicodedata.category(c) not in _BAD_CATEGORIES for c in s)
    )


# ------------------------------------------------------------------ validate


@settings(database=None, max_examples=60)
@given(st.floats(min_value=0.001, max_value=MAX_DURATION))
def test_to_ms_is_nearest_whole_millisecond(seconds: float) -> None:
    ms = validate.to_ms(seconds)
    assert isinstance(ms, int)
    assert ms >= 1
    assert abs(ms - seconds * 1000.0) <= 0.5


@pytest.mark.parametrize(
    ("seconds", "ms"),
    [
        (0.0, 1),
        (1e-9, 1),
        (0.0004, 1),
        (0.001, 1),
        (0.0016, 2),
        (1, 1000),
        (1.5, 1500),
        (30, 30000),
    ],
)
def test_to_ms_examples(seconds: float, ms: int) -> None:
    assert validate.to_ms(seconds) == ms


@settings(database=None, max_examples=60)
@given(st.one_of(st.floats(min_value=0.001, max_value=MAX_DURATION), st.integers(1, 10**6)))
def test_check_duration_accepts_the_valid_range(value: float) -> None:
    result = validate.check_duration("lease", value)
    assert type(result) is float
    assert result == value


@pytest.mark.parametrize(
    "value",
    [0, 0.0, -0.0, -1, 0.0009999, math.nan, math.inf, -math.inf, MAX_DURATION * 1.000001, 10**12],
)
def test_check_duration_rejects_out_of_range(value: float) -> None:
    with pytest.raises(LockConfigError, match=r"^lease "):
        validate.check_duration("lease", value)


@pytest.mark.parametrize("value", [True, False, "1", b"1", None, [1], 1j])
def test_check_duration_rejects_non_numbers(value: Any) -> None:
    with pytest.raises(LockConfigError, match=r"^lease must be a number"):
        validate.check_duration("lease", value)


def test_check_optional_duration() -> None:
    assert validate.check_optional_duration("ttl", None) is None
    assert validate.check_optional_duration("ttl", 2) == 2.0
    with pytest.raises(LockConfigError, match="ttl"):
        validate.check_optional_duration("ttl", 0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), (math.inf, None), (0, 0.0), (0.0, 0.0), (2, 2.0), (0.25, 0.25), (1e9, 1e9)],
)
def test_check_timeout_accepts(value: float | None, expected: float | None) -> None:
    result = validate.check_timeout("timeout", value)
    assert result == expected
    assert result is None or type(result) is float


@pytest.mark.parametrize("value", [-1, -0.001, -math.inf, math.nan, True, "1", b"1", [0]])
def test_check_timeout_rejects(value: Any) -> None:
    with pytest.raises(LockConfigError, match=r"^timeout "):
        validate.check_timeout("timeout", value)


@settings(database=None, max_examples=200)
@given(st.one_of(valid_names, st.text(max_size=8)))
@example("")
@example("}")
@example("a\ud800")
@example("x" * MAX_NAME_BYTES)
@example("x" * (MAX_NAME_BYTES + 1))
def test_check_name_follows_the_documented_rule(name: str) -> None:
    if is_valid_name(name):
        assert validate.check_name(name) == name
    else:
        with pytest.raises(LockConfigError, match="lock name"):
            validate.check_name(name)


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), (DEFAULT_PREFIX, True), ("p" * 256, True), ("p" * 257, False), ("a{", False),
     ("a}", False), ("a\n", False), ("\ud800", False), (None, False), (b"p", False)],
)  # fmt: skip
def test_check_prefix(value: Any, ok: bool) -> None:
    if ok:
        assert validate.check_prefix(value) == value
    else:
        with pytest.raises(LockConfigError, match="prefix"):
            validate.check_prefix(value)


@settings(database=None, max_examples=60)
@given(st.text(alphabet="0123456789abcdef", min_size=32, max_size=256))
def test_check_token_accepts_lowercase_hex(token: str) -> None:
    assert validate.check_token(token) == token


@pytest.mark.parametrize(
    "token",
    ["a" * 31, "a" * 257, "A" * 32, "g" * 32, "a" * 16 + "|" + "a" * 15, " " + "a" * 32,
     "a" * 32 + "\n", "", 123, None, b"a" * 32],
)  # fmt: skip
def test_check_token_rejects(token: Any) -> None:
    with pytest.raises(LockConfigError, match="token"):
        validate.check_token(token)


def test_new_token_is_128_random_bits_in_hex() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    for token in tokens:
        assert len(token) == 32
        assert set(token) <= set(string.hexdigits.lower())
        assert validate.check_token(token) == token


def test_queue_token_carries_the_process_tag_and_a_fresh_secret() -> None:
    tag = process_tag()
    assert len(tag) == 4
    assert set(tag) <= set(string.hexdigits.lower())
    tokens = {queue_token() for _ in range(100)}
    assert len(tokens) == 100
    for token in tokens:
        head, dot, secret = token.partition(".")
        assert (head, dot, len(secret)) == (tag, ".", 28)  # 112 random bits
        assert validate.check_token(token) == token  # adopt() takes it
        assert FairKeys.for_name("n").grant_for(token) == f"redislock:{{n}}:grant:{tag}"
    with pytest.raises(ValueError, match="process tag"):  # fair.lua publishes no grant for it
        FairKeys.for_name("n").grant_for(new_token())
    assert validate.check_token("0badcafe" + "a" * 32) == "0badcafe" + "a" * 32  # 40 hex


def test_a_forked_child_gets_a_process_tag_of_its_own() -> None:
    """The tag is drawn again in a forked child (for the child's pid), not inherited; two
    draws may still match (1 in 65,536), which only shares a channel."""
    parent = process_tag()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the pid its tag was drawn for, and the tag
        try:
            tag = process_tag()
            os.write(write, f"{lockmod._process_tag[0]} {os.getpid()} {tag}".encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        reported = os.read(read, 64).decode().split()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    drawn_for, child_pid, child = reported
    assert drawn_for == child_pid == str(pid)
    assert len(child) == 4
    assert set(child) <= set(string.hexdigits.lower())
    assert lockmod._process_tag == (os.getpid(), parent)  # the parent's is untouched


@pytest.mark.parametrize(
    "token",
    [
        "0BAD." + "a" * 32,
        "0BADCAFE." + "a" * 32,
        "0bad." + "a" * 27,
        "0bad.." + "a" * 32,
        "." + "a" * 32,
        "0123456789abcdef0." + "a" * 32,
    ],
)
def test_check_token_rejects_a_malformed_process_tag(token: str) -> None:
    with pytest.raises(LockConfigError, match="token"):
        validate.check_token(token)


def test_token_tag_is_short_stable_and_not_the_token() -> None:
    token = new_token()
    tag = token_tag(token)
    assert tag == token_tag(token)
    assert len(tag) == 8
    assert tag not in token
    assert len({token_tag(new_token()) for _ in range(100)}) >= 99


# ------------------------------------------------------------------ keys


@settings(database=None, max_examples=150)
@given(valid_names, valid_prefixes)
@example("a}b", DEFAULT_PREFIX)
@example("a{b}c", DEFAULT_PREFIX)
@example("{", DEFAULT_PREFIX)
@example("x}:fence", "")
def test_keys_round_trip_and_share_one_slot(name: str, prefix: str) -> None:
    validate.check_name(name)
    validate.check_prefix(prefix)
    keys = LockKeys.for_name(name, prefix)
    assert keys.lock == f"{prefix}{{{name}}}"
    assert LockKeys.name_of(keys.lock, prefix) == name
    subs = (keys.wait, keys.wake, keys.done)
    for sub in subs:
        assert sub.startswith(keys.lock)
        assert LockKeys.name_of(sub, prefix) is None
    # The fencing counter is the slot's: another hash tag, the same slot.
    assert keys.fence.startswith(prefix + "{")
    assert keys.fence.endswith("}:slotfence")
    assert LockKeys.name_of(keys.fence, prefix) is None
    # So is the release ring: the counter's hash tag, its own suffix.
    assert keys.ring == keys.fence.removesuffix(":slotfence") + ":slotrel"
    assert LockKeys.name_of(keys.ring, prefix) is None
    assert len({keys.lock, keys.fence, keys.ring, *subs}) == 6
    slots = {key_slot(k.encode("utf-8")) for k in (keys.lock, keys.fence, keys.ring, *subs)}
    assert len(slots) == 1
    # The hash tag is never empty: the slot is that of the text up to the first '}'.
    tag = name.split("}", 1)[0]
    assert tag
    assert slots == {key_slot(tag.encode("utf-8"))}


@settings(database=None, max_examples=150)
@given(valid_names, valid_names)
@example("a", "a}:fence")
@example("a}:fence", "a")
@example("a:fence", "a")
@example("a}", "a")
@example("a", keymod.slot_tag(key_slot(b"a")))  # a lock named like a's slot tag
@example("0", "0}:slotfence")
@example("a", "a}:slotfence")
@example("a", "a}:slotrel")
def test_keys_of_different_names_never_collide(a: str, b: str) -> None:
    """No key of one name is a key of another, but the slot's fencing counter and release
    ring, which names of one slot share; and no lock or sub-key is ever one of those."""

    def own(name: str) -> set[str]:
        k, h, f = LockKeys.for_name(name), HoldKeys.for_name(name), FairKeys.for_name(name)
        return {*k, *h, *f} - {k.fence, k.ring}  # f.grant: the grant channel

    if a == b:
        return
    fences = {LockKeys.for_name(a).fence, LockKeys.for_name(b).fence}
    rings = {LockKeys.for_name(a).ring, LockKeys.for_name(b).ring}
    assert not own(a) & own(b)
    assert not (own(a) | own(b)) & (fences | rings)
    slots = {key_slot(LockKeys.for_name(n).lock.encode()) for n in (a, b)}
    assert (len(fences) == 1) == (len(slots) == 1) == (len(rings) == 1)


def _first_tags() -> dict[int, str]:
    """The slot tags recomputed independently: each slot's first string of [0-9a-z] by
    length, then alphabet order, with Redis's own slot function (redis-py's)."""
    import itertools

    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    found: dict[int, str] = {}
    for length in range(1, 5):
        for chars in itertools.product(alphabet, repeat=length):
            tag = "".join(chars)
            found.setdefault(key_slot(tag.encode()), tag)
    return found


def test_slot_tags_are_each_slots_first_short_string() -> None:
    tags = keymod.slot_tags()
    assert len(tags) == 16384
    assert dict(enumerate(tags)) == _first_tags()
    assert keymod.slot_tags() is tags  # built once


def test_slot_tags_are_frozen() -> None:
    """The tags are wire format: every client must name the same counter for a slot. If
    this fails, the counter keys changed and a mixed fleet would issue tokens twice."""
    frozen = {
        0: "1bz",
        1: "emj",
        2: "7lw",
        5: "460",
        100: "0or",
        1000: "19w",
        1584: "3",
        4000: "fpu",
        8000: "42",
        12000: "73t",
        13907: "0",
        15495: "a",
        16383: "hia",
    }
    assert {slot: keymod.slot_tag(slot) for slot in frozen} == frozen
    assert max(len(t) for t in keymod.slot_tags()) == 4
    assert (
        hashlib.sha256(",".join(keymod.slot_tags()).encode()).hexdigest()[:16] == "7f86067662df7528"
    )


@settings(database=None, max_examples=200)
@given(valid_names, valid_prefixes)
def test_key_slot_is_redis_clusters(name: str, prefix: str) -> None:
    for key in (f"{prefix}{{{name}}}", name, f"{{{name}", f"x{{}}{name}"):
        assert keymod.key_slot(key) == key_slot(key.encode()), key


def test_fence_key_is_the_slot_tags_counter() -> None:
    assert (
        LockKeys.for_name("job").fence
        == "redislock:{" + keymod.slot_tag(key_slot(b"job")) + "}:slotfence"
    )
    assert LockKeys.for_name("job", "app:").fence.startswith("app:{")
    assert LockKeys.for_name("a}b").fence == LockKeys.for_name("a").fence  # tag "a"
    assert HoldKeys.for_name("job").fence == FairKeys.for_name("job").fence
    assert LockKeys.for_name("job").fence == keymod.fence_key("redislock:{job}")


def test_name_of_rejects_non_lock_keys() -> None:
    assert LockKeys.name_of("other:{job}") is None
    assert LockKeys.name_of("redislock:job") is None
    assert LockKeys.name_of("redislock:{job}:fence") is None
    assert LockKeys.name_of("app:{job}", "app:") == "job"
    assert LockKeys.name_of("redislock:{job}", "app:") is None


# ------------------------------------------------------------------ HolderInfo


def test_holder_info_parses_a_lock_value() -> None:
    token = new_token()
    for value in (
        f"{token}|5|host-1|4242|1700000000123",
        f"{token}|5|host-1|4242|1700000000123".encode(),
    ):
        info = HolderInfo.parse(value)
        assert info == HolderInfo(
            host="host-1", pid=4242, acquired_at=1700000000.123, token_tag=token_tag(token)
        )
        assert token not in repr(info)


@pytest.mark.parametrize(
    "value",
    ["", "garbage", "tok|host|2", "tok|x|host|2|3", "tok|1|h|2|3|4", "tok|host|pid|3",
     "tok|host|2|1.5", "tok|host|2|3", "tok|1|host|2|1.5", b"tok|host|2", b"\xff\xfe", None,
     42],
)  # fmt: skip
def test_holder_info_malformed_is_none(value: object) -> None:
    assert HolderInfo.parse(value) is None


# ------------------------------------------------------------------ codec

_hosts = st.text(st.characters(exclude_characters="|", codec="utf-8"), max_size=64)


def test_the_lock_modules_re_export_the_codec() -> None:
    from redislock._core import hold, lock

    assert lock.HolderInfo is codec.HolderInfo
    assert lock.token_tag is codec.token_tag
    assert lock.holder_meta is codec.holder_meta
    assert hold.permit_id is codec.permit_id


def test_holder_meta_names_this_process() -> None:
    import os
    import time

    before = int(time.time() * 1000)
    host, pid, acquired = codec.holder_meta().split("|")
    assert int(pid) == os.getpid()
    assert before <= int(acquired) <= int(time.time() * 1000)
    assert host.isprintable()
    assert len(host) <= 64
    assert codec.holder_meta().startswith(codec.encode_meta(host, os.getpid(), 0)[:-1])


@settings(database=None, max_examples=80)
@given(
    st.text("0123456789abcdef", min_size=32, max_size=64),
    _hosts,
    st.integers(0, 2**22),
    st.integers(0, 2**45),
    st.booleans(),
    st.integers(0, 2**53),
)
def test_lock_values_round_trip(
    token: str, host: str, pid: int, acquired_ms: int, as_bytes: bool, fence: int
) -> None:
    """``<token>|<fence>|<meta>``."""
    value = codec.encode_lock_value(token, codec.encode_meta(host, pid, acquired_ms), fence)
    stored = codec.decode_lock_value(value.encode() if as_bytes else value)
    assert stored == codec.StoredLock(token, host, pid, acquired_ms, fence)
    assert stored is not None
    assert "token" not in repr(stored)  # the owner token is a secret


@settings(database=None, max_examples=80)
@given(
    st.sampled_from(codec.HOLD_MODES),
    st.integers(1, 10**6),
    st.integers(0, 2**45),
    st.integers(1, 2**50),
    _hosts,
    st.integers(0, 2**22),
    st.booleans(),
)
def test_hold_values_round_trip(
    mode: str, count: int, expires_ms: int, fence: int, host: str, pid: int, as_bytes: bool
) -> None:
    meta = codec.encode_meta(host, pid, 1700000000123)
    value = codec.encode_hold_value(mode, count, expires_ms, fence, meta)
    stored = codec.decode_hold_value(value.encode() if as_bytes else value)
    assert stored == codec.StoredHold(mode, count, expires_ms, fence, host, pid, 1700000000123)


@pytest.mark.parametrize(
    "value",
    ["", "garbage", "w|1|2|3|h|4", "x|1|2|3|h|4|5", "w|1|2|3|h|4|5|6", "w|one|2|3|h|4|5",
     "r|1|2|3|h|pid|5", "p|1|2.5|3|h|4|5", b"\xff", None, 7, ["w", "1"]],
)  # fmt: skip
def test_malformed_hold_values_are_none(value: object) -> None:
    assert codec.decode_hold_value(value) is None


def test_token_tag_and_permit_id_are_prefixes_of_one_digest() -> None:
    token = new_token()
    assert codec.permit_id(token).startswith(codec.token_tag(token))
    assert len(codec.permit_id(token)) == 16


# ------------------------------------------------------------------ ops


def test_as_str() -> None:
    assert as_str(b"ok") == "ok"
    assert as_str("ok") == "ok"
    assert as_str("é".encode()) == "é"
    assert as_str(b"\xff") == "\ufffd"
    for bad in (1, None, 1.5, [b"ok"]):
        with pytest.raises(UnexpectedReplyError):
            as_str(bad)


def test_as_int() -> None:
    assert as_int(7) == 7
    assert as_int(-1) == -1
    assert as_int(b"42") == 42
    assert as_int("-2") == -2
    for bad in (True, False, None, 1.5, b"x", "", "1.5", [1]):
        with pytest.raises(UnexpectedReplyError):
            as_int(bad)


@settings(database=None, max_examples=60)
@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_as_int_round_trips_redis_integers(n: int) -> None:
    assert as_int(n) == as_int(str(n)) == as_int(str(n).encode()) == n


# ------------------------------------------------------------------ Schedule


class Owner:
    """A weak-referenceable stand-in for a lock object."""


def holding(fence: int = 1) -> Holding:
    return Holding(token=new_token(), fence=fence, pid=1, acquired_at=0.0, expires_at=30.0)


def test_schedule_empty() -> None:
    s: Schedule[Owner] = Schedule()
    assert len(s) == 0
    assert s.pop_due(0.0) is None


def test_schedule_pops_in_due_order() -> None:
    s: Schedule[Owner] = Schedule()
    owner = Owner()
    h1, h2, h3 = holding(1), holding(2), holding(3)
    s.add(owner, h1, 30.0)
    s.add(owner, h2, 10.0)
    s.add(owner, h3, 20.0)
    assert len(s) == 3
    assert s.pop_due(4.0) == pytest.approx(6.0)  # nothing due yet: seconds until h2
    assert s.pop_due(100.0) == (owner, h2)
    assert s.pop_due(100.0) == (owner, h3)
    assert len(s) == 1
    assert s.pop_due(25.0) == pytest.approx(5.0)
    assert s.pop_due(30.0) == (owner, h1)
    assert s.pop_due(100.0) is None
    assert len(s) == 0


def test_schedule_equal_due_times_keep_insertion_order() -> None:
    s: Schedule[Owner] = Schedule()
    owner = Owner()
    hs = [holding(i) for i in range(5)]
    for h in hs:
        s.add(owner, h, 1.0)
    popped = [s.pop_due(1.0) for _ in hs]
    assert popped == [(owner, h) for h in hs]


def test_schedule_discard_and_closing() -> None:
    s: Schedule[Owner] = Schedule()
    owner = Owner()
    h1, h2, h3 = holding(1), holding(2), holding(3)
    s.add(owner, h1, 1.0)
    s.add(owner, h2, 2.0)
    s.add(owner, h3, 3.0)
    s.discard(h1)
    assert len(s) == 2
    h2.closing = True  # being released: skipped and forgotten
    assert s.pop_due(10.0) == (owner, h3)
    assert s.pop_due(10.0) is None
    assert len(s) == 0
    s.discard(h1)  # discarding twice is harmless


def test_schedule_readding_does_not_renew_twice() -> None:
    s: Schedule[Owner] = Schedule()
    owner = Owner()
    h = holding()
    s.add(owner, h, 5.0)
    s.add(owner, h, 1.0)
    assert len(s) == 1
    assert s.pop_due(2.0) == (owner, h)
    assert s.pop_due(10.0) is None  # the stale entry at 5.0 is skipped


def test_schedule_clear() -> None:
    s: Schedule[Owner] = Schedule()
    owner = Owner()
    s.add(owner, holding(), 1.0)
    s.clear()
    assert len(s) == 0
    assert s.pop_due(10.0) is None


def test_schedule_holds_locks_weakly() -> None:
    s: Schedule[Owner] = Schedule()
    keep, drop = Owner(), Owner()
    h_keep, h_drop = holding(1), holding(2)
    s.add(drop, h_drop, 1.0)
    s.add(keep, h_keep, 2.0)
    ref = weakref.ref(drop)
    del drop
    gc.collect()
    assert ref() is None  # the schedule did not keep it alive
    assert s.pop_due(10.0) == (keep, h_keep)
    assert s.pop_due(10.0) is None
    assert len(s) == 0


def test_schedule_forgets_a_collected_lock_even_when_it_is_alone() -> None:
    s: Schedule[Owner] = Schedule()
    owner = Owner()
    s.add(owner, holding(), 1.0)
    del owner
    gc.collect()
    assert s.pop_due(0.0) is None
    assert len(s) == 0


def test_schedule_add_many_shares_one_entry_per_due_time() -> None:
    s: Schedule[Owner] = Schedule()
    owner = Owner()
    hs = [holding(i) for i in range(6)]
    lone = holding(99)
    s.add_many([(owner, h, 5.0) for h in hs[:4]] + [(owner, lone, 3.0)])
    s.add_many([(owner, h, 7.0) for h in hs[4:]])
    assert len(s._heap) == 3  # one entry per due time, not per holding
    assert len(s) == 7
    assert s.pop_due(1.0) == pytest.approx(2.0)
    assert s.pop_due(4.0) == (owner, lone)
    assert s.pop_due(4.0) == pytest.approx(1.0)  # the cohort at 5.0 is not due yet
    assert [s.pop_due(5.0) for _ in range(4)] == [(owner, h) for h in hs[:4]]  # added order
    assert s.pop_due(5.0) == pytest.approx(2.0)
    assert [s.pop_due(7.0) for _ in range(2)] == [(owner, h) for h in hs[4:]]
    assert s.pop_due(100.0) is None
    assert len(s) == 0


def test_schedule_cohort_members_discarded_rescheduled_closing_or_collected() -> None:
    s: Schedule[Owner] = Schedule()
    owner, gone = Owner(), Owner()
    hs = [holding(i) for i in range(5)]
    s.add_many([(owner, hs[0], 1.0), (owner, hs[1], 1.0), (gone, hs[2], 1.0)])
    s.add_many([(owner, hs[3], 1.0), (owner, hs[4], 1.0)])  # same due, separate call
    s.discard(hs[0])  # released: skipped when the cohort comes up
    s.add(owner, hs[1], 9.0)  # scheduled anew: renewed once, at the new time
    hs[3].closing = True
    ref = weakref.ref(gone)
    del gone
    gc.collect()
    assert ref() is None
    assert len(s) == 4
    assert s.pop_due(2.0) == (owner, hs[4])
    assert s.pop_due(2.0) == pytest.approx(7.0)
    assert s.pop_due(9.0) == (owner, hs[1])
    assert s.pop_due(100.0) is None
    assert len(s) == 0


def test_schedule_ends_when_every_cohort_member_is_discarded() -> None:
    """The async watchdog task ends once nothing is left: a cohort whose members were all
    released must not keep it waiting until the cohort's time."""
    s: Schedule[Owner] = Schedule()
    owner = Owner()
    hs = [holding(i) for i in range(3)]
    s.add_many([(owner, h, 50.0) for h in hs])
    for h in hs:
        s.discard(h)
    assert len(s) == 0
    assert s.pop_due(0.0) is None
    s.add_many([(owner, h, 60.0) for h in hs])  # and it works again afterwards
    assert s.pop_due(0.0) == pytest.approx(60.0)
    assert [s.pop_due(60.0) for _ in hs] == [(owner, h) for h in hs]


# ------------------------------------------------------------------ LockCore


def core(**kwargs: Any) -> LockCore:
    args: dict[str, Any] = {
        "ttl": None,
        "watchdog_lease": DEFAULT_WATCHDOG_LEASE,
        "renew_interval": None,
        "max_lease": None,
        "timeout": None,
        "recheck_interval": 0.5,
        "prefix": DEFAULT_PREFIX,
        "on_lost": None,
    }
    args.update(kwargs)
    return LockCore.create("job", **args)


def test_core_defaults() -> None:
    c = core()
    assert c.watchdog
    assert c.lease == DEFAULT_WATCHDOG_LEASE == 30.0
    assert c.renew_interval == pytest.approx(10.0)
    assert c.max_lease is None
    assert c.keys == LockKeys.for_name("job")
    assert c.holding is None


@settings(database=None, max_examples=60)
@given(st.floats(min_value=0.003, max_value=MAX_DURATION))
def test_default_renew_interval_is_a_third_of_the_lease(lease: float) -> None:
    assert core(watchdog_lease=lease).renew_interval == pytest.approx(lease / 3)
    fixed = core(ttl=lease)
    assert not fixed.watchdog
    assert fixed.lease == fixed.ttl == lease


def test_explicit_renew_interval_is_kept() -> None:
    assert core(watchdog_lease=10, renew_interval=5).renew_interval == 5.0
    assert core(renew_interval=1).renew_interval == 1.0


def test_a_wait_is_bounded_by_the_recheck_the_holders_ttl_and_the_deadline_only() -> None:
    """No cap from the client's socket timeout: a wait holds no connection (it is on the
    shared wake-up channel, timed by the client)."""
    c = core(recheck_interval=20.0)
    assert c._pause(20.0, -1, None, 100.0) == 20.0  # no TTL known, no deadline
    assert c._pause(20.0, 2500, None, 100.0) == pytest.approx(2.501)  # the holder's TTL
    assert c._pause(20.0, -1, 107.0, 100.0) == pytest.approx(7.0)  # the deadline
    assert c._pause(20.0, 0, 100.0, 100.0) == 0.001  # at least 1 ms


def test_renewal_seconds_without_cap_is_the_lease() -> None:
    c = core(watchdog_lease=12)
    h = Holding(token=new_token(), fence=1, pid=1, acquired_at=1000.0, expires_at=1012.0)
    for now in (1000.0, 1e6, 1e9):
        assert c.renewal_seconds(h, now) == 12.0


@pytest.mark.parametrize(
    ("now", "expected"),
    [(1000.0, 30.0), (1060.0, 30.0), (1070.0, 30.0), (1080.0, 20.0), (1099.5, 0.5),
     (1099.9995, None), (1100.0, None), (2000.0, None)],
)  # fmt: skip
def test_renewal_seconds_with_max_lease(now: float, expected: float | None) -> None:
    c = core(max_lease=100)
    h = Holding(token=new_token(), fence=1, pid=1, acquired_at=1000.0, expires_at=1030.0)
    result = c.renewal_seconds(h, now)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected)


@settings(database=None, max_examples=60)
@given(st.floats(min_value=0, max_value=200))
def test_renewal_never_outlives_max_lease(elapsed: float) -> None:
    c = core(max_lease=100)
    h = Holding(token=new_token(), fence=1, pid=1, acquired_at=1000.0, expires_at=1030.0)
    result = c.renewal_seconds(h, 1000.0 + elapsed)
    if result is not None:
        assert 0.001 <= result <= c.lease
        assert 1000.0 + elapsed + result <= 1100.0 + 1e-9


def test_renew_entry_and_renewed_follow_renew_flow() -> None:
    """The watchdog's lock_renew path: the entry sent, the outcome of each kind of reply,
    and the lease estimate from the send time."""
    c = core(watchdog_lease=12)
    t = time.monotonic()  # a failure compares the lease estimate with the clock
    h = Holding(token=new_token(), fence=1, pid=1, acquired_at=t, expires_at=t + 12)
    c.holding = h
    assert c.renew_entry(h, t + 4) == f"{h.token} 12000"
    assert c.renew_entry(h, t + 5) == f"{h.token} 12000"  # built once, kept on the hold
    assert c.renewed(h, [b"ok", 12000], t + 4) == pytest.approx((t + 8, False))
    assert h.expires_at == pytest.approx(t + 16)  # send time + TTL, not the time of the reply
    # decoded replies; a TTL the user lengthened is kept
    assert c.renewed(h, ["ok", 15000], t + 8) == pytest.approx((t + 12, False))
    assert h.expires_at == pytest.approx(t + 23)
    assert c.counters.renewals == 2
    failed = c.renewed(h, ConnectionError("down"), t + 12)  # a failure: retried soon
    assert failed[1] is False
    assert failed[0] is not None
    assert failed[0] <= h.expires_at
    unread = c.renewed(h, [b"??", 1], t + 12)  # a reply it cannot read: a failure too
    assert unread[1] is False
    assert c.counters.renewal_failures == 2
    assert not c.is_lost()
    assert c.renewed(h, [b"taken", 0], t + 12) == (None, True)  # lost, reported once
    assert h.lost
    assert "another holder" in h.lost_reason
    assert c.renew_entry(h, t + 13) == (None, False)  # lost: nothing more is sent
    h2 = Holding(token=new_token(), fence=2, pid=1, acquired_at=t + 1000, expires_at=t + 1012)
    c.holding = h2
    h2.closing = True  # being released: a "gone" is not a loss
    assert c.renewed(h2, [b"gone", 0], t + 1004) == (None, False)
    assert c.renew_entry(h2, t + 1005) == (None, False)
    capped = core(watchdog_lease=30, max_lease=100)
    h3 = Holding(token=new_token(), fence=3, pid=1, acquired_at=1000.0, expires_at=1030.0)
    capped.holding = h3
    assert capped.renew_entry(h3, 1080.0) == f"{h3.token} 20000"  # never cached: it shrinks
    assert capped.renew_entry(h3, 1090.0) == f"{h3.token} 10000"
    assert h3.renew_entry == ""


def test_lock_renew_is_for_plain_lock_kinds_only() -> None:
    from redislock._core.fair import FairCore
    from redislock._core.hold import HoldCore
    from redislock._core.multi import MultiCore
    from redislock._core.quorum import RedlockCore

    assert core().lock_renew
    assert FairCore._LOCK_RENEW
    assert not HoldCore._LOCK_RENEW
    assert not MultiCore._LOCK_RENEW
    assert not RedlockCore._LOCK_RENEW
    assert not core(replicas=1).lock_renew  # a tracked master: WAIT and run_id per write


@pytest.mark.parametrize(
    ("blocking", "timeout", "expected"),
    [
        (True, None, 7.0),
        (True, 0, 0.0),
        (True, 2.5, 2.5),
        (True, math.inf, None),
        (False, None, 0.0),
    ],
)
def test_check_acquire_args(blocking: bool, timeout: float | None, expected: float | None) -> None:
    assert core(timeout=7).check_acquire_args(blocking, timeout) == expected


def test_check_acquire_args_default_is_no_limit() -> None:
    assert core().check_acquire_args(True, None) is None


# ------------------------------------------------------------------ errors


def test_error_hierarchy() -> None:
    for cls in (AcquireTimeoutError, LockConfigError, LockLostError, LockUsageError, NotOwnedError,
                UnexpectedReplyError):  # fmt: skip
        assert issubclass(cls, RedisLockError)
    assert issubclass(RedisLockError, Exception)
    assert issubclass(LockLostError, NotOwnedError)
    assert issubclass(AcquireTimeoutError, TimeoutError)
    assert issubclass(LockConfigError, ValueError)
    assert issubclass(LockUsageError, RuntimeError)
    assert not issubclass(NotOwnedError, (ValueError, RuntimeError, TimeoutError))


@pytest.mark.parametrize(
    "error",
    [
        AcquireTimeoutError("job", 1.25),
        NotOwnedError("job", "it is not held"),
        LockLostError("job", "the lease expired"),
        LockConfigError("ttl must be > 0 seconds, got 0"),
        LockUsageError("already held"),
        UnexpectedReplyError("what?"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_pickle_round_trip(error: RedisLockError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    for attr in ("name", "waited", "reason"):
        assert getattr(copy, attr, None) == getattr(error, attr, None)


def test_error_attributes_and_messages() -> None:
    timeout = AcquireTimeoutError("job", 1.25)
    assert (timeout.name, timeout.waited) == ("job", 1.25)
    assert str(timeout) == "timed out after 1.250 s waiting for lock 'job'"
    lost = LockLostError("job", "the lease expired")
    assert (lost.name, lost.reason) == ("job", "the lease expired")
    assert "the lease expired" in str(lost)


def test_batches_group_by_client_and_split_clients_that_cannot_pipeline() -> None:
    from redislock._core.schedule import BATCH, batches

    class L:
        def __init__(self, client: object) -> None:
            self.client = client

    piped, single = object(), object()
    due = [(L(piped), holding()) for _ in range(BATCH + 3)]
    due += [(L(single), holding()) for _ in range(3)]
    groups = batches(due, lambda lock: lock.client, lambda client: client is piped)
    sizes = sorted(len(g) for g in groups)
    assert sizes == [1, 1, 1, 3, BATCH]
    for g in groups:
        assert len({id(lock.client) for lock, _ in g}) == 1


# ------------------------------------------------------------------ the waiter keep (no I/O)


def _keep(name: str, every: float = 0.3, checked: float = 0.0) -> Keep:
    k = FairKeys.for_name(name)
    return Keep((k.lock, k.queue, k.leases, k.info), "t" * 32, 900, every, f"tag-{name}", checked)


def test_keeps_fall_into_step_and_one_call_renews_them_all() -> None:
    board = Board()
    keeps = [_keep(f"n{i}", checked=i * 0.1) for i in range(3)]  # queued 0.1 s apart
    for i, keep in enumerate(keeps):
        _, w = board.begin(f"ch{i}", keep.tag, 0, keep)
        assert w is not None
        assert w.keep is keep
    groups, nxt = board.keeps_due(0.29)  # nothing due yet (first due at 0.3)
    assert groups == []
    assert nxt == pytest.approx(0.3)
    groups, nxt = board.keeps_due(0.3)  # one due: all due before the next round go too
    assert [len(g) for g in groups] == [3]
    assert [k.due for k in keeps] == pytest.approx([0.6, 0.6, 0.6])
    assert nxt == pytest.approx(0.6)
    op = keep_op(groups[0])
    assert op.script.name == "waiter_keep"
    assert op.keys == tuple(key for k in keeps for key in k.keys)
    assert op.args == (" ".join(f"{k.token} 900" for k in keeps),)
    # by hash slot when asked (a Cluster): one group per slot
    groups, _ = board.keeps_due(0.6, slot=lambda key: key)
    assert sorted(len(g) for g in groups) == [1, 1, 1]


def test_kept_wakes_granted_free_and_gone_waiters_and_dates_the_queued_ones() -> None:
    board = Board()
    keeps = [_keep(f"n{i}") for i in range(5)]
    waiters = []
    for i, keep in enumerate(keeps):
        _, w = board.begin(f"ch{i}", keep.tag, 0, keep)
        assert w is not None
        waiters.append(w)
    reply = [[b"queued", 0], [b"granted", 7], [b"free", 0], [b"gone", 0], ValueError("x")]
    woken = board.kept(keeps, reply, sent=5.0)
    assert woken == waiters[1:]
    assert keeps[0].checked == 5.0
    assert not waiters[0].done
    assert [w.payload for w in woken] == [
        f"{keeps[1].tag}|7",
        f"{keeps[2].tag}|0",
        f"{keeps[3].tag}|0",
        f"{keeps[4].tag}|0",
    ]
    assert list(board.keeps) == [keeps[0]]  # the woken ones are no longer kept
    woken = board.kept([keeps[0]], ConnectionError("down"), sent=6.0)  # a failed call
    assert woken == waiters[:1]
    assert waiters[0].payload == f"{keeps[0].tag}|0"
    assert board.keeps == {}
