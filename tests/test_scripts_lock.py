# SPDX-License-Identifier: MIT
"""The Lock scripts (lock_acquire, lock_release, lock_extend, lock_status and
lock_force_release): their behaviour on a real redis-server through EVAL, case by case (the
case format is in ``tests/scriptcases.py``), and the typed errors a script's failure becomes
(a name used by two kinds, an ACL refusal)."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio

from redislock import (
    AsyncLock,
    AsyncRLock,
    KindConflictError,
    Lock,
    MultiLock,
    NoPermissionError,
    RLock,
    Semaphore,
)
from redislock._core.keys import LockKeys
from redislock._core.lock import DONE_MS
from redislock._core.scripts import SCRIPTS
from tests.scriptcases import (
    ACQ,
    GONE,
    META,
    OTHER,
    REL,
    TOKEN,
    Between,
    Case,
    K,
    command,
    held,
    norm,
    run_case,
    woken,
)

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

K2 = LockKeys.for_name("job2")
K3 = LockKeys.for_name("job3")

CASES = [
    # ---------------------------------------------------------------- lock_acquire
    Case(
        "acquire-free",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 0),
        ["ok", 1],
        after=[
            (("GET", K.lock), f"{TOKEN}|1|{META}"),  # the holder's token is in its value
            (("PTTL", K.lock), Between(9000, 10000)),
            (("GET", K.fence), "1"),
            (("PTTL", K.fence), -1),  # the fence counter never expires
            (("EXISTS", K.wait), GONE),
        ],
    ),
    Case(
        "acquire-free-continues-the-fence",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 1500),
        ["ok", 42],
        setup=[("SET", K.fence, 41)],
        after=[
            (("GET", K.lock), f"{TOKEN}|42|{META}"),
            (("EXISTS", K.wait), GONE),  # acquiring never leaves a waiters marker
        ],
    ),
    Case(
        "acquire-busy-single-try",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 0),
        ["busy", Between(4000, 5000)],
        setup=[held(OTHER), ("SET", K.fence, 7)],
        after=[
            (("GET", K.lock), f"{OTHER}|1|{META}"),
            (("GET", K.fence), "7"),  # no fencing token burnt on failure
            (("EXISTS", K.wait), GONE),
        ],
    ),
    Case(
        "acquire-busy-waiting-sets-marker",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 1500),
        ["busy", Between(4000, 5000)],
        setup=[held(OTHER), ("SET", K.fence, 7)],
        after=[
            (("GET", K.wait), "1"),
            (("PTTL", K.wait), Between(1000, 1500)),
            (("GET", K.fence), "7"),
        ],
    ),
    Case(
        "acquire-sent-again-keeps-the-fence-and-renews-the-ttl",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 0),
        ["ok", 5],
        setup=[held(px=2000, fence=5), ("SET", K.fence, 9)],  # other names of the slot: 6..9
        after=[
            (("GET", K.lock), f"{TOKEN}|5|{META}"),
            (("PTTL", K.lock), Between(9000, 10000)),  # the lease runs from the retry
            (("GET", K.fence), "9"),
        ],
    ),
    Case(
        "acquire-key-without-ttl",
        "lock_acquire",
        ACQ,
        (TOKEN, 10000, META, 0),
        ["busy", -1],
        setup=[("SET", K.lock, "not ours")],
        after=[(("GET", K.lock), "not ours"), (("EXISTS", K.fence), GONE)],
    ),
    # ---------------------------------------------------------------- lock_release
    Case(
        "release-ok-no-waiters",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "ok",
        setup=[held()],
        after=[
            (("EXISTS", K.lock), GONE),
            (("EXISTS", K.wake), GONE),
            (("GET", K.done), TOKEN),  # remembered for a client that sends it again
            (("PTTL", K.done), Between(DONE_MS - 1000, DONE_MS)),
        ],
    ),
    Case(
        "release-sent-again-answers-ok",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "ok",
        setup=[("SET", K.done, TOKEN, "PX", 50000)],
        after=[(("EXISTS", K.lock), GONE), (("PTTL", K.done), Between(49000, 50000))],
    ),
    Case(
        "release-sent-again-after-another-took-it-answers-ok",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "ok",
        setup=[held(OTHER), ("SET", K.done, TOKEN, "PX", 50000), ("SET", K.wait, "1", "PX", 5000)],
        after=[
            (("GET", K.lock), f"{OTHER}|1|{META}"),  # the new holder's key is untouched
            (("PTTL", K.lock), Between(4000, 5000)),
            (("EXISTS", K.wake), GONE),
        ],
    ),
    Case(
        "release-another-tokens-done-key-is-gone",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "gone",
        setup=[("SET", K.done, OTHER, "PX", 50000)],
        after=[(("GET", K.done), OTHER)],
    ),
    Case(
        "release-an-extend-memo-is-not-a-release",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "gone",
        setup=[("SET", K.done, f"{TOKEN}|0123456789abcdef", "PX", 50000)],
    ),
    Case(
        "release-without-done-key-as-before",
        "lock_release",
        REL[:3],
        (TOKEN,),
        "ok",
        setup=[held()],
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.done), GONE)],
    ),
    Case(
        "release-ok-wakes-a-waiter",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "ok",
        setup=[held(), ("SET", K.wait, "1", "PX", 5000)],
        after=[
            (("EXISTS", K.lock), GONE),
            *woken(K.wake),
        ],
    ),
    Case(
        "release-gone",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "gone",
        setup=[("SET", K.wait, "1", "PX", 5000)],
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.wake), GONE)],
    ),
    Case(
        "release-taken",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "taken",
        setup=[held(OTHER), ("SET", K.wait, "1", "PX", 5000)],
        after=[
            (("GET", K.lock), f"{OTHER}|1|{META}"),
            (("PTTL", K.lock), Between(4000, 5000)),
            (("EXISTS", K.wake), GONE),
        ],
    ),
    Case(
        "release-token-prefix-is-not-ownership",
        "lock_release",
        REL,
        (TOKEN, DONE_MS),
        "taken",
        setup=[("SET", K.lock, f"{TOKEN}0|{META}", "PX", 5000)],
        after=[(("GET", K.lock), f"{TOKEN}0|{META}")],
    ),
    # ---------------------------------------------------------------- lock_extend
    Case(
        "extend-add",
        "lock_extend",
        (K.lock,),
        (TOKEN, 3000, "add"),
        ["ok", Between(7000, 8000)],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(7000, 8000)), (("GET", K.lock), f"{TOKEN}|1|{META}")],
    ),
    Case(
        "extend-add-remembers-its-op-id",
        "lock_extend",
        (K.lock, K.done),
        (TOKEN, 3000, "add", "0123456789abcdef", DONE_MS),
        ["ok", Between(7000, 8000)],
        setup=[held()],
        after=[
            (("PTTL", K.lock), Between(7000, 8000)),
            (("GET", K.done), f"{TOKEN}|0123456789abcdef"),
            (("PTTL", K.done), Between(DONE_MS - 1000, DONE_MS)),
        ],
    ),
    Case(
        "extend-add-sent-again-adds-nothing",
        "lock_extend",
        (K.lock, K.done),
        (TOKEN, 3000, "add", "0123456789abcdef", DONE_MS),
        ["ok", Between(4000, 5000)],  # the TTL now
        setup=[held(), ("SET", K.done, f"{TOKEN}|0123456789abcdef", "PX", 50000)],
        after=[(("PTTL", K.lock), Between(4000, 5000))],
    ),
    Case(
        "extend-add-another-op-id-adds",
        "lock_extend",
        (K.lock, K.done),
        (TOKEN, 3000, "add", "fedcba9876543210", DONE_MS),
        ["ok", Between(7000, 8000)],
        setup=[held(), ("SET", K.done, f"{TOKEN}|0123456789abcdef", "PX", 50000)],
        after=[(("GET", K.done), f"{TOKEN}|fedcba9876543210")],
    ),
    Case(
        "extend-add-another-tokens-op-id-adds",
        "lock_extend",
        (K.lock, K.done),
        (TOKEN, 3000, "add", "0123456789abcdef", DONE_MS),
        ["ok", Between(7000, 8000)],
        setup=[held(), ("SET", K.done, f"{OTHER}|0123456789abcdef", "PX", 50000)],
    ),
    Case(
        "extend-add-op-id-of-a-lost-hold-is-gone",
        "lock_extend",
        (K.lock, K.done),
        (TOKEN, 3000, "add", "0123456789abcdef", DONE_MS),
        ["gone", 0],
        setup=[("SET", K.done, f"{TOKEN}|0123456789abcdef", "PX", 50000)],
        after=[(("EXISTS", K.lock), GONE)],
    ),
    Case(
        "extend-set-shortens",
        "lock_extend",
        (K.lock,),
        (TOKEN, 2000, "set"),
        ["ok", 2000],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(1500, 2000))],
    ),
    Case(
        "extend-set-lengthens",
        "lock_extend",
        (K.lock,),
        (TOKEN, 60000, "set"),
        ["ok", 60000],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(59000, 60000))],
    ),
    Case(
        "extend-max-never-shortens",
        "lock_extend",
        (K.lock,),
        (TOKEN, 2000, "max"),
        ["ok", Between(4000, 5000)],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(4000, 5000))],
    ),
    Case(
        "extend-max-lengthens",
        "lock_extend",
        (K.lock,),
        (TOKEN, 9000, "max"),
        ["ok", 9000],
        setup=[held()],
        after=[(("PTTL", K.lock), Between(8500, 9000))],
    ),
    Case(
        "extend-add-to-key-without-ttl",
        "lock_extend",
        (K.lock,),
        (TOKEN, 3000, "add"),
        ["ok", 3000],
        setup=[held(px=None)],
        after=[(("PTTL", K.lock), Between(2500, 3000))],
    ),
    *[
        Case(
            f"extend-{mode}-gone-never-creates",
            "lock_extend",
            (K.lock,),
            (TOKEN, 3000, mode),
            ["gone", 0],
            after=[(("EXISTS", K.lock), GONE)],
        )
        for mode in ("add", "set", "max")
    ],
    *[
        Case(
            f"extend-{mode}-taken",
            "lock_extend",
            (K.lock,),
            (TOKEN, 30000, mode),
            ["taken", 0],
            setup=[held(OTHER)],
            after=[
                (("PTTL", K.lock), Between(4000, 5000)),
                (("GET", K.lock), f"{OTHER}|1|{META}"),
            ],
        )
        for mode in ("add", "set", "max")
    ],
    # ---------------------------------------------------------------- lock_status
    Case(
        "status-ok",
        "lock_status",
        (K.lock,),
        (TOKEN,),
        ["ok", Between(4000, 5000), 17],
        setup=[held(fence=17), ("SET", K.fence, 20)],  # the holder's token, not the counter
        after=[(("GET", K.lock), f"{TOKEN}|17|{META}")],
    ),
    Case("status-gone", "lock_status", (K.lock,), (TOKEN,), ["gone", 0, 0]),
    Case(
        "status-taken",
        "lock_status",
        (K.lock,),
        (TOKEN,),
        ["taken", 0, 0],
        setup=[held(OTHER)],
    ),
    Case(
        "status-token-prefix-is-not-ownership",
        "lock_status",
        (K.lock,),
        (TOKEN[:-1],),
        ["taken", 0, 0],
        setup=[held()],
    ),
    # ---------------------------------------------------------------- lock_force_release
    Case(
        "force-release-with-waiters",
        "lock_force_release",
        REL[:3],  # as the CLI calls it
        (),
        1,
        setup=[held(OTHER), ("SET", K.wait, "1", "PX", 5000), ("SET", K.fence, 1)],
        after=[
            (("EXISTS", K.lock), GONE),
            *woken(K.wake),
            (("GET", K.fence), "1"),  # the fence counter survives
        ],
    ),
    Case(
        "force-release-no-waiters",
        "lock_force_release",
        REL[:3],  # as the CLI calls it
        (),
        1,
        setup=[held(OTHER)],
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.wake), GONE)],
    ),
    Case(
        "force-release-during-a-lock-delay-ends-it",
        "lock_force_release",
        (*REL[:3], K.lock + ":delay"),  # as the CLI calls it
        (),
        2,
        setup=[("SET", K.lock + ":delay", "30000", "PX", 30000)],
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.lock + ":delay"), GONE)],
    ),
    Case(
        "force-release-of-a-hold-with-a-lock-delay",
        "lock_force_release",
        (*REL[:3], K.lock + ":delay"),
        (),
        3,
        setup=[held(OTHER), ("SET", K.lock + ":delay", "30000", "PX", 35000)],
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.lock + ":delay"), GONE)],
    ),
    Case(
        "force-release-nothing-held",
        "lock_force_release",
        REL[:3],  # as the CLI calls it
        (),
        0,
        after=[(("EXISTS", K.lock), GONE), (("EXISTS", K.wake), GONE)],
    ),
    # ---------------------------------------------------------------- lock_renew
    # K and K2 hold values of TOKEN (with their fencing tokens 1 and 2): both renew.
    Case(
        "renew-many-as-extend-max",
        "lock_renew",
        (K.lock, K2.lock, K3.lock),
        (f"{TOKEN} 9000 {TOKEN} 2000 {TOKEN} 9000",),
        [["ok", 9000], ["ok", Between(4000, 5000)], ["gone", 0]],
        setup=[held(), ("SET", K2.lock, f"{TOKEN}|2|{META}", "PX", 5000)],
        after=[
            (("PTTL", K.lock), Between(8500, 9000)),
            (("PTTL", K2.lock), Between(4000, 5000)),  # never shortened
            (("EXISTS", K3.lock), 0),  # never re-created
        ],
    ),
    Case(
        "renew-another-owner-is-taken",
        "lock_renew",
        (K.lock, K2.lock),
        (f"{OTHER} 9000 {TOKEN} 9000",),
        [["taken", 0], ["ok", 9000]],
        setup=[held(), ("SET", K2.lock, f"{TOKEN}|2|{META}", "PX", 5000)],
        after=[
            (("PTTL", K.lock), Between(4000, 5000)),
            (("GET", K.lock), f"{TOKEN}|1|{META}"),
            (("PTTL", K2.lock), Between(8500, 9000)),
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_script_behaviour(r: redis.Redis, case: Case) -> None:
    run_case(r, case)


def test_evalsha_runs_the_loaded_script(r: redis.Redis) -> None:
    script = SCRIPTS["lock_status"]
    r.script_load(script.source)
    command(r, *held(fence=3))
    reply = norm(r.evalsha(script.sha, 1, K.lock, TOKEN))
    assert reply == ["ok", Between(4000, 5000), 3]


def test_acquire_release_cycle_issues_increasing_fences(r: redis.Redis) -> None:
    """The scripts compose: acquire, release, acquire again gives the next fence."""
    acquire, release = SCRIPTS["lock_acquire"], SCRIPTS["lock_release"]
    fences = []
    for token in (TOKEN, OTHER, TOKEN):
        status, fence = norm(r.eval(acquire.source, len(ACQ), *ACQ, token, 10000, META, 0))
        assert status == "ok"
        fences.append(fence)
        assert norm(r.eval(release.source, 4, *REL, token, 2000, DONE_MS)) == "ok"
    assert fences == [1, 2, 3]


# ---------------------------------------------------------------- typed errors of the scripts


def test_a_name_used_by_two_kinds_names_both(r: redis.Redis) -> None:
    """WRONGTYPE from any kind's script becomes KindConflictError (still a ResponseError
    starting with WRONGTYPE), naming the kind asked for and the kind that holds the name."""
    sem = Semaphore(r, "shared", 2)
    permit = sem.acquire()
    with pytest.raises(KindConflictError) as caught:
        Lock(r, "shared", ttl=5).acquire(blocking=False)
    err = caught.value
    assert isinstance(err, redis.exceptions.ResponseError)
    assert str(err).startswith("WRONGTYPE")
    assert (err.name, err.key) == ("shared", "redislock:{shared}")
    assert err.found == "a Semaphore"
    assert err.wanted == "Lock or FairLock"  # the kinds that run fair_acquire.lua
    with pytest.raises(KindConflictError) as caught:
        MultiLock(r, ["other", "shared"], ttl=5).acquire(blocking=False)
    assert (caught.value.key, caught.value.wanted) == ("redislock:{shared}", "MultiLock")
    assert caught.value.found == "a Semaphore"
    assert r.exists("redislock:{other}") == 0  # nothing was taken
    permit.release()
    lock = Lock(r, "shared", ttl=5)
    assert lock.acquire(blocking=False)
    with pytest.raises(KindConflictError) as caught:
        RLock(r, "shared", ttl=5).acquire(blocking=False)
    assert caught.value.wanted == "RLock or ReadWriteLock"  # the kinds that run hold_acquire_write
    assert caught.value.found.startswith("a Lock, FairLock, MultiLock, Redlock or MultiRedlock")
    lock.release()


async def test_a_name_used_by_two_kinds_asyncio(ar: redis.asyncio.Redis) -> None:
    rlock = AsyncRLock(ar, "mixed", ttl=5)
    assert await rlock.acquire(blocking=False)
    with pytest.raises(KindConflictError) as caught:
        await AsyncLock(ar, "mixed", ttl=5).acquire(blocking=False)
    assert caught.value.found == "an RLock or a ReadWriteLock's writer"
    await rlock.release()


def test_a_refusal_names_the_command(r: redis.Redis) -> None:
    """The convention every script follows: NOPERM redislock: <COMMAND> ..."""
    acl = ("ACL", "SETUSER", "no-pexpire", "reset", "on", ">pw", "~*", "+@all", "-pexpire")
    command(r, *acl)
    try:
        kwargs = r.connection_pool.connection_kwargs
        user = redis.Redis(unix_socket_path=kwargs["path"], username="no-pexpire", password="pw")
        lock = Lock(user, "denied", ttl=5)
        assert lock.acquire(blocking=False)
        with pytest.raises(NoPermissionError) as caught:
            lock.extend(5)
        assert caught.value.command == "PEXPIRE"
        assert str(caught.value).startswith("redislock: PEXPIRE ")
        assert lock.statistics().held  # the hold is as it was
        lock.release()
        user.close()
    finally:
        command(r, "ACL", "DELUSER", "no-pexpire")
