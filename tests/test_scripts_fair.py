# SPDX-License-Identifier: MIT
"""fair_acquire.lua, fair_release.lua, fair_cancel.lua and fair_force.lua (Lock's and
FairLock's waiter queue) and waiter_keep.lua: their behaviour on a real redis-server through
EVAL, case by case (the case format is in ``tests/scriptcases.py``)."""

from __future__ import annotations

import pytest
import redis

from redislock._core.fair import FairCore
from redislock._core.keys import FairKeys
from redislock._core.ops import Eval
from redislock._core.scripts import SCRIPTS
from tests.scriptcases import (
    FAIR,
    META,
    OTHER,
    QFOURTH,
    QOTHER,
    QTHIRD,
    QTOKEN,
    QUEUE_PX,
    SLACK,
    TAGGED,
    TAGGED2,
    WMETA,
    At,
    Between,
    Case,
    Clock,
    Error,
    F,
    K,
    absent,
    base_core,
    facq,
    fair_args,
    fheld,
    granted,
    marker,
    not_queued,
    queue_ttl,
    run_case,
    sent,
    ttl,
    waiter,
    woken,
)

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

FULL = (*FAIR, K.ring, K.wait, K.wake)  # fair_release's and fair_force's optional keys
FAIR_RING = (*FAIR, K.ring)  # fair_acquire's and fair_cancel's: then only the delay key
RING = 8192  # _ring.lua's RING: tokens per slot whose release is remembered
DELAY = K.lock + ":delay"
FULL_DELAY = (*FULL, DELAY)
QUEUE_DELAY = (*FAIR_RING, DELAY)
KEEP = (F.lock, F.queue, F.leases, F.info)  # waiter_keep's four keys of a waiter
F2 = FairKeys.for_name("job}2")  # another name of the same slot (hash tag "job")
KEEP2 = (
    F2.lock,
    F2.queue,
    F2.leases,
    F2.info,
)  # release, force: with the slot's release ring, MultiLock's marker

CASES = [
    # ---------------------------------------------------------------- fair: acquire
    Case(
        "fair-acquire-free",
        "fair_acquire",
        FAIR,
        facq(),
        ["ok", 1, 10000],
        after=[
            (("GET", F.lock), f"{QTOKEN}|1|{META}"),
            (("PTTL", F.lock), Between(10000 - SLACK, 10000)),
            (("GET", F.fence), "1"),
            (("PTTL", F.fence), -1),
            *absent(F.queue, F.leases, F.info),
        ],
    ),
    Case(
        "fair-acquire-free-continues-the-fence",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=0),
        ["ok", 42, 10000],
        setup=[("SET", F.fence, 41)],
        after=[(("GET", F.lock), f"{QTOKEN}|42|{META}"), (("GET", F.fence), "42")],
    ),
    Case(
        "fair-acquire-busy-enqueues",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=3000),
        ["busy", Between(5000 - SLACK, 5000), 7],
        setup=[fheld(QOTHER), ("SET", F.fence, 7)],
        after=[
            (("LRANGE", F.queue, 0, -1), [QTOKEN]),
            (("ZSCORE", F.leases, QTOKEN), Clock(3000, 3000 + SLACK)),
            (("HGET", F.info, QTOKEN), f"10000|{META}"),
            *queue_ttl(6000 - SLACK, 6000),  # a new queue: twice the waiter lease
            (("GET", F.lock), f"{QOTHER}|1|{META}"),
            (("GET", F.fence), "7"),  # no fencing token burnt on failure
        ],
    ),
    Case(
        "fair-acquire-busy-joins-the-tail",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=3000),
        ["busy", Between(5000 - SLACK, 5000), 0],
        setup=[fheld(QOTHER), *waiter(QTHIRD), *waiter(QFOURTH)],
        after=[
            (("LRANGE", F.queue, 0, -1), [QTHIRD, QFOURTH, QTOKEN]),
            (("ZCARD", F.leases), 3),
            (("HLEN", F.info), 3),
            *queue_ttl(QUEUE_PX - SLACK, QUEUE_PX),  # long enough already: not extended
        ],
    ),
    Case(
        "fair-acquire-busy-extends-a-queue-ttl-shorter-than-its-waiter-lease",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=3000),
        ["busy", Between(5000 - SLACK, 5000), 0],
        setup=[
            fheld(QOTHER),
            *waiter(QTHIRD),
            *[ttl(key, 500) for key in (F.queue, F.leases, F.info)],
        ],
        after=[
            (("LRANGE", F.queue, 0, -1), [QTHIRD, QTOKEN]),
            *queue_ttl(6000 - SLACK, 6000),  # twice the lease: not extended every time
        ],
    ),
    Case(
        "fair-acquire-busy-renews-a-queued-waiter-in-place",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=3000, queue_max=2),  # already queued: a full queue does not refuse it
        ["busy", Between(5000 - SLACK, 5000), 0],
        setup=[fheld(QOTHER), *waiter(QTOKEN, waiter_ms=200), *waiter(QTHIRD)],
        after=[
            (("LRANGE", F.queue, 0, -1), [QTOKEN, QTHIRD]),  # same place, not queued twice
            (("ZSCORE", F.leases, QTOKEN), Clock(3000, 3000 + SLACK)),
            (("HGET", F.info, QTOKEN), f"10000|{META}"),
            *queue_ttl(QUEUE_PX - SLACK, QUEUE_PX),  # long enough already: not extended
        ],
    ),
    Case(
        "fair-acquire-single-try-does-not-queue",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=0),
        ["busy", Between(5000 - SLACK, 5000)],  # the fast path (nobody queued): no counter
        setup=[fheld(QOTHER), ("SET", F.fence, 7)],
        after=[
            (("GET", F.lock), f"{QOTHER}|1|{META}"),
            (("GET", F.fence), "7"),
            *absent(F.queue, F.leases, F.info),
        ],
    ),
    Case(
        "fair-acquire-single-try-behind-a-full-queue",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=0, queue_max=1),
        ["busy", Between(5000 - SLACK, 5000), 0],  # not "full": a single try never queues
        setup=[fheld(QOTHER), *waiter(QTHIRD)],
        after=[(("LRANGE", F.queue, 0, -1), [QTHIRD]), *not_queued(QTOKEN)],
    ),
    Case(
        "fair-acquire-full",
        "fair_acquire",
        FAIR,
        facq(queue_max=2),
        ["full", 2],
        setup=[fheld(QOTHER), *waiter(QTHIRD), *waiter(QFOURTH)],
        after=[(("LRANGE", F.queue, 0, -1), [QTHIRD, QFOURTH]), *not_queued(QTOKEN)],
    ),
    Case(
        "fair-acquire-key-without-ttl",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=0),
        ["busy", -1],
        setup=[("SET", F.lock, "not ours")],
        after=[(("GET", F.lock), "not ours"), *absent(F.fence, F.queue)],
    ),
    Case(
        "fair-acquire-free-by-the-head",
        "fair_acquire",
        FAIR,
        facq(),
        ["ok", 1, 10000],
        setup=[*waiter(QTOKEN), *waiter(QTHIRD, waiter_ms=3000)],
        after=[
            (("GET", F.lock), f"{QTOKEN}|1|{META}"),
            (("LRANGE", F.queue, 0, -1), [QTHIRD]),
            *not_queued(QTOKEN),
            *queue_ttl(QUEUE_PX - SLACK, QUEUE_PX),  # a waiter left: not shortened
            *absent(F.grant),
        ],
    ),
    Case(
        "fair-acquire-free-grants-the-live-head-first",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=3000),
        ["busy", Between(8000 - SLACK, 8000), 5],
        setup=[*waiter(QOTHER, lease_ms=8000), ("SET", F.fence, 4)],
        after=[
            *granted(QOTHER, 5, 8000),
            (("LRANGE", F.queue, 0, -1), [QTOKEN]),
            (("HGET", F.info, QTOKEN), f"10000|{META}"),
            *queue_ttl(6000 - SLACK, 6000),  # the queue emptied, then this waiter's
        ],
    ),
    Case(
        "fair-acquire-free-single-try-still-grants-the-head",
        "fair_acquire",
        FAIR,
        facq(waiter_ms=0),
        ["busy", Between(8000 - SLACK, 8000), 5],
        setup=[*waiter(QOTHER, lease_ms=8000), ("SET", F.fence, 4)],
        after=[*granted(QOTHER, 5, 8000), *absent(F.queue, F.leases, F.info)],
    ),
    Case(
        "fair-acquire-prunes-dead-waiters",
        "fair_acquire",
        FAIR,
        facq(),
        ["ok", 1, 10000],
        setup=[*waiter(QOTHER, waiter_ms=-1000), *waiter(QTHIRD, waiter_ms=0)],
        after=[
            (("GET", F.lock), f"{QTOKEN}|1|{META}"),
            *absent(F.queue, F.leases, F.info),
        ],
    ),
    Case(
        "fair-acquire-granted",
        "fair_acquire",
        FAIR,
        facq(),
        ["ok", 5, Between(8000 - SLACK, 8000)],
        setup=[
            fheld(QTOKEN, 8000, WMETA, fence=5),
            ("SET", F.fence, 6),  # another name of the slot took 6 since
        ],
        after=[
            (("GET", F.lock), f"{QTOKEN}|5|{WMETA}"),  # the hold the grant wrote stays
            (("PTTL", F.lock), Between(8000 - SLACK, 8000)),
            (("GET", F.fence), "6"),
            *absent(F.grant),
        ],
    ),
    Case(
        "fair-acquire-repeat-of-own-hold",
        "fair_acquire",
        FAIR,
        facq(),
        ["ok", 2, Between(5000 - SLACK, 5000)],
        setup=[fheld(QTOKEN, fence=2), ("SET", F.fence, 2), *waiter(QOTHER, waiter_ms=3000)],
        after=[
            (("GET", F.lock), f"{QTOKEN}|2|{META}"),
            (("GET", F.fence), "2"),
            (("LRANGE", F.queue, 0, -1), [QOTHER]),
            *queue_ttl(QUEUE_PX - SLACK, QUEUE_PX),
        ],
    ),
    # ---------------------------------------------------------------- fair: release
    Case(
        "fair-release-grants-the-head",
        "fair_release",
        FAIR,
        fair_args(),
        "ok",
        setup=[
            fheld(QTOKEN),
            *waiter(QOTHER, lease_ms=8000, waiter_ms=3000),
            *waiter(QTHIRD, lease_ms=6000, waiter_ms=2000),
            ("SET", F.fence, 3),
        ],
        after=[
            *granted(QOTHER, 4, 8000),
            (("LRANGE", F.queue, 0, -1), [QTHIRD]),
            (("HGET", F.info, QTHIRD), f"6000|{WMETA}"),
            *queue_ttl(QUEUE_PX - SLACK, QUEUE_PX),  # not shortened
        ],
    ),
    Case(
        "fair-release-grants-on-the-head-process-channel",  # only that process is woken
        "fair_release",
        FAIR,
        fair_args(),
        "ok",
        setup=[
            fheld(QTOKEN),
            *waiter(TAGGED, lease_ms=8000, waiter_ms=3000),
            *waiter(TAGGED2, lease_ms=6000, waiter_ms=2000),
            ("SET", F.fence, 3),
        ],
        after=[
            *granted(TAGGED, 4, 8000),  # on "<grant>:0bad", nothing on "<grant>"
            (("PUBLISHED", F.grant), []),
            (("PUBLISHED", F.grant + ":c0fe"), []),
            (("LRANGE", F.queue, 0, -1), [TAGGED2]),
        ],
    ),
    Case(
        "fair-release-skips-a-dead-head",
        "fair_release",
        FAIR,
        fair_args(),
        "ok",
        setup=[
            fheld(QTOKEN),
            *waiter(QOTHER, waiter_ms=-1000),
            *waiter(QTHIRD, lease_ms=6000),
            ("SET", F.fence, 3),
        ],
        after=[
            *granted(QTHIRD, 4, 6000),
            *not_queued(QOTHER),
            *absent(F.queue, F.leases, F.info),
        ],
    ),
    Case(
        # A queued token without a process tag (no queue_token: redislock queues none) has
        # no channel: its grant is written all the same, nothing is published (run_case
        # checks every channel), and the release does not fail after its writes.
        "fair-release-grants-a-token-without-a-process-tag-publishing-nothing",
        "fair_release",
        FAIR,
        fair_args(),
        "ok",
        setup=[fheld(QTOKEN), *waiter(OTHER, lease_ms=8000), ("SET", F.fence, 3)],
        after=[
            (("GET", F.lock), f"{OTHER}|4|{WMETA}"),
            (("GET", F.fence), "4"),
            *not_queued(OTHER),
            (("PUBLISHED", F.grant), []),
        ],
    ),
    Case(
        "fair-release-empty-queue",
        "fair_release",
        FAIR,
        fair_args(),
        "ok",
        setup=[fheld(QTOKEN), ("SET", F.fence, 3)],
        after=[(("GET", F.fence), "3"), *absent(F.lock, F.queue)],
    ),
    Case(
        "fair-release-fast-path-wakes-a-waiting-multilock",  # nobody queued: Lock's release
        "fair_release",
        FULL,
        fair_args(QTOKEN, 1),
        "ok",
        setup=[fheld(QTOKEN), ("SET", F.fence, 3), marker(K.wait)],
        after=[
            *absent(F.lock, F.queue),
            *woken(K.wake),
            (("GETBIT", K.ring, 1), 1),  # its fencing token's bit: released by its holder
            (("GET", F.fence), "3"),
        ],
    ),
    Case(
        "fair-release-with-every-key-finds-the-queue",  # the fast path's one EXISTS sees it
        "fair_release",
        FULL,
        fair_args(QTOKEN, 1),
        "ok",
        setup=[fheld(QTOKEN), *waiter(QOTHER), ("SET", F.fence, 3), ("SETBIT", K.ring, 4, 1)],
        after=[
            *granted(QOTHER, 4, 8000),
            *absent(K.wake),
            (("GETBIT", K.ring, 1), 1),
            (("GETBIT", K.ring, 4), 0),  # the granted token's bit, cleared when issued
        ],
    ),
    Case(
        "fair-release-grants-and-wakes-a-waiting-multilock",
        "fair_release",
        FULL,
        fair_args(QTOKEN, 1),
        "ok",
        setup=[fheld(QTOKEN), *waiter(QOTHER), ("SET", F.fence, 3), marker(K.wait)],
        after=[*granted(QOTHER, 4, 8000), *woken(K.wake), (("GETBIT", K.ring, 1), 1)],
    ),
    Case(
        "fair-acquire-no-queue-limit",  # a Lock's queue (queue_max 0)
        "fair_acquire",
        FAIR,
        facq(waiter_ms=1000, queue_max=0),
        ["busy", Between(5000 - SLACK, 5000), 0],
        setup=[fheld(QOTHER), *waiter(QTHIRD)],
        after=[(("LRANGE", F.queue, 0, -1), [QTHIRD, QTOKEN])],
    ),
    Case(
        "fair-acquire-single-try-on-a-held-lock-is-busy",  # the fast path: nobody queued
        "fair_acquire",
        FAIR,
        facq(waiter_ms=0),
        ["busy", Between(5000 - SLACK, 5000)],
        setup=[fheld(QOTHER)],
        after=[(("GET", F.lock), f"{QOTHER}|1|{META}"), *absent(F.queue, F.leases, F.fence)],
    ),
    Case(
        "fair-acquire-fast-path-foreign-counter",  # not an integer: refused, nothing written
        "fair_acquire",
        FAIR,
        facq(),
        Error("not an integer"),
        setup=[("SET", F.fence, "x")],
        after=[*absent(F.lock, F.queue), (("GET", F.fence), "x")],
    ),
    Case(
        "fair-release-taken",
        "fair_release",
        FAIR,
        fair_args(),
        "taken",
        setup=[fheld(QOTHER), *waiter(QTHIRD), ("SET", F.fence, 3)],
        after=[
            (("GET", F.lock), f"{QOTHER}|1|{META}"),
            (("PTTL", F.lock), Between(5000 - SLACK, 5000)),
            (("GET", F.fence), "3"),
            (("LRANGE", F.queue, 0, -1), [QTHIRD]),
            *absent(F.grant),
        ],
    ),
    Case(
        "fair-release-token-prefix-is-not-ownership",
        "fair_release",
        FAIR,
        fair_args(),
        "taken",
        setup=[("SET", F.lock, f"{QTOKEN}0|{META}", "PX", 5000)],
        after=[(("GET", F.lock), f"{QTOKEN}0|{META}")],
    ),
    Case(
        "fair-release-gone",
        "fair_release",
        FAIR,
        fair_args(),
        "gone",
        after=absent(F.lock, F.fence, F.queue),
    ),
    Case(
        "fair-release-gone-grants-the-next-waiter",
        "fair_release",
        FAIR,
        fair_args(),
        "gone",
        setup=[*waiter(QOTHER)],
        after=[*granted(QOTHER, 1, 8000), *absent(F.queue, F.leases, F.info)],
    ),
    # ------------------------------------------ fair: the release ring (_ring.lua)
    Case(
        "fair-acquire-clears-its-tokens-bit",  # it may hold the release of fence 1 - RING
        "fair_acquire",
        FAIR_RING,
        facq(),
        ["ok", 1, 10000],
        setup=[("SETBIT", K.ring, 1, 1)],
        after=[(("GET", F.lock), f"{QTOKEN}|1|{META}"), (("GETBIT", K.ring, 1), 0)],
    ),
    Case(
        "fair-acquire-after-the-queue-clears-its-tokens-bit",  # the queue's own path
        "fair_acquire",
        FAIR_RING,
        facq(),
        ["ok", RING + 6, 10000],
        setup=[
            *waiter(QTOKEN),
            ("SET", F.fence, RING + 5),
            ("SETBIT", K.ring, 6, 1),
            ("SETBIT", K.ring, 5, 1),
        ],
        after=[(("GETBIT", K.ring, 6), 0), (("GETBIT", K.ring, 5), 1)],
    ),
    Case(
        "fair-release-repeat-is-ok-by-the-ring",  # a retried release: the first worked
        "fair_release",
        FULL,
        fair_args(QTOKEN, 2),
        "ok",
        setup=[("SET", F.fence, 9), ("SETBIT", K.ring, 2, 1), fheld(QOTHER, fence=9)],
        after=[(("GET", F.lock), f"{QOTHER}|9|{META}"), (("GETBIT", K.ring, 2), 1)],
    ),
    Case(
        "fair-release-repeat-of-a-lost-hold-is-taken",  # its bit is not set: lost, as told
        "fair_release",
        FULL,
        fair_args(QTOKEN, 2),
        "taken",
        setup=[("SET", F.fence, 9), ("SETBIT", K.ring, 9, 1), fheld(QOTHER, fence=9)],
        after=[(("GET", F.lock), f"{QOTHER}|9|{META}"), (("GETBIT", K.ring, 2), 0)],
    ),
    Case(
        "fair-release-repeat-beyond-the-window-cannot-tell",  # the bit is a newer token's
        "fair_release",
        FULL,
        fair_args(QTOKEN, 2),
        "gone",
        setup=[("SET", F.fence, RING + 2), ("SETBIT", K.ring, 2, 1)],
    ),
    Case(
        "fair-release-of-an-unknown-fence-is-not-looked-up",  # fence 0: an abandoned try
        "fair_release",
        FULL,
        fair_args(QTOKEN, 0),
        "gone",
        setup=[("SET", F.fence, 3), ("SETBIT", K.ring, 0, 1)],
    ),
    Case(
        "fair-release-repeat-grants-the-free-lock",  # released, nobody granted yet
        "fair_release",
        FULL,
        fair_args(QTOKEN, 1),
        "ok",
        setup=[("SET", F.fence, 1), ("SETBIT", K.ring, 1, 1), *waiter(QOTHER)],
        after=[*granted(QOTHER, 2, 8000)],
    ),
    Case(
        "fair-release-after-the-window-sets-no-bit",  # an old hold's bit is a newer token's
        "fair_release",
        FULL,
        fair_args(QTOKEN, 1),
        "ok",
        setup=[fheld(QTOKEN), ("SET", F.fence, RING + 1)],
        after=[*absent(F.lock), (("GETBIT", K.ring, 1), 0)],
    ),
    Case(
        "fair-release-after-the-queue-sets-its-bit",  # the queue's own path
        "fair_release",
        FULL,
        fair_args(QTOKEN, 3),
        "ok",
        setup=[fheld(QTOKEN, fence=3), *waiter(QOTHER), ("SET", F.fence, 3)],
        after=[*granted(QOTHER, 4, 8000), (("GETBIT", K.ring, 3), 1)],
    ),
    Case(
        "fair-force-sets-no-bit",  # an operator's override is no release by the holder
        "fair_force",
        FULL,
        (),
        1,
        setup=[fheld(QTOKEN, fence=3), ("SET", F.fence, 3)],
        after=[*absent(F.lock), (("GETBIT", K.ring, 3), 0)],
    ),
    # ---------------------------------------------------------------- fair: cancel, force
    Case(
        "fair-cancel-leaves-the-queue",
        "fair_cancel",
        FAIR,
        fair_args(),
        ["left", 0],
        setup=[
            fheld(QOTHER),
            *waiter(QTOKEN, waiter_ms=5000),
            *waiter(QTHIRD, waiter_ms=2000),
            *[ttl(key, 5000) for key in (F.queue, F.leases, F.info)],
        ],
        after=[
            (("LRANGE", F.queue, 0, -1), [QTHIRD]),
            *not_queued(QTOKEN),
            *queue_ttl(5000 - SLACK, 5000),  # not shortened
            (("GET", F.lock), f"{QOTHER}|1|{META}"),
        ],
    ),
    Case(
        "fair-cancel-last-waiter-clears-the-queue",
        "fair_cancel",
        FAIR,
        fair_args(),
        ["left", 0],
        setup=[fheld(QOTHER), *waiter(QTOKEN)],
        after=[(("GET", F.lock), f"{QOTHER}|1|{META}"), *absent(F.queue, F.leases, F.info)],
    ),
    Case(
        "fair-cancel-not-queued",
        "fair_cancel",
        FAIR,
        fair_args(),
        ["left", 0],
        setup=[fheld(QOTHER), *waiter(QTHIRD)],
        after=[(("LRANGE", F.queue, 0, -1), [QTHIRD]), (("GET", F.lock), f"{QOTHER}|1|{META}")],
    ),
    Case(
        "fair-cancel-granted",
        "fair_cancel",
        FAIR,
        fair_args(),
        ["ok", 5, Between(8000 - SLACK, 8000)],
        setup=[fheld(QTOKEN, 8000, WMETA, fence=5), ("SET", F.fence, 7), *waiter(QOTHER)],
        after=[
            (("GET", F.lock), f"{QTOKEN}|5|{WMETA}"),  # it holds the lock now
            (("LRANGE", F.queue, 0, -1), [QOTHER]),
            *absent(F.grant),
        ],
    ),
    Case(
        "fair-cancel-while-free-grants-the-next-waiter",
        "fair_cancel",
        FAIR,
        fair_args(),
        ["left", 0],
        setup=[*waiter(QTOKEN), *waiter(QOTHER), ("SET", F.fence, 2)],
        after=[
            *granted(QOTHER, 3, 8000),
            *not_queued(QTOKEN),
            *absent(F.queue, F.leases, F.info),
        ],
    ),
    Case(
        "fair-force-grants-the-next-waiter",
        "fair_force",
        FAIR,
        (),
        1,
        setup=[fheld(QOTHER), *waiter(QTHIRD, lease_ms=6000), ("SET", F.fence, 2)],
        after=[*granted(QTHIRD, 3, 6000), *absent(F.queue)],
    ),
    Case(
        "fair-force-nothing-held",
        "fair_force",
        FAIR,
        (),
        0,
        after=absent(F.lock, F.fence),
    ),
    Case(
        "fair-force-during-a-lock-delay-ends-it",  # no lock key: only the delay holds it off
        "fair_force",
        FULL_DELAY,
        (),
        2,
        setup=[("SET", K.lock + ":delay", "30000", "PX", 30000)],
        after=absent(F.lock, K.lock + ":delay"),
    ),
    Case(
        "fair-force-of-a-hold-with-a-lock-delay",
        "fair_force",
        FULL_DELAY,
        (),
        3,
        setup=[fheld(QOTHER), ("SET", K.lock + ":delay", "30000", "PX", 35000)],
        after=absent(F.lock, K.lock + ":delay"),
    ),
    Case(
        "fair-force-free-lock-grants-the-next-waiter",
        "fair_force",
        FAIR,
        (),
        0,
        setup=[*waiter(QTHIRD)],
        after=granted(QTHIRD, 1, 8000),
    ),
    # ---------------------------------------------------------------- fair: errors
    # ---------------------------------------------------------------- fair: lock-delay
    Case(
        "fair-acquire-single-try-during-a-lock-delay-is-busy-for-its-ttl",  # KEYS[7]
        "fair_acquire",
        QUEUE_DELAY,
        facq(waiter_ms=0),
        ["busy", Between(30000 - SLACK, 30000)],  # the fast path: the delay key's PTTL
        setup=[("SET", DELAY, "30000", "PX", 30000)],
        after=absent(F.lock, F.queue, F.fence),
    ),
    Case(
        "fair-cancel-during-a-lock-delay-grants-nobody",  # KEYS[7]: the delay key
        "fair_cancel",
        QUEUE_DELAY,
        fair_args(),
        ["left", 0],
        setup=[*waiter(QTOKEN), *waiter(QOTHER), ("SET", DELAY, "30000", "PX", 30000)],
        after=[
            *not_queued(QTOKEN),
            (("LRANGE", F.queue, 0, -1), [QOTHER]),  # its head takes it once the delay ends
            *absent(F.lock, F.fence),
        ],
    ),
    Case(
        "fair-cancel-while-free-grants-the-next-waiter-and-clears-its-tokens-bit",
        "fair_cancel",
        FAIR_RING,
        fair_args(),
        ["left", 0],
        setup=[*waiter(QTOKEN), *waiter(QOTHER), ("SET", F.fence, 2), ("SETBIT", K.ring, 3, 1)],
        after=[*granted(QOTHER, 3, 8000), (("GETBIT", K.ring, 3), 0)],
    ),
    # ---------------------------------------------------------------- fair: errors
    Case(
        "fair-malformed-waiter-info-is-dropped",
        "fair_acquire",
        FAIR,
        facq(),
        Error("is malformed"),
        setup=[
            ("RPUSH", F.queue, QOTHER),
            ("ZADD", F.leases, At(3000), QOTHER),
            ("HSET", F.info, QOTHER, "garbage"),
            *waiter(QTHIRD),
        ],
        after=[
            *not_queued(QOTHER),
            (("LRANGE", F.queue, 0, -1), [QTHIRD]),
            *absent(F.lock, F.fence),
        ],
    ),
    # ---------------------------------------------------------------- waiter_keep
    Case(
        "keep-queued-renews-the-waiter-lease-and-the-queue-ttl",
        "waiter_keep",
        KEEP,
        (f"{QTOKEN} 3000",),
        [["queued", 0]],
        setup=[
            fheld(QOTHER),
            *waiter(QTOKEN, waiter_ms=500),
            ("PEXPIRE", F.queue, 500),
            ("PEXPIRE", F.leases, 500),
            ("PEXPIRE", F.info, 500),
        ],
        after=[
            (("ZSCORE", F.leases, QTOKEN), Clock(3000, 3000 + SLACK)),
            *queue_ttl(6000 - SLACK, 6000),  # twice the lease: not extended every time
            (("LRANGE", F.queue, 0, -1), [QTOKEN]),
            (("GET", F.lock), f"{QOTHER}|1|{META}"),
        ],
    ),
    Case(
        "keep-never-shortens-the-queue-ttl",
        "waiter_keep",
        KEEP,
        (f"{QTOKEN} 1000",),
        [["queued", 0]],
        setup=[
            fheld(QOTHER),
            *waiter(QTOKEN),
            *waiter(QTHIRD, waiter_ms=9000),
            ("PEXPIRE", F.queue, 9000),
            ("PEXPIRE", F.leases, 9000),
            ("PEXPIRE", F.info, 9000),
        ],
        after=[
            (("ZSCORE", F.leases, QTOKEN), Clock(1000, 1000 + SLACK)),
            *queue_ttl(9000 - SLACK, 9000),
        ],
    ),
    Case(
        "keep-granted-reports-the-fence-and-writes-nothing",
        "waiter_keep",
        KEEP,
        (f"{QTOKEN} 3000",),
        [["granted", 5]],
        setup=[fheld(QTOKEN, fence=5), *waiter(QTHIRD)],
        after=[
            (("GET", F.lock), f"{QTOKEN}|5|{META}"),
            (("ZSCORE", F.leases, QTHIRD), Clock(1000, 1000)),
            *not_queued(QTOKEN),
        ],
    ),
    Case(
        "keep-not-queued-is-gone-and-not-queued-again",
        "waiter_keep",
        KEEP,
        (f"{QTOKEN} 3000",),
        [["gone", 0]],
        setup=[fheld(QOTHER)],
        after=[*absent(F.queue, F.leases, F.info), (("GET", F.lock), f"{QOTHER}|1|{META}")],
    ),
    Case(
        "keep-an-ended-waiter-lease-is-gone-and-not-revived",
        "waiter_keep",
        KEEP,
        (f"{QTOKEN} 3000",),
        [["gone", 0]],
        setup=[fheld(QOTHER), *waiter(QTOKEN, waiter_ms=-100), *waiter(QTHIRD)],
        after=[*not_queued(QTOKEN), (("LRANGE", F.queue, 0, -1), [QTHIRD])],  # pruned
    ),
    Case(
        "keep-free-lock-first-in-queue-tries",
        "waiter_keep",
        KEEP,
        (f"{QTOKEN} 3000",),
        [["free", 0]],
        setup=[*waiter(QTOKEN), *waiter(QTHIRD)],
        after=[(("ZSCORE", F.leases, QTOKEN), Clock(1000, 1000)), *absent(F.lock)],
    ),
    Case(
        "keep-free-lock-behind-a-dead-waiter-tries",
        "waiter_keep",
        KEEP,
        (f"{QTOKEN} 3000",),
        [["free", 0]],
        setup=[*waiter(QOTHER, waiter_ms=-100), *waiter(QTOKEN)],
        after=[(("LRANGE", F.queue, 0, -1), [QTOKEN]), *not_queued(QOTHER), *absent(F.lock)],
    ),
    Case(
        "keep-free-lock-behind-a-live-waiter-stays-queued",
        "waiter_keep",
        KEEP,
        (f"{QTOKEN} 3000",),
        [["queued", 0]],
        setup=[*waiter(QOTHER), *waiter(QTOKEN, waiter_ms=500)],
        after=[(("ZSCORE", F.leases, QTOKEN), Clock(3000, 3000 + SLACK)), *absent(F.lock)],
    ),
    Case(
        "keep-many-waiters-of-many-names-in-one-call",
        "waiter_keep",
        (*KEEP, *KEEP2),
        (f"{QTOKEN} 3000 {QTHIRD} 2000",),
        [["queued", 0], ["granted", 2]],
        setup=[
            fheld(QOTHER),
            *waiter(QTOKEN, waiter_ms=500),
            ("SET", F2.lock, f"{QTHIRD}|2|{META}", "PX", 5000),
        ],
        after=[(("ZSCORE", F.leases, QTOKEN), Clock(3000, 3000 + SLACK))],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)


def test_fair_keys_and_argv_are_laid_out_as_the_core_lays_them_out() -> None:
    """The fair cases call the scripts exactly as FairCore does."""
    base = base_core()
    fair_core = FairCore.from_base(base, 1.0, 10)
    # an acquire and a cancel send the queue's keys, the ring and the lock-delay key
    # (KEYS[7], which every acquire honours), an acquire its delay_ms (ARGV[6], 0: none);
    # a release and a force also MultiLock's marker and wake channel (the lock-delay key is
    # their KEYS[9]); the cases call with fewer, as before
    op = fair_core._acquire_op(QTOKEN, META, 1000)
    assert op.script is SCRIPTS["fair_acquire"]
    assert op.keys == QUEUE_DELAY
    assert sent(op.args) == sent((*facq(), 0))
    assert op.encoded == (op.script.sha.encode(), b"7", *sent(QUEUE_DELAY))  # pre-encoded
    single = fair_core._acquire_op(QTOKEN, META, 0)  # a single try: waiter_ms 0
    assert sent(single.args) == sent((*facq(waiter_ms=0), 0))
    cancel = fair_core._cancel_op(QTOKEN)
    assert cancel.script is SCRIPTS["fair_cancel"]
    assert cancel.keys == QUEUE_DELAY
    assert cancel.encoded == (cancel.script.sha.encode(), b"7", *sent(QUEUE_DELAY))
    assert sent(cancel.args) == sent(fair_args())
    release = fair_core._fenced_release(QTOKEN, 7)
    assert release.script is SCRIPTS["fair_release"]
    assert release.keys == FULL_DELAY
    assert sent(release.args) == sent(fair_args(QTOKEN, 7))
    assert release.encoded == (release.script.sha.encode(), b"9", *sent(FULL_DELAY))
    assert sent(fair_core._release_op(QTOKEN).args) == sent(fair_args(QTOKEN, 0))
    force = next(fair_core.force_flow())
    assert isinstance(force, Eval)
    assert force.script is SCRIPTS["fair_force"]
    assert (force.keys, force.args) == (FULL_DELAY, ())
    assert force.encoded == (force.script.sha.encode(), b"9", *sent(FULL_DELAY))
