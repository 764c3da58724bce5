# SPDX-License-Identifier: MIT
"""The scripts of the redis-py drop-ins (redislock.compat): compat_acquire, and
lock_release / lock_extend in their "exact" ownership mode (redis-py's format: the value is
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
CACQ = (C.lock, C.fence, C.done)
OP = "0123456789abcdef"  # this acquire call's op id
CREL = (C.lock, C.wait, C.wake, C.done)

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
            (("GET", C.done), f"{TOKEN}|acq|{OP}"),  # what a retry of this call finds
            (("PTTL", C.done), Between(DONE_MS - 1000, DONE_MS)),
        ],
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
        ["ok", 4],
        setup=[
            ("SET", C.lock, TOKEN, "PX", 100),
            ("SET", C.fence, 4),
            ("SET", C.done, f"{TOKEN}|acq|{OP}", "PX", 50000),
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
        "lock_release",
        CREL,
        (TOKEN, DONE_MS, "exact", f"{TOKEN}|rel|{OP}"),
        "ok",
        setup=[("SET", C.lock, TOKEN, "PX", 5000)],
        after=[
            (("EXISTS", C.lock), 0),
            (("GET", C.done), f"{TOKEN}|rel|{OP}"),
            (("PTTL", C.done), Between(DONE_MS - 1000, DONE_MS)),
        ],
    ),
    Case(
        "release-exact-sent-again-answers-ok",
        "lock_release",
        CREL,
        (TOKEN, DONE_MS, "exact", f"{TOKEN}|rel|{OP}"),
        "ok",
        setup=[("SET", C.done, f"{TOKEN}|rel|{OP}", "PX", 50000)],
        after=[(("EXISTS", C.lock), 0)],
    ),
    Case(
        "release-exact-fresh-does-not-trust-the-memo",  # the native try just wrote it
        "lock_release",
        CREL,
        (TOKEN, DONE_MS, "exact", f"{TOKEN}|rel|{OP}", "fresh"),
        "gone",
        setup=[("SET", C.done, f"{TOKEN}|rel|{OP}", "PX", 50000)],
    ),
    Case(
        "release-exact-fresh-taken",
        "lock_release",
        CREL,
        (TOKEN, DONE_MS, "exact", f"{TOKEN}|rel|{OP}", "fresh"),
        "taken",
        setup=[("SET", C.done, f"{TOKEN}|rel|{OP}", "PX", 50000), ("SET", C.lock, "x", "PX", 5000)],
        after=[(("GET", C.lock), "x")],
    ),
    Case(
        "release-exact-of-a-later-hold-with-the-same-token-is-gone",  # not the memo's hold
        "lock_release",
        CREL,
        (TOKEN, DONE_MS, "exact", f"{TOKEN}|rel|{OP}"),
        "gone",
        setup=[("SET", C.done, f"{TOKEN}|rel|fedcba9876543210", "PX", 50000)],
    ),
    Case(
        "release-exact-token-prefix-is-not-ownership",
        "lock_release",
        CREL,
        (TOKEN, DONE_MS, "exact"),
        "taken",
        setup=[("SET", C.lock, f"{TOKEN}|x", "PX", 5000)],
        after=[(("GET", C.lock), f"{TOKEN}|x"), (("EXISTS", C.done), 0)],
    ),
    Case(
        "release-exact-gone",
        "lock_release",
        CREL,
        (TOKEN, DONE_MS, "exact"),
        "gone",
        after=[(("EXISTS", C.done), 0)],
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
