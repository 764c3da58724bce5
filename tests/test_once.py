# SPDX-License-Identifier: MIT
"""``Once`` / ``AsyncOnce`` and ``redislock once``: a job exactly once per period, against
real redis-server processes."""

from __future__ import annotations

import asyncio
import math
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import (
    AsyncOnce,
    LockConfigError,
    LockLostError,
    Once,
    OnceRecord,
)
from redislock._core.once import MARGIN, OnceCore, period_key, period_start
from redislock.cli import EXIT_BUSY, EXIT_LOST
from redislock.server import RedisProcess
from tests.support import reap
from tests.test_acl import documented
from tests.test_acl import user as acl_user
from tests.test_cli import cli, cli_env, finish, py, start, url

pytestmark = pytest.mark.pythons  # dev.py's STAGES: where else it runs

__all__ = ["cli_env", "url"]  # the CLI fixtures, used here too

LOCK = "redislock:{job}"
APPEND = (  # appends one line to a file, slowly enough that the racers overlap
    "import os, sys, time\n"
    "time.sleep(0.3)\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)\n"
    "os.write(fd, f\"{os.environ['REDISLOCK_FENCING_TOKEN']}\\n\".encode())\n"
    "os.close(fd)\n"
)
NOV23 = 1795435200.0  # 2026-11-23T12:00:00Z


def record_key(key: str, name: str = "job") -> str:
    return f"redislock:{{{name}}}:once:{key}"


# ------------------------------------------------------------------ periods (no I/O)


def test_periods_are_aligned_on_utc_multiples() -> None:
    assert period_key(86400, NOV23) == "2026-11-23T00:00:00Z"  # a UTC day from midnight
    assert period_key(86400, NOV23 - 12 * 3600 - 0.001) == "2026-11-22T00:00:00Z"
    assert period_key(3600, NOV23 + 3599.999) == "2026-11-23T12:00:00Z"
    assert period_key(3600, NOV23 + 3600) == "2026-11-23T13:00:00Z"
    assert period_key(60, NOV23 + 59.5) == "2026-11-23T12:00:00Z"
    assert period_key(0.5, NOV23 + 0.75) == "2026-11-23T12:00:00.500Z"
    assert period_start(60, NOV23 + 61) == (NOV23 + 60) * 1000
    # the record lives until the period's end plus the margin
    core = OnceCore.create("job", 60, None)
    assert core.current(NOV23 + 45) == ("2026-11-23T12:00:00Z", 15_000 + int(MARGIN * 1000))
    # an explicit key: always that key; the record lives `period` seconds
    fixed = OnceCore.create("job", 90, "2026-11-23")
    assert fixed.current(NOV23) == fixed.current(NOV23 + 86400) == ("2026-11-23", 90_000)


def test_record_decodes_and_describes() -> None:
    rec = OnceRecord.decode("k", b"7|web-1|4242|1795435200123")
    assert rec == OnceRecord("k", 7, "web-1", 4242, 1795435200.123)
    assert rec.describe() == "host web-1 pid 4242 at 2026-11-23T12:00:00.123Z (fencing token 7)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"period": 0}, "period must be > 0"),
        ({"period": -60}, "period must be > 0"),
        ({"period": math.nan}, "NaN"),
        ({"period": math.inf}, "finite"),
        ({"period": "60"}, "number of seconds"),
        ({"period": True}, "number of seconds"),
        ({"key": ""}, "key must not be empty"),
        ({"key": "a}b"}, "hash tag"),
        ({"key": 20261123}, "key must be a str"),
        ({"key": "x\ny"}, "control"),
        ({"key": "k" * 257}, "limit is 256"),
        ({"ttl": 0}, "ttl"),
        ({"prefix": "a{"}, "prefix"),
    ],
)
def test_bad_input_fails_before_any_io(kwargs: dict[str, Any], message: str) -> None:
    nowhere = redis.Redis(port=1)  # nothing listens: any I/O would fail differently
    with pytest.raises(LockConfigError, match=re.escape(message)):
        Once(nowhere, "job", **kwargs)
    with pytest.raises(LockConfigError, match=re.escape(message)):
        AsyncOnce(redis.asyncio.Redis(port=1), "job", **kwargs)


def test_bad_name_and_client_fail_before_any_io() -> None:
    with pytest.raises(LockConfigError, match="lock name must not be empty"):
        Once(redis.Redis(port=1), "")
    with pytest.raises(LockConfigError, match="for asyncio use Async"):
        Once(redis.asyncio.Redis(port=1), "job")  # type: ignore[arg-type]
    with pytest.raises(LockConfigError):
        AsyncOnce(redis.Redis(port=1), "job")  # type: ignore[arg-type]


# ------------------------------------------------------------------ sync


def test_one_runs_and_later_calls_get_its_record(r: redis.Redis, admin: redis.Redis) -> None:
    once = Once(r, "job", period=3600)
    assert once.done() is None
    with once.run() as turn:
        assert turn.mine
        before = turn.record  # None until the run's own record is written
        assert admin.exists(LOCK) == 1  # the job runs under the name's lock
        fence = turn.lock.fencing_token
    assert admin.exists(LOCK) == 0
    assert before is None
    record = turn.record
    assert record is not None
    assert (record.fencing_token, record.host, record.pid) == (
        fence,
        socket.gethostname(),
        os.getpid(),
    )
    assert abs(record.at - time.time()) < 5
    assert record.key == turn.key == once.current_key()
    assert (
        admin.get(record_key(turn.key))
        == f"{fence}|{socket.gethostname()}|{os.getpid()}|{round(record.at * 1000)}"
    )
    # the record lives until the hour's end plus the margin
    left = (period_start(3600, time.time()) + 3_600_000) / 1000 - time.time() + MARGIN
    assert left - 5 < admin.pttl(record_key(turn.key)) / 1000 <= left + 1

    for _ in range(3):  # later callers of the same period: not theirs, and told who ran it
        with Once(r, "job", period=3600).run() as later:
            assert not later.mine
            assert later.record == record
    assert once.done() == record
    assert admin.exists(LOCK) == 0


def test_a_failed_run_writes_nothing_and_the_next_one_runs(
    r: redis.Redis, admin: redis.Redis
) -> None:
    once = Once(r, "job", period=3600)

    def draw() -> None:
        with once.run() as turn:
            assert turn.mine
            raise RuntimeError("draw failed")

    with pytest.raises(RuntimeError, match="draw failed"):
        draw()
    assert admin.keys("*once*") == []
    assert admin.exists(LOCK) == 0
    assert once.done() is None
    with once.run() as again:
        assert again.mine
    assert again.record is not None
    assert once.done() == again.record


def server_seconds(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1_000_000.0


@pytest.mark.parametrize("skew", [-150.0, 150.0], ids=["behind", "ahead"])
def test_a_host_whose_clock_is_off_uses_the_servers_period(
    r: redis.Redis, admin: redis.Redis, monkeypatch: pytest.MonkeyPatch, skew: float
) -> None:
    """A host 150 s behind or ahead (more than a 120 s period, and than MARGIN): its turn
    is the server's period, and the record lives until that period's end plus MARGIN on
    the server's clock. (By the host's own clock it would take the previous or the next
    period, and write a record that ends 150 s too early or too late: another host would
    run the period again.)"""
    period = 120.0
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + skew)
    once = Once(r, "job", period=period)
    before = server_seconds(admin)
    with once.run() as turn:
        after = server_seconds(admin)
        assert turn.mine
    keys = {period_key(period, before), period_key(period, after)}
    assert turn.key in keys  # the server's period, whatever this host's clock says
    assert turn.record is not None
    end_ms = period_start(period, after) + 120_000  # the latest the period can end
    start_ms = period_start(period, before) + 120_000
    ttl = admin.pttl(record_key(turn.key))
    now_ms = server_seconds(admin) * 1000.0
    # it ends at its period's end plus MARGIN, by the server's clock (to a round trip)
    assert start_ms + MARGIN * 1000 - 1000 <= now_ms + ttl <= end_ms + MARGIN * 1000 + 1000
    done = once.done()  # done() reads the server's period too
    if period_key(period, server_seconds(admin)) == turn.key:  # not past the period's end yet
        assert done == turn.record
    else:
        assert done is None or done == turn.record  # the server's next period began
    other = Once(r, "job", period=period)  # a host with the right clock: the same period
    monkeypatch.setattr(time, "time", real)
    with other.run() as second:
        assert not second.mine or second.key != turn.key  # a new period began meanwhile
        assert second.mine or second.record == turn.record


def test_an_explicit_key_is_its_own_period(r: redis.Redis, admin: redis.Redis) -> None:
    first = Once(r, "job", period=100, key="2026-11-23")
    with first.run() as turn:
        assert turn.mine
        assert turn.key == "2026-11-23" == first.current_key()
    assert 95_000 < admin.pttl(record_key("2026-11-23")) <= 100_000
    with Once(r, "job", period=100, key="2026-11-23").run() as same:
        assert not same.mine
        assert same.record == turn.record
    with Once(r, "job", period=100, key="2026-11-24").run() as other:
        assert other.mine  # another key, another period
    with Once(r, "job", period=100).run() as aligned:
        assert aligned.mine  # the aligned periods are apart from the explicit keys
    assert sorted(admin.keys("*once*")) == sorted(
        record_key(k) for k in ("2026-11-23", "2026-11-24", aligned.key)
    )


def test_a_holder_whose_lease_was_lost_cannot_write_the_record(
    r: redis.Redis, admin: redis.Redis
) -> None:
    once = Once(r, "job", period=3600)

    def run_while(lose: Any) -> None:
        with once.run() as turn:
            assert turn.mine
            lose()

    with pytest.raises(LockLostError, match="before the run's record was written"):
        run_while(lambda: admin.delete(LOCK))  # the lease is gone (expired, or deleted)
    assert admin.keys("*once*") == []
    # taken by another holder meanwhile: nothing written either
    with pytest.raises(LockLostError, match="taken by another holder"):
        run_while(lambda: admin.set(LOCK, "f" * 32 + "|99|elsewhere|1|1", px=10_000))
    assert admin.keys("*once*") == []
    assert admin.get(LOCK) == "f" * 32 + "|99|elsewhere|1|1"  # the other's lock is untouched


def test_a_failed_job_whose_lease_was_lost_keeps_its_exception_and_tells_the_loss(
    r: redis.Redis, admin: redis.Redis
) -> None:
    """The job raised and the release found the lease gone: the job's exception is what
    the caller gets, with the loss in a note, and ``lock.lost`` says so (what the torture
    worker reads to log the loss)."""
    once = Once(r, "job", period=3600)

    def fail(turn: Any, lose: bool) -> None:
        with turn:
            assert turn.mine
            if lose:
                admin.delete(LOCK)
            raise RuntimeError("draw failed")

    turn = once.run()
    with pytest.raises(RuntimeError, match="draw failed") as caught:
        fail(turn, lose=True)
    notes = getattr(caught.value, "__notes__", [])
    assert len(notes) == 1, notes
    assert "releasing lock 'job' also failed: LockLostError" in notes[0]
    assert turn.lock.lost is True
    assert admin.keys("*once*") == []
    # a failed job whose lease was still there: no note, not lost
    turn = once.run()
    with pytest.raises(RuntimeError, match="draw failed") as caught:
        fail(turn, lose=False)
    assert getattr(caught.value, "__notes__", []) == []
    assert turn.lock.lost is False


def test_late_arrivals_wait_for_the_winner_and_do_not_run(
    r: redis.Redis, admin: redis.Redis
) -> None:
    runs: list[int] = []
    outcomes: list[tuple[bool, OnceRecord | None]] = []
    guard = threading.Lock()
    go = threading.Barrier(6)

    def racer() -> None:
        once = Once(r, "job", period=3600)
        go.wait()
        with once.run() as turn:
            if turn.mine:
                time.sleep(0.3)  # the others queue on the lock meanwhile
                with guard:
                    runs.append(threading.get_ident())
        with guard:
            outcomes.append((turn.mine, turn.record))

    threads = [threading.Thread(target=racer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert len(runs) == 1
    assert sorted(mine for mine, _ in outcomes) == [False] * 5 + [True]
    assert len({rec for _, rec in outcomes}) == 1  # everyone got the winner's record
    assert admin.exists(LOCK) == 0


# ------------------------------------------------------------------ asyncio


async def test_async_once_twin(ar: redis.asyncio.Redis, admin: redis.Redis) -> None:
    once = AsyncOnce(ar, "job", period=3600)

    async def fail() -> None:
        async with once.run() as turn:
            assert turn.mine
            raise ValueError("nope")

    with pytest.raises(ValueError, match="nope"):
        await fail()
    assert await once.done() is None

    runs = 0

    async def racer() -> tuple[bool, OnceRecord | None]:
        nonlocal runs
        async with AsyncOnce(ar, "job", period=3600).run() as turn:
            if turn.mine:
                await asyncio.sleep(0.2)
                runs += 1
        return turn.mine, turn.record

    results = await asyncio.gather(*(racer() for _ in range(5)))
    assert runs == 1
    assert sorted(mine for mine, _ in results) == [False] * 4 + [True]
    assert len({rec for _, rec in results}) == 1
    assert await once.done() == results[0][1]
    assert admin.exists(LOCK) == 0

    async def lose() -> None:
        async with AsyncOnce(ar, "job", period=60, key="lost").run() as turn:
            assert turn.mine
            admin.delete(LOCK)

    with pytest.raises(LockLostError):
        await lose()
    assert admin.exists(record_key("lost")) == 0


# ------------------------------------------------------------------ the CLI


def _wait_for_a_quiet_minute() -> None:
    """Start a minute's race with at least 30 s of the minute left (two periods: two runs;
    five racers and a sixth run take several seconds on a loaded machine)."""
    left = 60 - time.time() % 60
    if left < 30:
        time.sleep(left + 0.1)


def test_cli_five_racers_run_the_command_exactly_once(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    out = tmp_path / "ran"
    _wait_for_a_quiet_minute()
    procs = [
        start(cli_env, url, "once", "job", "--period", "60", "--", *py(APPEND, out))
        for _ in range(5)
    ]
    results = [finish(p) for p in procs]
    assert [code for code, _, _ in results] == [0] * 5, results
    lines = out.read_text().splitlines()
    assert len(lines) == 1  # CMD ran exactly once
    [key] = [str(k).removeprefix(record_key("")) for k in admin.keys("*once*")]
    record = OnceRecord.decode(key, str(admin.get(record_key(key))))
    assert lines == [str(record.fencing_token)]  # CMD got the hold's fencing token
    told = [err for _, _, err in results if "was already run by" in err]
    assert len(told) == 4, results
    for err in told:
        assert f"'job' for {key} was already run by {record.describe()}" in err
    assert admin.exists(LOCK) == 0

    quiet = cli(cli_env, url, "once", "job", "--period", "60", "-q", "--", *py(APPEND, out))
    assert (quiet.returncode, quiet.stderr) == (0, "")
    assert len(out.read_text().splitlines()) == 1


def test_cli_a_failed_command_does_not_count(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    period = ["--period", "3600", "--key", "p1"]  # no period boundary in between
    failed = cli(cli_env, url, "once", "job", *period, "--", "sh", "-c", "exit 3")
    assert failed.returncode == 3, failed.stderr
    assert admin.keys("*once*") == []
    out = tmp_path / "ran"
    ok = cli(cli_env, url, "once", "job", *period, "--", *py(APPEND, out))
    assert ok.returncode == 0, ok.stderr
    assert len(out.read_text().splitlines()) == 1
    assert len(admin.keys("*once*")) == 1


def test_cli_explicit_key_wait_timeout_and_lost_lease(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    sleeper = "import sys, time\nopen(sys.argv[1], 'w').close()\ntime.sleep(30)\n"
    args = ["once", "job", "--period", "60", "--key", "k1", "--grace", "1", "--ttl", "1.5"]
    holder = start(cli_env, url, *args, "--", *py(sleeper, marker))
    try:
        deadline = time.monotonic() + 20
        while not marker.exists():
            assert time.monotonic() < deadline, "the first CMD never started"
            time.sleep(0.02)
        busy = cli(cli_env, url, "once", "job", "--period", "60", "--key", "k1", "--wait", "0.2",
                   "--", "true")  # fmt: skip
        assert busy.returncode == EXIT_BUSY, busy.stderr
        admin.delete(LOCK)  # the lease is lost: CMD is stopped, nothing is recorded
        code, _, err = finish(holder, timeout=40)
        assert code == EXIT_LOST, err
    finally:
        reap(holder)
    assert admin.keys("*once*") == []
    done = cli(cli_env, url, "once", "job", "--period", "60", "--key", "k1", "--", "true")
    assert done.returncode == 0, done.stderr
    assert 55_000 < admin.pttl(record_key("k1")) <= 60_000
    bad = cli(cli_env, url, "once", "job", "--period", "60", "--key", "{x}", "--", "true")
    assert bad.returncode == 64
    assert "hash tag" in bad.stderr


def test_cli_embedded_server(cli_env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "ran"
    period = ["--period", "3600", "--key", "p1"]  # no period boundary in between
    first = cli(cli_env, None, "once", "emb", *period, "--", *py(APPEND, out))
    assert first.returncode == 0, first.stderr
    second = cli(cli_env, None, "once", "emb", *period, "--", *py(APPEND, out))
    assert second.returncode == 0, second.stderr
    assert "was already run by" in second.stderr
    assert len(out.read_text().splitlines()) == 1


# ------------------------------------------------------------------ ACL


def test_once_works_as_its_documented_acl_user(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """docs/acl.md's Once profile is enough for a run, a later caller and a failed run."""
    with acl_user(admin, documented()["Once"]) as auth:
        client = redis.Redis(**redis_server.client_kwargs(), **auth)
        try:
            once = Once(client, "job", period=3600)
            with once.run() as turn:
                assert turn.mine
            with once.run() as later:
                assert not later.mine
                assert later.record == turn.record
            assert once.done() == turn.record
        finally:
            client.close()
