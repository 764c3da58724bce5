# SPDX-License-Identifier: MIT
"""``redislock top``: the live view and its ``--once --json`` snapshot, on a real server and
on a real Cluster, with every kind held and waited for, and a CountDownLatch and a Barrier's
round in use."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster

from redislock import (
    Barrier,
    CountDownLatch,
    FairLock,
    Lock,
    ReadWriteLock,
    RLock,
    Semaphore,
    inspect,
)
from redislock.cli import EXIT_USAGE
from redislock.cli.top import scan_names, snapshot
from redislock.server import RedisProcess
from tests.cluster import LocalCluster

SRC = str(Path(__file__).resolve().parent.parent / "src")


def top(
    url: str, *args: str, timeout: float = 60, pre: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "redislock", "--url", url, *pre, "top", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def snap_of(url: str, *args: str, pre: tuple[str, ...] = ()) -> dict[str, Any]:
    done = top(url, "--once", "--json", *args, pre=pre)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


@pytest.fixture
def held(admin: redis.Redis) -> Iterator[dict[str, Any]]:
    """One of each kind held, and a FairLock with two queued waiters."""
    lock = Lock(admin, "jobs:lock", watchdog_lease=30)
    rlock = RLock(admin, "jobs:rlock", watchdog_lease=30)
    rw = ReadWriteLock(admin, "jobs:rw", watchdog_lease=30)
    sem = Semaphore(admin, "jobs:sem", permits=3, watchdog_lease=30)
    fair = FairLock(admin, "jobs:fair", watchdog_lease=30)
    assert lock.acquire(timeout=5)
    assert rlock.acquire(timeout=5)
    assert rlock.acquire(timeout=5)
    assert rw.read().acquire(timeout=5)
    permits = [sem.acquire(timeout=5) for _ in range(2)]
    assert fair.acquire(timeout=5)
    with Lock(admin, "jobs:free"):
        pass
    admin.set("other:lock-looking", "x")
    waiters = []
    for _ in range(2):  # FairLock waiters, queued until the fixture ends
        w = FairLock(admin, "jobs:fair", watchdog_lease=30)
        t = threading.Thread(target=lambda w=w: w.acquire(timeout=20) and w.release())
        t.start()
        waiters.append(t)
    deadline = time.monotonic() + 10
    while len(inspect(admin, "jobs:fair").queue) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(inspect(admin, "jobs:fair").queue) == 2
    try:
        yield {"lock": lock, "fair": fair}
    finally:
        fair.release()  # the waiters take it in turn and release
        for t in waiters:
            t.join(timeout=20)
        lock.release()
        rlock.release()
        rlock.release()
        rw.read().release()
        for p in permits:
            p.release()


def test_once_json_shows_every_kind_with_holders_leases_and_waiters(
    redis_server: RedisProcess, held: dict[str, Any]
) -> None:
    snap = snap_of(redis_server.url)
    assert snap["prefix"] == "redislock:"
    by_name = {lock["name"]: lock for lock in snap["locks"]}
    # held or awaited only: not the released name, not the unrelated key
    assert sorted(by_name) == ["jobs:fair", "jobs:lock", "jobs:rlock", "jobs:rw", "jobs:sem"]
    kinds = {n: lock["kind"] for n, lock in by_name.items()}
    assert kinds == {
        "jobs:fair": "fair",
        "jobs:lock": "lock",
        "jobs:rlock": "rlock",
        "jobs:rw": "rwlock",
        "jobs:sem": "semaphore",
    }
    me = socket.gethostname()
    for name, lock in by_name.items():
        assert lock["holders"], name
        for h in lock["holders"]:
            assert h["host"] == me
            assert h["pid"] == os.getpid()
            assert 0 <= h["held_for"] < 60, (name, h)
            assert 0 < h["lease_remaining"] <= 30, (name, h)
            assert h["fencing_token"] >= 1
        assert lock["fencing_counter"] >= max(h["fencing_token"] for h in lock["holders"])
    assert by_name["jobs:fair"]["waiter_count"] == 2
    assert by_name["jobs:fair"]["waiters"] is True
    assert by_name["jobs:lock"]["waiter_count"] is None
    assert [h["role"] for h in by_name["jobs:sem"]["holders"]] == ["permit", "permit"]
    assert by_name["jobs:rlock"]["holders"][0]["count"] == 2
    assert by_name["jobs:lock"]["holders"][0]["fencing_token"] == held["lock"].fencing_token


def test_match_is_a_glob_on_names(redis_server: RedisProcess, held: dict[str, Any]) -> None:
    assert [lk["name"] for lk in snap_of(redis_server.url, "--match", "jobs:r*")["locks"]] == [
        "jobs:rlock",
        "jobs:rw",
    ]
    assert snap_of(redis_server.url, "--match", "nothing*")["locks"] == []
    assert snap_of(redis_server.url, pre=("--prefix", "other:"))["locks"] == []


def test_once_table_and_live_refreshes(redis_server: RedisProcess, held: dict[str, Any]) -> None:
    done = top(redis_server.url, "--once")
    assert done.returncode == 0, done.stderr
    assert "jobs:fair" in done.stdout
    assert "fair lock" in done.stdout
    assert f"pid {os.getpid()}" in done.stdout
    started = time.monotonic()
    live = top(redis_server.url, "--count", "3", "--interval", "0.2")
    assert live.returncode == 0, live.stderr
    assert time.monotonic() - started >= 0.4  # two waits between three refreshes
    assert "jobs:sem" in live.stdout


def test_the_table_fits_80_columns_with_each_holder_on_its_own_line(
    redis_server: RedisProcess, held: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipe or cron's mail gets 80 columns: the numbers keep their headers and each
    holder's numbers stay on its line (two permits of the Semaphore: two rows)."""
    monkeypatch.setenv("COLUMNS", "80")
    done = top(redis_server.url, "--once")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80, done.stdout
    header = next(line for line in lines if " kind " in line)
    assert header.split() == ["name", "kind", "holder", "held", "s", "lease", "s", "waiters",
                              "fencing"], header  # fmt: skip
    holder_rows = [line for line in lines if re.search(r"pid \d+", line)]
    assert len(holder_rows) == 6, done.stdout  # lock, rlock, reader, 2 permits, fair
    for line in holder_rows:  # held s and lease s on the holder's own line
        assert re.search(r"pid \d+\b.*\s\d+\.\d\s+\d+\.\d\b", line), line


def test_a_released_lock_leaves_the_view(redis_server: RedisProcess, admin: redis.Redis) -> None:
    lock = Lock(admin, "short", watchdog_lease=30)
    assert lock.acquire(timeout=5)
    assert [lk["name"] for lk in snap_of(redis_server.url)["locks"]] == ["short"]
    lock.release()
    assert snap_of(redis_server.url)["locks"] == []


def test_a_counting_latch_and_a_barrier_round_are_shown(
    redis_server: RedisProcess, admin: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A latch while it counts and a round while a party is in: their kind, their state, the
    latch's TTL and the round's next lease end as the lease; a finished latch is left out."""
    gate = CountDownLatch(admin, "sync:gate", 2, ttl=30)
    assert gate.try_set_count()
    finished = CountDownLatch(admin, "sync:done", 1)
    assert finished.try_set_count()
    assert finished.count_down() == 0
    party = Barrier(admin, "sync:meet", 1, lease=30)
    assert party.enter(5)
    try:
        snap = snap_of(redis_server.url)
        by_name = {lock["name"]: lock for lock in snap["locks"]}
        assert sorted(by_name) == ["sync:gate", "sync:meet"]
        latch, meet = by_name["sync:gate"], by_name["sync:meet"]
        assert (latch["kind"], latch["latch"]["count"]) == ("latch", 2)
        assert latch["latch"]["generation"] == gate.generation()
        assert 0 < latch["ttl"] <= 30
        assert (meet["kind"], meet["barrier"]["state"], meet["barrier"]["entered"]) == (
            "barrier",
            "open",
            1,
        )
        assert 0 < meet["barrier"]["next_lease_end"] <= 30
        for lock in (latch, meet):
            assert (lock["holders"], lock["waiter_count"]) == ([], None)
        monkeypatch.setenv("COLUMNS", "200")  # one line a row
        done = top(redis_server.url, "--once")
        assert done.returncode == 0, done.stderr
        rows = {line.split()[0]: line for line in done.stdout.splitlines() if "sync:" in line}
        assert re.search(
            r"count-down latch\s+counting down, 2 left \(generation \d+\)\s+-\s+\d+\.\d",
            rows["sync:gate"],
        ), done.stdout
        assert re.search(
            r"barrier\s+round \d+ open, 1 of 1 party in\s+-\s+\d+\.\d", rows["sync:meet"]
        ), done.stdout
    finally:
        party.leave(5)
    # the round closed as its last party left: only the counting latch is left
    assert [lk["name"] for lk in snap_of(redis_server.url)["locks"]] == ["sync:gate"]


def test_bad_options_are_usage_errors(redis_server: RedisProcess) -> None:
    for args in (("--count", "0"), ("--interval", "0"), ("--interval", "x")):
        done = top(redis_server.url, *args)
        assert done.returncode == EXIT_USAGE, (args, done.stderr)
        assert "--" + args[0].lstrip("-") in done.stderr


def test_cluster_scans_every_primary(cluster: LocalCluster, rc: redis.cluster.RedisCluster) -> None:
    names = [f"spread:{i}" for i in range(12)]  # different hash slots, on every primary
    locks = [Lock(rc, n, watchdog_lease=30) for n in names]
    for lock in locks:
        assert lock.acquire(timeout=5)
    try:
        nodes = {rc.get_node_from_key(f"redislock:{{{n}}}").name for n in names}  # type: ignore[no-untyped-call]
        assert len(nodes) == 3
        assert scan_names(rc, "redislock:") == sorted(names)
        assert [lk["name"] for lk in snapshot(rc, "redislock:")["locks"]] == sorted(names)
        seed = rc.get_default_node()  # type: ignore[no-untyped-call]
        url = f"redis://{seed.host}:{seed.port}"
        snap = snap_of(url, "--cluster")
        assert [lk["name"] for lk in snap["locks"]] == sorted(names)
        assert all(lk["holders"][0]["pid"] == os.getpid() for lk in snap["locks"])
    finally:
        for lock in locks:
            lock.release()
