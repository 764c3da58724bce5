# SPDX-License-Identifier: MIT
"""The protected resource of a torture run: a fenced write oracle in its own process.

Workers write to the oracle at the start (``begin``) and end (``end``) of every critical
section. The oracle is one single-threaded process (asyncio) listening on a Unix socket, so it
puts every write from every worker in one order (``seq``) and stamps it with its own
``time.monotonic()`` at receipt (system-wide on Linux, so comparable with the workers'
history timestamps).

Protocol: newline-delimited JSON over the Unix socket, one reply line per request line.

* write request ``{"res": str, "fence": int >= 0, "hold": str, "w": int >= 0,
  "phase": "begin" | "end", "mode": "x" | "s" | "p"}`` (exactly these keys) ->
  ``{"ok": bool accepted, "last": int, "seq": int}``;
* ``{"ping": true}`` -> ``{"pong": true, "fenced": bool, "seq": int next seq}``;
* anything else (bad JSON, a missing / extra / ill-typed field, a line over 64 KiB) ->
  ``{"error": str}``; the server keeps serving (an over-long line also closes that
  connection).

Rule (:func:`fenced_accepts`, after Kleppmann's fencing tokens): when fenced (the default) an
``x`` write to ``res`` is accepted iff ``fence > last``, or ``fence == last`` and ``hold`` is the
hold that set ``last`` (the same critical section's ``end`` write), where ``last`` is the largest
fence of an accepted ``x`` write to ``res`` so far (0 if none). ``s`` and ``p`` writes are always
accepted (recorded only). Unfenced (``--unfenced``, the negative control) every write is
accepted; ``last`` is still the largest accepted ``x`` fence.

Every valid write request, accepted or not, is appended to the log as one JSON line (one
``os.write`` each, so the log is complete up to the last answered request even after SIGKILL)::

    {"t": float receipt time, "seq": int, "res": str, "fence": int, "hold": str, "w": int,
     "phase": "begin" | "end", "mode": "x" | "s" | "p", "accepted": bool,
     "last": int (last accepted x fence of res before this write, 0 if none)}

A restarted oracle replays an existing log first: ``seq`` continues and the fences it accepted
are remembered.

Run the server with ``python -m redislock.testing.oracle --socket PATH --log PATH
[--unfenced]``, or from Python with :class:`Oracle`; talk to it with :class:`OracleClient`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

from redislock._lifecycle import Closeable, Startable
from redislock.testing.history import JsonlWriter, read_jsonl

__all__ = [
    "Oracle",
    "OracleClient",
    "OracleError",
    "OracleState",
    "fenced_accepts",
    "main",
    "validate_request",
]

#: The keys of a write request.
REQUEST_KEYS: Final = frozenset({"res", "fence", "hold", "w", "phase", "mode"})
#: Longest request line the server reads, in bytes.
MAX_LINE: Final = 64 * 1024
#: Longest path a Unix socket can bind to on Linux, in bytes.
MAX_SOCKET_PATH: Final = 107

_PHASES: Final = frozenset({"begin", "end"})
_MODES: Final = frozenset({"x", "s", "p"})


class OracleError(RuntimeError):
    """The oracle did not start, could not be reached, timed out or answered with an error."""


def fenced_accepts(mode: str, fence: int, hold: str, last: int, last_hold: str | None) -> bool:
    """Whether a fenced oracle accepts a write.

    ``last`` is the largest fence of an accepted ``x`` write to the resource so far and
    ``last_hold`` the hold whose write set it (``None``: no ``x`` write accepted yet, then
    every write is accepted). ``s`` and ``p`` writes are always accepted; an ``x`` write iff
    ``fence > last`` or (``fence == last`` and ``hold == last_hold``).
    """
    if mode != "x" or last_hold is None:
        return True
    return fence > last or (fence == last and hold == last_hold)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_request(obj: object) -> dict[str, Any]:
    """Check a decoded write request; returns it as a new dict.

    Raises:
        ValueError: not an object, a key missing or unknown, or a field of the wrong type /
            value (``res`` and ``hold`` non-empty strings, ``fence`` and ``w`` ints >= 0,
            ``phase`` begin/end, ``mode`` x/s/p). The message names the field.
    """
    if not isinstance(obj, dict):
        raise ValueError("request must be a JSON object")
    missing = REQUEST_KEYS - obj.keys()
    if missing:
        raise ValueError(f"missing field(s): {', '.join(sorted(missing))}")
    extra = obj.keys() - REQUEST_KEYS
    if extra:
        raise ValueError(f"unknown field(s): {', '.join(sorted(map(str, extra)))}")
    for key in ("res", "hold"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise ValueError(f"{key} must be a non-empty string")
    for key in ("fence", "w"):
        if not _is_int(obj[key]) or obj[key] < 0:
            raise ValueError(f"{key} must be an integer >= 0")
    if obj["phase"] not in _PHASES:
        raise ValueError("phase must be 'begin' or 'end'")
    if obj["mode"] not in _MODES:
        raise ValueError("mode must be 'x', 's' or 'p'")
    return {key: obj[key] for key in ("res", "fence", "hold", "w", "phase", "mode")}


class OracleState:
    """The oracle's decision state, without I/O: one ``(last, last_hold)`` per resource.

    :meth:`write` decides a validated request and returns its log record; the server is this
    object plus a socket and a log. Useful on its own to model the oracle in tests.
    """

    def __init__(self, *, fenced: bool = True) -> None:
        self.fenced = fenced
        #: The seq the next write gets.
        self.next_seq = 0
        self._top: dict[str, tuple[int, str]] = {}

    def last(self, res: str) -> tuple[int, str | None]:
        """``(largest accepted x fence, hold that set it)`` of ``res``; ``(0, None)`` if none."""
        return self._top.get(res, (0, None))

    def write(self, request: Mapping[str, Any], t: float) -> dict[str, Any]:
        """Decide the validated write ``request`` received at ``t`` (seconds, monotonic).

        Returns the log record (see the module docstring); updates the state.
        """
        res, fence, hold, mode = request["res"], request["fence"], request["hold"], request["mode"]
        last, last_hold = self.last(res)
        accepted = fenced_accepts(mode, fence, hold, last, last_hold) if self.fenced else True
        record = {
            "t": t,
            "seq": self.next_seq,
            "res": res,
            "fence": fence,
            "hold": hold,
            "w": request["w"],
            "phase": request["phase"],
            "mode": mode,
            "accepted": accepted,
            "last": last,
        }
        self.replay(record)
        return record

    def replay(self, record: Mapping[str, Any]) -> None:
        """Apply a record from an earlier log (or just decided) to the state."""
        self.next_seq = max(self.next_seq, int(record["seq"]) + 1)
        if record["accepted"] and record["mode"] == "x":
            res, fence = record["res"], int(record["fence"])
            last, last_hold = self.last(res)
            if last_hold is None or fence > last:
                self._top[res] = (fence, str(record["hold"]))


# --------------------------------------------------------------------------- server


def _encode(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


class _Server:
    def __init__(self, socket_path: Path, log_path: Path, fenced: bool) -> None:
        self.socket_path = socket_path
        self.log_path = log_path
        self.state = OracleState(fenced=fenced)
        self.log: JsonlWriter | None = None
        self.stop = asyncio.Event()
        self.writers: set[asyncio.StreamWriter] = set()

    def answer(self, line: bytes, t: float) -> dict[str, Any]:
        try:
            obj = json.loads(line)
        except ValueError as exc:
            return {"error": f"bad JSON: {exc}"}
        if isinstance(obj, dict) and obj.get("ping") is True and len(obj) == 1:
            return {"pong": True, "fenced": self.state.fenced, "seq": self.state.next_seq}
        try:
            request = validate_request(obj)
        except ValueError as exc:
            return {"error": str(exc)}
        record = self.state.write(request, t)
        assert self.log is not None
        try:
            self.log.write(record)
        except OSError as exc:  # the log is the point: stop rather than answer unrecorded
            print(f"oracle: cannot write the log: {exc}", file=sys.stderr, flush=True)
            self.stop.set()
            return {"error": f"oracle log write failed: {exc}"}
        return {"ok": record["accepted"], "last": record["last"], "seq": record["seq"]}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            while not self.stop.is_set():
                try:
                    line = await reader.readline()
                except ValueError:  # over MAX_LINE: the stream cannot be resynchronised
                    writer.write(_encode({"error": f"request line over {MAX_LINE} bytes"}))
                    await writer.drain()
                    return
                if not line:
                    return
                if not line.strip():
                    continue
                reply = self.answer(line, time.monotonic())
                writer.write(_encode(reply))
                await writer.drain()
        except (ConnectionError, OSError):
            return
        except asyncio.CancelledError:
            return  # shutting down (a cancelled handler makes asyncio log a traceback)
        finally:
            self.writers.discard(writer)
            writer.close()

    async def serve(self) -> None:
        if self.log_path.exists():
            for record in read_jsonl(self.log_path):
                self.state.replay(record)
        self.log = JsonlWriter(self.log_path)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # a stale socket of an earlier (killed) oracle
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop.set)
        server = await asyncio.start_unix_server(
            self.handle, path=str(self.socket_path), limit=MAX_LINE
        )
        try:
            await self.stop.wait()
        finally:
            server.close()
            for writer in list(self.writers):
                writer.close()
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
            self.log.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the oracle server until SIGTERM / SIGINT; returns the exit status (0)."""
    parser = argparse.ArgumentParser(
        prog="python -m redislock.testing.oracle",
        description="Fenced write oracle: the protected resource of a redislock torture run.",
    )
    parser.add_argument("--socket", required=True, type=Path, help="Unix socket to listen on")
    parser.add_argument("--log", required=True, type=Path, help="JSON Lines log of every write")
    parser.add_argument(
        "--unfenced", action="store_true", help="accept every write (negative control)"
    )
    args = parser.parse_args(argv)
    asyncio.run(_Server(args.socket, args.log, not args.unfenced).serve())
    return 0


# --------------------------------------------------------------------------- client


class _DisconnectedError(Exception):
    pass


class OracleClient(Closeable):
    """A synchronous client of the oracle over one Unix-socket connection.

    Connects lazily; after a connection failure (refused, reset, closed by the server) it
    reconnects and resends once, then raises :class:`OracleError` (a write whose reply was lost
    may so be logged twice: a repeat of the same hold, harmless to the rule). A timeout is not
    retried (the oracle is stuck). Thread-safe (one request at a time); after ``fork`` the
    child opens its own connection.

    ``timeout`` (seconds) bounds connecting and each request.
    """

    def __init__(self, socket_path: str | os.PathLike[str], timeout: float = 5.0) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
        self.socket_path = Path(socket_path)
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def write(self, res: str, fence: int, hold: str, w: int, phase: str, mode: str) -> bool:
        """Write to ``res`` at the oracle; True iff the oracle accepted the write.

        Raises:
            OracleError: the request is invalid (the oracle's message), the oracle cannot be
                reached, or it did not answer within ``timeout`` seconds.
        """
        reply = self.call(
            {"res": res, "fence": fence, "hold": hold, "w": w, "phase": phase, "mode": mode}
        )
        ok = reply.get("ok")
        if not isinstance(ok, bool):
            raise OracleError(f"oracle reply without a boolean 'ok': {reply!r}")
        return ok

    def ping(self) -> dict[str, Any]:
        """``{"pong": True, "fenced": bool, "seq": int}``. Raises OracleError like write."""
        return self.call({"ping": True})

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request object and return the reply object.

        Raises:
            OracleError: an ``{"error": ...}`` reply, a reply that is not a JSON object, a
                connection failure (after one reconnect), or a timeout.
        """
        data = _encode(request)
        if os.getpid() != self._pid:  # inherited through fork: not our connection nor lock
            self._pid = os.getpid()
            self._lock = threading.Lock()
            self._drop()
        with self._lock:
            line = self._send(data)
        try:
            reply = json.loads(line)
        except ValueError:
            raise OracleError(f"oracle sent bad JSON: {line[:200]!r}") from None
        if not isinstance(reply, dict):
            raise OracleError(f"oracle reply is not an object: {reply!r}")
        if "error" in reply:
            raise OracleError(f"oracle refused the request: {reply['error']}")
        return reply

    def _send(self, data: bytes) -> bytes:
        for attempt in (1, 2):
            try:
                return self._roundtrip(data)
            except TimeoutError:
                self._drop()
                raise OracleError(
                    f"oracle at {self.socket_path} did not answer in {self.timeout} s"
                ) from None
            except (OSError, _DisconnectedError) as exc:
                self._drop()
                if attempt == 2:
                    raise OracleError(
                        f"cannot reach the oracle at {self.socket_path}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _roundtrip(self, data: bytes) -> bytes:
        deadline = time.monotonic() + self.timeout
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                sock.connect(str(self.socket_path))
            except BaseException:
                sock.close()
                raise
            self._sock = sock
            self._buf.clear()
        sock = self._sock
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        sock.sendall(data)
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                return line
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                raise _DisconnectedError("connection closed by the oracle")
            self._buf += chunk

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        self._buf.clear()
        if sock is not None:
            sock.close()

    def close(self) -> None:
        """Close the connection (idempotent; the next request reconnects)."""
        with self._lock:
            self._drop()

    def __repr__(self) -> str:
        return f"OracleClient({str(self.socket_path)!r})"


# --------------------------------------------------------------------------- process


class Oracle(Startable):
    """Run the oracle server as a child process with its files in ``directory``.

    Files: ``oracle.sock`` (the socket; the path must fit in 107 bytes), ``oracle.jsonl`` (the
    log, appended to if it exists) and ``oracle.err`` (the server's stdout/stderr).
    ``fenced=False`` runs the negative control that accepts every write. ``start_timeout``
    (seconds) bounds :meth:`start`. Usable as a context manager (start / stop).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fenced: bool = True,
        start_timeout: float = 10.0,
    ) -> None:
        self.directory = Path(directory)
        self.fenced = fenced
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._err: IO[bytes] | None = None

    @property
    def socket_path(self) -> Path:
        """The server's Unix socket."""
        return self.directory / "oracle.sock"

    @property
    def log_path(self) -> Path:
        """The JSON Lines log of every write."""
        return self.directory / "oracle.jsonl"

    @property
    def err_path(self) -> Path:
        """The server's stdout/stderr."""
        return self.directory / "oracle.err"

    @property
    def pid(self) -> int | None:
        """The server's pid while started, else None."""
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Oracle:
        """Start the server and wait until it answers a ping; returns self.

        Raises:
            OracleError: already started, socket path too long, or the server exited or did
                not answer within ``start_timeout`` seconds (its stderr is in the message).
        """
        if self._proc is not None:
            raise OracleError("oracle already started")
        if len(os.fsencode(self.socket_path)) > MAX_SOCKET_PATH:
            raise OracleError(
                f"socket path {str(self.socket_path)!r} is over {MAX_SOCKET_PATH} bytes; "
                "use a shorter directory"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "redislock.testing.oracle",
            "--socket",
            str(self.socket_path),
            "--log",
            str(self.log_path),
        ]
        if not self.fenced:
            cmd.append("--unfenced")
        env = dict(os.environ)
        # The child imports redislock from where this process did (a source tree works too).
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        self._err = self.err_path.open("ab")
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._err, stderr=self._err, env=env
        )
        deadline = time.monotonic() + self.start_timeout
        probe = OracleClient(self.socket_path, timeout=1.0)
        try:
            while True:
                if self._proc.poll() is not None:
                    code = self._proc.returncode
                    self._cleanup()
                    raise OracleError(f"oracle exited with status {code}: {self._stderr()}")
                try:
                    probe.ping()
                    return self
                except OracleError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise OracleError(
                        f"oracle did not answer within {self.start_timeout} s: {self._stderr()}"
                    )
                time.sleep(0.02)
        finally:
            probe.close()

    def _stderr(self) -> str:
        try:
            text = self.err_path.read_text(errors="replace").strip()
        except OSError:
            return "(no output)"
        return text[-2000:] or "(no output)"

    def stop(self, timeout: float = 5.0) -> int | None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout`` seconds.

        Returns its exit status (None if it was not started). Idempotent.
        """
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._cleanup()
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL the server (a crash: the log stays readable) and reap it."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        self._proc = None
        if self._err is not None:
            self._err.close()
            self._err = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def client(self, timeout: float = 5.0) -> OracleClient:
        """A new :class:`OracleClient` for this oracle (``timeout`` in seconds)."""
        return OracleClient(self.socket_path, timeout=timeout)

    def records(self) -> list[dict[str, Any]]:
        """The log's records in seq order so far ([] if there is no log yet)."""
        if not self.log_path.exists():
            return []
        return read_jsonl(self.log_path)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"Oracle({str(self.directory)!r}, fenced={self.fenced}, {state})"


if __name__ == "__main__":
    sys.exit(main())
