# SPDX-License-Identifier: MIT
"""``redislock run`` never outlives itself: if ``redislock`` dies by any signal, SIGKILL
included, CMD's whole process group is gone before the lease could pass to another
holder (a guard process follows a pipe only ``redislock`` holds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from redislock.server import RedisProcess

TTL = 5.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of ours is dead too
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


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
