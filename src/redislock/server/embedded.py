# SPDX-License-Identifier: MIT
"""The embedded server that every ``redislock`` CLI process of one user shares.

:func:`ensure_embedded`, :func:`embedded_status` and :func:`stop_embedded` manage a
daemonized ``redis-server`` listening only on a Unix socket in a private runtime directory
(see :func:`runtime_dir`), with the append-only file enabled so that fencing counters
survive a stop/start. It outlives the process that started it. Starting and stopping are
serialized between processes by an exclusive ``flock`` on ``<runtime_dir>/server.lock``.

The binary is pinned: each start records in ``<runtime_dir>/server.json`` which
``redis-server`` started it (path and ``--version`` line), and later starts use that binary
whatever ``PATH`` finds, unless ``$REDISLOCK_REDIS_SERVER`` names another. Redis 7 and Valkey
keep the append-only data in ``appendonlydir/`` (multi-part AOF), which Redis 6 does not
read: a start that would run such a binary over such data is refused, since the fencing
counters would restart from zero.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import redis

from redislock.errors import ServerError
from redislock.server.process import (
    ENV_SERVER,
    POLL_INTERVAL,
    check_socket_path,
    find_redis_server,
    is_executable_file,
    log_tail,
    probe,
    probe_client,
)

__all__ = [
    "ENV_RUNTIME_DIR",
    "default_runtime_dir",
    "embedded_status",
    "embedded_url",
    "ensure_embedded",
    "pid_alive",
    "recorded_binary",
    "runtime_dir",
    "stop_embedded",
]

#: Environment variable overriding the embedded server's runtime directory.
ENV_RUNTIME_DIR = "REDISLOCK_RUNTIME_DIR"

_EMBEDDED_SOCKET = "redis.sock"
_EMBEDDED_PIDFILE = "redis.pid"
_EMBEDDED_LOG = "redis.log"
_EMBEDDED_LOCK = "server.lock"
_EMBEDDED_RECORD = "server.json"
_MULTIPART_AOF_DIR = "appendonlydir"

#: ``redis-server --version``: "Redis server v=7.0.15 sha=...", "Valkey server v=9.1.2 ...".
_VERSION_LINE = re.compile(r"^(?P<product>\S+) server v=(?P<version>(?P<major>\d+)\.[\d.]+)")


def default_runtime_dir() -> Path:
    """``/tmp/redislock-<uid>``: the runtime directory when ``$REDISLOCK_RUNTIME_DIR`` is
    not set, whatever the rest of the environment (the path is neither created nor
    checked here; :func:`runtime_dir` does that)."""
    return Path("/tmp") / f"redislock-{os.getuid()}"


def embedded_url() -> str:
    """The URL the embedded server answers on, ``unix://<runtime_dir>/redis.sock``, without
    starting it.

    Raises:
        ServerError: the runtime directory is unsafe (see :func:`runtime_dir`).
    """
    return f"unix://{runtime_dir() / _EMBEDDED_SOCKET}"


def runtime_dir() -> Path:
    """Return the private directory holding the embedded server's socket, log and data.

    ``$REDISLOCK_RUNTIME_DIR`` if set, else ``/tmp/redislock-<uid>``. ``XDG_RUNTIME_DIR``
    is deliberately not consulted: cron and other minimal environments lack it, and the
    same user must reach the same server from cron as from a login shell. The
    directory is created with mode 0700 if missing, then checked: it must be a real
    directory (not a symlink), owned by the current user, with no group or other
    permission bits. Otherwise another user could replace the socket with their own and
    hand out fake locks.

    Returns:
        The absolute path of the directory.

    Raises:
        ServerError: the directory is unsafe (symlink, not a directory, wrong owner, group
            or other permissions), cannot be created, or is so long that the socket path
            would exceed the AF_UNIX limit.
    """
    override = os.environ.get(ENV_RUNTIME_DIR)
    path = Path(os.path.abspath(override)) if override else default_runtime_dir()

    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        pass  # e.g. a symlink to nothing or a file: reported by the checks below
    except OSError as exc:
        raise ServerError(f"cannot create runtime directory {path}: {exc}") from exc
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ServerError(f"cannot inspect runtime directory {path}: {exc}") from exc

    hijack = "another user could replace the embedded server's socket"
    if stat.S_ISLNK(st.st_mode):
        raise ServerError(
            f"runtime directory {path} is a symlink; refusing to use it ({hijack}). "
            f"Remove it or set ${ENV_RUNTIME_DIR} to a private directory"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise ServerError(f"runtime directory {path} exists but is not a directory")
    if st.st_uid != os.getuid():
        raise ServerError(
            f"runtime directory {path} is owned by uid {st.st_uid}, not by the current user "
            f"(uid {os.getuid()}); refusing to use it ({hijack})"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise ServerError(
            f"runtime directory {path} has mode {mode:04o}, which gives access to other "
            f"users; refusing to use it ({hijack}). Run `chmod 700 {path}`"
        )
    check_socket_path(path / _EMBEDDED_SOCKET)
    return path


@contextlib.contextmanager
def _locked(directory: Path, timeout: float) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<directory>/server.lock``.

    Raises:
        ServerError: the lock was not obtained within ``timeout`` seconds.
    """
    lock_path = directory / _EMBEDDED_LOCK
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(lock_path, flags, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"timed out after {timeout:g} s waiting for {lock_path}, held by another "
                    f"process starting or stopping the embedded server"
                )
            time.sleep(POLL_INTERVAL)
        yield
    finally:
        os.close(fd)  # also releases the lock


def _embedded_kwargs(directory: Path) -> dict[str, Any]:
    return {"unix_socket_path": str(directory / _EMBEDDED_SOCKET)}


def _read_pidfile(directory: Path) -> int | None:
    try:
        text = (directory / _EMBEDDED_PIDFILE).read_text().strip()
        pid = int(text)
    except (OSError, ValueError):
        return None
    return pid if pid > 0 else None


def pid_alive(pid: int) -> bool:
    """True if process ``pid`` exists and is not a zombie (also when it belongs to another
    user); reads ``/proc/<pid>/stat`` where there is one."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS), or it exited just now
    state = stat_line.rpartition(")")[2].split()
    return not (state and state[0] in {"Z", "X"})


def _is_our_server(pid: int, directory: Path) -> bool:
    """Check that ``pid`` (read from our pidfile) is still our embedded server.

    Guards against pid reuse before signalling it. On Linux the test is that its working
    directory is ``directory`` (redis-server chdirs to ``--dir``, which is private to us);
    elsewhere that ``ps`` names it redis-server.
    """
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self").is_dir():
        try:
            return os.readlink(proc / "cwd") == os.path.realpath(directory)
        except OSError:
            return False
    try:
        out = subprocess.run(
            ["ps", "-o", "comm=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5.0,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "redis-server" in out


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL)
    return True


def _terminate(pid: int, timeout: float) -> None:
    """SIGTERM (and SIGCONT) ``pid``, then SIGKILL it if it is still alive after ``timeout``."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGCONT)
    if not _wait_exit(pid, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_exit(pid, 2.0)


def _remove_stale(directory: Path, timeout: float) -> None:
    """Remove what a dead embedded server left behind; end it if it is hung."""
    pid = _read_pidfile(directory)
    if pid is not None and pid_alive(pid) and _is_our_server(pid, directory):
        _terminate(pid, timeout)
    (directory / _EMBEDDED_SOCKET).unlink(missing_ok=True)
    (directory / _EMBEDDED_PIDFILE).unlink(missing_ok=True)


def _embedded_command(binary: str, directory: Path) -> list[str]:
    return [
        binary,
        "--daemonize",
        "yes",
        "--pidfile",
        str(directory / _EMBEDDED_PIDFILE),
        "--port",
        "0",
        "--unixsocket",
        str(directory / _EMBEDDED_SOCKET),
        "--unixsocketperm",
        "700",
        "--dir",
        str(directory),
        "--logfile",
        str(directory / _EMBEDDED_LOG),
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
    ]


def _binary_version(binary: str, timeout: float) -> str | None:
    """The first line of ``binary --version``, or None if it fails or prints nothing."""
    try:
        result = subprocess.run(
            [binary, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.strip().splitlines()
    return lines[0].strip() if result.returncode == 0 and lines else None


def _short_version(version: str | None) -> str:
    """``Redis 7.0.15`` from a ``--version`` line; the line itself if it does not parse."""
    if version is None:
        return "version unknown"
    match = _VERSION_LINE.match(version)
    return f"{match['product']} {match['version']}" if match else version


def _reads_multipart_aof(version: str | None) -> bool | None:
    """Whether the server of this ``--version`` line reads (and writes) the multi-part
    append-only file in ``appendonlydir/``: Redis 7 and later, and every Valkey; None when
    the line is not recognized."""
    match = _VERSION_LINE.match(version or "")
    if match is None:
        return None
    product = match["product"].lower()
    if product == "valkey":
        return True
    if product == "redis":
        return int(match["major"]) >= 7
    return None


def recorded_binary() -> dict[str, str] | None:
    """Which ``redis-server`` last started the embedded server, from
    ``<runtime_dir>/server.json``.

    Returns:
        ``None`` if there is no record (or it is unreadable), else a dict with ``binary``
        (str: the absolute path) and ``version`` (str: the first line of its ``--version``,
        or ``""`` if that failed).

    Raises:
        ServerError: the runtime directory is unsafe (see :func:`runtime_dir`).
    """
    return _read_record(runtime_dir())


def _read_record(directory: Path) -> dict[str, str] | None:
    try:
        data = json.loads((directory / _EMBEDDED_RECORD).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("binary"), str):
        return None
    version = data.get("version")
    return {"binary": data["binary"], "version": version if isinstance(version, str) else ""}


def _write_record(directory: Path, binary: str, version: str | None) -> None:
    """Replace ``server.json`` atomically (a temporary file renamed over it)."""
    record = {"binary": binary, "version": version or ""}
    tmp = directory / f".{_EMBEDDED_RECORD}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, directory / _EMBEDDED_RECORD)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ServerError(f"cannot write {directory / _EMBEDDED_RECORD}: {exc}") from exc


def _choose_binary(directory: Path, timeout: float) -> tuple[str, str | None]:
    """The binary to start the embedded server with, and its ``--version`` line.

    ``$REDISLOCK_REDIS_SERVER`` if set; else the recorded binary if it is still an
    executable file; else :func:`find_redis_server`'s. Then refuse a binary that cannot read
    the data there (see :func:`_check_readable`).

    Raises:
        ServerError: the binary cannot read the data in ``directory``.
        ServerNotFoundError: no binary was found.
    """
    record = _read_record(directory)
    binary: str | None = None
    if not os.environ.get(ENV_SERVER) and record is not None:
        recorded = record["binary"]
        if os.path.isabs(recorded) and is_executable_file(recorded):
            binary = recorded
    if binary is None:
        binary = find_redis_server()
    version = _binary_version(binary, timeout)
    _check_readable(directory, binary, version, record)
    return binary, version


def _check_readable(
    directory: Path, binary: str, version: str | None, record: dict[str, str] | None
) -> None:
    """Raise if the data in ``directory`` is a multi-part append-only file (its
    ``appendonlydir/`` exists, or the record names a Redis >= 7 or Valkey binary) and
    ``binary`` (``version``) is not known to read it: it would start with no data, and the
    fencing counters would restart.

    Raises:
        ServerError: the message names both binaries and versions, and what to do.
    """
    aof_dir = directory / _MULTIPART_AOF_DIR
    recorded_multipart = record is not None and _reads_multipart_aof(record["version"]) is True
    if not (aof_dir.is_dir() or recorded_multipart):
        return
    if _reads_multipart_aof(version) is True:
        return
    if record is not None and recorded_multipart:
        writer = f"{record['binary']} ({_short_version(record['version'])})"
        if not is_executable_file(record["binary"]):
            writer += ", which is no longer an executable file"
        fix = f"set {ENV_SERVER}={record['binary']}"
    else:
        writer = "a Redis >= 7 or Valkey server"
        fix = f"set {ENV_SERVER} to a Redis >= 7 or Valkey redis-server binary"
    raise ServerError(
        f"refusing to start the embedded server in {directory} with {binary} "
        f"({_short_version(version)}): its data was written by {writer} as a multi-part "
        f"append-only file ({aof_dir}), which this binary does not read (Redis before 7 "
        f"reads only appendonly.aof). It would start empty and the fencing counters would "
        f"restart, handing out tokens that go backwards. To keep the counters, {fix}; or run "
        f"`redislock server stop` and remove {directory} to start afresh (losing the counters)"
    )


def ensure_embedded(timeout: float = 10.0) -> str:
    """Return the URL of the running embedded server, starting it if needed.

    Safe to call from many processes and threads at once: the check-and-start runs under
    an exclusive ``flock`` on ``<runtime_dir>/server.lock``, so exactly one server is
    started. A server that answers PING on ``<runtime_dir>/redis.sock`` is reused; one
    still loading its append-only file is waited for. Otherwise a stale socket and pidfile
    are removed (a hung server named by the pidfile is terminated) and a new daemonized
    ``redis-server`` is started. It outlives the calling process; stop it with
    :func:`stop_embedded`.

    The binary is ``$REDISLOCK_REDIS_SERVER`` if set, else the one that started the server
    last time (recorded in ``<runtime_dir>/server.json``) if it is still an executable file,
    else :func:`~redislock.server.find_redis_server`'s. Each start records its binary.

    Args:
        timeout: how long to wait for the lock and for the server to answer, in seconds
            (each wait has its own budget).

    Returns:
        ``unix://<runtime_dir>/redis.sock``.

    Raises:
        ServerError: the runtime directory is unsafe, the lock was not obtained in time,
            the binary cannot read the data there (a Redis before 7 over the multi-part
            append-only file of a Redis >= 7 or Valkey: nothing is started, the message says
            which binaries and what to do), or the server failed to start or answer within
            ``timeout`` (the message includes the tail of ``<runtime_dir>/redis.log``).
        ServerNotFoundError: no ``redis-server`` binary was found.
    """
    directory = runtime_dir()
    sock = directory / _EMBEDDED_SOCKET
    url = f"unix://{sock}"
    kwargs = _embedded_kwargs(directory)
    log_path = directory / _EMBEDDED_LOG
    with _locked(directory, timeout):
        state = probe(kwargs)
        if state == "ready":
            return url
        if state == "down":
            binary, version = _choose_binary(directory, timeout)
            _remove_stale(directory, timeout=5.0)
            with log_path.open("ab") as log:
                try:
                    result = subprocess.run(
                        _embedded_command(binary, directory),
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        cwd=directory,
                        close_fds=True,
                        timeout=timeout,
                        check=False,
                    )
                except subprocess.TimeoutExpired as exc:
                    raise ServerError(
                        f"redis-server ({binary}) did not daemonize within {timeout:g} s; "
                        f"last lines of {log_path}:\n{log_tail(log_path)}"
                    ) from exc
            if result.returncode != 0:
                raise ServerError(
                    f"redis-server ({binary}) failed to start (exit status "
                    f"{result.returncode}); last lines of {log_path}:\n{log_tail(log_path)}"
                )
            _write_record(directory, binary, version)
        deadline = time.monotonic() + timeout
        while True:
            state = probe(kwargs)
            if state == "ready":
                return url
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_INTERVAL)
        if state == "down":
            pid = _read_pidfile(directory)
            if pid is not None and pid_alive(pid) and _is_our_server(pid, directory):
                _terminate(pid, 2.0)
        raise ServerError(
            f"the embedded redis-server at {url} did not answer PING within {timeout:g} s"
            + (" (it is still loading its data; try again later)" if state == "loading" else "")
            + f"; last lines of {log_path}:\n{log_tail(log_path)}"
        )


def embedded_status() -> dict[str, Any] | None:
    """Describe the embedded server, if one is running.

    Returns:
        ``None`` if no server answers on the runtime directory's socket, else a dict with
        ``url`` (str), ``pid`` (int), ``redis_version`` (str), ``uptime_s`` (int, seconds),
        ``binary`` (str or ``None``: the server's executable, as reported by INFO) and
        ``runtime_dir`` (str).

    Raises:
        ServerError: the runtime directory is unsafe (see :func:`runtime_dir`).
    """
    directory = runtime_dir()
    sock = directory / _EMBEDDED_SOCKET
    if not sock.exists():
        return None
    try:
        with probe_client(_embedded_kwargs(directory), timeout=2.0) as client:
            info = cast(dict[str, Any], client.info("server"))
    except (redis.RedisError, OSError):
        return None
    executable = info.get("executable")
    return {
        "url": f"unix://{sock}",
        "pid": int(info["process_id"]),
        "redis_version": str(info["redis_version"]),
        "uptime_s": int(info["uptime_in_seconds"]),
        "binary": str(executable) if executable else None,
        "runtime_dir": str(directory),
    }


def stop_embedded(timeout: float = 5.0) -> bool:
    """Stop the embedded server.

    Sends SHUTDOWN (the append-only file is flushed first) and waits for the process to
    exit; a server that does not answer but is named by the pidfile, or that does not
    exit in time, gets SIGTERM and then SIGKILL. The socket and pidfile are removed.

    Args:
        timeout: how long to wait for the server to exit (and, separately, for the lock),
            in seconds.

    Returns:
        True if a server was running (answering, loading, or hung with a live pid).

    Raises:
        ServerError: the runtime directory is unsafe, or the lock was not obtained within
            ``timeout``.
    """
    directory = runtime_dir()
    kwargs = _embedded_kwargs(directory)
    with _locked(directory, timeout):
        pid: int | None = None
        running = False
        try:
            with probe_client(kwargs, timeout=min(timeout, 2.0)) as client:
                info = cast(dict[str, Any], client.info("server"))
                pid = int(info["process_id"])
                running = True
                with contextlib.suppress(redis.RedisError, OSError):
                    client.shutdown()
        except (redis.RedisError, OSError):
            pass
        if pid is None:
            pidfile_pid = _read_pidfile(directory)
            if (
                pidfile_pid is not None
                and pid_alive(pidfile_pid)
                and _is_our_server(pidfile_pid, directory)
            ):
                pid = pidfile_pid
                running = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                    os.kill(pid, signal.SIGCONT)
        if pid is not None and not _wait_exit(pid, timeout):
            _terminate(pid, 1.0)
        (directory / _EMBEDDED_SOCKET).unlink(missing_ok=True)
        (directory / _EMBEDDED_PIDFILE).unlink(missing_ok=True)
        return running
