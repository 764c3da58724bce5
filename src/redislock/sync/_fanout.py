# SPDX-License-Identifier: MIT
"""The fan-out driver of the sync flavour: it sends one operation to each Redlock master at
once and gathers the replies (a :class:`~redislock._core.ops.FanOut`). Hand-written: its
asyncio twin :mod:`redislock.aio._fanout` uses tasks where this uses a thread pool."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import select
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import hiredis

from redislock._clients import NO_SCRIPT_ERRORS, RESPONSE_ERRORS, family_of
from redislock._core.ops import Call, Eval, FanOut, NodeLateError, script_error
from redislock._core.quorum import (
    IDLE_CAP,
    MasterMemory,
    Packer,
    Queued,
    memory_of,
    round_decided,
)
from redislock.sync._driver import execute
from redislock.sync.renewer import Workers

__all__ = ["Masters"]


_MAX_THREADS = 64
"""Threads of the process-wide pool that runs the masters' lanes (at most one per master
at a time, however long it stalls)."""

_pool: Workers | None = None
_pool_guard = threading.Lock()


def _workers() -> Workers:
    global _pool
    with _pool_guard:
        if _pool is None:
            _pool = Workers(_MAX_THREADS)
        return _pool


def _forget_in_child() -> None:
    global _pool, _pool_guard
    _pool = None
    _pool_guard = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)

_READ_SIZE = 65536

_BUSY = "not sent: the master is still busy with an earlier command"
_LATE = "no answer in time"


def _connection_error(conn: Any, text: str) -> Exception:
    """The ``ConnectionError`` of the library of ``conn`` (redis-py's or valkey-py's), as
    its own code would raise it."""
    error: Exception = family_of(conn).errors.ConnectionError(text)
    return error


def _connected(conn: Any) -> bool:
    found = getattr(conn, "is_connected", None)
    if isinstance(found, bool):
        return found
    return getattr(conn, "_sock", None) is not None


def _drop(client: Any, conn: Any) -> None:
    """Close a connection of the fast path and give it back to its pool."""
    try:
        conn.disconnect()
    finally:
        with contextlib.suppress(
            Exception
        ):  # the pool was reset (closed, forked): nothing to give back
            client.connection_pool.release(conn)


def _fileno(conn: Any) -> int:
    """The socket's file descriptor of a connected connection, or -1."""
    if not _connected(conn):
        return -1
    try:
        return int(conn._sock.fileno())
    except Exception:
        return -1


def _send(conn: Any, packed: Any) -> None:
    """Write a packed command. On a plain socket one ``os.write`` (a socket with a timeout
    - redis-py's default - polls before each ``sendall``, one more system call); the rest,
    if any, and TLS go through ``send_packed_command``."""
    sock = conn._sock
    if type(sock) is socket.socket:
        data = packed[0] if len(packed) == 1 else b"".join(packed)
        try:
            done = os.write(sock.fileno(), data)
        except BlockingIOError:
            done = 0
        except OSError as exc:
            conn.disconnect()
            raise _connection_error(conn, f"Error while writing to socket: {exc}") from exc
        if done == len(data):
            return
        packed = [memoryview(data)[done:]]
    conn.send_packed_command(packed, check_health=False)


def _pull(conn: Any) -> None:
    """Move what a readable connection's socket holds into its hiredis reader with one
    ``os.read``, so redis-py parses the reply without reading the socket again (a socket
    with a timeout polls before each ``recv``). Does nothing where that cannot be done
    (TLS, the pure-Python parser): redis-py then reads the socket itself."""
    sock = conn._sock
    reader = getattr(getattr(conn, "_parser", None), "_reader", None)
    if type(sock) is not socket.socket or not isinstance(reader, hiredis.Reader):
        return
    try:
        data = os.read(sock.fileno(), _READ_SIZE)
    except BlockingIOError:
        return
    except OSError as exc:
        conn.disconnect()
        raise _connection_error(conn, f"Error while reading from socket: {exc}") from exc
    if not data:
        conn.disconnect()
        raise _connection_error(conn, "Connection closed by server.")
    reader.feed(data)


def _read(
    client: Any, conn: Any, op: Eval | Call, command: str | int, deadline: float
) -> tuple[object, bool]:
    """One fast-path reply (its connection is readable); and whether ``conn`` may be
    reused."""
    try:
        try:
            _pull(conn)
            return client.parse_response(conn, command), True
        except NO_SCRIPT_ERRORS:
            # After SCRIPT FLUSH or a restart: EVAL sends the body (this master only).
            assert isinstance(op, Eval)
            n = len(op.keys)
            conn.send_command("EVAL", op.script.source, n, *op.keys, *op.args)
            if not conn.can_read(timeout=max(0.0, deadline - time.monotonic())):
                conn.disconnect()
                return NodeLateError(_LATE), False
            return client.parse_response(conn, "EVAL"), True
    except RESPONSE_ERRORS as exc:  # the connection is fine; the command failed
        return script_error(exc) or exc, True
    except Exception as exc:
        conn.disconnect()
        return exc, False


def _give_back(client: Any, memory: MasterMemory, conn: Any) -> None:
    """Keep a connection that answered for the next round's fast path."""
    lane = memory.lane
    with lane.guard:
        if len(lane.idle) < IDLE_CAP:
            lane.idle.append(conn)
            return
    client.connection_pool.release(conn)


def _warm(client: Any, memory: MasterMemory) -> None:
    """After the lane got an answer: check a connection out of the client's pool for the
    fast path, if the lane has none (a pooled one is connected already: no I/O then)."""
    lane = memory.lane
    with lane.guard:
        if lane.idle:
            return
    try:
        conn = client.connection_pool.get_connection()
    except Exception:
        return
    _give_back(client, memory, conn)


def _late(item: Queued, why: str) -> None:
    item.job.set_exception(NodeLateError(why))


def _drain(client: Any, memory: MasterMemory, item: Queued | None) -> None:
    """A lane's worker: run ``item``, then the lane's queued commands, one at a time."""
    lane = memory.lane
    while item is not None:
        began = time.monotonic()
        reply: Any = None
        failure: BaseException | None = None
        try:
            reply = execute(client, item.op)
        except BaseException as exc:  # handed to the round; a worker thread never dies
            failure = exc
        if failure is None or isinstance(failure, RESPONSE_ERRORS):
            _warm(client, memory)
            if time.monotonic() - began <= item.timeout:
                memory.suspect = False  # healthy again: the fast path next time
        else:
            memory.suspect = True
        with lane.guard:  # idle before the reply is seen, so the next round may go fast
            following, expired = lane.next(time.monotonic())
        if failure is None:
            item.job.set_result(reply)
        else:
            item.job.set_exception(failure)
        for gone in expired:
            _late(gone, _BUSY)
        item = following


class Masters:
    """The masters of one Redlock, contacted all at once.

    Fast path: a master that answered in time, whose lane is idle and which has a connection
    known to be connected gets the command written on it in the calling thread; the replies
    of all such masters are read as they come, up to a shared deadline (no thread
    involved). Every other master - new, failed, late, or with no connected connection -
    goes through its :class:`~redislock._core.quorum.Lane`: a worker of a long-lived,
    process-wide pool of daemon threads runs the command with the master's own client
    (connecting, reconnecting and redis-py's retries with their back-off happen there),
    one command at a time per master, so a stalled master holds at most one thread. A
    round waits for the lanes until the deadline, or until ``op.decided`` says the outcome
    is known; a lane's late command finishes in the background (a release queued behind it
    runs after it). Health, run_id and lane are remembered per client (:func:`memory_of`),
    across lock objects. The fast path keeps up to
    :data:`~redislock._core.quorum.IDLE_CAP` connections of each client's pool checked
    out (closing the client closes them).
    """

    __slots__ = ("clients", "labels", "memories")

    def __init__(self, clients: Sequence[Any], labels: tuple[str, ...]) -> None:
        self.clients = tuple(clients)
        self.labels = labels
        """One label per master (``host:port`` or socket path), in the order given."""
        self.memories = tuple(memory_of(c) for c in self.clients)

    def fan_out(self, op: FanOut) -> list[object]:
        """Send ``op.ops[i]`` to master ``i``, all at once; wait at most ``op.timeout``
        seconds in all. Returns per master its reply, its exception, or
        :class:`NodeLateError` (no answer in time, or not sent because the master is still
        busy with an earlier command: a fast-path connection is then closed, a lane's
        command finishes in the background)."""
        start = time.monotonic()
        deadline = start + op.timeout
        replies: list[object] = [None] * len(op.ops)
        poller = select.poll()
        fast, slow = self._checkout(op.ops, poller)
        sent: dict[int, tuple[int, Any, Eval | Call, str | int]] = {}
        jobs: dict[concurrent.futures.Future[Any], tuple[int, Queued]] = {}
        try:
            packer = Packer()
            while fast:
                fd, i, conn, sub = fast.pop()
                try:
                    packed, command = packer(conn, sub)
                    _send(conn, packed)
                except Exception as exc:
                    poller.unregister(fd)
                    _drop(self.clients[i], conn)
                    replies[i] = exc
                    self.memories[i].suspect = True
                    continue
                sent[fd] = (i, conn, sub, command)
            if slow:
                jobs = self._submit(slow, op, deadline, start, replies)
            if sent:
                self._receive(poller, sent, deadline, replies)
        finally:
            # Only after an unexpected error: do not reuse what was sent, give back the rest.
            for i, conn, _, _ in sent.values():
                _drop(self.clients[i], conn)
            for _, i, conn, _ in fast:
                _give_back(self.clients[i], self.memories[i], conn)
        if jobs:
            self._gather(jobs, op, deadline, replies)
        return replies

    def _checkout(
        self, ops: Sequence[Eval | Call | None], poller: Any
    ) -> tuple[list[tuple[int, int, Any, Eval | Call]], list[tuple[int, Eval | Call]]]:
        """Split a round: the masters that get their command on a connection of the fast
        path (registered with ``poller``), and the others (their lanes). A master goes the
        fast path if it is not suspect, its lane is idle (what it runs must not be
        overtaken) and it has a connection known to be connected; one ``poll`` for all of
        them checks that none of those connections was closed by its server (or has stray
        data). Never connects (connecting may block for the whole connect timeout, and
        redis-py retries it with back-off): the lane does that."""
        fast: list[tuple[int, int, Any, Eval | Call]] = []
        slow: list[tuple[int, Eval | Call]] = []
        for i, sub in enumerate(ops):
            if sub is None:
                continue
            memory = self.memories[i]
            lane = memory.lane
            conn = None
            with lane.guard:
                if not memory.suspect and not lane.running and lane.idle:
                    conn = lane.idle.pop()
            fd = -1 if conn is None else _fileno(conn)
            if fd < 0:
                if conn is not None:
                    _drop(self.clients[i], conn)
                slow.append((i, sub))
                continue
            poller.register(fd, select.POLLIN)
            fast.append((fd, i, conn, sub))
        if fast:
            # Readable while idle: closed by the server (or stray data). Not usable as it is.
            stale = {fd for fd, _ in poller.poll(0)}
            if stale:
                keep = []
                for entry in fast:
                    fd, i, conn, sub = entry
                    if fd in stale:
                        poller.unregister(fd)
                        _drop(self.clients[i], conn)
                        slow.append((i, sub))
                    else:
                        keep.append(entry)
                fast = keep
        return fast, slow

    def _receive(
        self,
        poller: Any,
        sent: dict[int, tuple[int, Any, Eval | Call, str | int]],
        deadline: float,
        replies: list[object],
    ) -> None:
        """Read the fast path's replies as they come (one ``poll`` for all the masters that
        have not answered yet), up to ``deadline``; a master with no answer by then is late
        (its connection is closed)."""
        while sent:
            left = deadline - time.monotonic()
            ready = poller.poll(left * 1000.0 if left > 0 else 0)
            for fd, _ in ready:
                poller.unregister(fd)
                i, conn, sub, command = sent.pop(fd)
                reply, keep = _read(self.clients[i], conn, sub, command, deadline)
                replies[i] = reply
                if keep:
                    _give_back(self.clients[i], self.memories[i], conn)
                else:
                    _drop(self.clients[i], conn)
                    self.memories[i].suspect = True
            if not ready or left <= 0:
                break
        while sent:
            _, (i, conn, _, _) = sent.popitem()
            replies[i] = NodeLateError(_LATE)
            _drop(self.clients[i], conn)
            self.memories[i].suspect = True

    def _submit(
        self,
        slow: list[tuple[int, Eval | Call]],
        op: FanOut,
        deadline: float,
        now: float,
        replies: list[object],
    ) -> dict[concurrent.futures.Future[Any], tuple[int, Queued]]:
        """Hand each of ``slow`` to its master's lane; a refused one is late at once."""
        jobs: dict[concurrent.futures.Future[Any], tuple[int, Queued]] = {}
        for i, sub in slow:
            memory = self.memories[i]
            job: concurrent.futures.Future[Any] = concurrent.futures.Future()
            item = Queued(sub, job, deadline, op.timeout, op.cleanup)
            with memory.lane.guard:
                verdict, expired = memory.lane.admit(item, now)
            for gone in expired:
                _late(gone, _BUSY)
            if verdict == "refused":
                replies[i] = NodeLateError(_BUSY)
                continue
            if verdict == "start":
                _workers().submit(_drain, self.clients[i], memory, item)
            jobs[job] = (i, item)
        return jobs

    def _gather(
        self,
        jobs: dict[concurrent.futures.Future[Any], tuple[int, Queued]],
        op: FanOut,
        deadline: float,
        replies: list[object],
    ) -> None:
        """Wait for the lanes' answers until the deadline or until ``op.decided``."""
        waiting = set(jobs)
        while waiting and not round_decided(op, replies, {jobs[job][0] for job in waiting}):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            done, _ = concurrent.futures.wait(
                waiting, timeout=left, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for job in done:
                waiting.discard(job)
                failure = job.exception()
                replies[jobs[job][0]] = failure if failure is not None else job.result()
        over = time.monotonic() >= deadline
        for job in waiting:
            i, item = jobs[job]
            replies[i] = NodeLateError(_LATE)
            lane = self.memories[i].lane
            with lane.guard:
                withdrawn = lane.withdraw(item)
            if withdrawn:
                _late(item, _BUSY)
            elif over:
                self.memories[i].suspect = True
