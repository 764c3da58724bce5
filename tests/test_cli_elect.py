# SPDX-License-Identifier: MIT
"""``redislock elect NAME -- CMD``: three contenders on one name, exactly one runs CMD;
SIGTERM to the leader hands over within a second; SIGKILL to the next leader's
``redislock`` takes its CMD down and a third leads within the lease; terms only increase
and no two CMDs ever run at once."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from redislock import Election, LeaderInfo
from redislock.server import RedisProcess
from redislock.server.embedded import pid_alive as alive

TTL = 2.0

CMD = """\
import os, signal, sys, time
ident, log = sys.argv[1], sys.argv[2]
term = os.environ["REDISLOCK_FENCING_TOKEN"]
def write(what):
    with open(log, "a") as f:
        f.write(f"{ident} {term} {what} {time.time():.6f} {os.getpid()}\\n")
def stop(*_):
    write("end")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
write("start")
while True:
    time.sleep(0.01)
    write("tick")
"""


@dataclass
class Run:
    """One CMD run, from the shared log."""

    ident: str
    term: int
    pid: int
    start: float
    last: float
    ended: bool = False
    lines: list[str] = field(default_factory=list)


def runs(log: Path) -> list[Run]:
    found: dict[tuple[str, int], Run] = {}
    text = log.read_text() if log.exists() else ""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 5:
            continue  # a line being written
        ident, term, what, when, pid = parts[0], int(parts[1]), parts[2], float(parts[3]), parts[4]
        run = found.get((ident, term))
        if run is None:
            run = found[(ident, term)] = Run(ident, term, int(pid), when, when)
        run.last = max(run.last, when)
        run.ended = run.ended or what == "end"
    return sorted(found.values(), key=lambda r: r.start)


def wait_runs(log: Path, n: int, timeout: float) -> list[Run]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = runs(log)
        if len(found) >= n:
            return found
        time.sleep(0.01)
    raise AssertionError(f"{n} runs expected, saw {runs(log)}")


def cli_out(url: str, *args: str) -> str:
    """The standard output of ``redislock --url URL ARGS`` (exit 0 required)."""
    done = subprocess.run(
        [sys.executable, "-m", "redislock", "--url", url, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_three_contenders_one_leader_handover_and_crash(
    redis_server: RedisProcess, tmp_path: Path
) -> None:
    url = f"unix://{redis_server.client_kwargs()['unix_socket_path']}"
    admin = redis.Redis(**redis_server.client_kwargs(), decode_responses=True)
    admin.flushall()
    script, log = tmp_path / "cmd.py", tmp_path / "log"
    script.write_text(CMD)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for ident in ("p1", "p2", "p3"):
        procs[ident] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "redislock",
                "--url",
                url,
                "elect",
                "jobs",
                "--identity",
                ident,
                "--ttl",
                str(TTL),
                "--",
                sys.executable,
                str(script),
                ident,
                str(log),
            ],
            start_new_session=True,
        )
    watcher = Election(admin, "jobs", identity="watcher")
    try:
        # Exactly one runs CMD, and it is the advertised leader.
        first = wait_runs(log, 1, 20)[0]
        time.sleep(0.7)
        assert len(runs(log)) == 1
        assert watcher.leader() == LeaderInfo(first.ident, first.term, "")
        # An operator sees who leads: inspect (text and JSON) and top name the identity.
        leads = {"identity": first.ident, "term": first.term, "value": ""}
        assert json.loads(cli_out(url, "inspect", "jobs", "--json"))["leader"] == leads
        assert f"election leader {first.ident!r} (term {first.term})" in cli_out(
            url, "inspect", "jobs"
        )
        top = json.loads(cli_out(url, "top", "--once", "--json"))
        assert [lock["leader"] for lock in top["locks"] if lock["name"] == "jobs"] == [leads]
        # SIGTERM to the leader's redislock: CMD stops, it resigns, another leads at once.
        os.kill(procs[first.ident].pid, signal.SIGTERM)
        sent = time.time()
        second = wait_runs(log, 2, 5)[1]
        assert second.start - sent < 1.0, second.start - sent
        assert procs[first.ident].wait(5) == 0  # CMD's own status (it exited on SIGTERM)
        assert watcher.leader() == LeaderInfo(second.ident, second.term, "")
        # SIGKILL to the next leader's redislock: its CMD dies with it (the guard), and the
        # third leads once the lease ran out (nobody resigned).
        time.sleep(0.3)
        os.kill(procs[second.ident].pid, signal.SIGKILL)
        killed = time.time()
        procs[second.ident].wait(5)
        while alive(second.pid) and time.time() - killed < 2:
            time.sleep(0.01)
        assert not alive(second.pid), "CMD outlived its redislock"
        cmd_gone = time.time()
        assert cmd_gone - killed < 1.0
        third = wait_runs(log, 3, TTL + 5)[2]
        assert third.start - killed < TTL + 0.5, third.start - killed
        assert third.ident not in (first.ident, second.ident)
        time.sleep(0.2)
        assert watcher.leader() == LeaderInfo(third.ident, third.term, "")
        os.kill(procs[third.ident].pid, signal.SIGTERM)
        assert procs[third.ident].wait(5) == 0
        done = runs(log)
        assert [r.ident for r in done] == [first.ident, second.ident, third.ident]
        # Terms only increase; at no moment do two CMDs run (each run's last line comes
        # before the next run's first; the killed one was dead before the third started).
        assert [r.term for r in done] == sorted({r.term for r in done})
        for a, b in itertools.pairwise(done):
            assert a.last < b.start, (a, b)
        assert cmd_gone < third.start
        assert done[0].ended
        assert not done[1].ended  # SIGKILLed
        assert done[2].ended
        assert watcher.leader() is None
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for run in runs(log):
            if alive(run.pid):
                os.kill(run.pid, signal.SIGKILL)
        admin.close()


def test_a_leader_that_cannot_renew_stops_cmd_before_its_lease_ends(
    redis_server: RedisProcess, tmp_path: Path
) -> None:
    """client-go's renew deadline: with the server unresponsive (SIGSTOP), renewals stall;
    ``redislock elect`` stops CMD a quarter of the lease before its local lease estimate
    ends, so CMD is gone before the server's lease could end and another contender lead
    (the watchdog alone reports the loss only at that end)."""
    url = f"unix://{redis_server.client_kwargs()['unix_socket_path']}"
    admin = redis.Redis(**redis_server.client_kwargs(), decode_responses=True)
    admin.flushall()
    script, log = tmp_path / "cmd.py", tmp_path / "log"
    script.write_text(CMD)
    argv = [sys.executable, "-m", "redislock", "--url", url, "elect", "stall"]
    argv += ["--identity", "p1", "--ttl", str(TTL), "--", sys.executable, str(script), "p1"]
    proc = subprocess.Popen([*argv, str(log)], start_new_session=True)
    key = Election(admin, "stall").key
    server = redis_server.pid
    assert server is not None
    stopped = False
    try:
        first = wait_runs(log, 1, 20)[0]
        time.sleep(0.5)
        asked = time.time()
        pttl = admin.pttl(key)
        os.kill(server, signal.SIGSTOP)
        stopped = True
        lease_end = asked + pttl / 1000.0  # the server's lease ends no sooner
        deadline = time.time() + TTL + 3
        while not runs(log)[0].ended and time.time() < deadline:
            time.sleep(0.01)
        run = runs(log)[0]
        assert run.ended, run
        # stopped with most of the quarter lease (0.5 s) to spare: without the deadline
        # it would end only at the local lease estimate, about lease_end
        assert run.last < lease_end - 0.2, (run.last, lease_end)
        assert run.last > lease_end - TTL  # (not before the server stopped)
        os.kill(server, signal.SIGCONT)
        stopped = False
        assert proc.wait(10) == 79  # leadership lost
        assert first.term == run.term
    finally:
        if stopped:
            os.kill(server, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for run in runs(log):
            if alive(run.pid):
                os.kill(run.pid, signal.SIGKILL)
        admin.close()
