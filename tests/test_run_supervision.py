# SPDX-License-Identifier: MIT
"""``redislock run`` never outlives itself: if ``redislock`` dies by any signal, SIGKILL
included, CMD's whole process group is gone before the lease could pass to another
holder (a guard process follows a pipe only ``redislock`` holds)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from redislock._core.keys import LockKeys
from redislock.cli.run import _check_runnable
from redislock.server import RedisProcess
from redislock.server.embedded import pid_alive as alive

TTL = 5.0


def wait_for_file(path: Path, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def run_cli(url: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "redislock", "--url", url, "run", *args], start_new_session=True
    )


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV], ids=["SIGKILL", "SIGSEGV"])
def test_killed_redislock_takes_its_command_and_grandchildren_along(
    redis_server: RedisProcess, tmp_path: Path, sig: int
) -> None:
    url = f"unix://{redis_server.client_kwargs()['unix_socket_path']}"
    child, grandchild = tmp_path / "child.pid", tmp_path / "grandchild.pid"
    script = f"sleep 60 & echo $! > {grandchild}; echo $$ > {child}; wait"
    first = run_cli(url, "sv", "--ttl", str(TTL), "--", "sh", "-c", script)
    pids: list[int] = []
    try:
        pids = [wait_for_file(child), wait_for_file(grandchild)]
        assert all(alive(p) for p in pids)
        os.kill(first.pid, sig)
        killed = time.monotonic()
        first.wait(10)
        while any(alive(p) for p in pids) and time.monotonic() - killed < TTL:
            time.sleep(0.01)
        gone_after = time.monotonic() - killed
        assert not any(alive(p) for p in pids), "CMD outlived redislock"
        assert gone_after < 1.0  # long before the lease (TTL s) could pass to anyone
        # The next run gets the lock once the lease ran out, and nothing of the first runs.
        second_pid = tmp_path / "second.pid"
        second = run_cli(url, "sv", "--wait", "30", "--", "sh", "-c", f"echo $$ > {second_pid}")
        assert second.wait(30) == 0
        assert not any(alive(p) for p in pids)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        for pid in pids:  # on failure: leave no orphan behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def test_redislock_killed_as_it_starts_cmd_leaves_no_cmd_running(
    redis_server: RedisProcess, tmp_path: Path
) -> None:
    """SIGKILL the moment CMD's first process exists (redislock's second child; the guard
    is the first), before redislock could tell the guard its group: CMD must not run
    unguarded. It waits for redislock's go-ahead, given only after the guard was told, so
    it either never runs or the guard kills it (CI run 7, with a CPU hog: CMD ran while
    its starved supervisor had not yet told the guard, and outlived it)."""
    url = f"unix://{redis_server.client_kwargs()['unix_socket_path']}"
    ran = tmp_path / "ran"
    script = f"echo $$ >> {ran}; sleep 60"
    for attempt in range(6):
        proc = run_cli(url, f"starting{attempt}", "--", "sh", "-c", script)
        try:
            deadline = time.monotonic() + 20
            while len(children(proc.pid)) < 2:
                assert proc.poll() is None, "redislock ended before starting CMD"
                assert time.monotonic() < deadline, "CMD was never started"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            time.sleep(0.5)  # time for an unguarded CMD to have written its pid
            pids = [int(p) for p in ran.read_text().split()] if ran.exists() else []
            assert not [p for p in pids if alive(p)], f"CMD outlived redislock ({attempt=})"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pid in [int(p) for p in ran.read_text().split()] if ran.exists() else []:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)


GO_AHEAD_HARNESS = """
import fcntl, os, subprocess, sys, time
from redislock.cli.run import _after_go_ahead
lowest, go, ran = int(sys.argv[1]), sys.argv[2] == "go", sys.argv[3]
read_end, write_end = os.pipe()
fd = fcntl.fcntl(read_end, fcntl.F_DUPFD_CLOEXEC, lowest)
os.close(read_end)
argv = _after_go_ahead(fd, ["sh", "-c", f"echo yes > {ran}", "x"])
child = subprocess.Popen(argv, pass_fds=(fd,))
os.close(fd)
time.sleep(0.2)
before = os.path.exists(ran)
if go:
    os.write(write_end, b"go\\n")
os.close(write_end)
print(fd, before, child.wait(10), os.path.exists(ran))
"""


@pytest.mark.parametrize("lowest", [3, 20], ids=["sh", "python"])
@pytest.mark.parametrize("go", [True, False], ids=["go", "eof"])
def test_cmd_waits_for_the_go_ahead_and_never_runs_without_it(
    tmp_path: Path, lowest: int, go: bool
) -> None:
    """CMD's first process execs CMD only after a line arrives on the go-ahead pipe (on
    a descriptor 3-9 through ``sh``, above 9 through Python); at end-of-file it exits 125.
    Run in a new process, whose descriptors 3-9 are free."""
    ran = tmp_path / "ran"
    out = subprocess.run(
        [sys.executable, "-c", GO_AHEAD_HARNESS, str(lowest), "go" if go else "eof", str(ran)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.split()
    fd, before, status, after = int(out[0]), out[1], int(out[2]), out[3]
    assert (fd <= 9) is (lowest == 3)
    assert before == "False"  # nothing of CMD ran before the go-ahead
    assert (status, after) == ((0, "True") if go else (125, "False"))


def test_a_command_that_cannot_run_is_found_out_before_anything_starts(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("echo hi\n")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    with pytest.raises(FileNotFoundError):
        _check_runnable("no-such-command-here", env)
    with pytest.raises(FileNotFoundError):
        _check_runnable(str(tmp_path / "missing"), env)
    with pytest.raises(PermissionError):
        _check_runnable(str(plain), env)
    with pytest.raises(PermissionError):
        _check_runnable("plain", env)  # found on PATH, not executable
    with pytest.raises(PermissionError):
        _check_runnable(str(tmp_path), env)  # a directory
    _check_runnable("sh", env)
    plain.chmod(0o755)
    _check_runnable("plain", env)


def test_a_normal_exit_dismisses_the_guard_and_leaves_background_jobs_alone(
    redis_server: RedisProcess, tmp_path: Path
) -> None:
    url = f"unix://{redis_server.client_kwargs()['unix_socket_path']}"
    bg = tmp_path / "bg.pid"
    # CMD exits at once, leaving a background job behind (as before: not ours to kill).
    proc = run_cli(url, "sv2", "--", "sh", "-c", f"sleep 30 & echo $! > {bg}")
    assert proc.wait(30) == 0
    pid = wait_for_file(bg)
    try:
        time.sleep(0.3)
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_crash_between_the_commands_exit_and_the_release_frees_the_lock_one_lease_later(
    redis_server: RedisProcess, tmp_path: Path
) -> None:
    """A crash point: CMD has exited, ``redislock`` has not released yet (its connection is
    blackholed, so the release cannot reach Redis) and is SIGKILLed there. The lock stays
    with the dead holder for at most one lease (TTL seconds), and no longer: the next run
    gets it, with a larger fencing token, and the first CMD never ran twice."""
    from redislock.testing.proxy import FaultProxy

    direct = f"unix://{redis_server.client_kwargs()['unix_socket_path']}"
    admin = redis.Redis(**redis_server.client_kwargs(), decode_responses=True)
    runs, go, shell = tmp_path / "runs", tmp_path / "go", tmp_path / "shell.pid"
    script = f"echo $$ > {shell}; echo x >> {runs}; while [ ! -e {go} ]; do sleep 0.01; done"
    assert redis_server.socket_path is not None
    with FaultProxy(redis_server.socket_path) as fp:
        url = f"redis://127.0.0.1:{fp.port}"
        first = run_cli(url, "crash", "--ttl", str(TTL), "--", "sh", "-c", script)
        try:
            cmd = wait_for_file(shell)
            wait_for_file_lines(runs, 1)
            key = LockKeys.for_name("crash").lock
            token_before = admin.get(key)
            fence_before = int(admin.get(LockKeys.for_name("crash").fence) or 0)
            assert token_before, "the first run holds the lock"
            fp.set_fault("blackhole")  # nothing redislock sends reaches Redis any more
            go.touch()  # CMD exits; redislock now tries to release
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and alive(cmd):
                time.sleep(0.01)
            assert not alive(cmd)
            time.sleep(0.2)  # inside the (blackholed) release
            assert first.poll() is None, "redislock must still be releasing"
            os.kill(first.pid, signal.SIGKILL)
            killed = time.monotonic()
            first.wait(10)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
        assert admin.get(key) == token_before  # not released: the crash came first
        assert 0 < admin.pttl(key) <= TTL * 1000
        go.unlink()
        second = run_cli(direct, "crash", "--wait", "30", "--", "sh", "-c", f"echo y >> {runs}")
        assert second.wait(30) == 0
        waited = time.monotonic() - killed
    assert waited <= TTL + 1.0  # the dead holder's lease ran out, no later
    assert runs.read_text().split() == ["x", "y"]  # the first CMD ran once
    assert int(admin.get(LockKeys.for_name("crash").fence) or 0) > fence_before
    assert admin.exists(key) == 0
    admin.close()


def wait_for_file_lines(path: Path, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never had {n} lines")


@pytest.mark.parametrize("verb", ["run", "elect", "once"])
def test_a_stopped_redislock_has_its_command_stopped_before_the_lease_ends(
    redis_server: RedisProcess, admin: redis.Redis, tmp_path: Path, verb: str
) -> None:
    """SIGSTOP of redislock alone (CMD's group runs on): no renewal goes out, and another
    host may take the name once the lease ends. The guard hears no heartbeat either, and
    stops CMD before that; on SIGCONT redislock reports the loss (79)."""
    url = f"unix://{redis_server.client_kwargs()['unix_socket_path']}"
    pid_file, ticks = tmp_path / "cmd.pid", tmp_path / "ticks"
    script = f"echo $$ > {pid_file}; while :; do echo t >> {ticks}; sleep 0.05; done"
    extra = ["--period", "3600"] if verb == "once" else []
    command = [sys.executable, "-m", "redislock", "--url", url, verb, "st", "--ttl", str(TTL)]
    first = subprocess.Popen(
        [*command, *extra, "--", "sh", "-c", script],
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
    )
    cmd = 0
    try:
        cmd = wait_for_file(pid_file, timeout=30)
        key = LockKeys.for_name("st").lock
        wait_for_file_lines(ticks, 3, timeout=30)
        os.kill(first.pid, signal.SIGSTOP)  # redislock alone: CMD's group runs on
        sent = time.monotonic()
        ttl_ms = int(admin.pttl(key))
        assert ttl_ms > 0
        key_ends = sent + ttl_ms / 1000.0  # no earlier than this (the PTTL was read later)
        while alive(cmd) and time.monotonic() < key_ends + 5.0:
            time.sleep(0.01)
        gone = time.monotonic()
        assert not alive(cmd), "CMD ran on after the lease ended"
        assert gone < key_ends, f"CMD was stopped {gone - key_ends:.3f} s after the lease ended"
        assert len(ticks.read_text().split()) > 3  # it did run on while redislock was stopped
        os.kill(first.pid, signal.SIGCONT)
        _, err = first.communicate(timeout=30)
        assert first.returncode == 79, err
        assert "guard stopped the command" in err
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(first.pid, signal.SIGCONT)
        if first.poll() is None:
            first.kill()
            first.wait()
        if cmd and alive(cmd):
            os.kill(cmd, signal.SIGKILL)


def test_the_guard_and_run_agree_on_the_guards_exit_status() -> None:
    from redislock.cli import _guard
    from redislock.cli.run import GUARD_FIRED

    assert _guard.FIRED == GUARD_FIRED
