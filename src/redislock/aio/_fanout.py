# SPDX-License-Identifier: MIT
"""The fan-out driver of the asyncio flavour: it sends one operation to each Redlock master
at once and gathers the replies (a :class:`~redislock._core.ops.FanOut`). Hand-written:
its sync twin :mod:`redislock.sync._fanout` uses a thread pool where this uses tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from redislock._core.ops import Call, Eval, FanOut, NodeLateError, script_error
from redislock._core.quorum import Packer, fast_masters, memory_of, settle
from redislock.aio._driver import execute

__all__ = ["AsyncMasters"]


def _cancel_swallowed(task: asyncio.Task[Any] | None, cancels: int) -> None:
    """Raise the cancellation of ``task`` that an await returned over.

    On Python 3.11, redis-py sends through ``asyncio.wait_for`` when the client has a
    socket_timeout, and that ``wait_for`` drops a cancellation arriving as the write
    completes (CPython gh-86296, fixed in 3.12): the cancelled acquire would go on trying,
    and could take the lock for a caller that is gone. ``cancels`` is the task's
    ``cancelling()`` count before the fan-out.
    """
    if task is not None and task.cancelling() > cancels:
        raise asyncio.CancelledError


async def _job(before: asyncio.Future[Any] | None, client: Any, op: Eval | Call) -> Any:
    if before is not None and not before.done():
        await asyncio.wait([before])  # this master's previous command goes first
    return await execute(client, op)


class AsyncMasters:
    """The masters of one AsyncRedlock, contacted all at once.

    A master that answered its last command in time takes the fast path: the command is
    written to a pooled, connected connection, and the replies of all such masters are read
    as they come, up to a shared deadline (no task per master). A master that is new, or
    that failed or answered late, is suspect: its command runs as a task of its own,
    because connecting to a stalled server can take its whole socket timeout (and redis-py's
    connection retries). A suspect master's commands run in order, each after the one
    before, so a release never overtakes the acquire it undoes; a late one finishes in the
    background. It takes the fast path again once it answers in time.
    """

    __slots__ = ("_last", "clients", "labels", "memories")

    def __init__(self, clients: Sequence[Any], labels: tuple[str, ...]) -> None:
        self.clients = tuple(clients)
        self.labels = labels
        """One label per master (``host:port`` or socket path), in the order given."""
        self.memories = tuple(memory_of(c) for c in self.clients)
        self._last: list[asyncio.Future[Any] | None] = [None] * len(self.clients)

    async def fan_out(self, op: FanOut) -> list[object]:
        """Send ``op.ops[i]`` to master ``i``, all at once; wait at most ``op.timeout``
        seconds in all. Returns per master its reply, its exception, or
        :class:`NodeLateError` (its connection is then closed: the reply is not awaited).
        """
        deadline = asyncio.get_running_loop().time() + op.timeout
        task = asyncio.current_task()
        cancels = 0 if task is None else task.cancelling()
        replies: list[object] = [None] * len(op.ops)
        jobs: list[tuple[int, Any]] = []
        for i, sub in enumerate(op.ops):
            if sub is not None and self.memories[i].suspect:
                job = asyncio.ensure_future(_job(self._last[i], self.clients[i], sub))
                self._last[i] = job
                jobs.append((i, job))
        slow = {i for i, _ in jobs}
        sent: list[tuple[int, Any, Eval | Call, str | int]] = []
        packer = Packer()
        try:
            for i, sub in fast_masters(op, slow):
                pool = self.clients[i].connection_pool
                try:
                    conn = await pool.get_connection()
                except Exception as exc:  # refused, unreachable: this master failed
                    replies[i] = exc
                    self.memories[i].suspect = True
                    continue
                packed, command = packer(conn, sub)
                sent.append((i, conn, sub, command))  # from here on, a cancellation closes it
                try:
                    await conn.send_packed_command(packed)
                except Exception as exc:
                    sent.pop()
                    await conn.disconnect(nowait=True)
                    await pool.release(conn)
                    replies[i] = exc
                    self.memories[i].suspect = True
                    continue
                _cancel_swallowed(task, cancels)
            while sent:
                i, conn, sub, command = sent[0]
                replies[i] = reply = await self._receive(
                    self.clients[i], conn, sub, command, deadline
                )
                sent.pop(0)
                if isinstance(reply, Exception) and not isinstance(reply, ResponseError):
                    self.memories[i].suspect = True
                _cancel_swallowed(task, cancels)
        finally:
            for i, conn, _, _ in sent:  # cancelled or failed half-way: do not reuse them
                await conn.disconnect(nowait=True)
                await self.clients[i].connection_pool.release(conn)
        if jobs:
            left = deadline - asyncio.get_running_loop().time()
            if left > 0:
                await asyncio.wait([job for _, job in jobs], timeout=left)
            settle(jobs, replies, self.memories)
        return replies

    @staticmethod
    async def _receive(
        client: Any, conn: Any, op: Eval | Call, command: str | int, deadline: float
    ) -> object:
        try:
            async with asyncio.timeout_at(deadline):
                try:
                    reply = await client.parse_response(conn, command)
                except NoScriptError:
                    # After SCRIPT FLUSH or a restart: EVAL sends the body (this master only).
                    assert isinstance(op, Eval)
                    n = len(op.keys)
                    await conn.send_command("EVAL", op.script.source, n, *op.keys, *op.args)
                    reply = await client.parse_response(conn, "EVAL")
        except ResponseError as exc:  # the connection is fine; the command failed
            reply = script_error(exc) or exc
        except TimeoutError:
            await conn.disconnect(nowait=True)
            reply = NodeLateError("no answer in time")
        except Exception as exc:
            await conn.disconnect(nowait=True)
            reply = exc
        await client.connection_pool.release(conn)
        return reply
