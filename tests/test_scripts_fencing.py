# SPDX-License-Identifier: MIT
"""The fencing scripts, fenced_write (the fenced resource) and redlock_fence (a Redlock
master's fencing counter): their behaviour on a real redis-server through EVAL, case by case
(the case format is in ``tests/scriptcases.py``)."""

from __future__ import annotations

import pytest
import redis

from redislock._core.keys import LockKeys
from redislock._core.scripts import SCRIPTS
from tests.scriptcases import (
    M2,
    M3,
    TARGET,
    Case,
    K,
    norm,
    run_case,
)

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

# Counters of one slot under other prefixes: distinct keys, the same slot.
P2 = LockKeys.for_name("job", "a:").fence
P3 = LockKeys.for_name("job", "b:").fence
assert len({K.fence, M2.fence, M3.fence}) == 1
assert len({K.fence, P2, P3}) == 3

CASES = [
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
    # ---------------------------------------------------------------- redlock_fence
    Case(
        "redlock-fence-raises-a-lower-counter",
        "redlock_fence",
        (K.fence,),
        (7,),
        1,
        setup=[("SET", K.fence, 3)],
        after=[(("GET", K.fence), "7"), (("PTTL", K.fence), -1)],
    ),
    Case(
        "redlock-fence-creates-a-missing-counter",
        "redlock_fence",
        (K.fence,),
        (5,),
        1,
        after=[(("GET", K.fence), "5"), (("PTTL", K.fence), -1)],
    ),
    Case(
        "redlock-fence-never-lowers",
        "redlock_fence",
        (K.fence, P2, P3),
        (4, 9, 2),
        3,
        setup=[("SET", K.fence, 10), ("SET", P3, 2)],
        after=[(("GET", K.fence), "10"), (("GET", P2), "9"), (("GET", P3), "2")],
    ),
    Case(
        "redlock-fence-names-of-one-slot-share-a-counter",
        "redlock_fence",
        (K.fence, M2.fence, M3.fence),  # one key: the names' slot counter
        (7, 12, 9),
        3,
        setup=[("SET", K.fence, 10)],
        after=[(("GET", K.fence), "12")],  # raised to the greatest of their tokens
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)


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
