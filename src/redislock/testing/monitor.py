# SPDX-License-Identifier: MIT
"""The MONITOR side of the auditor: open a MONITOR connection, split its stream into lines,
and parse a line into its time, database, client and exact arguments.

MONITOR is a test-only tool: the server copies every command of every client to the
monitoring connection. Never point it at a production server.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final, NamedTuple

__all__ = [
    "MonitorLine",
    "arg_text",
    "monitor_lines",
    "monitor_repr",
    "open_monitor",
    "parse_monitor_line",
    "resp_command",
]


class MonitorLine(NamedTuple):
    """One parsed MONITOR line.

    Attributes:
        time: server wall-clock time, Unix seconds.
        db: database number.
        client: the client address (``"127.0.0.1:5000"``, ``"unix:/path"``) or ``"lua"``
            for a command run by a script (it follows the EVAL/EVALSHA line that ran it).
        args: the command and its arguments, unescaped.
    """

    time: float
    db: int
    client: str
    args: tuple[bytes, ...]


_ESCAPES: Final = {
    ord("n"): b"\n",
    ord("r"): b"\r",
    ord("t"): b"\t",
    ord("a"): b"\a",
    ord("b"): b"\b",
    ord("\\"): b"\\",
    ord('"'): b'"',
}
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_REPR: Final = {ord(v): b"\\" + bytes([k]) for k, v in _ESCAPES.items() if k not in b'\\"'}


def _parse_args(data: bytes) -> tuple[bytes, ...] | None:
    """Split the quoted arguments of a MONITOR line (Redis ``sdscatrepr`` escaping)."""
    args: list[bytes] = []
    i, n = 0, len(data)
    while i < n:
        if data[i] != ord('"'):
            return None
        i += 1
        out = bytearray()
        while True:
            if i >= n:
                return None
            c = data[i]
            if c == ord('"'):
                i += 1
                break
            if c == ord("\\") and i + 1 < n:
                e = data[i + 1]
                if e == ord("x") and i + 3 < n and data[i + 2] in _HEX and data[i + 3] in _HEX:
                    out.append(int(data[i + 2 : i + 4], 16))
                    i += 4
                    continue
                esc = _ESCAPES.get(e)
                if esc is not None:
                    out += esc
                    i += 2
                    continue
            out.append(c)
            i += 1
        args.append(bytes(out))
        if i < n:
            if data[i] != ord(" "):
                return None
            i += 1
    return tuple(args) if args else None


def monitor_repr(data: bytes) -> bytes:
    """``data`` as MONITOR shows it inside an argument (the inverse of the unescaping)."""
    out = bytearray()
    for c in data:
        if c in (ord("\\"), ord('"')):
            out += b"\\" + bytes([c])
        elif c in _REPR:
            out += _REPR[c]
        elif 32 <= c <= 126:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    return bytes(out)


def parse_monitor_line(line: bytes) -> MonitorLine | None:
    """Parse one MONITOR reply line, with or without its leading ``+`` and trailing CRLF.

    The format is ``<unix seconds>.<micros> [<db> <client>] "arg" "arg" ...`` with each
    argument escaped by Redis (``\\"``, ``\\\\``, ``\\n``, ``\\r``, ``\\t``, ``\\a``,
    ``\\b``, ``\\xHH``). Unlike redis-py's ``Monitor``, the arguments come back exactly.

    Returns:
        The parsed line, or None for anything else (``OK``, a malformed line).
    """
    line = line.rstrip(b"\r\n")
    if line.startswith(b"+"):
        line = line[1:]
    sp = line.find(b" [")
    if sp <= 0:
        return None
    try:
        stamp = float(line[:sp])
    except ValueError:
        return None
    close = line.find(b'] "', sp)
    if close < 0:
        return None
    db_text, _, client = line[sp + 2 : close].partition(b" ")
    if not db_text.isdigit():
        return None
    args = _parse_args(line[close + 2 :])
    if args is None:
        return None
    return MonitorLine(stamp, int(db_text), client.decode("utf-8", "replace"), args)


def arg_text(value: Any) -> str:
    """A MONITOR argument or a Redis reply as text (bytes decoded as UTF-8, bad bytes
    replaced; anything else through ``str``)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def resp_command(*args: str | bytes) -> bytes:
    """One command encoded in RESP (an array of bulk strings; str arguments as UTF-8)."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg.encode() if isinstance(arg, str) else arg
        out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


def open_monitor(kwargs: Mapping[str, Any], timeout: float) -> socket.socket:
    """Connect to a server and send ``MONITOR`` (after ``AUTH`` when there is a password).

    Args:
        kwargs: redis client keyword arguments: ``unix_socket_path`` or ``host``/``port``
            (default ``localhost:6379``), and ``username``/``password``.
        timeout: the socket's timeout, seconds (connect and every read).

    Returns:
        The connected socket. The server answers ``+OK`` to each command sent: twice with
        a password (AUTH, MONITOR), else once; then the MONITOR lines follow.

    Raises:
        OSError: the connection failed.
    """
    path = kwargs.get("unix_socket_path")
    if path:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError:
            sock.close()
            raise
    else:
        host = kwargs.get("host") or "localhost"
        port = int(kwargs.get("port") or 6379)
        sock = socket.create_connection((host, port), timeout=timeout)
    password = kwargs.get("password")
    if password:
        username = kwargs.get("username")
        sock.sendall(resp_command("AUTH", *([username] if username else []), password))
    sock.sendall(resp_command("MONITOR"))
    return sock


def monitor_lines(sock: socket.socket, stop: threading.Event) -> Iterator[bytes | None]:
    """The lines of a MONITOR connection, without their CRLF, until ``stop`` is set; None
    after each idle socket timeout (so that the caller can check for stop).

    Raises:
        ConnectionError: the server closed the connection.
        OSError: reading the socket failed.
    """
    buf = b""
    while not stop.is_set():
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            yield None
            continue
        if not chunk:
            raise ConnectionError("server closed the MONITOR connection")
        buf += chunk
        *lines, buf = buf.split(b"\r\n")
        yield from lines
