# SPDX-License-Identifier: MIT
"""A tiny asyncio TCP proxy in front of a test redis-server that delays replies.

Requests pass at once, replies wait ``reply_delay`` seconds: so a command is executed by
the server while its caller is still waiting, which is how a cancellation can land after
the effect and before the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class DelayProxy:
    """Listens on 127.0.0.1:<port> and forwards to a unix socket."""

    def __init__(self, upstream_socket: str, reply_delay: float) -> None:
        self.upstream = upstream_socket
        self.reply_delay = reply_delay
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float
    ) -> None:
        try:
            while data := await reader.read(65536):
                if delay:
                    await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
        for task in (
            asyncio.ensure_future(self._pipe(reader, up_writer, 0.0)),
            asyncio.ensure_future(self._pipe(up_reader, writer, self.reply_delay)),
        ):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[DelayProxy]:
        """Serve until the block ends."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
