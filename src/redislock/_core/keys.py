# SPDX-License-Identifier: MIT
"""Key naming. Every key of one lock is in one hash slot (all but the fencing counter share
one hash tag), so one script can touch them all even in Redis Cluster.

For a lock named ``N`` with prefix ``P`` (default ``redislock:``)::

    P{N}          the lock: string "<token>|<fence>|<host>|<pid>|<acquired_unix_ms>" with a PX
                  TTL (``<fence>`` is the holder's fencing token)
    P{T}:slotfence  the fencing counter of N's hash slot (see below), INCR on every
                  acquisition of every name of that slot, never expires
    P{T}:slotrel  the release ring of N's hash slot: a bit per recent fencing token of the
                  slot, set by its holder's release (scripts/_ring.lua), so a release sent
                  again after a lost reply answers "ok" however many holders came since;
                  at most 1 KiB, never expires (Lock, FairLock and the drop-ins)
    P{N}:wait     marker "a MultiLock is waiting" (short TTL), refreshed by its failed tries
    P{N}:wake     a pub/sub CHANNEL, not a key: a release PUBLISHes "*" to it when the
                  marker exists; each process's waiters listen on one shared subscription
                  (:mod:`redislock._core.wake`), so waiting holds no pooled connection
    P{N}:done     the last "add" extend of the name (and a Redlock master's last release),
                  for 60 s: a client that sends it again after losing the reply gets the
                  first one's answer
    P{N}:delay    a hold's lock-delay (``lock_delay=``): string "<delay_ms>" with PX = the
                  lock's TTL + the delay, written and moved with the lock key, deleted with
                  it by a release; while it outlives the lock key (the hold ended without a
                  release), nobody takes the lock (see ``scripts/fair_acquire.lua``)
    P{N}:once:K   ``Once``'s record of period ``K`` (a string, with a TTL until the period's
                  end; see :mod:`redislock._core.once`); ``K`` has no braces

RLock, ReadWriteLock and Semaphore (:class:`HoldKeys`) make ``P{N}`` a hash of holds (see
``scripts/_hold.lua``) indexed by ``P{N}:expiry`` (each hold's lease end, a sorted set), and
add ``P{N}:rwait`` / ``P{N}:rwake`` (readers; ``rwake`` a channel too) and ``P{N}:permits``
(a run-time permit count). Lock and FairLock (:class:`FairKeys`) keep ``P{N}`` and the
fencing keys and queue their waiters in ``P{N}:queue``, ``P{N}:qleases``, ``P{N}:qinfo``,
and a release grants the lock to the head waiter with the message ``<tag>|<fence>`` on the
channel ``P{N}:grant:<process tag>`` of the waiter's process (tag: the first 20 hex digits
of the sha1 of its token; the process tag starts the token: see ``scripts/_queue.lua``);
``P{N}:wait`` / ``P{N}:wake`` are then MultiLock's. The scripts declare the wake channels
among their KEYS (same hash tag), but never write them as keys.

The drop-ins for redis-py's Lock (:mod:`redislock._core.compat`) use redis-py's key, the
name itself, and keep their done key as ``P{T}:rp-done:<name>`` beside the slot counter
``P{T}:slotfence`` and release ring ``P{T}:slotrel`` of the name's slot (``T``:
:func:`slot_tag`).

The lock key always ends in ``}`` and no sub-key does, and no suffix ends another, so no
lock name can collide with another lock's internal keys. The hash tag of all these keys is
the text between the ``{`` after the prefix and the first ``}`` after it: the same for all
but the slot counter, whose tag differs and whose slot is the same.

Fencing counters are per hash slot, not per name, so a name leaves nothing behind once its
last lease (and the TTL of its ``:done``/``:wait``/``:wake`` keys) has ended: at most 16,384
counters in all. The counter of a name whose lock key is in slot ``S`` (CRC16 of the hash
tag, mod 16,384, as Redis Cluster computes it) is ``P{T}:slotfence``, where ``T`` =
:func:`slot_tag` ``(S)`` is a short string of ``[0-9a-z]`` whose own slot is ``S``: the
counter lives in the name's slot, so one script on one Cluster node reaches both. Its token
still strictly increases per name, since every token of the name comes from that one counter.
``:slotfence`` is no lock's suffix and no suffix ends it, so the counter is nobody's lock or
sub-key, also not the sub-key of a lock named ``T``; the same holds for the release ring's
``:slotrel``.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import itertools
from typing import Final, NamedTuple

__all__ = [
    "DEFAULT_PREFIX",
    "DELAY_SUFFIX",
    "FENCE_SUFFIX",
    "GRANT_SUFFIX",
    "RING_SUFFIX",
    "FairKeys",
    "HoldKeys",
    "LockKeys",
    "delay_key",
    "fence_key",
    "key_slot",
    "once_key",
    "slot_tag",
]

DEFAULT_PREFIX = "redislock:"
GRANT_SUFFIX = ":grant"
"""A name's grant channels are ``<lock key>:grant:<process tag>`` (:meth:`FairKeys.grant_for`;
:attr:`FairKeys.grant` is their base)."""

SLOTS: Final = 16384
"""Hash slots of Redis Cluster (and of the fencing counters, on any server)."""

FENCE_SUFFIX: Final = ":slotfence"
"""The suffix of a slot's fencing counter key ``<prefix>{<slot tag>}:slotfence``."""

RING_SUFFIX: Final = ":slotrel"
"""The suffix of a slot's release ring ``<prefix>{<slot tag>}:slotrel`` (scripts/_ring.lua)."""

DELAY_SUFFIX: Final = ":delay"
"""The suffix of a lock's lock-delay key ``<lock key>:delay`` (:func:`delay_key`)."""

TAG_ALPHABET: Final = "0123456789abcdefghijklmnopqrstuvwxyz"
"""The characters of slot tags, in the order :func:`slot_tags` enumerates them."""


def key_slot(key: str) -> int:
    """The hash slot of ``key`` (UTF-8), as Redis Cluster computes it: CRC16 (XMODEM) of
    the hash tag (the text between the first ``{`` and the first ``}`` after it, if not
    empty; else the whole key), modulo 16,384."""
    raw = key.encode()
    start = raw.find(b"{")
    if start >= 0:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return binascii.crc_hqx(raw, 0) % SLOTS


@functools.cache
def slot_tags() -> tuple[str, ...]:
    """Each hash slot's tag: the first string with that slot in the order of length, then
    :data:`TAG_ALPHABET` order ("0" ... "z", "00" ... "zz", "000" ...; the longest is 4
    characters). Built once per process (about 60,000 CRCs). This is wire format: every
    client must compute the same tags, so the order never changes."""
    tags: dict[int, str] = {}
    for length in itertools.count(1):
        for chars in itertools.product(TAG_ALPHABET, repeat=length):
            tag = "".join(chars)
            tags.setdefault(binascii.crc_hqx(tag.encode(), 0) % SLOTS, tag)
            if len(tags) == SLOTS:
                return tuple(tags[slot] for slot in range(SLOTS))
    raise AssertionError("unreachable")  # pragma: no cover


def slot_tag(slot: int) -> str:
    """The hash tag of slot ``slot``'s fencing counter (see :func:`slot_tags`)."""
    return slot_tags()[slot]


def delay_key(lock_key: str) -> str:
    """The lock-delay key of the lock whose key is ``lock_key`` (same hash slot)."""
    return lock_key + DELAY_SUFFIX


def fence_key(lock_key: str) -> str:
    """The fencing counter key of the lock key ``lock_key`` (``<prefix>{<name>}``): its
    hash slot's counter ``<prefix>{<slot tag>}:slotfence``, in the same slot."""
    prefix = lock_key[: lock_key.index("{")]  # a prefix has no "{" (validate.check_prefix)
    return f"{prefix}{{{slot_tag(key_slot(lock_key))}}}{FENCE_SUFFIX}"


class LockKeys(NamedTuple):
    """The Redis keys of one lock. ``fence`` is the slot's fencing counter and ``ring`` its
    release ring, shared with the other names of the slot."""

    lock: str
    fence: str
    wait: str
    wake: str
    done: str
    ring: str

    @classmethod
    def for_name(cls, name: str, prefix: str = DEFAULT_PREFIX) -> LockKeys:
        """Keys for lock ``name`` (already validated) under ``prefix``."""
        base = f"{prefix}{{{name}}}"
        fence = fence_key(base)
        return cls(
            lock=base,
            fence=fence,
            wait=base + ":wait",
            wake=base + ":wake",
            done=base + ":done",
            ring=fence[: -len(FENCE_SUFFIX)] + RING_SUFFIX,
        )

    @staticmethod
    def name_of(key: str, prefix: str = DEFAULT_PREFIX) -> str | None:
        """The lock name of a lock key, or ``None`` if ``key`` is not a lock key."""
        if key.startswith(prefix + "{") and key.endswith("}"):
            return key[len(prefix) + 1 : -1]
        return None


class HoldKeys(NamedTuple):
    """The Redis keys of a hash-based lock (RLock, ReadWriteLock, Semaphore); see scripts/_hold.lua.

    ``P{N}`` is a hash of holds (not a string as for :class:`LockKeys`), so a name used by
    a Lock and by one of these gets a WRONGTYPE error instead of a silent double grant.
    """

    lock: str
    fence: str
    wait: str
    wake: str
    rwait: str
    rwake: str
    permits: str
    released: str
    expiry: str
    """The expiry index: a sorted set, owner token -> the end of its lease (_hold.lua)."""

    @classmethod
    def for_name(cls, name: str, prefix: str = DEFAULT_PREFIX) -> HoldKeys:
        """Keys for ``name`` (already validated) under ``prefix``."""
        return cls.of(f"{prefix}{{{name}}}")

    @classmethod
    def of(cls, base: str) -> HoldKeys:
        """Keys whose hash is ``base`` (a lock key ``<prefix>{<name>}``)."""
        return cls(
            lock=base,
            fence=fence_key(base),
            wait=base + ":wait",
            wake=base + ":wake",
            rwait=base + ":rwait",
            rwake=base + ":rwake",
            permits=base + ":permits",
            released=base + ":released",
            expiry=base + ":expiry",
        )


class FairKeys(NamedTuple):
    """The Redis keys of a FairLock; see fair_acquire.lua. ``lock`` and ``fence`` are as for
    Lock."""

    lock: str
    fence: str
    queue: str
    leases: str
    info: str
    grant: str
    """The base of the name's grant channels (pub/sub channels, not keys): see
    :meth:`grant_for`."""

    @classmethod
    def for_name(cls, name: str, prefix: str = DEFAULT_PREFIX) -> FairKeys:
        """Keys for ``name`` (already validated) under ``prefix``."""
        return cls.of(f"{prefix}{{{name}}}")

    @classmethod
    def of(cls, base: str, fence: str | None = None) -> FairKeys:
        """Keys whose lock key is ``base`` (``<prefix>{<name>}``); ``fence``: its
        :func:`fence_key` if the caller has it already (it costs a CRC16 and a lookup)."""
        return cls(
            lock=base,
            fence=fence_key(base) if fence is None else fence,
            queue=base + ":queue",
            leases=base + ":qleases",
            info=base + ":qinfo",
            grant=base + GRANT_SUFFIX,
        )

    def grant_for(self, token: str) -> str:
        """The channel a grant to waiter ``token`` (one of
        ``redislock._core.lock.queue_token``'s) is published on (_queue.lua's
        ``grant_channel``): ``<grant>:<process tag>``, so only the waiting process is woken.

        Raises:
            ValueError: ``token`` has no process tag (no grant is published for it).
        """
        head, dot, _ = token.partition(".")
        if not dot:
            raise ValueError("a waiter's token starts with its process tag and a dot")
        return f"{self.grant}:{head}"

    @staticmethod
    def tag(token: str) -> str:
        """What a grant to ``token`` is tagged with on the grant channel (as _queue.lua
        computes it): a token is a secret, and any subscriber sees the channel."""
        return hashlib.sha1(token.encode(), usedforsecurity=False).hexdigest()[:20]


ONCE_INFIX: Final = ":once:"
"""A job's record of period ``K`` is ``<lock key>:once:<K>`` (:func:`once_key`)."""


def once_key(lock_key: str, period_key: str) -> str:
    """The record key of period ``period_key`` of the ``Once`` whose Lock key is
    ``lock_key``: ``<prefix>{<name>}:once:<period key>``, in the name's hash slot. A period
    key has no braces (``redislock._core.once.check_period_key``), so the record key never
    ends in ``}`` (it is no lock's key) and its only hash tag is the name's."""
    return f"{lock_key}{ONCE_INFIX}{period_key}"
