# SPDX-License-Identifier: MIT
"""The hold_* scripts (scripts/_hold.lua), the holds of RLock, ReadWriteLock and Semaphore:
their behaviour on a real redis-server through EVAL, case by case (the case format is in
``tests/scriptcases.py``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from redislock._core.hold import HoldCore
from redislock._core.lock import DONE_MS
from redislock._core.ops import Eval
from redislock._core.scripts import SCRIPTS
from tests.scriptcases import (
    FOURTH,
    META,
    OTHER,
    SLACK,
    THIRD,
    TOKEN,
    WAITER,
    At,
    Between,
    Case,
    Clock,
    Error,
    H,
    HoldValue,
    Timed,
    absent,
    acq,
    base_core,
    count,
    ext,
    force,
    hold,
    leave,
    marker,
    reenter,
    rel,
    run_case,
    status,
    ttl,
    waiting,
    woken,
)

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

OP_A, OP_B = "a" * 16, "b" * 16
DONE = 60_000
BAND = {"w": 0, "r": 10**13, "p": 2 * 10**13}
"""_hold.lua's score bands in the expiry index: a hold's score is BAND[mode] + expires_ms."""


@dataclass(frozen=True)
class Score(Timed):
    """Setup text: the index score of a ``mode`` hold whose lease ends ``offset_ms`` from now."""

    mode: str
    offset_ms: int

    def at(self, now_ms: int) -> str:
        return str(BAND[self.mode] + now_ms + self.offset_ms)


@dataclass(frozen=True)
class InBand(Timed):
    """Check: the index score of a ``mode`` hold whose lease ends in [now + lo, now + hi]."""

    mode: str
    lo: int
    hi: int

    def at(self, now_ms: int) -> Between:
        base = BAND[self.mode] + now_ms
        return Between(base + self.lo, base + self.hi, numeric=True)


def indexed(
    token: str = TOKEN, mode: str = "w", lease_ms: int = 5000, *, count: int = 1, fence: int = 1
) -> list[tuple[Any, ...]]:
    """Setup: a hold as the hold scripts keep it, in the hash and in the expiry index."""
    return [
        hold(token, mode, lease_ms, count=count, fence=fence),
        ("ZADD", H.expiry, Score(mode, lease_ms), token),
    ]


def both_ttl(ms: int) -> list[tuple[Any, ...]]:
    return [ttl(H.lock, ms), ttl(H.expiry, ms)]


ENDED = [f"{i:032x}" for i in range(1, 11)]
"""Ten tokens, for holds whose leases ended."""


def ended(mode: str) -> list[tuple[Any, ...]]:
    """Setup: ten indexed ``mode`` holds whose leases ended a second ago."""
    return [cmd for token in ENDED for cmd in indexed(token, mode, -1000)]


BULK = [f"{i:032x}" for i in range(100, 20_100)]
"""20,000 tokens: holds whose index takes a while to rebuild."""


def index_matches(size: int) -> list[tuple[tuple[Any, ...], Any]]:
    """Checks: the hash holds ``size`` holds, and its index as many."""
    return [(("HLEN", H.lock), size), (("ZCARD", H.expiry), size)]


CASES = [
    # ---------------------------------------------------------------- hold: acquire
    *[
        Case(
            f"hold-acquire-free-{mode}",
            *acq(mode=mode, permits=permits),
            ["ok", 1, 1, 10000],
            after=[
                (("HGET", H.lock, TOKEN), HoldValue(mode, 1, 1, 10000, 10000 + SLACK)),
                (("HLEN", H.lock), 1),
                (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
                (("GET", H.fence), "1"),
                (("PTTL", H.fence), -1),  # the fence counter never expires
                (("ZSCORE", H.expiry, TOKEN), InBand(mode, 10000, 10000 + SLACK)),
                (("PTTL", H.expiry), Between(10000 - SLACK, 10000)),
                *index_matches(1),
                *absent(H.wait, H.wake, H.rwait, H.rwake),
            ],
        )
        for mode, permits in (("w", 0), ("r", 0), ("p", 3))
    ],
    Case(
        "hold-acquire-continues-the-fence",
        *acq(mode="r"),
        ["ok", 42, 1, 10000],
        setup=[("SET", H.fence, 41)],
        after=[(("HGET", H.lock, TOKEN), HoldValue("r", 1, 42, 10000, 10000 + SLACK))],
    ),
    Case(
        "hold-reenter",
        *reenter(ms=10000),
        ["ok", 7, 2, 10000],
        setup=[hold(lease_ms=5000, fence=7), ttl(H.lock, 5000), ("SET", H.fence, 7)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 2, 7, 10000, 10000 + SLACK)),
            (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
            (("GET", H.fence), "7"),  # no new fencing token for a re-entry
        ],
    ),
    Case(
        "hold-reenter-keeps-a-longer-lease",
        *reenter(ms=10000),
        ["ok", 7, 3, Between(20000 - SLACK, 20000)],
        setup=[hold(lease_ms=20000, count=2, fence=7), ttl(H.lock, 20000), ("SET", H.fence, 7)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 3, 7, 20000, 20000)),
            (("PTTL", H.lock), Between(20000 - SLACK, 20000)),
        ],
    ),
    Case(
        "hold-reenter-gone",
        *reenter(),
        ["gone", 0],
        setup=[hold(OTHER, "r"), ttl(H.lock, 5000), ("SET", H.fence, 3)],
        after=[
            (("HEXISTS", H.lock, TOKEN), 0),  # never recreated
            (("HGET", H.lock, OTHER), HoldValue("r", 1, 1, 5000, 5000)),
            (("GET", H.fence), "3"),
        ],
    ),
    Case(
        "hold-reenter-expired-is-gone",
        *reenter(),
        ["gone", 0],
        setup=[hold(lease_ms=-1000)],
        after=absent(H.lock, H.fence),
    ),
    *[
        Case(
            f"hold-repeat-of-first-acquisition-count-{count}",
            *acq(ms=10000),  # reenter "0", but TOKEN already holds: a retry after a lost reply
            ["ok", 3, count, Between(5000 - SLACK, 5000)],
            setup=[
                hold(lease_ms=5000, count=count, fence=3),
                ttl(H.lock, 5000),
                ("SET", H.fence, 3),
            ],
            after=[
                (("HGET", H.lock, TOKEN), HoldValue("w", count, 3, 5000, 5000)),  # unchanged
                (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
                (("GET", H.fence), "3"),
            ],
        )
        for count in (1, 2)
    ],
    Case(
        "hold-r-shares-with-readers",
        *acq(mode="r"),
        ["ok", 2, 1, 10000],
        setup=[hold(OTHER, "r", 20000), ttl(H.lock, 20000), ("SET", H.fence, 1)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("r", 1, 2, 10000, 10000 + SLACK)),
            (("HGET", H.lock, OTHER), HoldValue("r", 1, 1, 20000, 20000)),
            (("PTTL", H.lock), Between(20000 - SLACK, 20000)),  # the latest lease
        ],
    ),
    *[
        Case(
            f"hold-w-blocked-by-{mode}-single-try",
            *acq(mode="w", waiters=True),  # the waiters key given: still no entry
            ["busy", Between(3000 - SLACK, 3000)],
            setup=[
                hold(OTHER, mode, 3000),
                hold(THIRD, mode, 8000),
                ttl(H.lock, 8000),
                ("SET", H.fence, 2),
            ],
            after=[
                (("HEXISTS", H.lock, TOKEN), 0),
                (("GET", H.fence), "2"),  # no fencing token burnt on failure
                (("PTTL", H.lock), Between(8000 - SLACK, 8000)),
                *absent(H.wait, H.rwait),  # a single try leaves no marker
            ],
        )
        for mode in ("r", "p")
    ],
    Case(
        "hold-w-blocked-by-writer-sets-wait-marker",
        *acq(mode="w", marker_ms=1500),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000), ("SET", H.fence, 1)],
        after=[
            (("ZSCORE", H.wait, TOKEN), Clock(1500 - SLACK, 1500 + SLACK)),
            (("PTTL", H.wait), Between(1500 - SLACK, 1500)),
            (("GET", H.fence), "1"),
            (("HEXISTS", H.lock, TOKEN), 0),
            *absent(H.rwait, H.wake, H.rwake),
        ],
    ),
    Case(
        "hold-r-blocked-by-writer-sets-rwait-marker",
        *acq(mode="r", marker_ms=1500),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000)],
        after=[
            (("GET", H.rwait), "1"),
            (("PTTL", H.rwait), Between(1500 - SLACK, 1500)),
            (("HEXISTS", H.lock, TOKEN), 0),
            *absent(H.wait, H.fence),
        ],
    ),
    Case(
        "hold-r-blocked-by-writer-single-try",
        *acq(mode="r"),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000)],
        after=absent(H.wait, H.rwait, H.fence),
    ),
    Case(
        "hold-r-blocked-by-waiting-writer",
        *acq(mode="r"),
        ["busy", Between(3000 - SLACK, 3000)],  # no hold: the marker's remaining TTL
        setup=[waiting(3000)],
        after=[(("ZSCORE", H.wait, WAITER), Clock(3000 - SLACK, 3000)), *absent(H.lock, H.fence)],
    ),
    Case(
        "hold-w-acquired-stops-counting-as-waiting",
        *acq(mode="w", marker_ms=1500),
        ["ok", 1, 1, Between(10000 - SLACK, 10000)],
        setup=[waiting(3000, TOKEN), waiting(3000)],
        # the writer that got in no longer blocks readers; the other waiter still does
        after=[(("ZSCORE", H.wait, TOKEN), None), (("ZCARD", H.wait), 1)],
    ),
    Case(
        "hold-r-not-blocked-by-an-expired-waiting-writer",
        *acq(mode="r"),
        ["ok", 1, 1, Between(10000 - SLACK, 10000)],
        setup=[waiting(-5)],
        after=[(("EXISTS", H.wait), 0)],
    ),
    Case(
        "hold-leave",
        *leave(),
        1,
        setup=[waiting(3000, TOKEN), waiting(3000)],
        after=[(("ZSCORE", H.wait, TOKEN), None), (("ZCARD", H.wait), 1)],
    ),
    Case(
        "hold-r-blocked-by-waiting-writer-beside-readers",
        *acq(mode="r", marker_ms=1500),
        ["busy", Between(3000 - SLACK, 3000)],
        setup=[hold(OTHER, "r", 3000), ttl(H.lock, 3000), waiting(3000)],
        after=[
            (("HEXISTS", H.lock, TOKEN), 0),
            (("GET", H.rwait), "1"),
            (("PTTL", H.rwait), Between(1500 - SLACK, 1500)),
        ],
    ),
    Case(
        "hold-r-beside-own-write-despite-waiting-writer",  # downgrade
        *acq(mode="r", companion=FOURTH),
        ["ok", 5, 1, 10000],
        setup=[
            hold(FOURTH, "w", 5000, fence=4),
            ttl(H.lock, 5000),
            ("SET", H.fence, 4),
            waiting(),
            marker(H.rwait),
        ],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("r", 1, 5, 10000, 10000 + SLACK)),
            (("HGET", H.lock, FOURTH), HoldValue("w", 1, 4, 5000, 5000)),
            (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
            *absent(H.rwake),  # a writer waits: the wake-up is not passed on to readers
        ],
    ),
    *[
        Case(
            f"hold-r-companion-{what}-is-no-write-hold",
            *acq(mode="r", companion=FOURTH),
            ["busy", Between(3000 - SLACK, 3000)],
            setup=[*setup, waiting(3000)],
            after=[(("HEXISTS", H.lock, TOKEN), 0)],
        )
        for what, setup in (
            ("read", [hold(FOURTH, "r", 3000), ttl(H.lock, 3000)]),
            ("expired", [hold(FOURTH, "w", -1000)]),
            ("missing", []),
        )
    ],
    Case(
        "hold-r-passes-the-wake-up-on",
        *acq(mode="r"),
        ["ok", 1, 1, 10000],
        setup=[hold(OTHER, "r"), ttl(H.lock, 5000), marker(H.rwait), ("RPUSH", H.rwake, "x")],
        after=[*woken(H.rwake), *absent(H.wake)],
    ),
    Case(
        "hold-p-up-to-permits",
        *acq(mode="p", permits=3),
        ["ok", 3, 1, 10000],
        setup=[
            hold(OTHER, "p", 5000),
            hold(THIRD, "p", 5000, fence=2),
            ttl(H.lock, 5000),
            ("SET", H.fence, 2),
            waiting(),
        ],
        after=[
            (("HLEN", H.lock), 3),
            (("HGET", H.lock, TOKEN), HoldValue("p", 1, 3, 10000, 10000 + SLACK)),
            *absent(H.wake),  # the last permit: nothing to pass on
        ],
    ),
    Case(
        "hold-p-passes-the-wake-up-on",
        *acq(mode="p", permits=3),
        ["ok", 2, 1, 10000],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.fence, 1), waiting()],
        after=[*woken(H.wake), *absent(H.rwake)],
    ),
    Case(
        "hold-p-blocked-at-permits",
        *acq(mode="p", permits=2, marker_ms=1500),
        ["busy", Between(3000 - SLACK, 3000)],
        setup=[
            hold(OTHER, "p", 6000),
            hold(THIRD, "p", 3000),
            ttl(H.lock, 6000),
            ("SET", H.fence, 2),
        ],
        after=[
            (("HEXISTS", H.lock, TOKEN), 0),
            (("GET", H.fence), "2"),
            (
                ("ZSCORE", H.wait, TOKEN),
                Clock(1500 - SLACK, 1500 + SLACK),
            ),  # a permit waiter uses the w/p marker
            (("PTTL", H.wait), Between(1500 - SLACK, 1500)),
            *absent(H.rwait),
        ],
    ),
    Case(
        "hold-p-blocked-by-lower-permits-key",
        *acq(mode="p", permits=3),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.permits, 1)],
        after=[(("HLEN", H.lock), 1), (("GET", H.permits), "1"), *absent(H.fence, H.wait)],
    ),
    Case(
        "hold-p-higher-permits-key-admits",
        *acq(mode="p", permits=1),
        ["ok", 1, 1, 10000],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.permits, 2)],
        after=[(("HLEN", H.lock), 2), (("PTTL", H.permits), -1)],
    ),
    Case(
        "hold-p-blocked-by-writer",
        *acq(mode="p", permits=3),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000)],
        after=[(("HLEN", H.lock), 1)],
    ),
    *[
        Case(
            f"hold-{what}-hold-is-pruned-and-does-not-block",
            *acq(mode="w"),
            ["ok", 1, 1, 10000],
            setup=[expired],
            after=[
                (("HEXISTS", H.lock, OTHER), 0),
                (("HLEN", H.lock), 1),
                (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
            ],
        )
        for what, expired in (
            ("expired", hold(OTHER, "w", -1000)),
            ("long-expired", ("HSET", H.lock, OTHER, f"w|1|1|1|{META}")),
            ("just-expired", hold(OTHER, "r", 0)),  # expires_ms <= now: over
        )
    ],
    # ---------------------------------------------------------------- hold: release
    Case(
        "hold-release-decrements",
        *rel(),
        ["ok", 1],
        setup=[hold(count=2, fence=3), ttl(H.lock, 5000), waiting()],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 3, 5000, 5000)),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
            *absent(H.wake, H.rwake),  # still held: nobody to wake
        ],
    ),
    Case(
        "hold-release-last-deletes-the-key",
        *rel(),
        ["ok", 0],
        setup=[hold(fence=3), ttl(H.lock, 5000), ("SET", H.fence, 3)],
        after=[(("GET", H.fence), "3"), *absent(H.lock, H.wake, H.rwake)],
    ),
    Case(
        "hold-release-last-wakes-a-writer-first",
        *rel(),
        ["ok", 0],
        setup=[
            hold(mode="r"),
            ttl(H.lock, 5000),
            waiting(),
            marker(H.rwait),
            ("RPUSH", H.wake, "x", "y"),
        ],
        after=[*woken(H.wake), *absent(H.lock, H.rwake)],
    ),
    Case(
        "hold-release-keeps-other-holds-and-shrinks-the-key-ttl",
        *rel(),
        ["ok", 0],
        setup=[
            hold(TOKEN, "r", 9000),
            hold(OTHER, "r", 5000),
            ttl(H.lock, 9000),
            waiting(),
            marker(H.rwait),
        ],
        after=[
            (("HGET", H.lock, OTHER), HoldValue("r", 1, 1, 5000, 5000)),
            (("HEXISTS", H.lock, TOKEN), 0),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),  # the latest remaining lease
            *absent(H.wake, H.rwake),  # a reader still holds; a writer waits: no reader wake
        ],
    ),
    Case(
        "hold-release-write-beside-own-read-wakes-no-writer",
        *rel(),
        ["ok", 0],
        setup=[hold(TOKEN, "w"), hold(FOURTH, "r"), ttl(H.lock, 5000), waiting()],
        after=[(("HLEN", H.lock), 1), *absent(H.wake, H.rwake)],
    ),
    Case(
        "hold-release-wakes-readers",
        *rel(),
        ["ok", 0],
        setup=[hold(mode="w"), ttl(H.lock, 5000), marker(H.rwait)],
        after=[*woken(H.rwake), *absent(H.lock, H.wake)],
    ),
    Case(
        "hold-release-reader-wakes-readers-beside-readers",
        *rel(),
        ["ok", 0],
        setup=[hold(mode="r"), hold(OTHER, "r"), ttl(H.lock, 5000), marker(H.rwait)],
        after=[*woken(H.rwake), *absent(H.wake)],
    ),
    Case(
        "hold-release-permit-wakes-below-permits",
        *rel(mode="p", permits=2),
        ["ok", 0],
        setup=[hold(mode="p"), hold(OTHER, "p"), ttl(H.lock, 5000), waiting()],
        after=[*woken(H.wake), (("HLEN", H.lock), 1)],
    ),
    Case(
        "hold-release-permit-no-wake-while-at-permits-key",
        *rel(mode="p", permits=5),
        ["ok", 0],
        setup=[
            hold(mode="p"),
            hold(OTHER, "p"),
            hold(THIRD, "p"),
            ttl(H.lock, 5000),
            ("SET", H.permits, 1),
            waiting(),
        ],
        after=[(("HLEN", H.lock), 2), *absent(H.wake)],
    ),
    Case(
        "hold-release-unknown-token",
        *rel(),
        ["gone", 0],
        setup=[
            hold(OTHER, "w", 5000, count=2, fence=6),
            ttl(H.lock, 5000),
            ("SET", H.fence, 6),
            waiting(),
            marker(H.rwait),
        ],
        after=[
            (("HGET", H.lock, OTHER), HoldValue("w", 2, 6, 5000, 5000)),
            (("HLEN", H.lock), 1),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
            (("GET", H.fence), "6"),
            (("ZSCORE", H.wait, WAITER), Clock(3000 - SLACK, 3000)),
            *absent(H.wake, H.rwake),
        ],
    ),
    Case(
        "hold-release-expired-own-hold-is-gone",
        *rel(),
        ["gone", 0],
        setup=[hold(lease_ms=-1000)],
        after=absent(H.lock, H.wake, H.rwake),
    ),
    # ---------------------------------------------------------------- hold: extend
    Case(
        "hold-extend-add",
        *ext(ms=3000, extend_mode="add"),
        ["ok", Between(8000 - SLACK, 8000)],
        setup=[hold(mode="r", count=2, fence=4), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("r", 2, 4, 8000, 8000)),
            (("PTTL", H.lock), Between(8000 - SLACK, 8000)),
        ],
    ),
    Case(
        "hold-extend-set-shortens",
        *ext(ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(lease_ms=5000), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 2000, 2000 + SLACK)),
            (("PTTL", H.lock), Between(2000 - SLACK, 2000)),
        ],
    ),
    Case(
        "hold-extend-set-shortens-key-to-latest-other-lease",
        *ext(ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(mode="p", lease_ms=9000), hold(OTHER, "p", 5000), ttl(H.lock, 9000)],
        after=[(("PTTL", H.lock), Between(5000 - SLACK, 5000))],
    ),
    Case(
        "hold-extend-set-keeps-key-for-longer-other-lease",
        *ext(ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(mode="p", lease_ms=5000), hold(OTHER, "p", 8000), ttl(H.lock, 8000)],
        after=[(("PTTL", H.lock), Between(8000 - SLACK, 8000))],
    ),
    Case(
        "hold-extend-set-lengthens",
        *ext(ms=60000, extend_mode="set"),
        ["ok", 60000],
        setup=[hold(), ttl(H.lock, 5000)],
        after=[(("PTTL", H.lock), Between(60000 - SLACK, 60000))],
    ),
    Case(
        "hold-extend-max-never-shortens",
        *ext(ms=2000, extend_mode="max"),
        ["ok", Between(5000 - SLACK, 5000)],
        setup=[hold(), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 5000, 5000)),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
        ],
    ),
    Case(
        "hold-extend-max-lengthens",
        *ext(ms=9000, extend_mode="max"),
        ["ok", 9000],
        setup=[hold(), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 9000, 9000 + SLACK)),
            (("PTTL", H.lock), Between(9000 - SLACK, 9000)),
        ],
    ),
    *[
        Case(
            f"hold-extend-{mode}-gone",
            *ext(ms=30000, extend_mode=mode),
            ["gone", 0],
            setup=[hold(OTHER, "r"), ttl(H.lock, 5000), hold(lease_ms=-1000)],
            after=[
                (("HEXISTS", H.lock, TOKEN), 0),  # the expired hold is not revived
                (("HGET", H.lock, OTHER), HoldValue("r", 1, 1, 5000, 5000)),
                (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
            ],
        )
        for mode in ("add", "set", "max")
    ],
    # ---------------------------------------------------------------- hold: status, count, force
    Case(
        "hold-status-ok",
        *status(),
        ["ok", Between(5000 - SLACK, 5000), 9, 2, "r"],
        setup=[hold(mode="r", count=2, fence=9), ttl(H.lock, 5000), ("SET", H.fence, 12)],
        after=[(("HGET", H.lock, TOKEN), HoldValue("r", 2, 9, 5000, 5000))],
    ),
    Case(
        "hold-status-gone",
        *status(),
        ["gone", 0, 0, 0, ""],
        setup=[hold(OTHER), ttl(H.lock, 5000), hold(lease_ms=-1000)],
        # a status reads the hash only: the ended hold goes with the next call's index
        after=[(("HEXISTS", H.lock, TOKEN), 1)],
    ),
    Case(
        "hold-status-declares-the-hash-only",  # a one-key script (slot migration)
        *status(),
        ["ok", Between(5000 - SLACK, 5000), 9, 2, "r"],
        setup=[hold(mode="r", count=2, fence=9), ttl(H.lock, 5000)],
    ),
    Case(
        "hold-extend-declares-the-hash-and-its-index",  # both exist together (slot migration)
        *ext(ms=3000, extend_mode="add", op_id=OP_A),
        ["ok", Between(8000 - SLACK, 8000)],
        setup=[hold(fence=3), ttl(H.lock, 5000)],
        after=[(("PTTL", H.lock), Between(8000 - SLACK, 8000))],
    ),
    Case(
        "hold-undeclared-keys-count-as-absent",  # a Semaphore's release names no reader keys
        *rel(mode="p", permits=3, op_id=OP_A, done_ms=DONE),
        ["ok", 0],
        setup=[hold(mode="p"), ttl(H.lock, 5000), marker(H.rwait)],
        after=[*absent(H.lock, H.rwake, H.wake)],
    ),
    Case(
        "hold-count-read-write",
        *count(),
        [1, 2, 0, 0],
        setup=[
            hold(TOKEN, "w"),
            hold(OTHER, "r"),
            hold(THIRD, "r"),
            hold(FOURTH, "r", -1000),  # expired: not counted
            ttl(H.lock, 5000),
        ],
    ),
    Case(
        "hold-count-permits",
        *count(permits=3),
        [0, 0, 2, 3],
        setup=[hold(TOKEN, "p"), hold(OTHER, "p"), hold(THIRD, "p", -1000), ttl(H.lock, 5000)],
    ),
    Case(
        "hold-count-permits-key",
        *count(permits=3),
        [0, 0, 1, 5],
        setup=[hold(TOKEN, "p"), ttl(H.lock, 5000), ("SET", H.permits, 5)],
    ),
    Case("hold-count-empty", *count(), [0, 0, 0, 0]),
    Case(
        "hold-force",
        *force(),
        2,
        setup=[
            hold(TOKEN, "r"),
            hold(OTHER, "r"),
            hold(THIRD, "w", -1000),  # already over: not counted
            ttl(H.lock, 5000),
            ("SET", H.fence, 8),
            waiting(),
            marker(H.rwait),
        ],
        after=[*woken(H.wake), *woken(H.rwake), (("GET", H.fence), "8"), *absent(H.lock)],
    ),
    Case(
        "hold-force-nothing-held",
        *force(),
        0,
        after=absent(H.lock, H.wake, H.rwake),
    ),
    # ---------------------------------------------------------------- hold: the expiry index
    Case(
        "hold-index-prunes-a-few-ended-holds-per-call",
        *count(),
        [0, 1, 0, 0],  # exact: the six ended holds still there are not counted
        setup=[*indexed(OTHER, "r"), *ended("r"), *both_ttl(5000)],
        after=[*index_matches(7), (("HEXISTS", H.lock, OTHER), 1)],
    ),
    Case(
        "hold-index-a-permit-counts-only-live-permits",
        *acq(mode="p", permits=3),
        ["ok", 1, 1, 10000],
        setup=[*indexed(OTHER, "p"), *indexed(THIRD, "p"), *ended("p"), *both_ttl(5000)],
        after=[
            *index_matches(2 + 10 - 4 + 1),
            (("ZSCORE", H.expiry, TOKEN), InBand("p", 10000, 10000 + SLACK)),
            (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
            (("PTTL", H.expiry), Between(10000 - SLACK, 10000)),
        ],
    ),
    Case(
        "hold-index-the-last-permit-is-busy-until-the-first-lease-ends",
        *acq(mode="p", permits=3),
        ["busy", Between(3000 - SLACK, 3000)],
        setup=[
            *indexed(OTHER, "p", 8000),
            *indexed(THIRD, "p", 3000),
            *indexed(FOURTH, "p", 5000),
            *ended("p"),
            *both_ttl(8000),
        ],
        after=[*index_matches(3 + 10 - 4), (("PTTL", H.expiry), Between(8000 - SLACK, 8000))],
    ),
    Case(
        "hold-index-ended-readers-do-not-block-a-writer",
        *acq(mode="w"),
        ["ok", 1, 1, 10000],
        setup=[*ended("r"), *both_ttl(5000)],
        after=[*index_matches(10 - 4 + 1), (("PTTL", H.expiry), Between(10000 - SLACK, 10000))],
    ),
    Case(
        "hold-index-a-reader-waits-for-a-live-writer-only",
        *acq(mode="r"),
        ["busy", Between(4000 - SLACK, 4000)],
        setup=[
            *indexed(OTHER, "w", 4000),
            *ended("w"),
            *indexed(THIRD, "r", 9000),
            *both_ttl(9000),
        ],
        after=[*index_matches(2 + 10 - 4)],
    ),
    Case(
        "hold-index-extend-moves-the-score-and-the-ttl",
        *ext(ms=20000, extend_mode="set"),
        ["ok", 20000],
        setup=[*indexed(TOKEN, "r"), *indexed(OTHER, "r", 8000), *both_ttl(8000)],
        after=[
            (("ZSCORE", H.expiry, TOKEN), InBand("r", 20000, 20000 + SLACK)),
            (("PTTL", H.lock), Between(20000 - SLACK, 20000)),
            (("PTTL", H.expiry), Between(20000 - SLACK, 20000)),
        ],
    ),
    Case(
        "hold-index-a-release-shortens-the-ttl-to-the-latest-lease-left",
        *rel(mode="r", op_id=OP_A, done_ms=DONE),
        ["ok", 0],
        setup=[*indexed(TOKEN, "r", 20000), *indexed(OTHER, "r", 8000), *both_ttl(20000)],
        after=[
            *index_matches(1),
            (("PTTL", H.lock), Between(8000 - SLACK, 8000)),
            (("PTTL", H.expiry), Between(8000 - SLACK, 8000)),
        ],
    ),
    Case(
        "hold-index-the-last-release-leaves-no-key",
        *rel(mode="r", op_id=OP_A, done_ms=DONE),
        ["ok", 0],
        setup=[*indexed(TOKEN, "r"), *ended("r"), *both_ttl(5000)],
        after=absent(H.lock, H.expiry),  # the ended holds go with the keys
    ),
    Case(
        "hold-index-rebuilt-from-a-hash-without-one",  # its index deleted by hand
        *count(),
        [0, 2, 0, 0],
        setup=[
            hold(TOKEN, "r"),
            hold(OTHER, "r", 8000),
            hold(THIRD, "w", -1000),
            ttl(H.lock, 8000),
        ],
        after=[
            *index_matches(2),
            (("ZSCORE", H.expiry, OTHER), InBand("r", 8000, 8000)),
            (("HEXISTS", H.lock, THIRD), 0),
            (("PTTL", H.expiry), Between(8000 - SLACK, 8000)),
        ],
    ),
    Case(
        # The keys expire when the latest lease ends (PEXPIREAT), not "latest - now" ms after
        # their PEXPIRE runs: now was read when the call began, so a call that runs a while
        # (here: rebuilding the index of 20,000 holds) would move their end by its run time,
        # and a server clock stepping back during it would end them before that lease.
        "hold-index-the-keys-expire-when-the-latest-lease-ends-however-long-the-call-runs",
        *acq(mode="r", ms=3000),
        ["ok", 1, 1, 3000],
        setup=[
            ("HSET", H.lock, *(a for t in BULK for a in hold(t, "r", 5000)[2:])),
            hold(OTHER, "r", 8000),
            ttl(H.lock, 8000),
        ],
        after=[
            *index_matches(len(BULK) + 2),
            (("EXPIRES_AT", H.lock), Clock(8000 - 1, 8000)),
            (("EXPIRES_AT", H.expiry), Clock(8000 - 1, 8000)),
        ],
    ),
    Case(
        "hold-index-out-of-step-with-the-hash-is-rebuilt",  # a hold deleted by hand
        *acq(mode="w"),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[*indexed(OTHER, "r"), ("ZADD", H.expiry, Score("w", 9000), THIRD), *both_ttl(9000)],
        after=[
            *index_matches(1),
            (("ZSCORE", H.expiry, THIRD), None),
            (("PTTL", H.expiry), Between(5000 - SLACK, 5000)),
        ],
    ),
    Case(
        "hold-index-an-ended-score-of-a-live-hold-is-mended-not-pruned",  # the hash is the record
        *count(),
        [0, 1, 0, 0],
        setup=[hold(TOKEN, "r"), ("ZADD", H.expiry, Score("r", -1000), TOKEN), *both_ttl(5000)],
        after=[
            *index_matches(1),
            (("ZSCORE", H.expiry, TOKEN), InBand("r", 5000, 5000)),
            (("HGET", H.lock, TOKEN), HoldValue("r", 1, 1, 5000, 5000)),
        ],
    ),
    Case(
        "hold-index-a-hash-deleted-by-hand-frees-the-name",
        *acq(mode="w"),
        ["ok", 1, 1, 10000],
        setup=[("ZADD", H.expiry, Score("r", 9000), OTHER), ttl(H.expiry, 9000)],
        after=[*index_matches(1), (("ZSCORE", H.expiry, OTHER), None)],
    ),
    Case(
        "hold-index-status-reads-the-hash-only",  # one key: the ended hold is left
        *status(),
        ["gone", 0, 0, 0, ""],
        setup=[*indexed(TOKEN, "r", -1000), *indexed(OTHER, "r"), *both_ttl(5000)],
        after=[*index_matches(2)],
    ),
    Case(
        "hold-index-is-required",
        "hold_count",
        (H.lock,),
        (0,),
        Error("needs the expiry index"),
    ),
    Case(
        "hold-release-index-is-required",  # nothing read or written without it
        "hold_release",
        (H.lock,),
        (TOKEN, OP_A, DONE),
        Error("needs the expiry index"),
        setup=[hold(), ttl(H.lock, 5000)],
        after=[(("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 5000, 5000))],
    ),
    # ---------------------------------------------------------------- hold: errors
    *[
        Case(
            f"hold-{op}-malformed-field",
            *call,
            Error("holds a field not written by redislock"),
            setup=[("HSET", H.lock, OTHER, value)],
            after=[(("HGET", H.lock, OTHER), value), *absent(H.fence)],
        )
        for op, call, value in (
            ("acquire", acq(mode="w", ms=1000), "garbage"),
            ("release", rel(), f"q|1|99999999999999|1|{META}"),
        )
    ],
    Case(
        "hold-on-a-lock-key-is-wrongtype",
        *acq(),
        Error("WRONGTYPE"),
        setup=[("SET", H.lock, f"{OTHER}|1|{META}", "PX", 5000)],
        after=[(("GET", H.lock), f"{OTHER}|1|{META}"), *absent(H.fence)],
    ),
    # ------------------------------------------- hold: a call sent again (lost reply + retry)
    Case(
        "hold-reentry-sent-again-counts-once",
        *reenter(op_id=OP_A),
        ["ok", 3, 2, Between(10000 - SLACK, 10000)],
        setup=[hold(count=2, fence=3, lease_ms=10000, op=OP_A), ttl(H.lock, 10000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 2, 3, 9000, 10000 + SLACK, f"{META}|o{OP_A}"))
        ],
    ),
    Case(
        "hold-reentry-with-a-new-op-id-counts",
        *reenter(op_id=OP_B),
        ["ok", 3, 3, Between(10000 - SLACK, 10000)],
        setup=[hold(count=2, fence=3, lease_ms=5000, op=OP_A), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 3, 3, 9000, 10000 + SLACK, f"{META}|o{OP_B}"))
        ],
    ),
    Case(
        "hold-decrement-sent-again-counts-once",
        *rel(op_id=OP_A, done_ms=DONE),
        ["ok", 2],
        setup=[hold(count=2, fence=3, op=OP_A), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 2, 3, 4000, 5000 + SLACK, f"{META}|o{OP_A}"))
        ],
    ),
    Case(
        "hold-last-release-is-remembered",
        *rel(op_id=OP_B, done_ms=DONE),
        ["ok", 0],
        setup=[
            hold(fence=3, op=OP_A),
            ttl(H.lock, 5000),
            ("SET", H.fence, 3),
            ("ZADD", H.released, At(-1), OTHER),  # forgotten: pruned
            ("ZADD", H.released, At(5000), FOURTH),
        ],
        after=[
            (("ZSCORE", H.released, TOKEN), Clock(DONE - SLACK, DONE + SLACK)),
            (("ZSCORE", H.released, OTHER), None),
            (("PTTL", H.released), Between(DONE - SLACK, DONE)),
            *absent(H.lock, H.wake, H.rwake),
        ],
    ),
    Case(
        "hold-release-sent-again-finds-it-remembered",
        *rel(op_id=OP_B, done_ms=DONE),
        ["ok", 0],
        setup=[("ZADD", H.released, At(DONE), TOKEN), ttl(H.released, DONE)],
        after=[*absent(H.lock)],
    ),
    Case(
        "hold-release-remembered-too-long-ago-is-gone",
        *rel(op_id=OP_B, done_ms=DONE),
        ["gone", 0],
        setup=[("ZADD", H.released, At(-1), TOKEN), ttl(H.released, DONE)],
        after=[*absent(H.lock)],
    ),
    Case(
        "hold-add-extend-sent-again-adds-once",
        *ext(ms=3000, extend_mode="add", op_id=OP_A),
        ["ok", Between(5000 - SLACK, 5000)],
        setup=[hold(fence=3, op=OP_A), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 3, 4000, 5000 + SLACK, f"{META}|o{OP_A}"))
        ],
    ),
    Case(
        "hold-add-extend-with-a-new-op-id-adds",
        *ext(ms=3000, extend_mode="add", op_id=OP_B),
        ["ok", Between(8000 - SLACK, 8000)],
        setup=[hold(fence=3, op=OP_A), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 3, 7000, 8000 + SLACK, f"{META}|o{OP_B}"))
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)


def test_hold_keys_and_argv_are_laid_out_as_the_core_lays_them_out() -> None:
    """The hold cases call the scripts exactly as HoldCore does: the same script, keys and
    ARGV (op ids aside, which the core draws per call)."""
    base = base_core()

    def same(op: Eval, call: tuple[str, tuple[str, ...], tuple[Any, ...]]) -> None:
        assert (op.script, op.keys, op.args) == (SCRIPTS[call[0]], call[1], call[2])

    for mode, permits in (("w", 0), ("r", 0), ("p", 3)):
        core = HoldCore.for_mode(base, mode, permits)
        for marker_ms in (0, 1500):
            op = core._acquire_op(TOKEN, ms=10000, meta=META, marker_ms=marker_ms)
            same(op, acq(TOKEN, mode, 10000, marker_ms=marker_ms, permits=permits))
        same(core._reenter_op(TOKEN, ms=10000, op_id=OP_A), reenter(TOKEN, 10000, OP_A))
        same(
            core._release_op(TOKEN, OP_A),
            rel(TOKEN, mode, permits=permits, op_id=OP_A, done_ms=DONE_MS),
        )
        same(core._extend_op(TOKEN, 3000, "max"), ext(TOKEN, 3000, "max"))
        same(core._status_op(TOKEN), status(TOKEN))
        same(core._count_op(), count(permits))
        same(core._leave_op(TOKEN), leave(TOKEN))
        same(core._force_op(), force())
    reader = HoldCore.for_mode(base, "r")
    op = reader._acquire_op(TOKEN, ms=10000, meta=META, companion=FOURTH)
    same(op, acq(TOKEN, "r", 10000, companion=FOURTH))
    # A call declares only the keys it may touch: a status is a one-key script, an extend
    # and a re-entry two-key ones (the hash and its index: slot migration, _core/hold.py);
    # a single write try declares no waiters key.
    assert reader._status_op(TOKEN).keys == (H.lock,)
    assert reader._extend_op(TOKEN, 1, "set").keys == (H.lock, H.expiry)
    assert reader._reenter_op(TOKEN, ms=1).keys == (H.lock, H.expiry)
    exclusive = HoldCore.for_mode(base, "w")
    assert exclusive._acquire_op(TOKEN, ms=1, meta=META).keys == (H.lock, H.expiry, H.fence)
    # The calls a retry must not apply twice carry an op id (a new one per call).
    sem = HoldCore.for_mode(base, "p", 3)
    op_ids = [sem._extend_op(TOKEN, 3000, "add").args[3], sem._release_op(TOKEN).args[1]]
    assert [len(str(op_id)) for op_id in op_ids] == [16, 16]
    assert sem._release_op(TOKEN).args[1] not in op_ids
    assert sem._release_op(TOKEN).args[2] == DONE_MS
    assert sem._extend_op(TOKEN, 3000, "max").args[3] == ""


# ------------------------------------------------------------------ 10,000 holds on one name

MANY = 10_000


def send(client: redis.Redis, ops: Sequence[Eval]) -> list[Any]:
    """Run hold script calls in pipelines of 1000 (the script is loaded first)."""
    replies: list[Any] = []
    for i in range(0, len(ops), 1000):
        pipe = client.pipeline(transaction=False)
        for op in ops[i : i + 1000]:
            pipe.evalsha(op.script.sha, len(op.keys), *op.keys, *op.args)
        replies += pipe.execute()
    return replies


def tokens(start: int, n: int) -> list[str]:
    return [f"{i:032x}" for i in range(start, start + n)]


def end_leases(client: redis.Redis, core: HoldCore, ending: list[str], ms: int = 1) -> None:
    """End the leases of ``ending`` in ``ms`` (an extend that sets it), and wait past it."""
    replies = send(client, [core._extend_op(t, ms, "set") for t in ending])
    assert all(reply[0] == "ok" for reply in replies)
    time.sleep(ms / 1000 + 0.05)


def assert_same_deadline(client: redis.Redis) -> None:
    """The hold's hash and its index end together (settle() gives both one PEXPIREAT):
    their PTTLs read in one MULTI, so no round trip comes between the two reads (on Redis
    6.2 too, which has no PEXPIRETIME)."""
    pipe = client.pipeline(transaction=True)
    pipe.pttl(H.lock)
    pipe.pttl(H.expiry)
    lock_ms, expiry_ms = pipe.execute()
    assert lock_ms > 0
    assert expiry_ms == pytest.approx(lock_ms, abs=50)  # a server paused mid-MULTI at most


def test_ten_thousand_readers_on_one_name(admin: redis.Redis) -> None:
    """10,000 read holds of one ReadWriteLock name: counts stay exact (also after thousands of
    leases ended, which the calls prune only a few at a time), a writer is held off until
    the last live reader leaves, and the last release leaves no key behind."""
    for script in SCRIPTS.values():
        admin.script_load(script.source)
    reader = HoldCore.for_mode(base_core(), "r")
    writer = reader.sibling("w")
    readers = tokens(1, MANY)
    replies = send(admin, [reader._acquire_op(t, ms=60_000, meta=META) for t in readers])
    assert [reply[0] for reply in replies] == ["ok"] * MANY
    assert sorted(int(reply[1]) for reply in replies) == list(range(1, MANY + 1))  # fences
    assert send(admin, [reader._count_op()]) == [[0, MANY, 0, 0]]
    assert admin.hlen(H.lock) == admin.zcard(H.expiry) == MANY
    assert send(admin, [writer._acquire_op(WAITER, ms=1000, meta=META)])[0][0] == "busy"
    # a re-entry, a renewal and a status of one reader among 10,000
    one = readers[MANY // 2]
    reenter = reader._reenter_op(one, ms=60_000, op_id=OP_A)
    assert send(admin, [reenter])[0][:3] == ["ok", MANY // 2 + 1, 2]
    assert send(admin, [reader._extend_op(one, 90_000, "set")]) == [["ok", 90_000]]
    status = send(admin, [reader._status_op(one)])[0]
    assert status[0] == "ok"
    assert status[3:] == [2, "r"]
    assert 89_000 <= admin.pttl(H.lock) <= 90_000
    assert_same_deadline(admin)
    # all but five leases end: the five are counted, not the 9,995 ended ones still stored
    live = [*readers[:4], one]
    # 8 s: every one of the 9,995 pipelined extends runs before the first of these leases
    # ends (with 2 s, a loaded machine's later extends each pruned 4 already-ended holds)
    end_leases(admin, reader, [t for t in readers if t not in live], ms=8000)
    assert send(admin, [reader._count_op()]) == [[0, 5, 0, 0]]
    assert admin.hlen(H.lock) == admin.zcard(H.expiry) > MANY - 1000  # pruned a few per call
    assert send(admin, [writer._acquire_op(WAITER, ms=1000, meta=META)])[0][0] == "busy"
    releases = [reader._release_op(t) for t in live] + [reader._release_op(one)]  # count 2
    assert [reply[0] for reply in send(admin, releases)] == ["ok"] * 6
    assert admin.exists(H.lock, H.expiry) == 0  # the ended holds went with the last one
    assert send(admin, [writer._acquire_op(WAITER, ms=1000, meta=META)])[0][:3] == [
        "ok",
        MANY + 1,
        1,
    ]


def test_ten_thousand_permits_on_one_name(admin: redis.Redis) -> None:
    """A Semaphore of 10,000 permits, all taken: the next one waits; as leases end, exactly
    that many permits can be taken again, although the ended ones are pruned a few at a
    time; the keys always live as long as the latest lease."""
    for script in SCRIPTS.values():
        admin.script_load(script.source)
    sem = HoldCore.for_mode(base_core(), "p", MANY)
    permits = tokens(1, MANY)
    replies = send(admin, [sem._acquire_op(t, ms=60_000, meta=META) for t in permits])
    assert [reply[0] for reply in replies] == ["ok"] * MANY
    assert send(admin, [sem._count_op()]) == [[0, 0, MANY, MANY]]
    extra = tokens(MANY + 1, 200)
    assert send(admin, [sem._acquire_op(extra[0], ms=60_000, meta=META)])[0][0] == "busy"
    assert send(admin, [sem._release_op(permits[0])]) == [["ok", 0]]
    granted = time.monotonic()  # the latest 60 s lease: the keys must live as long
    assert send(admin, [sem._acquire_op(extra[0], ms=60_000, meta=META)])[0][0] == "ok"
    end_leases(admin, sem, permits[1:151])  # 150 leases end
    replies = send(admin, [sem._acquire_op(t, ms=30_000, meta=META) for t in extra[1:]])
    assert [reply[0] for reply in replies] == ["ok"] * 150 + ["busy"] * 49
    assert send(admin, [sem._count_op()]) == [[0, 0, MANY, MANY]]
    assert admin.hlen(H.lock) == admin.zcard(H.expiry)
    # 60 s from that grant, less the time since (measured: a loaded machine takes > 1 s)
    elapsed_ms = (time.monotonic() - granted) * 1000
    assert 60_000 - elapsed_ms - 10 <= admin.pttl(H.lock) <= 60_000
    assert_same_deadline(admin)
