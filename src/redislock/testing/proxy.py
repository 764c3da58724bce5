# SPDX-License-Identifier: MIT
"""A TCP fault proxy to put between Redis clients and a redis-server: partitions, resets, latency.

Design source: the etcd robustness tests' proxy (a userspace proxy per member that can
blackhole, delay and drop traffic), which plays the part toxiproxy plays elsewhere.

A :class:`FaultProxy` listens on a TCP port of this host and forwards every client connection
to one upstream redis-server (a Unix socket path or a ``(host, port)`` TCP address), opening
one upstream connection per client connection. All proxies run on an asyncio event loop in
one daemon thread, a :class:`ProxyLoop`; many proxies can share one. Their methods are
ordinary blocking calls that may be made from any thread.

Bytes travel in chunks (what one read returned), in two directions per connection: *up*
(client to server) and *down* (server to client). Each direction keeps its chunks in order.
:meth:`FaultProxy.set_fault` picks the current fault; it applies to the existing connections
and to the new ones as soon as the call returns:

``"pass"``
    Forward every chunk at once. This is the initial state; :meth:`FaultProxy.heal` returns
    to it.
``"blackhole"``
    Move no byte in either direction, like a network partition. The proxy stops reading
    from both sockets of every connection, so new bytes stay queued in the kernel's socket
    buffers (and then in the sender's), and chunks the proxy had already read stay queued
    in the proxy; nothing is discarded. Closes and resets from either peer are not passed
    on either (the proxy does not read them). New connections are accepted (the client's
    connect succeeds), get their upstream connection, and then see the same silence. When
    the fault changes, the queued bytes flow again in order, as across a healed partition:
    a request sent during the blackhole reaches the server afterwards, even if its client
    has given up and closed the connection meanwhile.
``"reset"``
    Abort every current connection at once and drop what was queued in the proxy: its
    client socket with a TCP RST (``SO_LINGER`` 0, then close), its upstream socket the
    same way (a plain close for a Unix socket). While the fault lasts, each new connection
    is reset the same way as soon as it is accepted, before any upstream connection. The
    client sees ``ECONNRESET`` (``redis.ConnectionError``) on its next read or write.
``"delay"``
    Forward each chunk, in both directions, no earlier than ``delay`` seconds after the
    proxy read it (the ``delay`` in force when the chunk is due). Order is preserved per
    direction; a chunk does not wait for the delays of those before it, so this adds
    latency. Chunks read before the fault was set count from when they were read. A
    direction holds about 1 MiB in the proxy before the proxy stops reading it, so bulk
    transfers are also slowed to about 1 MiB per ``delay``.
``"drop_reply"``
    Forward the up direction at once; read the down direction at once and discard its
    bytes (``dropped_replies`` counts them; an end of stream is still passed on). Requests
    reach the server and take effect, their clients never get the replies, so they time
    out.
``"lose_reply"``
    One-shot: the next chunk of server replies (on whichever connection it comes first) is
    read and discarded, that connection is aborted with a TCP RST on both sockets, and the
    fault returns to ``"pass"`` by itself (``lost_replies`` counts such events). The
    command has taken effect on the server; its client sees ``ECONNRESET`` at once and, with
    redis-py's default retry policy, sends the command again on a new connection: the
    lost-reply-then-retry case that scripts must survive without a double effect.

Whatever the fault, a proxy connection ends when one peer's end of the stream (EOF, error or
reset, read in order after the bytes before it) is forwarded: the proxy then closes both
sockets after flushing what it had written to them, and drops what was still queued the other
way. If the upstream connection cannot be opened, the client connection is closed (when the
current fault lets an end of stream through).

Observability: :attr:`FaultProxy.last_upstream` is the ``time.monotonic()`` (seconds) of the
last write of bytes towards the server, and :attr:`~FaultProxy.bytes_up`,
:attr:`~FaultProxy.bytes_down`, :attr:`~FaultProxy.connections` and
:attr:`~FaultProxy.dropped_replies` count what happened since the proxy was created.

Example::

    with ProxyLoop() as loop, FaultProxy(server.socket_path, loop=loop) as proxy:
        client = redis.Redis(**proxy.client_kwargs(), socket_timeout=0.5)
        client.ping()
        proxy.set_fault("blackhole")   # the next command times out
        proxy.heal()
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import os
import socket
import struct
import threading
import time
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

from redislock._lifecycle import Startable

__all__ = ["FAULT_KINDS", "FaultProxy", "ProxyLoop"]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

FAULT_KINDS: Final = ("pass", "blackhole", "reset", "delay", "drop_reply", "lose_reply")
"""The fault kinds :meth:`FaultProxy.set_fault` accepts."""

_READ_HIGH: Final = 1024 * 1024
"""Bytes a direction may hold in the proxy before it stops reading its source."""

_LINGER_RST: Final = struct.pack("ii", 1, 0)

_DEFAULT_TIMEOUT: Final = 10.0

_CLOSE_WAIT: Final = 5.0
"""Seconds a stopping proxy waits for its aborted sockets to close."""


async def _close_server(server: asyncio.Server) -> None:
    """Stop accepting, let the connections already accepted get their transport, then close.

    ``Server.close()`` between the accept of a connection and the task that makes its
    transport makes that task fail in ``Server._attach`` (an assertion on the closed
    server's sockets) and silently leave the accepted socket open, to be garbage-collected
    with a ``ResourceWarning`` (https://github.com/python/cpython/issues/109564). So the
    listening sockets first stop being read: no new accept; the transport tasks of those
    already accepted are queued before this coroutine's next step, which ``sleep(0)`` waits
    for; only then is the server closed.
    """
    loop = asyncio.get_running_loop()
    for sock in server.sockets:
        with contextlib.suppress(NotImplementedError, ValueError, OSError):
            loop.remove_reader(sock.fileno())
    await asyncio.sleep(0)
    server.close()


class ProxyLoop(Startable):
    """An asyncio event loop in one daemon thread that hosts any number of :class:`FaultProxy`.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. It may be started
    again after :meth:`stop` (with a new event loop). Both methods may be called from any
    thread except the loop's own.

    Args:
        name: the thread's name.
    """

    def __init__(self, *, name: str = "redislock-proxy-loop") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._proxies: set[FaultProxy] = set()  # touched on the loop thread only

    @property
    def running(self) -> bool:
        """Whether the loop's thread is running."""
        return self._loop is not None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop.

        Raises:
            RuntimeError: the loop is not running.
        """
        loop = self._loop
        if loop is None:
            raise RuntimeError("the ProxyLoop is not running; call start() first")
        return loop

    def in_loop_thread(self) -> bool:
        """Whether the caller runs on the loop's own thread."""
        thread = self._thread
        return thread is not None and thread.ident == threading.get_ident()

    def start(self) -> ProxyLoop:
        """Start the thread and its event loop; does nothing if already running.

        Returns:
            ``self``.
        """
        with self._lock:
            if self._loop is not None:
                return self
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(
                target=self._run, args=(loop, ready), name=self.name, daemon=True
            )
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread
        return self

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    def stop(self, timeout: float = _DEFAULT_TIMEOUT) -> None:
        """Stop every proxy still running on this loop, then the loop and its thread.

        Idempotent: does nothing if not running.

        Args:
            timeout: seconds to wait for the proxies to close and the thread to end.

        Raises:
            RuntimeError: called from the loop's own thread.
            TimeoutError: the proxies did not close within ``timeout`` seconds (the loop
                is stopped anyway).
        """
        if self.in_loop_thread():
            raise RuntimeError("ProxyLoop.stop() cannot be called from the loop's own thread")
        with self._lock:
            loop, thread = self._loop, self._thread
            if loop is None or thread is None:
                return
            try:
                asyncio.run_coroutine_threadsafe(self._stop_proxies(), loop).result(timeout)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(timeout)
                self._loop = self._thread = None

    async def _stop_proxies(self) -> None:
        await asyncio.gather(*(proxy._astop() for proxy in list(self._proxies)))

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float = _DEFAULT_TIMEOUT) -> _T:
        """Run ``coro`` on the loop and wait for its result.

        Args:
            coro: the coroutine.
            timeout: seconds to wait.

        Returns:
            What ``coro`` returned.

        Raises:
            RuntimeError: the loop is not running, or the caller is the loop's own thread
                (it would wait for itself).
            TimeoutError: ``coro`` did not finish within ``timeout`` seconds (it is
                cancelled).
            Exception: whatever ``coro`` raised.
        """
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError("ProxyLoop.run() cannot be called from the loop's own thread")
        try:
            loop = self.loop
        except RuntimeError:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ProxyLoop {self.name!r} {state} proxies={len(self._proxies)}>"


class FaultProxy(Startable):
    """A TCP proxy in front of one redis-server that injects network faults on demand.

    See the module documentation for the fault kinds. Use it as a context manager, or call
    :meth:`start` and :meth:`stop`; a stopped proxy may be started again and listens on the
    same port. All methods may be called from any thread; :meth:`start` and :meth:`stop`
    not from the loop's own thread.

    Args:
        upstream: the server: a Unix socket path (``str`` or ``os.PathLike``) or a
            ``(host, port)`` tuple for TCP.
        loop: the :class:`ProxyLoop` to run on; it must be running when :meth:`start` is
            called, and its owner stops it. ``None``: the proxy makes its own loop, starts
            it in :meth:`start` and stops it in :meth:`stop`.
        listen_host: the address to listen on.
        listen_port: the port to listen on; ``0`` picks a free one (see :attr:`port`).

    Raises:
        ValueError: ``upstream`` is neither a path nor a ``(str, int)`` tuple with a port in
            1..65535, or the path is empty; ``listen_host`` is empty; ``listen_port`` is not
            an int in 0..65535.
    """

    def __init__(
        self,
        upstream: str | os.PathLike[str] | tuple[str, int],
        *,
        loop: ProxyLoop | None = None,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
    ) -> None:
        self._upstream_path, self._upstream_addr = _parse_upstream(upstream)
        if not _is_port(listen_port, low=0):
            raise ValueError(f"listen_port must be an int in 0..65535, got {listen_port!r}")
        if not _is_text(listen_host):
            raise ValueError(f"listen_host must be a non-empty string, got {listen_host!r}")
        self._ploop = loop if loop is not None else ProxyLoop(name="redislock-fault-proxy")
        self._owns_loop = loop is None
        self.listen_host = listen_host
        self._listen_port = listen_port
        self._port: int | None = None
        self._lock = threading.Lock()
        # fault state: replaced as a whole, read from any thread, written on the loop thread
        # (or anywhere while the proxy is stopped)
        self._fault: tuple[str, float] = ("pass", 0.0)
        # loop-thread state
        self._server: asyncio.Server | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._conns: set[_Conn] = set()
        # every socket protocol made and not yet told connection_lost (client and upstream
        # sides): its socket is open, or about to be
        self._sides: set[_Side] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        #: ``time.monotonic()`` (seconds) of the last write of bytes towards the server, or
        #: ``None`` if there was none yet.
        self.last_upstream: float | None = None
        #: Bytes written towards the server.
        self.bytes_up = 0
        #: Bytes written towards the clients (discarded replies not included).
        self.bytes_down = 0
        #: Client connections accepted (including those reset at once).
        self.connections = 0
        #: Bytes of server replies read and discarded by the ``"drop_reply"`` fault.
        self.dropped_replies = 0
        #: Replies lost by the ``"lose_reply"`` fault (each one ended its connection).
        self.lost_replies = 0

    # ------------------------------------------------------------------ properties

    @property
    def upstream(self) -> str | tuple[str, int]:
        """The server: a Unix socket path or a ``(host, port)`` tuple."""
        if self._upstream_path is not None:
            return self._upstream_path
        assert self._upstream_addr is not None
        return self._upstream_addr

    @property
    def loop(self) -> ProxyLoop:
        """The :class:`ProxyLoop` this proxy runs on."""
        return self._ploop

    @property
    def running(self) -> bool:
        """Whether the proxy is listening."""
        return self._server is not None

    @property
    def port(self) -> int:
        """The TCP port the proxy listens on (kept across restarts).

        Raises:
            RuntimeError: the proxy was never started.
        """
        if self._port is None:
            raise RuntimeError("the proxy was never started; call start() first")
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        """``(listen_host, port)``.

        Raises:
            RuntimeError: the proxy was never started.
        """
        return (self.listen_host, self.port)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``redis.Redis`` / ``redis.asyncio.Redis`` to go through the proxy.

        Returns:
            ``{"host": listen_host, "port": port}``.

        Raises:
            RuntimeError: the proxy was never started.
        """
        return {"host": self.listen_host, "port": self.port}

    @property
    def fault(self) -> str:
        """The current fault kind, one of :data:`FAULT_KINDS`."""
        return self._fault[0]

    @property
    def delay(self) -> float:
        """The current delay in seconds (``0.0`` unless the fault is ``"delay"``)."""
        return self._fault[1]

    @property
    def active(self) -> int:
        """Client connections currently proxied (accepted and not yet ended)."""
        return len(self._conns)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        """Start listening; does nothing if already running.

        Starts the proxy's own loop when it has one.

        Returns:
            ``self``.

        Raises:
            RuntimeError: the shared :class:`ProxyLoop` is not running, or the caller is
                the loop's own thread.
            OSError: the listening socket could not be opened (address in use, ...).
        """
        with self._lock:
            if self._server is not None:
                return self
            if self._owns_loop:
                self._ploop.start()
            elif not self._ploop.running:
                raise RuntimeError("the shared ProxyLoop is not running; start it first")
            try:
                self._ploop.run(self._astart())
            except BaseException:
                if self._owns_loop:
                    self._ploop.stop()
                raise
        return self

    def stop(self, timeout: float = _DEFAULT_TIMEOUT) -> None:
        """Close the listener and abort every connection (no flush), then the own loop if any.

        Idempotent: does nothing if not running. Bytes still queued in the proxy are dropped.

        Args:
            timeout: seconds to wait for the connections to close.

        Raises:
            RuntimeError: called from the loop's own thread.
            TimeoutError: the proxy did not close within ``timeout`` seconds.
        """
        with self._lock:
            try:
                if self._server is not None and self._ploop.running:
                    self._ploop.run(self._astop(), timeout)
            finally:
                if self._owns_loop:
                    self._ploop.stop(timeout)

    async def _astart(self) -> None:
        loop = asyncio.get_running_loop()
        port = self._port if self._port is not None else self._listen_port
        server = await loop.create_server(lambda: _ClientSide(self), self.listen_host, port)
        self._port = int(server.sockets[0].getsockname()[1])
        self._server = server
        self._stopping = None
        self._ploop._proxies.add(self)

    async def _astop(self) -> None:
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._do_stop())
        await asyncio.shield(self._stopping)

    async def _do_stop(self) -> None:
        server, self._server = self._server, None  # connection_made aborts from now on
        if server is not None:
            await _close_server(server)
        for conn in list(self._conns):
            conn.abort(rst=False)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # Every socket this proxy accepted or opened is closed before this returns (the loop
        # may stop right after): abort() closes the socket one loop iteration later, in
        # connection_lost, and a side whose transport is being made gets it first.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CLOSE_WAIT
        while self._sides and loop.time() < deadline:
            for side in list(self._sides):
                side.abort()
            await asyncio.sleep(0.001)
        if self._sides:
            _log.warning("fault proxy: %d sockets did not close in time", len(self._sides))
            self._sides.clear()
        if server is not None:
            await server.wait_closed()
        self._ploop._proxies.discard(self)

    # ------------------------------------------------------------------ faults

    def set_fault(self, kind: str, *, delay: float = 0.0) -> None:
        """Switch to fault ``kind``; it applies to every connection when this returns.

        While the proxy is stopped the fault is only remembered, for the next :meth:`start`.

        Args:
            kind: one of :data:`FAULT_KINDS` (see the module documentation).
            delay: seconds each chunk waits, with ``kind="delay"`` only (must be > 0 there
                and 0 otherwise).

        Raises:
            ValueError: unknown ``kind``; ``delay`` not a finite number, not > 0 with
                ``"delay"``, or non-zero with another kind.
            TimeoutError: the proxy's loop did not apply the change within 10 seconds.
        """
        state = (kind, _check_fault(kind, delay))
        if self._server is None or not self._ploop.running:
            self._fault = state
            return
        if self._ploop.in_loop_thread():
            self._apply(state)
            return
        try:
            self._ploop.run(self._aapply(state))
        except RuntimeError:
            if not _loop_stopped(self._ploop):
                raise
            self._fault = state  # the loop stopped meanwhile: no connection is left

    def heal(self) -> None:
        """``set_fault("pass")``: forward everything again, queued bytes first, in order.

        Raises:
            TimeoutError: the proxy's loop did not apply the change within 10 seconds.
        """
        self.set_fault("pass")

    async def _aapply(self, state: tuple[str, float]) -> None:
        self._apply(state)

    def _apply(self, state: tuple[str, float]) -> None:
        self._fault = state
        for conn in list(self._conns):
            if state[0] == "reset":
                conn.abort(rst=True)
            else:
                conn.refresh()

    # ------------------------------------------------------------------ internals

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        port = self._port if self._port is not None else self._listen_port
        return (
            f"<FaultProxy {self.listen_host}:{port} -> {self.upstream!r} {state} "
            f"fault={self.fault!r} active={self.active}>"
        )


def _is_port(value: object, *, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= 65535


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _loop_stopped(ploop: ProxyLoop) -> bool:
    return not ploop.running


def _parse_upstream(upstream: object) -> tuple[str | None, tuple[str, int] | None]:
    """``(unix path, None)`` or ``(None, (host, port))``; raises ValueError."""
    if isinstance(upstream, tuple):
        if len(upstream) != 2 or not _is_text(upstream[0]) or not _is_port(upstream[1], low=1):
            raise ValueError(
                f"upstream must be a (host, port) tuple with a port in 1..65535, got {upstream!r}"
            )
        return None, (str(upstream[0]), int(upstream[1]))
    if isinstance(upstream, str | os.PathLike):
        path = os.fspath(upstream)
        if not _is_text(path):
            raise ValueError(f"upstream must be a non-empty Unix socket path, got {upstream!r}")
        return str(path), None
    raise ValueError(
        f"upstream must be a Unix socket path or a (host, port) tuple, got {upstream!r}"
    )


def _check_fault(kind: object, delay: object) -> float:
    """The delay in seconds as a float, after checking ``kind`` and ``delay``; ValueError."""
    if kind not in FAULT_KINDS:
        raise ValueError(f"fault kind must be one of {', '.join(FAULT_KINDS)}; got {kind!r}")
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay):
        raise ValueError(f"delay must be a finite number of seconds, got {delay!r}")
    if kind == "delay":
        if delay <= 0:
            raise ValueError(f'delay must be > 0 seconds with kind="delay", got {delay!r}')
    elif delay != 0:
        raise ValueError(f'delay is only meaningful with kind="delay", got {kind=!r} {delay=!r}')
    return float(delay)


def _rst(transport: asyncio.BaseTransport) -> None:
    """Make the next close of ``transport``'s socket send an RST."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)


class _Pipe:
    """One direction of one connection: the chunks read from ``source``, for ``dest``."""

    def __init__(self, conn: _Conn, *, up: bool) -> None:
        self.conn = conn
        self.up = up
        self.source: asyncio.Transport | None = None
        self.dest: asyncio.Transport | None = None
        self.dest_paused = False  # dest's write buffer is full (flow control)
        self.reading_paused = False  # we paused source
        self.items: collections.deque[tuple[float, bytes | None]] = collections.deque()
        self.size = 0
        self.ended = False  # the end-of-stream marker (None) is queued
        self.wake = asyncio.Event()

    def feed(self, data: bytes) -> None:
        self.items.append((time.monotonic(), data))
        self.size += len(data)
        self.wake.set()
        self.update_reading()

    def feed_end(self) -> None:
        if not self.ended:
            self.ended = True
            self.items.append((time.monotonic(), None))
            self.wake.set()

    def update_reading(self) -> None:
        source = self.source
        if source is None or source.is_closing():
            return
        want_paused = self.conn.proxy._fault[0] == "blackhole" or self.size > _READ_HIGH
        if want_paused and not self.reading_paused:
            source.pause_reading()
            self.reading_paused = True
        elif not want_paused and self.reading_paused:
            source.resume_reading()
            self.reading_paused = False

    async def _sleep(self, timeout: float | None) -> None:
        self.wake.clear()
        if timeout is None:
            await self.wake.wait()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.wake.wait()

    async def pump(self) -> None:
        proxy = self.conn.proxy
        try:
            while True:
                kind, delay = proxy._fault
                dest = self.dest
                if not self.items or dest is None or self.dest_paused or kind == "blackhole":
                    await self._sleep(None)
                    continue
                read_at, data = self.items[0]
                if kind == "delay":
                    wait = read_at + delay - time.monotonic()
                    if wait > 0:
                        await self._sleep(wait)
                        continue
                self.items.popleft()
                if data is None:
                    self.conn.close()
                    return
                self.size -= len(data)
                if not self.up and kind == "lose_reply":
                    proxy.lost_replies += 1
                    proxy._fault = ("pass", 0.0)
                    self.conn.abort(rst=True)
                    for conn in list(proxy._conns):
                        conn.refresh()
                    return
                if not self.up and kind == "drop_reply":
                    proxy.dropped_replies += len(data)
                elif not dest.is_closing():
                    dest.write(data)
                    if self.up:
                        proxy.bytes_up += len(data)
                        proxy.last_upstream = time.monotonic()
                    else:
                        proxy.bytes_down += len(data)
                self.update_reading()
        except Exception:
            _log.exception("fault proxy: forwarding failed; aborting the connection")
            self.conn.abort(rst=False)


class _Conn:
    """One proxied client connection and its upstream connection."""

    def __init__(self, proxy: FaultProxy, client: asyncio.Transport) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream: asyncio.Transport | None = None
        self.dead = False
        self.up = _Pipe(self, up=True)
        self.down = _Pipe(self, up=False)
        self.up.source = client
        self.down.dest = client
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.proxy._conns.add(self)
        self.up.update_reading()
        for coro in (self._connect(), self.up.pump(), self.down.pump()):
            task = asyncio.ensure_future(coro)
            self.tasks.append(task)
            self.proxy._track(task)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        proxy = self.proxy
        try:
            if proxy._upstream_path is not None:
                await loop.create_unix_connection(lambda: _UpstreamSide(self), proxy._upstream_path)
            else:
                assert proxy._upstream_addr is not None
                host, port = proxy._upstream_addr
                await loop.create_connection(lambda: _UpstreamSide(self), host, port)
        except OSError as exc:
            _log.debug("fault proxy: cannot connect to %r: %s", proxy.upstream, exc)
            self.down.feed_end()  # close the client, in order

    def upstream_made(self, transport: asyncio.Transport) -> None:
        self.upstream = transport
        self.up.dest = transport
        self.down.source = transport
        self.down.update_reading()
        self.up.wake.set()

    def refresh(self) -> None:
        """The fault changed: pause or resume reading, wake the pumps."""
        for pipe in (self.up, self.down):
            pipe.update_reading()
            pipe.wake.set()

    def _finish(self) -> None:
        self.dead = True
        self.proxy._conns.discard(self)
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()

    def close(self) -> None:
        """End the connection gracefully: flush what was written, then close both sockets."""
        if self.dead:
            return
        self._finish()
        for transport in (self.client, self.upstream):
            if transport is not None:
                transport.close()

    def abort(self, *, rst: bool) -> None:
        """End the connection at once (with an RST on both sockets if ``rst``)."""
        if self.dead:
            return
        self._finish()
        for transport in (self.client, self.upstream):
            if transport is not None:
                if rst:
                    _rst(transport)
                transport.abort()


class _Side(asyncio.Protocol):
    """Protocol of one socket of a connection: feeds ``inbound``, is the dest of ``outbound``."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.inbound: _Pipe | None = None
        self.outbound: _Pipe | None = None
        self._transport: asyncio.Transport | None = None
        proxy._sides.add(self)  # asyncio makes the transport right after its protocol

    def abort(self) -> None:
        """Abort the socket (once its transport is made); connection_lost follows."""
        if self._transport is not None:
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.inbound is not None and not self.inbound.conn.dead:
            self.inbound.feed(data)

    def eof_received(self) -> bool | None:
        return None  # close our side; connection_lost queues the end of the stream

    def connection_lost(self, exc: Exception | None) -> None:
        self.proxy._sides.discard(self)
        if self.inbound is not None and not self.inbound.conn.dead:
            self.inbound.feed_end()

    def pause_writing(self) -> None:
        if self.outbound is not None:
            self.outbound.dest_paused = True

    def resume_writing(self) -> None:
        if self.outbound is not None:
            self.outbound.dest_paused = False
            self.outbound.wake.set()


class _ClientSide(_Side):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        proxy = self.proxy
        self._transport = transport
        proxy.connections += 1
        if proxy._server is None:  # accepted while stopping
            transport.abort()
            return
        if proxy._fault[0] == "reset":
            _rst(transport)
            transport.abort()
            return
        conn = _Conn(proxy, transport)
        self.inbound, self.outbound = conn.up, conn.down
        conn.start()


class _UpstreamSide(_Side):
    def __init__(self, conn: _Conn) -> None:
        super().__init__(conn.proxy)
        self.conn = conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self.conn.dead:
            transport.abort()
            return
        self.inbound, self.outbound = self.conn.down, self.conn.up
        self.conn.upstream_made(transport)
