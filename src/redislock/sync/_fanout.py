# SPDX-License-Identifier: MIT
"""The fan-out driver of the sync flavour: it sends one operation to each Redlock master at
once and gathers the replies (a :class:`~redislock._core.ops.FanOut`). Hand-written: its
asyncio twin :mod:`redislock.aio._fanout` uses tasks where this uses a thread pool."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from redislock._core.ops import Call, Eval, FanOut, NodeLateError, script_error
from redislock._core.quorum import Packer, fast_masters, memory_of, settle
from redislock.sync._driver import execute
from redislock.sync.renewer import Workers

__all__ = ["Masters"]


_MAX_THREADS = 64
"""Threads of the process-wide pool for suspect masters; a hung one holds a thread until
its client's socket_timeout fires."""

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


def _job(
    future: concurrent.futures.Future[Any],
    before: concurrent.futures.Future[Any] | None,
    client: Any,
    op: Eval | Call,
) -> None:
    if before is not None and not before.done():
        concurrent.futures.wait([before])  # this master's previous command goes first
    try:
        future.set_result(execute(client, op))
    except BaseException as exc:
        future.set_exception(exc)


class Masters:
    """The masters of one Redlock, contacted all at once.

    A master that answered its last command in time takes the fast path: the command is
    written to a pooled, connected connection, and the replies of all such masters are read
    as they come, up to a shared deadline (no thread involved). A master that is new, or
    that failed or answered late, is suspect: its command runs on a thread of a long-lived,
    process-wide pool of daemon threads (never a new pool per call), because connecting to
    a stalled server can block for its whole socket timeout. A suspect master's commands
    run in order, each after the one before, so a release never overtakes the acquire it
    undoes; it takes the fast path again once it answers in time. Health and run_id are
    remembered per client (:func:`memory_of`), across lock objects.
    """

    __slots__ = ("_guard", "_last", "clients", "labels", "memories")

    def __init__(self, clients: Sequence[Any], labels: tuple[str, ...]) -> None:
        self.clients = tuple(clients)
        self.labels = labels
        """One label per master (``host:port`` or socket path), in the order given."""
        self.memories = tuple(memory_of(c) for c in self.clients)
        self._last: list[concurrent.futures.Future[Any] | None] = [None] * len(self.clients)
        self._guard = threading.Lock()

    def fan_out(self, op: FanOut) -> list[object]:
        """Send ``op.ops[i]`` to master ``i``, all at once; wait at most ``op.timeout``
        seconds in all. Returns per master its reply, its exception, or
        :class:`NodeLateError` (no answer in time: a fast-path connection is closed, a
        thread's command finishes in the background)."""
        deadline = time.monotonic() + op.timeout
        replies: list[object] = [None] * len(op.ops)
        jobs: list[tuple[int, Any]] = []
        with self._guard:
            for i, sub in enumerate(op.ops):
                if sub is not None and self.memories[i].suspect:
                    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
                    before, self._last[i] = self._last[i], future
                    _workers().submit(_job, future, before, self.clients[i], sub)
                    jobs.append((i, future))
        slow = {i for i, _ in jobs}
        packer = Packer()
        sent: list[tuple[int, Any, Eval | Call, str | int]] = []
        try:
            for i, sub in fast_masters(op, slow):
                pool = self.clients[i].connection_pool
                try:
                    conn = pool.get_connection()
                except Exception as exc:  # refused, unreachable: this master failed
                    replies[i] = exc
                    self.memories[i].suspect = True
                    continue
                try:
                    packed, command = packer(conn, sub)
                    conn.send_packed_command(packed)
                except Exception as exc:
                    conn.disconnect()
                    pool.release(conn)
                    replies[i] = exc
                    self.memories[i].suspect = True
                    continue
                sent.append((i, conn, sub, command))
            while sent:
                i, conn, sub, command = sent.pop(0)
                replies[i] = reply = self._receive(self.clients[i], conn, sub, command, deadline)
                if isinstance(reply, Exception) and not isinstance(reply, ResponseError):
                    self.memories[i].suspect = True
        finally:
            for i, conn, _, _ in sent:  # only after an unexpected error: do not reuse them
                conn.disconnect()
                self.clients[i].connection_pool.release(conn)
        if jobs:
            left = max(0.0, deadline - time.monotonic())
            concurrent.futures.wait([job for _, job in jobs], timeout=left)
            settle(jobs, replies, self.memories)
        return replies

    @staticmethod
    def _receive(
        client: Any, conn: Any, op: Eval | Call, command: str | int, deadline: float
    ) -> object:
        pool = client.connection_pool
        try:
            if not conn.can_read(timeout=max(0.0, deadline - time.monotonic())):
                conn.disconnect()
                return NodeLateError("no answer in time")
            try:
                return client.parse_response(conn, command)
            except NoScriptError:
                # After SCRIPT FLUSH or a restart: EVAL sends the body (this master only).
                assert isinstance(op, Eval)
                n = len(op.keys)
                conn.send_command("EVAL", op.script.source, n, *op.keys, *op.args)
                return client.parse_response(conn, "EVAL")
        except ResponseError as exc:  # the connection is fine; the command failed
            return script_error(exc) or exc
        except Exception as exc:
            conn.disconnect()
            return exc
        finally:
            pool.release(conn)
