# SPDX-License-Identifier: MIT
"""barrier_enter.lua, barrier_check.lua, barrier_renew.lua, barrier_leave.lua,
barrier_left.lua, barrier_read.lua (a ``Barrier``'s rounds, ``_barrier.lua``): their
behaviour on a real redis-server through EVAL, case by case (the case format is in
``tests/scriptcases.py``): the first party starts a round with a generation from the slot's
fencing counter, the party that makes ``parties`` opens it (published), an open round lets
nobody else in, a dead party's lease ends its membership, the last party to leave closes the
round (published, keys deleted), renewals only move a lease later, resent calls count once,
and bad input or a foreign hash is refused before any write."""

from __future__ import annotations

import pytest
import redis

from redislock._core.barrier import BARRIER_SUFFIX
from tests.scriptcases import (
    OTHER,
    SLACK,
    THIRD,
    TOKEN,
    Arg,
    At,
    Between,
    Case,
    Clock,
    Error,
    K,
    absent,
    run_case,
)

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

B = K.lock + BARRIER_SUFFIX
M = B + ":members"
BD = B + ":done"
ENTER_KEYS = (B, M, K.fence)
LEAVE_KEYS = (B, M, BD)
KEYS2 = (B, M)
LEASE = 10_000
DONE = 60_000


def args(
    op: str,
    token: str = TOKEN,
    lease_ms: int | str = "",
    parties: int | str = "",
    gen: int | str = 0,
) -> tuple[Arg, ...]:
    """``barrier_<op>.lua``'s ARGV as ``BarrierCore._op`` lays it out."""
    return {
        "enter": (token, lease_ms, parties),
        "check": (token,),
        "renew": (token, lease_ms),
        "leave": (token, DONE),
        "left": (gen,),
        "read": (),
    }[op]


def enter(parties: int = 3, token: str = TOKEN) -> tuple[Arg, ...]:
    return args("enter", token, LEASE, parties)


def round_(gen: int = 5, state: str = "enter", parties: int = 3) -> tuple[Arg, ...]:
    """Setup: the current round."""
    return ("HSET", B, "gen", gen, "state", state, "parties", parties)


def member(token: str, lease_ms: int = 8000) -> tuple[Arg, ...]:
    """Setup: ``token`` is a member whose lease ends ``lease_ms`` from now (< 0: ended)."""
    return ("ZADD", M, At(lease_ms), token)


def is_round(gen: int, state: str, parties: int) -> list[tuple[tuple[Arg, ...], object]]:
    return [(("HGETALL", B), {"gen": str(gen), "state": state, "parties": str(parties)})]


def leased(
    token: str, lo: int = LEASE - SLACK, hi: int = LEASE + SLACK
) -> list[tuple[tuple[Arg, ...], object]]:
    """Checks: ``token``'s lease ends ``lo`` to ``hi`` ms after the case's server time."""
    return [(("ZSCORE", M, token), Clock(lo, hi))]


def expiring(ms: int) -> list[tuple[tuple[Arg, ...], object]]:
    """Checks: both keys expire about ``ms`` from now (the latest member lease)."""
    return [(("PTTL", key), Between(ms - SLACK, ms)) for key in (B, M)]


CLOSED = [*absent(B, M)]

CASES = [
    # ---- enter
    Case(
        "barrier-enter-starts-a-round-from-the-slot-counter",
        "barrier_enter",
        ENTER_KEYS,
        enter(3),
        ["wait", 1, 1, 3, Between(LEASE - SLACK, LEASE)],
        after=[
            *is_round(1, "enter", 3),
            *leased(TOKEN),
            *expiring(LEASE),
            (("GET", K.fence), "1"),
        ],
    ),
    Case(
        "barrier-enter-joins-the-round",
        "barrier_enter",
        ENTER_KEYS,
        enter(3),
        ["wait", 5, 2, 3, Between(8000 - SLACK, 8000)],
        setup=[round_(), member(OTHER)],
        after=[*is_round(5, "enter", 3), *leased(TOKEN), *expiring(LEASE), *absent(K.fence)],
    ),
    Case(
        "barrier-enter-of-the-last-party-opens-the-round",
        "barrier_enter",
        ENTER_KEYS,
        enter(3),
        ["open", 5, 3, 3, Between(8000 - SLACK, 8000)],
        setup=[round_(), member(OTHER), member(THIRD, 9000)],
        after=[*is_round(5, "open", 3), *leased(TOKEN), (("PUBLISHED", B), ["B|open|5"])],
    ),
    Case(
        "barrier-enter-of-one-party-opens-at-once",
        "barrier_enter",
        ENTER_KEYS,
        enter(1),
        ["open", 1, 1, 1, Between(LEASE - SLACK, LEASE)],
        after=[*is_round(1, "open", 1), (("PUBLISHED", B), ["B|open|1"])],
    ),
    Case(
        "barrier-an-open-round-is-full",
        "barrier_enter",
        ENTER_KEYS,
        enter(2),
        ["full", 5, 2, 2, Between(8000 - SLACK, 8000)],
        setup=[round_(state="open", parties=2), member(OTHER), member(THIRD, 9000)],
        after=[*is_round(5, "open", 2), (("ZSCORE", M, TOKEN), None), *absent(K.fence)],
    ),
    Case(
        "barrier-another-party-count-is-refused",
        "barrier_enter",
        ENTER_KEYS,
        enter(3),
        ["mismatch", 5, 1, 4, -1],
        setup=[round_(parties=4), member(OTHER)],
        after=[*is_round(5, "enter", 4), (("ZSCORE", M, TOKEN), None)],
    ),
    Case(
        "barrier-enter-sent-again-counts-once",
        "barrier_enter",
        ENTER_KEYS,
        enter(3),
        ["wait", 5, 2, 3, Between(8000 - SLACK, 8000)],
        setup=[round_(), member(OTHER), member(TOKEN, 9000)],
        after=[*is_round(5, "enter", 3), *leased(TOKEN, 9000 - SLACK, 9000)],
    ),
    Case(
        "barrier-dead-members-leave-and-their-open-round-closes",
        "barrier_enter",
        ENTER_KEYS,
        enter(2),
        ["wait", 8, 1, 2, Between(LEASE - SLACK, LEASE)],
        setup=[
            round_(state="open", parties=2),
            member(OTHER, -100),
            member(THIRD, -50),
            ("SET", K.fence, 7),
        ],
        after=[
            *is_round(8, "enter", 2),
            (("ZRANGE", M, 0, -1), [TOKEN]),
            (("PUBLISHED", B), ["B|closed|5"]),
        ],
    ),
    Case(
        "barrier-a-dead-member-does-not-count-towards-opening",
        "barrier_enter",
        ENTER_KEYS,
        enter(3),
        ["wait", 5, 2, 3, Between(8000 - SLACK, 8000)],
        setup=[round_(), member(OTHER), member(THIRD, -10)],
        after=[*is_round(5, "enter", 3), (("ZSCORE", M, THIRD), None)],
    ),
    # ---- check
    Case(
        "barrier-check-while-entering",
        "barrier_check",
        KEYS2,
        args("check"),
        ["wait", 5, 2, 3, Between(8000 - SLACK, 8000)],
        setup=[round_(), member(OTHER), member(TOKEN, 9000)],
    ),
    Case(
        "barrier-check-of-an-open-round",
        "barrier_check",
        KEYS2,
        args("check"),
        ["open", 5, 2, 2, Between(8000 - SLACK, 8000)],
        setup=[round_(state="open", parties=2), member(OTHER), member(TOKEN, 9000)],
    ),
    Case(
        "barrier-check-of-a-party-whose-lease-ended",
        "barrier_check",
        KEYS2,
        args("check"),
        ["gone", 5, 1, 3, Between(8000 - SLACK, 8000)],
        setup=[round_(), member(OTHER), member(TOKEN, -10)],
        after=[(("ZSCORE", M, TOKEN), None)],
    ),
    # ---- renew
    Case(
        "barrier-renew-moves-the-lease-later",
        "barrier_renew",
        KEYS2,
        args("renew", lease_ms=LEASE),
        ["ok", Between(LEASE - SLACK, LEASE)],
        setup=[round_(), member(TOKEN, 2000), ("PEXPIRE", B, 2000), ("PEXPIRE", M, 2000)],
        after=[*leased(TOKEN), *expiring(LEASE)],
    ),
    Case(
        "barrier-renew-never-shortens-a-lease",
        "barrier_renew",
        KEYS2,
        args("renew", lease_ms=LEASE),
        ["ok", Between(20_000 - SLACK, 20_000)],
        setup=[round_(), member(TOKEN, 20_000)],
        after=leased(TOKEN, 20_000 - SLACK, 20_000),
    ),
    Case(
        "barrier-renew-of-an-ended-lease-is-gone",
        "barrier_renew",
        KEYS2,
        args("renew", lease_ms=LEASE),
        ["gone", 0],
        setup=[round_(), member(OTHER), member(TOKEN, -10)],
        after=[(("ZSCORE", M, TOKEN), Clock(-10 - SLACK, -10 + SLACK))],  # not brought back
    ),
    # ---- leave
    Case(
        "barrier-leave",
        "barrier_leave",
        LEAVE_KEYS,
        args("leave"),
        ["ok", 1, 5, Between(8000 - SLACK, 8000)],
        setup=[round_(state="open", parties=2), member(OTHER), member(TOKEN, 9000)],
        after=[
            (("ZRANGE", M, 0, -1), [OTHER]),
            (("ZSCORE", BD, TOKEN), Clock(-SLACK, SLACK)),
            (("PTTL", BD), Between(DONE - SLACK, DONE)),
            *is_round(5, "open", 2),
        ],
    ),
    Case(
        "barrier-the-last-to-leave-closes-the-round",
        "barrier_leave",
        LEAVE_KEYS,
        args("leave"),
        ["ok", 0, 5, -1],
        setup=[round_(state="open", parties=2), member(OTHER, -10), member(TOKEN, 9000)],
        after=[
            *CLOSED,
            (("PUBLISHED", B), ["B|closed|5"]),
            (("ZSCORE", BD, TOKEN), Clock(-SLACK, SLACK)),
        ],
    ),
    Case(
        "barrier-leave-sent-again-answers-ok",
        "barrier_leave",
        LEAVE_KEYS,
        args("leave"),
        ["ok", 1, 5, Between(8000 - SLACK, 8000)],
        setup=[round_(state="open", parties=2), member(OTHER), ("ZADD", BD, At(-100), TOKEN)],
        after=[(("ZRANGE", M, 0, -1), [OTHER])],
    ),
    Case(
        "barrier-leave-of-a-party-whose-lease-ended-is-gone",
        "barrier_leave",
        LEAVE_KEYS,
        args("leave"),
        ["gone", 1, 5, Between(8000 - SLACK, 8000)],
        setup=[round_(state="open", parties=2), member(OTHER), member(TOKEN, -10)],
        after=[(("ZRANGE", M, 0, -1), [OTHER]), *absent(BD)],
    ),
    Case(
        "barrier-leave-forgets-tokens-older-than-done-ms",
        "barrier_leave",
        LEAVE_KEYS,
        args("leave"),
        ["ok", 1, 5, Between(8000 - SLACK, 8000)],
        setup=[
            round_(state="open", parties=2),
            member(OTHER),
            member(TOKEN, 9000),
            ("ZADD", BD, At(-DONE - 5000), THIRD),
        ],
        after=[(("ZRANGE", BD, 0, -1), [TOKEN])],
    ),
    # ---- left
    Case(
        "barrier-left-waits-while-members-are-in",
        "barrier_left",
        KEYS2,
        args("left", "", gen=5),
        ["wait", 1, Between(8000 - SLACK, 8000)],
        setup=[round_(state="open", parties=2), member(OTHER)],
    ),
    Case(
        "barrier-left-of-a-closed-round-is-done",
        "barrier_left",
        KEYS2,
        args("left", "", gen=5),
        ["done", 0, -1],
        setup=[round_(gen=8), member(OTHER)],  # a newer round
        after=is_round(8, "enter", 3),
    ),
    Case(
        "barrier-left-closes-a-round-whose-members-all-died",
        "barrier_left",
        KEYS2,
        args("left", "", gen=5),
        ["done", 0, -1],
        setup=[round_(state="open", parties=2), member(OTHER, -10)],
        after=[*CLOSED, (("PUBLISHED", B), ["B|closed|5"])],
    ),
    # ---- read
    Case(
        "barrier-read",
        "barrier_read",
        KEYS2,
        args("read", ""),
        [5, "open", 2, 1, Between(8000 - SLACK, 8000)],
        setup=[round_(state="open", parties=2), member(OTHER), member(THIRD, -10)],
        after=[(("ZSCORE", M, THIRD), Clock(-10 - SLACK, -10 + SLACK))],  # read only
    ),
    Case("barrier-read-nothing", "barrier_read", KEYS2, args("read", ""), [0, "", 0, 0, -1]),
    # ---- refused before anything is written
    Case(
        "barrier-a-hash-not-written-by-redislock-is-refused",
        "barrier_enter",
        ENTER_KEYS,
        enter(3),
        Error("is not a Barrier"),
        setup=[("HSET", B, "gen", "x")],
        after=[(("HGETALL", B), {"gen": "x"}), *absent(M, K.fence)],
    ),
    Case(  # was barrier-unknown-op: a script per op takes no op argument
        "barrier-a-left-generation-must-be-digits",
        "barrier_left",
        KEYS2,
        args("left", gen="x"),
        Error("redislock barrier: bad arguments for left"),
        setup=[round_(state="open", parties=2), member(OTHER)],
        after=[*is_round(5, "open", 2), (("ZRANGE", M, 0, -1), [OTHER])],
    ),
    Case(
        "barrier-zero-parties-are-refused",
        "barrier_enter",
        ENTER_KEYS,
        enter(0),
        Error("redislock barrier: bad arguments for enter"),
        after=absent(B, M, K.fence),
    ),
    Case(
        "barrier-a-token-must-be-hex",
        "barrier_leave",
        LEAVE_KEYS,
        args("leave", "not a token"),
        Error("redislock barrier: bad arguments for leave"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)
