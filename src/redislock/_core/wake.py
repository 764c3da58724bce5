# SPDX-License-Identifier: MIT
"""The wake-up board: what one process's shared wake-up channel knows. No I/O.

Every waiting flow of a process (every primitive, every name) waits on ONE pub/sub
connection per client (the *hub*, :mod:`redislock.aio._hub` and :mod:`redislock.sync._hub`),
so a waiter holds no pooled connection. The scripts PUBLISH where a waiter may now succeed
(only when a waiters marker says somebody waits); a wake-up channel is named like the key it
replaces (``P{N}:wake``, ``P{N}:rwake``; Lock's and FairLock's grants go to
``P{N}:grant:<process tag>``, the waiting process's own, see ``FairKeys.grant_for``).

Payloads: ``*`` (or any text without ``|``) is a plain wake-up; ``<tag>|<rest>`` is meant for
the waiter whose match is ``<tag>`` (a FairLock grant: ``<sha1(token)[:20]>|<fence>``; a
token is a secret and never goes over pub/sub).

No lost wake-up: the driver takes a number from :func:`ticket` before it sends each
operation of a flow (its *cursor*); every event the hub receives takes the next number. A
:class:`~redislock._core.ops.Wait` resolves at once with a message received after the
cursor, returns None at once if the subscription was not known live before the cursor
(the flow's last try may have missed a wake-up: it tries again, now subscribed), and
otherwise waits. A plain wake-up goes to ONE untagged waiter of the process (the oldest;
kept for the next one if nobody waits), as the wake list it replaces woke one waiter: the
woken waiter passes it on when it gets in (_hold.lua) and its release wakes the next; a
tagged message goes to the waiters of its tag, and a plain one to every tagged waiter.

This class is not thread-safe: the sync hub calls it under its lock, the asyncio hub from
its event loop.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from redislock._core.ops import Eval, Keep, _parts, no_permission
from redislock._core.scripts import SCRIPTS
from redislock.errors import NoPermissionError

__all__ = [
    "KEEP_BATCH",
    "LINGER",
    "Board",
    "Channel",
    "Waiter",
    "gate_size",
    "keep_op",
    "refusal",
    "ticket",
]

_COUNTER = itertools.count(1)

LINGER: Final = 5.0
"""Seconds a channel stays subscribed after its last local waiter left, and the hub's
reader (and its connection) lives after its last channel went: waves of waiters reuse them."""

TAGS_KEPT: Final = 4096
"""Tagged messages remembered per channel (for a waiter whose Wait comes after its message)."""

PLAIN_KEPT: Final = 256
"""Unclaimed plain wake-ups kept per channel."""

KEEP_BATCH: Final = 256
"""Queued waiters' leases renewed in one ``waiter_keep.lua`` call at most."""

_KEEP = SCRIPTS["waiter_keep"]


def ticket() -> int:
    """The next number of the process-wide sequence (thread-safe: one C call under the GIL).
    The driver takes one before it sends each operation; the hub one per event received."""
    return next(_COUNTER)


@dataclass(eq=False, slots=True)
class Waiter:
    """One blocked Wait."""

    channel: str
    match: str | None
    cursor: int
    handle: Any = None
    """The flavour's signal (an asyncio future, a threading event)."""
    done: bool = False
    payload: str | None = None
    error: BaseException | None = None
    """Raised by its Wait instead of a payload (the server refused the subscription)."""
    claimed: bool = False
    """It took a plain wake-up that is meant for one waiter only: if it cannot use it (it
    is cancelled), :meth:`Board.pass_on` gives it to the next."""
    keep: Keep | None = None
    """Its waiter lease, renewed while it waits (:meth:`Board.keeps_due`)."""


@dataclass(eq=False, slots=True)
class Channel:
    """One channel's subscription and recent messages."""

    phase: str = "want"
    """want (SUBSCRIBE not sent yet), subscribing, live, unsubscribing."""
    confirmed: int = 0
    """Ticket taken when the live subscription was confirmed (0: not live)."""
    waiters: dict[Waiter, None] = field(default_factory=dict)
    tags: OrderedDict[str, tuple[int, str]] = field(default_factory=OrderedDict)
    plain: int = 0
    """Ticket of the latest plain message (tagged waiters take any)."""
    unclaimed: deque[int] = field(default_factory=lambda: deque(maxlen=PLAIN_KEPT))
    idle_since: float = 0.0


class Board:
    """The channels and waiters of one hub."""

    def __init__(self) -> None:
        self.channels: dict[str, Channel] = {}
        self.requests = False
        """Some channel needs a SUBSCRIBE or UNSUBSCRIBE the reader has not sent."""
        self.idle_since = 0.0
        self.keeps: dict[Keep, Waiter] = {}
        """The waiter leases to renew while their waiters wait (:class:`Keep`)."""

    # ------------------------------------------------------------------ waiters

    def begin(
        self, channel: str, match: str | None, cursor: int, keep: Keep | None = None
    ) -> tuple[str | None, Waiter | None]:
        """Start a Wait: ``(payload_or_None, None)`` if it resolves at once, else
        ``(None, waiter)`` registered (the caller arms its timeout), its ``keep`` (if any)
        renewed from ``keep.checked + keep.every`` on while it waits."""
        ch = self.channels.get(channel)
        if ch is None:
            ch = self.channels[channel] = Channel()
            self.requests = True
        if ch.phase == "live":
            if ch.confirmed > cursor:
                return None, None  # the last try may have missed a wake-up
            if match is not None:
                seen = ch.tags.get(match)
                if seen is not None and seen[0] > cursor:
                    return seen[1], None
                if ch.plain > cursor:
                    return "*", None
            else:
                while ch.unclaimed:
                    seq = ch.unclaimed.popleft()
                    if seq > cursor:
                        return "*", None
        w = Waiter(channel, match, cursor, keep=keep)
        ch.waiters[w] = None
        ch.idle_since = 0.0
        if keep is not None:
            keep.due = keep.checked + keep.every
            self.keeps[keep] = w
        return None, w

    def drop(self, w: Waiter) -> Waiter | None:
        """``w`` stops waiting (timed out or cancelled). If it had taken a plain wake-up,
        that wake-up goes to the next waiter: returned if it is one to signal."""
        if w.keep is not None:
            self.keeps.pop(w.keep, None)
        ch = self.channels.get(w.channel)
        if ch is not None and w in ch.waiters:
            del ch.waiters[w]
            if not ch.waiters:
                ch.idle_since = time.monotonic()
        if w.done and w.claimed:
            w.claimed = False
            return self.pass_on(w.channel)
        w.done = True
        return None

    def pass_on(self, channel: str) -> Waiter | None:
        """A plain wake-up one waiter took but could not use: to the next plain waiter (the
        one returned, to signal), else kept for the next Wait."""
        ch = self.channels.get(channel)
        if ch is None or ch.phase != "live":
            return None
        seq = ticket()
        for w in ch.waiters:
            if w.match is None and not w.done:
                self._resolve(ch, w, "*", claimed=True)
                return w
        ch.unclaimed.append(seq)
        return None

    def _resolve(self, ch: Channel, w: Waiter, payload: str | None, claimed: bool = False) -> None:
        if w.keep is not None:
            self.keeps.pop(w.keep, None)
        w.done = True
        w.payload = payload
        w.claimed = claimed
        del ch.waiters[w]
        if not ch.waiters:
            ch.idle_since = time.monotonic()

    # ------------------------------------------------------------------ events

    def message(self, channel: str, payload: str) -> list[Waiter]:
        """A message arrived; returns the waiters it resolved."""
        seq = ticket()
        ch = self.channels.get(channel)
        if ch is None or ch.phase != "live":
            return []
        woken: list[Waiter] = []
        tag, bar, _ = payload.partition("|")
        if bar:
            ch.tags[tag] = (seq, payload)
            ch.tags.move_to_end(tag)
            if len(ch.tags) > TAGS_KEPT:
                ch.tags.popitem(last=False)
            woken = [w for w in ch.waiters if w.match == tag]
            for w in woken:
                self._resolve(ch, w, payload)
            return woken
        ch.plain = seq
        plain: Waiter | None = None
        for w in ch.waiters:
            if w.match is not None:
                woken.append(w)
            elif plain is None:
                plain = w
        for w in woken:
            self._resolve(ch, w, payload)
        if plain is not None:
            self._resolve(ch, plain, payload, claimed=True)
            woken.append(plain)
        else:
            ch.unclaimed.append(seq)
        return woken

    def subscribed(self, channel: str) -> list[Waiter]:
        """SUBSCRIBE confirmed (first time, or again after the client library reconnected):
        every waiter of the channel re-checks (returned, resolved with None)."""
        seq = ticket()
        ch = self.channels.get(channel)
        if ch is None:
            return []
        ch.phase = "live"
        ch.confirmed = seq
        ch.unclaimed.clear()
        woken = list(ch.waiters)
        for w in woken:
            self._resolve(ch, w, None)
        return woken

    def unsubscribed(self, channel: str) -> None:
        """UNSUBSCRIBE confirmed: forget the channel, or subscribe again if a waiter came."""
        ch = self.channels.get(channel)
        if ch is None or ch.phase != "unsubscribing":
            return
        if ch.waiters:
            ch.phase = "want"
            self.requests = True
        else:
            del self.channels[channel]

    def refused(self, error: BaseException, command: str | None) -> list[Waiter]:
        """The server answered an error to our SUBSCRIBE or UNSUBSCRIBE (an ACL refusal),
        ``command`` says which when known. A refused UNSUBSCRIBE leaves its channels
        subscribed (live again); a refused SUBSCRIBE fails the Waits of the channels it
        asked for (returned, with ``error``), which are forgotten: the next Wait asks again.
        """
        woken: list[Waiter] = []
        for name, ch in list(self.channels.items()):
            if ch.phase == "unsubscribing" and command in (None, "UNSUBSCRIBE"):
                ch.phase = "live"
                ch.idle_since = time.monotonic()
            elif ch.phase == "subscribing" and command != "UNSUBSCRIBE":
                for w in list(ch.waiters):
                    self._resolve(ch, w, None)
                    w.error = error
                    woken.append(w)
                del self.channels[name]
        return woken

    def broken(self) -> list[Waiter]:
        """The connection failed: every channel must be subscribed again and every waiter
        re-checks (returned, resolved with None). With no waiter at all, every channel is
        forgotten (the reader stops: the client may have been closed); the next Wait
        starts again."""
        if not any(ch.waiters for ch in self.channels.values()):
            self.channels.clear()
            self.requests = False
            return []
        woken: list[Waiter] = []
        for name, ch in list(self.channels.items()):
            woken.extend(ch.waiters)
            for w in list(ch.waiters):
                self._resolve(ch, w, None)
            if ch.phase == "unsubscribing":
                del self.channels[name]
                continue
            ch.phase = "want"
            ch.confirmed = 0
            ch.unclaimed.clear()
        self.requests = bool(self.channels)
        return woken

    # ------------------------------------------------------------------ waiter leases

    def keeps_due(
        self, now: float, slot: Callable[[str], object] | None = None
    ) -> tuple[list[list[Keep]], float | None]:
        """The waiter leases to renew at monotonic time ``now``, in groups of at most
        :data:`KEEP_BATCH` (of one ``slot(lock key)`` each, if given: a Cluster's hash
        slot), each the keys of one :func:`keep_op` call, marked as renewed (next due
        ``every`` seconds on); and the monotonic time the next is due (None: none left).

        When one lease is due, every lease due before the next round (the shortest
        ``every`` on) goes too: the leases of waiters that queued at different times fall
        into step, and one call a round renews them all."""
        if not self.keeps:
            return [], None
        window = now + min(keep.every for keep in self.keeps)
        if min(keep.due for keep in self.keeps) > now:
            window = now  # nothing due yet
        groups: dict[object, list[Keep]] = {}
        nxt: float | None = None
        for keep in self.keeps:
            if keep.due <= window:
                group = None if slot is None else slot(keep.keys[0])
                found = groups.get(group)
                if found is None:
                    groups[group] = [keep]
                else:
                    found.append(keep)
                keep.due = now + keep.every
            if nxt is None or keep.due < nxt:
                nxt = keep.due
        out = [
            group[k : k + KEEP_BATCH]
            for group in groups.values()
            for k in range(0, len(group), KEEP_BATCH)
        ]
        return out, nxt

    def kept(self, group: list[Keep], reply: object, sent: float) -> list[Waiter]:
        """Apply the reply of ``keep_op(group)`` (or the exception its call failed with),
        sent at monotonic time ``sent``: a waiter still queued has been seen so at ``sent``;
        one granted is woken with its grant ``<tag>|<fence>``, and any other (first in line
        on a free lock, no longer queued, an error entry or a failed call) with ``<tag>|0``:
        its flow tries again at once (and meets the error itself). Returns the waiters it
        woke."""
        woken: list[Waiter] = []
        for keep, part in zip(group, _parts(reply, len(group)), strict=True):
            w = self.keeps.get(keep)
            if w is None or w.done:
                continue
            status, fence = b"", 0
            if isinstance(part, list | tuple) and len(part) == 2:
                status, fence = part[0], part[1]
            if status in (b"queued", "queued"):
                keep.checked = max(keep.checked, sent)
                continue
            if status not in (b"granted", "granted") or type(fence) is not int or fence < 0:
                fence = 0
            ch = self.channels.get(w.channel)
            if ch is None or w not in ch.waiters:
                continue
            self._resolve(ch, w, f"{keep.tag}|{fence}")
            woken.append(w)
        return woken

    # ------------------------------------------------------------------ the reader's work

    def take(self, now: float, linger: float = LINGER) -> tuple[list[str], list[str]]:
        """The channels to SUBSCRIBE and to UNSUBSCRIBE now (marked as sent)."""
        subs: list[str] = []
        unsubs: list[str] = []
        for name, ch in self.channels.items():
            if ch.phase == "want":
                ch.phase = "subscribing"
                subs.append(name)
            elif ch.phase == "live" and not ch.waiters:
                if ch.idle_since == 0.0:
                    ch.idle_since = now
                if now - ch.idle_since >= linger:
                    ch.phase = "unsubscribing"
                    unsubs.append(name)
        self.requests = False
        return subs, unsubs

    def next_check(self, now: float, linger: float = LINGER) -> float | None:
        """Seconds until :meth:`take` may have something to unsubscribe or the hub may stop
        (None: nothing will change by itself)."""
        soon: float | None = None
        for ch in self.channels.values():
            if ch.phase == "live" and not ch.waiters:
                at = linger if ch.idle_since == 0.0 else ch.idle_since + linger - now
                soon = at if soon is None else min(soon, at)
        if not self.channels:
            soon = linger if self.idle_since == 0.0 else self.idle_since + linger - now
        return None if soon is None else max(soon, 0.0)

    def idle(self, now: float, linger: float = LINGER) -> bool:
        """No channel for ``linger`` seconds: the reader may stop."""
        if self.channels:
            self.idle_since = 0.0
            return False
        if self.idle_since == 0.0:
            self.idle_since = now
        return now - self.idle_since >= linger


def keep_op(group: list[Keep]) -> Eval:
    """The ``waiter_keep.lua`` call that renews the waiter leases of ``group``."""
    keys: list[str] = []
    for keep in group:
        keys.extend(keep.keys)
    pairs = " ".join(f"{keep.token} {keep.waiter_ms}" for keep in group)
    return Eval(_KEEP, tuple(keys), (pairs,))


def gate_size(client: Any) -> int | None:
    """How many commands redislock may have in flight at once on ``client``: its pool's
    ``max_connections`` less two (the wake-up channel's connection and one for the
    application), or None when the pool has no useful limit.

    redis-py's default pools (100 connections in 8.x) raise ``MaxConnectionsError`` when
    empty instead of waiting: a burst of waiters re-checking at once (their first tries, or
    every waiter after the wake-up channel reconnected) would fail, and with them the
    holder's renewals and release. The drivers queue redislock's own commands behind this
    many instead.
    """
    pool = getattr(client, "connection_pool", None)
    if pool is None:  # a cluster client: one pool per node, each with the node's limit
        node = None
        with contextlib.suppress(Exception):
            node = client.get_default_node()
        pool = getattr(getattr(node, "redis_connection", None), "connection_pool", node)
    n = getattr(pool, "max_connections", None)
    if not isinstance(n, int) or isinstance(n, bool) or n >= 1 << 20:
        return None
    return max(1, n - 2)


def refusal(exc: Exception) -> tuple[BaseException, str | None]:
    """The error a refused SUBSCRIBE raises in its waiters (a
    :class:`redislock.errors.NoPermissionError` naming the command; SUBSCRIBE when the
    refusal is of a channel), and the command refused if the reply says."""
    err = no_permission(str(exc))
    if err.command is None:
        return NoPermissionError(str(exc), "SUBSCRIBE"), None
    return err, err.command


def text(value: object) -> str:
    """A channel name or payload as ``str``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
