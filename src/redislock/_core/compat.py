# SPDX-License-Identifier: MIT
"""redis-py's lock format under redislock's lease: the core of :mod:`redislock.compat`.

redis-py's ``Lock`` (``redis/lock.py``) writes the owner token itself under the lock name
(``SET name token NX PX ms``) and releases with a compare-and-delete. The drop-in writes
exactly that, so redis-py's locks and the drop-ins on one name exclude each other and a
fleet can move process by process; what it adds lives beside the key:

- a fencing token from the name's hash slot's counter (``<prefix>{<slot tag>}:slotfence``,
  the one redislock's own locks use: :mod:`redislock._core.keys`), issued by
  ``compat_acquire.lua`` in the same step as the ``SET NX``;
- a lease that never leaves a key without a TTL: redis-py's ``timeout=None`` becomes a
  watchdog lease, renewed while held (Redisson's design), with loss detection;
- the release and extend of redislock's own locks (``lock_release.lua``,
  ``lock_extend.lua``) in their "exact" ownership mode (value == token, redis-py's compare),
  with the done key that makes a call sent again after a lost reply answer as the first.

No I/O here; :mod:`redislock.aio.compat` (and the sync module generated from it) drive it.
"""

from __future__ import annotations

import time
from typing import Any, Final, Self

from redis.exceptions import LockError, LockNotOwnedError

from redislock._core.keys import (
    DEFAULT_PREFIX,
    FENCE_SUFFIX,
    RING_SUFFIX,
    LockKeys,
    key_slot,
    slot_tag,
)
from redislock._core.lock import DONE_MS, Holding, LockCore, new_op_id
from redislock._core.ops import Eval, Flow, as_int, as_str, unwrap
from redislock._core.options import LockOptions
from redislock._core.scripts import SCRIPTS
from redislock.errors import LockConfigError, LockLostError, UnexpectedReplyError

__all__ = [
    "MAX_NAME_BYTES",
    "CompatArgumentError",
    "CompatCore",
    "LeaseLostError",
    "check_name",
    "compat_keys",
    "lease_lost",
]

_ACQUIRE = SCRIPTS["compat_acquire"]
_RELEASE = SCRIPTS["compat_release"]
_EXTEND = SCRIPTS["lock_extend"]
_EXACT: Final = b"exact"
"""lock_release.lua's and lock_extend.lua's argument for redis-py's ownership test."""

MAX_NAME_BYTES: Final = 1024
"""Longest lock name, in UTF-8 bytes (as redislock's own names)."""


class CompatArgumentError(LockError, LockConfigError):
    """A bad argument to a drop-in's method (``extend(0)``): a redis-py
    :class:`~redis.exceptions.LockError`, so redis-py's ``except`` clauses catch it, and a
    :class:`redislock.LockConfigError`. Raised before any I/O."""


class LeaseLostError(LockNotOwnedError, LockLostError):
    """The lease of a drop-in lock was lost before ``release()``, ``extend()`` or
    ``reacquire()`` (it expired, was deleted or was taken by another holder, or the
    watchdog could not renew it in time).

    A subclass of redis-py's :class:`redis.exceptions.LockNotOwnedError` (so ``except
    LockError`` and ``except LockNotOwnedError`` clauses written for redis-py keep working)
    and of :class:`redislock.LockLostError`.

    Attributes:
        lock_name: the lock name (redis-py's attribute); ``name`` too.
        reason: why the lease is gone.
    """

    def __init__(self, name: str, message: str, reason: str) -> None:
        # redis-py's own constructor chain (LockError, RedisError): its __repr__ and its
        # handlers read the attributes RedisError.__init__ sets (error_type in redis-py 8)
        LockNotOwnedError.__init__(self, f"{message}: {reason}", lock_name=name)
        self.message = f"{message}: {reason}"
        self.lock_name = name
        self.name = name
        self.reason = reason
        self._said = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self._said, self.reason))


def check_name(name: Any) -> str:
    """A drop-in's lock name: a non-empty str (or UTF-8 bytes, as redis-py accepts) of at
    most :data:`MAX_NAME_BYTES` bytes; it is the Redis key itself, as with redis-py.

    Raises:
        LockConfigError: anything else.
    """
    if isinstance(name, bytes):
        try:
            name = name.decode()
        except UnicodeDecodeError:
            raise LockConfigError("name must be a str or UTF-8 bytes") from None
    if not isinstance(name, str):
        raise LockConfigError(f"name must be a str, got {type(name).__name__}")
    if not name or len(name.encode()) > MAX_NAME_BYTES:
        raise LockConfigError(f"name must be 1 to {MAX_NAME_BYTES} UTF-8 bytes, got {name!r}")
    return name


def compat_keys(name: str, prefix: str = DEFAULT_PREFIX) -> LockKeys:
    """The keys of drop-in lock ``name``: the lock key is ``name`` itself; the fencing
    counter and release ring are those of the name's hash slot, and the done key (the
    acquire's memo) carries the slot's tag, so every key of one call is in the name's slot
    (Redis Cluster) and no name leaves a key of its own once released (the done key ends
    after :data:`~redislock._core.lock.DONE_MS`). ``wait`` and ``wake`` name nothing a
    drop-in writes (redis-py's waiters poll)."""
    base = f"{prefix}{{{slot_tag(key_slot(name))}}}"
    return LockKeys(
        lock=name,
        fence=base + FENCE_SUFFIX,
        wait=f"{base}:rp-wait:{name}",
        wake=f"{base}:rp-wake:{name}",
        done=f"{base}:rp-done:{name}",
        ring=base + RING_SUFFIX,
    )


def _wire(token: str) -> bytes:
    """The bytes of a token as redis-py wrote it (a hold keeps them as latin-1 text)."""
    return token.encode("latin-1")


class CompatCore(LockCore):
    """A :class:`LockCore` over a lock in redis-py's format: one acquisition's hold (the
    drop-in makes one core per acquire, since redis-py keeps a token per thread)."""

    __slots__ = ("hold_id",)
    hold_id: str
    """This core's acquire call and hold (random hex): a caller may choose the token, and
    two holds may share one, so the done key's acquire memo names the hold by this id."""

    @classmethod
    def for_redis_py(cls, name: str, options: LockOptions, *, sentinel: bool = False) -> Self:
        """A core for drop-in lock ``name`` (checked by :func:`check_name`) over the
        validated ``options`` (``ttl``: redis-py's ``timeout``; None: a watchdog lease)."""
        core = cls.from_options("redis-py", options, sentinel=sentinel)
        core.name = name
        core.keys = compat_keys(name, options.prefix)
        core.label = "RedisPyLock"
        core.hold_id = new_op_id()
        return core

    def try_flow(self, token: bytes) -> Flow[bool]:
        """One try (redis-py's ``do_acquire``): take the lock for ``token`` (the bytes
        redis-py would write) if nobody holds it, with a fresh fencing token."""
        text = token.decode("latin-1")
        self.pending_token = text
        sent = time.monotonic()
        try:
            keys = (self.keys.lock, self.keys.fence, self.keys.done, self.keys.ring)
            op = Eval(_ACQUIRE, keys, (token, self.lease_ms, self.hold_id, DONE_MS))
            reply, ack = unwrap((yield self._write(op)))
            status = as_str(reply[0])
            if status == "busy":
                return self._gave_up(sent, time.monotonic())
            if status != "ok":
                raise UnexpectedReplyError(f"compat_acquire replied {reply!r}")
            run_id = yield from self._granted(text, ack)
            self._hold(text, as_int(reply[1]), sent, self.lease_ms, run_id)
            self.holding.value = text  # type: ignore[union-attr]  # redis-py's: the token
            return self._won(sent)
        finally:
            self.pending_token = None

    def _release_of(self, h: Holding) -> Eval:
        return self._fenced_release(h.token, h.fence)

    def _release_op(self, token: str) -> Eval:
        return self._fenced_release(token, 0)

    def _fenced_release(self, token: str, fence: int) -> Eval:
        """compat_release.lua for ``token`` (redis-py's format: the value is the token)
        with the slot's release ring: a release sent again after a lost reply finds
        ``fence``'s bit set and answers "ok"."""
        keys = self.keys
        return Eval(_RELEASE, (keys.lock, keys.ring, keys.fence), (_wire(token), b"%d" % fence))

    def _wire_value(self, h: Holding) -> bytes:
        return _wire(h.value)

    def _extend_op(self, token: str, ms: int, mode: str) -> Eval:
        if mode != "add":
            return Eval(_EXTEND, (self.keys.lock,), (_wire(token), ms, mode, b"", 0, _EXACT))
        keys = (self.keys.lock, self.keys.done)
        return Eval(_EXTEND, keys, (_wire(token), ms, mode, new_op_id(), DONE_MS, _EXACT))

    def release_failed(self, h: Holding) -> bool:
        """After a release without a reply, the watchdog does not resume: redis-py's sync
        ``release()`` forgets the token before it sends, so nobody would release a lease the
        watchdog kept alive; it ends by its TTL unless a retry releases it first."""
        if self.holding is h:
            h.closing = False
        return False


def lease_lost(name: str, message: str, error: LockLostError) -> LeaseLostError:
    """redis-py's exception for the lost lease of lock ``name`` (``message``: redis-py's own
    text for the call)."""
    return LeaseLostError(name, message, error.reason)
