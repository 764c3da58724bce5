# SPDX-License-Identifier: MIT
"""A tiny asyncio TCP proxy in front of a test redis-server that delays replies.

Requests pass at once, replies wait ``reply_delay`` seconds: so a command is executed by
the server while its caller is still waiting, which is how a cancellation can land after
the effect and before the reply.

When :meth:`DelayProxy.running` ends, every socket the proxy accepted or opened is closed
(the test's event loop may close right after, and a socket left to the garbage collector is a
``ResourceWarning`` in whatever test runs next): the proxy owns the stream writers, not the
pipe tasks (a task cancelled before it started never runs its ``finally``), and it waits for
the connections being accepted or connected upstream while it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from redislock.testing.proxy import _close_server

#: Seconds :meth:`DelayProxy.running` waits, on exit, for handlers still connecting upstream.
STOP_WAIT = 5.0


class DelayProxy:
    """Listens on 127.0.0.1:<port> and forwards to a unix socket."""

    def __init__(self, upstream_socket: str, reply_delay: float) -> None:
        self.upstream = upstream_socket
        self.reply_delay = reply_delay
        self.port = 0
        self._server: asyncio.Server | None = None
        self._stopping = False
        self._accepted = 0  # protocols made for accepted connections
        self._handlers: set[asyncio.Task[None]] = set()  # one per accepted connection
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()  # every socket: client and upstream

    def stopping(self) -> bool:
        """Whether the ``running()`` block has ended (the proxy is closing or closed)."""
        return self._stopping

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float
    ) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                if delay:
                    await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        writer.close()  # the end of the stream, passed on

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)  # first, before any await: stop() closes it from now on
        if self.stopping():
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers.add(up_writer)
        if self.stopping():  # stopped while connecting upstream
            up_writer.transport.abort()
            writer.transport.abort()
            return
        for task in (
            asyncio.ensure_future(self._pipe(reader, up_writer, 0.0)),
            asyncio.ensure_future(self._pipe(up_reader, writer, self.reply_delay)),
        ):
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    def _protocol(self) -> asyncio.StreamReaderProtocol:
        """What ``asyncio.start_server`` makes per accepted connection, counted."""
        self._accepted += 1
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._connected)

    def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._handlers.add(asyncio.ensure_future(self._handle(reader, writer)))

    async def _stop(self, server: asyncio.Server) -> None:
        self._stopping = True
        await _close_server(server)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_WAIT
        # every accepted connection gets its handler (connection_made, one iteration later),
        # and the handlers connecting upstream finish (they close what they opened)
        while loop.time() < deadline and (  # noqa: ASYNC110 (a bounded poll)
            len(self._handlers) < self._accepted or not all(t.done() for t in self._handlers)
        ):
            await asyncio.sleep(0.001)
        for task in list(self._handlers) + list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._handlers, *self._pipes, return_exceptions=True)
        writers = list(self._writers)
        for writer in writers:
            writer.transport.abort()
        for writer in writers:
            with contextlib.suppress(Exception):  # the connection's own error, if any
                await writer.wait_closed()
        await server.wait_closed()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[DelayProxy]:
        """Serve until the block ends, then close every socket of the proxy."""
        loop = asyncio.get_running_loop()
        self._server = server = await loop.create_server(self._protocol, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            await self._stop(server)
