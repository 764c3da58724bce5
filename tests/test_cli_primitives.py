# SPDX-License-Identifier: MIT
"""The ``redislock`` command line with the other kinds of lock: ``run --read / --write /
--fair / --permits N``, and ``inspect``, ``list`` and ``release --force`` of every kind,
against real redis-server processes (no mocks).

As in ``test_cli.py``: where exit statuses and signals matter the CLI runs as a real
subprocess; otherwise ``redislock.cli.main`` runs in-process. Every test gets a private
``REDISLOCK_RUNTIME_DIR`` and no ``REDIS_URL``.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from redislock import FairLock, Lock, ReadWriteLock, RLock, Semaphore
from redislock._core.keys import fence_key
from redislock._core.lock import token_tag
from redislock._core.ops import as_str
from redislock.cli import EXIT_BUSY, EXIT_LOST, EXIT_USAGE, main
from tests.support import reap
from tests.test_cli import (
    CRITICAL_SECTION,
    cli,
    cli_env,
    finish,
    in_process,
    lock_key,
    pid_gone,
    py,
    start,
    url,
    wait_for,
)

__all__ = ["cli_env", "url"]  # the fixtures (cli_env autouse), imported so that they apply here

# CMD snippets, run as ``sys.executable -c SNIPPET ARGS...``.
PROBE = (  # records the fencing token it got and what the key looks like, exits argv[4]
    "import json, os, sys, redis\n"
    "r = redis.Redis.from_url(sys.argv[2], decode_responses=True)\n"
    "key = sys.argv[3]\n"
    "kind = r.type(key)\n"
    "modes = sorted(v.split('|')[0] for v in r.hvals(key)) if kind == 'hash' else []\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    json.dump({'fence': os.environ.get('REDISLOCK_FENCING_TOKEN'),\n"
    "               'type': kind, 'modes': modes}, f)\n"
    "raise SystemExit(int(sys.argv[4]))\n"
)
HOLD_UNTIL_GO = (  # says it runs (argv[1]), then holds until argv[2] exists (at most 60 s)
    "import os, sys, time\n"
    "open(sys.argv[1], 'w').close()\n"
    "deadline = time.monotonic() + 60\n"
    "while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:\n"
    "    time.sleep(0.02)\n"
    "raise SystemExit(0 if os.path.exists(sys.argv[2]) else 9)\n"
)
APPEND = (  # appends argv[2] and the fencing token to the file argv[1]
    "import os, sys\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)\n"
    "os.write(fd, f\"{sys.argv[2]} {os.environ['REDISLOCK_FENCING_TOKEN']}\\n\".encode())\n"
    "os.close(fd)\n"
)
TICKER = (  # writes its pid, then appends a line every 50 ms for argv[3] seconds
    "import os, sys, time\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f:\n"
    "    f.write(str(os.getpid()))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "end = time.monotonic() + float(sys.argv[3])\n"
    "while time.monotonic() < end:\n"
    "    with open(sys.argv[2], 'a') as f:\n"
    "        f.write('t\\n')\n"
    "    time.sleep(0.05)\n"
)

HOST = socket.gethostname()

KIND_FLAGS: dict[str, list[str]] = {
    "lock": [],
    "read": ["--read"],
    "write": ["--write"],
    "fair": ["--fair"],
    "permit": ["--permits", "2"],
}


# --------------------------------------------------------------------------- fixtures


# --------------------------------------------------------------------------- helpers


def inspect_json(capsys: pytest.CaptureFixture[str], url: str, name: str) -> dict[str, Any]:
    status, out, err = in_process(capsys, ["--url", url, "inspect", name, "--json"])
    assert status == 0, err
    info: dict[str, Any] = json.loads(out)
    return info


def inspect_text(capsys: pytest.CaptureFixture[str], url: str, name: str) -> str:
    status, out, err = in_process(capsys, ["--url", url, "inspect", name])
    assert status == 0, err
    return out


def run_args(name: str, kind: str, *extra: str) -> list[str]:
    return ["run", name, *KIND_FLAGS[kind], *extra]


def queued(admin: redis.Redis, name: str, n: int) -> Callable[[], bool]:
    """Whether ``n`` waiters are in the queue of FairLock ``name``."""
    return lambda: admin.llen(lock_key(name) + ":queue") == n


def modes(admin: redis.Redis, name: str) -> list[str]:
    """The modes of the holds in the hash of ``name`` (w, r, p), sorted."""
    return sorted(as_str(v).split("|")[0] for v in admin.hvals(lock_key(name)))


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def stop_all(*procs: subprocess.Popen[str] | None) -> None:
    for proc in procs:
        if proc is not None:
            reap(proc)


# --------------------------------------------------------------------------- run: every kind


def test_run_every_kind_passes_the_status_and_the_fencing_token(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    expected = {
        "lock": ("string", []),
        "read": ("hash", ["r"]),
        "write": ("hash", ["w"]),
        "fair": ("string", []),
        "permit": ("hash", ["p"]),
    }
    for n, kind in enumerate(expected):
        admin.set(fence_key(lock_key(f"k:{kind}")), 40 + n)  # the next token is 41 + n
    procs = {
        kind: start(
            cli_env,
            url,
            *run_args(f"k:{kind}", kind),
            "--",
            *py(PROBE, tmp_path / kind, url, lock_key(f"k:{kind}"), str(3 + n)),
        )
        for n, kind in enumerate(expected)
    }
    results = {kind: finish(proc) for kind, proc in procs.items()}
    for n, (kind, (key_type, modes)) in enumerate(expected.items()):
        status, _, err = results[kind]
        assert status == 3 + n, (kind, err)  # CMD's own status
        probe = json.loads((tmp_path / kind).read_text())
        assert probe == {"fence": str(41 + n), "type": key_type, "modes": modes}, kind
        assert admin.exists(lock_key(f"k:{kind}")) == 0, kind  # released after CMD
        assert admin.get(fence_key(lock_key(f"k:{kind}"))) == str(41 + n), kind


def test_concurrent_write_runs_never_overlap(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    log, counter = tmp_path / "intervals", tmp_path / "counter"
    counter.write_text("0")
    workers, rounds = 3, 2
    statuses: list[int] = []
    errors: list[str] = []
    guard = threading.Lock()

    def worker() -> None:
        for _ in range(rounds):
            result = cli(
                cli_env,
                url,
                *run_args("rw:w", "write", "--wait", "60"),
                "--",
                *py(CRITICAL_SECTION, log, counter),
            )
            with guard:
                statuses.append(result.returncode)
                errors.append(result.stderr)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(100)
    assert not any(t.is_alive() for t in threads)
    assert statuses == [0] * (workers * rounds), errors
    rows = sorted(tuple(int(x) for x in line.split()) for line in log.read_text().splitlines())
    assert len(rows) == workers * rounds
    for (_, end, _), (begin, _, _) in itertools.pairwise(rows):
        assert end <= begin, "two writers ran at the same time"
    assert counter.read_text() == str(workers * rounds)  # no lost update
    assert admin.get(fence_key(lock_key("rw:w"))) == str(workers * rounds)
    assert admin.exists(lock_key("rw:w")) == 0


def test_read_runs_overlap_and_exclude_a_writer(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    go, ran = tmp_path / "go", tmp_path / "writer-ran"
    ready = [tmp_path / "ready0", tmp_path / "ready1"]
    readers = [
        start(cli_env, url, *run_args("rw:r", "read"), "--", *py(HOLD_UNTIL_GO, mark, go))
        for mark in ready
    ]
    try:
        for mark in ready:  # both CMDs run at the same time: the reads overlap
            wait_for(mark.exists, what="both readers running")
        assert modes(admin, "rw:r") == ["r", "r"]
        writer = cli(cli_env, url, *run_args("rw:r", "write", "--no-wait"), "--", "touch", str(ran))
        assert writer.returncode == EXIT_BUSY, writer.stderr
        assert "write lock 'rw:r' is busy" in writer.stderr
        assert not ran.exists()
        go.touch()
        for proc in readers:
            status, _, err = finish(proc)
            assert status == 0, err
    finally:
        stop_all(*readers)
    assert admin.exists(lock_key("rw:r")) == 0
    writer = cli(cli_env, url, *run_args("rw:r", "write", "--no-wait"), "--", "touch", str(ran))
    assert writer.returncode == 0, writer.stderr
    assert ran.exists()


def test_permits_let_n_run_at_once_and_the_next_waits(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    ready = [tmp_path / "ready0", tmp_path / "ready1", tmp_path / "ready2"]
    holders = [
        start(cli_env, url, *run_args("sem", "permit"), "--", *py(HOLD_UNTIL_GO, mark, go))
        for mark in ready[:2]
    ]
    waiter: subprocess.Popen[str] | None = None
    try:
        for mark in ready[:2]:
            wait_for(mark.exists, what="two permit holders running")
        assert modes(admin, "sem") == ["p", "p"]
        third = cli(cli_env, url, *run_args("sem", "permit", "--no-wait"), "--", "true")
        assert third.returncode == EXIT_BUSY, third.stderr
        assert "semaphore 'sem' is busy" in third.stderr
        t0 = time.monotonic()
        third = cli(cli_env, url, *run_args("sem", "permit", "--wait", "0.5"), "--", "true")
        assert third.returncode == EXIT_BUSY, third.stderr
        assert time.monotonic() - t0 >= 0.5
        waiter = start(
            cli_env,
            url,
            *run_args("sem", "permit", "--wait", "60"),
            "--",
            *py(HOLD_UNTIL_GO, ready[2], go),
        )
        wait_for(lambda: admin.exists(lock_key("sem") + ":wait") == 1, what="permit waiter")
        time.sleep(0.3)
        assert not ready[2].exists()  # still waiting for a permit
        go.touch()  # the holders finish, a permit comes free, the waiter runs
        for proc in [*holders, waiter]:
            status, _, err = finish(proc)
            assert status == 0, err
        assert ready[2].exists()
    finally:
        stop_all(*holders, waiter)
    assert admin.exists(lock_key("sem")) == 0
    assert admin.get(fence_key(lock_key("sem"))) == "3"


def test_fair_runs_are_granted_in_arrival_order(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    holder = FairLock(admin, "fifo")
    assert holder.acquire(timeout=5)
    log = tmp_path / "order"
    labels = ["first", "second", "third", "fourth"]
    waiters: list[subprocess.Popen[str]] = []
    try:
        for n, label in enumerate(labels, start=1):
            waiters.append(
                start(
                    cli_env,
                    url,
                    *run_args("fifo", "fair", "--wait", "60"),
                    "--",
                    *py(APPEND, log, label),
                )
            )
            wait_for(queued(admin, "fifo", n), what=f"waiter {label} queued")
        # A --no-wait try never jumps the queue.
        jumper = cli(cli_env, url, *run_args("fifo", "fair", "--no-wait"), "--", "true")
        assert jumper.returncode == EXIT_BUSY, jumper.stderr
        holder.release()
        for proc in waiters:
            status, _, err = finish(proc)
            assert status == 0, err
    finally:
        if holder.owned():
            holder.release()
        stop_all(*waiters)
    rows = [line.split() for line in log.read_text().splitlines()]
    assert [r[0] for r in rows] == labels
    assert [int(r[1]) for r in rows] == [2, 3, 4, 5]  # fencing tokens in the same order
    assert admin.exists(lock_key("fifo"), lock_key("fifo") + ":queue") == 0


@pytest.mark.parametrize("kind", ["read", "fair", "permit"])
def test_run_checks_the_lease_when_continued_after_a_stop(
    cli_env: dict[str, str],
    url: str,
    admin: redis.Redis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    """SIGTSTP stops `run` and CMD; an operator force-releases meanwhile; on SIGCONT `run`
    asks Redis (owned()) before CMD may go on, finds the hold gone, and stops CMD (79)."""
    pidfile, ticks = tmp_path / "cmd.pid", tmp_path / "ticks"
    name = f"stop:{kind}"
    proc = start(cli_env, url, *run_args(name, kind), "--", *py(TICKER, pidfile, ticks, "60"))
    try:
        wait_for(pidfile.exists, what="CMD")
        cmd_pid = int(pidfile.read_text())
        wait_for(ticks.exists, what="ticks")
        proc.send_signal(signal.SIGTSTP)
        wait_for(lambda: state(proc.pid) == "T" and state(cmd_pid) == "T", what="both stopped")
        status, out, err = in_process(capsys, ["--url", url, "release", name, "--force"])
        assert status == 0, err
        assert "released" in out
        stopped_at = len(ticks.read_text().splitlines())
        time.sleep(0.3)
        assert len(ticks.read_text().splitlines()) == stopped_at  # CMD was stopped too
        continued = time.monotonic()
        proc.send_signal(signal.SIGCONT)
        status, _, err = finish(proc, timeout=30)
        # The 30 s lease would be renewed only 10 s after the acquisition: the re-check
        # on continue found the loss, not the renewer.
        assert time.monotonic() - continued < 8.0
        assert status == EXIT_LOST, err
        assert "was lost" in err
        wait_for(lambda: pid_gone(cmd_pid), timeout=10, what="CMD gone")
    finally:
        stop_all(proc)


def test_run_with_the_wrong_kind_for_a_name_is_a_usage_error(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    plain = Lock(admin, "mixed")
    assert plain.acquire(timeout=5)
    ran = tmp_path / "ran"
    try:
        for kind in ("read", "write", "permit"):
            result = cli(cli_env, url, *run_args("mixed", kind), "--", "touch", str(ran))
            assert result.returncode == EXIT_USAGE, result.stderr
            assert "another kind of lock" in result.stderr
        assert not ran.exists()
        assert plain.owned()
    finally:
        plain.release()
    rlock = RLock(admin, "mixed")
    with rlock:
        for kind in ("lock", "fair"):
            result = cli(cli_env, url, *run_args("mixed", kind), "--", "touch", str(ran))
            assert result.returncode == EXIT_USAGE, result.stderr
            assert "another kind of lock" in result.stderr
        # The hash kinds share one hash: another kind's hold makes the name busy, even for
        # a Semaphore with permits to spare (never a second holder of another kind).
        for kind in ("read", "write", "permit"):
            result = cli(cli_env, url, *run_args("mixed", kind), "-n", "--", "touch", str(ran))
            assert result.returncode == EXIT_BUSY, (kind, result.stderr)
            assert "is busy" in result.stderr
        assert not ran.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--read", "--fair"], "not allowed with argument"),
        (["--read", "--write"], "not allowed with argument"),
        (["--write", "--permits", "2"], "not allowed with argument"),
        (["--fair", "--permits", "3"], "not allowed with argument"),
        (["--permits", "0"], "must be between 1 and 1000000"),
        (["--permits", "1000001"], "must be between 1 and 1000000"),
        (["--permits", "two"], "not a whole number of permits"),
        (["--permits", "2", "--ttl", "0"], "--ttl must be > 0 seconds"),
    ],
)
def test_run_usage_errors_exit_64_before_any_io(
    cli_env: dict[str, str], tmp_path: Path, flags: list[str], message: str
) -> None:
    """The URL names a socket nobody listens on: any I/O would exit 69, not 64."""
    nowhere = f"unix://{tmp_path / 'no-server.sock'}"
    ran = tmp_path / "ran"
    result = cli(cli_env, nowhere, "run", "x", *flags, "--", "touch", str(ran))
    assert result.returncode == EXIT_USAGE, result.stderr
    assert message in result.stderr
    assert not ran.exists()


def test_run_usage_errors_in_process(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--url", url, "run", "x", "--read", "--fair", "--", "true"])
    assert info.value.code == EXIT_USAGE
    assert "usage:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["--url", url, "run", "x", "--permits", "0", "--", "true"])
    assert info.value.code == EXIT_USAGE
    assert admin.keys("*") == []


# --------------------------------------------------------------------------- inspect


def test_inspect_an_rlock(url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]) -> None:
    lock = RLock(admin, "re")
    with lock, lock:
        token = lock.token
        assert token is not None
        info = inspect_json(capsys, url, "re")
        assert info["kind"] == "rlock"
        assert info["held"] is True
        assert info["key"] == lock_key("re")
        assert (info["writers"], info["readers"], info["permits_held"]) == (1, 0, 0)
        assert "permit_count" not in info
        [hold] = info["holds"]
        assert hold["mode"] == "w"
        assert hold["role"] == "writer"
        assert hold["count"] == 2
        assert hold["pid"] == os.getpid()
        assert hold["fencing_token"] == lock.fencing_token == info["fencing_counter"]
        assert hold["token_tag"] == token_tag(token)
        assert 25.0 < hold["lease_remaining"] <= 30.0
        assert 25.0 < info["ttl"] <= 30.0
        text = inspect_text(capsys, url, "re")
        assert text.startswith(f"reentrant lock 're' ({lock_key('re')}): held by 1 writer\n")
        assert f"writer: {hold['host']} pid {os.getpid()}, hold count 2, fencing token 1" in text
        assert f"token ~{token_tag(token)}" in text
        assert token not in text
        assert "waiters: none seen" in text
    info = inspect_json(capsys, url, "re")
    assert info["kind"] is None  # nothing left to tell the kind by
    assert info["held"] is False
    assert inspect_text(capsys, url, "re").startswith("lock 're'")


def test_inspect_a_read_write_lock_with_readers_and_a_waiting_writer(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    readers = [ReadWriteLock(admin, "catalog") for _ in range(2)]
    for rw in readers:
        assert rw.read().acquire(timeout=5)
    writer = ReadWriteLock(admin, "catalog")
    got: list[bool] = []
    thread = threading.Thread(target=lambda: got.append(writer.write().acquire(timeout=30)))
    thread.start()
    try:
        wait_for(lambda: admin.exists(lock_key("catalog") + ":wait") == 1, what="writer waits")
        info = inspect_json(capsys, url, "catalog")
        assert info["kind"] == "rwlock"
        assert (info["writers"], info["readers"]) == (0, 2)
        assert info["waiters"] is True  # a writer waits
        assert info["reader_waiters"] is False
        assert [h["fencing_token"] for h in info["holds"]] == [1, 2]
        assert {h["token_tag"] for h in info["holds"]} == {
            token_tag(str(rw.read().token)) for rw in readers
        }
        assert all(h["role"] == "reader" and h["count"] == 1 for h in info["holds"])
        text = inspect_text(capsys, url, "catalog")
        assert "read-write lock 'catalog'" in text
        assert "held by 2 readers" in text
        assert text.count("  reader: ") == 2
        assert "waiters: writers yes, readers none seen" in text
        for rw in readers:
            assert str(rw.read().token) not in text
            rw.read().release()
        thread.join(30)
        assert got == [True]
        info = inspect_json(capsys, url, "catalog")
        assert info["kind"] == "rlock"  # a writer alone looks like an RLock
        assert (info["writers"], info["readers"]) == (1, 0)
        assert info["holds"][0]["fencing_token"] == 3
    finally:
        thread.join(30)
        if writer.write().hold_count():
            writer.write().release()


def test_inspect_a_semaphore(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    sem = Semaphore(admin, "gpu", permits=3)
    permits = [sem.acquire(timeout=5), sem.acquire(timeout=5)]
    try:
        info = inspect_json(capsys, url, "gpu")
        assert info["kind"] == "semaphore"
        assert info["permits_held"] == 2
        assert info["permit_count"] is None  # only the clients know it
        assert info["waiters"] is False
        by_fence = {h["fencing_token"]: h for h in info["holds"]}
        for permit in permits:
            h = by_fence[permit.fencing_token or 0]
            assert (h["mode"], h["role"], h["count"]) == ("p", "permit", 1)
            assert h["permit_id"] == permit.id
            assert h["token_tag"] == token_tag(str(permit.token))
            assert h["pid"] == os.getpid()
        text = inspect_text(capsys, url, "gpu")
        assert text.startswith(f"semaphore 'gpu' ({lock_key('gpu')}): 2 permits held\n")
        assert "permit count: set by clients" in text
        assert text.count("  permit: ") == 2
        assert f"permit id {permits[0].id}" in text
        assert all(str(p.token) not in text for p in permits)

        sem.set_permits(2)  # the count in Redis wins over the clients' 3
        assert sem.try_acquire() is None
        info = inspect_json(capsys, url, "gpu")
        assert info["permit_count"] == 2
        text = inspect_text(capsys, url, "gpu")
        assert "2 of 2 permits held" in text
        assert "permit count: 2 (the :permits key)" in text
    finally:
        for permit in permits:
            permit.release()
    info = inspect_json(capsys, url, "gpu")  # free, but the :permits key tells the kind
    assert (info["kind"], info["held"], info["permit_count"]) == ("semaphore", False, 2)
    assert inspect_text(capsys, url, "gpu").startswith("semaphore 'gpu' (redislock:{gpu}): 0 of 2")


def test_inspect_a_fair_lock_shows_its_queue(
    cli_env: dict[str, str],
    url: str,
    admin: redis.Redis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    holder = FairLock(admin, "fq")
    assert holder.acquire(timeout=5)
    waiters = []
    try:
        info = inspect_json(capsys, url, "fq")
        assert info["kind"] == "lock"  # nobody queued: a FairLock looks like a Lock
        for n in (1, 2):
            waiters.append(
                start(cli_env, url, *run_args("fq", "fair", "--wait", "60"), "--", "true")
            )
            wait_for(queued(admin, "fq", n), what="queued")
        tokens = [as_str(t) for t in admin.lrange(lock_key("fq") + ":queue", 0, -1)]
        info = inspect_json(capsys, url, "fq")
        assert info["kind"] == "fair"
        assert info["held"] is True
        assert info["waiters"] is True
        assert info["holder"]["pid"] == os.getpid()
        assert info["holder"]["token_tag"] == token_tag(str(holder.token))
        assert info["holder"]["fencing_token"] == 1
        assert [w["position"] for w in info["queue"]] == [1, 2]
        assert [w["token_tag"] for w in info["queue"]] == [token_tag(t) for t in tokens]
        assert all(0 < w["lease_remaining"] <= 1.0 for w in info["queue"])
        text = inspect_text(capsys, url, "fq")
        assert text.startswith(f"fair lock 'fq' ({lock_key('fq')}): held by ")
        assert f"pid {os.getpid()}" in text
        assert "queue: 2 waiters" in text
        assert f"1. token ~{token_tag(tokens[0])}, waiter lease " in text
        assert f"2. token ~{token_tag(tokens[1])}, waiter lease " in text
        assert all(t not in text for t in [*tokens, str(holder.token)])
        holder.release()
        for proc in waiters:
            status, _, err = finish(proc)
            assert status == 0, err
    finally:
        if holder.owned():
            holder.release()
        stop_all(*waiters)


def test_inspect_a_plain_lock_gets_a_kind_field(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    with Lock(admin, "plain") as lock:
        info = inspect_json(capsys, url, "plain")
        assert info["kind"] == "lock"
        assert info["holder"]["fencing_token"] == lock.fencing_token
        assert "queue" not in info
        text = inspect_text(capsys, url, "plain")
        assert text.startswith(f"lock 'plain' ({lock_key('plain')}): held by ")
        assert "waiters: none seen" in text
    admin.rpush(lock_key("odd"), "x")
    info = inspect_json(capsys, url, "odd")
    assert (info["kind"], info["type"]) == ("foreign", "list")
    assert "a Redis list, not a redislock lock" in inspect_text(capsys, url, "odd")


# --------------------------------------------------------------------------- list


def test_list_shows_every_kind_and_no_internal_keys(
    cli_env: dict[str, str],
    url: str,
    admin: redis.Redis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = Lock(admin, "l:plain")
    fair = FairLock(admin, "l:fair")
    rlock = RLock(admin, "l:re")
    rw = ReadWriteLock(admin, "l:rw")
    sem = Semaphore(admin, "l:sem", permits=4)
    idle = Semaphore(admin, "l:idle", permits=4)
    idle.set_permits(4)  # a :permits key, nothing held: not listed
    assert plain.acquire(timeout=5)
    assert fair.acquire(timeout=5)
    assert rlock.acquire(timeout=5)
    assert rw.read().acquire(timeout=5)
    permit = sem.acquire(timeout=5)
    sem.set_permits(3)
    waiter = start(cli_env, url, *run_args("l:fair", "fair", "--wait", "60"), "--", "true")
    try:
        wait_for(queued(admin, "l:fair", 1), what="queued")
        status, out, _ = in_process(capsys, ["--url", url, "list", "--json"])
        assert status == 0
        infos = json.loads(out)
        kinds = {i["name"]: i["kind"] for i in infos}
        assert kinds == {
            "l:fair": "fair",
            "l:plain": "lock",
            "l:re": "rlock",
            "l:rw": "rwlock",
            "l:sem": "semaphore",
        }
        assert [i["name"] for i in infos] == sorted(kinds)
        assert all(i["held"] for i in infos)
        assert {i["name"]: i.get("permit_count") for i in infos}["l:sem"] == 3

        status, out, _ = in_process(capsys, ["--url", url, "list"])
        assert status == 0
        lines = dict(line.split("\t", 1) for line in out.splitlines())
        assert set(lines) == set(kinds)
        assert "fair lock: held by" in lines["l:fair"]
        assert "1 queued" in lines["l:fair"]
        assert lines["l:plain"].split("\t")[1].startswith("held by ")  # as before
        assert f"reentrant lock: held by 1 writer (writer {HOST}" in lines["l:re"]
        assert "read-write lock: held by 1 reader" in lines["l:rw"]
        assert f"semaphore: 1 of 3 permits held (permit {HOST}" in lines["l:sem"]
        for line in lines.values():
            assert f"pid {os.getpid()}" in line

        status, out, _ = in_process(
            capsys, ["--url", url, "list", "--json", "--starts-with", "l:r"]
        )
        assert [i["name"] for i in json.loads(out)] == ["l:re", "l:rw"]
    finally:
        for release in (plain.release, fair.release, rlock.release, rw.read().release):
            release()
        permit.release()
        status, _, err = finish(waiter)
        assert status == 0, err
    status, out, err = in_process(capsys, ["--url", url, "list"])
    assert (status, out) == (0, "")
    assert "no locks held" in err


# --------------------------------------------------------------------------- release --force


def test_release_force_of_a_read_write_lock_stops_the_holder_and_wakes_the_waiters(
    cli_env: dict[str, str],
    url: str,
    admin: redis.Redis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pidfile, ticks = tmp_path / "writer.pid", tmp_path / "ticks"
    writer = start(
        cli_env,
        url,
        # a lease of 5 s: a writer starved by a loaded machine for 1.5 s lost a shorter one
        # before the reader came (CI run with a CPU hog: the reader never waited)
        *run_args("force:rw", "write", "--ttl", "5", "--grace", "5"),
        "--",
        *py(TICKER, pidfile, ticks, "60"),
    )
    ran = tmp_path / "reader-ran"
    reader: subprocess.Popen[str] | None = None
    try:
        wait_for(pidfile.exists, what="writer CMD")
        reader = start(
            cli_env, url, *run_args("force:rw", "read", "--wait", "60"), "--", "touch", str(ran)
        )
        waiting = reader
        wait_for(
            lambda: (
                waiting.poll() is not None or admin.exists(lock_key("force:rw") + ":rwait") == 1
            ),
            what="reader",
        )
        assert reader.poll() is None, finish(reader)  # it waits: the writer still holds
        status, _, err = in_process(capsys, ["--url", url, "release", "force:rw"])
        assert status == EXIT_USAGE
        assert "--force" in err
        assert admin.exists(lock_key("force:rw")) == 1
        released_at = time.monotonic()
        status, out, _ = in_process(capsys, ["--url", url, "release", "force:rw", "--force"])
        assert status == 0
        assert "released read-write lock 'force:rw': 1 hold removed (writer: " in out
        assert f"pid {writer.pid}" in out
        status, _, err = finish(reader)
        assert status == 0, err  # woken by the force release, not by a recheck
        assert time.monotonic() - released_at < 5.0
        assert ran.exists()
        status, _, err = finish(writer)  # its next renewal finds the hold gone
        assert status == EXIT_LOST, err
        assert "lease of write lock 'force:rw' was lost" in err
        assert pid_gone(int(pidfile.read_text()))
    finally:
        stop_all(writer, reader)
    status, out, _ = in_process(capsys, ["--url", url, "release", "force:rw", "--force"])
    assert status == 0
    assert "lock 'force:rw' was not held" in out


def test_release_force_of_a_semaphore_and_an_rlock(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    sem = Semaphore(admin, "force:sem", permits=2)
    permits = [sem.acquire(timeout=5), sem.acquire(timeout=5)]
    status, out, _ = in_process(capsys, ["--url", url, "release", "force:sem", "--force"])
    assert status == 0
    assert "released semaphore 'force:sem': 2 holds removed (permit: " in out
    assert all(not p.owned() for p in permits)
    assert admin.exists(lock_key("force:sem")) == 0
    assert sem.available() == 2

    rlock = RLock(admin, "force:re")
    assert rlock.acquire(timeout=5)
    status, out, _ = in_process(capsys, ["--url", url, "release", "force:re", "--force"])
    assert status == 0
    assert "released reentrant lock 'force:re': 1 hold removed (writer: " in out
    assert not rlock.owned()
    other = RLock(admin, "force:re")
    assert other.acquire(blocking=False)  # free for the next one at once
    other.release()


def test_release_force_of_a_fair_lock_grants_the_next_waiter(
    cli_env: dict[str, str],
    url: str,
    admin: redis.Redis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    go = tmp_path / "go"
    holder_ready, waiter_ready = tmp_path / "holder", tmp_path / "waiter"
    holder = start(
        cli_env,
        url,
        *run_args("force:fair", "fair", "--ttl", "1.5"),
        "--",
        *py(HOLD_UNTIL_GO, holder_ready, go),
    )
    waiter: subprocess.Popen[str] | None = None
    try:
        wait_for(holder_ready.exists, what="holder CMD")
        waiter = start(
            cli_env,
            url,
            *run_args("force:fair", "fair", "--wait", "60"),
            "--",
            *py(HOLD_UNTIL_GO, waiter_ready, go),
        )
        wait_for(queued(admin, "force:fair", 1), what="queued")
        status, out, _ = in_process(capsys, ["--url", url, "release", "force:fair", "--force"])
        assert status == 0
        assert f"released fair lock 'force:fair' (held by {HOST} pid" in out
        assert f"pid {holder.pid}" in out
        # fair.lua's force grants the lock to the queued waiter in the same script
        assert f"now held by the next waiter: {HOST} pid {waiter.pid}" in out
        assert "fencing token 2" in out
        wait_for(waiter_ready.exists, what="the waiter's CMD")  # it runs under the grant
        status, _, err = finish(holder, timeout=30)  # the old holder finds its lease gone
        assert status == EXIT_LOST, err
        assert "lease of fair lock 'force:fair' was lost" in err
        go.touch()
        status, _, err = finish(waiter)
        assert status == 0, err
    finally:
        stop_all(holder, waiter)
    assert admin.exists(lock_key("force:fair")) == 0
    assert admin.get(fence_key(lock_key("force:fair"))) == "2"


def test_release_force_of_a_plain_lock_still_works(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = Lock(admin, "force:plain")
    assert lock.acquire(timeout=5)
    status, out, _ = in_process(capsys, ["--url", url, "release", "force:plain", "--force"])
    assert status == 0
    assert out.startswith("released lock 'force:plain' (held by ")
    assert not lock.owned()
    admin.sadd(lock_key("force:odd"), "x")
    status, _, err = in_process(capsys, ["--url", url, "release", "force:odd", "--force"])
    assert status == EXIT_USAGE
    assert "not a redislock lock: not touched" in err
    assert admin.exists(lock_key("force:odd")) == 1


def test_release_force_refuses_a_key_redislock_did_not_write(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """A string that is not a lock value, or a hash with fields that are not holds (alone or
    next to a live hold), is left alone: exit 64, the key named with `redis-cli DEL` as the
    way if really meant; inspect calls the same string "not by redislock"."""
    rw = ReadWriteLock(admin, "force:mixed")
    hold = rw.read()
    assert hold.acquire(timeout=5)
    admin.hset(lock_key("force:mixed"), "someone-else", "not a hold")
    admin.set(lock_key("force:str"), "just a value", ex=600)
    admin.hset(lock_key("force:hash"), mapping={"a": "1", "b": "2"})
    assert "held (not by redislock: unknown value format)" in inspect_text(capsys, url, "force:str")
    cases = {
        "force:str": "a string that is not a redislock lock value",
        "force:hash": "a hash with 2 hash fields not written by redislock",
        "force:mixed": "a hash with 1 hash field not written by redislock",
    }
    for name, what in cases.items():
        before = admin.dump(lock_key(name))
        status, out, err = in_process(capsys, ["--url", url, "release", name, "--force"])
        assert status == EXIT_USAGE, (name, err)
        assert out == ""
        assert f"{lock_key(name)} holds {what}: not touched" in err, err
        assert f"redis-cli DEL {shlex.quote(lock_key(name))})" in err
        assert "released" not in out + err
        assert admin.dump(lock_key(name)) == before  # not touched
    admin.hdel(lock_key("force:mixed"), "someone-else")  # (the hold scripts refuse such a hash too)
    assert hold.owned()  # its hold is still there
    hold.release()


def test_release_force_still_works_for_a_lock_without_a_ttl(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """A redislock lock whose key lost its TTL (PERSIST by hand) is still redislock's: inspect
    says it never expires (not "None s"), and release --force deletes it."""
    lock = Lock(admin, "force:persist", ttl=60)
    assert lock.acquire(timeout=5)
    assert admin.persist(lock_key("force:persist")) == 1
    text = inspect_text(capsys, url, "force:persist")
    assert "  ttl: none (the key never expires)\n" in text
    assert "None" not in text
    assert inspect_json(capsys, url, "force:persist")["ttl"] is None
    status, out, err = in_process(capsys, ["--url", url, "release", "force:persist", "--force"])
    assert status == 0, err
    assert out.startswith("released lock 'force:persist' (held by ")
    assert admin.exists(lock_key("force:persist")) == 0
    assert not lock.owned()


def test_inspect_says_permit_and_permits(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    sem = Semaphore(admin, "one-gpu", permits=4)
    permit = sem.acquire(timeout=5)
    try:
        first = inspect_text(capsys, url, "one-gpu").splitlines()[0]
        assert first.endswith(": 1 permit held"), first
        sem.set_permits(1)
        first = inspect_text(capsys, url, "one-gpu").splitlines()[0]
        assert first.endswith(": 1 of 1 permit held"), first
        sem.set_permits(4)
        first = inspect_text(capsys, url, "one-gpu").splitlines()[0]
        assert first.endswith(": 1 of 4 permits held"), first
    finally:
        permit.release()
    first = inspect_text(capsys, url, "one-gpu").splitlines()[0]
    assert first.endswith(": 0 of 4 permits held"), first
