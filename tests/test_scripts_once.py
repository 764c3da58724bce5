# SPDX-License-Identifier: MIT
"""once_record.lua (the record of a period's run of ``Once``): its behaviour on a real
redis-server through EVAL, case by case (the case format is in ``tests/scriptcases.py``)."""

from __future__ import annotations

import pytest
import redis

from redislock._core.keys import once_key
from tests.scriptcases import OTHER, TOKEN, Between, Case, K, held, run_case

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

REC = once_key(K.lock, "2026-11-23T00:00:00Z")
KEYS = (K.lock, REC)
VALUE = "7|web-1|4242|1795435200123"

CASES = [
    Case(
        "once-record-written-by-the-holder",
        "once_record",
        KEYS,
        (TOKEN, VALUE, 90_000),
        ["ok", VALUE],
        setup=[held(fence=7)],
        after=[(("GET", REC), VALUE), (("PTTL", REC), Between(85_000, 90_000))],
    ),
    Case(
        "once-record-kept-when-already-there",
        "once_record",
        KEYS,
        (TOKEN, VALUE, 90_000),
        ["done", "3|elsewhere|1|1"],
        setup=[held(fence=7), ("SET", REC, "3|elsewhere|1|1", "PX", 50_000)],
        after=[(("GET", REC), "3|elsewhere|1|1"), (("PTTL", REC), Between(45_000, 50_000))],
    ),
    Case(
        "once-record-not-written-when-the-lock-is-gone",
        "once_record",
        KEYS,
        (TOKEN, VALUE, 90_000),
        ["gone"],
        after=[(("EXISTS", REC), 0)],
    ),
    Case(
        "once-record-not-written-when-the-lock-is-another-owners",
        "once_record",
        KEYS,
        (TOKEN, VALUE, 90_000),
        ["taken"],
        setup=[held(token=OTHER, fence=8)],
        after=[(("EXISTS", REC), 0)],
    ),
    Case(
        "once-record-a-token-prefix-is-not-the-owner",
        "once_record",
        KEYS,
        (TOKEN[:-1], VALUE, 90_000),
        ["taken"],
        setup=[held(fence=7)],
        after=[(("EXISTS", REC), 0)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)
