# SPDX-License-Identifier: MIT
"""multi.lua, MultiLock over names of one slot: its behaviour on a real redis-server
through EVAL, case by case (the case format is in ``tests/scriptcases.py``)."""

from __future__ import annotations

import pytest
import redis

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
    SLACK,
    TOKEN,
    WAKE_MS,
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

CASES = [
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
    Case(
        "multi-unknown-op",
        "multi",
        MLOCKS,
        multi_args("steal"),
        Error("unknown multi op steal"),
        setup=[mheld(M1, OTHER)],
        after=[(("GET", M1.lock), f"{OTHER}|{META}")],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)


def test_multi_keys_and_argv_are_laid_out_as_the_core_lays_them_out() -> None:
    """The multi cases call the script exactly as MultiCore does."""
    base = base_core()
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
