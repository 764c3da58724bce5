# SPDX-License-Identifier: MIT
"""The ``redislock`` command line, against real redis-server processes.

Where exit statuses and signals matter the CLI runs as a real subprocess
(``python -m redislock``); otherwise ``redislock.cli.main`` runs in-process. Every test gets
a fresh private ``REDISLOCK_RUNTIME_DIR`` and no ``REDIS_URL``, and the embedded server of
that directory is stopped at its end, so no test can reach a server it did not start.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis

from redislock import Lock
from redislock._core.keys import fence_key
from redislock.cli import EXIT_BUSY, EXIT_LOST, EXIT_USAGE, main
from redislock.server import RedisProcess, stop_embedded
from tests.support import reap

pytestmark = [pytest.mark.servers, pytest.mark.pythons]  # dev.py's STAGES: where else it runs

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"

# CMD snippets, run as ``sys.executable -c SNIPPET ARGS...``.
WRITE_TIME = (
    "import os, sys, time\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    f.write(str(time.monotonic_ns()))\n"
)
CRITICAL_SECTION = (  # a non-atomic read-modify-write of a counter file, and its interval
    "import os, sys, time\n"
    "t0 = time.monotonic_ns()\n"
    "with open(sys.argv[2]) as f:\n"
    "    n = int(f.read() or 0)\n"
    "time.sleep(0.05)\n"
    "with open(sys.argv[2], 'w') as f:\n"
    "    f.write(str(n + 1))\n"
    "t1 = time.monotonic_ns()\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)\n"
    "os.write(fd, f'{t0} {t1} {os.getpid()}\\n'.encode())\n"
    "os.close(fd)\n"
)
STUBBORN = (  # records SIGTERM but ignores it; only SIGKILL stops it
    "import os, signal, sys, time\n"
    "def on_term(signum, frame):\n"
    "    open(sys.argv[2], 'w').close()\n"
    "signal.signal(signal.SIGTERM, on_term)\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f:\n"
    "    f.write(str(os.getpid()))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "while True:\n"
    "    time.sleep(0.1)\n"
)
OBEDIENT = (  # writes its pid, then sleeps until a signal ends it
    "import os, sys, time\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f:\n"
    "    f.write(str(os.getpid()))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "time.sleep(30)\n"
)
GRACEFUL = (  # on SIGTERM/SIGINT writes the signal number to a marker and exits 0
    "import signal, sys, time\n"
    "def on_signal(signum, frame):\n"
    "    with open(sys.argv[1], 'w') as f:\n"
    "        f.write(str(signum))\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, on_signal)\n"
    "signal.signal(signal.SIGINT, on_signal)\n"
    "open(sys.argv[2], 'w').close()\n"
    "time.sleep(30)\n"
)


# --------------------------------------------------------------------------- fixtures


def private_cli_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Environment for CLI subprocesses: our source first, no REDIS_URL, a private runtime dir.

    The same settings apply to in-process ``main()`` calls. The embedded server of the
    private runtime dir (if a test started one) is stopped at teardown. The body of every
    CLI test module's autouse ``cli_env`` fixture.
    """
    runtime = tempfile.mkdtemp(prefix="rl-")
    os.chmod(runtime, 0o700)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("REDISLOCK_RUNTIME_DIR", runtime)
    # No configuration file of the machine or the user: only what a test writes.
    monkeypatch.setenv("XDG_CONFIG_HOME", os.path.join(runtime, "config"))
    monkeypatch.setenv("REDISLOCK_SYSTEM_CONFIG", os.path.join(runtime, "no-system.toml"))
    monkeypatch.delenv("REDISLOCK_REQUIRE_URL", raising=False)
    monkeypatch.delenv("REDISLOCK_PREFIX", raising=False)
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(SRC) + (os.pathsep + old if old else ""))
    try:
        yield dict(os.environ)
    finally:
        stop_embedded()
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(autouse=True)
def cli_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    yield from private_cli_env(monkeypatch)


@pytest.fixture
def url(redis_server: RedisProcess) -> str:
    return redis_server.url


# --------------------------------------------------------------------------- helpers


def lock_key(name: str) -> str:
    return f"redislock:{{{name}}}"


def cli_cmd(url: str | None, *args: str) -> list[str]:
    head = [sys.executable, "-m", "redislock"]
    if url is not None:
        head += ["--url", url]
    return [*head, *args]


def py(snippet: str, *args: str | Path) -> list[str]:
    return [sys.executable, "-c", snippet, *(str(a) for a in args)]


def start(
    env: dict[str, str], url: str | None, *args: str, capture: bool = True
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli_cmd(url, *args),
        env=env,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE if capture else subprocess.DEVNULL,
        text=True,
    )


def cli(
    env: dict[str, str], url: str | None, *args: str, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_cmd(url, *args), env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, str, str]:
    """Wait for ``proc``; kill it if it does not exit in time (the test then fails)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{proc.args!r} did not exit within {timeout} s; stderr: {err}")
    return proc.returncode, out or "", err or ""


def wait_for(cond: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> float:
    """Poll ``cond`` every 10 ms; returns the monotonic time it became true."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
    return time.monotonic()


def pid_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs (a zombie counts as gone: it runs nothing)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return True
    return stat.rpartition(")")[2].split()[0] in {"Z", "X"}


def in_process(capsys: pytest.CaptureFixture[str], argv: Sequence[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# --------------------------------------------------------------------------- run: statuses


def test_run_passes_exit_statuses_through(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    not_executable = tmp_path / "script.sh"
    not_executable.write_text("#!/bin/sh\nexit 0\n")
    not_executable.chmod(0o644)
    cases: dict[str, tuple[list[str], int]] = {
        "ok": (["true"], 0),
        "three": (py("raise SystemExit(3)"), 3),
        "sigkill": (py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), 128 + 9),
        "sigusr1": (py("import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"), 128 + 10),
        "missing": ([str(tmp_path / "no-such-command")], 127),
        "noexec": ([str(not_executable)], 126),
    }
    procs = {
        name: start(cli_env, url, "run", f"status:{name}", "--", *cmd)
        for name, (cmd, _) in cases.items()
    }
    results = {name: finish(proc) for name, proc in procs.items()}
    for name, (_, expected) in cases.items():
        status, _, err = results[name]
        assert status == expected, (name, err)
    assert "command not found" in results["missing"][2]
    assert "no-such-command" in results["missing"][2]
    assert "cannot execute" in results["noexec"][2]
    for name in cases:  # every lock was released, whatever CMD did
        assert admin.exists(lock_key(f"status:{name}")) == 0, name
        assert admin.get(fence_key(lock_key(f"status:{name}"))) == "1", name


def test_run_without_a_command_is_a_usage_error(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["--url", url, "run", "x"], ["--url", url, "run", "x", "--"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code not in (0, None)
        err = capsys.readouterr().err
        assert "run needs a command after NAME" in err
        assert "usage:" in err


def test_run_rejects_bad_durations(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = in_process(capsys, ["--url", url, "run", "x", "--ttl", "0", "--", "true"])
    assert status == EXIT_USAGE
    assert "redislock:" in err
    with pytest.raises(SystemExit) as info:
        main(["--url", url, "run", "x", "--ttl", "soon", "--", "true"])
    assert info.value.code not in (0, None)
    assert "not a number of seconds" in capsys.readouterr().err
    assert admin.keys("*") == []


# --------------------------------------------------------------------------- run: the lock


def test_run_busy_no_wait_and_wait_timeout(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    holder = Lock(admin, "busy")
    assert holder.acquire(timeout=5)
    try:
        ran = tmp_path / "ran"
        t0 = time.monotonic()
        result = cli(cli_env, url, "run", "busy", "--no-wait", "--", "touch", str(ran))
        elapsed = time.monotonic() - t0
        assert result.returncode == EXIT_BUSY, result.stderr
        assert "busy" in result.stderr
        assert elapsed < 10.0  # one try, no waiting (the bound is for a loaded machine)
        assert not ran.exists()

        proc = start(cli_env, url, "run", "busy", "--wait", "0.5", "--", "touch", str(ran))
        # The waiter's first failed try queues it: the wait starts no earlier.
        seen = wait_for(lambda: admin.exists(lock_key("busy") + ":queue") == 1, what="waiter")
        status, _, err = finish(proc)
        waited = time.monotonic() - seen
        assert status == EXIT_BUSY, err
        assert waited >= 0.4, waited  # 0.5 s minus the polling lag of `seen`
        assert not ran.exists()
        assert holder.owned()
    finally:
        holder.release()


def test_run_waits_for_the_release(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    holder = Lock(admin, "queue")
    assert holder.acquire(timeout=5)
    stamp = tmp_path / "stamp"
    proc = start(cli_env, url, "run", "queue", "--wait", "10", "--", *py(WRITE_TIME, stamp))
    try:
        wait_for(lambda: admin.exists(lock_key("queue") + ":queue") == 1, what="waiter")
        time.sleep(0.5)
        assert not stamp.exists()  # still waiting
        released_at = time.monotonic_ns()
        holder.release()
    finally:
        if holder.owned():
            holder.release()
        status, _, err = finish(proc)
    assert status == 0, err
    ran_at = int(stamp.read_text())
    assert ran_at > released_at
    assert (ran_at - released_at) / 1e9 < 5.0  # woken, not stuck until --wait ran out
    assert admin.exists(lock_key("queue")) == 0
    assert admin.get(fence_key(lock_key("queue"))) == "2"


@pytest.mark.one_server  # waits out a lease: the same code on every server
def test_run_lease_lost_stops_the_command(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    """Delete the key behind run's back: CMD gets SIGTERM, then SIGKILL after --grace."""
    stubborn_pid, term_seen = tmp_path / "stubborn.pid", tmp_path / "term-seen"
    obedient_pid = tmp_path / "obedient.pid"
    stubborn = start(
        cli_env,
        url,
        "run",
        "lost:stubborn",
        "--ttl",
        "2",
        "--grace",
        "1",
        "--",
        *py(STUBBORN, stubborn_pid, term_seen),
    )
    obedient = start(
        cli_env,
        url,
        "run",
        "lost:obedient",
        "--ttl",
        "2",
        "--grace",
        "20",
        "--",
        *py(OBEDIENT, obedient_pid),
    )
    try:
        wait_for(stubborn_pid.exists, what="stubborn CMD")
        wait_for(obedient_pid.exists, what="obedient CMD")
        cmd_pids = {
            "stubborn": int(stubborn_pid.read_text()),
            "obedient": int(obedient_pid.read_text()),
        }
        time.sleep(2.3)  # a few renewals: the lease outlives its 2 s while CMD runs
        assert admin.exists(lock_key("lost:stubborn"), lock_key("lost:obedient")) == 2
        deleted_at = time.monotonic()
        admin.delete(lock_key("lost:stubborn"), lock_key("lost:obedient"))
        status, _, err = finish(obedient, timeout=30)
        obedient_took = time.monotonic() - deleted_at
        assert status == EXIT_LOST, err
        assert "lost" in err
        assert obedient_took < 10.0  # SIGTERM sufficed: no wait for the 20 s grace
        status, _, err = finish(stubborn, timeout=30)
        stubborn_took = time.monotonic() - deleted_at
        assert status == EXIT_LOST, err
        assert term_seen.exists()  # it was asked first...
        assert stubborn_took >= 0.9  # ...and killed only after the 1 s grace
        assert stubborn_took < 15.0
        for name, pid in cmd_pids.items():
            assert pid_gone(pid), name
        # run never re-creates a lock it lost
        assert admin.exists(lock_key("lost:stubborn"), lock_key("lost:obedient")) == 0
    finally:
        for proc in (stubborn, obedient):
            reap(proc)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_run_forwards_signals_to_the_command(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path, sig: int
) -> None:
    marker, ready = tmp_path / "marker", tmp_path / "ready"
    proc = start(cli_env, url, "run", "fwd", "--", *py(GRACEFUL, marker, ready))
    try:
        wait_for(ready.exists, what="CMD")
        assert admin.exists(lock_key("fwd")) == 1
        # run installs its forwarding handlers right after starting CMD: give it a moment.
        time.sleep(0.3)
        proc.send_signal(sig)
        status, _, err = finish(proc, timeout=30)
    finally:
        reap(proc)
    assert status == 0, err  # CMD's own status after its handler ran
    # (status 0 and no marker: SIGINT was ignored by whoever started the suite; conftest)
    assert marker.exists(), (status, err, sorted(p.name for p in tmp_path.iterdir()))
    assert marker.read_text() == str(int(sig))
    assert admin.exists(lock_key("fwd")) == 0  # released on the way out
    assert admin.get(fence_key(lock_key("fwd"))) == "1"


def test_concurrent_runs_never_overlap(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    log, counter = tmp_path / "intervals", tmp_path / "counter"
    counter.write_text("0")
    workers, rounds = 4, 3
    statuses: list[int] = []
    errors: list[str] = []
    guard = threading.Lock()

    def worker() -> None:
        for _ in range(rounds):
            result = cli(
                cli_env,
                url,
                "run",
                "shared",
                "--wait",
                "30",
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
        t.join(90)
    assert not any(t.is_alive() for t in threads)
    assert statuses == [0] * (workers * rounds), errors
    rows = sorted(tuple(int(x) for x in line.split()) for line in log.read_text().splitlines())
    assert len(rows) == workers * rounds
    assert len({row[2] for row in rows}) == workers * rounds  # a new CMD process each time
    for (_, end, _), (begin, _, _) in itertools.pairwise(rows):
        assert end <= begin, "two CMDs ran at the same time"
    assert counter.read_text() == str(workers * rounds)  # no lost update
    assert admin.get(fence_key(lock_key("shared"))) == str(workers * rounds)
    assert admin.exists(lock_key("shared")) == 0


# --------------------------------------------------------------------------- inspect, list, release


def test_inspect_release_and_waiter_wakeup(
    cli_env: dict[str, str],
    url: str,
    admin: redis.Redis,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name = "job"
    for _ in range(2):  # fencing counter at 2 before the CLI holder takes it
        with Lock(admin, name):
            pass

    status, out, _ = in_process(capsys, ["--url", url, "inspect", name, "--json"])
    assert status == 0
    info = json.loads(out)
    assert info["held"] is False
    assert info["holder"] is None
    assert info["fencing_counter"] == 2
    status, out, _ = in_process(capsys, ["--url", url, "inspect", name])
    assert status == 0
    assert "free" in out
    assert "fencing counter: 2" in out

    holder_pid = tmp_path / "holder.pid"
    holder = start(cli_env, url, "run", name, "--ttl", "3", "--", *py(OBEDIENT, holder_pid))
    ran = tmp_path / "waiter-ran"
    waiter: subprocess.Popen[str] | None = None
    try:
        wait_for(holder_pid.exists, what="holder CMD")
        status, out, _ = in_process(capsys, ["--url", url, "inspect", name, "--json"])
        assert status == 0
        info = json.loads(out)
        assert info["held"] is True
        assert info["name"] == name
        assert info["key"] == lock_key(name)
        assert info["fencing_counter"] == 3
        assert info["holder"]["fencing_token"] == 3
        assert info["holder"]["pid"] == holder.pid  # the redislock process, not CMD
        assert 0 < info["ttl"] <= 3.0
        status, out, _ = in_process(capsys, ["--url", url, "inspect", name])
        assert status == 0
        assert f"pid {holder.pid}" in out
        assert "fencing token 3" in out

        value = admin.get(lock_key(name))
        status, _, err = in_process(capsys, ["--url", url, "release", name])
        assert status == EXIT_USAGE
        assert "--force" in err
        assert admin.get(lock_key(name)) == value  # untouched

        waiter = start(cli_env, url, "run", name, "--wait", "30", "--", "touch", str(ran))
        wait_for(lambda: admin.exists(lock_key(name) + ":queue") == 1, what="waiter")
        assert not ran.exists()
        released_at = time.monotonic()
        status, out, _ = in_process(capsys, ["--url", url, "release", name, "--force"])
        assert status == 0
        # A Lock with a queued waiter shows as kind "fair" (the queue is FairLock's), and
        # the forced release hands it to the waiter at once.
        assert "released fair lock" in out
        assert f"pid {holder.pid}" in out
        assert "now held by the next waiter" in out
        status, _, err = finish(waiter, timeout=30)
        assert status == 0, err
        assert ran.exists()
        assert time.monotonic() - released_at < 5.0
        # The old holder finds its lease gone at its next renewal and stops its CMD.
        status, _, err = finish(holder, timeout=30)
        assert status == EXIT_LOST, err
        assert pid_gone(int(holder_pid.read_text()))
        assert admin.get(fence_key(lock_key(name))) == "4"
        assert admin.exists(lock_key(name)) == 0
        status, out, _ = in_process(capsys, ["--url", url, "release", name, "--force"])
        assert status == 0
        assert "was not held" in out
    finally:
        for proc in (holder, waiter):
            if proc is not None:
                reap(proc)


def test_list_shows_held_locks_only(
    url: str, admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = in_process(capsys, ["--url", url, "list", "--json"])
    assert status == 0
    assert json.loads(out) == []
    status, out, err = in_process(capsys, ["--url", url, "list"])
    assert (status, out) == (0, "")
    assert "no locks held" in err

    with Lock(admin, "app:free"):
        pass
    admin.set("app:unrelated", "x")
    held = [Lock(admin, n) for n in ("app:a", "app:b", "other:c", "ap*x", "job]1", "job\\2")]
    for lock in held:
        assert lock.acquire(timeout=5)
    try:

        def names(*argv: str) -> list[str]:
            status, out, _ = in_process(capsys, ["--url", url, "list", "--json", *argv])
            assert status == 0
            infos: list[dict[str, Any]] = json.loads(out)
            assert all(i["held"] for i in infos)
            return [i["name"] for i in infos]

        assert names() == ["ap*x", "app:a", "app:b", "job\\2", "job]1", "other:c"]
        assert names("--starts-with", "job]") == ["job]1"]
        assert names("--starts-with", "job\\") == ["job\\2"]
        assert names("--starts-with", "app:") == ["app:a", "app:b"]
        assert names("--starts-with", "ap*") == ["ap*x"]  # glob characters are literal
        assert names("--starts-with", "nothing") == []
        status, out, _ = in_process(capsys, ["--url", url, "list", "--starts-with", "other"])
        assert status == 0
        lines = out.splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("other:c\t")
        assert f"pid {os.getpid()}" in lines[0]
    finally:
        for lock in held:
            lock.release()


# --------------------------------------------------------------------------- demo


def test_demo_exactly_one_worker_draws(
    cli_env: dict[str, str], url: str, admin: redis.Redis
) -> None:
    result = cli(cli_env, url, "demo", "--workers", "4", timeout=90)
    assert result.returncode == 0, result.stderr
    assert "OK: exactly one worker drew" in result.stdout
    row = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+|-)\s+([\d.]+)\s+(.+)$")
    rows = [m.groups() for line in result.stdout.splitlines() if (m := row.match(line))]
    assert len(rows) == 4
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3, 4]
    # a Once per round: only the drawer holds its lock, with a fencing token
    assert [r[2] != "-" for r in rows] == [True, False, False, False]
    assert int(rows[0][2]) >= 1
    assert rows[0][4] == "drew"
    assert sum(1 for r in rows if r[4] == "drew") == 1
    assert sum(1 for r in rows if r[4].startswith("saw result by")) == 3
    assert len({int(r[1]) for r in rows}) == 4  # four worker processes
    winners = re.search(r"^winners: (.+)$", result.stdout, re.MULTILINE)
    assert winners is not None
    assert len(set(winners.group(1).split(", "))) == 10


# --------------------------------------------------------------------------- embedded server


def test_embedded_server(cli_env: dict[str, str], tmp_path: Path) -> None:
    """No --url and no REDIS_URL: the CLI starts and shares the private embedded server."""
    result = cli(cli_env, None, "run", "emb", "--", "true")
    assert result.returncode == 0, result.stderr

    result = cli(cli_env, None, "server", "status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    runtime = Path(cli_env["REDISLOCK_RUNTIME_DIR"])
    assert Path(status["runtime_dir"]) == runtime
    assert status["url"] == f"unix://{runtime / 'redis.sock'}"
    server_pid = int(status["pid"])
    assert not pid_gone(server_pid)

    client = redis.Redis(unix_socket_path=str(runtime / "redis.sock"), decode_responses=True)
    try:
        assert client.get(fence_key(lock_key("emb"))) == "1"  # the first run used it
        pid_file = tmp_path / "bg.pid"
        background = start(cli_env, None, "run", "emb", "--", *py(OBEDIENT, pid_file))
        try:
            wait_for(pid_file.exists, what="background CMD")
            assert client.exists(lock_key("emb")) == 1
            result = cli(cli_env, None, "run", "emb", "--no-wait", "--", "true")
            assert result.returncode == EXIT_BUSY, result.stderr
            background.send_signal(signal.SIGTERM)  # forwarded: CMD ends, run releases
            code, _, err = finish(background, timeout=30)
            assert code == 128 + signal.SIGTERM, err
        finally:
            reap(background)
        assert client.exists(lock_key("emb")) == 0
        result = cli(cli_env, None, "run", "emb", "--no-wait", "--", "true")
        assert result.returncode == 0, result.stderr
        assert client.get(fence_key(lock_key("emb"))) == "3"
    finally:
        client.close()

    result = cli(cli_env, None, "server", "stop")
    assert result.returncode == 0, result.stderr
    assert "stopped" in result.stdout
    wait_for(lambda: pid_gone(server_pid), timeout=10, what="server exit")
    result = cli(cli_env, None, "server", "status", "--json")
    assert result.returncode == 3
    assert json.loads(result.stdout) is None


def test_run_on_a_terminal_lets_the_command_read_it(
    cli_env: dict[str, str], url: str, admin: redis.Redis
) -> None:
    """On a terminal the command stays in the foreground group: reading the terminal works
    (in its own group it would be stopped by SIGTTIN, and `run` would hold the lock forever)."""
    import pty
    import select
    import warnings

    with warnings.catch_warnings():  # the child execs at once, so fork with threads is fine
        warnings.simplefilter("ignore", DeprecationWarning)
        pid, master = pty.fork()
    if pid == 0:  # the child: a session leader whose controlling terminal is the pty
        try:
            os.execve(sys.executable, cli_cmd(url, "run", "tty", "--", "head", "-n1"), cli_env)
        finally:
            os._exit(99)
    try:
        wait_for(lambda: admin.exists(lock_key("tty")) == 1, what="lock held")
        os.write(master, b"hello from the terminal\n")
        deadline = time.monotonic() + 15
        status = None
        output = b""
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if select.select([master], [], [], 0.02)[0]:
                with contextlib.suppress(OSError):  # EIO once the child side is closed
                    output += os.read(master, 4096)
            if done:
                break
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"run on a terminal did not finish; output so far: {output!r}")
        assert status is not None
        assert os.waitstatus_to_exitcode(status) == 0
        assert output.count(b"hello from the terminal") >= 2  # the echo, then head's copy
        assert admin.exists(lock_key("tty")) == 0
    finally:
        os.close(master)


@pytest.mark.one_server  # waits out a lease: the same code on every server
def test_lost_lease_stops_the_whole_process_group(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    """CMD (a shell) exits on SIGTERM, but a grandchild ignores it: the grandchild must be
    gone too before `run` reports the loss."""
    pidfile = tmp_path / "grandchild.pid"
    script = f"sh -c 'trap \"\" TERM; echo $$ > {pidfile}; sleep 30' & wait"
    proc = start(cli_env, url, "run", "grp", "--ttl", "1", "--grace", "1", "--", "sh", "-c", script)
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", what="grandchild")
    grandchild = int(pidfile.read_text())
    admin.delete(lock_key("grp"))
    status, _, err = finish(proc, timeout=20)
    assert status == EXIT_LOST, err
    assert pid_gone(grandchild), "a process of the command's group outlived the loss"


@pytest.mark.one_server  # waits out a lease: the same code on every server
def test_release_failure_is_not_reported_as_success(
    cli_env: dict[str, str], spawn_server: Callable[..., RedisProcess]
) -> None:
    """The command stops Redis itself: the release cannot happen, and `run` says so (69)."""
    server = spawn_server()
    assert server.socket_path is not None
    stop = py(
        "import redis, sys; redis.Redis(unix_socket_path=sys.argv[1]).shutdown(nosave=True)",
        str(server.socket_path),
    )
    result = cli(cli_env, server.url, "run", "gone", "--", *stop)
    assert result.returncode == 69, result.stderr
    assert "release" in result.stderr


def test_a_lease_lost_to_a_dead_redis_is_told_in_plain_words(
    cli_env: dict[str, str], spawn_server: Callable[..., RedisProcess]
) -> None:
    """Redis dies while the command runs: the renewals get no answer (redis-py's default
    client keeps retrying), `run` stops the command (79) and says what happened, in one line
    that names --ttl, not the library's TimeoutError."""
    server = spawn_server()
    admin = redis.Redis(**server.client_kwargs())
    proc = start(cli_env, server.url, "run", "dead", "--ttl", "2", "--", "sleep", "30")
    try:
        wait_for(lambda: admin.exists(lock_key("dead")) == 1, what="the hold")
        admin.close()
        server.kill()
        status, _, err = finish(proc, timeout=30)
    finally:
        reap(proc)
    assert status == EXIT_LOST, err
    assert err.count("was lost") == 1, err
    # Mostly a renewal still retrying when the lease ran out ("Redis did not answer");
    # when one had just failed, its ConnectionError is named instead.
    assert "could not renew within the --ttl 2 s lease: " in err, err
    assert "TimeoutError" not in err, err
