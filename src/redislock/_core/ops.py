# SPDX-License-Identifier: MIT
"""The operations a lock flow asks its driver to perform, and reply decoding helpers.

A *flow* is a generator that yields operations and receives their replies; it holds the
whole algorithm of one lock method (what to send, what the reply means, whether to wait
and try again). The sync and asyncio shells each have a few-line *driver* that performs
the operations with their client, so every algorithm exists exactly once.
(The pattern is httpx's ``Auth.auth_flow``.)
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple, TypeAlias, TypeVar

from redis.exceptions import (
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
)

from redislock._core.scripts import Script
from redislock.errors import UnexpectedReplyError

__all__ = ["BlockPop", "Call", "Eval", "Flow", "Op", "as_int", "as_str", "script_error"]

T = TypeVar("T")


class Eval(NamedTuple):
    """Run a Lua script: EVALSHA, then EVAL if the server answers NOSCRIPT."""

    script: Script
    keys: tuple[str, ...]
    args: tuple[str | int, ...]


class BlockPop(NamedTuple):
    """``BLPOP key timeout``: wait for a wake-up; ``timeout`` is seconds, always > 0."""

    key: str
    timeout: float


class Call(NamedTuple):
    """A plain Redis command, e.g. ``("EXISTS", key)``; the first key decides cluster routing."""

    args: tuple[str | int, ...]


Op: TypeAlias = Eval | BlockPop | Call
Flow: TypeAlias = Generator[Op, Any, T]


def as_str(value: object) -> str:
    """A reply element as ``str``, whatever the client's ``decode_responses``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    raise UnexpectedReplyError(f"expected a string reply, got {value!r}")


def as_int(value: object) -> int:
    """A reply element as ``int`` (Lua numbers arrive as integers)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bytes | str):
        try:
            return int(value)
        except ValueError:
            pass
    raise UnexpectedReplyError(f"expected an integer reply, got {value!r}")


_WRAPPED = (
    ("-READONLY", ReadOnlyError),
    ("-NOPERM", NoPermissionError),
    ("-OOM", OutOfMemoryError),
)


def script_error(exc: ResponseError) -> ResponseError | None:
    """The typed redis-py error inside a script failure, or None if there is none.

    Redis reports a command refused inside a script as ``Error running script ...:
    -READONLY You can't write against a read only replica``; redis-py then raises a plain
    ``ResponseError``. Unwrapped, it is the ``ReadOnlyError`` (or ``NoPermissionError``,
    ``OutOfMemoryError``) that callers and redis-py's Sentinel failover handling expect.
    """
    if type(exc) is not ResponseError:
        return None
    text = str(exc)
    for marker, cls in _WRAPPED:
        at = text.find(marker)
        if at >= 0:
            return cls(text[at + len(marker) :].strip())
    return None
