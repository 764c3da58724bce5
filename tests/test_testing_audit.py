# SPDX-License-Identifier: MIT
"""redislock.testing.audit against real redis-server processes: hold intervals from the
snapshot poller, keys without TTL, foreign touches from MONITOR, and survival of server
faults (SIGSTOP, kill and restart)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from redislock import Lock, ReadWriteLock, RLock, Semaphore
from redislock._core.keys import HoldKeys, LockKeys
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from redislock.testing.audit import (
    Auditor,
    AuditResult,
    ForeignTouch,
    HoldInterval,
    RestartNote,
    TtlViolation,
    parse_monitor_line,
    snapshot_times,
)
from redislock.testing.audit_shadow import Shadow, Touch, library_by_sha
from redislock.testing.monitor import MonitorLine

OTHER = "e" * 32  # a well-formed owner token that holds nothing


@pytest.fixture
def client(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """A bytes client on the suite's flushed server."""
    c = redis.Redis(**redis_server.client_kwargs(), socket_timeout=5)
    c.flushall()
    yield c
    c.close()


def auditor(servers: list[RedisProcess], names: list[str], **kwargs: Any) -> Auditor:
    return Auditor([s.client_kwargs() for s in servers], names=names, poll_interval=0.01, **kwargs)


def settle(aud: Auditor, pause: float = 0.0) -> None:
    """Let the auditor catch up (and see the present state for ``pause`` seconds)."""
    assert aud.sync(timeout=3.0)
    if pause:
        time.sleep(pause)
        assert aud.sync(timeout=3.0)


def holds_of(res: AuditResult, name: str) -> list[HoldInterval]:
    return [h for h in res.holds if h.name == name]


# ---------------------------------------------------------------------------- hold intervals


def test_lock_hold_interval(redis_server: RedisProcess, client: redis.Redis) -> None:
    with auditor([redis_server], ["a"]) as aud:
        settle(aud)
        lock = Lock(client, "a", ttl=10)
        t_acquire = time.monotonic()
        assert lock.acquire()
        fence, token = lock.fencing_token, lock.token
        assert fence is not None
        assert token is not None
        settle(aud, 0.05)
        mid = holds_of(aud.result(), "a")
        t_release = time.monotonic()
        lock.release()
        t_released = time.monotonic()
        settle(aud)
        res = aud.result()
    assert [h.gone for h in mid] == [None]  # open while held
    [h] = holds_of(res, "a")
    assert (h.server, h.pid, h.fence, h.mode, h.token) == (0, os.getpid(), fence, "x", token[:8])
    assert h.gone is not None
    assert h.first < h.last < h.gone
    # snapshot times are the server's TIME moved onto this process's monotonic clock
    assert t_acquire - 0.001 <= h.first
    assert h.last <= t_released + 0.001
    assert t_release - 0.001 <= h.gone
    assert res.polls[0] >= 6
    assert res.poll_errors == 0
    assert res.foreign_touches == []
    assert res.audited_scripts >= 2  # lock_acquire, lock_release


def test_rlock_semaphore_and_read_holds(redis_server: RedisProcess, client: redis.Redis) -> None:
    with auditor([redis_server], ["r", "s", "rw"]) as aud:
        settle(aud)
        rl = RLock(client, "r", ttl=10)
        assert rl.acquire()
        assert rl.acquire()  # re-entered: the same hold, the same fence
        sem = Semaphore(client, "s", permits=3, ttl=10)
        p1, p2 = sem.acquire(), sem.acquire()
        rw = ReadWriteLock(client, "rw", ttl=10)
        reader = rw.read()
        assert reader.acquire()
        fences = (rl.fencing_token, p1.fencing_token, p2.fencing_token, reader.fencing_token)
        settle(aud, 0.05)
        rl.release()
        settle(aud)
        mid = aud.result()
        rl.release()
        p1.release()
        p2.release()
        reader.release()
        settle(aud)
        res = aud.result()
    assert [h.gone for h in holds_of(mid, "r")] == [None]  # one count left: still held
    [r] = holds_of(res, "r")
    assert (r.pid, r.fence, r.mode) == (os.getpid(), fences[0], "x")
    permits = holds_of(res, "s")
    assert sorted(h.fence for h in permits) == sorted(f or 0 for f in fences[1:3])
    assert {h.mode for h in permits} == {"p"}
    assert {h.pid for h in permits} == {os.getpid()}
    [rd] = holds_of(res, "rw")
    assert (rd.mode, rd.pid, rd.fence) == ("s", os.getpid(), fences[3])
    for h in [r, *permits, rd]:
        assert h.gone is not None
        assert h.first < h.last < h.gone
    assert res.foreign_touches == []


# ---------------------------------------------------------------------------- TTL scan


def test_keys_without_ttl(redis_server: RedisProcess, client: redis.Redis) -> None:
    client.set("redislock:{t}", "x")  # a lock key without TTL
    client.hset("redislock:{h}", "f", "v")
    client.set("redislock:{t}:fence", 7)  # no counter of redislock's (they are per slot)
    client.set("redislock:{0}:slotfence", 7)  # fencing counters and permit counts never expire
    client.set("redislock:{s}:permits", 3)
    client.set("redislock:{ok}", "y", px=10_000)
    client.set("other:{t}", "z")  # outside the prefix
    with auditor([redis_server], [], scan_every=1, monitor=False) as aud:
        settle(aud, 0.05)
        res = aud.result()
    assert {(v.key, v.type, v.server) for v in res.ttl_violations} == {
        ("redislock:{t}", "string", 0),
        ("redislock:{h}", "hash", 0),
        ("redislock:{t}:fence", "string", 0),
    }  # one record per key (deduplicated for a second)...
    assert res.ttl_observations >= 3 * 4  # ...but every scan counts
    assert res.ttl_checks >= 4 * 4
    assert res.monitor_lines == 0


# ---------------------------------------------------------------------------- foreign touches


def test_correct_operations_touch_nothing(redis_server: RedisProcess, client: redis.Redis) -> None:
    release = client.register_script(SCRIPTS["lock_release"].source)
    with auditor([redis_server], ["c", "w", "x", "r", "s"]) as aud:
        settle(aud)
        lock = Lock(client, "c", ttl=5)
        assert lock.acquire()
        lock.extend(5)
        keys = LockKeys.for_name("c")
        # another token's release: the script sees the owner and refuses, touching nothing
        assert release(keys=[keys.lock, keys.wait, keys.wake], args=[OTHER]) == b"taken"
        lock.release()
        # a watchdog renewing a short lease (lock_extend "max")
        with Lock(client, "w", watchdog_lease=0.3, renew_interval=0.05):
            time.sleep(0.25)
        # an expired holder releases after another took over: "taken", nothing touched
        first, second = Lock(client, "x", ttl=0.05), Lock(client, "x", ttl=5)
        assert first.acquire()
        time.sleep(0.1)
        assert second.acquire(blocking=False)
        with pytest.raises(Exception, match=r"(?i)lost|not|taken|own"):
            first.release()
        second.release()
        rl = RLock(client, "r", ttl=5)
        with rl, rl:
            rl.extend(5)
        with Semaphore(client, "s", permits=2, ttl=5).acquire():
            pass
        settle(aud)
        res = aud.result()
    assert res.foreign_touches == []
    assert res.audited_scripts >= 15
    assert res.monitor_lines > 0
    assert res.monitor_connects == [1]


def test_foreign_string_touches_reported(redis_server: RedisProcess, client: redis.Redis) -> None:
    other = redis.Redis(**redis_server.client_kwargs(), socket_timeout=5)
    broken = "redis.call('DEL', KEYS[1]) return 1"  # a release that never checks the owner
    with auditor([redis_server], ["v"]) as aud:
        settle(aud)
        expired = Lock(client, "v", ttl=0.05)
        assert expired.acquire()
        time.sleep(0.1)
        other.eval(broken, 1, expired.key, OTHER)  # its lease had ended: nothing stolen
        a = Lock(client, "v", ttl=10)
        assert a.acquire()
        a_token = a.token
        assert a_token is not None
        other.delete(a.key)  # a plain DEL by another connection
        b = Lock(client, "v", ttl=10)
        assert b.acquire()
        b_token = b.token
        assert b_token is not None
        other.eval(broken, 1, b.key, OTHER)
        c = Lock(client, "v", ttl=10)
        assert c.acquire()
        assert c.token is not None
        other.eval(broken, 1, c.key, c.token)  # the owner's own token: not foreign
        force = SCRIPTS["lock_force_release"].source
        d = Lock(client, "v", ttl=10)
        assert d.acquire()
        keys = LockKeys.for_name("v")
        other.eval(force, 3, keys.lock, keys.wait, keys.wake)  # operator override
        settle(aud)
        res = aud.result()
    other.close()
    plain, script = res.foreign_touches
    assert (plain.script, plain.key, plain.owner, plain.caller) == (
        "(plain)",
        "redislock:{v}",
        a_token[:8],
        None,
    )
    assert plain.command == "DEL redislock:{v}"
    assert script.script.startswith("eval:")
    assert (script.owner, script.caller, script.command) == (
        b_token[:8],
        OTHER[:8],
        "DEL redislock:{v}",
    )
    assert plain.t < script.t
    assert plain.server == script.server == 0
    assert res.admin_overrides == 1
    text = res.to_json()
    assert a_token not in text  # tokens only ever cut to 8 chars
    assert b_token not in text


def test_holds_taken_before_start_are_known(
    redis_server: RedisProcess, client: redis.Redis
) -> None:
    """MONITOR starts from a read of the names' keys, so older holds are protected too."""
    lock = Lock(client, "old", ttl=10)
    assert lock.acquire()
    assert lock.token is not None
    sem = Semaphore(client, "olds", permits=2, ttl=10)
    permit = sem.acquire()
    assert permit.token is not None
    with auditor([redis_server], ["old", "olds"]) as aud:
        settle(aud)
        client.delete(lock.key)
        client.unlink(HoldKeys.for_name("olds").lock)
        settle(aud)
        res = aud.result()
    assert [(t.key, t.owner, t.command) for t in res.foreign_touches] == [
        ("redislock:{old}", lock.token[:8], "DEL redislock:{old}"),
        ("redislock:{olds}", permit.token[:8], "UNLINK redislock:{olds}"),
    ]
    assert res.monitor_connects == [1]


def test_hold_fields(redis_server: RedisProcess, client: redis.Redis) -> None:
    """A hold script removes expired holds of others: legitimate; removing a live one is not."""
    acquire = client.register_script(SCRIPTS["hold_acquire_permit"].source)
    release = client.register_script(SCRIPTS["hold_release_permit"].source)
    keys = HoldKeys.for_name("e")
    meta = f"host|{os.getpid()}|0"

    def call(op: str, token: str, ms: int = 0) -> Any:
        if op == "acquire":
            taken = [keys.lock, keys.expiry, keys.fence, keys.wait, keys.wake, keys.permits]
            return acquire(keys=taken, args=[token, ms, meta, 0, 5])
        given = [keys.lock, keys.expiry, keys.wait, keys.wake, keys.permits, keys.released]
        return release(keys=given, args=[token, "", 0, 5])

    short, long_, live = "a" * 32, "b" * 32, "c" * 32
    with auditor([redis_server], ["e"]) as aud:
        settle(aud)
        assert call("acquire", short, 150)[0] == b"ok"
        assert call("acquire", long_, 10_000)[0] == b"ok"
        settle(aud)
        time.sleep(0.3)  # the short hold's lease ends (its field stays until a script runs)
        assert client.hexists(keys.lock, short)
        assert call("release", long_) == [b"ok", 0]
        assert not client.hexists(keys.lock, short)  # the release removed the expired hold
        settle(aud)
        clean = aud.result()
        assert call("acquire", live, 10_000)[0] == b"ok"
        settle(aud)
        client.eval(
            "for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do"
            " redis.call('HDEL', KEYS[1], f) end return 1",
            1,
            keys.lock,
            OTHER,
        )
        settle(aud)
        res = aud.result()
    assert clean.foreign_touches == []
    assert clean.audited_scripts >= 3
    [touch] = res.foreign_touches
    assert (touch.key, touch.owner, touch.caller) == (keys.lock, live[:8], OTHER[:8])
    assert touch.command == f"HDEL {keys.lock} {live[:8]}…"
    [h] = [h for h in res.holds if h.token == live[:8]]
    assert (h.pid, h.mode) == (os.getpid(), "p")
    assert h.gone is not None


# ---------------------------------------------------------------------------- server faults


def test_survives_sigstop_and_restart(
    redis_server: RedisProcess,
    spawn_server: Callable[..., RedisProcess],
    client: redis.Redis,
) -> None:
    srv = spawn_server()
    c0 = redis.Redis(**srv.client_kwargs(), socket_timeout=5)
    lock = Lock(c0, "f", ttl=60)
    assert lock.acquire()
    with auditor([srv, redis_server], ["f"]) as aud:
        settle(aud)
        before = aud.result()
        srv.kill(signal.SIGSTOP)
        try:
            time.sleep(0.5)
            during = aud.result()
        finally:
            srv.kill(signal.SIGCONT)
        settle(aud)
        after = aud.result()
        srv.kill(signal.SIGKILL)  # a crash; restarted without persistence: all keys gone
        srv.start()
        aud.note_restart(0, persistent=False)
        settle(aud)
        restarted = aud.result()
        c1 = redis.Redis(**srv.client_kwargs(), socket_timeout=5)
        again = Lock(c1, "f", ttl=60)
        assert again.acquire()
        settle(aud)
        c1.delete(again.key)  # MONITOR works on the new server: a plain DEL is reported
        settle(aud)
        res = aud.result()
        c1.close()
    c0.close()
    # the other server went on being polled while server 0 was stopped
    assert during.polls[1] - before.polls[1] >= 10
    assert during.polls[0] - before.polls[0] <= 2
    assert after.polls[0] > during.polls[0]
    assert after.poll_errors > 0
    [held] = [h for h in after.holds if h.server == 0]
    assert held.gone is None  # a failed poll is not an absence
    assert held.fence == 1
    [lost] = [h for h in restarted.holds if h.server == 0]
    assert lost.gone is not None
    assert lost.gone > after.holds[0].last
    assert res.monitor_connects[0] >= 2
    assert res.monitor_connects[1] == 1
    assert [(r.server, r.persistent) for r in res.restarts] == [(0, False)]
    [touch] = res.foreign_touches
    assert (touch.server, touch.script, touch.key) == (0, "(plain)", again.key)
    assert [h.fence for h in res.holds if h.server == 0] == [1, 1]  # the new server counts anew


# ---------------------------------------------------------------------------- records


def test_result_json_round_trip() -> None:
    res = AuditResult(
        ttl_violations=[TtlViolation(1.5, 0, "redislock:{t}", "string")],
        ttl_observations=3,
        holds=[
            HoldInterval(0, "a", 42, 7, 1.0, 2.0, 2.5, "x", "0123abcd", "h"),
            HoldInterval(1, "b", 43, 8, 1.0, 2.0, None, "p"),
        ],
        foreign_touches=[ForeignTouch(0, 3.0, "(plain)", "redislock:{a}", None, "01", "DEL")],
        monitor_lines=10,
        audited_scripts=4,
        polls=[5, 6],
        poll_errors=1,
        ttl_checks=9,
        admin_overrides=1,
        monitor_connects=[1, 2],
        restarts=[RestartNote(1, 2.0, True)],
        errors=["poll server 1: X: y"],
    )
    text = res.to_json()
    assert "\n" not in text
    assert json.loads(text)["holds"][1]["gone"] is None
    assert AuditResult.from_json(text) == res
    assert AuditResult.from_json(AuditResult().to_json()) == AuditResult()
    with pytest.raises(ValueError):
        AuditResult.from_json("[]")


def test_parse_monitor_line() -> None:
    raw = (
        b'+1795233878.718554 [3 unix:/tmp/a b.sock] "SET" "k" "a\\"b\\\\c\\n\\x01\\xc3\\xa9 x"\r\n'
    )
    line = parse_monitor_line(raw)
    assert line is not None
    assert (line.time, line.db, line.client) == (1795233878.718554, 3, "unix:/tmp/a b.sock")
    assert line.args == (b"SET", b"k", 'a"b\\c\n\x01é x'.encode())
    lua = parse_monitor_line(b'1.5 [0 lua] "del" "redislock:{a}"')
    assert lua is not None
    assert (lua.client, lua.args) == ("lua", (b"del", b"redislock:{a}"))
    for bad in (b"+OK", b'x [0 lua] "a"', b'1.0 [0 lua] "unterminated', b"1.0 [0 lua]"):
        assert parse_monitor_line(bad) is None


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Auditor([], names=["a"])
    with pytest.raises(ValueError):
        Auditor([{}], names=["a"], poll_interval=0)
    with pytest.raises(ValueError):
        Auditor([{}], names="a")


def test_snapshot_times_within_the_round_trip_or_its_bounds() -> None:
    """A snapshot is dated by the server's TIME when that lands inside its round trip;
    otherwise (a stepped server clock) holds seen get the round trip's start and holds
    found gone its end: a release that ran while the poll waited never looks like a loss
    (seen in a 20,000-cycle ReadWriteLock torture run with server clock jumps)."""
    sent, got, wall = 100.0, 100.010, 5000.0  # wall-clock time at `got`
    assert snapshot_times(sent, got, wall, server=4999.995) == pytest.approx((100.005, 100.005))
    assert snapshot_times(sent, got, wall, server=4997.5) == (sent, got)  # clock 2.5 s back
    assert snapshot_times(sent, got, wall, server=5003.0) == (sent, got)  # 3 s ahead


def test_holds_under_a_stepped_back_server_clock_lie_within_the_polls(short_tmp: Path) -> None:
    """With the server's clock 5 s behind, a hold is still dated within the auditor's view
    of it: first and last seen between acquire and release, gone after the release."""
    directory = short_tmp / "clk"
    with RedisProcess(directory, name="clk", clock_file=directory / "offset") as server:
        server.set_clock_offset(-5.0)
        admin = redis.Redis(**server.client_kwargs(), socket_timeout=5)
        try:
            lock = Lock(admin, "a", ttl=10)
            with auditor([server], ["a"]) as aud:
                settle(aud)
                t_acquire = time.monotonic()
                assert lock.acquire()
                settle(aud, 0.05)
                t_release = time.monotonic()
                lock.release()
                t_released = time.monotonic()
                settle(aud)
                res = aud.result()
        finally:
            admin.close()
    [h] = holds_of(res, "a")
    assert h.gone is not None
    assert t_acquire <= h.first <= h.last <= t_released
    assert h.gone >= t_release


def test_a_script_across_a_backward_server_clock_step_sets_a_ttl_within_both_times() -> None:
    """A release granted the lock (SET PX 1000) inside a script whose EVALSHA line is stamped
    before the server's clock stepped back 3 s and its SET after: Redis may count the TTL
    from either, so the key is surely alive only until the earlier end. A torture run of
    the ``once`` scenario saw Redis expire such a key by the later stamp (the clock then
    healed forward) while the shadow, counting from the script's start alone, still held
    it alive and reported the next acquire's SET as a foreign touch."""
    touches: list[Touch] = []
    shadow = Shadow(
        "P",
        library_by_sha(),
        plain_dels=True,
        unknown_scripts=False,
        report=lambda ctx, ts, label, touch: touches.append(touch),
        count_script=lambda admin: None,
    )
    keys = LockKeys.for_name("n", "P")
    shas = {op: SCRIPTS[f"fair_{op}"].sha.encode() for op in ("acquire", "release")}

    def script(t: float, op: str, token: str) -> MonitorLine:
        line = (b"EVALSHA", shas[op], b"1", keys.lock.encode(), token.encode())
        return MonitorLine(t, 0, "unix:/s", line)

    def grant(t: float, token: str, fence: int) -> MonitorLine:
        value = f"{token}|{fence}|h|1|1".encode()
        return MonitorLine(t, 0, "lua", (b"SET", keys.lock.encode(), value, b"PX", b"1000"))

    releaser, waiter, caller = "a" * 32, "b" * 32, "c" * 32
    # the script starts at server time 100.0; its SET runs after the clock stepped back 3 s
    shadow.feed(script(100.0, "release", releaser))
    shadow.feed(grant(97.0, waiter, 5))
    # 1.5 s later (server time 98.5), past the end counted from the SET: nobody's key
    shadow.feed(script(98.5, "acquire", caller))
    shadow.feed(grant(98.5, caller, 6))
    assert touches == []
    # without a step, a SET over a key that is surely alive is still a touch
    shadow.feed(script(98.6, "acquire", waiter))
    shadow.feed(grant(98.6, waiter, 7))
    assert [(t.owner, t.command) for t in touches] == [(caller, f"SET {keys.lock}")]
