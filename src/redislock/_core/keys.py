# SPDX-License-Identifier: MIT
"""Key naming. Every key of one lock shares one hash tag, so one script can touch them all
even in Redis Cluster.

For a lock named ``N`` with prefix ``P`` (default ``redislock:``)::

    P{N}          the lock: string "<token>|<host>|<pid>|<acquired_unix_ms>" with a PX TTL
    P{N}:fence    fencing counter, INCR on every acquisition, never expires; while the lock
                  is held it equals the holder's fencing token
    P{N}:wait     marker "a MultiLock is waiting" (short TTL), refreshed by its failed tries
    P{N}:wake     a pub/sub CHANNEL, not a key: a release PUBLISHes "*" to it when the
                  marker exists; each process's waiters listen on one shared subscription
                  (:mod:`redislock._core.wake`), so waiting holds no pooled connection
    P{N}:done     the last release (or "add" extend) of the name, for 60 s: a client that
                  sends it again after losing the reply gets the first one's answer

RLock, ReadWriteLock and Semaphore (:class:`HoldKeys`) make ``P{N}`` a hash of holds (see
``scripts/hold.lua``) indexed by ``P{N}:expiry`` (each hold's lease end, a sorted set), and
add ``P{N}:rwait`` / ``P{N}:rwake`` (readers; ``rwake`` a channel too) and ``P{N}:permits``
(a run-time permit count). Lock and FairLock (:class:`FairKeys`) queue their waiters in
``P{N}:queue``, ``P{N}:qleases``, ``P{N}:qinfo``, and a release grants the lock to the head
waiter with the message ``<tag>|<fence>`` on the channel ``P{N}:grant`` (tag: the first 20
hex digits of the sha1 of its token; see ``scripts/fair.lua``); ``P{N}:wait`` / ``P{N}:wake``
are then MultiLock's. The scripts declare the wake channels among their KEYS (same hash
tag), but never write them as keys.

The lock key always ends in ``}`` and no sub-key does, and no suffix ends another, so no
lock name can collide with another lock's internal keys. The hash tag of all these keys is
the text between the ``{`` after the prefix and the first ``}`` after it: the same for all.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

__all__ = ["DEFAULT_PREFIX", "GRANT_SUFFIX", "FairKeys", "HoldKeys", "LockKeys"]

DEFAULT_PREFIX = "redislock:"
GRANT_SUFFIX = ":grant"
"""A name's grant channel is ``<lock key>:grant`` (:attr:`FairKeys.grant`)."""


class LockKeys(NamedTuple):
    """The Redis keys of one lock."""

    lock: str
    fence: str
    wait: str
    wake: str
    done: str

    @classmethod
    def for_name(cls, name: str, prefix: str = DEFAULT_PREFIX) -> LockKeys:
        """Keys for lock ``name`` (already validated) under ``prefix``."""
        base = f"{prefix}{{{name}}}"
        return cls(
            lock=base,
            fence=base + ":fence",
            wait=base + ":wait",
            wake=base + ":wake",
            done=base + ":done",
        )

    @staticmethod
    def name_of(key: str, prefix: str = DEFAULT_PREFIX) -> str | None:
        """The lock name of a lock key, or ``None`` if ``key`` is not a lock key."""
        if key.startswith(prefix + "{") and key.endswith("}"):
            return key[len(prefix) + 1 : -1]
        return None


_HOLD_ROLES = {
    "h": "lock",
    "f": "fence",
    "w": "wait",
    "k": "wake",
    "r": "rwait",
    "s": "rwake",
    "p": "permits",
    "d": "released",
    "x": "expiry",
}
"""hold.lua's key role letters (its ARGV[13]) and the :class:`HoldKeys` field each names."""


class HoldKeys(NamedTuple):
    """The Redis keys of a hash-based lock (RLock, ReadWriteLock, Semaphore); see hold.lua.

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
    """The expiry index: a sorted set, owner token -> the end of its lease (hold.lua)."""

    @classmethod
    def for_name(cls, name: str, prefix: str = DEFAULT_PREFIX) -> HoldKeys:
        """Keys for ``name`` (already validated) under ``prefix``."""
        return cls.of(f"{prefix}{{{name}}}")

    @classmethod
    def of(cls, base: str) -> HoldKeys:
        """Keys whose hash is ``base`` (a lock key ``<prefix>{<name>}``)."""
        return cls(
            lock=base,
            fence=base + ":fence",
            wait=base + ":wait",
            wake=base + ":wake",
            rwait=base + ":rwait",
            rwake=base + ":rwake",
            permits=base + ":permits",
            released=base + ":released",
            expiry=base + ":expiry",
        )

    def declared(self, roles: str) -> tuple[str, ...]:
        """The keys named by ``roles``, hold.lua's ARGV[13] letters, in that order (see
        :func:`redislock._core.hold.hold_roles`)."""
        return tuple(getattr(self, _HOLD_ROLES[r]) for r in roles)


class FairKeys(NamedTuple):
    """The Redis keys of a FairLock; see fair.lua. ``lock`` and ``fence`` are as for Lock."""

    lock: str
    fence: str
    queue: str
    leases: str
    info: str
    grant: str

    @classmethod
    def for_name(cls, name: str, prefix: str = DEFAULT_PREFIX) -> FairKeys:
        """Keys for ``name`` (already validated) under ``prefix``."""
        return cls.of(f"{prefix}{{{name}}}")

    @classmethod
    def of(cls, base: str) -> FairKeys:
        """Keys whose lock key is ``base`` (``<prefix>{<name>}``)."""
        return cls(
            lock=base,
            fence=base + ":fence",
            queue=base + ":queue",
            leases=base + ":qleases",
            info=base + ":qinfo",
            grant=base + GRANT_SUFFIX,
        )

    @staticmethod
    def tag(token: str) -> str:
        """What a grant to ``token`` is tagged with on the grant channel (as fair.lua
        computes it): a token is a secret, and any subscriber sees the channel."""
        return hashlib.sha1(token.encode(), usedforsecurity=False).hexdigest()[:20]
