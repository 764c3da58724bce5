# SPDX-License-Identifier: MIT
"""election.lua (the advertised leader of an ``Election``, next to its lock): its behaviour
on a real redis-server through EVAL, case by case (the case format is in
``tests/scriptcases.py``)."""

from __future__ import annotations

import pytest
import redis

from tests.scriptcases import OTHER, TOKEN, Between, Case, K, held, run_case

LEADER = K.lock + ":leader"
KEYS = (K.lock, LEADER)
ENTRY = "node-a|http://a:8080"

CASES = [
    Case(
        "election-advertise-by-the-holder",
        "election",
        KEYS,
        ("advertise", TOKEN, 7, ENTRY),
        ["ok", Between(4_000, 5_000)],
        setup=[held(fence=7)],
        # twice the lock's PTTL: leader() checks the term against the lock, never trusts it
        after=[
            (("GET", LEADER), "7|" + ENTRY),
            (("PTTL", LEADER), Between(8_000, 10_000)),
            (("PUBLISHED", LEADER), ["L|7|" + ENTRY]),
        ],
    ),
    Case(
        "election-advertise-refused-without-the-lock",
        "election",
        KEYS,
        ("advertise", TOKEN, 7, ENTRY),
        ["gone", 0],
        after=[(("EXISTS", LEADER), 0)],
    ),
    Case(
        "election-advertise-refused-for-another-owner",
        "election",
        KEYS,
        ("advertise", TOKEN, 7, ENTRY),
        ["gone", 0],
        setup=[held(token=OTHER, fence=8), ("SET", LEADER, "8|node-b|", "PX", 9_000)],
        after=[(("GET", LEADER), "8|node-b|")],
    ),
    Case(
        "election-advertise-refused-for-a-stale-term",
        "election",
        KEYS,
        ("advertise", TOKEN, 6, ENTRY),  # our token, but the lock is term 7 now
        ["gone", 0],
        setup=[held(fence=7)],
        after=[(("EXISTS", LEADER), 0)],
    ),
    Case(
        "election-advertise-a-token-prefix-is-not-the-owner",
        "election",
        KEYS,
        ("advertise", TOKEN[:-1], 7, ENTRY),
        ["gone", 0],
        setup=[held(fence=7)],
        after=[(("EXISTS", LEADER), 0)],
    ),
    Case(
        "election-keep-refreshes-the-ttl-only",
        "election",
        KEYS,
        ("keep", TOKEN, 7, ENTRY),
        ["ok", Between(4_000, 5_000)],
        setup=[held(fence=7), ("SET", LEADER, "7|node-a|old value", "PX", 1_000)],
        after=[
            (("GET", LEADER), "7|node-a|old value"),
            (("PTTL", LEADER), Between(8_000, 10_000)),
        ],
    ),
    Case(
        "election-keep-writes-a-missing-advertisement-again",
        "election",
        KEYS,
        ("keep", TOKEN, 7, ENTRY),
        ["ok", Between(4_000, 5_000)],
        setup=[held(fence=7)],
        after=[
            (("GET", LEADER), "7|" + ENTRY),
            (("PTTL", LEADER), Between(8_000, 10_000)),
            (("PUBLISHED", LEADER), ["L|7|" + ENTRY]),
        ],
    ),
    Case(
        "election-keep-replaces-an-earlier-terms-advertisement",
        "election",
        KEYS,
        ("keep", TOKEN, 7, ENTRY),
        ["ok", Between(4_000, 5_000)],
        setup=[held(fence=7), ("SET", LEADER, "6|node-z|", "PX", 9_000)],
        after=[(("GET", LEADER), "7|" + ENTRY), (("PUBLISHED", LEADER), ["L|7|" + ENTRY])],
    ),
    Case(
        "election-keep-refused-after-the-lease-ended",
        "election",
        KEYS,
        ("keep", TOKEN, 7, ENTRY),
        ["gone", 0],
        setup=[("SET", LEADER, "7|" + ENTRY, "PX", 9_000)],
        after=[(("GET", LEADER), "7|" + ENTRY)],  # left to expire; leader() ignores it
    ),
    Case(
        "election-keep-never-makes-a-key-without-ttl",
        "election",
        KEYS,
        ("keep", TOKEN, 7, ENTRY),
        ["gone", 0],
        setup=[held(fence=7, px=None)],  # a lock key without TTL (PERSISTed by hand)
        after=[(("EXISTS", LEADER), 0)],
    ),
    Case(
        "election-clear-deletes-its-own-term",
        "election",
        KEYS,
        ("clear", TOKEN, 7),
        ["ok", 1],
        setup=[held(fence=7), ("SET", LEADER, "7|" + ENTRY, "PX", 9_000)],
        after=[
            (("EXISTS", LEADER), 0),
            (("EXISTS", K.lock), 1),
            (("PUBLISHED", LEADER), ["L|0"]),
        ],
    ),
    Case(
        "election-clear-keeps-another-terms",
        "election",
        KEYS,
        ("clear", TOKEN, 7),
        ["ok", 0],
        setup=[("SET", LEADER, "8|node-b|", "PX", 9_000)],
        after=[(("GET", LEADER), "8|node-b|")],
    ),
    Case(
        "election-clear-a-term-prefix-is-not-the-term",
        "election",
        KEYS,
        ("clear", TOKEN, 7),
        ["ok", 0],
        setup=[("SET", LEADER, "77|node-b|", "PX", 9_000)],
        after=[(("GET", LEADER), "77|node-b|")],
    ),
    Case(
        "election-read-held",
        "election",
        KEYS,
        ("read", "", 0),
        [7, Between(4_000, 5_000), "7|" + ENTRY],
        setup=[held(fence=7), ("SET", LEADER, "7|" + ENTRY, "PX", 9_000)],
    ),
    Case(
        "election-read-nobody",
        "election",
        KEYS,
        ("read", "", 0),
        [0, 0, None],
    ),
    Case(
        "election-read-a-stale-advertisement-is-returned-for-the-caller-to-check",
        "election",
        KEYS,
        ("read", "", 0),
        [0, 0, "6|node-z|"],
        setup=[("SET", LEADER, "6|node-z|", "PX", 9_000)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)
