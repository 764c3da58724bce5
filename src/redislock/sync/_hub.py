# SPDX-License-Identifier: MIT
"""The shared wake-up channel (threads): one pub/sub connection per client per process,
read by one daemon thread, for every waiter of every lock of that client (see
:mod:`redislock._core.wake`). Hand-written; its asyncio twin is :mod:`redislock.aio._hub`.

The reader thread alone uses the :class:`redis.client.PubSub` (redis-py's PubSub sends under
a lock but reads without one, and reconnects inside whichever call failed: two threads on
one would race). A waiter that needs a new channel wakes the reader with a PING on the
reader's connection (the reader is blocked reading it), so SUBSCRIBE goes out at once. On a
connection error every waiter re-checks at once and the reader connects again with
back-off; it stops, and closes its connection, when no channel was wanted for
:data:`redislock._core.wake.LINGER` seconds.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from redislock._clients import RESPONSE_ERRORS, SYNC_CLUSTERS
from redislock._core.ops import Keep, Wait
from redislock._core.wake import Board, Waiter, keep_op, refusal, text

__all__ = ["Hub"]

_BACKOFF = (0.02, 2.0)
"""First and longest pause, in seconds, before the reader connects again after an error."""


class Hub:
    """One client's wake-up channel in this process (kept in the client's state,
    :mod:`redislock.sync._state`); ``execute`` is the driver's, with which the keeper renews
    the waiter leases."""

    def __init__(self, client: Any, execute: Callable[[Any, Any], Any]) -> None:
        self.client = weakref.ref(client)
        self.execute = execute
        self.board = Board()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.ps: Any = None
        """The reader's PubSub once it has a connection (a waiter may ping it then)."""
        self.sending = threading.Lock()
        """Held while a command is written on the reader's connection (by the reader, or a
        waiter's PING), so two threads' bytes never interleave."""
        self.pinged = False
        """A PING is on its way to wake the reader (one at a time is enough)."""
        self.kick = threading.Event()
        """Wakes a reader that has no connection yet (nothing to read from)."""
        self.keeper: threading.Thread | None = None
        """The thread renewing the waiter leases of the waiters (:class:`Keep`)."""
        self.keeper_wake = threading.Event()
        self.keeper_at = -1.0
        """When the sleeping keeper wakes by itself (monotonic; -1: it is awake)."""

    # ------------------------------------------------------------------ waiters

    def wait(self, op: Wait, cursor: int) -> str | None:
        with self.lock:
            payload, w = self.board.begin(op.channel, op.match, cursor, op.keep)
            if w is None:
                return payload
            event = threading.Event()
            w.handle = event
            self._start()
            if op.keep is not None:
                self._keeping(op.keep)
            ps = None
            if self.board.requests:
                if self.ps is None:
                    self.kick.set()
                elif not self.pinged:
                    ps, self.pinged = self.ps, True
        if ps is not None:
            self._ping(ps)
        try:
            event.wait(op.timeout)
        except BaseException:  # interrupted: a plain wake-up it took goes to the next
            with self.lock:
                nxt = self.board.drop(w)
            if nxt is not None:
                nxt.handle.set()
            raise
        with self.lock:
            if not w.done:
                self.board.drop(w)
                return None
            w.claimed = False  # it returns: the driver passes it on if it goes unused
            if w.error is not None:
                raise w.error
            return w.payload

    @staticmethod
    def _wake(woken: list[Waiter]) -> None:
        for w in woken:
            w.handle.set()

    def pass_on(self, channel: str) -> None:
        with self.lock:
            w = self.board.pass_on(channel)
        if w is not None:
            w.handle.set()

    # ------------------------------------------------------------------ waiter leases

    def _keeping(self, keep: Keep) -> None:
        """Start the keeper, or wake it if it would sleep past ``keep``'s renewal (called
        under the lock)."""
        if self.keeper is None or not self.keeper.is_alive():
            self.keeper = threading.Thread(
                target=self._keep, name="redislock-waiter-keeper", daemon=True
            )
            self.keeper.start()
        elif keep.due < self.keeper_at:
            self.keeper_wake.set()

    def _keep(self) -> None:
        """Renew the due waiter leases (one call per group, one after the other), until
        none is left; then the thread ends (the next keep starts another)."""
        execute = self.execute
        while True:
            client = self.client()
            with self.lock:
                now = time.monotonic()
                groups: list[list[Keep]] = []
                nxt: float | None = None
                if client is not None:
                    groups, nxt = self.board.keeps_due(now, _slot(client))
                if not groups:
                    if nxt is None:
                        self.keeper = None
                        return
                    self.keeper_wake.clear()
                    self.keeper_at = nxt
            for group in groups:
                try:
                    reply: object = execute(client, keep_op(group))
                except Exception as exc:  # each waiter tries again itself, and meets it
                    reply = exc
                with self.lock:
                    woken = self.board.kept(group, reply, now)
                self._wake(woken)
            del client
            if not groups:
                self.keeper_wake.wait(max((nxt or now) - now, 0.0))
                self.keeper_at = -1.0

    # ------------------------------------------------------------------ the reader

    def _ping(self, ps: Any) -> None:
        """Wake the reader, blocked reading ``ps``, so it sends the SUBSCRIBE a new waiter
        needs: a PING on its connection, whose reply it reads (and ignores). The reader
        alone sends what changes the subscription, and alone reads: redis-py's PubSub
        reconnects inside whichever call failed, and its public API cannot wait on a
        socket and a local event at once. A PING that fails leaves the connection to the
        reader, which finds it broken (every waiter then re-checks)."""
        with self.sending:
            conn = ps.connection
            if ps is not self.ps or conn is None or getattr(conn, "is_connected", True) is False:
                return  # the reader has moved on: it sends what is wanted itself
            with contextlib.suppress(Exception):
                conn.send_command("PING", check_health=False)

    def _start(self) -> None:
        """Start the reader if it is not running (called under the lock)."""
        if self.thread is None:
            self.thread = threading.Thread(
                target=self._loop, name="redislock-wake-reader", daemon=True
            )
            self.thread.start()

    def _stop(self) -> None:
        """The reader ends (called under the lock)."""
        self.thread = None
        self.ps = None
        self.pinged = False

    def _loop(self) -> None:
        pause = _BACKOFF[0]
        while True:
            client = self.client()
            if client is None:
                with self.lock:
                    self._stop()
                return
            ps = _pubsub(client)
            del client
            try:
                if self._serve(ps):
                    return
            except Exception:
                with self.lock:
                    self.ps = None
                    self.pinged = False
                    woken = self.board.broken()  # every waiter re-checks now
                    if not self.board.channels:
                        self._stop()
                        return
                self._wake(woken)
            finally:
                with self.sending, contextlib.suppress(Exception):
                    ps.close()
            time.sleep(pause)
            pause = min(pause * 2, _BACKOFF[1])

    def _serve(self, ps: Any) -> bool:
        """Read ``ps`` and send what the board asks for; True when the hub went idle (the
        thread is then no longer the hub's)."""
        while True:
            with self.lock:
                now = time.monotonic()
                self.pinged = False
                subs, unsubs = self.board.take(now)
                if not subs and not unsubs and self.board.idle(now):
                    self._stop()
                    return True
                timeout = self.board.next_check(now)
            if subs or unsubs:
                with self.sending:
                    if subs:
                        ps.subscribe(*subs)
                    if unsubs:
                        ps.unsubscribe(*unsubs)
            conn = ps.connection
            if conn is None:  # nothing subscribed yet: wait for a waiter's kick
                self.kick.wait(timeout)
                self.kick.clear()
                continue
            if self.ps is not ps:
                with self.lock:
                    self.ps = ps
                    requested = self.board.requests
                if requested:
                    continue  # asked for while the reader had no connection
            while conn.can_read(timeout=0):
                # a whole reply is on its way: read it without a timeout
                try:
                    self._handle(ps.handle_message(ps.parse_response(block=True)))
                except RESPONSE_ERRORS as exc:  # an error reply: the connection is fine
                    with self.lock:
                        woken = self.board.refused(*refusal(exc))
                    self._wake(woken)
            with self.lock:
                if self.board.requests:  # asked for while it read (their PING was read too)
                    continue
            conn.can_read(timeout=timeout)  # a message, a reply, a waiter's PING, or time

    def _handle(self, msg: Any) -> None:
        if not msg:
            return
        kind = text(msg.get("type"))
        channel = text(msg.get("channel"))
        woken: list[Waiter] = []
        with self.lock:
            if kind == "message":
                woken = self.board.message(channel, text(msg.get("data")))
            elif kind == "subscribe":
                woken = self.board.subscribed(channel)
            elif kind == "unsubscribe":
                self.board.unsubscribed(channel)
        self._wake(woken)


def _pubsub(client: Any) -> Any:
    """A PubSub of ``client``; on a Cluster, on a node picked at random (each reconnection
    picks again, so a dead node is left): a PUBLISH reaches every node of the cluster."""
    if isinstance(client, SYNC_CLUSTERS):
        return client.pubsub(node=client.get_random_node())
    return client.pubsub()


def _slot(client: Any) -> Any:
    """How waiter leases are grouped into calls: by hash slot on a Cluster."""
    if isinstance(client, SYNC_CLUSTERS):
        return client.keyslot
    return None
