# SPDX-License-Identifier: MIT
"""latch_set.lua, latch_down.lua, latch_read.lua (a ``CountDownLatch``'s count and
generation, ``_latch.lua``): their behaviour on a real redis-server through EVAL, case by
case (the case format is in ``tests/scriptcases.py``): a set starts a generation from the
slot's fencing counter only when nothing counts, a count-down never goes below zero and
publishes at zero, every write sets the TTL, a call sent again counts once, and bad input or
a foreign hash is refused before any write."""

from __future__ import annotations

import pytest
import redis

from redislock._core.latch import LATCH_SUFFIX
from tests.scriptcases import SLACK, Arg, At, Between, Case, Clock, Error, K, absent, run_case

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

L = K.lock + LATCH_SUFFIX
D = L + ":done"
SET_KEYS = (L, D, K.fence)
DOWN_KEYS = (L, D)
ID = "a1b2c3d4e5f60718"
TTL = 10_000
DONE = 60_000


def set_args(count: int | str = 3, op_id: str = ID, ttl_ms: int = TTL) -> tuple[Arg, ...]:
    return (op_id, count, ttl_ms, DONE)


def down_args(op_id: str = ID, ttl_ms: int = TTL) -> tuple[Arg, ...]:
    return (op_id, ttl_ms, DONE)


def latch(count: int, gen: int, since: int, px: int = 5000) -> list[tuple[Arg, ...]]:
    """Setup: a latch with ``count`` left of generation ``gen`` (for ``px`` ms more)."""
    return [("HSET", L, "count", count, "gen", gen, "since", since), ("PEXPIRE", L, px)]


def state(count: int, gen: int, since: int) -> list[tuple[tuple[Arg, ...], object]]:
    return [(("HGETALL", L), {"count": str(count), "gen": str(gen), "since": str(since)})]


FRESH_TTL = [(("PTTL", L), Between(TTL - SLACK, TTL))]
REMEMBERED = [
    (("ZSCORE", D, ID), Clock(-SLACK, SLACK)),
    (("PTTL", D), Between(DONE - SLACK, DONE)),
]

CASES = [
    # ---- set
    Case(
        "latch-set-starts-a-generation-from-the-slot-counter",
        "latch_set",
        SET_KEYS,
        set_args(3),
        ["ok", 3, 1],
        after=[*state(3, 1, 1), *FRESH_TTL, (("GET", K.fence), "1"), *REMEMBERED],
    ),
    Case(
        "latch-set-is-refused-while-counting",
        "latch_set",
        SET_KEYS,
        set_args(3),
        ["busy", 2, 5],
        setup=latch(2, 5, 5),
        after=[
            *state(2, 5, 5),
            (("PTTL", L), Between(5000 - SLACK, 5000)),  # not refreshed
            *absent(K.fence, D),
        ],
    ),
    Case(
        "latch-set-after-zero-is-a-new-generation-that-keeps-since",
        "latch_set",
        SET_KEYS,
        set_args(4),
        ["ok", 4, 8],
        setup=[*latch(0, 5, 3), ("SET", K.fence, 7)],
        after=[*state(4, 8, 3), *FRESH_TTL, (("GET", K.fence), "8"), *REMEMBERED],
    ),
    Case(
        "latch-set-sent-again-counts-once",
        "latch_set",
        SET_KEYS,
        set_args(3),
        ["ok", 3, 5],
        setup=[*latch(3, 5, 5), ("ZADD", D, At(-100), ID), ("PEXPIRE", D, DONE)],
        after=[*state(3, 5, 5), *absent(K.fence)],
    ),
    # ---- down
    Case(
        "latch-down-counts-one-and-refreshes-the-ttl",
        "latch_down",
        DOWN_KEYS,
        down_args(),
        ["ok", 2, 5],
        setup=latch(3, 5, 5, px=1000),
        after=[*state(2, 5, 5), *FRESH_TTL, *REMEMBERED],
    ),
    Case(
        "latch-down-to-zero-publishes-the-generation",
        "latch_down",
        DOWN_KEYS,
        down_args(),
        ["ok", 0, 5],
        setup=latch(1, 5, 5),
        after=[*state(0, 5, 5), *FRESH_TTL, (("PUBLISHED", L), ["Z|5"]), *REMEMBERED],
    ),
    Case(
        "latch-down-of-a-finished-latch-does-nothing",
        "latch_down",
        DOWN_KEYS,
        down_args(),
        ["none", 0, 5],
        setup=latch(0, 5, 5),
        after=[*state(0, 5, 5), (("PTTL", L), Between(5000 - SLACK, 5000)), *absent(D)],
    ),
    Case(
        "latch-down-of-no-latch-does-nothing",
        "latch_down",
        DOWN_KEYS,
        down_args(),
        ["none", 0, 0],
        after=absent(L, D),
    ),
    Case(
        "latch-down-sent-again-counts-once",
        "latch_down",
        DOWN_KEYS,
        down_args(),
        ["ok", 2, 5],
        setup=[*latch(2, 5, 5), ("ZADD", D, At(-100), ID), ("PEXPIRE", D, DONE)],
        after=state(2, 5, 5),
    ),
    Case(
        "latch-down-forgets-op-ids-older-than-done-ms",
        "latch_down",
        DOWN_KEYS,
        down_args(),
        ["ok", 2, 5],
        setup=[*latch(3, 5, 5), ("ZADD", D, At(-DONE - 5000), "0ld0"), ("PEXPIRE", D, DONE)],
        after=[*state(2, 5, 5), (("ZSCORE", D, "0ld0"), None), *REMEMBERED],
    ),
    # ---- read
    Case(
        "latch-read",
        "latch_read",
        (L,),
        (),
        [2, 5, 4, Between(5000 - SLACK, 5000)],
        setup=latch(2, 5, 4),
    ),
    Case("latch-read-nothing", "latch_read", (L,), (), [0, 0, 0, -2]),
    # ---- refused before anything is written
    Case(
        "latch-a-hash-not-written-by-redislock-is-refused",
        "latch_down",
        DOWN_KEYS,
        down_args(),
        Error("redislock - "),
        setup=[("HSET", L, "count", "many")],
        after=[(("HGETALL", L), {"count": "many"}), *absent(D)],
    ),
    Case(
        "latch-read-of-a-hash-not-written-by-redislock-is-refused",
        "latch_read",
        (L,),
        (),
        Error("is not a CountDownLatch"),
        setup=[("HSET", L, "gen", "1")],
    ),
    Case(  # was latch-unknown-op: a script per op takes no op argument
        "latch-an-op-id-must-be-hex",
        "latch_down",
        DOWN_KEYS,
        down_args(op_id="not hex"),
        Error("redislock latch: bad arguments for down"),
        setup=latch(2, 5, 5),
        after=[*state(2, 5, 5), *absent(D)],
    ),
    Case(
        "latch-a-zero-count-is-refused",
        "latch_set",
        SET_KEYS,
        set_args(0),
        Error("redislock latch: bad arguments for set"),
        after=absent(L, D, K.fence),
    ),
    Case(
        "latch-a-zero-ttl-is-refused",
        "latch_down",
        DOWN_KEYS,
        down_args(ttl_ms=0),
        Error("redislock latch: bad arguments for down"),
        setup=latch(2, 5, 5),
        after=state(2, 5, 5),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)
