# SPDX-License-Identifier: MIT
"""`redislock run` under an interactive shell's job control (Ctrl-Z, fg), in a real pty."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from redislock.server import RedisProcess
from tests.support import wait_for

SRC = Path(__file__).resolve().parent.parent / "src"


class Shell:
    """An interactive bash on a pseudo-terminal."""

    def __init__(self, env: dict[str, str]) -> None:
        with warnings.catch_warnings():  # the child execs at once
            warnings.simplefilter("ignore", DeprecationWarning)
            pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
            finally:
                os._exit(99)
        self.pid, self.fd = pid, fd
        self.read(1.0)

    def read(self, seconds: float) -> str:
        end = time.monotonic() + seconds
        out = b""
        while (left := end - time.monotonic()) > 0:
            if select.select([self.fd], [], [], left)[0]:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                out += data
        return out.decode(errors="replace")

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def run(self, line: str, seconds: float = 2.0) -> str:
        self.send(line.encode() + b"\n")
        return self.read(seconds)

    def until(self, marker: str, seconds: float) -> str:
        """Read until ``marker`` shows up (or ``seconds`` pass); returns what was read."""
        seen = ""
        end = time.monotonic() + seconds
        while marker not in seen and time.monotonic() < end:
            seen += self.read(0.2)
        return seen

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def shell(redis_server: RedisProcess) -> Iterator[Shell]:
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "PS1": "PROMPT$ ",
        "TERM": "dumb",
        "REDIS_URL": redis_server.url,
    }
    sh = Shell(env)
    yield sh
    sh.close()


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def settled(path: Path, quiet: float = 0.5, timeout: float = 10.0) -> int:
    """The line count of ``path`` once it stopped growing for ``quiet`` seconds (CMD writes
    every 0.1 s while it runs); fails if it still grows after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    count = lines(path)
    while time.monotonic() < end:
        time.sleep(quiet)
        now = lines(path)
        if now == count:
            return count
        count = now
    raise AssertionError(f"{path} still grows after {timeout} s: CMD was not stopped")


def test_ctrl_z_stops_the_command_too_and_fg_checks_the_lease(
    shell: Shell, admin: redis.Redis, tmp_path: Path
) -> None:
    """stdin is not the terminal, so CMD has its own group: Ctrl-Z reaches only `run`,
    which must stop CMD as well. Stopped past its lease, it must not let CMD run on."""
    ticks = tmp_path / "ticks"
    cmd = f"while :; do echo t >> {ticks}; sleep 0.1; done"
    shell.run(f"{sys.executable} -m redislock run z --ttl 1 -- sh -c '{cmd}' < /dev/null", 0.5)
    wait_for(lambda: lines(ticks) > 0, timeout=30)  # a loaded machine starts Python slowly
    shell.send(b"\x1a")  # Ctrl-Z
    shell.until("PROMPT$", 10.0)
    stopped_at = settled(ticks)
    time.sleep(2.0)  # past the 1 s lease
    assert lines(ticks) == stopped_at, "CMD kept running while `run` was stopped"
    assert admin.exists("redislock:{z}") == 0  # the lease ran out while stopped
    out = shell.run("fg; echo status=$?", 6.0)
    out += shell.until("status=", 4.0)
    assert "status=79" in out
    after = lines(ticks)
    time.sleep(0.5)
    assert lines(ticks) == after, "CMD still runs after the lease was found lost"


def test_ctrl_z_on_a_terminal_returns_the_prompt_and_fg_resumes(
    shell: Shell, admin: redis.Redis
) -> None:
    """CMD owns the terminal: Ctrl-Z stops it, `run` follows, the shell gets the prompt back;
    `fg` gives CMD the terminal again."""
    reader = "import sys; print('got', sys.stdin.readline().strip())"
    shell.run(f'{sys.executable} -m redislock run t --ttl 30 -- {sys.executable} -c "{reader}"')
    wait_for(lambda: admin.exists("redislock:{t}") == 1, timeout=30)
    shell.send(b"\x1a")
    out = shell.until("PROMPT$", 10.0)
    assert "PROMPT$" in out, f"no prompt after Ctrl-Z: {out!r}"
    assert "alive" in shell.run("echo alive", 1.0)
    assert admin.exists("redislock:{t}") == 1  # still held: the 30 s lease outlasts the stop
    shell.run("fg", 1.5)
    shell.send(b"hello\n")
    out = shell.until("got hello", 5.0)
    assert "got hello" in out
    shell.send(b"echo status=$?\n")
    out = shell.until("status=", 10.0)
    out += shell.read(0.3)
    assert "status=0" in out
    wait_for(lambda: admin.exists("redislock:{t}") == 0)
