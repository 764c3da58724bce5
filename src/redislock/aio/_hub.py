# SPDX-License-Identifier: MIT
"""The shared wake-up channel (asyncio): one pub/sub connection per client per event loop,
read by one task, for every waiter of every lock of that client (see
:mod:`redislock._core.wake`). Hand-written; its sync twin is :mod:`redislock.sync._hub`.

The reader task alone reads the :class:`redis.asyncio.client.PubSub` (in its own task: no
read is left behind in a task of its own when the loop shuts down); when a waiter needs a
new channel, a short task sends SUBSCRIBE beside the pending read (asyncio writes whole
commands). On a connection error every waiter re-checks at once and
the reader connects again with back-off; it stops, and closes its connection, when no
channel was wanted for :data:`redislock._core.wake.LINGER` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Callable
from typing import Any

from redislock._clients import ASYNC_CLUSTERS, RESPONSE_ERRORS, family_of
from redislock._core.ops import Keep, Wait
from redislock._core.wake import Board, Waiter, keep_op, refusal, text

__all__ = ["Hub"]

_BACKOFF = (0.02, 2.0)
"""First and longest pause, in seconds, before the reader connects again after an error."""

_READ = 60.0
"""Longest single read, in seconds (the reader re-checks its channels' linger after it)."""


class Hub:
    """One client's wake-up channel in one event loop (kept in the client's state,
    :mod:`redislock.aio._state`); ``execute`` is the driver's, with which the keeper renews
    the waiter leases."""

    def __init__(
        self, client: Any, loop: asyncio.AbstractEventLoop, execute: Callable[[Any, Any], Any]
    ) -> None:
        self.client = weakref.ref(client)
        self.loop = loop
        self.execute = execute
        self.board = Board()
        self.task: asyncio.Task[None] | None = None
        self.ps: Any = None
        """The reader's PubSub while it serves (connected, its retries off)."""
        self.sender: asyncio.Task[None] | None = None
        self.keeper: asyncio.Task[None] | None = None
        """The task renewing the waiter leases of the waiters (:class:`Keep`)."""
        self.keeper_wake = asyncio.Event()
        self.keeper_at = -1.0
        """When the sleeping keeper wakes by itself (monotonic; -1: it is awake)."""

    # ------------------------------------------------------------------ waiters

    async def wait(self, op: Wait, cursor: int) -> str | None:
        payload, w = self.board.begin(op.channel, op.match, cursor, op.keep)
        if w is None:
            return payload
        fut: asyncio.Future[str | None] = self.loop.create_future()
        w.handle = fut
        self._start()
        if op.keep is not None:
            self._keeping(op.keep)
        idle_sender = self.sender is None or self.sender.done()
        if self.board.requests and self.ps is not None and idle_sender:
            self.sender = self.loop.create_task(self._send(self.ps))
        timer = self.loop.call_later(op.timeout, self._expire, w)
        try:
            return await fut
        except asyncio.CancelledError:
            self._signal(self.board.drop(w))  # a plain wake-up it took goes to the next
            raise
        finally:
            timer.cancel()

    def _expire(self, w: Waiter) -> None:
        if not w.done:
            self.board.drop(w)
            self._set(w, None)

    def _set(self, w: Waiter, payload: str | None) -> None:
        fut = w.handle
        if fut is not None and not fut.done():
            if w.error is not None:
                fut.set_exception(w.error)
            else:
                fut.set_result(payload)

    def pass_on(self, channel: str) -> None:
        """A plain wake-up a flow took could not be used: give it to the channel's next
        waiter."""
        self._signal(self.board.pass_on(channel))

    def _signal(self, w: Waiter | None) -> None:
        if w is not None:
            self._set(w, w.payload)

    def _wake(self, woken: list[Waiter]) -> None:
        for w in woken:
            self._set(w, w.payload)

    async def _send(self, ps: Any) -> None:
        """Send the SUBSCRIBE a new waiter needs beside the reader's pending read (asyncio
        writes whole commands; the reader alone reads). On failure the connection is closed:
        the reader then finds it broken and every waiter re-checks."""
        if ps is not self.ps:  # the reader reconnected meanwhile: it sends what is wanted
            return
        try:
            await self._flush(ps)
        except Exception:
            with contextlib.suppress(Exception):
                await ps.connection.disconnect()

    async def _flush(self, ps: Any) -> None:
        subs, unsubs = self.board.take(time.monotonic())
        if subs:
            await ps.subscribe(*subs)
        if unsubs:
            await ps.unsubscribe(*unsubs)

    # ------------------------------------------------------------------ waiter leases

    def _keeping(self, keep: Keep) -> None:
        """Start the keeper, or wake it if it would sleep past ``keep``'s renewal."""
        if self.keeper is None or self.keeper.done():
            self.keeper = self.loop.create_task(self._keep(), name="redislock-waiter-keeper")
        elif keep.due < self.keeper_at:
            self.keeper_wake.set()

    async def _keep(self) -> None:
        """Renew the due waiter leases (one call per group, side by side), until none is
        left; then the task ends (the next keep starts another)."""
        execute = self.execute
        while True:
            client = self.client()
            if client is None:
                self.keeper = None
                return
            now = time.monotonic()
            groups, nxt = self.board.keeps_due(now, _slot(client))
            if groups:
                replies = await asyncio.gather(
                    *(execute(client, keep_op(group)) for group in groups),
                    return_exceptions=True,
                )
                for group, reply in zip(groups, replies, strict=True):
                    self._wake(self.board.kept(group, reply, now))
                continue
            del client
            if nxt is None:
                self.keeper = None
                return
            self.keeper_wake.clear()
            self.keeper_at = nxt
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(nxt - now, 0.0)):
                    await self.keeper_wake.wait()
            self.keeper_at = -1.0

    # ------------------------------------------------------------------ the reader

    def _start(self) -> None:
        if self.task is None or self.task.done():
            self.task = self.loop.create_task(self._read(), name="redislock-wake-reader")

    async def _read(self) -> None:
        pause = _BACKOFF[0]
        while True:
            client = self.client()
            if client is None:
                self.task = None
                return
            ps = _pubsub(client)
            del client
            idle = False
            saved = None
            try:
                # Errors surface here instead of a reconnection inside redis-py: a closed
                # client then stops the reader (no waiter left), and every waiter re-checks.
                await ps.connect()
                saved, ps.connection.retry = ps.connection.retry, _no_retry(ps)
                await self._serve(ps)
                idle = True
            except Exception:
                self.ps = None
                self._wake(self.board.broken())  # every waiter re-checks now
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError from None  # redis-py turned it into an error
            finally:
                self.ps = None
                if saved is not None and ps.connection is not None:
                    ps.connection.retry = saved  # the connection goes back to the pool
                with contextlib.suppress(Exception):
                    await ps.aclose()
            if idle:
                return
            if not self.board.channels:
                self.task = None
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, _BACKOFF[1])

    async def _serve(self, ps: Any) -> None:
        """Read ``ps`` and send what the board asks for until the hub is idle."""
        self.ps = ps
        while True:
            await self._flush(ps)
            now = time.monotonic()
            if self.board.idle(now):
                self.task = None  # a new waiter starts a new reader while this one closes
                self.ps = None
                return
            soon = self.board.next_check(now)
            try:
                msg = await ps.get_message(timeout=_READ if soon is None else min(soon, _READ))
            except RESPONSE_ERRORS as exc:  # an error reply: the connection is fine
                self._wake(self.board.refused(*refusal(exc)))
                continue
            self._handle(msg)

    def _handle(self, msg: Any) -> None:
        if not msg:
            return
        kind = text(msg.get("type"))
        channel = text(msg.get("channel"))
        if kind == "message":
            self._wake(self.board.message(channel, text(msg.get("data"))))
        elif kind == "subscribe":
            self._wake(self.board.subscribed(channel))
        elif kind == "unsubscribe":
            self.board.unsubscribed(channel)


def _no_retry(ps: Any) -> Any:
    """A ``Retry`` that never retries, of the library of the PubSub ``ps``."""
    family = family_of(ps.connection)
    return family.async_retry(family.no_backoff(), 0)


def _pubsub(client: Any) -> Any:
    """A PubSub of ``client``; on a Cluster, on a node picked at random (each reconnection
    picks again, so a dead node is left): a PUBLISH reaches every node of the cluster."""
    if isinstance(client, ASYNC_CLUSTERS):
        node = client.get_random_node()
        if hasattr(client, "pubsub"):
            return client.pubsub(node=node)
        # valkey-py's asyncio ValkeyCluster has no pubsub(): a PubSub on the node's own
        # connection settings (its one connection is closed with the PubSub)
        family = family_of(client)
        pool = family.async_pool(connection_class=node.connection_class, **node.connection_kwargs)
        return family.async_client(connection_pool=pool).pubsub()
    return client.pubsub()


def _slot(client: Any) -> Any:
    """How waiter leases are grouped into calls: by hash slot on a Cluster."""
    if isinstance(client, ASYNC_CLUSTERS):
        return client.keyslot
    return None
