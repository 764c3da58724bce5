# SPDX-License-Identifier: MIT
"""inspect.lua, the read-only snapshot behind ``redislock.inspect()``: its behaviour on a real
redis-server through EVAL, case by case (the case format is in ``tests/scriptcases.py``)."""

from __future__ import annotations

import pytest
import redis

from redislock._core.barrier import BARRIER_SUFFIX, MEMBERS_SUFFIX
from redislock._core.latch import LATCH_SUFFIX
from tests.scriptcases import (
    META,
    OTHER,
    SLACK,
    THIRD,
    TOKEN,
    At,
    Between,
    Case,
    Clock,
    F,
    H,
    HoldValue,
    K,
    held,
    hold,
    marker,
    run_case,
    ttl,
    waiting,
)

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

LEADER = K.lock + ":leader"  # an Election's leader key
LATCH = K.lock + LATCH_SUFFIX  # a CountDownLatch's hash
ROUND = K.lock + BARRIER_SUFFIX  # a Barrier's round
MEMBERS = ROUND + MEMBERS_SUFFIX  # its members' lease ends
INSPECT = (
    K.lock,
    K.fence,
    K.wait,
    H.rwait,
    H.permits,
    F.queue,
    F.leases,
    LEADER,
    LATCH,
    ROUND,
    MEMBERS,
)
NOTHING_APART: list[object] = [[], -2, [], -2, 0, -1]
"""The end of a reply for a name without a latch or a barrier round."""

CASES = [
    # inspect.lua: reads every key of a name, writes nothing (the after checks and the
    # "nothing outside KEYS" check show it).
    Case(
        "inspect-absent",
        "inspect",
        INSPECT,
        (),
        ["none", None, [], -2, None, 0, 0, None, [], [], Clock(0, SLACK), None, *NOTHING_APART],
    ),
    Case(
        "inspect-lock-with-waiter-marker",
        "inspect",
        INSPECT,
        (),
        [
            "string",
            f"{TOKEN}|1|{META}",
            [],
            Between(5000 - SLACK, 5000),
            "3",
            1,
            0,
            None,
            [],
            [],
            Clock(0, SLACK),
            None,
            *NOTHING_APART,
        ],
        setup=[held(), ("SET", K.fence, 3), marker(K.wait)],
        after=[(("GET", K.lock), f"{TOKEN}|1|{META}"), (("GET", K.fence), "3")],
    ),
    Case(
        "inspect-lock-without-ttl",
        "inspect",
        INSPECT,
        (),
        [
            "string",
            f"{TOKEN}|1|{META}",
            [],
            -1,
            None,
            0,
            0,
            None,
            [],
            [],
            Clock(0, SLACK),
            None,
            *NOTHING_APART,
        ],
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
            None,
            *NOTHING_APART,
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
            f"{TOKEN}|1|{META}",
            [],
            Between(5000 - SLACK, 5000),
            "7",
            0,
            0,
            None,
            [OTHER, THIRD],
            [THIRD, Clock(-5, -5), OTHER, Clock(1000, 1000)],
            Clock(0, SLACK),
            None,
            *NOTHING_APART,
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
        ["list", None, [], -1, None, 0, 0, None, [], [], Clock(0, SLACK), None, *NOTHING_APART],
        setup=[("RPUSH", K.lock, "x")],
        after=[(("LRANGE", K.lock, 0, -1), ["x"])],
    ),
    Case(
        "inspect-an-election-reads-its-leader-key",
        "inspect",
        INSPECT,
        (),
        [
            "string",
            f"{TOKEN}|1|{META}",
            [],
            Between(5000 - SLACK, 5000),
            "1",
            0,
            0,
            None,
            [],
            [],
            Clock(0, SLACK),
            "1|node-a|10.0.0.7:8080",
            *NOTHING_APART,
        ],
        setup=[held(), ("SET", K.fence, 1), ("SET", LEADER, "1|node-a|10.0.0.7:8080", "PX", 20000)],
        after=[(("GET", LEADER), "1|node-a|10.0.0.7:8080")],
    ),
    Case(
        "inspect-a-latch-and-a-barrier-round",
        "inspect",
        INSPECT,
        (),
        [
            "none",
            None,
            [],
            -2,
            "9",
            0,
            0,
            None,
            [],
            [],
            Clock(0, SLACK),
            None,
            ["count", "2", "gen", "9", "since", "4"],
            Between(7000 - SLACK, 7000),
            ["gen", "8", "state", "enter", "parties", "3"],
            Between(9000 - SLACK, 9000),
            2,  # the ended lease is no live member
            Between(4000 - SLACK, 4000),
        ],
        setup=[
            ("SET", K.fence, 9),
            ("HSET", LATCH, "count", 2, "gen", 9, "since", 4),
            ("PEXPIRE", LATCH, 7000),
            ("HSET", ROUND, "gen", 8, "state", "enter", "parties", 3),
            ("PEXPIRE", ROUND, 9000),
            ("ZADD", MEMBERS, At(4000), OTHER, At(9000), THIRD, At(-10), TOKEN),
        ],
        after=[(("ZCARD", MEMBERS), 3), (("HGET", LATCH, "count"), "2")],  # read only
    ),
    Case(
        "inspect-keys-apart-of-another-type-are-not-read",
        "inspect",
        INSPECT,
        (),
        [
            "none",
            None,
            [],
            -2,
            None,
            0,
            0,
            None,
            [],
            [],
            Clock(0, SLACK),
            None,
            [],
            -1,
            [],
            -1,
            0,
            -1,
        ],
        setup=[("SET", LATCH, "x"), ("SET", ROUND, "y"), ("SET", MEMBERS, "z")],
        after=[(("GET", LATCH), "x")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)
