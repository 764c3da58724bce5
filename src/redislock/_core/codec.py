# SPDX-License-Identifier: MIT
"""The values redislock stores in Redis, encoded and decoded in one place. No I/O.

Python writes only the holder metadata; the Lua scripts put it into the stored values::

    holder metadata   "<host>|<pid>|<acquired_unix_ms>"         (ARGV "meta" of every script)
    lock value        "<token>|<fence>|<host>|<pid>|<acquired_unix_ms>"
                      the string at ``P{N}`` of a Lock, a FairLock or a MultiLock name
                      (lock_acquire.lua, fair_acquire.lua, multi_acquire.lua); ``<fence>``
                      is the holder's fencing token
    hold value        "<mode>|<count>|<expires_ms>|<fence>|<host>|<pid>|<acquired_unix_ms>"
                      one field of the hash at ``P{N}`` per hold (RLock, ReadWriteLock,
                      Semaphore; the field is the owner token; see _hold.lua)

``acquired_unix_ms`` is the holder's clock, ``expires_ms`` the server's (TIME), both Unix
time in milliseconds. The host never contains ``|`` (:func:`holder_meta` drops it), so a
value splits into exactly its parts; anything else was not written by redislock.

The owner token is a secret: the decoded values keep it out of their ``repr``, and what is
shown to people is :func:`token_tag` (or a permit's :func:`permit_id`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Final

from redislock._core.ops import as_str

__all__ = [
    "HOLD_MODES",
    "HolderInfo",
    "StoredHold",
    "StoredLock",
    "decode_hold_value",
    "decode_lock_value",
    "encode_hold_value",
    "encode_lock_value",
    "encode_meta",
    "holder_meta",
    "lock_value_owner",
    "permit_id",
    "token_tag",
]

HOLD_MODES: Final = ("w", "r", "p")
"""Modes of a hold value: ``w`` exclusive and reentrant (RLock, a ReadWriteLock's writer),
``r`` shared and reentrant (a reader), ``p`` one Semaphore permit."""

_HOST = "".join(ch for ch in socket.gethostname() if ch.isprintable() and ch != "|")[:64]


def token_tag(token: str) -> str:
    """A short, non-secret tag of a token for logs and ``repr``: 8 hex digits of SHA-256."""
    return hashlib.sha256(token.encode()).hexdigest()[:8]


def permit_id(token: str) -> str:
    """A permit's public id: 16 hex digits of SHA-256 of its owner token (not a secret)."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def encode_meta(host: str, pid: int, acquired_ms: int) -> str:
    """Holder metadata ``"<host>|<pid>|<acquired_unix_ms>"`` (``host`` without ``|``)."""
    return f"{host}|{pid}|{acquired_ms}"


_meta_prefix: tuple[int, str] = (0, "")


def holder_meta() -> str:
    """This process's holder metadata, acquired now (the ``<host>|<pid>|`` part is cached
    per process, so a forked child names its own pid)."""
    global _meta_prefix
    pid = os.getpid()
    if _meta_prefix[0] != pid:
        _meta_prefix = (pid, f"{_HOST}|{pid}|")  # encode_meta without the time
    return _meta_prefix[1] + str(int(time.time() * 1000))


def encode_lock_value(token: str, meta: str, fence: int) -> str:
    """The string a Lock key holds (as the scripts write it): ``"<token>|<fence>|<meta>"``."""
    return f"{token}|{fence}|{meta}"


def encode_hold_value(mode: str, count: int, expires_ms: int, fence: int, meta: str) -> str:
    """One hold's hash value (as _hold.lua writes it):
    ``"<mode>|<count>|<expires_ms>|<fence>|<meta>"``."""
    return f"{mode}|{count}|{expires_ms}|{fence}|{meta}"


@dataclass(frozen=True, slots=True)
class StoredLock:
    """A decoded lock value. ``token`` is the owner token: a secret, left out of ``repr``."""

    token: str = field(repr=False)
    host: str
    pid: int
    acquired_ms: int
    """The holder's clock at the acquisition, Unix time in milliseconds."""
    fence: int
    """The holder's fencing token."""


@dataclass(frozen=True, slots=True)
class StoredHold:
    """A decoded hold value (the owner token is the hash field, not part of it)."""

    mode: str
    """One of :data:`HOLD_MODES`."""
    count: int
    """Hold count (re-entries count; a permit is always 1)."""
    expires_ms: int
    """Server time (TIME), Unix milliseconds, at which this hold's lease ends."""
    fence: int
    """The fencing token of the hold."""
    host: str
    pid: int
    acquired_ms: int
    """The holder's clock at the acquisition, Unix time in milliseconds."""


def _split(value: object, parts: int) -> list[str] | None:
    if not isinstance(value, bytes | str):
        return None
    fields = as_str(value).split("|")
    return fields if len(fields) == parts else None


def decode_lock_value(value: object) -> StoredLock | None:
    """Decode a lock value (``bytes`` or ``str``); None if it is not one (malformed, or not
    a string at all)."""
    fields = _split(value, 5)
    if fields is None:
        return None
    token, fence, host, pid, acquired = fields
    if not fence.isdigit():  # same check as the scripts' "%d+"
        return None
    try:
        return StoredLock(token, host, int(pid), int(acquired), int(fence))
    except ValueError:
        return None


def lock_value_owner(value: str) -> str:
    """The owner token of a lock value: what precedes its first ``|``, as the scripts'
    owner checks compare it (also for a value that does not decode)."""
    return value.split("|", 1)[0]


def decode_hold_value(value: object) -> StoredHold | None:
    """Decode one hold value (``bytes`` or ``str``; with or without the ``|o<op id>`` of the
    last call applied to it); None if it is not one."""
    fields = _split(value, 8)  # with the op id of the last call applied to it
    fields = fields[:7] if fields is not None and fields[7].startswith("o") else _split(value, 7)
    if fields is None or fields[0] not in HOLD_MODES:
        return None
    mode, count, expires, fence, host, pid, acquired = fields
    try:
        return StoredHold(mode, int(count), int(expires), int(fence), host, int(pid), int(acquired))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class HolderInfo:
    """Who holds a lock, decoded from the lock key's value (no secret in it).

    Attributes:
        host: host name of the holder.
        pid: process id of the holder.
        acquired_at: Unix time of the acquisition, in seconds.
        token_tag: first 8 hex digits of SHA-256 of the owner token (the token is secret).
    """

    host: str
    pid: int
    acquired_at: float
    token_tag: str

    @classmethod
    def parse(cls, value: object) -> HolderInfo | None:
        """Decode a lock value (:func:`decode_lock_value`); None if malformed."""
        stored = decode_lock_value(value)
        if stored is None:
            return None
        return cls(
            host=stored.host,
            pid=stored.pid,
            acquired_at=stored.acquired_ms / 1000.0,
            token_tag=token_tag(stored.token),
        )
