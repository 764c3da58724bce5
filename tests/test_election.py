# SPDX-License-Identifier: MIT
"""Election / AsyncElection: campaign, resign, leader, proclaim, terms, loss, observe."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio

from redislock import (
    AcquireTimeoutError,
    AsyncElection,
    Election,
    LeaderInfo,
    LockConfigError,
    LockLostError,
    NotOwnedError,
)
from redislock.server import RedisProcess

pytestmark = pytest.mark.pythons  # dev.py's STAGES: where else it runs


class Observer:
    """``observe()`` of a fresh Election in a thread: what it yielded, with the monotonic
    time it arrived; it stops after ``count`` items."""

    def __init__(
        self,
        client: redis.Redis,
        name: str,
        count: int,
        recheck: float = 30.0,
        *,
        until_gone: bool = False,
    ):
        self.seen: list[tuple[float, LeaderInfo | None]] = []
        self._it = Election(client, name, identity="observer").observe(recheck=recheck)
        self._count = count
        self._until_gone = until_gone  # also stop at a None after a leader
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for info in self._it:
                self.seen.append((time.monotonic(), info))
                if len(self.seen) >= self._count:
                    return
                if self._until_gone and info is None and len(self.seen) > 1:
                    return
        except redis.ConnectionError as exc:
            # Its test ended while it still watched (the client closed, the server stopped
            # at the session's end): kept for until(), which reports it while the test runs.
            self.error = exc

    error: redis.ConnectionError | None = None

    def until(self, n: int, limit: float = 5.0) -> list[tuple[float, LeaderInfo | None]]:
        end = time.monotonic() + limit
        while len(self.seen) < n and self.error is None and time.monotonic() < end:
            time.sleep(0.005)
        assert len(self.seen) >= n, (self.seen, self.error)
        return self.seen


# ------------------------------------------------------------------ sync


def test_campaign_leader_proclaim_resign(r: redis.Redis, admin: redis.Redis) -> None:
    a = Election(r, "svc", identity="node-a")
    other = Election(r, "svc", identity="node-b")
    assert a.leader() is None
    assert a.identity == "node-a"
    assert not a.statistics().held
    with a.campaign() as term:
        assert term >= 1
        assert a.term == term
        assert a.leader() == other.leader() == LeaderInfo("node-a", term, "")
        a.proclaim("http://a:8080")
        assert other.leader() == LeaderInfo("node-a", term, "http://a:8080")
        assert a.term == term  # proclaim does not re-elect
        # the leader key lives next to the lock, with a TTL, never beyond the lock's key
        assert admin.get(a.key + ":leader") == f"{term}|node-a|http://a:8080"
        assert admin.pttl(a.key + ":leader") > 0
        with pytest.raises(AcquireTimeoutError), other.campaign(timeout=0):
            pass
    assert a.leader() is None
    assert a.fencing_token is None
    assert admin.exists(a.key, a.key + ":leader") == 0
    with pytest.raises(NotOwnedError):
        a.resign()
    with pytest.raises(NotOwnedError):
        a.proclaim("x")


def test_default_identity_is_host_and_pid(r: redis.Redis) -> None:
    import os

    e = Election(r, "svc-default")
    assert e.identity.endswith(f":{os.getpid()}")
    with e.campaign() as term:
        info = e.leader()
        assert info is not None
        assert info.identity == e.identity
        assert info.term == term


def test_resign_hands_over_at_once_and_terms_increase(r: redis.Redis) -> None:
    terms: list[int] = []
    leading: list[str] = []
    lock = threading.Lock()
    overlap: list[str] = []

    def contender(ident: str) -> None:
        e = Election(r, "handoff", identity=ident)
        with e.campaign(timeout=20) as term:
            with lock:
                if leading:
                    overlap.append(ident)
                leading.append(ident)
                terms.append(term)
            info = e.leader()
            assert info is not None
            assert info.identity == ident
            assert info.term == term
            time.sleep(0.15)
            with lock:
                leading.remove(ident)

    threads = [threading.Thread(target=contender, args=(f"c{i}",)) for i in range(4)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not overlap
    assert len(terms) == 4
    assert terms == sorted(terms)
    assert len(set(terms)) == 4
    # four terms of 0.15 s each, handed over at once (no polling, no lease to wait out)
    assert time.monotonic() - start < 0.15 * 4 + 1.0


def test_loss_is_reported_like_a_lost_lock(r: redis.Redis, admin: redis.Redis) -> None:
    lost: list[object] = []
    e = Election(r, "lossy", identity="a", watchdog_lease=1.0, on_lost=lost.append)
    ended: list[BaseException] = []
    term = 0
    try:
        with e.campaign() as term:
            admin.delete(e.key)  # an operator, a failover without the key...
            end = time.monotonic() + 3
            while not lost and time.monotonic() < end:
                time.sleep(0.01)
            assert lost == [e]
            assert e.lost
            assert e.leader() is None  # the leader key's term is not the lock's
            with pytest.raises(LockLostError):
                e.proclaim("late")
    except LockLostError as exc:  # the end of the block reports the loss
        ended.append(exc)
    assert len(ended) == 1
    assert term >= 1
    b = Election(r, "lossy", identity="b")
    with b.campaign(timeout=1) as term2:
        assert term2 > term
        assert b.leader() == LeaderInfo("b", term2, "")


def test_leader_key_outlives_renewals(r: redis.Redis, admin: redis.Redis) -> None:
    """The leader key's TTL is kept ahead of the lease: a long leadership keeps its
    identity; a leader key deleted by hand is written again within its TTL (4 leases)."""
    e = Election(r, "long", identity="a", watchdog_lease=0.6)
    with e.campaign() as term:
        e.proclaim("v")
        time.sleep(3.0)  # 5 leases: past the first leader key's TTL (2.4 s)
        assert e.leader() == LeaderInfo("a", term, "v")
        admin.delete(e.key + ":leader")
        end = time.monotonic() + 4 * 0.6 + 1.0
        while e.leader() is None and time.monotonic() < end:
            time.sleep(0.05)
        assert e.leader() == LeaderInfo("a", term, "v")
        assert e.statistics().renewals >= 10


def test_a_renewal_is_one_round_trip(r: redis.Redis, admin: redis.Redis) -> None:
    """The watchdog's renewals cost one script call each, plus a leader key refresh about
    every ninth (its TTL is 4 leases; before, every renewal also refreshed it)."""
    e = Election(r, "cheap", identity="a", watchdog_lease=0.6)  # renewals every 0.2 s
    with e.campaign() as term:
        admin.config_resetstat()
        before = e.statistics().renewals
        time.sleep(3.0)
        calls = admin.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        renewals = e.statistics().renewals - before
        assert e.leader() == LeaderInfo("a", term, "")
    assert renewals >= 8  # (15 when on time)
    assert renewals <= calls <= renewals + renewals // 4 + 1, (renewals, calls)


def test_extend_keeps_the_leader_advertised(r: redis.Redis) -> None:
    """A fixed ``ttl`` extended past the leader key's TTL refreshes it: the leader stays
    visible for the whole extended lease."""
    e = Election(r, "ext", identity="a", ttl=0.5)  # leader key TTL 2 s
    with e.campaign() as term:
        assert e.extend(5) > 4.5
        time.sleep(2.5)
        assert e.leader() == LeaderInfo("a", term, "")


def test_resigned_or_lost_leader_cannot_proclaim(r: redis.Redis, admin: redis.Redis) -> None:
    a = Election(r, "stale", identity="a", watchdog_lease=1.0)
    term = a.lead()
    a.resign()
    with pytest.raises(NotOwnedError):
        a.proclaim("late")
    assert a.leader() is None
    # lost: the lease ends (here: the key deleted) and b leads; a's proclaim, resign and
    # watchdog never touch b's leader key
    term = a.lead()
    admin.delete(a.key)
    b = Election(r, "stale", identity="b")
    with b.campaign(timeout=1) as term_b:
        assert term_b > term
        b.proclaim("mine")
        with pytest.raises(LockLostError):
            a.proclaim("late")
        with pytest.raises(LockLostError):
            a.resign()
        time.sleep(0.5)  # a's watchdog, had it not stopped, renews every 1/3 s
        assert a.leader() == LeaderInfo("b", term_b, "mine")
        assert admin.get(b.key + ":leader") == f"{term_b}|b|mine"


def test_a_failed_advertisement_leaves_no_leader(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """lead() that gets its lock but cannot write the leader key (here an ACL refuses that
    key) raises, holds nothing, and the next contender leads at once (never a leader
    nobody advertised and nobody will resign)."""
    e = Election(admin, "noadv", identity="x")
    core = e._core
    writable = " ".join(f"%W~{k}" for k in core.keys)  # every key of the lock, not the leader's
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL",
        "SETUSER",
        "no-leader-key",
        "on",
        ">pw",
        "resetkeys",
        "%R~*",
        *writable.split(),
        "resetchannels",
        "&*",
        "+@all",
    )
    try:
        user = redis.Redis(**redis_server.client_kwargs(), username="no-leader-key", password="pw")
        a = Election(user, "noadv", identity="a", watchdog_lease=1.0)
        with pytest.raises(redis.exceptions.ResponseError, match=r"(?i)perm"):
            a.lead(timeout=1)
        assert a.term is None
        b = Election(admin, "noadv", identity="b")
        start = time.monotonic()
        with b.campaign(timeout=1) as term:
            assert time.monotonic() - start < 0.5
            assert b.leader() == LeaderInfo("b", term, "")
        user.close()
    finally:
        admin.execute_command(  # type: ignore[no-untyped-call]
            "ACL", "DELUSER", "no-leader-key"
        )


def test_observe_is_pushed(r: redis.Redis) -> None:
    obs = Observer(r, "watched", count=5, recheck=30.0)  # no polling can explain timings
    assert obs.until(1)[0][1] is None
    a = Election(r, "watched", identity="a")
    b = Election(r, "watched", identity="b")
    with a.campaign() as term:
        t0 = time.monotonic()
        when, info = obs.until(2)[1]
        assert info == LeaderInfo("a", term, "")
        assert when - t0 < 0.5
        t0 = time.monotonic()
        a.proclaim("v2")
        when, info = obs.until(3)[2]
        assert info == LeaderInfo("a", term, "v2")
        assert when - t0 < 0.5
        t0 = time.monotonic()
    when, info = obs.until(4)[3]
    assert info is None
    assert when - t0 < 0.5
    with b.campaign() as term2:
        when, info = obs.until(5)[4]
        assert info == LeaderInfo("b", term2, "")
        assert term2 > term
    obs.thread.join(2)


def test_observe_never_misses_the_final_state(r: redis.Redis) -> None:
    """Quick changes may merge, but the last one is always seen, pushed (the re-read
    interval is 30 s): 50 proclaims in a row, then a resignation and the next leader."""
    obs = Observer(r, "quick", count=10_000, recheck=30.0)
    obs.until(1)
    a = Election(r, "quick", identity="a")
    b = Election(r, "quick", identity="b")

    def last_seen(expected: LeaderInfo | None) -> None:
        end = time.monotonic() + 3.0
        while obs.seen[-1][1] != expected and time.monotonic() < end:
            time.sleep(0.005)
        assert obs.seen[-1][1] == expected, obs.seen[-3:]

    with a.campaign() as term:
        for i in range(50):
            a.proclaim(f"v{i}")
        last_seen(LeaderInfo("a", term, "v49"))
    with b.campaign(timeout=1) as term_b:
        last_seen(LeaderInfo("b", term_b, ""))
        terms = [info.term for _, info in obs.seen if info is not None]
        assert terms == sorted(terms)  # terms never go back
    last_seen(None)


def test_observe_sees_a_dead_leader_within_its_lease(r: redis.Redis) -> None:
    obs = Observer(r, "dying", count=3, recheck=30.0)
    obs.until(1)
    a = Election(r, "dying", identity="a", watchdog_lease=1.0)
    term, died = 0, 0.0
    try:
        with a.campaign() as term:
            obs.until(2)
            a.detach()  # stops renewing: as if the process died; nothing is published
            died = time.monotonic()
    except NotOwnedError:  # detached: nothing to resign
        pass
    else:
        raise AssertionError("resigning a detached leadership must raise NotOwnedError")
    when, info = obs.until(3, limit=5)[2]
    assert info is None
    assert when - died < 1.0 + 0.3, when - died
    assert obs.seen[1][1] == LeaderInfo("a", term, "")


def test_bad_input_before_io() -> None:
    # port 1: any I/O would raise ConnectionError
    nowhere = redis.Redis(port=1, socket_connect_timeout=0.2)
    for identity in ("", "a|b", "tab\there", 5, "x" * 257):
        with pytest.raises(LockConfigError):
            Election(nowhere, "e", identity=identity)  # type: ignore[arg-type]
    with pytest.raises(LockConfigError):
        Election(nowhere, "")
    with pytest.raises(LockConfigError):
        Election(redis.asyncio.Redis(port=1), "e")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Election(nowhere, "e", identiy="a")  # type: ignore[call-arg]
    e = Election(nowhere, "e", identity="a")
    for value in (5, None, "x" * 65_537, "\ud800"):
        with pytest.raises(LockConfigError):
            e.proclaim(value)  # type: ignore[arg-type]
    for recheck in (0, -1, "1", float("nan")):
        with pytest.raises(LockConfigError):
            e.observe(recheck=recheck)  # type: ignore[arg-type]
    with pytest.raises(LockConfigError), e.campaign(timeout=-1):
        pass
    for timeout in (-1, "1", float("nan")):
        with pytest.raises(LockConfigError):
            e.lead(timeout)  # type: ignore[arg-type]
    assert e.term is None
    assert e.identity == "a"


# ------------------------------------------------------------------ asyncio


async def test_async_campaign_leader_proclaim_resign(ar: redis.asyncio.Redis) -> None:
    a = AsyncElection(ar, "asvc", identity="a")
    b = AsyncElection(ar, "asvc", identity="b")
    assert await a.leader() is None
    async with a.campaign() as term:
        assert await b.leader() == LeaderInfo("a", term, "")
        await a.proclaim("v")
        assert await b.leader() == LeaderInfo("a", term, "v")
        waiting = asyncio.ensure_future(b.lead(5))
        await asyncio.sleep(0.1)
        assert not waiting.done()
    term2 = await asyncio.wait_for(waiting, 1)
    assert term2 > term
    assert await a.leader() == LeaderInfo("b", term2, "")
    await b.resign()
    assert await a.leader() is None


async def test_async_observe_and_loss(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    seen: list[tuple[float, LeaderInfo | None]] = []
    more = asyncio.Condition()

    async def watch() -> None:
        async for info in AsyncElection(ar, "aobs", identity="o").observe(recheck=30):
            async with more:
                seen.append((time.monotonic(), info))
                more.notify_all()

    async def until(n: int) -> tuple[float, LeaderInfo | None]:
        async with asyncio.timeout(5), more:
            await more.wait_for(lambda: len(seen) >= n)
        return seen[n - 1]

    task = asyncio.ensure_future(watch())
    try:
        assert (await until(1))[1] is None
        lost: list[object] = []
        lost_event = asyncio.Event()

        def on_lost(election: AsyncElection) -> None:
            lost.append(election)
            lost_event.set()

        a = AsyncElection(ar, "aobs", identity="a", watchdog_lease=1.0, on_lost=on_lost)
        ended: list[BaseException] = []
        gone = 0.0
        try:
            async with a.campaign() as term:
                t0 = time.monotonic()
                when, info = await until(2)
                assert info == LeaderInfo("a", term, "")
                assert when - t0 < 0.5
                await a.proclaim("p")
                assert (await until(3))[1] == LeaderInfo("a", term, "p")
                admin.delete(a.key)  # deleted by hand: nothing is published
                gone = time.monotonic()
                await asyncio.wait_for(lost_event.wait(), 3)
                assert lost == [a]
                assert a.lost
        except LockLostError as exc:
            ended.append(exc)
        assert len(ended) == 1
        when, info = await until(4)
        assert info is None
        assert when - gone < 1.0
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_async_cancelled_campaign_leaves_no_waiter(ar: redis.asyncio.Redis) -> None:
    a = AsyncElection(ar, "acancel", identity="a")
    b = AsyncElection(ar, "acancel", identity="b")
    c = AsyncElection(ar, "acancel", identity="c")
    async with a.campaign() as term:

        async def hang() -> None:
            async with b.campaign():
                raise AssertionError("b must not lead")

        task = asyncio.ensure_future(hang())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    async with c.campaign(timeout=1) as term2:  # b left the queue: c leads at once
        assert term2 > term
        assert await c.leader() == LeaderInfo("c", term2, "")


def test_works_as_the_documented_acl_user(redis_server: RedisProcess, admin: redis.Redis) -> None:
    """docs/acl.md's Election line is enough for campaign, proclaim, leader, observe and
    resign (the profile's commands are checked against the scripts in tests/test_acl.py)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "acl.md").read_text(encoding="utf-8")
    line = next(ln for ln in doc.splitlines() if ln.startswith("ACL SETUSER app-election "))
    words = line.split()[2:]
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", *[w.replace("CHANGE-ME", "pw") for w in words]
    )
    try:
        user = redis.Redis(**redis_server.client_kwargs(), username="app-election", password="pw")
        obs = Observer(user, "acl-e", count=10, until_gone=True)
        assert obs.until(1)[0][1] is None
        e = Election(user, "acl-e", identity="a", watchdog_lease=0.6)
        with e.campaign() as term:
            e.proclaim("v")
            time.sleep(0.5)  # renewals (lock_extend + the leader key) run as the user
            assert e.leader() == LeaderInfo("a", term, "v")
            assert obs.until(2)[-1][1] == LeaderInfo("a", term, "v")
        assert e.leader() is None
        obs.thread.join(5)
        assert obs.seen[-1][1] is None
        user.close()
    finally:
        admin.execute_command(  # type: ignore[no-untyped-call]
            "ACL", "DELUSER", "app-election"
        )
