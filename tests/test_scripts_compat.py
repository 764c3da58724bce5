# SPDX-License-Identifier: MIT
"""The scripts of the redis-py drop-ins (redislock.compat): compat_acquire,
compat_release, and lock_extend in its "exact" ownership mode (redis-py's format: the value is
the token), case by case on a real redis-server through EVAL (the case format is in
``tests/scriptcases.py``)."""

from __future__ import annotations

import pytest
import redis

from redislock._core.compat import compat_keys
from redislock._core.lock import DONE_MS
from tests.scriptcases import OTHER, TOKEN, Between, Case, run_case

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

C = compat_keys("job")
CACQ = (C.lock, C.fence, C.done, C.ring)
OP = "0123456789abcdef"  # this acquire call's op id
CREL = (C.lock, C.ring, C.fence)
RING = 8192  # _ring.lua's RING: tokens per slot whose release is remembered

CASES = [
    # ---------------------------------------------------------------- compat_acquire
    Case(
        "compat-acquire-free",
        "compat_acquire",
        CACQ,
        (TOKEN, 10000, OP, DONE_MS),
        ["ok", 1],
        after=[
            (("GET", C.lock), TOKEN),  # redis-py's value: the token alone
            (("PTTL", C.lock), Between(9000, 10000)),
            (("GET", C.fence), "1"),
            (("PTTL", C.fence), -1),  # the slot counter never expires
            (("GET", C.done), f"{TOKEN}|acq|{OP}|1"),  # what a retry of this call finds
            (("PTTL", C.done), Between(DONE_MS - 1000, DONE_MS)),
        ],
    ),
    Case(
        "compat-acquire-clears-its-tokens-bit",  # it may hold the release of fence 5 - RING
        "compat_acquire",
        CACQ,
        (TOKEN, 10000, OP, DONE_MS),
        ["ok", 5],
        setup=[("SET", C.fence, 4), ("SETBIT", C.ring, 5, 1), ("SETBIT", C.ring, 4, 1)],
        after=[(("GETBIT", C.ring, 5), 0), (("GETBIT", C.ring, 4), 1)],
    ),
    Case(
        "compat-acquire-busy-writes-nothing",
        "compat_acquire",
        CACQ,
        (TOKEN, 10000, OP, DONE_MS),
        ["busy", Between(4000, 5000)],
        setup=[("SET", C.lock, OTHER, "PX", 5000), ("SET", C.fence, 4)],
        after=[(("GET", C.lock), OTHER), (("GET", C.fence), "4")],  # no token burnt
    ),
    Case(
        "compat-acquire-busy-without-ttl-says-so",  # a redis-py Lock with timeout=None
        "compat_acquire",
        CACQ,
        (TOKEN, 10000, OP, DONE_MS),
        ["busy", -1],
        setup=[("SET", C.lock, OTHER)],
        after=[(("GET", C.lock), OTHER), (("PTTL", C.lock), -1)],
    ),
    Case(
        "compat-acquire-repeat-of-own-hold-sets-the-ttl-again",  # a retry after a lost reply
        "compat_acquire",
        CACQ,
        (TOKEN, 10000, OP, DONE_MS),
        ["ok", 2],  # the token first issued (its release sets that token's bit)
        setup=[
            ("SET", C.lock, TOKEN, "PX", 100),
            ("SET", C.fence, 4),
            ("SET", C.done, f"{TOKEN}|acq|{OP}|2", "PX", 50000),
        ],
        after=[(("PTTL", C.lock), Between(9000, 10000)), (("GET", C.fence), "4")],
    ),
    Case(
        "compat-acquire-same-token-of-another-call-is-busy",  # a caller's token, reused
        "compat_acquire",
        CACQ,
        (TOKEN, 10000, OP, DONE_MS),
        ["busy", Between(4000, 5000)],
        setup=[
            ("SET", C.lock, TOKEN, "PX", 5000),
            ("SET", C.done, f"{TOKEN}|acq|fedcba9876543210", "PX", 50000),
        ],
        after=[(("PTTL", C.lock), Between(4000, 5000))],  # not renewed: not this call's
    ),
    Case(
        "compat-acquire-same-token-of-a-redis-py-lock-is-busy",  # no memo at all
        "compat_acquire",
        CACQ,
        (TOKEN, 10000, OP, DONE_MS),
        ["busy", -1],
        setup=[("SET", C.lock, TOKEN)],
        after=[(("PTTL", C.lock), -1), (("EXISTS", C.done), 0)],
    ),
    Case(
        "compat-acquire-token-prefix-is-not-ownership",
        "compat_acquire",
        CACQ,
        (TOKEN, 10000, OP, DONE_MS),
        ["busy", Between(4000, 5000)],
        setup=[("SET", C.lock, f"{TOKEN}|1|h|1|2", "PX", 5000)],
        after=[(("GET", C.lock), f"{TOKEN}|1|h|1|2")],
    ),
    # ---------------------------------------------------------------- exact release
    Case(
        "release-exact-own",
        "compat_release",
        CREL,
        (TOKEN, 3),
        "ok",
        setup=[("SET", C.lock, TOKEN, "PX", 5000), ("SET", C.fence, 3)],
        after=[(("EXISTS", C.lock), 0), (("GETBIT", C.ring, 3), 1), (("EXISTS", C.done), 0)],
    ),
    Case(
        "release-exact-sent-again-answers-ok",  # the first send worked: its bit is set
        "compat_release",
        CREL,
        (TOKEN, 3),
        "ok",
        setup=[("SET", C.fence, 9), ("SETBIT", C.ring, 3, 1), ("SET", C.lock, OTHER, "PX", 5000)],
        after=[(("GET", C.lock), OTHER)],
    ),
    Case(
        "release-exact-sent-again-for-a-lost-hold-is-gone",  # no bit: it was never released
        "compat_release",
        CREL,
        (TOKEN, 3),
        "gone",
        setup=[("SET", C.fence, 9), ("SETBIT", C.ring, 4, 1)],
    ),
    Case(
        "release-exact-sent-again-beyond-the-window-cannot-tell",  # a newer token's bit
        "compat_release",
        CREL,
        (TOKEN, 3),
        "taken",
        setup=[
            ("SET", C.fence, RING + 3),
            ("SETBIT", C.ring, 3, 1),
            ("SET", C.lock, OTHER, "PX", 5000),
        ],
    ),
    Case(
        "release-exact-of-an-old-hold-sets-no-bit",  # beyond the window: not its own bit
        "compat_release",
        CREL,
        (TOKEN, 3),
        "ok",
        setup=[("SET", C.lock, TOKEN, "PX", 5000), ("SET", C.fence, RING + 3)],
        after=[(("EXISTS", C.lock), 0), (("GETBIT", C.ring, 3), 0)],
    ),
    Case(
        "release-exact-token-prefix-is-not-ownership",
        "compat_release",
        CREL,
        (TOKEN, 0),
        "taken",
        setup=[("SET", C.lock, f"{TOKEN}|x", "PX", 5000)],
        after=[(("GET", C.lock), f"{TOKEN}|x"), (("EXISTS", C.ring), 0)],
    ),
    Case(
        "release-exact-gone",
        "compat_release",
        CREL,
        (TOKEN, 0),
        "gone",
        after=[(("EXISTS", C.ring), 0)],
    ),
    # ---------------------------------------------------------------- exact extend
    Case(
        "extend-exact-set",
        "lock_extend",
        (C.lock,),
        (TOKEN, 20000, "set", "", 0, "exact"),
        ["ok", 20000],
        setup=[("SET", C.lock, TOKEN, "PX", 5000)],
        after=[(("PTTL", C.lock), Between(19000, 20000)), (("GET", C.lock), TOKEN)],
    ),
    Case(
        "extend-exact-add-once-per-op-id",
        "lock_extend",
        (C.lock, C.done),
        (TOKEN, 10000, "add", "op1", DONE_MS, "exact"),
        ["ok", Between(4000, 5000)],  # already applied: the TTL now, nothing added
        setup=[("SET", C.lock, TOKEN, "PX", 5000), ("SET", C.done, f"{TOKEN}|op1", "PX", 50000)],
        after=[(("PTTL", C.lock), Between(4000, 5000))],
    ),
    Case(
        "extend-exact-taken",
        "lock_extend",
        (C.lock,),
        (TOKEN, 20000, "set", "", 0, "exact"),
        ["taken", 0],
        setup=[("SET", C.lock, OTHER, "PX", 5000)],
        after=[(("PTTL", C.lock), Between(4000, 5000))],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)
