# SPDX-License-Identifier: MIT
"""The election_* scripts (the advertised leader of an ``Election``, next to its lock): their
behaviour on a real redis-server through EVAL, case by case (the case format is in
``tests/scriptcases.py``): only the lock's owner of that term writes the leader key, always
with a TTL; a stale term or another owner is refused; clear touches only its own term's key;
bad arguments are refused before anything is read."""

from __future__ import annotations

import pytest
import redis

from tests.scriptcases import OTHER, TOKEN, Arg, Between, Case, Error, K, held, run_case

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

LEADER = K.lock + ":leader"
KEYS = (K.lock, LEADER)
ENTRY = "node-a|http://a:80"


def adv(
    op: str, token: str = TOKEN, term: str = "7", entry: str = ENTRY
) -> tuple[str, tuple[str, ...], tuple[Arg, ...]]:
    """An advertise's or a keep's call (``op``): (script, KEYS, ARGV), as the core builds it."""
    return (f"election_{op}", KEYS, (token, term, entry))


def refused(op: str, case_id: str, *setup: tuple[str | int, ...], **kw: str) -> Case:
    """``op`` refused with {"gone", 0}: the leader key stays as the setup left it."""
    leader = [s for s in setup if s[1] == LEADER]
    after: list[tuple[tuple[Arg, ...], object]] = [
        (("GET", LEADER), leader[0][2] if leader else None)
    ]
    return Case(case_id, *adv(op, **kw), ["gone", 0], setup=list(setup), after=after)


# The leader key's TTL: 4 * the lock's PTTL (held(): PX 5000).
TTL4 = Between(4 * 4000, 4 * 5000)

CASES = [
    # ---- read
    Case("election-read-nothing", "election_read", KEYS, (), [0, 0, None]),
    Case(
        "election-read-leader",
        "election_read",
        KEYS,
        (),
        [7, Between(4000, 5000), "7|" + ENTRY],
        setup=[held(fence=7), ("SET", LEADER, "7|" + ENTRY)],
    ),
    Case(
        "election-read-a-leader-key-without-its-lock",  # the caller sees fence 0: no leader
        "election_read",
        KEYS,
        (),
        [0, 0, "7|" + ENTRY],
        setup=[("SET", LEADER, "7|" + ENTRY)],
    ),
    # ---- advertise: the owner of that term writes, with a TTL, and publishes
    Case(
        "election-advertise-by-the-owner",
        *adv("advertise"),
        ["ok", Between(4000, 5000)],
        setup=[held(fence=7)],
        after=[
            (("GET", LEADER), "7|" + ENTRY),
            (("PTTL", LEADER), TTL4),
            (("PUBLISHED", LEADER), ["L|7|" + ENTRY]),
        ],
    ),
    Case(
        "election-advertise-replaces-an-earlier-terms-key",
        *adv("advertise"),
        ["ok", Between(4000, 5000)],
        setup=[held(fence=7), ("SET", LEADER, "6|node-b|old")],
        after=[
            (("GET", LEADER), "7|" + ENTRY),
            (("PTTL", LEADER), TTL4),
            (("PUBLISHED", LEADER), ["L|7|" + ENTRY]),
        ],
    ),
    refused("advertise", "election-advertise-stale-term-refused", held(fence=8), term="7"),
    refused(
        "advertise",
        "election-advertise-stale-term-keeps-the-new-leaders-key",
        held(fence=8),
        ("SET", LEADER, "8|node-b|"),
        term="7",
    ),
    refused("advertise", "election-advertise-another-owner-refused", held(OTHER, fence=7)),
    refused("advertise", "election-advertise-no-lock-refused"),
    refused(
        "advertise", "election-advertise-token-prefix-refused", held(fence=7), token=TOKEN[:-1]
    ),
    refused("advertise", "election-advertise-term-prefix-refused", held(fence=71), term="7"),
    # a lock without a TTL (set by hand): no leader key that could never expire
    refused("advertise", "election-advertise-lock-without-ttl-refused", held(px=None, fence=7)),
    # ---- keep: the TTL refreshed, nothing published; written again if missing
    Case(
        "election-keep-refreshes-the-ttl-only",
        *adv("keep", entry="ignored|here"),
        ["ok", Between(4000, 5000)],
        setup=[held(fence=7), ("SET", LEADER, "7|" + ENTRY, "PX", 1000)],
        after=[(("GET", LEADER), "7|" + ENTRY), (("PTTL", LEADER), TTL4)],
    ),
    Case(
        "election-keep-writes-a-missing-key-again",
        *adv("keep"),
        ["ok", Between(4000, 5000)],
        setup=[held(fence=7)],
        after=[
            (("GET", LEADER), "7|" + ENTRY),
            (("PTTL", LEADER), TTL4),
            (("PUBLISHED", LEADER), ["L|7|" + ENTRY]),
        ],
    ),
    Case(
        "election-keep-replaces-an-earlier-terms-key",
        *adv("keep"),
        ["ok", Between(4000, 5000)],
        setup=[held(fence=7), ("SET", LEADER, "6|node-b|old", "PX", 1000)],
        after=[
            (("GET", LEADER), "7|" + ENTRY),
            (("PTTL", LEADER), TTL4),
            (("PUBLISHED", LEADER), ["L|7|" + ENTRY]),
        ],
    ),
    refused(
        "keep",
        "election-keep-stale-term-refused",
        held(fence=8),
        ("SET", LEADER, "7|" + ENTRY),
        term="7",
    ),
    refused(
        "keep",
        "election-keep-another-owner-refused",
        held(OTHER, fence=7),
        ("SET", LEADER, "7|" + ENTRY),
    ),
    refused("keep", "election-keep-no-lock-refused", ("SET", LEADER, "7|" + ENTRY)),
    # ---- clear: only its own term's key
    Case(
        "election-clear-own-term",
        "election_clear",
        (LEADER,),
        ("7",),
        ["ok", 1],
        setup=[held(fence=7), ("SET", LEADER, "7|" + ENTRY)],
        after=[(("EXISTS", LEADER), 0), (("PUBLISHED", LEADER), ["L|0"])],
    ),
    Case(
        "election-clear-leaves-a-newer-terms-key",
        "election_clear",
        (LEADER,),
        ("7",),
        ["ok", 0],
        setup=[held(OTHER, fence=8), ("SET", LEADER, "8|node-b|")],
        after=[(("GET", LEADER), "8|node-b|")],
    ),
    Case(
        "election-clear-a-term-prefix-is-not-the-term",
        "election_clear",
        (LEADER,),
        ("1",),
        ["ok", 0],
        setup=[("SET", LEADER, "17|node-b|")],
        after=[(("GET", LEADER), "17|node-b|")],
    ),
    Case("election-clear-nothing", "election_clear", (LEADER,), ("7",), ["ok", 0]),
    # ---- bad arguments: refused before anything is read or written
    *[
        Case(f"election-{op}-no-args", f"election_{op}", KEYS, (), Error(f"bad arguments for {op}"))
        for op in ("advertise", "keep")
    ],
    Case(
        "election-term-not-digits",
        *adv("advertise", term="7x"),
        Error("bad arguments for advertise"),
        setup=[held(fence=7)],
        after=[(("EXISTS", LEADER), 0)],
    ),
    Case(
        "election-entry-missing",
        "election_advertise",
        KEYS,
        (TOKEN, "7"),
        Error("bad arguments for advertise"),
        setup=[held(fence=7)],
        after=[(("EXISTS", LEADER), 0)],
    ),
    Case(
        "election-clear-term-missing",
        "election_clear",
        (LEADER,),
        (),
        Error("bad arguments for clear"),
        setup=[("SET", LEADER, "7|" + ENTRY)],
        after=[(("GET", LEADER), "7|" + ENTRY)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)
