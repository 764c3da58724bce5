# SPDX-License-Identifier: MIT
"""hold.lua, the holds of RLock, ReadWriteLock and Semaphore: its behaviour on a real
redis-server through EVAL, case by case (the case format is in ``tests/scriptcases.py``)."""

from __future__ import annotations

import pytest
import redis

from redislock._core.hold import HoldCore
from redislock._core.lock import DONE_MS
from redislock._core.scripts import SCRIPTS
from tests.scriptcases import (
    FOURTH,
    HOLD,
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
    absent,
    acq,
    base_core,
    hold,
    hold_args,
    marker,
    run_case,
    ttl,
    waiting,
    woken,
)

OP_A, OP_B = "a" * 16, "b" * 16
DONE = 60_000

CASES = [
    # ---------------------------------------------------------------- hold: acquire
    *[
        Case(
            f"hold-acquire-free-{mode}",
            "hold",
            HOLD,
            acq(mode=mode, permits=permits),
            ["ok", 1, 1, 10000],
            after=[
                (("HGET", H.lock, TOKEN), HoldValue(mode, 1, 1, 10000, 10000 + SLACK)),
                (("HLEN", H.lock), 1),
                (("PTTL", H.lock), Between(10000 - SLACK, 10000)),
                (("GET", H.fence), "1"),
                (("PTTL", H.fence), -1),  # the fence counter never expires
                *absent(H.wait, H.wake, H.rwait, H.rwake),
            ],
        )
        for mode, permits in (("w", 0), ("r", 0), ("p", 3))
    ],
    Case(
        "hold-acquire-continues-the-fence",
        "hold",
        HOLD,
        acq(mode="r"),
        ["ok", 42, 1, 10000],
        setup=[("SET", H.fence, 41)],
        after=[(("HGET", H.lock, TOKEN), HoldValue("r", 1, 42, 10000, 10000 + SLACK))],
    ),
    Case(
        "hold-reenter",
        "hold",
        HOLD,
        acq(ms=10000, reenter=True),
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
        "hold",
        HOLD,
        acq(ms=10000, reenter=True),
        ["ok", 7, 3, Between(20000 - SLACK, 20000)],
        setup=[hold(lease_ms=20000, count=2, fence=7), ttl(H.lock, 20000), ("SET", H.fence, 7)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 3, 7, 20000, 20000)),
            (("PTTL", H.lock), Between(20000 - SLACK, 20000)),
        ],
    ),
    Case(
        "hold-reenter-gone",
        "hold",
        HOLD,
        acq(reenter=True),
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
        "hold",
        HOLD,
        acq(reenter=True),
        ["gone", 0],
        setup=[hold(lease_ms=-1000)],
        after=absent(H.lock, H.fence),
    ),
    *[
        Case(
            f"hold-repeat-of-first-acquisition-count-{count}",
            "hold",
            HOLD,
            acq(ms=10000),  # reenter "0", but TOKEN already holds: a retry after a lost reply
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
        "hold",
        HOLD,
        acq(mode="r"),
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
            "hold",
            HOLD,
            acq(mode="w"),
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
        "hold",
        HOLD,
        acq(mode="w", marker_ms=1500),
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
        "hold",
        HOLD,
        acq(mode="r", marker_ms=1500),
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
        "hold",
        HOLD,
        acq(mode="r"),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000)],
        after=absent(H.wait, H.rwait, H.fence),
    ),
    Case(
        "hold-r-blocked-by-waiting-writer",
        "hold",
        HOLD,
        acq(mode="r"),
        ["busy", Between(3000 - SLACK, 3000)],  # no hold: the marker's remaining TTL
        setup=[waiting(3000)],
        after=[(("ZSCORE", H.wait, WAITER), Clock(3000 - SLACK, 3000)), *absent(H.lock, H.fence)],
    ),
    Case(
        "hold-w-acquired-stops-counting-as-waiting",
        "hold",
        HOLD,
        acq(mode="w", marker_ms=1500),
        ["ok", 1, 1, Between(10000 - SLACK, 10000)],
        setup=[waiting(3000, TOKEN), waiting(3000)],
        # the writer that got in no longer blocks readers; the other waiter still does
        after=[(("ZSCORE", H.wait, TOKEN), None), (("ZCARD", H.wait), 1)],
    ),
    Case(
        "hold-r-not-blocked-by-an-expired-waiting-writer",
        "hold",
        HOLD,
        acq(mode="r"),
        ["ok", 1, 1, Between(10000 - SLACK, 10000)],
        setup=[waiting(-5)],
        after=[(("EXISTS", H.wait), 0)],
    ),
    Case(
        "hold-leave",
        "hold",
        HOLD,
        hold_args("leave"),
        1,
        setup=[waiting(3000, TOKEN), waiting(3000)],
        after=[(("ZSCORE", H.wait, TOKEN), None), (("ZCARD", H.wait), 1)],
    ),
    Case(
        "hold-r-blocked-by-waiting-writer-beside-readers",
        "hold",
        HOLD,
        acq(mode="r", marker_ms=1500),
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
        "hold",
        HOLD,
        acq(mode="r", companion=FOURTH),
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
            "hold",
            HOLD,
            acq(mode="r", companion=FOURTH),
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
        "hold",
        HOLD,
        acq(mode="r"),
        ["ok", 1, 1, 10000],
        setup=[hold(OTHER, "r"), ttl(H.lock, 5000), marker(H.rwait), ("RPUSH", H.rwake, "x")],
        after=[*woken(H.rwake), *absent(H.wake)],
    ),
    Case(
        "hold-p-up-to-permits",
        "hold",
        HOLD,
        acq(mode="p", permits=3),
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
        "hold",
        HOLD,
        acq(mode="p", permits=3),
        ["ok", 2, 1, 10000],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.fence, 1), waiting()],
        after=[*woken(H.wake), *absent(H.rwake)],
    ),
    Case(
        "hold-p-blocked-at-permits",
        "hold",
        HOLD,
        acq(mode="p", permits=2, marker_ms=1500),
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
        "hold",
        HOLD,
        acq(mode="p", permits=3),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.permits, 1)],
        after=[(("HLEN", H.lock), 1), (("GET", H.permits), "1"), *absent(H.fence, H.wait)],
    ),
    Case(
        "hold-p-higher-permits-key-admits",
        "hold",
        HOLD,
        acq(mode="p", permits=1),
        ["ok", 1, 1, 10000],
        setup=[hold(OTHER, "p"), ttl(H.lock, 5000), ("SET", H.permits, 2)],
        after=[(("HLEN", H.lock), 2), (("PTTL", H.permits), -1)],
    ),
    Case(
        "hold-p-blocked-by-writer",
        "hold",
        HOLD,
        acq(mode="p", permits=3),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[hold(OTHER, "w"), ttl(H.lock, 5000)],
        after=[(("HLEN", H.lock), 1)],
    ),
    *[
        Case(
            f"hold-{what}-hold-is-pruned-and-does-not-block",
            "hold",
            HOLD,
            acq(mode="w"),
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
        "hold",
        HOLD,
        hold_args("release"),
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
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[hold(fence=3), ttl(H.lock, 5000), ("SET", H.fence, 3)],
        after=[(("GET", H.fence), "3"), *absent(H.lock, H.wake, H.rwake)],
    ),
    Case(
        "hold-release-last-wakes-a-writer-first",
        "hold",
        HOLD,
        hold_args("release"),
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
        "hold",
        HOLD,
        hold_args("release"),
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
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[hold(TOKEN, "w"), hold(FOURTH, "r"), ttl(H.lock, 5000), waiting()],
        after=[(("HLEN", H.lock), 1), *absent(H.wake, H.rwake)],
    ),
    Case(
        "hold-release-wakes-readers",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[hold(mode="w"), ttl(H.lock, 5000), marker(H.rwait)],
        after=[*woken(H.rwake), *absent(H.lock, H.wake)],
    ),
    Case(
        "hold-release-reader-wakes-readers-beside-readers",
        "hold",
        HOLD,
        hold_args("release"),
        ["ok", 0],
        setup=[hold(mode="r"), hold(OTHER, "r"), ttl(H.lock, 5000), marker(H.rwait)],
        after=[*woken(H.rwake), *absent(H.wake)],
    ),
    Case(
        "hold-release-permit-wakes-below-permits",
        "hold",
        HOLD,
        hold_args("release", mode="p", permits=2),
        ["ok", 0],
        setup=[hold(mode="p"), hold(OTHER, "p"), ttl(H.lock, 5000), waiting()],
        after=[*woken(H.wake), (("HLEN", H.lock), 1)],
    ),
    Case(
        "hold-release-permit-no-wake-while-at-permits-key",
        "hold",
        HOLD,
        hold_args("release", mode="p", permits=5),
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
        "hold",
        HOLD,
        hold_args("release"),
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
        "hold",
        HOLD,
        hold_args("release"),
        ["gone", 0],
        setup=[hold(lease_ms=-1000)],
        after=absent(H.lock, H.wake, H.rwake),
    ),
    # ---------------------------------------------------------------- hold: extend
    Case(
        "hold-extend-add",
        "hold",
        HOLD,
        hold_args("extend", ms=3000, extend_mode="add"),
        ["ok", Between(8000 - SLACK, 8000)],
        setup=[hold(mode="r", count=2, fence=4), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("r", 2, 4, 8000, 8000)),
            (("PTTL", H.lock), Between(8000 - SLACK, 8000)),
        ],
    ),
    Case(
        "hold-extend-set-shortens",
        "hold",
        HOLD,
        hold_args("extend", ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(lease_ms=5000), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 2000, 2000 + SLACK)),
            (("PTTL", H.lock), Between(2000 - SLACK, 2000)),
        ],
    ),
    Case(
        "hold-extend-set-shortens-key-to-latest-other-lease",
        "hold",
        HOLD,
        hold_args("extend", ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(mode="p", lease_ms=9000), hold(OTHER, "p", 5000), ttl(H.lock, 9000)],
        after=[(("PTTL", H.lock), Between(5000 - SLACK, 5000))],
    ),
    Case(
        "hold-extend-set-keeps-key-for-longer-other-lease",
        "hold",
        HOLD,
        hold_args("extend", ms=2000, extend_mode="set"),
        ["ok", 2000],
        setup=[hold(mode="p", lease_ms=5000), hold(OTHER, "p", 8000), ttl(H.lock, 8000)],
        after=[(("PTTL", H.lock), Between(8000 - SLACK, 8000))],
    ),
    Case(
        "hold-extend-set-lengthens",
        "hold",
        HOLD,
        hold_args("extend", ms=60000, extend_mode="set"),
        ["ok", 60000],
        setup=[hold(), ttl(H.lock, 5000)],
        after=[(("PTTL", H.lock), Between(60000 - SLACK, 60000))],
    ),
    Case(
        "hold-extend-max-never-shortens",
        "hold",
        HOLD,
        hold_args("extend", ms=2000, extend_mode="max"),
        ["ok", Between(5000 - SLACK, 5000)],
        setup=[hold(), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 1, 5000, 5000)),
            (("PTTL", H.lock), Between(5000 - SLACK, 5000)),
        ],
    ),
    Case(
        "hold-extend-max-lengthens",
        "hold",
        HOLD,
        hold_args("extend", ms=9000, extend_mode="max"),
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
            "hold",
            HOLD,
            hold_args("extend", ms=30000, extend_mode=mode),
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
        "hold",
        HOLD,
        hold_args("status"),
        ["ok", Between(5000 - SLACK, 5000), 9, 2, "r"],
        setup=[hold(mode="r", count=2, fence=9), ttl(H.lock, 5000), ("SET", H.fence, 12)],
        after=[(("HGET", H.lock, TOKEN), HoldValue("r", 2, 9, 5000, 5000))],
    ),
    Case(
        "hold-status-gone",
        "hold",
        HOLD,
        hold_args("status"),
        ["gone", 0, 0, 0, ""],
        setup=[hold(OTHER), ttl(H.lock, 5000), hold(lease_ms=-1000)],
        after=[(("HEXISTS", H.lock, TOKEN), 0)],
    ),
    Case(
        "hold-status-declares-the-hash-only",  # ARGV[14] "h": a one-key script (slot migration)
        "hold",
        (H.lock,),
        (*hold_args("status"), "", 0, "h"),
        ["ok", Between(5000 - SLACK, 5000), 9, 2, "r"],
        setup=[hold(mode="r", count=2, fence=9), ttl(H.lock, 5000)],
    ),
    Case(
        "hold-extend-declares-the-hash-and-its-index",  # both exist together (slot migration)
        "hold",
        (H.lock, H.expiry),
        (*hold_args("extend", ms=3000, extend_mode="add"), OP_A, DONE, "hx"),
        ["ok", Between(8000 - SLACK, 8000)],
        setup=[hold(fence=3), ttl(H.lock, 5000)],
        after=[(("PTTL", H.lock), Between(8000 - SLACK, 8000))],
    ),
    Case(
        "hold-undeclared-keys-count-as-absent",  # a Semaphore's release names no reader keys
        "hold",
        (H.lock, H.wait, H.wake, H.permits, H.released, H.expiry),
        (*hold_args("release", mode="p", permits=3), OP_A, DONE, "hwkpdx"),
        ["ok", 0],
        setup=[hold(mode="p"), ttl(H.lock, 5000), marker(H.rwait)],
        after=[*absent(H.lock, H.rwake, H.wake)],
    ),
    Case(
        "hold-count-read-write",
        "hold",
        HOLD,
        hold_args("count", ""),
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
        "hold",
        HOLD,
        hold_args("count", "", permits=3),
        [0, 0, 2, 3],
        setup=[hold(TOKEN, "p"), hold(OTHER, "p"), hold(THIRD, "p", -1000), ttl(H.lock, 5000)],
    ),
    Case(
        "hold-count-permits-key",
        "hold",
        HOLD,
        hold_args("count", "", permits=3),
        [0, 0, 1, 5],
        setup=[hold(TOKEN, "p"), ttl(H.lock, 5000), ("SET", H.permits, 5)],
    ),
    Case("hold-count-empty", "hold", HOLD, hold_args("count", ""), [0, 0, 0, 0]),
    Case(
        "hold-force",
        "hold",
        HOLD,
        hold_args("force", ""),
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
        "hold",
        HOLD,
        hold_args("force", ""),
        0,
        after=absent(H.lock, H.wake, H.rwake),
    ),
    # ---------------------------------------------------------------- hold: errors
    *[
        Case(
            f"hold-{op}-malformed-field",
            "hold",
            HOLD,
            hold_args(op, mode="w", ms=1000, meta=META),
            Error("holds a field not written by redislock"),
            setup=[("HSET", H.lock, OTHER, value)],
            after=[(("HGET", H.lock, OTHER), value), *absent(H.fence)],
        )
        for op, value in (("acquire", "garbage"), ("release", f"q|1|99999999999999|1|{META}"))
    ],
    Case(
        "hold-on-a-lock-key-is-wrongtype",
        "hold",
        HOLD,
        acq(),
        Error("WRONGTYPE"),
        setup=[("SET", H.lock, f"{OTHER}|{META}", "PX", 5000)],
        after=[(("GET", H.lock), f"{OTHER}|{META}"), *absent(H.fence)],
    ),
    Case(
        "hold-unknown-op",
        "hold",
        HOLD,
        hold_args("steal"),
        Error("unknown hold op steal"),
        setup=[hold(OTHER), ttl(H.lock, 5000)],
        after=[(("HGET", H.lock, OTHER), HoldValue("w", 1, 1, 5000, 5000))],
    ),
    # ------------------------------------------- hold: a call sent again (lost reply + retry)
    Case(
        "hold-reentry-sent-again-counts-once",
        "hold",
        HOLD,
        acq(reenter=True, op_id=OP_A),
        ["ok", 3, 2, Between(10000 - SLACK, 10000)],
        setup=[hold(count=2, fence=3, lease_ms=10000, op=OP_A), ttl(H.lock, 10000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 2, 3, 9000, 10000 + SLACK, f"{META}|o{OP_A}"))
        ],
    ),
    Case(
        "hold-reentry-with-a-new-op-id-counts",
        "hold",
        HOLD,
        acq(reenter=True, op_id=OP_B),
        ["ok", 3, 3, Between(10000 - SLACK, 10000)],
        setup=[hold(count=2, fence=3, lease_ms=5000, op=OP_A), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 3, 3, 9000, 10000 + SLACK, f"{META}|o{OP_B}"))
        ],
    ),
    Case(
        "hold-decrement-sent-again-counts-once",
        "hold",
        HOLD,
        hold_args("release", op_id=OP_A, done_ms=DONE),
        ["ok", 2],
        setup=[hold(count=2, fence=3, op=OP_A), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 2, 3, 4000, 5000 + SLACK, f"{META}|o{OP_A}"))
        ],
    ),
    Case(
        "hold-last-release-is-remembered",
        "hold",
        HOLD,
        hold_args("release", op_id=OP_B, done_ms=DONE),
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
        "hold",
        HOLD,
        hold_args("release", op_id=OP_B, done_ms=DONE),
        ["ok", 0],
        setup=[("ZADD", H.released, At(DONE), TOKEN), ttl(H.released, DONE)],
        after=[*absent(H.lock)],
    ),
    Case(
        "hold-release-remembered-too-long-ago-is-gone",
        "hold",
        HOLD,
        hold_args("release", op_id=OP_B, done_ms=DONE),
        ["gone", 0],
        setup=[("ZADD", H.released, At(-1), TOKEN), ttl(H.released, DONE)],
        after=[*absent(H.lock)],
    ),
    Case(
        "hold-add-extend-sent-again-adds-once",
        "hold",
        HOLD,
        hold_args("extend", ms=3000, extend_mode="add", op_id=OP_A, done_ms=DONE),
        ["ok", Between(5000 - SLACK, 5000)],
        setup=[hold(fence=3, op=OP_A), ttl(H.lock, 5000)],
        after=[
            (("HGET", H.lock, TOKEN), HoldValue("w", 1, 3, 4000, 5000 + SLACK, f"{META}|o{OP_A}"))
        ],
    ),
    Case(
        "hold-add-extend-with-a-new-op-id-adds",
        "hold",
        HOLD,
        hold_args("extend", ms=3000, extend_mode="add", op_id=OP_B, done_ms=DONE),
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
    """The hold cases call the script exactly as HoldCore does."""
    base = base_core()
    hold_core = HoldCore.for_mode(base, "p", 3)
    op = hold_core._op(
        "acquire", TOKEN, ms=10000, meta=META, marker_ms=1500, reenter=True, companion=FOURTH
    )
    expected = acq(TOKEN, "p", 10000, marker_ms=1500, reenter=True, companion=FOURTH, permits=3)
    assert op.script is SCRIPTS["hold"]
    assert op.keys == (H.lock, H.expiry)  # a re-entry touches the hash and its index only
    assert op.args == (*expected[:9], hold_core.wake_ms, *expected[10:], "", DONE_MS, "hx")
    op = hold_core._op("extend", TOKEN, ms=3000, extend_mode="add")
    expected = hold_args("extend", TOKEN, "p", 3000, permits=3, extend_mode="add")
    assert op.args == (*expected[:9], hold_core.wake_ms, *expected[10:], "", DONE_MS, "hx")
    # Each call declares only the keys it may touch (ARGV[14] names them), all of HOLD's.
    roles = dict(zip("hfwkrspdx", HOLD, strict=True))
    for mode in ("w", "r", "p"):
        core = HoldCore.for_mode(base, mode, 3 if mode == "p" else 0)
        for op in (
            core._op("acquire", TOKEN, ms=1000, meta=META, marker_ms=1500),
            core._release_op(TOKEN),
            core._op("leave", TOKEN),
            core._op("count", ""),
            core._op("force", ""),
            core._op("status", TOKEN),
        ):
            assert op.keys == tuple(roles[r] for r in str(op.args[13]))
    sem = HoldCore.for_mode(base, "p", 3)
    assert sem._op("acquire", TOKEN, ms=1).args[13] == "hfwkpx"
    assert sem._release_op(TOKEN).args[13] == "hwkpdx"
    assert sem._op("status", TOKEN).args[13] == "h"  # a one-key script (slot migration)
    assert HoldCore.for_mode(base, "r")._op("acquire", TOKEN, ms=1).args[13] == "hfwrsx"
    exclusive = HoldCore.for_mode(base, "w")
    assert exclusive._op("acquire", TOKEN, ms=1).args[13] == "hfx"  # a single try
    assert exclusive._op("acquire", TOKEN, ms=1, marker_ms=5).args[13] == "hfwx"
    # The calls a retry must not apply twice carry an op id (ARGV[12]).
    for op in (
        hold_core._extend_op(TOKEN, 3000, "add"),
        hold_core._release_op(TOKEN),
    ):
        assert isinstance(op.args[11], str)
        assert len(op.args[11]) == 16
        assert op.args[12] == DONE_MS
    assert hold_core._extend_op(TOKEN, 3000, "max").args[11] == ""
