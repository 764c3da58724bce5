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
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

from redis.exceptions import (
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
)

from redislock._core.scripts import Script
from redislock.errors import UnexpectedReplyError

__all__ = [
    "Batch",
    "BlockPop",
    "Call",
    "Eval",
    "FanOut",
    "Flow",
    "NodeLateError",
    "Op",
    "Sleep",
    "as_int",
    "as_str",
    "script_error",
]

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


class FanOut(NamedTuple):
    """Send ``ops[i]`` to master ``i`` of a quorum client, all at once (None: skip that
    master), and wait at most ``timeout`` seconds. The reply is a list with, per master,
    its reply, the exception it raised, or a :class:`NodeLateError` (no answer in time).
    Only a quorum client (a Redlock's masters) performs it."""

    ops: tuple[Eval | Call | None, ...]
    timeout: float


class Sleep(NamedTuple):
    """Pause the flow for ``seconds`` (Redlock's random delay between two tries)."""

    seconds: float


class NodeLateError(Exception):
    """A master did not answer a :class:`FanOut` within its timeout."""


Op: TypeAlias = Eval | BlockPop | Call | FanOut | Sleep
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


_START = object()


class Batch(Generic[T]):
    """Several flows driven side by side: each step sends the next operation of every
    unfinished flow in one pipelined round trip (used by the watchdogs to renew many leases
    at once). Flows must not block (no :class:`BlockPop`)."""

    def __init__(self, flows: list[Flow[T]]) -> None:
        self.results: list[T | BaseException | None] = [None] * len(flows)
        self.pending: list[tuple[int, Flow[T], Op]] = []
        for i, flow in enumerate(flows):
            self._advance(i, flow, _START)

    def _advance(self, i: int, flow: Flow[T], reply: object) -> None:
        try:
            if reply is _START:
                op = next(flow)
            elif isinstance(reply, Exception):
                op = flow.throw(reply)
            else:
                op = flow.send(reply)
        except StopIteration as stop:
            self.results[i] = stop.value
            return
        except Exception as exc:  # the flow raised: its result is the error
            self.results[i] = exc
            return
        if isinstance(op, BlockPop | Sleep):
            raise TypeError("a batched flow may not block")
        self.pending.append((i, flow, op))

    def ops(self) -> list[Op]:
        """The operations to send in this step, one per unfinished flow."""
        return [op for _, _, op in self.pending]

    def queue(self, pipe: Any) -> list[Op]:
        """Queue this step's operations on a redis-py pipeline (sync or asyncio: queuing
        does no I/O); returns them in order."""
        ops = self.ops()
        for op in ops:
            if isinstance(op, Eval):
                pipe.evalsha(op.script.sha, len(op.keys), *op.keys, *op.args)
            elif isinstance(op, Call):
                pipe.execute_command(*op.args)
            else:  # a FanOut only comes from a quorum client, which never pipelines
                raise TypeError(f"{type(op).__name__} cannot be pipelined")
        return ops

    def feed(self, replies: list[object]) -> None:
        """Hand each flow its reply (an exception is thrown into it, unwrapped as the single
        drivers do) and collect the next operations."""
        pending, self.pending = self.pending, []
        for (i, flow, _), reply in zip(pending, replies, strict=True):
            if type(reply) is ResponseError:
                reply = script_error(reply) or reply
            self._advance(i, flow, reply)
