# SPDX-License-Identifier: MIT
"""``AsyncRedlock``: the asyncio flavour of :class:`redislock.Redlock`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio
from redis.exceptions import NoScriptError, ResponseError

from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.lock import DEFAULT_RECHECK, DEFAULT_WATCHDOG_LEASE
from redislock._core.ops import Call, Eval, FanOut, NodeLateError, script_error
from redislock._core.quorum import (
    DEFAULT_DRIFT_FACTOR,
    DEFAULT_RETRY_DELAY,
    RedlockCore,
    check_masters,
    known_run_ids,
    memory_of,
    remember_run_ids,
)
from redislock.aio._driver import _execute
from redislock.aio.lock import AsyncLock
from redislock.errors import LockUsageError

__all__ = ["AsyncMasters", "AsyncRedlock"]


class _Packer:
    """Packs each distinct command of one fan-out once (the masters usually get the same
    one), per encoding."""

    __slots__ = ("_done",)

    def __init__(self) -> None:
        self._done: dict[tuple[int, str, str], Any] = {}

    def __call__(self, conn: Any, op: Eval | Call) -> Any:
        enc = conn.encoder
        key = (id(op), enc.encoding, enc.encoding_errors)
        found = self._done.get(key)
        if found is None:
            found = self._done[key] = conn.pack_command(*_wire(op))
        return found


def _wire(op: Eval | Call) -> tuple[str | int, ...]:
    if isinstance(op, Eval):
        return ("EVALSHA", op.script.sha, len(op.keys), *op.keys, *op.args)
    return op.args


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
    return await _execute(client, op)


def _consume(task: asyncio.Future[Any]) -> None:
    # A late answer nobody reads: fetch its exception so asyncio does not log it.
    if not task.cancelled():
        task.exception()


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

    __slots__ = ("_last", "_memory", "clients")

    def __init__(self, clients: Sequence[Any]) -> None:
        self.clients = tuple(clients)
        self._memory = [memory_of(c) for c in self.clients]
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
        threaded: list[tuple[int, asyncio.Future[Any]]] = []
        for i, sub in enumerate(op.ops):
            if sub is not None and self._memory[i].suspect:
                job = asyncio.ensure_future(_job(self._last[i], self.clients[i], sub))
                self._last[i] = job
                threaded.append((i, job))
        slow = {i for i, _ in threaded}
        sent: list[tuple[int, Any, Eval | Call]] = []
        packed = _Packer()
        try:
            for i, sub in enumerate(op.ops):
                if sub is None or i in slow:
                    continue
                pool = self.clients[i].connection_pool
                try:
                    conn = await pool.get_connection()
                except Exception as exc:  # refused, unreachable: this master failed
                    replies[i] = exc
                    self._memory[i].suspect = True
                    continue
                sent.append((i, conn, sub))  # from here on, a cancellation closes it
                try:
                    await conn.send_packed_command(packed(conn, sub))
                except Exception as exc:
                    sent.pop()
                    await conn.disconnect(nowait=True)
                    await pool.release(conn)
                    replies[i] = exc
                    self._memory[i].suspect = True
                    continue
                _cancel_swallowed(task, cancels)
            while sent:
                i, conn, sub = sent[0]
                replies[i] = reply = await self._receive(self.clients[i], conn, sub, deadline)
                sent.pop(0)
                if isinstance(reply, Exception) and not isinstance(reply, ResponseError):
                    self._memory[i].suspect = True
                _cancel_swallowed(task, cancels)
        finally:
            for i, conn, _ in sent:  # cancelled or failed half-way: do not reuse them
                await conn.disconnect(nowait=True)
                await self.clients[i].connection_pool.release(conn)
        if threaded:
            left = deadline - asyncio.get_running_loop().time()
            if left > 0:
                await asyncio.wait([fut for _, fut in threaded], timeout=left)
            for i, fut in threaded:
                if not fut.done():
                    fut.add_done_callback(_consume)
                    replies[i] = NodeLateError("no answer in time")
                    continue
                failure = asyncio.CancelledError() if fut.cancelled() else fut.exception()
                replies[i] = failure if failure is not None else fut.result()
                if failure is None or isinstance(failure, ResponseError):
                    self._memory[i].suspect = False
        remember_run_ids(self._memory, op, replies)
        return replies

    def known_run_ids(self) -> list[str | None] | None:
        """The masters' run_ids if every one is remembered (else None)."""
        return known_run_ids(self._memory)

    @staticmethod
    async def _receive(client: Any, conn: Any, op: Eval | Call, deadline: float) -> object:
        try:
            async with asyncio.timeout_at(deadline):
                try:
                    reply = await client.parse_response(conn, _wire(op)[0])
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


class AsyncRedlock(AsyncLock):
    """A distributed mutex over N independent Redis masters, for asyncio.

    The same API as :class:`AsyncLock` and the same algorithm, options and limits as
    :class:`Redlock` (Redis docs' distributed-locks page; quorum fencing of
    :mod:`redislock._core.quorum`). Masters are contacted as concurrent tasks. Cancellation
    is safe: a cancelled acquire releases on every master.

    Args:
        masters: 3 or more ``redis.asyncio.Redis`` clients, one per independent master.
        name, ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
        node_timeout, drift_factor, retry_delay, fencing, prefix: as for :class:`Redlock`
            (seconds).

    Raises:
        LockConfigError: bad arguments (before any I/O); on the first acquire, two masters
            that are one server (same run_id).
    """

    __slots__ = ()
    _core: RedlockCore

    def __init__(
        self,
        masters: Sequence[redis.asyncio.Redis],
        name: str,
        *,
        ttl: float | None = None,
        on_lost: Callable[[Any], object] | None = None,
        timeout: float | None = None,
        watchdog_lease: float = DEFAULT_WATCHDOG_LEASE,
        renew_interval: float | None = None,
        max_lease: float | None = None,
        node_timeout: float | None = None,
        drift_factor: float = DEFAULT_DRIFT_FACTOR,
        retry_delay: float = DEFAULT_RETRY_DELAY,
        fencing: bool = True,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        labels = check_masters(
            masters, (redis.asyncio.Redis,), "a redis.asyncio.Redis (for sync use Redlock)"
        )
        self._core = RedlockCore.build(
            labels,
            name,
            node_timeout=node_timeout,
            drift_factor=drift_factor,
            retry_delay=retry_delay,
            fencing=fencing,
            ttl=ttl,
            watchdog_lease=watchdog_lease,
            renew_interval=renew_interval,
            max_lease=max_lease,
            timeout=timeout,
            recheck_interval=DEFAULT_RECHECK,
            prefix=prefix,
            on_lost=on_lost,
        )
        self._client = AsyncMasters(masters)
        self._core.run_ids = self._client.known_run_ids()

    @property
    def masters(self) -> tuple[str, ...]:
        """One label per master (``host:port`` or socket path), in the order given."""
        return self._core.labels

    @property
    def quorum(self) -> int:
        """How many masters must agree: ``N // 2 + 1``."""
        return self._core.quorum

    @property
    def fencing_token(self) -> int | None:
        """As :attr:`Redlock.fencing_token`."""
        if not self._core.fencing:
            return None
        return super().fencing_token

    def detach(self) -> str:
        """Not supported for Redlock.

        Raises:
            LockUsageError: always (a quorum hold's fencing token cannot be read back).
        """
        raise LockUsageError(
            "Redlock holds cannot be detached: the fencing token of a quorum hold cannot be "
            "read back from the masters by adopt()"
        )
