# SPDX-License-Identifier: MIT
"""The lease, shared by every lock kind (sync and asyncio): configuration, local state,
release, extend, status, adoption and watchdog renewal of one lock object.

Source: the Redis docs' distributed-locks page (single instance: ``SET key token NX PX``,
compare-and-delete release), with a fencing token per Kleppmann, "How to do distributed
locking" (2016), and a watchdog lease as in Redisson's ``RLock``.

:class:`LockCore` owns the configuration and the local lease state of one lock object and
exposes each method as a *flow* (see :mod:`redislock._core.ops`). It performs no I/O.
Each kind's core adds its acquire: :class:`~redislock._core.fair.FairCore` is the one of
:class:`redislock.Lock` and :class:`redislock.FairLock` (a queue with direct hand-off).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self

from redislock import metrics
from redislock._clients import (
    CONNECTION_ERRORS,
    NO_PERMISSION_ERRORS,
    RESPONSE_ERRORS,
    TIMEOUT_ERRORS,
)
from redislock._core import validate
from redislock._core.codec import HolderInfo, holder_meta, token_tag
from redislock._core.features import Features
from redislock._core.keys import LockKeys, delay_key
from redislock._core.ops import (
    Acked,
    Call,
    Commands,
    Eval,
    Flow,
    Probe,
    Replicated,
    as_int,
    as_str,
    script_error,
    unwrap,
)
from redislock._core.options import (
    DEFAULT_RECHECK,
    DEFAULT_REPLICA_TIMEOUT,
    DEFAULT_WATCHDOG_LEASE,
    LockOptions,
    MultiOptions,
)
from redislock._core.scripts import SCRIPTS
from redislock.errors import (
    LockConfigError,
    LockLostError,
    LockUsageError,
    NotOwnedError,
    ReplicationError,
    UnexpectedReplyError,
)

__all__ = [
    "COALESCE",
    "DEFAULT_RECHECK",
    "DEFAULT_WATCHDOG_LEASE",
    "DONE_MS",
    "HolderInfo",
    "Holding",
    "LockCore",
    "LockStatistics",
    "holder_meta",
    "new_token",
    "no_ttl",
    "process_tag",
    "queue_token",
    "tell_lost",
    "token_tag",
    "why",
]

COALESCE: Final = 0.05
"""Seconds: the watchdog sends renewals due this soon with the ones due now (early is
harmless), so many leases share one round trip."""

DONE_MS: Final = 60_000
"""Milliseconds a name's done key remembers its last "add" extend (and a Redlock master's
or MultiLock's release, a drop-in's acquire), so that the same call sent again (redis-py's
default client retries a command whose reply was lost: up to 10 times, each after at most
``socket_timeout`` = 5 s and a back-off of at most 1 s) gets the first call's answer
instead of "gone" or a second extension. One short string per name, gone after this
window. (Lock's, FairLock's and the drop-ins' releases use the slot's release ring
instead: ``scripts/_ring.lua``.)"""

_RELEASE = SCRIPTS["lock_release"]
_EXTEND = SCRIPTS["lock_extend"]
_STATUS = SCRIPTS["lock_status"]


def new_token() -> str:
    """A fresh owner token: 128 bits from the OS CSPRNG (as :mod:`secrets`), 32 hex characters."""
    return os.urandom(16).hex()  # what secrets.token_hex(16) does, one call less


_process_tag: tuple[int, str] = (0, "")
"""(pid, tag) of :func:`process_tag`: a forked child gets a tag of its own."""


def process_tag() -> str:
    """This process's tag (4 random hex characters, new in a forked child): a queued
    waiter's token starts with it (:func:`queue_token`), so a grant is published on the
    channel of the process that waits (``FairKeys.grant_for``), not to every process. Two
    processes with one tag (1 in 65,536 per pair) only share a channel: each ignores the
    other's grants (a grant names its waiter), and the lock value stays small (a held
    Lock's key is about 200 B)."""
    global _process_tag
    pid = os.getpid()
    if _process_tag[0] != pid:
        _process_tag = (pid, os.urandom(2).hex())
    return _process_tag[1]


def queue_token() -> str:
    """A fresh owner token for a lock that may queue (Lock, FairLock): ``<process tag>.``
    then 112 random bits from the OS CSPRNG in 28 hex characters, the secret (the tag is
    public: it names a pub/sub channel). 33 characters in all, one more than
    :func:`new_token`'s, so a held Lock's value stays in Redis's 64-byte allocation class
    with a short host name (bench/bulk.py: about 187 B per held Lock)."""
    return f"{process_tag()}.{os.urandom(14).hex()}"


def new_op_id() -> str:
    """A fresh id for one "add" extend call (64 random bits, 16 hex characters): the script
    remembers it, so the same call sent again by the client's retry adds nothing."""
    return os.urandom(8).hex()


def no_ttl(key: str) -> UnexpectedReplyError:
    """The error for a lock key that has no TTL (redislock never writes one)."""
    return UnexpectedReplyError(
        f"lock key {key!r} exists without a TTL: it was not written by redislock (or was "
        "PERSISTed); it would never expire"
    )


@dataclass(slots=True, eq=False)
class Holding:
    """Local state of one acquisition (identity matters: a new acquisition is a new object)."""

    token: str
    fence: int
    pid: int
    acquired_at: float
    """``time.monotonic()`` when the acquiring command was sent."""
    expires_at: float
    """Local lease estimate: monotonic send time of the last successful write + its TTL."""
    closing: bool = False
    """Set before a release is sent, so a renewal racing it does not report a loss."""
    lost: bool = False
    lost_reason: str = ""
    count: int = 1
    """Hold count of a reentrant hold (RLock, ReadWriteLock); 1 for the others."""
    run_id: str = ""
    """``run_id`` of the master that last confirmed this hold ("" when not tracked)."""
    moved: str = ""
    """Set when a write found the master changed and this hold gone: the loss reason."""
    release_op: str = ""
    """Op id of a release of a counted hold that got no reply (_hold.lua): the next release
    of this hold sends the same id, so a retried decrement counts once ("" when none)."""
    renewer_ref: Any = field(default=None, repr=False)
    """A weak reference to the lock object the watchdog renews this hold for (set by the
    schedule once per hold, so a renewal allocates no object that outlives it)."""
    value: str = field(default="", repr=False)
    """The lock key's exact value while this hold has it, when known ("" when not: an
    adopted hold, a kind whose key is no string): the native extend compares it
    (:mod:`redislock._core.features`)."""
    renew_entry: str = field(default="", repr=False)
    """This hold's ``"<token> <ms>"`` pair in a ``lock_renew.lua`` call when its renewal TTL
    is the plain lease (no ``max_lease``): built once ("" until then)."""
    lost_claims: list[object] = field(default_factory=list, repr=False)
    """Who tried to mark this hold lost, first first (:meth:`LockCore.mark_lost`)."""
    lost_event: Any = field(default=None, repr=False)
    """The ``threading.Event`` of this hold's ``lost_event`` (None until asked for): set by
    :meth:`LockCore.mark_lost` (:mod:`redislock._watch`)."""
    watchers: list[Callable[[Holding], object]] | None = field(default=None, repr=False)
    """Called with this hold, in the thread that marks it lost, by :meth:`LockCore.mark_lost`
    (the guards, :mod:`redislock._watch`); None when nobody watches."""
    teller: Callable[[LockCore, Holding], None] | None = field(default=None, repr=False)
    """How this hold's loss is told (one WARNING, then ``on_lost`` of the object in
    :attr:`renewer_ref`): set by the flavour's acquire step, called once by
    :meth:`LockCore.mark_lost` whoever found the loss (a renewal, the holder's own release
    or extend, a quorum or a batch); None: nobody to tell."""


def tell_to(h: Holding, unit: object, teller: Callable[[LockCore, Holding], None]) -> None:
    """Have a loss of ``h``, however found, told by ``teller`` to ``unit`` (the object whose
    ``on_lost`` it calls, kept in :attr:`Holding.renewer_ref`): each flavour's acquire and
    adopt steps call this with their own teller."""
    h.teller = teller
    ref = h.renewer_ref
    if ref is None or ref() is not unit:
        h.renewer_ref = weakref.ref(unit)


@dataclass(frozen=True, slots=True)
class LockStatistics:
    """A local, I/O-free snapshot of one lock object; more fields may be added.

    Attributes:
        name: the lock name.
        held: whether this object believes it holds the lock.
        lost: whether the latest acquisition was lost.
        fencing_token: fencing token of the current hold, or None.
        lease_remaining: seconds left on the local lease estimate, or None when not held.
        acquisitions: successful acquisitions by this object.
        failed_acquisitions: acquire calls that returned False or timed out.
        total_wait: seconds spent inside acquire calls.
        renewals: successful watchdog renewals.
        renewal_failures: watchdog renewals that failed (Redis error, lease gone, or fewer
            replicas than ``replicas`` acknowledged).
        reverified: holds found intact on a new master after the master changed (failover
            or restart: another ``run_id``) and kept.
    """

    name: str
    held: bool
    lost: bool
    fencing_token: int | None
    lease_remaining: float | None
    acquisitions: int
    failed_acquisitions: int
    total_wait: float
    renewals: int
    renewal_failures: int
    reverified: int = 0


@dataclass(slots=True)
class _Counters:
    """What :meth:`LockCore.statistics` counts: its :class:`LockStatistics` fields of the
    same names."""

    acquisitions: int = 0
    failed_acquisitions: int = 0
    total_wait: float = 0.0
    renewals: int = 0
    renewal_failures: int = 0
    reverified: int = 0


@dataclass(slots=True)
class LockCore:
    """Configuration, local state and flows of one lock object. No I/O."""

    name: str
    keys: LockKeys
    ttl: float | None
    lease: float
    renew_interval: float
    max_lease: float | None
    timeout: float | None
    recheck_interval: float
    lease_ms: int
    marker_ms: int
    on_lost: Callable[[Any], object] | None = None
    holding: Holding | None = None
    last_lost: bool = False
    pending_token: str | None = None
    counters: _Counters = field(default_factory=_Counters)
    replicas: int = 0
    """Replicas that must acknowledge each lock write (WAIT); 0: no WAIT."""
    replica_timeout_ms: int = 1000
    """WAIT's limit, milliseconds."""
    track_master: bool = False
    """Writes go out as :class:`Replicated`: WAIT (if ``replicas``) and the master's run_id."""
    lock_delay_ms: int = 0
    """The lock-delay (``lock_delay``), milliseconds; 0: off. Only kinds with
    :attr:`_LOCK_DELAY` take one."""
    label: str = "Lock"
    """The kind, for metrics (:mod:`redislock.metrics`): set by the public class."""

    @classmethod
    def create(cls, name: Any, *, sentinel: bool = False, **options: Any) -> Self:
        """Validate ``name`` and the option keywords (as :class:`LockOptions`; raises
        :class:`LockConfigError`) and build the core."""
        return cls.from_options(name, LockOptions(**options), sentinel=sentinel)

    @classmethod
    def from_options(
        cls,
        name: Any,
        options: MultiOptions,
        *,
        sentinel: bool = False,
        **extra: Any,
    ) -> Self:
        """Validate ``name`` (raises :class:`LockConfigError`) and build the core over the
        validated ``options``; ``extra`` holds a subclass's own (validated) fields.

        ``sentinel``: the client follows a Sentinel master, whose run_id is then tracked
        even without ``replicas``. (A wait holds no connection, so the client's
        ``socket_timeout`` does not bound it.)"""
        name = validate.check_name(name)
        delay_ms = 0
        if isinstance(options, LockOptions):
            replicas, wait_ms = options.replicas, options.replica_timeout_ms
            delay_ms = options.lock_delay_ms
        else:
            replicas, wait_ms = 0, validate.to_ms(DEFAULT_REPLICA_TIMEOUT)
        if delay_ms and not cls._LOCK_DELAY:
            raise LockConfigError(
                "lock_delay is supported by Lock and FairLock only (it must be 0 here)"
            )
        return cls(
            name,
            LockKeys.for_name(name, options.prefix),
            options.ttl,
            options.lease,
            options.renew_interval,  # type: ignore[arg-type]  # resolved by the options
            options.max_lease,
            options.timeout,
            options.recheck_interval,
            options.lease_ms,
            options.marker_ms,
            on_lost=options.on_lost,
            replicas=replicas,
            replica_timeout_ms=wait_ms,
            track_master=bool(replicas) or sentinel,
            lock_delay_ms=delay_ms,
            **extra,
        )

    # ------------------------------------------------------------------ state

    @property
    def watchdog(self) -> bool:
        """Whether leases are renewed automatically (``ttl=None``)."""
        return self.ttl is None

    def current(self) -> Holding | None:
        """The holding of this process, ignoring one inherited across ``fork()``."""
        h = self.holding
        if h is not None and h.pid != os.getpid():
            return None
        return h

    def live(self) -> Holding | None:
        """The current holding if it is neither lost nor past its local lease estimate."""
        h = self.current()
        if h is None or h.lost or time.monotonic() >= h.expires_at:
            return None
        return h

    def is_lost(self) -> bool:
        """True if the latest acquisition was lost, or its lease may have run out (the local
        estimate passed without a renewal)."""
        if self.last_lost:
            return True
        h = self.current()
        return h is not None and (h.lost or time.monotonic() >= h.expires_at)

    def require_holding(self, *, allow_lost: bool = False) -> Holding:
        """The current holding, or raise :class:`NotOwnedError` / :class:`LockLostError`."""
        h = self.holding
        if h is None:
            raise NotOwnedError(self.name, "it is not held (never acquired, or released)")
        if h.pid != os.getpid():
            raise NotOwnedError(
                self.name,
                f"it was acquired by process {h.pid}; locks are not inherited across fork()",
            )
        if h.lost and not allow_lost:
            raise LockLostError(self.name, h.lost_reason)
        return h

    def mark_lost(self, h: Holding, reason: str, *, releasing: bool = False) -> bool:
        """Mark ``h`` lost, the one path every loss takes however it was found: sets
        ``lost`` and the reason, wakes the guards, records the metrics and tells the hold's
        :attr:`Holding.teller` (one WARNING and ``on_lost``), once. True if this call
        changed it. A hold being released (``closing``) is not lost when a renewal finds
        its key gone (the release deleted it); ``releasing``: the release itself found the
        lease gone, which is a loss."""
        if h.lost or (h.closing and not releasing):
            return False
        # A renewal and the holder's own call may find the loss at once: the first to
        # append its claim wins (list.append is atomic, with or without the GIL).
        claim = object()
        h.lost_claims.append(claim)
        if h.lost_claims[0] is not claim:
            return False
        h.lost = True
        h.lost_reason = reason
        if h is self.holding or releasing:
            self.last_lost = True
        if h.lost_event is not None or h.watchers:
            tell_lost(h)
        metrics.lost(self.label, self.name)
        metrics.held(self.label, self.name, time.monotonic() - h.acquired_at)
        if h.teller is not None:
            h.teller(self, h)
        return True

    def statistics(self) -> LockStatistics:
        """Build the I/O-free snapshot."""
        h = self.current()
        return LockStatistics(
            name=self.name,
            held=self.live() is not None,
            lost=self.is_lost(),
            fencing_token=None if h is None else h.fence,
            lease_remaining=None if h is None else max(0.0, h.expires_at - time.monotonic()),
            **dataclasses.asdict(self.counters),
        )

    # ------------------------------------------------------------------ replicas, master

    def _write(self, op: Eval) -> Eval | Replicated:
        """A lock write as sent: with ``replicas=k`` followed by WAIT on the same connection;
        when the master is tracked, also asking for its run_id."""
        if not self.track_master:
            return op
        return Replicated(op, self.replicas, self.replica_timeout_ms, True)

    def _written(self, op: Eval, token: str) -> Flow[tuple[Any, Acked | None]]:
        """An acquiring write ``op`` sent as :meth:`_write` says, and its reply unwrapped
        (:func:`unwrap`). If it raises (no reply: the script may have run), the attempt of
        ``token`` is undone first (:meth:`abandon_flow`, best effort), then it raises."""
        try:
            return unwrap((yield self._write(op)))
        except Exception:
            with contextlib.suppress(Exception):
                yield from self.abandon_flow(token)
            raise

    def _tracked(self, op: Eval) -> Eval | Replicated:
        """A release as sent: the master's run_id when tracked, never WAIT (see
        :meth:`release_flow`)."""
        if not self.track_master:
            return op
        return Replicated(op, 0, 0, True)

    def _granted(self, token: str, ack: Acked | None) -> Flow[str]:
        """After a script granted ``token`` (``ack``: its :class:`Replicated` reply, None when
        not tracked): the master's run_id to keep with the hold ("" when not tracked).

        Fewer than ``replicas`` acknowledgements: the grant is undone (a failover now could
        lose it) and :class:`ReplicationError` raised; never reported as "busy".
        """
        if ack is None:
            return ""
        if ack.acknowledged < self.replicas:
            self.counters.failed_acquisitions += 1
            with contextlib.suppress(Exception):  # if the undo fails, the lease ends it
                yield from self.abandon_flow(token)
            raise ReplicationError(self.name, "acquire", self.replicas, ack.acknowledged)
        return ack.run_id

    def _check_master(self, h: Holding, status: str, ack: Acked | None) -> None:
        """After an owner-checked write for ``h`` answered ``status``, compare the master's
        run_id with the one that last confirmed ``h``. A different one means a failover or a
        restart, and the script that just ran on the new master re-verified the hold: kept
        (``ok``: the new run_id is recorded and counted) or gone (``h.moved`` says so)."""
        new = "" if ack is None else ack.run_id
        if not new or new == h.run_id:
            return
        old = h.run_id
        if status == "ok":
            h.run_id = new
            if old:
                self.counters.reverified += 1
        elif old:
            h.moved = (
                f"master changed (run_id {old[:8]}… → {new[:8]}…) and the hold is not on "
                "the new master"
            )

    def _why(self, h: Holding, status: str) -> str:
        """Why ``h`` is gone, given a status other than ``ok``."""
        return h.moved or why(status)

    # ------------------------------------------------------------------ flows

    def check_acquire_args(self, blocking: Any, timeout: Any) -> float | None:
        """Validate acquire's arguments; returns the wait limit in seconds (None: no limit)."""
        if not isinstance(blocking, bool):
            raise LockConfigError(f"blocking must be a bool, got {blocking!r}")
        wait = validate.check_timeout("timeout", timeout)
        if not blocking:
            if timeout is not None:
                raise LockConfigError("a timeout makes no sense with blocking=False")
            return 0.0
        if timeout is None:
            return self.timeout
        return wait

    def acquire_flow(self, wait: float | None, blocking: bool) -> Flow[bool]:
        """Take the lock, waiting up to ``wait`` seconds (None: no limit). Each kind's core
        has its own (Lock's and FairLock's: :class:`~redislock._core.fair.FairCore`)."""
        raise NotImplementedError(f"{type(self).__name__} has no acquire of its own")

    def release_flow(self, h: Holding, *, retry: bool = False) -> Flow[None]:
        """Compare-and-delete; raises :class:`LockLostError` if the lease was gone.

        The caller marks ``h.closing`` before driving this flow and calls
        :meth:`release_failed` if the flow raises a Redis error. ``retry``: this repeats a
        release whose reply never came, so "gone" most likely means the first one worked.

        A release never waits for replicas: if a failover loses it, the promoted replica
        still has the key, which ends with its lease; that delays the next holder but never
        grants the lock twice, and no acknowledgement count could undo a release anyway.
        """
        reply, ack = unwrap((yield self._tracked(self._release_of(h))))
        status = as_str(reply)
        if self.holding is h:
            self.holding = None
        if status not in ("ok", "gone", "taken"):
            raise UnexpectedReplyError(f"lock_release replied {reply!r}")
        self._check_master(h, status, ack)
        self._released(h, status, retry=retry)

    def _wire_value(self, h: Holding) -> str | bytes:
        """:attr:`Holding.value` as the key holds it (the native extend compares it)."""
        return h.value

    def _released(self, h: Holding, status: str, *, retry: bool) -> None:
        """The end of a release whose script ran and replied ``status``: raises
        :class:`LockLostError` if the hold was lost or gone (unless ``retry`` repeats a
        release whose first reply was lost, when "gone" most likely means it worked)."""
        if retry and status == "gone" and not h.lost:
            return
        if h.lost:
            self.last_lost = True
            raise LockLostError(self.name, h.lost_reason)
        if status != "ok":
            self.mark_lost(h, self._why(h, status), releasing=True)
            raise LockLostError(self.name, h.lost_reason)

    def _begin(self, token: str, wait: float | None) -> tuple[float, float | None]:
        """Begin an acquire with ``token``, waiting up to ``wait`` seconds (None: no limit):
        ``token`` is :attr:`pending_token` from now on (what a cancelled acquire gives back).
        Returns its start and its deadline (None: none), monotonic seconds.

        Raises:
            LockUsageError: this object holds already (:meth:`_already_held` says so).
        """
        if self.live() is not None:
            raise LockUsageError(self._already_held())
        self.pending_token = token
        start = time.monotonic()
        return start, None if wait is None else start + wait

    def _already_held(self) -> str:
        """What an acquire of an object that holds already raises (built only then)."""
        return f"lock {self.name!r} is already held by this object"

    def _won(self, start: float) -> bool:
        """Count the acquire that began at ``start`` (monotonic seconds) as won."""
        self.last_lost = False
        self.counters.acquisitions += 1
        self.counters.total_wait += time.monotonic() - start
        return True

    def _hold(self, token: str, fence: int, sent: float, lease_ms: int, run_id: str) -> None:
        """Make the lock ``token`` took with an acknowledged write this object's hold
        (``sent``: when the write was sent, monotonic seconds; ``lease_ms``: its TTL)."""
        self.holding = Holding(
            token=token,
            fence=fence,
            pid=os.getpid(),
            acquired_at=sent,
            expires_at=sent + lease_ms / 1000.0,
            run_id=run_id,
        )

    def _gave_up(self, start: float, now: float) -> bool:
        """Count the acquire that began at ``start`` as given up at ``now``."""
        self.counters.failed_acquisitions += 1
        self.counters.total_wait += now - start
        return False

    def _pause(self, longest: float, pttl_ms: int, deadline: float | None, now: float) -> float:
        """Seconds a waiter blocks before its next try: at most ``longest``, the holder's
        remaining TTL (``pttl_ms`` >= 0) plus 1 ms and the time left before ``deadline``;
        at least 1 ms. (The wait is on the shared wake-up channel, timed by the client: the
        client's ``socket_timeout`` does not bound it.)"""
        block = longest
        if pttl_ms >= 0:
            block = min(block, pttl_ms / 1000.0 + 0.001)
        if deadline is not None:
            block = min(block, deadline - now)
        return max(block, 0.001)

    def release_failed(self, h: Holding) -> bool:
        """After a release that got no reply: the object keeps the hold (it may still be
        ours). Returns True if the watchdog should resume renewing it."""
        if self.holding is not h:
            return False
        h.closing = False
        return self.watchdog and not h.lost

    def abandon_flow(self, token: str) -> Flow[None]:
        """Delete the key if ``token`` holds it (cleanup after a cancelled acquire)."""
        yield self._release_op(token)

    def _release_of(self, h: Holding) -> Eval:
        """The release of hold ``h``: :meth:`_release_op` of its token. The kinds with a
        release ring (Lock, FairLock, the drop-ins) send its fencing token too."""
        return self._release_op(h.token)

    def _release_op(self, token: str) -> Eval:
        """lock_release.lua for ``token``, remembered in the done key for :data:`DONE_MS`
        (a release sent again after a lost reply answers "ok")."""
        keys = self.keys
        return Eval(_RELEASE, (keys.lock, keys.wait, keys.wake, keys.done), (token, DONE_MS))

    def _extend_op(self, token: str, ms: int, mode: str) -> Eval:
        """lock_extend.lua for ``token``; an "add" carries a fresh op id (remembered in the
        done key for :data:`DONE_MS`), so a retry of the same call adds nothing."""
        if self.lock_delay_ms:  # the delay key moves with the lease (its KEYS[3], ARGV[7])
            keys3 = (self.keys.lock, self.keys.done, delay_key(self.keys.lock))
            op_id = new_op_id() if mode == "add" else ""
            args = (token, ms, mode, op_id, DONE_MS, "", self.lock_delay_ms)
            return Eval(_EXTEND, keys3, args)
        if mode != "add":
            return Eval(_EXTEND, (self.keys.lock,), (token, ms, mode))
        keys = (self.keys.lock, self.keys.done)
        return Eval(_EXTEND, keys, (token, ms, mode, new_op_id(), DONE_MS))

    def _extend_step(self, h: Holding, seconds: float, mode: str) -> Flow[tuple[str, float]]:
        """Owner-checked extend: ("ok", new TTL in seconds; ``h.expires_at`` updated),
        ("gone", 0.0) or ("taken", 0.0; not for hold kinds).

        With ``replicas=k``, fewer acknowledgements raise :class:`ReplicationError` and
        leave ``h.expires_at`` at the last acknowledged lease (the master has the longer
        one, a promoted replica may not). A changed master is checked (see
        :meth:`_check_master`) before either.
        """
        sent = time.monotonic()
        op = self._extend_op(h.token, validate.to_ms(seconds), mode)
        reply, ack = unwrap((yield self._write(op)))
        status = as_str(reply[0])
        ttl = as_int(reply[1]) / 1000.0
        if status not in ("ok", "gone", "taken"):
            raise UnexpectedReplyError(f"extend ({op.script.name}) replied {reply!r}")
        self._check_master(h, status, ack)
        if status == "ok":
            if ack is not None and ack.acknowledged < self.replicas:
                raise ReplicationError(self.name, "extend", self.replicas, ack.acknowledged)
            h.expires_at = sent + ttl
        return status, ttl

    def _native_extend(
        self, h: Holding, seconds: float, feats: Features
    ) -> Flow[tuple[str, float]]:
        """``SET key value IFEQ value PX ms`` (compare-and-set: the TTL becomes ``seconds``
        if the key still holds :attr:`Holding.value`); ("ok", seconds), or ("", 0.0) for
        the script to answer (the key changed, or the server refused the command). A
        repeat after a lost reply sets the same TTL again: nothing to remember."""
        sent = time.monotonic()
        ms = validate.to_ms(seconds)
        value = self._wire_value(h)
        args = ("SET", self.keys.lock, value, "IFEQ", value, "PX", ms)
        try:
            reply = (yield Commands(((args, {}),)))[0]
        except Exception as exc:
            if isinstance(exc, CONNECTION_ERRORS + TIMEOUT_ERRORS):
                raise
            return "", 0.0  # refused before it was sent: the script answers
        if reply is True or (isinstance(reply, bytes | str) and as_str(reply) == "OK"):
            h.expires_at = sent + ms / 1000.0
            return "ok", ms / 1000.0
        if refused_natively(reply):  # unknown option, or not in the ACL
            feats.set_ifeq = False
        return "", 0.0

    def extend_flow(self, h: Holding, seconds: float, mode: str) -> Flow[float]:
        """Owner-checked PEXPIRE; returns the new TTL in seconds.

        ``mode``: ``"add"`` (remaining + seconds), ``"set"`` (exactly seconds) or ``"max"``
        (at least seconds; used by the watchdog so it never shortens a user's extension).
        Raises :class:`LockLostError` if the key is gone or taken; it is never re-created.
        """
        status, ttl = "", 0.0
        # (with a lock-delay, the script: it moves the delay key with the lease)
        if mode == "set" and h.value and not self.track_master and not self.lock_delay_ms:
            feats: Features = yield Probe()
            if feats.set_ifeq:
                status, ttl = yield from self._native_extend(h, seconds, feats)
        if not status:
            status, ttl = yield from self._extend_step(h, seconds, mode)
        if status == "ok":
            return ttl
        reason = self._why(h, status)
        if not self.mark_lost(h, reason) and h.closing:
            raise NotOwnedError(self.name, "it was released while being extended")
        raise LockLostError(self.name, reason)

    def status_flow(self, token: str) -> Flow[tuple[str, float, int]]:
        """Ask Redis what ``token`` holds: (status, ttl seconds, fencing token)."""
        reply = yield Eval(_STATUS, (self.keys.lock,), (token,))
        status = as_str(reply[0])
        if status not in ("ok", "gone", "taken"):
            raise UnexpectedReplyError(f"lock_status replied {reply!r}")
        return status, as_int(reply[1]) / 1000.0, as_int(reply[2])

    def adopt_flow(self, token: Any) -> Flow[None]:
        """Take over the hold identified by ``token`` (from :meth:`detach` elsewhere)."""
        token = validate.check_token(token)
        if self.live() is not None:
            raise LockUsageError(f"lock {self.name!r} is already held by this object")
        sent = time.monotonic()
        status, ttl, fence = yield from self.status_flow(token)
        if status != "ok":
            raise NotOwnedError(self.name, f"no hold with that token ({why(status)})")
        self.holding = Holding(
            token=token, fence=fence, pid=os.getpid(), acquired_at=sent, expires_at=sent + ttl
        )
        self.last_lost = False

    def locked_flow(self) -> Flow[bool]:
        """Whether anybody holds the lock."""
        return bool((yield Call(("EXISTS", self.keys.lock))))

    def owned_flow(self) -> Flow[bool]:
        """Whether this object's token holds the lock in Redis right now."""
        h = self.current()
        if h is None:
            return False
        status, _, _ = yield from self.status_flow(h.token)
        return status == "ok"

    def remaining_flow(self) -> Flow[float | None]:
        """Seconds left on the key's TTL if this object holds it, else None."""
        h = self.current()
        if h is None:
            return None
        status, ttl, _ = yield from self.status_flow(h.token)
        return ttl if status == "ok" else None

    # ------------------------------------------------------------------ renewal

    def renewal_seconds(self, h: Holding, now: float) -> float | None:
        """TTL to renew to, in seconds, or None when ``max_lease`` forbids renewing."""
        if self.max_lease is None:
            return self.lease
        left = h.acquired_at + self.max_lease - now
        if left < COALESCE + 0.001:  # the schedule may run us this early: stop here
            return None
        return min(self.lease, left)

    def renewal_due(self, h: Holding, now: float) -> float | tuple[float | None, bool]:
        """The first half of a watchdog step for ``h`` at monotonic time ``now``: the TTL to
        renew to, in seconds, or the step's outcome (as :meth:`renew_flow` returns) when no
        renewal is to be sent."""
        if h.closing or h.lost or h is not self.holding:
            return None, False
        seconds = self.renewal_seconds(h, now)
        if seconds is None:
            # The schedule runs this up to COALESCE before the lease end it was scheduled
            # for; reporting the loss that early is the safe side, rescheduling would spin.
            if now < h.expires_at - 2 * COALESCE:
                return h.expires_at, False
            return None, self.mark_lost(h, "max_lease reached; the lease was left to expire")
        return seconds

    def renewal_done(self, h: Holding, status: str, sent: float) -> tuple[float | None, bool]:
        """The second half: after Redis answered ``status`` ("ok", "gone" or "taken") to the
        renewal of ``h`` sent at monotonic time ``sent`` (``h.expires_at`` already updated
        on "ok")."""
        if status != "ok":
            self.counters.renewal_failures += 1
            metrics.renewal(self.label, self.name, ok=False)
            return None, self.mark_lost(h, self._why(h, status))
        self.counters.renewals += 1
        metrics.renewal(self.label, self.name, ok=True)
        # One interval after this renewal was SENT, so a slow reply does not eat into the
        # safety margin a second time.
        # (Never later than the lease end: a TTL capped by max_lease may end sooner.)
        return min(sent + self.renew_interval, h.expires_at), False

    def renew_flow(self, h: Holding) -> Flow[tuple[float | None, bool]]:
        """One watchdog step for ``h``.

        Returns (monotonic time of the next step, or None to stop renewing ``h``; whether
        this step found the lease lost, so the shell must call ``on_lost``).
        """
        seconds = self.renewal_due(h, time.monotonic())
        if isinstance(seconds, tuple):
            return seconds
        sent = time.monotonic()
        try:
            status, _ = yield from self._extend_step(h, seconds, "max")
        except Exception as exc:  # Redis unreachable, timed out, refused the command
            return self.renewal_error(h, exc)
        return self.renewal_done(h, status, sent)

    @property
    def lock_renew(self) -> bool:
        """Whether the watchdog may renew this core's holds in a ``lock_renew.lua`` call
        shared with other locks (see :meth:`renew_entry`, :meth:`renewed`): its renewal is
        ``lock_extend`` "max" on the lock key alone, the master is not tracked, and there
        is no lock-delay (whose key each renewal moves too, through ``lock_extend``)."""
        return self._LOCK_RENEW and not self.track_master and not self.lock_delay_ms

    _LOCK_RENEW: ClassVar[bool] = True
    """False for a kind whose renewal is another script (set by ``__init_subclass__``)."""

    _LOCK_DELAY: ClassVar[bool] = False
    """Whether this kind takes a ``lock_delay`` (its acquire honours the delay key)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super(LockCore, cls).__init_subclass__(**kwargs)  # (slots: no zero-argument super)
        if any(
            getattr(cls, name) is not getattr(LockCore, name)
            for name in ("renew_flow", "_extend_step", "_extend_op")
        ):
            cls._LOCK_RENEW = False

    def renew_entry(self, h: Holding, now: float) -> str | tuple[float | None, bool]:
        """For ``lock_renew.lua`` (cores with :attr:`lock_renew`): the ``"<token> <ms>"``
        pair to renew ``h`` with at monotonic time ``now``, or the step's outcome when no
        renewal is to be sent. The key is ``self.keys.lock``; the renewal counts as sent at
        ``now`` (take it before the call is sent)."""
        entry = h.renew_entry
        if entry and h is self.holding and not (h.closing or h.lost):
            return entry  # the usual case (no max_lease): built once, at the first renewal
        seconds = self.renewal_due(h, now)
        if isinstance(seconds, tuple):
            return seconds
        entry = f"{h.token} {validate.to_ms(seconds)}"
        if self.max_lease is None:
            h.renew_entry = entry
        return entry

    def renewed(self, h: Holding, reply: object, sent: float) -> tuple[float | None, bool]:
        """The outcome (as :meth:`renew_flow` returns) of ``h``'s entry in a
        ``lock_renew.lua`` reply, or of the error the call failed with (``reply``: an
        exception; a script error is typed as the drivers do); ``sent``: the ``now`` given
        to :meth:`renew_entry`."""
        if type(reply) is list and len(reply) == 2:  # the usual case: ["ok", ms]
            status, ms = reply
            if (status == b"ok" or status == "ok") and type(ms) is int:
                h.expires_at = sent + ms / 1000.0
                return self.renewal_done(h, "ok", sent)
        if isinstance(reply, BaseException):
            if isinstance(reply, RESPONSE_ERRORS):
                reply = script_error(reply) or reply
            return self.renewal_error(h, reply)
        try:
            status = as_str(reply[0])  # type: ignore[index]
            ttl = as_int(reply[1]) / 1000.0  # type: ignore[index]
            if status not in ("ok", "gone", "taken"):
                raise UnexpectedReplyError(f"extend (lock_renew) replied {reply!r}")
        except Exception as exc:  # as renew_flow: a reply it cannot read is a failure
            return self.renewal_error(h, exc)
        if status == "ok":
            h.expires_at = sent + ttl
        return self.renewal_done(h, status, sent)

    def renewal_error(self, h: Holding, error: BaseException) -> tuple[float | None, bool]:
        """After a renewal that failed with ``error``: as :meth:`renew_flow` returns.

        Retries a few times; once the local lease estimate has run out the lease counts as
        lost (another client may hold the lock by now).
        """
        self.counters.renewal_failures += 1
        metrics.renewal(self.label, self.name, ok=False)
        now = time.monotonic()
        if now >= h.expires_at:
            return None, self.mark_lost(
                h, f"could not renew before the lease ran out: {type(error).__name__}: {error}"
            )
        # The floor exceeds COALESCE, or the schedule would take the retry at once.
        backoff = max(COALESCE + 0.05, min(self.renew_interval / 4.0, 1.0))
        return min(h.expires_at, now + backoff), False


def refused_natively(reply: object) -> bool:
    """Whether a native command's error reply means this server (or this ACL user) will not
    run it: NOPERM, an unknown command or option. Other errors (READONLY after a failover,
    OOM, BUSY) say nothing about the command: the script is sent this time only."""
    if isinstance(reply, NO_PERMISSION_ERRORS):
        return True
    if not isinstance(reply, RESPONSE_ERRORS):
        return False
    text = str(reply).lower()
    return any(m in text for m in ("unknown command", "syntax error", "wrong number", "noperm"))


def why(status: str) -> str:
    if status == "gone":
        return "the lease expired or the key was deleted"
    return "another holder has the lock"


def tell_lost(h: Holding) -> None:
    """Tell whoever watches ``h`` that it was just marked lost: set its ``lost_event`` and
    call its watchers (a watcher that raises is ignored: the loss is reported anyway)."""
    event = h.lost_event
    if event is not None:
        event.set()
    for watcher in tuple(h.watchers or ()):
        with contextlib.suppress(Exception):
            watcher(h)
