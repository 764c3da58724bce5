# SPDX-License-Identifier: MIT
"""Argument checks that run before any network I/O.

Every check raises :class:`~redislock.errors.LockConfigError` with a message that names the
argument and what was wrong with it.
"""

from __future__ import annotations

import functools
import math
import re
import sys
import unicodedata
import warnings
from types import FrameType
from typing import Any

from redislock.errors import LockConfigError, LongLeaseWarning

__all__ = [
    "LONG_LEASE",
    "MAX_DURATION",
    "MAX_NAME_BYTES",
    "MAX_REPLICAS",
    "check_delay",
    "check_duration",
    "check_int",
    "check_name",
    "check_optional_duration",
    "check_prefix",
    "check_replicas",
    "check_size",
    "check_timeout",
    "check_token",
    "to_ms",
    "warn_long_lease",
]

MAX_NAME_BYTES = 1024
"""Longest lock name accepted, in UTF-8 bytes."""

MAX_DURATION = 366 * 24 * 3600.0
"""Longest TTL or lease accepted, in seconds (about a year); longer is surely a unit mix-up."""

LONG_LEASE = 3600.0
"""A lease or TTL longer than this many seconds (one hour) gets a :class:`LongLeaseWarning`."""

_MIN_DURATION = 0.001  # seconds: Redis PX has millisecond resolution


def _number(what: str, value: Any) -> float:
    # bool is an int in Python; True seconds is always a bug.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LockConfigError(f"{what} must be a number of seconds (int or float), got {value!r}")
    try:
        result = float(value)
    except OverflowError:
        raise LockConfigError(f"{what} is far too large: {value!r}") from None
    if math.isnan(result):
        raise LockConfigError(f"{what} must be a number of seconds, got NaN")
    return result


def check_duration(what: str, value: Any) -> float:
    """A lease-like duration: finite, at least 1 ms, at most :data:`MAX_DURATION`; seconds."""
    seconds = _number(what, value)
    if math.isinf(seconds):
        raise LockConfigError(f"{what} must be finite, got {value!r}")
    if seconds <= 0:
        raise LockConfigError(f"{what} must be > 0 seconds, got {value!r}")
    if seconds < _MIN_DURATION:
        raise LockConfigError(
            f"{what} must be at least 0.001 seconds (Redis TTLs are whole milliseconds), "
            f"got {value!r}"
        )
    if seconds > MAX_DURATION:
        raise LockConfigError(
            f"{what} must be at most {MAX_DURATION:.0f} seconds (one year), got {value!r}; "
            "is it in milliseconds by mistake?"
        )
    return seconds


def warn_long_lease(what: str, seconds: float) -> None:
    """Warn (:class:`~redislock.errors.LongLeaseWarning`) when a lease of ``seconds`` is over
    :data:`LONG_LEASE`: ``ttl=5000`` is more often milliseconds meant than 83 minutes. The
    warning points at the first caller outside redislock."""
    if seconds <= LONG_LEASE:
        return
    warnings.warn(
        f"{what}={seconds:.15g} is a lease of {seconds / 3600:.1f} hours: redislock takes "
        f"seconds, so if milliseconds were meant, pass {seconds / 1000:.15g}. To mean it and "
        "silence this: warnings.filterwarnings('ignore', category=redislock.LongLeaseWarning)",
        LongLeaseWarning,
        stacklevel=_outside_stacklevel(),
    )


def _outside_stacklevel() -> int:
    """The ``stacklevel`` (for a ``warnings.warn`` in our caller) of the first frame whose
    module is not redislock's (dataclass-made ``__init__`` frames count as their class's)."""
    frame: FrameType | None = sys._getframe(1)  # our caller: its warn()'s stacklevel 1
    level = 1
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module != "redislock" and not module.startswith("redislock."):
            return level
        frame = frame.f_back
        level += 1
    return level


def check_delay(what: str, value: Any) -> float:
    """A delay that may be off: 0 (off), or a duration as :func:`check_duration`; seconds."""
    if _number(what, value) == 0:
        return 0.0
    if _number(what, value) < 0:
        raise LockConfigError(f"{what} must be >= 0 seconds, got {value!r}")
    return check_duration(what, value)


def check_optional_duration(what: str, value: Any) -> float | None:
    """Like :func:`check_duration`, but ``None`` passes through."""
    return None if value is None else check_duration(what, value)


def check_timeout(what: str, value: Any) -> float | None:
    """A wait limit in seconds: ``None`` or ``math.inf`` mean no limit, 0 means one try."""
    if value is None:
        return None
    seconds = _number(what, value)
    if seconds < 0:
        raise LockConfigError(f"{what} must be >= 0 seconds or None, got {value!r}")
    return None if math.isinf(seconds) else seconds


MAX_REPLICAS = 1000
"""Largest ``replicas`` accepted (WAIT's replica count)."""


def check_int(what: str, value: Any, low: int, high: int, *, high_text: str = "") -> int:
    """An ``int`` (not a ``bool``) from ``low`` to ``high``; ``high_text`` says ``high`` in
    the message (``"2**53"``) where its digits would not."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LockConfigError(f"{what} must be an int, got {value!r}")
    if not low <= value <= high:
        raise LockConfigError(f"{what} must be between {low} and {high_text or high}, got {value}")
    return value


def check_replicas(value: Any) -> int:
    """A replica acknowledgement count: an int from 0 (no WAIT) to :data:`MAX_REPLICAS`."""
    return check_int("replicas", value, 0, MAX_REPLICAS)


def to_ms(seconds: float) -> int:
    """Seconds to whole milliseconds for Redis, never below 1 (the only seconds→ms conversion)."""
    return max(1, round(seconds * 1000.0))


def check_size(what: str, value: str, limit: int) -> None:
    """``value`` is valid Unicode (no lone surrogate) of at most ``limit`` UTF-8 bytes."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise LockConfigError(f"{what} must be valid Unicode (it has a lone surrogate)") from None
    if size > limit:
        raise LockConfigError(f"{what} is {size} bytes long; the limit is {limit}")


def check_name(value: Any) -> str:
    """A lock name: non-empty ``str``, at most 1024 UTF-8 bytes, no control characters.

    It may not start with ``}``, which would give the lock's keys an empty hash tag and
    scatter them over Redis Cluster slots.
    """
    if not isinstance(value, str):
        raise LockConfigError(f"lock name must be a str, got {type(value).__name__}")
    if not value:
        raise LockConfigError("lock name must not be empty")
    check_size("lock name", value, MAX_NAME_BYTES)
    if not (value.isascii() and value.isprintable()):  # the common case needs no per-char look
        _check_printable("lock name", value)
    if value.startswith("}"):
        raise LockConfigError("lock name must not start with '}' (it would empty the hash tag)")
    return value


def check_prefix(value: Any) -> str:
    """A key prefix: ``str`` without braces or control characters, at most 256 bytes."""
    if not isinstance(value, str):
        raise LockConfigError(f"prefix must be a str, got {type(value).__name__}")
    return _check_prefix_text(value)


@functools.lru_cache(maxsize=64)
def _check_prefix_text(value: str) -> str:
    if "{" in value or "}" in value:
        raise LockConfigError("prefix must not contain '{' or '}': redislock places the hash tag")
    if len(value.encode("utf-8", "surrogatepass")) > 256:
        raise LockConfigError("prefix must be at most 256 bytes")
    _check_printable("prefix", value)
    return value


_TOKEN = re.compile(r"[0-9a-f]{32,256}|[0-9a-f]{1,16}\.[0-9a-f]{28,256}")


def check_token(value: Any) -> str:
    """An owner token handed to :meth:`Lock.adopt`: 32 to 256 characters of ``[0-9a-f]``,
    or a process tag, a dot and 28 to 256 of them (``<4 hex>.<28 hex>``: a Lock's or
    FairLock's, see ``redislock._core.lock.queue_token``)."""
    if not isinstance(value, str):
        raise LockConfigError(f"token must be a str, got {type(value).__name__}")
    if not _TOKEN.fullmatch(value):
        raise LockConfigError(
            "token must be 32 to 256 lowercase hex characters, optionally after"
            " '<hex process tag>.' (as detach() returns it)"
        )
    return value


def _check_printable(what: str, value: str) -> None:
    for ch in value:
        # Cc control, Cs surrogate, Cf format (bidi overrides, zero-width), Zl/Zp line breaks:
        # all of them can forge or hide text in logs.
        if unicodedata.category(ch) in ("Cc", "Cs", "Cf", "Zl", "Zp"):
            raise LockConfigError(
                f"{what} must not contain control, format or line-break characters, got {value!r}"
            )
