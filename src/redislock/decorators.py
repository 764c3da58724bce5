# SPDX-License-Identifier: MIT
"""``@locked(client, "order:{order_id}")``: run a function (sync or ``async def``) while
holding a lock whose name is made from the call's arguments.

Each call takes a fresh lock object (``Lock``, or ``AsyncLock`` for a coroutine function;
``fair=True``: ``FairLock``/``AsyncFairLock``), so concurrent calls with the same name
exclude each other and calls with different names do not. The template, the client and the
lock options are checked once, when the function is decorated (before any I/O).
"""

from __future__ import annotations

import functools
import inspect
import string
from collections.abc import Callable
from typing import Any, TypeVar, cast

from redislock._core import validate
from redislock.aio.fair import AsyncFairLock
from redislock.aio.lock import AsyncLock
from redislock.errors import LockConfigError
from redislock.sync.fair import FairLock
from redislock.sync.lock import Lock

__all__ = ["locked"]

F = TypeVar("F", bound=Callable[..., Any])


def _fields(template: str) -> list[str]:
    """The argument names a name template refers to (``{order_id}``, ``{order.id}``,
    ``{items[0]}``: the part before the first ``.`` or ``[``)."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise LockConfigError(f"name template {template!r} is not a format string: {exc}") from exc
    names = []
    for _, field, _, _ in parsed:
        if field is None:
            continue
        head = field.split(".", 1)[0].split("[", 1)[0]
        if not head or head.isdigit():
            raise LockConfigError(
                f"name template {template!r} must name the function's parameters "
                f"({{order_id}}), not positions ({{{field}}})"
            )
        names.append(head)
    return names


class _Template:
    """A validated name template for one function."""

    __slots__ = ("fields", "signature", "template")

    def __init__(self, template: Any, func: Callable[..., Any]) -> None:
        if not isinstance(template, str):
            raise LockConfigError(f"name must be a str, got {type(template).__name__}")
        self.template = template
        self.signature = inspect.signature(func)
        self.fields = _fields(template)
        unknown = [f for f in self.fields if f not in self.signature.parameters]
        if unknown:
            raise LockConfigError(
                f"name template {template!r} names {', '.join(unknown)}, which "
                f"{getattr(func, '__qualname__', func)!r} has no parameter for"
            )
        if not self.fields:
            validate.check_name(template)

    def name(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The lock name for one call (checked like any lock name).

        Raises:
            LockConfigError: the formatted name is not a valid lock name.
            TypeError: the arguments do not fit the function (as calling it would).
        """
        if not self.fields:
            return self.template
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return validate.check_name(self.template.format_map(bound.arguments))


def locked(client: Any, name: str, *, fair: bool = False, **options: Any) -> Callable[[F], F]:
    """Decorate a function (sync, or ``async def``) to run while holding a lock.

    Example::

        @locked(r, "order:{order_id}", timeout=10)
        def ship(order_id: int, carrier: str) -> None:
            ...  # one process at a time per order

        @locked(ar, "report:{day}")
        async def build(day: str) -> None:
            ...

    Args:
        client: the client the locks use: a sync client (``redis.Redis``,
            ``redis.cluster.RedisCluster``, valkey-py's) for a plain function, an asyncio one
            for a coroutine function.
        name: the lock name, or a template formatted with the call's arguments by
            parameter name (``"order:{order_id}"``, ``"user:{user.id}"``).
        fair: use ``FairLock`` (arrival order, ``queue_max``, ``waiter_lease``) instead of
            ``Lock``.
        **options: the lock's options (``ttl``, ``timeout`` in seconds: the wait limit,
            ``on_lost``, ``watchdog_lease``, ...; see :class:`redislock.Lock`).

    Returns:
        A decorator; the function it returns takes the same arguments and returns the
        same result (a coroutine function stays one).

    Raises:
        LockConfigError: at decoration, before any I/O: a bad template (one naming a
            parameter the function lacks, or a position), a bad option, or a client of
            the wrong flavour for the function.
        AcquireTimeoutError: from a call, when ``timeout`` seconds passed without the lock.
        LockLostError: from a call, when the lease was lost before the release (the
            function's own exception, if any, is raised with a note).
        redis.exceptions.RedisError: from a call: Redis failed (never reported as busy).
    """

    def decorate(func: F) -> F:
        template = _Template(name, func)
        probe = template.template if not template.fields else "locked-template"
        if inspect.iscoroutinefunction(func):
            async_cls: type[AsyncLock] | type[AsyncFairLock] = AsyncFairLock if fair else AsyncLock
            async_cls(client, probe, **options)  # checks the client and options, no I/O

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                async with async_cls(client, template.name(args, kwargs), **options):
                    return await func(*args, **kwargs)

            return cast(F, run_async)
        sync_cls: type[Lock] | type[FairLock] = FairLock if fair else Lock
        sync_cls(client, probe, **options)

        @functools.wraps(func)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            with sync_cls(client, template.name(args, kwargs), **options):
                return func(*args, **kwargs)

        return cast(F, run_sync)

    return decorate
