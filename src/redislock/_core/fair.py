# SPDX-License-Identifier: MIT
"""The queued mutex of Lock and FairLock: grants in arrival order with direct hand-off. No I/O.

Source: Redisson's ``RedissonFairLock`` (a queue of waiters with timeouts), changed so each
waiter renews a short waiter lease while it waits and a release grants the lock to the next
live waiter itself (``scripts/fair_acquire.lua``, ``fair_release.lua``, ``fair_cancel.lua``,
``fair_force.lua``). While nobody is queued, an acquire and a release are Lock's single round
trips (SET NX + INCR, compare-and-delete), in the same scripts. The
lock key, fencing counter, extend, status and renewal are :class:`LockCore`'s: a held
FairLock looks exactly like a held Lock. Lock is this core with the default waiter lease
and no queue limit; FairLock sets both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import random
import time
from dataclasses import dataclass, field
from typing import ClassVar, Final

from redislock._core import validate
from redislock._core.keys import FairKeys, delay_key
from redislock._core.lock import Holding, LockCore, holder_meta, no_ttl, queue_token
from redislock._core.ops import Eval, Flow, Keep, Wait, as_int, as_str, encoded, unwrap
from redislock._core.options import DEFAULT_QUEUE_MAX, DEFAULT_WAITER_LEASE
from redislock._core.scripts import SCRIPTS
from redislock.errors import QueueFullError, UnexpectedReplyError

__all__ = ["DEFAULT_QUEUE_MAX", "DEFAULT_WAITER_LEASE", "NO_QUEUE_LIMIT", "WAKE", "FairCore"]

_ACQUIRE = SCRIPTS["fair_acquire"]
_RELEASE = SCRIPTS["fair_release"]
_CANCEL = SCRIPTS["fair_cancel"]
_FORCE = SCRIPTS["fair_force"]
NO_QUEUE_LIMIT: Final = 0
"""``queue_max`` of a Lock: its queue takes any number of waiters."""
WAKE: Final = 0
"""The fence of a message ``<tag>|0`` on the grant channel: the waiter of that tag was woken
without a grant (multi_release.lua's release of a name it waits for) and tries again at once. A
grant carries the fencing token (>= 1)."""
RECHECK_QUEUED: Final = 30.0
"""Longest wait, in seconds, of a queued waiter between its own tries (a random part of it,
from half to all, so waiters that queued together do not try together). Meanwhile its
process renews its waiter lease and looks for its grant (:class:`Keep`, every third of the
waiter lease): the try is only the last safety net."""


@functools.lru_cache(maxsize=64)
def _encoded_args(
    lease_ms: int, waiter_lease: float, queue_max: int, delay_ms: int
) -> tuple[bytes, bytes, bytes, bytes]:
    """FairCore's constant acquire ARGV, encoded (shared by the cores of equal settings)."""
    waiter_ms = validate.to_ms(waiter_lease)
    return (b"%d" % lease_ms, b"%d" % waiter_ms, b"%d" % queue_max, b"%d" % delay_ms)


@dataclass(slots=True)
class FairCore(LockCore):
    """A :class:`LockCore` whose acquire queues and whose release hands off (and which
    takes a ``lock_delay``: fair_acquire.lua honours and writes the delay key)."""

    _LOCK_DELAY: ClassVar[bool] = True

    waiter_lease: float = DEFAULT_WAITER_LEASE
    queue_max: int = DEFAULT_QUEUE_MAX
    """Most waiters in the queue; :data:`NO_QUEUE_LIMIT` (0): any number."""
    fkeys: FairKeys = field(init=False)
    """The queue's keys (from ``keys.lock``)."""
    kind: str = "FairLock"
    """The public class, for messages."""
    _queue_keys: tuple[str, ...] = field(init=False)
    """fair_acquire.lua's and fair_cancel.lua's KEYS (built once per object): the queue's
    five, the slot's release ring and the lock-delay key, so that every acquire honours a
    lock-delay (KEYS[7])."""
    _end_keys: tuple[str, ...] = field(init=False)
    """fair_release.lua's and fair_force.lua's KEYS: the queue's five, the slot's release
    ring, MultiLock's marker and wake channel, and the lock-delay key."""
    _acquire_head: tuple[bytes, ...] = field(init=False)
    """EVALSHA's sha, numkeys and :attr:`_queue_keys` of fair_acquire.lua, encoded once (see
    ``Eval.encoded``)."""
    _cancel_head: tuple[bytes, ...] = field(init=False)
    """The same of fair_cancel.lua."""
    _release_head: tuple[bytes, ...] = field(init=False)
    """The same of fair_release.lua, with :attr:`_end_keys`."""
    _force_head: tuple[bytes, ...] = field(init=False)
    """The same of fair_force.lua, with :attr:`_end_keys`."""
    _acquire_args: tuple[bytes, bytes, bytes, bytes] = field(init=False)
    """lease_ms, waiter_ms (of a waiter that queues), queue_max and delay_ms, encoded once."""

    def __post_init__(self) -> None:
        k = self.fkeys = FairKeys.of(self.keys.lock, self.keys.fence)
        own = (k.lock, k.fence, k.queue, k.leases, k.info)
        lk = self.keys
        delay = delay_key(lk.lock)
        self._queue_keys = (*own, lk.ring, delay)
        self._end_keys = (*own, lk.ring, lk.wait, lk.wake, delay)
        self._acquire_head = encoded(_ACQUIRE, self._queue_keys)
        self._cancel_head = encoded(_CANCEL, self._queue_keys)
        self._release_head = encoded(_RELEASE, self._end_keys)
        self._force_head = encoded(_FORCE, self._end_keys)
        self._acquire_args = _encoded_args(
            self.lease_ms, self.waiter_lease, self.queue_max, self.lock_delay_ms
        )

    @classmethod
    def from_base(
        cls, base: LockCore, waiter_lease: float, queue_max: int, kind: str = "FairLock"
    ) -> FairCore:
        """A queued core with ``base``'s validated settings (from :meth:`LockCore.create`)."""
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(LockCore)}
        return cls(**fields, waiter_lease=waiter_lease, queue_max=queue_max, kind=kind)

    def _acquire_op(self, token: str, meta: str, waiter_ms: int) -> Eval:
        """fair_acquire.lua: KEYS lock, fence, queue, waiter leases, waiter info, release
        ring, lock-delay key; ARGV token, lease_ms, meta, waiter_ms (0: a single try; else
        this core's waiter lease), queue_max, delay_ms (0: none). The constant ones go as
        bytes, encoded once (redis-py sends bytes as they are)."""
        lease, waiter, most, delay = self._acquire_args
        args = (token, lease, meta, waiter if waiter_ms else b"0", most, delay)
        return Eval(_ACQUIRE, self._queue_keys, args, self._acquire_head)

    def _cancel_op(self, token: str) -> Eval:
        """fair_cancel.lua: the acquire's KEYS; ARGV token."""
        return Eval(_CANCEL, self._queue_keys, (token,), self._cancel_head)

    def _already_held(self) -> str:
        return f"lock {self.name!r} is already held by this object ({self.kind} is not reentrant)"

    def acquire_flow(self, wait: float | None, blocking: bool) -> Flow[bool]:
        """Take the lock in arrival order, waiting up to ``wait`` seconds (None: no limit).

        The first try takes the lock if it is free and nobody is queued (one round trip),
        else queues this waiter; then the waiter waits on its process's grant channel of the
        name (:meth:`FairKeys.grant_for`: the token carries the process's tag, so a grant
        wakes only this process) for a message tagged with its token's hash
        (:meth:`FairKeys.tag`), which the release ahead of it publishes with the fencing
        token, so the lock is already its own when it wakes. Between wake-ups it retries,
        which renews its waiter lease. A message ``<tag>|0`` (MultiLock's release of the
        name, :data:`WAKE`) makes it try again at once.

        A grant message is trusted only if its fencing token is above the counter the
        waiter's last try saw (fair_acquire.lua's busy reply): the grant then came after that try,
        so the lock is this waiter's until its lease, counted from the try, ends. (An older
        grant, seen late, may be of a hold that ended before that try: the try said busy.)
        The counter is the name's hash slot's, shared with the other names of the slot, so
        it also rises between grants of this name; that does not weaken the check: a grant
        to this waiter issued after the try takes its token from the same counter with INCR,
        so its fence is above every value the counter had before, the one the try saw too.

        With ``replicas=k`` (or a tracked master) the first try goes out with WAIT (a lock
        it takes is confirmed by it); every other grant is confirmed by one more round
        trip, see :meth:`_held`: the later tries carry no WAIT, so a queued waiter never
        stalls on acknowledgements while its waiter lease runs.
        """
        token = queue_token()
        start, deadline = self._begin(token, wait)
        waiter_ms = validate.to_ms(self.waiter_lease) if blocking and wait != 0 else 0
        meta = holder_meta()
        tag = ""  # what a grant to this waiter is tagged with, once it waits
        keep: Keep | None = None  # its waiter lease, renewed by the process while it waits
        queued = False
        first = True
        try:
            while True:
                sent = time.monotonic()
                op = self._acquire_op(token, meta, waiter_ms)
                try:
                    if first:  # with WAIT when tracked (Lock's one round trip)
                        reply, ack = unwrap((yield self._write(op)))
                    else:
                        reply, ack = (yield op), None
                except Exception:
                    with contextlib.suppress(Exception):  # leave the queue, free a grant
                        yield from self.abandon_flow(token)
                    raise
                status = as_str(reply[0])
                if status == "ok":
                    if ack is not None:  # our own write, acknowledged (or undone: raises)
                        run_id = yield from self._granted(token, ack)
                        self._hold(token, as_int(reply[1]), sent, as_int(reply[2]), run_id)
                        return self._won(start)
                    if not self.track_master:  # nothing to confirm (see _held)
                        fence = as_int(reply[1])
                        self._hold(token, fence, sent, as_int(reply[2]), "")
                        self.holding.value = f"{token}|{fence}|{meta}"  # type: ignore[union-attr]
                        return self._won(start)
                    fence, ms = as_int(reply[1]), as_int(reply[2])
                    if (yield from self._held(token, fence, sent, ms, meta)):
                        return self._won(start)
                    continue  # gone before it was confirmed: queue again
                first = False
                if status == "full":
                    self.counters.failed_acquisitions += 1
                    raise QueueFullError(self.name, as_int(reply[1]))
                if status != "busy":
                    raise UnexpectedReplyError(f"fair acquire replied {reply!r}")
                pttl = as_int(reply[1])
                seen = as_int(reply[2]) if len(reply) > 2 else 0
                if pttl == -1:
                    raise no_ttl(self.fkeys.lock)
                queued = waiter_ms > 0
                now = time.monotonic()
                if waiter_ms == 0 or (deadline is not None and now >= deadline):
                    if queued:
                        reply = yield self._cancel_op(token)
                        if as_str(reply[0]) == "ok":  # granted just before we gave up
                            fence, ms = as_int(reply[1]), as_int(reply[2])
                            if (yield from self._held(token, fence, now, ms, meta)):
                                return self._won(start)
                    return self._gave_up(start, now)
                tag = tag or self.fkeys.tag(token)
                if keep is None:
                    k = self.fkeys
                    keys = (k.lock, k.queue, k.leases, k.info)
                    keep = Keep(keys, token, waiter_ms, self.waiter_lease / 3.0, tag, sent)
                else:
                    keep.checked = sent  # the try renewed the waiter lease, found no grant
                # Until the grant comes, or the keep finds it (or the lock free, or this
                # waiter dropped: "<tag>|0", try now), or the deadline; the holder's TTL
                # bounds the wait only when it ends before the keep's next look.
                if 0 <= pttl <= keep.every * 1000.0:
                    longest = keep.every
                else:
                    longest, pttl = RECHECK_QUEUED * random.uniform(0.5, 1.0), -1
                block = self._pause(longest, pttl, deadline, now)
                try:
                    got = yield Wait(self.fkeys.grant_for(token), tag, block, keep)
                except Exception:
                    with contextlib.suppress(Exception):
                        yield from self.abandon_flow(token)
                    raise
                fence = _granted_fence(got, tag)
                if fence > seen:  # the release ahead of us granted us the lock
                    # The lease estimate starts when this waiter was last seen queued, not
                    # granted (its last try or the keep's last look, each as SENT): the
                    # grant ran after that (its fence is above the counter the try saw),
                    # whereas it may have run before this Wait began.
                    if (yield from self._held(token, fence, keep.checked, self.lease_ms, meta)):
                        return self._won(start)
                    continue  # gone before it was confirmed: queue again
        finally:
            self.pending_token = None

    def _held(self, token: str, fence: int, sent: float, lease_ms: int, meta: str) -> Flow[bool]:
        """Make the lock granted to ``token`` this object's hold; False if it is gone.
        (``meta``: what the acquire sent as holder metadata, so the key's value is known.)

        With ``replicas=k`` (or a tracked master), first an owner-checked extend with WAIT
        on our own connection: the grant may have been written by another client (the
        release that handed the lock over), whose acknowledgements we cannot see, but our
        write follows it in the replication stream, so replicas that acknowledged ours
        have the grant too. Fewer than k: undone, :class:`ReplicationError`.
        """
        h = Holding(
            token=token,
            fence=fence,
            pid=os.getpid(),
            acquired_at=sent,
            expires_at=sent + lease_ms / 1000.0,
            value=f"{token}|{fence}|{meta}",
        )
        if self.track_master:
            op = self._extend_op(token, self.lease_ms, "max")
            reply, ack = yield from self._written(op, token)  # undone if it raises
            if as_str(reply[0]) != "ok":
                return False
            h.run_id = yield from self._granted(token, ack)
        self.holding = h
        self.last_lost = False
        return True

    def _release_of(self, h: Holding) -> Eval:
        return self._fenced_release(h.token, h.fence)

    def _release_op(self, token: str) -> Eval:
        return self._fenced_release(token, 0)

    def _fenced_release(self, token: str, fence: int) -> Eval:
        """fair_release.lua with the slot's release ring (a release sent again after a
        lost reply answers "ok" even though the lock was handed on meanwhile: ``fence``'s
        bit is set) and MultiLock's waiters marker and wake channel (a waiting MultiLock is
        woken): ARGV token, fence (the hold's fencing token, 0 if not known)."""
        args = (token, b"%d" % fence)
        return Eval(_RELEASE, self._end_keys, args, self._release_head)

    def abandon_flow(self, token: str) -> Flow[None]:
        """Leave the queue; if the lock was granted to ``token`` meanwhile, release it (which
        grants the next waiter)."""
        reply = yield self._cancel_op(token)
        if as_str(reply[0]) == "ok":
            yield self._fenced_release(token, as_int(reply[1]))

    def force_flow(self) -> Flow[int]:
        """Operator override: delete the lock whoever holds it and grant the next waiter
        (and wake a waiting MultiLock); 1 if a lock key was deleted, plus 2 if a lock-delay
        was ended (fair_force.lua)."""
        return as_int((yield Eval(_FORCE, self._end_keys, (), self._force_head)))


def _granted_fence(payload: str | None, tag: str) -> int:
    """The fencing token of a grant message ``<tag>|<fence>`` for ``tag``; :data:`WAKE` (0)
    for anything else (a wake-up without a grant ``<tag>|0``, a plain wake-up, a timeout)."""
    if payload is None:
        return WAKE
    head, bar, fence = payload.partition("|")
    if not bar or head != tag or not fence.isdigit():
        return WAKE
    return int(fence)
