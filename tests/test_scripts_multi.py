# SPDX-License-Identifier: MIT
"""multi_acquire.lua, multi_release.lua, multi_extend.lua and multi_status.lua, MultiLock
over names of one slot: their behaviour on a real redis-server through EVAL, case by case
(the case format is in ``tests/scriptcases.py``)."""

from __future__ import annotations

import re

import pytest
import redis

from redislock._core.keys import FairKeys
from redislock._core.lock import DONE_MS
from redislock._core.multi import MultiCore
from redislock._core.scripts import SCRIPTS
from tests.scriptcases import (
    M1,
    M2,
    MACQ,
    META,
    MLOCKS,
    MREL,
    OTHER,
    Q2,
    QFOURTH,
    QOTHER,
    QTHIRD,
    SLACK,
    TAGGED,
    THIRD,
    TOKEN,
    At,
    Between,
    Case,
    Error,
    absent,
    base_core,
    macq,
    marker,
    mheld,
    multi_args,
    run_case,
    woken,
)

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

CASES = [
    # ---------------------------------------------------------------- multi: acquire
    Case(
        "multi-acquire-takes-every-name",
        "multi_acquire",
        MACQ,
        macq(),
        ["ok", 42, 43],  # one slot, one counter: each name gets the next token
        setup=[("SET", M1.fence, 41)],
        after=[
            (("GET", M1.lock), f"{TOKEN}|42|{META}"),  # exactly Lock's value and TTL
            (("PTTL", M1.lock), Between(9000, 10000)),
            (("GET", M2.lock), f"{TOKEN}|43|{META}"),
            (("PTTL", M2.lock), Between(9000, 10000)),
            (("GET", M2.fence), "43"),
            (("PTTL", M2.fence), -1),  # fence counters never expire
            *absent(M1.wait, M2.wait),
        ],
    ),
    Case(
        "multi-acquire-busy-takes-nothing",
        "multi_acquire",
        MACQ,
        macq(marker_ms=0),
        ["busy", Between(4000, 5000), 2],
        setup=[mheld(M2, OTHER), ("SET", M1.fence, 7)],
        after=[
            (("GET", M2.lock), f"{OTHER}|1|{META}"),
            (("GET", M1.fence), "7"),  # no fencing token burnt
            *absent(M1.lock, M1.wait, M2.wait),
        ],
    ),
    Case(
        "multi-acquire-busy-waiting-marks-the-busy-name",
        "multi_acquire",
        MACQ,
        macq(marker_ms=1500),
        ["busy", Between(4000, 5000), 2],
        setup=[mheld(M2, OTHER)],
        after=[
            (("GET", M2.wait), "1"),
            (("PTTL", M2.wait), Between(1000, 1500)),
            *absent(M1.lock, M1.fence, M1.wait),
        ],
    ),
    Case(
        "multi-acquire-retry-keeps-its-fence",
        "multi_acquire",
        MACQ,
        macq(),
        ["ok", 3, 10],
        setup=[mheld(M1, fence=3), ("SET", M1.fence, 9)],
        after=[(("GET", M1.fence), "10"), (("GET", M2.lock), f"{TOKEN}|10|{META}")],
    ),
    Case(
        "multi-acquire-sent-again-renews-the-ttl",
        "multi_acquire",
        MACQ,
        macq(),
        ["ok", 3, 4],
        setup=[
            mheld(M1, px=2000, fence=3),
            mheld(M2, px=2000, fence=4),
            ("SET", M1.fence, 8),
        ],
        after=[
            (("PTTL", M1.lock), Between(9000, 10000)),  # the lease runs from the retry
            (("PTTL", M2.lock), Between(9000, 10000)),
            (("GET", M1.fence), "8"),  # each name's own token: nothing issued
        ],
    ),
    Case(
        "multi-acquire-key-without-ttl",
        "multi_acquire",
        MACQ,
        macq(marker_ms=0),
        ["busy", -1, 2],
        setup=[("SET", M2.lock, "not ours")],
        after=[(("GET", M2.lock), "not ours"), *absent(M1.lock, M1.fence)],
    ),
    Case(
        "multi-acquire-other-kind-is-wrongtype",
        "multi_acquire",
        MACQ,
        macq(),
        Error(f"wrong kind of value (redislock key: {M2.lock})"),  # names the key
        setup=[("HSET", M2.lock, OTHER, "w|1|0|1|x")],
        after=absent(M1.lock, M1.fence),
    ),
    # ---------------------------------------------------------------- multi: release
    Case(
        "multi-release-all-wakes-each-waited-name",
        "multi_release",
        MREL,
        multi_args("release"),
        ["ok", 2, 0],
        setup=[mheld(M1), mheld(M2), marker(M2.wait)],
        after=[
            *absent(M1.lock, M2.lock, M1.wake, M2.done),
            *woken(M2.wake),
            (("GET", M1.done), f"{TOKEN}|rel|ok|2|0"),  # one memo per chunk
            (("PTTL", M1.done), Between(DONE_MS - SLACK, DONE_MS)),
        ],
    ),
    Case(
        "multi-release-wakes-the-first-live-queued-waiter",
        "multi_release",
        MREL,
        multi_args("release"),
        ["ok", 2, 0],
        setup=[
            mheld(M1),
            mheld(M2),
            ("RPUSH", Q2.queue, QOTHER, QTHIRD, QFOURTH),
            ("ZADD", Q2.leases, At(-10), QOTHER),  # dead: its waiter lease has ended
            ("ZADD", Q2.leases, At(1000), QTHIRD),
            ("ZADD", Q2.leases, At(1000), QFOURTH),
        ],
        after=[
            # one wake-up, tagged for the first live waiter only: not a grant ("try again")
            (("PUBLISHED", Q2.grant_for(QTHIRD)), [f"{FairKeys.tag(QTHIRD)}|0"]),
            (("LRANGE", Q2.queue, 0, -1), [QOTHER, QTHIRD, QFOURTH]),  # the queue's scripts tidy it
            *absent(M1.lock, M2.lock),
        ],
    ),
    Case(
        "multi-release-wakes-the-queued-waiter-on-its-process-channel",
        "multi_release",
        MREL,
        multi_args("release"),
        ["ok", 2, 0],
        setup=[
            mheld(M1),
            mheld(M2),
            ("RPUSH", Q2.queue, TAGGED, QTHIRD),
            ("ZADD", Q2.leases, At(1000), TAGGED),
            ("ZADD", Q2.leases, At(1000), QTHIRD),
        ],
        after=[
            *absent(M1.lock, M2.lock),
            (("PUBLISHED", Q2.grant_for(TAGGED)), [f"{FairKeys.tag(TAGGED)}|0"]),
        ],
    ),
    Case(
        # A queued token without a process tag has no channel: no wake-up is published
        # (run_case checks every channel), and the release is whole all the same.
        "multi-release-wakes-no-queued-token-without-a-process-tag",
        "multi_release",
        MREL,
        multi_args("release"),
        ["ok", 2, 0],
        setup=[
            mheld(M1),
            mheld(M2),
            ("RPUSH", Q2.queue, THIRD),
            ("ZADD", Q2.leases, At(1000), THIRD),
        ],
        after=[*absent(M1.lock, M2.lock), (("LRANGE", Q2.queue, 0, -1), [THIRD])],
    ),
    Case(
        "multi-release-sent-again-answers-as-the-first",
        "multi_release",
        MREL,
        multi_args("release"),
        ["taken", 1, 2],
        setup=[mheld(M2, OTHER), ("SET", M1.done, f"{TOKEN}|rel|taken|1|2", "PX", 50000)],
        after=[(("GET", M2.lock), f"{OTHER}|1|{META}"), *absent(M1.lock, M1.wake, M2.wake)],
    ),
    Case(
        "multi-release-sent-again-after-another-took-a-name-answers-ok",
        "multi_release",
        MREL,
        multi_args("release"),
        ["ok", 2, 0],
        setup=[mheld(M1, OTHER), ("SET", M2.done, f"{TOKEN}|rel|ok|2|0", "PX", 50000)],
        after=[(("GET", M1.lock), f"{OTHER}|1|{META}")],
    ),
    Case(
        "multi-release-another-tokens-memo-is-gone",
        "multi_release",
        MREL,
        multi_args("release"),
        ["gone", 0, 1],
        setup=[("SET", M1.done, f"{OTHER}|rel|ok|2|0", "PX", 50000)],
    ),
    Case(
        "multi-release-leaves-another-owners-name",
        "multi_release",
        MREL,
        multi_args("release"),
        ["taken", 1, 2],
        setup=[mheld(M1), mheld(M2, OTHER), marker(M1.wait), marker(M2.wait)],
        after=[
            (("GET", M2.lock), f"{OTHER}|1|{META}"),
            *absent(M1.lock, M2.wake),
            *woken(M1.wake),
        ],
    ),
    Case(
        "multi-release-gone",
        "multi_release",
        MREL,
        multi_args("release"),
        ["gone", 1, 1],
        setup=[mheld(M2)],
        after=absent(M1.lock, M2.lock),
    ),
    # ---------------------------------------------------------------- multi: extend, status
    Case(
        "multi-extend-add",
        "multi_extend",
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
        "multi-extend-add-remembers-its-op-id",
        "multi_extend",
        (*MLOCKS, M1.done),
        multi_args("extend", ms=10000, mode="add", op_id="0123456789abcdef", done_ms=DONE_MS),
        ["ok", Between(14000, 15000), 0],
        setup=[mheld(M1), mheld(M2)],
        after=[
            (("PTTL", M2.lock), Between(14000 - SLACK, 15000)),
            (("GET", M1.done), f"{TOKEN}|0123456789abcdef"),
            (("PTTL", M1.done), Between(DONE_MS - SLACK, DONE_MS)),
        ],
    ),
    Case(
        "multi-extend-add-sent-again-adds-nothing",
        "multi_extend",
        (*MLOCKS, M1.done),
        multi_args("extend", ms=10000, mode="add", op_id="0123456789abcdef", done_ms=DONE_MS),
        ["ok", Between(4000, 5000), 0],
        setup=[
            mheld(M1),
            mheld(M2, px=8000),
            ("SET", M1.done, f"{TOKEN}|0123456789abcdef", "PX", 50000),
        ],
        after=[
            (("PTTL", M1.lock), Between(4000, 5000)),
            (("PTTL", M2.lock), Between(7000, 8000)),
        ],
    ),
    Case(
        "multi-extend-max-never-shortens",
        "multi_extend",
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
        "multi_extend",
        MLOCKS,
        multi_args("extend", ms=3000, mode="set"),
        ["ok", 3000, 0],
        setup=[mheld(M1), mheld(M2, px=20000)],
        after=[(("PTTL", M2.lock), Between(3000 - SLACK, 3000))],
    ),
    Case(
        "multi-extend-one-gone-changes-nothing",
        "multi_extend",
        MLOCKS,
        multi_args("extend", ms=10000, mode="add"),
        ["gone", 0, 2],
        setup=[mheld(M1)],
        after=[(("PTTL", M1.lock), Between(4000, 5000)), *absent(M2.lock)],
    ),
    Case(
        "multi-status-ok",
        "multi_status",
        MLOCKS,
        multi_args("status"),
        ["ok", Between(4000, 5000), 0],
        setup=[mheld(M1), mheld(M2, px=8000)],
    ),
    Case(
        "multi-status-taken",
        "multi_status",
        MLOCKS,
        multi_args("status"),
        ["taken", 0, 1],
        setup=[mheld(M1, OTHER), mheld(M2)],
    ),
    Case(
        "multi-status-gone",
        "multi_status",
        MLOCKS,
        multi_args("status"),
        ["gone", 0, 2],
        setup=[mheld(M1)],
        after=[(("GET", M1.lock), f"{TOKEN}|1|{META}"), *absent(M2.lock)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)


def test_multi_keys_and_argv_are_laid_out_as_the_core_lays_them_out() -> None:
    """The multi cases call the scripts exactly as MultiCore does."""
    base = base_core()
    core = MultiCore.from_base(base, ("job", "job}2"), "redislock:", False)
    (chunk,) = core.chunks
    op = core._op("acquire", chunk, TOKEN, ms=10000, meta=META, marker_ms=1500)
    assert op.script is SCRIPTS["multi_acquire"]
    assert (op.keys, op.args) == (MACQ, macq(marker_ms=1500))
    op = core._op("release", chunk, TOKEN)
    assert op.script is SCRIPTS["multi_release"]
    assert (op.keys, op.args) == (MREL, multi_args("release"))
    op = core._op("extend", chunk, TOKEN, ms=3000, mode="add")
    assert op.script is SCRIPTS["multi_extend"]
    op_id = str(op.args[4])
    assert re.fullmatch(r"[0-9a-f]{16}", op_id)
    assert core._op("extend", chunk, TOKEN, ms=3000, mode="add").args[4] != op_id  # per call
    expected = multi_args("extend", ms=3000, mode="add", op_id=op_id, done_ms=DONE_MS)
    assert (op.keys, op.args) == ((*MLOCKS, M1.done), expected)
    op = core._op("extend", chunk, TOKEN, ms=3000, mode="max")
    assert (op.keys, op.args) == (MLOCKS, multi_args("extend", ms=3000, mode="max"))
    op = core._op("status", chunk, TOKEN)
    assert op.script is SCRIPTS["multi_status"]
    assert (op.keys, op.args) == (MLOCKS, multi_args("status"))
