# SPDX-License-Identifier: MIT
"""Holds kept in one hash, each with its own lease: the core of ``RLock`` (mode ``w``),
``ReadWriteLock`` (``r`` and ``w``) and ``Semaphore`` (``p``). No I/O.

Source: Redisson's reentrant ``RLock`` (a hash ``owner -> count`` kept by Lua scripts),
``RReadWriteLock`` and ``RPermitExpirableSemaphore``, with one lease per hold kept inside
the hold (see ``scripts/_hold.lua``), so one key serves every holder (cluster-safe) and a
crashed reader or permit holder frees its share when its own lease ends. A sorted set beside
the hash (``HoldKeys.expiry``) indexes the holds by lease end, so a call costs O(log n) in
the holds of the name, not a read of the whole hash.

A :class:`HoldCore` manages the holds of ONE owner: the shells keep one core per thread
(sync) or per task (asyncio) for reentrant kinds, and one per permit for ``Semaphore``.
Every flow, the renewal and the loss handling are :class:`LockCore`'s; only the Redis
operations differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from dataclasses import dataclass
from typing import Final

from redislock._core import validate
from redislock._core.codec import permit_id
from redislock._core.keys import HoldKeys
from redislock._core.lock import (
    DONE_MS,
    Holding,
    LockCore,
    holder_meta,
    new_op_id,
    new_token,
    why,
)
from redislock._core.ops import Call, Eval, Flow, Wait, as_int, as_str, unwrap
from redislock._core.scripts import SCRIPTS
from redislock.errors import (
    LockLostError,
    LockUsageError,
    NotOwnedError,
    ReplicationError,
    UnexpectedReplyError,
)

__all__ = ["MODES", "HoldCore", "check_permits", "permit_id"]

_ACQUIRE: Final = {
    "w": SCRIPTS["hold_acquire_write"],
    "r": SCRIPTS["hold_acquire_read"],
    "p": SCRIPTS["hold_acquire_permit"],
}
_REENTER = SCRIPTS["hold_reenter"]
_RELEASE = SCRIPTS["hold_release"]
_RELEASE_PERMIT = SCRIPTS["hold_release_permit"]
_EXTEND = SCRIPTS["hold_extend"]
_STATUS = SCRIPTS["hold_status"]
_COUNT = SCRIPTS["hold_count"]
_LEAVE = SCRIPTS["hold_leave"]
_FORCE = SCRIPTS["hold_force"]
_NO_KEYS: Final = HoldKeys("", "", "", "", "", "", "", "", "")

MODES: Final = ("w", "r", "p")
"""``w``: exclusive and reentrant; ``r``: shared and reentrant; ``p``: one permit."""

MAX_PERMITS: Final = 1_000_000


def check_permits(value: object, *, allow_none: bool = False) -> int | None:
    """Validate a permit count: an int in 1..1,000,000 (or None when ``allow_none``)."""
    if value is None and allow_none:
        return None
    return validate.check_int("permits", value, 1, MAX_PERMITS)


@dataclass(slots=True)
class HoldCore(LockCore):
    """Configuration and local state of one owner's hold in a hold hash."""

    mode: str = "w"
    permits: int = 0
    hkeys: HoldKeys = _NO_KEYS

    @classmethod
    def for_mode(cls, base: LockCore, mode: str, permits: int = 0) -> HoldCore:
        """A hold core with ``base``'s validated settings (from :meth:`LockCore.create`)."""
        if mode not in MODES:
            raise ValueError(f"unknown hold mode {mode!r}")
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(LockCore)}
        core = cls(**fields, mode=mode, permits=permits)
        core.hkeys = HoldKeys.of(base.keys.lock)
        core.holding = None
        return core

    def sibling(self, mode: str | None = None) -> HoldCore:
        """A fresh core with the same settings and counters (another owner's, or a permit)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(holding=None, last_lost=False, pending_token=None)
        if mode is not None:
            fields["mode"] = mode
        return type(self)(**fields)

    # ------------------------------------------------------------------ the script calls
    # One script per operation (and per mode where the keys differ). Each call declares only
    # the keys it may touch, so in a Cluster slot whose migration is under way a status (a
    # one-key script) follows ASK to wherever the hash is, and an extend or a re-entry (the
    # hash and its index, which exist together) to wherever both are, instead of failing
    # with TRYAGAIN because optional keys such as the waiters set do not exist (Redis refuses
    # a multi-key command unless all of its keys are on the node: CLUSTER SETSLOT docs).

    def _acquire_op(
        self, token: str, *, ms: int, meta: str, marker_ms: int = 0, companion: str = ""
    ) -> Eval:
        """A try for a new hold: hold_acquire_write, _read or _permit by the mode."""
        k = self.hkeys
        if self.mode == "w":
            # a single try neither waits nor wakes anyone: no waiters key
            waits = (k.wait,) if marker_ms else ()
            return Eval(
                _ACQUIRE["w"], (k.lock, k.expiry, k.fence, *waits), (token, ms, meta, marker_ms)
            )
        if self.mode == "r":
            keys = (k.lock, k.expiry, k.fence, k.wait, k.rwait, k.rwake)
            return Eval(_ACQUIRE["r"], keys, (token, ms, meta, marker_ms, companion))
        keys = (k.lock, k.expiry, k.fence, k.wait, k.wake, k.permits)
        return Eval(_ACQUIRE["p"], keys, (token, ms, meta, marker_ms, self.permits))

    def _reenter_op(self, token: str, *, ms: int, op_id: str = "") -> Eval:
        return Eval(_REENTER, (self.hkeys.lock, self.hkeys.expiry), (token, ms, op_id))

    def _release_op(self, token: str, op_id: str = "") -> Eval:
        # The op id makes a retried decrement count once; a retried last release finds its
        # token among the recently released (hold_release.lua).
        k, args = self.hkeys, (token, op_id or new_op_id(), DONE_MS)
        if self.mode == "p":  # wakes whoever may now enter
            given = (k.lock, k.expiry, k.wait, k.wake, k.permits, k.released)
            return Eval(_RELEASE_PERMIT, given, (*args, self.permits))
        keys = (k.lock, k.expiry, k.wait, k.wake, k.rwait, k.rwake, k.released)
        return Eval(_RELEASE, keys, args)

    def _extend_op(self, token: str, ms: int, mode: str) -> Eval:
        # "add" is the one mode a retry would apply twice: it carries an op id (hold_extend.lua).
        op_id = new_op_id() if mode == "add" else ""
        return Eval(_EXTEND, (self.hkeys.lock, self.hkeys.expiry), (token, ms, mode, op_id))

    def _status_op(self, token: str) -> Eval:
        return Eval(_STATUS, (self.hkeys.lock,), (token,))

    def _leave_op(self, token: str) -> Eval:
        return Eval(_LEAVE, (self.hkeys.wait,), (token,))

    def _count_op(self) -> Eval:
        k = self.hkeys
        keys = (k.lock, k.expiry, k.permits) if self.mode == "p" else (k.lock, k.expiry)
        return Eval(_COUNT, keys, (self.permits,))

    def _force_op(self) -> Eval:
        k = self.hkeys
        return Eval(_FORCE, (k.lock, k.expiry, k.wait, k.wake, k.rwait, k.rwake), ())

    # ------------------------------------------------------------------ flows

    def reenter_flow(self, h: Holding) -> Flow[bool]:
        """Count one more hold for the owner of ``h`` (and refresh its lease); never waits.

        Raises :class:`LockLostError` if the hold no longer exists in Redis, and
        :class:`ReplicationError` if fewer than ``replicas`` acknowledged the new count
        (which is then given back).
        """
        sent = time.monotonic()
        # The op id makes a retry after a lost reply count once (hold_reenter.lua).
        op = self._reenter_op(h.token, ms=self.lease_ms, op_id=new_op_id())
        try:
            reply, ack = unwrap((yield self._write(op)))
        except Exception:
            # No reply (a client that does not send it again): the re-entry may have
            # counted. The same op again counts once (its op id); then one decrement gives
            # that count back, so a re-entry that raised counted nothing, as an acquire
            # that raised holds nothing.
            with contextlib.suppress(Exception):
                again = yield op
                if as_str(again[0]) == "ok":
                    yield self._release_op(h.token)
            raise
        status = as_str(reply[0])
        if status not in ("ok", "gone"):
            raise UnexpectedReplyError(f"hold acquire replied {reply!r}")
        self._check_master(h, status, ack)
        if status == "ok":
            if ack is not None and ack.acknowledged < self.replicas:
                with contextlib.suppress(Exception):  # give the count back
                    yield self._release_op(h.token)
                raise ReplicationError(self.name, "acquire", self.replicas, ack.acknowledged)
            h.count = as_int(reply[2])
            h.expires_at = max(h.expires_at, sent + as_int(reply[3]) / 1000.0)
            self.counters.acquisitions += 1
            return True
        reason = self._why(h, status)
        self.mark_lost(h, reason)
        raise LockLostError(self.name, reason)

    def _already_held(self) -> str:
        return f"{self.name!r} is already held by this owner"

    def acquire_flow(self, wait: float | None, blocking: bool, companion: str = "") -> Flow[bool]:
        """A new hold, waiting up to ``wait`` seconds (None: no limit); one script per try,
        between tries a wait on the mode's wake-up channel. ``companion``: the owner's write token,
        so a writer may also read (downgrade)."""
        token = new_token()
        start, deadline = self._begin(token, wait)
        marker_ms = self.marker_ms if blocking and wait != 0 else 0
        meta = holder_meta()
        wake = self.hkeys.rwake if self.mode == "r" else self.hkeys.wake
        try:
            while True:
                sent = time.monotonic()
                op = self._acquire_op(
                    token, ms=self.lease_ms, meta=meta, marker_ms=marker_ms, companion=companion
                )
                reply, ack = yield from self._written(op, token)  # undone if it raises
                status = as_str(reply[0])
                if status == "ok":
                    run_id = yield from self._granted(token, ack)
                    self.holding = Holding(
                        token=token,
                        fence=as_int(reply[1]),
                        pid=os.getpid(),
                        acquired_at=sent,
                        expires_at=sent + as_int(reply[3]) / 1000.0,
                        count=as_int(reply[2]),
                        run_id=run_id,
                    )
                    return self._won(start)
                if status != "busy":
                    raise UnexpectedReplyError(f"hold acquire replied {reply!r}")
                now = time.monotonic()
                if marker_ms == 0 or (deadline is not None and now >= deadline):
                    if marker_ms and self.mode != "r":  # no longer counts as waiting
                        yield self._leave_op(token)
                    return self._gave_up(start, now)
                block = self._pause(self.recheck_interval, as_int(reply[1]), deadline, now)
                try:
                    yield Wait(wake, None, block)
                except Exception:
                    with contextlib.suppress(Exception):
                        yield from self.abandon_flow(token)
                    raise
        finally:
            self.pending_token = None

    def release_flow(self, h: Holding, *, retry: bool = False) -> Flow[None]:
        """Drop one count of ``h``; at zero remove the hold and wake whoever may now enter.

        A decrement (count > 1) keeps ``h`` and its renewal; the caller marks
        ``h.closing`` only for the last count. Raises :class:`LockLostError` if the hold
        was gone. Never waits for replicas (see :meth:`LockCore.release_flow`).
        """
        # A release that got no reply keeps its op id for the next release of ``h`` (the
        # caller may retry it): a decrement that already ran then counts once (hold_release.lua).
        if not h.release_op:
            h.release_op = new_op_id()
        reply, ack = unwrap((yield self._tracked(self._release_op(h.token, h.release_op))))
        h.release_op = ""
        status = as_str(reply[0])
        if status in ("ok", "gone"):
            self._check_master(h, status, ack)
        if status == "ok":
            left = as_int(reply[1])
            if left > 0:
                h.count = left
                return
        elif status != "gone":
            raise UnexpectedReplyError(f"hold release replied {reply!r}")
        if self.holding is h:
            self.holding = None
        self._released(h, status, retry=retry)

    def abandon_flow(self, token: str) -> Flow[None]:
        """After a cancelled or failed acquire: remove a hold the script may have made, and
        stop counting as a waiting writer (which would keep new readers out)."""
        yield self._release_op(token)
        if self.mode != "r":
            yield self._leave_op(token)

    def hold_status_flow(self, token: str) -> Flow[tuple[str, float, int, int]]:
        """Ask Redis about the hold of ``token``: (status, ttl seconds, fence, count)."""
        reply = yield self._status_op(token)
        status = as_str(reply[0])
        if status not in ("ok", "gone"):
            raise UnexpectedReplyError(f"hold status replied {reply!r}")
        if status == "ok" and as_str(reply[4]) != self.mode:
            status = "taken"  # a token of another kind of hold: not ours to manage
        return status, as_int(reply[1]) / 1000.0, as_int(reply[2]), as_int(reply[3])

    def status_flow(self, token: str) -> Flow[tuple[str, float, int]]:
        status, ttl, fence, _ = yield from self.hold_status_flow(token)
        return status, ttl, fence

    def adopt_flow(self, token: object) -> Flow[None]:
        token = validate.check_token(token)
        if self.live() is not None:
            raise LockUsageError(f"{self.name!r} is already held by this owner")
        sent = time.monotonic()
        status, ttl, fence, count = yield from self.hold_status_flow(token)
        if status != "ok":
            raise NotOwnedError(self.name, f"no hold with that token ({why(status)})")
        self.holding = Holding(
            token=token,
            fence=fence,
            pid=os.getpid(),
            acquired_at=sent,
            expires_at=sent + ttl,
            count=count,
        )
        self.last_lost = False

    def locked_flow(self) -> Flow[bool]:
        """Whether any hold exists (a writer, a reader or a permit)."""
        return bool((yield Call(("EXISTS", self.hkeys.lock))))

    def count_flow(self) -> Flow[tuple[int, int, int, int]]:
        """Live holds: (writers, readers, permits held, permit count)."""
        reply = yield self._count_op()
        w, r, p, limit = (as_int(x) for x in reply)
        return w, r, p, limit

    def available_flow(self) -> Flow[int]:
        """Permits free now: the permit count minus the live permits (never below 0)."""
        _, _, held, limit = yield from self.count_flow()
        return max(0, limit - held)

    def set_permits_flow(self, count: int | None) -> Flow[None]:
        """Store a run-time permit count for every client (no TTL), or with None remove it."""
        key = self.hkeys.permits
        yield Call(("DEL", key) if count is None else ("SET", key, count))

    def force_flow(self) -> Flow[int]:
        """Operator override: remove every hold and wake every waiter; returns how many."""
        return as_int((yield self._force_op()))
