# SPDX-License-Identifier: MIT
"""The fan-out driver of the sync flavour: it sends one operation to each Redlock master at
once and gathers the replies (a :class:`~redislock._core.ops.FanOut`). Hand-written: its
asyncio twin :mod:`redislock.aio._fanout` uses tasks where this uses a thread pool."""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from collections.abc import Sequence
from typing import Any

from redislock._clients import NO_SCRIPT_ERRORS, RESPONSE_ERRORS
from redislock._core.ops import Call, Eval, FanOut, NodeLateError, script_error
from redislock._core.quorum import MasterMemory
from redislock._lanes import IDLE_CAP, Packer, Queued, round_decided
from redislock._registry import PerProcess
from redislock.sync._driver import execute
from redislock.sync._state import ClientState, state_of
from redislock.sync.renewer import Workers

__all__ = ["Masters"]


_MAX_THREADS = 64
"""Threads of the process-wide pool that runs the masters' lanes (at most one per master
at a time, however long it stalls)."""

_POOL: PerProcess[Workers] = PerProcess(lambda: Workers(_MAX_THREADS))

_BUSY = "not sent: the master is still busy with an earlier command"
_LATE = "no answer in time"


def _usable(conn: Any) -> bool:
    """Whether an idle connection of the fast path may carry the next command: connected
    (redis-py's ``is_connected``; valkey-py's sync connections lack it, and a closed one
    is found by the check that follows, which then connects it) and with nothing to read
    (data or EOF waiting on an idle connection: closed by the server, or stray data)."""
    if getattr(conn, "is_connected", True) is False:
        return False
    try:
        return not conn.can_read(timeout=0)
    except Exception:
        return False


def _drop(client: Any, conn: Any) -> None:
    """Close a connection of the fast path and give it back to its pool."""
    try:
        conn.disconnect()
    finally:
        with contextlib.suppress(
            Exception
        ):  # the pool was reset (closed, forked): nothing to give back
            client.connection_pool.release(conn)


def _read(
    client: Any, conn: Any, op: Eval | Call, command: str | int, deadline: float
) -> tuple[object, bool]:
    """One fast-path reply (its connection is readable); and whether ``conn`` may be
    reused."""
    try:
        try:
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


def _give_back(client: Any, memory: ClientState, conn: Any) -> None:
    """Keep a connection that answered for the next round's fast path."""
    lane = memory.lane
    with lane.guard:
        if len(lane.idle) < IDLE_CAP:
            lane.idle.append(conn)
            return
    client.connection_pool.release(conn)


def _warm(client: Any, memory: ClientState) -> None:
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


def _drain(client: Any, memory: ClientState, item: Queued | None) -> None:
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

    Fast path: a master that answered in time, whose lane is idle and which has an idle
    connection that is still connected gets the command written on it in the calling
    thread (``send_packed_command``); then the replies are read in turn, each within what
    is left of the round's shared deadline (no thread involved: the masters work on their
    commands at the same time, so the round takes about as long as its slowest master).
    Every other master - new, failed, late, or with no usable connection - goes through
    its :class:`~redislock._lanes.Lane`: a worker of a long-lived, process-wide pool of
    daemon threads runs the command with the master's own client (connecting,
    reconnecting and redis-py's retries with their back-off happen there), one command at
    a time per master, so a stalled master holds at most one thread. A round waits for the
    lanes until the deadline, or until ``op.decided`` says the outcome is known; a lane's
    late command finishes in the background (a release queued behind it runs after it).
    Health, run_id and lane are remembered per client (its
    :class:`~redislock.sync._state.ClientState`), across lock objects. The fast path keeps
    up to :data:`~redislock._lanes.IDLE_CAP` connections of each client's pool checked out
    (closing the client closes them).
    """

    __slots__ = ("clients", "labels", "masters")

    def __init__(self, clients: Sequence[Any], labels: tuple[str, ...]) -> None:
        self.clients = tuple(clients)
        self.labels = labels
        """One label per master (``host:port`` or socket path), in the order given."""
        self.masters: tuple[MasterMemory, ...] = tuple(state_of(c).master for c in self.clients)
        """What the quorum core remembers of each master (its run_id)."""

    def fan_out(self, op: FanOut) -> list[object]:
        """Send ``op.ops[i]`` to master ``i``, all at once; wait at most ``op.timeout``
        seconds in all. Returns per master its reply, its exception, or
        :class:`NodeLateError` (no answer in time, or not sent because the master is still
        busy with an earlier command: a fast-path connection is then closed, a lane's
        command finishes in the background)."""
        start = time.monotonic()
        deadline = start + op.timeout
        replies: list[object] = [None] * len(op.ops)
        states = [state_of(c) for c in self.clients]
        fast, slow = self._checkout(op.ops, states)
        sent: list[tuple[int, Any, Eval | Call, str | int]] = []
        jobs: dict[concurrent.futures.Future[Any], tuple[int, Queued]] = {}
        try:
            packer = Packer()
            while fast:
                i, conn, sub = fast.pop()
                try:
                    packed, command = packer(conn, sub)
                    conn.send_packed_command(packed, check_health=False)
                except Exception as exc:
                    _drop(self.clients[i], conn)
                    replies[i] = exc
                    states[i].suspect = True
                    continue
                sent.append((i, conn, sub, command))
            if slow:
                jobs = self._submit(slow, op, deadline, start, replies, states)
            if sent:
                self._receive(sent, deadline, replies, states)
        finally:
            # Only after an unexpected error: do not reuse what was sent, give back the rest.
            for i, conn, _, _ in sent:
                _drop(self.clients[i], conn)
            for i, conn, _ in fast:
                _give_back(self.clients[i], states[i], conn)
        if jobs:
            self._gather(jobs, op, deadline, replies, states)
        return replies

    def _checkout(
        self, ops: Sequence[Eval | Call | None], states: list[ClientState]
    ) -> tuple[list[tuple[int, Any, Eval | Call]], list[tuple[int, Eval | Call]]]:
        """Split a round: the masters that get their command on a connection of the fast
        path, and the others (their lanes). A master goes the fast path if it is not
        suspect, its lane is idle (what it runs must not be overtaken) and it has an idle
        connection that is usable (:func:`_usable`). Never connects (connecting may block
        for the whole connect timeout, and redis-py retries it with back-off): the lane
        does that."""
        fast: list[tuple[int, Any, Eval | Call]] = []
        slow: list[tuple[int, Eval | Call]] = []
        for i, sub in enumerate(ops):
            if sub is None:
                continue
            state = states[i]
            lane = state.lane
            conn = None
            with lane.guard:
                if not state.suspect and not lane.running and lane.idle:
                    conn = lane.idle.pop()
            if conn is None:
                slow.append((i, sub))
            elif _usable(conn):
                fast.append((i, conn, sub))
            else:
                _drop(self.clients[i], conn)
                slow.append((i, sub))
        return fast, slow

    def _receive(
        self,
        sent: list[tuple[int, Any, Eval | Call, str | int]],
        deadline: float,
        replies: list[object],
        states: list[ClientState],
    ) -> None:
        """Read the fast path's replies in turn, each within what is left until
        ``deadline``; a master with no answer by then is late (its connection is
        closed). Empties ``sent``."""
        while sent:
            i, conn, sub, command = sent.pop(0)
            left = deadline - time.monotonic()
            try:
                ready = left > 0 and bool(conn.can_read(timeout=left))
            except Exception as exc:  # closed or broken: the connection error is the reply
                replies[i] = exc
                ready = False
            else:
                if not ready:
                    replies[i] = NodeLateError(_LATE)
            if ready:
                reply, keep = _read(self.clients[i], conn, sub, command, deadline)
                replies[i] = reply
                if keep:
                    _give_back(self.clients[i], states[i], conn)
                    continue
            _drop(self.clients[i], conn)
            states[i].suspect = True

    def _submit(
        self,
        slow: list[tuple[int, Eval | Call]],
        op: FanOut,
        deadline: float,
        now: float,
        replies: list[object],
        states: list[ClientState],
    ) -> dict[concurrent.futures.Future[Any], tuple[int, Queued]]:
        """Hand each of ``slow`` to its master's lane; a refused one is late at once."""
        jobs: dict[concurrent.futures.Future[Any], tuple[int, Queued]] = {}
        for i, sub in slow:
            memory = states[i]
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
                _POOL.get().submit(_drain, self.clients[i], memory, item)
            jobs[job] = (i, item)
        return jobs

    def _gather(
        self,
        jobs: dict[concurrent.futures.Future[Any], tuple[int, Queued]],
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
            lane = states[i].lane
            with lane.guard:
                withdrawn = lane.withdraw(item)
            if withdrawn:
                _late(item, _BUSY)
            elif over:
                states[i].suspect = True
