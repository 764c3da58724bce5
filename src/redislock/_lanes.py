# SPDX-License-Identifier: MIT
"""What both flavours' fan-out drivers (:mod:`redislock.sync._fanout`,
:mod:`redislock.aio._fanout`) share about a Redlock's masters: each master's :class:`Lane`
(its commands run one at a time, off the caller's path, when it is new, failed or late),
and :class:`Packer`
(each distinct command of a round packed once). Driver plumbing, not algorithm: the
quorum core (:mod:`redislock._core.quorum`) only yields :class:`~redislock._core.ops.FanOut`
operations."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import hiredis

from redislock._core.ops import Call, Eval, FanOut

__all__ = [
    "CLEANUP_CAP",
    "IDLE_CAP",
    "Lane",
    "Packer",
    "Queued",
    "round_decided",
    "wire",
]


CLEANUP_CAP = 32
"""Releases a master's lane keeps queued behind a command it is still running; more are
refused at once (a grant they would have undone runs out with its TTL)."""

IDLE_CAP = 8
"""Connected connections a master's lane keeps checked out of its client's pool for the
fan-out's fast path (one per round in flight at once); more go back to the pool."""


Verdict = Literal["start", "queued", "refused"]


def round_decided(op: FanOut, replies: Sequence[object], pending: set[int]) -> bool:
    """Whether a fan-out round may end before its deadline: ``op.decided`` says so from the
    replies of the masters that were asked and are no longer ``pending`` (indexes)."""
    if op.decided is None:
        return False
    return op.decided(
        [replies[i] for i, sub in enumerate(op.ops) if sub is not None and i not in pending]
    )


@dataclass(slots=True, eq=False)
class Queued:
    """One command for a master's lane: ``job`` is the future its reply goes to."""

    op: Eval | Call
    job: Any
    deadline: float
    """``time.monotonic()`` when its round ends; not sent after that (unless ``cleanup``)."""
    timeout: float
    """Its round's timeout in seconds: answered within it, the master is healthy again."""
    cleanup: bool


class Lane:
    """The background path to one master's client, shared by every Redlock over it. No I/O:
    the fan-out drivers (:mod:`redislock.sync._fanout`, :mod:`redislock.aio._fanout`) run
    it, the sync one under ``guard``.

    Whatever may block on a master - connecting, reconnecting, redis-py's retries and
    their back-off, a stalled server - runs here, one command at a time per master, on
    one thread or task, never on the caller's. A command arriving while the one running
    started more than its round's timeout ago is refused at once (the master is stalled),
    others wait in order until their round ends (then they are dropped unsent), except
    releases (``cleanup``), which always run, after what they undo (at most
    :data:`CLEANUP_CAP`). So a master costs at most one thread or task however long it
    stalls, and a release never overtakes the acquire it undoes. A round that ends takes
    back its unsent commands (:meth:`withdraw`): the queue holds at most the releases and
    one command per round still waiting.
    """

    __slots__ = ("guard", "idle", "owner", "queue", "running", "since")

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.queue: deque[Queued] = deque()
        self.running = False
        """A thread or task is running this lane's commands."""
        self.since: float | None = None
        """``time.monotonic()`` when the command running now was started."""
        self.idle: list[Any] = []
        """Connected connections checked out of the client's pool for the fast path."""
        self.owner: object = None
        """The event loop of an asyncio lane."""

    def admit(
        self, item: Queued, now: float
    ) -> tuple[Literal["start", "queued", "refused"], list[Queued]]:
        """Take ``item``: "start" (nothing is running: the caller runs it now, then
        :meth:`next`), "queued" or "refused" (answer it as late); and the queued commands
        whose round is over, to be answered as late."""
        expired = self._expire(now)
        if not self.running:
            self.running, self.since = True, now
            return "start", expired
        if item.cleanup:
            if sum(1 for q in self.queue if q.cleanup) >= CLEANUP_CAP:
                return "refused", expired
        elif self.since is not None and now - self.since > item.timeout:
            return "refused", expired
        self.queue.append(item)
        return "queued", expired

    def next(self, now: float) -> tuple[Queued | None, list[Queued]]:
        """After a command: the next one to run (None: the lane is idle now), and the queued
        commands whose round is over."""
        expired = self._expire(now)
        if self.queue:
            self.since = now
            return self.queue.popleft(), expired
        self.running, self.since = False, None
        return None, expired

    def withdraw(self, item: Queued) -> bool:
        """Take back ``item`` if it is still queued, unsent, and not a release (its round is
        over: nobody needs it). True if it was taken back."""
        if item.cleanup or item not in self.queue:
            return False
        self.queue.remove(item)
        return True

    def _expire(self, now: float) -> list[Queued]:
        if not self.queue:
            return []
        gone = [q for q in self.queue if not q.cleanup and q.deadline <= now]
        if gone:
            self.queue = deque(q for q in self.queue if q.cleanup or q.deadline > now)
        return gone


def wire(op: Eval | Call) -> tuple[str | int, ...]:
    """The command a fan-out sends for ``op`` (EVALSHA for a script)."""
    if isinstance(op, Eval):  # a Redlock's scripts take str and int arguments only
        args = cast(tuple[str | int, ...], op.args)
        return ("EVALSHA", op.script.sha, len(op.keys), *op.keys, *args)
    return op.args


class Packer:
    """Packs each distinct command of one fan-out once per encoding (the masters usually
    get the same command), with hiredis' packer (C) when its bytes are redis-py's
    (redis.asyncio packs in Python); ``packer(conn, op)`` returns what
    ``send_packed_command`` takes and the command name to parse the reply with."""

    __slots__ = ("_done",)

    def __init__(self) -> None:
        self._done: dict[tuple[int, str, str], tuple[Any, str | int]] = {}

    def __call__(self, conn: Any, op: Eval | Call) -> tuple[Any, str | int]:
        enc = conn.encoder
        key = (id(op), enc.encoding, enc.encoding_errors)
        found = self._done.get(key)
        if found is None:
            args = wire(op)
            if _plain(enc, args):  # hiredis packs in C; redis.asyncio packs in Python
                packed: Any = [hiredis.pack_command(args)]  # type: ignore[arg-type]
            else:
                packed = conn.pack_command(*args)
            found = self._done[key] = (packed, args[0])
        return found


def _plain(encoder: Any, args: tuple[str | int, ...]) -> bool:
    """Whether hiredis packs ``args`` to the bytes redis-py would: UTF-8 (strict) text,
    bytes and integers only, and a first argument without a space (redis-py splits it)."""
    if encoder.encoding.lower().replace("_", "-") not in ("utf-8", "utf8"):
        return False
    if encoder.encoding_errors != "strict":
        return False
    first = args[0]
    if not isinstance(first, str) or " " in first:
        return False
    return all(type(a) in (str, int, bytes) for a in args)
