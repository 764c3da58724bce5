# SPDX-License-Identifier: MIT
"""Several plain locks taken all or nothing: the core of ``MultiLock`` and
``AsyncMultiLock``. No I/O.

Source: deadlock prevention by denying "hold and wait" and "circular wait" (Coffman,
Elphick and Shoshani, "System Deadlocks", 1971; Havender 1968): names are taken in one
global order, one atomic script per chunk of names, and a client that finds a name busy
gives back every chunk it took before it waits. Redisson's ``RedissonMultiLock`` (unlock
all on failure) is the closest peer.

Every name is an ordinary :class:`~redislock.Lock` key (``scripts/multi_acquire.lua`` writes Lock's
value, TTL and fencing counter), so a ``Lock`` and a ``MultiLock`` on a shared name exclude
each other and share one fencing sequence per name.

The order: names sorted; on a Redis Cluster grouped by hash slot, slots ascending (a script
may only touch keys of one slot); each group cut into chunks of at most :data:`CHUNK` names
so one script never blocks Redis long. Taking chunks one by one in that order means a
client that holds chunks only ever waits for a name greater (in that order) than all it
holds, and since it gives them back before waiting, nobody waits while holding anything.

:meth:`MultiCore.take_flow` is one non-blocking try on ONE client (take every chunk or give
back what it took): the unit a quorum version can drive on each of several masters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from redis.crc import key_slot

from redislock._core import validate
from redislock._core.keys import DEFAULT_PREFIX, GRANT_SUFFIX, FairKeys, LockKeys, fence_key
from redislock._core.lock import (
    DONE_MS,
    Holding,
    LockCore,
    LockStatistics,
    holder_meta,
    new_op_id,
    new_token,
    no_ttl,
    why,
)
from redislock._core.ops import Call, Eval, Flow, Wait, as_int, as_str
from redislock._core.scripts import SCRIPTS
from redislock.errors import (
    LockConfigError,
    LockLostError,
    LockUsageError,
    NotOwnedError,
    UnexpectedReplyError,
)

__all__ = [
    "CHUNK",
    "MAX_NAMES",
    "Busy",
    "Chunk",
    "MultiCore",
    "MultiHolding",
    "check_names",
    "label",
    "plan",
]

_SCRIPTS: Final = {op: SCRIPTS[f"multi_{op}"] for op in ("acquire", "release", "extend", "status")}
"""MultiLock's script of each operation (``scripts/multi_<op>.lua``)."""

CHUNK: Final = 1000
"""Names per script call at most (about a millisecond of Redis time per chunk)."""

MAX_NAMES: Final = 1_000_000
"""Items ``names`` may list at most (duplicates included)."""


class Chunk(NamedTuple):
    """Names taken by one script call (all in one hash slot on a cluster), sorted."""

    names: tuple[str, ...]
    locks: tuple[str, ...]
    """The lock key of each name, in the same order."""


class Busy(NamedTuple):
    """A try found ``name`` held by another owner, ``pttl_ms`` milliseconds from its end
    (-1: the key has no TTL)."""

    name: str
    pttl_ms: int


@dataclass(slots=True, eq=False)
class MultiHolding(Holding):
    """One acquisition of a whole set (``fence`` is unused: every name has its own)."""

    fences: dict[str, int] = field(default_factory=dict)
    """Fencing token of each name."""
    chunks: dict[int, Chunk] = field(default_factory=dict)
    """Chunks still held, by position in the plan (a release removes those it has done, so
    a release that failed half-way can be retried)."""
    culprit: str = ""
    """The first name a renewal or extension found gone or taken."""
    unreleased: tuple[str, str] | None = None
    """(status, name) of the first name a release found no longer ours."""


def check_names(value: Any) -> tuple[str, ...]:
    """Validate ``names``: an iterable (not a single str) of 1 to :data:`MAX_NAMES` lock
    names, each as :func:`validate.check_name`; duplicates are dropped. Returns the
    distinct names, sorted. Raises :class:`LockConfigError`."""
    if isinstance(value, str | bytes | bytearray | memoryview):
        raise LockConfigError(
            f"names must be an iterable of lock names, not a single {type(value).__name__} "
            "(wrap one name in a list)"
        )
    try:
        items = iter(value)
    except TypeError:
        raise LockConfigError(
            f"names must be an iterable of str, got {type(value).__name__}"
        ) from None
    seen: set[str] = set()
    check = validate.check_name
    for index, name in enumerate(items):
        if index >= MAX_NAMES:
            raise LockConfigError(f"names lists more than {MAX_NAMES} items")
        try:
            seen.add(check(name))
        except LockConfigError as exc:
            raise LockConfigError(f"names[{index}]: {exc}") from None
    if not seen:
        raise LockConfigError("names must not be empty")
    return tuple(sorted(seen))


def label(names: tuple[str, ...]) -> str:
    """A short text naming a set in errors, logs and ``statistics().name``."""
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, {names[1]}, ... {names[-1]} ({len(names)} names)"


def plan(names: tuple[str, ...], prefix: str, cluster: bool) -> tuple[Chunk, ...]:
    """The chunks of sorted ``names`` in the order they are taken: by name, or on a cluster
    by (hash slot, name); at most :data:`CHUNK` names and one slot per chunk."""
    locks = [f"{prefix}{{{name}}}" for name in names]
    if not cluster:
        return tuple(
            Chunk(names[i : i + CHUNK], tuple(locks[i : i + CHUNK]))
            for i in range(0, len(names), CHUNK)
        )
    slots = [key_slot(key.encode()) for key in locks]
    order = sorted(range(len(names)), key=slots.__getitem__)  # stable: by name within a slot
    chunks: list[Chunk] = []
    start = 0
    while start < len(order):
        slot = slots[order[start]]
        end = start + 1
        while end < len(order) and end - start < CHUNK and slots[order[end]] == slot:
            end += 1
        picked = order[start:end]
        chunks.append(Chunk(tuple(names[i] for i in picked), tuple(locks[i] for i in picked)))
        start = end
    return tuple(chunks)


@dataclass(slots=True)
class MultiCore(LockCore):
    """Configuration, local state and flows of one set of names. ``name`` is a label."""

    names: tuple[str, ...] = ()
    prefix: str = DEFAULT_PREFIX
    chunks: tuple[Chunk, ...] = ()

    @classmethod
    def from_base(
        cls, base: LockCore, names: tuple[str, ...], prefix: str, cluster: bool
    ) -> MultiCore:
        """A multi core with ``base``'s validated settings (from :meth:`LockCore.create`)
        over ``names`` (from :func:`check_names`) and ``prefix`` (validated)."""
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(LockCore)}
        fields["name"] = label(names)
        return cls(**fields, names=names, prefix=prefix, chunks=plan(names, prefix, cluster))

    # ------------------------------------------------------------------ operations

    def _op(
        self,
        op: str,
        chunk: Chunk,
        token: str,
        *,
        ms: int | str = "",
        meta: str = "",
        marker_ms: int | str = "",
        mode: str = "",
    ) -> Eval:
        """The call of ``op``'s script (``multi_<op>.lua``) on ``chunk``, its KEYS and ARGV:
        a release is remembered in a done key for :data:`DONE_MS`, and an "add" extend
        carries a fresh op id, so the same call sent again by the client's retry answers as
        the first did."""
        locks = chunk.locks
        script = _SCRIPTS[op]
        args: tuple[str | int, ...]
        if op == "acquire":
            keys = tuple(k for lock in locks for k in (lock, fence_key(lock), lock + ":wait"))
            args = (token, ms, meta, marker_ms)
        elif op == "release":  # with each name's queue of Lock / FairLock waiters
            queued = [FairKeys.of(lock) for lock in locks]
            keys = tuple(
                k
                for lock, q in zip(locks, queued, strict=True)
                for k in (lock, lock + ":wait", lock + ":wake", lock + ":done", q.queue, q.leases)
            )
            args = (token, DONE_MS, GRANT_SUFFIX)
        elif op == "extend" and mode == "add":
            keys = (*locks, locks[0] + ":done")
            args = (token, len(locks), ms, mode, new_op_id(), DONE_MS)
        elif op == "extend":
            keys, args = locks, (token, len(locks), ms, mode)
        else:
            keys, args = locks, (token,)
        return Eval(script, keys, args)

    def _release_chunks(self, chunks: Iterable[Chunk], token: str) -> Flow[None]:
        """Give back ``chunks`` (owner-checked: names not ours are not touched); every chunk
        is tried, then the first Redis error, if any, is raised."""
        error: Exception | None = None
        for chunk in chunks:
            try:
                yield self._op("release", chunk, token)
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error

    # ------------------------------------------------------------------ acquire

    def take_flow(self, token: str, meta: str, marker_ms: int) -> Flow[dict[str, int] | Busy]:
        """One try on one client: take every chunk in order; never blocks.

        Returns the fencing token of every name, or :class:`Busy` for the first name held by
        another owner, after giving back the chunks taken by this try (their waiters are
        woken). ``marker_ms`` > 0 leaves a waiters marker on the busy name, so its release
        wakes us. On a Redis error every chunk this try may have taken is given back (as far
        as Redis lets us) and the error is raised.
        """
        fences: dict[str, int] = {}
        taken: list[Chunk] = []
        busy: Busy | None = None
        for chunk in self.chunks:
            try:
                reply = yield self._op(
                    "acquire", chunk, token, ms=self.lease_ms, meta=meta, marker_ms=marker_ms
                )
                status = as_str(reply[0])
                if status == "ok":
                    if len(reply) != len(chunk.names) + 1:
                        raise UnexpectedReplyError(f"multi acquire replied {len(reply)} items")
                    fences.update(zip(chunk.names, map(as_int, reply[1:]), strict=True))
                elif status == "busy":
                    busy = Busy(chunk.names[as_int(reply[2]) - 1], as_int(reply[1]))
                else:
                    raise UnexpectedReplyError(f"multi acquire replied {reply!r}")
            except Exception:
                # The script may have run before its reply was lost: undo it with the rest.
                with contextlib.suppress(Exception):
                    yield from self._release_chunks([*taken, chunk], token)
                raise
            if busy is not None:
                break
            taken.append(chunk)
        if busy is None:
            return fences
        yield from self._release_chunks(taken, token)
        return busy

    def _already_held(self) -> str:
        return f"lock {self.name!r} is already held by this object (MultiLock is not reentrant)"

    def acquire_flow(self, wait: float | None, blocking: bool) -> Flow[bool]:
        """Take every name, waiting up to ``wait`` seconds (None: no limit).

        Each try takes the chunks in order; a try that meets a busy name gives back what it
        took and waits on that name's wake-up channel (its release wakes us), at most
        ``recheck_interval`` and at most the holder's remaining TTL, then tries again.
        """
        token = new_token()
        start, deadline = self._begin(token, wait)
        marker_ms = self.marker_ms if blocking and wait != 0 else 0
        meta = holder_meta()
        try:
            while True:
                sent = time.monotonic()
                result = yield from self.take_flow(token, meta, marker_ms)
                if not isinstance(result, Busy):
                    self.holding = MultiHolding(
                        token=token,
                        fence=0,
                        pid=os.getpid(),
                        acquired_at=sent,
                        expires_at=sent + self.lease,
                        fences=result,
                        chunks=dict(enumerate(self.chunks)),
                    )
                    return self._won(start)
                busy = LockKeys.for_name(result.name, self.prefix)
                if result.pttl_ms == -1:
                    raise no_ttl(busy.lock)
                now = time.monotonic()
                if marker_ms == 0 or (deadline is not None and now >= deadline):
                    return self._gave_up(start, now)
                block = self._pause(self.recheck_interval, result.pttl_ms, deadline, now)
                # Nothing is held while we wait: a cancelled wait has nothing to give back.
                self.pending_token = None
                yield Wait(busy.wake, None, block)
                self.pending_token = token
        finally:
            self.pending_token = None

    def adopt_flow(self, token: Any) -> Flow[None]:
        """Not supported: a set's fencing tokens cannot be read back by token."""
        raise LockUsageError("MultiLock holds cannot be adopted (nor detached)")

    def abandon_flow(self, token: str) -> Flow[None]:
        """Give back every name ``token`` may hold (after a cancelled or failed acquire)."""
        yield from self._release_chunks(self.chunks, token)

    # ------------------------------------------------------------------ release

    def release_flow(self, h: Holding, *, retry: bool = False) -> Flow[None]:
        """Release every name still ours and wake each one's waiters; raises
        :class:`LockLostError` if any name was no longer ours (others' keys are untouched).

        The caller marks ``h.closing`` first and calls :meth:`release_failed` if this
        raises a Redis error: the chunks not yet released stay held, and a retry releases
        only those. ``retry``: this repeats a release whose reply never came, so "gone"
        most likely means the first one worked.
        """
        assert isinstance(h, MultiHolding)
        error: Exception | None = None
        for index, chunk in list(h.chunks.items()):
            try:
                reply = yield self._op("release", chunk, h.token)
            except Exception as exc:
                error = error or exc
                continue
            h.chunks.pop(index, None)
            status = as_str(reply[0])
            if status not in ("ok", "gone", "taken"):
                raise UnexpectedReplyError(f"multi release replied {reply!r}")
            if status == "gone" and retry:
                continue
            if status != "ok" and h.unreleased is None:
                h.unreleased = (status, chunk.names[as_int(reply[2]) - 1])
        if error is not None:
            raise error
        if self.holding is h:
            self.holding = None
        if h.lost:
            self.last_lost = True
            raise LockLostError(self.name, h.lost_reason)
        if h.unreleased is not None:
            status, name = h.unreleased
            self.mark_lost(h, f"{why(status)} (name {name!r})", releasing=True)
            raise LockLostError(self.name, h.lost_reason)

    # ------------------------------------------------------------------ extend, status

    def _extend_step(self, h: Holding, seconds: float, mode: str) -> Flow[tuple[str, float]]:
        """Owner-checked PEXPIRE of every name still held: ("ok", least new TTL in seconds;
        ``h.expires_at`` updated), or ("gone" / "taken", 0.0) naming the name in
        ``h.culprit``. One chunk after another (the watchdog batches this flow)."""
        assert isinstance(h, MultiHolding)
        sent = time.monotonic()
        ms = validate.to_ms(seconds)
        least: int | None = None
        for chunk in list(h.chunks.values()):
            reply = yield self._op("extend", chunk, h.token, ms=ms, mode=mode)
            status = as_str(reply[0])
            if status in ("gone", "taken"):
                h.culprit = chunk.names[as_int(reply[2]) - 1]
                return status, 0.0
            if status != "ok":
                raise UnexpectedReplyError(f"multi extend replied {reply!r}")
            ttl = as_int(reply[1])
            least = ttl if least is None else min(least, ttl)
        if least is None:  # nothing left to extend (a release finished meanwhile)
            return "gone", 0.0
        h.expires_at = sent + least / 1000.0
        return "ok", least / 1000.0

    def extend_flow(self, h: Holding, seconds: float, mode: str) -> Flow[float]:
        """Owner-checked PEXPIRE of every name; returns the least new TTL in seconds.

        ``mode`` as :meth:`LockCore.extend_flow`. Raises :class:`LockLostError` if any name
        is gone or taken (the whole set is lost); nothing is ever re-created.
        """
        status, ttl = yield from self._extend_step(h, seconds, mode)
        if status == "ok":
            return ttl
        if not self.mark_lost(h, why(status)) and h.closing:
            raise NotOwnedError(self.name, "it was released while being extended")
        raise LockLostError(self.name, h.lost_reason or why(status))

    def mark_lost(self, h: Holding, reason: str, *, releasing: bool = False) -> bool:
        """As :meth:`LockCore.mark_lost`; the reason names the name that was lost."""
        if isinstance(h, MultiHolding) and h.culprit:
            reason = f"{reason} (name {h.culprit!r})"
        return LockCore.mark_lost(self, h, reason, releasing=releasing)

    def status_flow(self, token: str) -> Flow[tuple[str, float, int]]:
        """Whether ``token`` holds every name: ("ok", least TTL in seconds, 0), else
        ("gone" or "taken" for the first name not ours, 0.0, 0)."""
        least: int | None = None
        for chunk in self.chunks:
            reply = yield self._op("status", chunk, token)
            status = as_str(reply[0])
            if status in ("gone", "taken"):
                return status, 0.0, 0
            if status != "ok":
                raise UnexpectedReplyError(f"multi status replied {reply!r}")
            ttl = as_int(reply[1])
            least = ttl if least is None else min(least, ttl)
        return "ok", (least or 0) / 1000.0, 0

    def locked_flow(self) -> Flow[bool]:
        """Whether anybody holds any of the names (EXISTS per chunk, stopping at a hit)."""
        for chunk in self.chunks:
            if as_int((yield Call(("EXISTS", *chunk.locks)))) > 0:
                return True
        return False

    def statistics(self) -> LockStatistics:
        """As :meth:`LockCore.statistics`, with ``fencing_token`` None (see
        ``fencing_tokens``: one per name)."""
        return dataclasses.replace(LockCore.statistics(self), fencing_token=None)

    def fencing_tokens(self) -> dict[str, int] | None:
        """A copy of the fencing token of every name of the current hold, or None."""
        h = self.current()
        if not isinstance(h, MultiHolding):
            return None
        return dict(h.fences)
