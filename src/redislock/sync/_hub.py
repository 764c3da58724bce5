# SPDX-License-Identifier: MIT
"""The shared wake-up channel (threads): one pub/sub connection per client per process,
read by one daemon thread, for every waiter of every lock of that client (see
:mod:`redislock._core.wake`). Hand-written; its asyncio twin is :mod:`redislock.aio._hub`.

The reader thread alone uses the :class:`redis.client.PubSub` (redis-py's PubSub sends under
a lock but reads without one, and reconnects inside whichever call failed: two threads on
one would race). A waiter that needs a new channel kicks the reader through a socket pair
the reader selects on beside the pub/sub socket, so SUBSCRIBE goes out at once. On a
connection error every waiter re-checks at once and the reader connects again with
back-off; it stops, and closes its connection, when no channel was wanted for
:data:`redislock._core.wake.LINGER` seconds.
"""

from __future__ import annotations

import contextlib
import select
import socket
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
        self.kick_w: socket.socket | None = None
        """The running reader's kick socket (its pair's other end is the reader's)."""
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
            kick = self.kick_w if self.board.requests else None
        if kick is not None:
            with contextlib.suppress(OSError):  # full or closed: the reader has work anyway
                kick.send(b"k")
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

    def _start(self) -> None:
        """Start the reader if it is not running (called under the lock)."""
        if self.thread is None:
            kick_r, self.kick_w = socket.socketpair()
            for s in (kick_r, self.kick_w):
                s.setblocking(False)
            self.thread = threading.Thread(
                target=self._read,
                args=(kick_r, self.kick_w),
                name="redislock-wake-reader",
                daemon=True,
            )
            self.thread.start()

    def _read(self, kick_r: socket.socket, kick_w: socket.socket) -> None:
        try:
            self._loop(kick_r)
        finally:
            kick_r.close()
            kick_w.close()

    def _loop(self, kick_r: socket.socket) -> None:
        pause = _BACKOFF[0]
        while True:
            client = self.client()
            if client is None:
                with self.lock:
                    self.thread = None
                    self.kick_w = None
                return
            ps = _pubsub(client)
            del client
            try:
                if self._serve(ps, kick_r):
                    return
            except Exception:
                with self.lock:
                    woken = self.board.broken()  # every waiter re-checks now
                    if not self.board.channels:
                        self.thread = None
                        self.kick_w = None
                        return
                self._wake(woken)
            finally:
                with contextlib.suppress(Exception):
                    ps.close()
            time.sleep(pause)
            pause = min(pause * 2, _BACKOFF[1])

    def _serve(self, ps: Any, kick_r: socket.socket) -> bool:
        """Read ``ps`` and send what the board asks for; True when the hub went idle (the
        thread is then no longer the hub's)."""
        while True:
            with self.lock:
                now = time.monotonic()
                subs, unsubs = self.board.take(now)
                if not subs and not unsubs and self.board.idle(now):
                    self.thread = None
                    self.kick_w = None
                    return True
                timeout = self.board.next_check(now)
            if subs:
                ps.subscribe(*subs)
            if unsubs:
                ps.unsubscribe(*unsubs)
            conn = ps.connection
            while conn is not None and conn.can_read(timeout=0):
                # a whole reply is on its way: read it without a timeout
                try:
                    self._handle(ps.handle_message(ps.parse_response(block=True)))
                except RESPONSE_ERRORS as exc:  # an error reply: the connection is fine
                    with self.lock:
                        woken = self.board.refused(*refusal(exc))
                    self._wake(woken)
            sock = None if conn is None else getattr(conn, "_sock", None)
            ready, _, _ = select.select(
                [kick_r] if sock is None else [kick_r, sock], [], [], timeout
            )
            if kick_r in ready:
                with contextlib.suppress(OSError):
                    kick_r.recv(4096)

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
