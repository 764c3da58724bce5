# SPDX-License-Identifier: MIT
"""The fan-out driver of the asyncio flavour: it sends one operation to each Redlock master
at once and gathers the replies (a :class:`~redislock._core.ops.FanOut`). Hand-written:
its sync twin :mod:`redislock.sync._fanout` uses a thread pool where this uses tasks."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Sequence
from typing import Any

from redislock._clients import NO_SCRIPT_ERRORS, RESPONSE_ERRORS
from redislock._core.ops import Call, Eval, FanOut, NodeLateError, script_error
from redislock._core.quorum import MasterMemory
from redislock._lanes import IDLE_CAP, Lane, Packer, Queued, round_decided
from redislock.aio._driver import execute
from redislock.aio._state import ClientState, state_of

__all__ = ["AsyncMasters"]

_BUSY = "not sent: the master is still busy with an earlier command"
_LATE = "no answer in time"

_workers: set[asyncio.Task[None]] = set()
"""The lanes' running tasks (the event loop keeps only weak references to tasks)."""


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


def _consume(job: asyncio.Future[Any]) -> None:
    if not job.cancelled():
        job.exception()  # read, so an answer nobody waited for is not logged as lost


def _lane(memory: ClientState, loop: asyncio.AbstractEventLoop) -> Lane:
    """The master's lane on ``loop`` (a client used on a new event loop gets a new one)."""
    lane = memory.lane
    if lane.owner is not loop:
        if lane.owner is not None:
            memory.suspect = True
        lane = memory.lane = Lane()
        lane.owner = loop
    return lane


async def _drop(client: Any, conn: Any) -> None:
    """Close a connection of the fast path and give it back to its pool."""
    try:
        await conn.disconnect(nowait=True)
    finally:
        with contextlib.suppress(Exception):  # the pool was reset (closed): nothing to give back
            await client.connection_pool.release(conn)


async def _readable(conn: Any) -> bool:
    """Whether an idle connection has data or EOF waiting (redis-py 8's ``can_read``; older
    versions only have ``can_read_destructive``)."""
    probe = getattr(conn, "can_read", None) or conn.can_read_destructive
    return bool(await probe())


async def _checkout(client: Any, memory: ClientState, lane: Lane) -> Any:
    """A connected connection for the fast path, or None: the master is suspect, its lane is
    busy (what it runs must not be overtaken), or it has no connection known to work. Never
    connects (connecting may take the whole connect timeout, and redis-py retries it with
    back-off): the lane does that."""
    if memory.suspect or lane.running or not lane.idle:
        return None
    conn = lane.idle.pop()
    try:
        # Readable while idle: closed by the server (or stray data). Not usable as it is.
        if conn.is_connected and not await _readable(conn):
            return conn
    except Exception:
        pass
    await _drop(client, conn)
    return None


async def _give_back(client: Any, lane: Lane, conn: Any) -> None:
    """Keep a connection that answered for the next round's fast path."""
    if len(lane.idle) < IDLE_CAP:
        lane.idle.append(conn)
    else:
        await client.connection_pool.release(conn)


async def _warm(client: Any, lane: Lane) -> None:
    """After the lane got an answer: check a connection out of the client's pool for the
    fast path, if the lane has none (a pooled one is connected already: no I/O then)."""
    if lane.idle:
        return
    try:
        conn = await client.connection_pool.get_connection()
    except Exception:
        return
    await _give_back(client, lane, conn)


def _late(item: Queued, why: str) -> None:
    if not item.job.done():
        item.job.set_exception(NodeLateError(why))


async def _drain(client: Any, memory: ClientState, lane: Lane, item: Queued | None) -> None:
    """A lane's worker task: run ``item``, then the lane's queued commands, one at a time."""
    while item is not None:
        began = time.monotonic()
        reply: Any = None
        failure: BaseException | None = None
        try:
            reply = await execute(client, item.op)
        except asyncio.CancelledError:  # the loop is closing: answer what is left as late
            _late(item, _LATE)
            while lane.queue:
                _late(lane.queue.popleft(), _LATE)
            lane.running, lane.since = False, None
            raise
        except Exception as exc:  # handed to the round
            failure = exc
        if failure is None or isinstance(failure, RESPONSE_ERRORS):
            await _warm(client, lane)
            if time.monotonic() - began <= item.timeout:
                memory.suspect = False  # healthy again: the fast path next time
        else:
            memory.suspect = True
        following, expired = lane.next(time.monotonic())  # idle before the reply is seen
        if not item.job.done():
            if failure is None:
                item.job.set_result(reply)
            else:
                item.job.set_exception(failure)
        for gone in expired:
            _late(gone, _BUSY)
        item = following


def _loop_time(deadline: float) -> float:
    """``deadline`` (``time.monotonic()``) on the running loop's clock."""
    return asyncio.get_running_loop().time() + (deadline - time.monotonic())


async def _read(client: Any, conn: Any, op: Eval | Call, command: str | int) -> tuple[object, bool]:
    """One fast-path reply (no timeout of its own: the caller's); and whether ``conn`` may
    be reused."""
    try:
        try:
            reply = await conn.read_response(timeout=math.inf)
        except NO_SCRIPT_ERRORS:
            # After SCRIPT FLUSH or a restart: EVAL sends the body (this master only).
            assert isinstance(op, Eval)
            n = len(op.keys)
            await conn.send_command("EVAL", op.script.source, n, *op.keys, *op.args)
            command = "EVAL"
            reply = await conn.read_response(timeout=math.inf)
        callback = client.response_callbacks.get(command)
        return (reply if callback is None else callback(reply)), True
    except RESPONSE_ERRORS as exc:  # the connection is fine; the command failed
        return script_error(exc) or exc, True
    except (TimeoutError, asyncio.CancelledError):
        raise
    except Exception as exc:
        return exc, False


async def _read_now(
    client: Any, conn: Any, op: Eval | Call, command: str | int
) -> tuple[object, bool]:
    """After the round's deadline: the reply if it is in the connection's buffer already,
    else late."""
    try:
        if await _readable(conn):
            async with asyncio.timeout(0):  # what is buffered is read without waiting
                return await _read(client, conn, op, command)
    except Exception:
        pass
    return NodeLateError(_LATE), False


class AsyncMasters:
    """The masters of one AsyncRedlock, contacted all at once.

    Fast path: a master that answered in time, whose lane is idle and which has a connection
    known to be connected gets the command written on it by the calling task; the replies
    of all such masters are read as they come, up to a shared deadline (no task per
    master). Every other master - new, failed, late, or with no connected connection - goes
    through its :class:`~redislock._core.quorum.Lane`: one task per master runs the command
    with the master's own client (connecting, reconnecting and redis-py's retries with
    their back-off happen there), one command at a time, so a stalled master holds at most
    one task. A round waits for the lanes until the deadline, or until ``op.decided`` says
    the outcome is known; a lane's late command finishes in the background (a release
    queued behind it runs after it). The fast path keeps up to
    :data:`~redislock._core.quorum.IDLE_CAP` connections of each client's pool checked
    out (closing the client closes them).
    """

    __slots__ = ("clients", "labels", "masters")

    def __init__(self, clients: Sequence[Any], labels: tuple[str, ...]) -> None:
        self.clients = tuple(clients)
        self.labels = labels
        """One label per master (``host:port`` or socket path), in the order given."""
        self.masters: tuple[MasterMemory, ...] = tuple(state_of(c).master for c in self.clients)
        """What the quorum core remembers of each master (its run_id)."""

    async def fan_out(self, op: FanOut) -> list[object]:
        """Send ``op.ops[i]`` to master ``i``, all at once; wait at most ``op.timeout``
        seconds in all. Returns per master its reply, its exception, or
        :class:`NodeLateError` (no answer in time: a fast-path connection is then closed,
        a lane's command finishes in the background; or not sent because the master is
        still busy with an earlier command).
        """
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        deadline = start + op.timeout
        task = asyncio.current_task()
        cancels = 0 if task is None else task.cancelling()
        replies: list[object] = [None] * len(op.ops)
        states = [state_of(c) for c in self.clients]
        lanes = [_lane(st, loop) for st in states]
        fast: list[tuple[int, Any, Eval | Call]] = []
        slow: list[tuple[int, Eval | Call]] = []
        sent: list[tuple[int, Any, Eval | Call, str | int]] = []
        jobs: dict[asyncio.Future[Any], tuple[int, Queued]] = {}
        packer = Packer()
        try:
            for i, sub in enumerate(op.ops):
                if sub is None:
                    continue
                conn = await _checkout(self.clients[i], states[i], lanes[i])
                if conn is None:
                    slow.append((i, sub))
                else:
                    fast.append((i, conn, sub))
            while fast:
                i, conn, sub = fast.pop()
                packed, command = packer(conn, sub)
                sent.append((i, conn, sub, command))  # from here on, a cancellation closes it
                try:
                    await conn.send_packed_command(packed, check_health=False)
                    _cancel_swallowed(task, cancels)
                except Exception as exc:
                    sent.pop()
                    await _drop(self.clients[i], conn)
                    replies[i] = exc
                    states[i].suspect = True
            if slow:
                jobs = self._submit(slow, lanes, op, deadline, start, replies, states)
            if sent:
                await self._receive(sent, lanes, deadline, replies, states)
                _cancel_swallowed(task, cancels)
        finally:
            for i, conn, _, _ in sent:  # cancelled or failed half-way: do not reuse them
                await _drop(self.clients[i], conn)
            for i, conn, _ in fast:  # checked out, never sent (cancelled before)
                await _give_back(self.clients[i], lanes[i], conn)
        if jobs:
            await self._gather(jobs, op, deadline, replies, states)
        return replies

    async def _receive(
        self,
        sent: list[tuple[int, Any, Eval | Call, str | int]],
        lanes: list[Lane],
        deadline: float,
        replies: list[object],
        states: list[ClientState],
    ) -> None:
        """Read the fast path's replies in turn, all under one timeout that ends at
        ``deadline`` (the others' replies arrive meanwhile and wait in their buffers); after
        it, a reply already in its buffer is still taken, a master with none is late (its
        connection is closed). Removes each master it read from ``sent``."""
        got: list[tuple[int, Any, object, bool]] = []
        try:
            try:
                async with asyncio.timeout_at(_loop_time(deadline)):
                    while sent:
                        i, conn, sub, command = sent[-1]
                        reply, keep = await _read(self.clients[i], conn, sub, command)
                        sent.pop()
                        got.append((i, conn, reply, keep))
            except TimeoutError:
                i, conn, _, _ = sent.pop()  # its read was cut short: redis-py closed it
                got.append((i, conn, NodeLateError(_LATE), False))
                while sent:
                    i, conn, sub, command = sent[-1]
                    reply, keep = await _read_now(self.clients[i], conn, sub, command)
                    sent.pop()
                    got.append((i, conn, reply, keep))
        finally:
            for i, conn, reply, keep in got:
                replies[i] = reply
                if keep:
                    await _give_back(self.clients[i], lanes[i], conn)
                else:
                    await _drop(self.clients[i], conn)
                    states[i].suspect = True

    def _submit(
        self,
        slow: list[tuple[int, Eval | Call]],
        lanes: list[Lane],
        op: FanOut,
        deadline: float,
        now: float,
        replies: list[object],
        states: list[ClientState],
    ) -> dict[asyncio.Future[Any], tuple[int, Queued]]:
        """Hand each of ``slow`` to its master's lane; a refused one is late at once."""
        jobs: dict[asyncio.Future[Any], tuple[int, Queued]] = {}
        loop = asyncio.get_running_loop()
        for i, sub in slow:
            lane = lanes[i]
            job: asyncio.Future[Any] = loop.create_future()
            job.add_done_callback(_consume)
            item = Queued(sub, job, deadline, op.timeout, op.cleanup)
            verdict, expired = lane.admit(item, now)
            for gone in expired:
                _late(gone, _BUSY)
            if verdict == "refused":
                replies[i] = NodeLateError(_BUSY)
                continue
            if verdict == "start":
                worker = loop.create_task(_drain(self.clients[i], states[i], lane, item))
                _workers.add(worker)
                worker.add_done_callback(_workers.discard)
            jobs[job] = (i, item)
        return jobs

    async def _gather(
        self,
        jobs: dict[asyncio.Future[Any], tuple[int, Queued]],
        op: FanOut,
        deadline: float,
        replies: list[object],
        states: list[ClientState],
    ) -> None:
        """Wait for the lanes' answers until the deadline or until ``op.decided``."""
        waiting = set(jobs)
        while waiting and not round_decided(op, replies, {jobs[job][0] for job in waiting}):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            done, _ = await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            for job in done:
                waiting.discard(job)
                failure = NodeLateError("cancelled") if job.cancelled() else job.exception()
                replies[jobs[job][0]] = failure if failure is not None else job.result()
        over = time.monotonic() >= deadline
        for job in waiting:
            i, item = jobs[job]
            replies[i] = NodeLateError(_LATE)
            if states[i].lane.withdraw(item):
                _late(item, _BUSY)
            elif over:
                states[i].suspect = True
