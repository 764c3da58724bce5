# SPDX-License-Identifier: MIT
"""A FastAPI dependency that holds an :class:`~redislock.AsyncLock` for one request.

Example::

    from fastapi import Depends, FastAPI
    from redislock import AsyncLock
    from redislock.integrations.fastapi import LockDependency

    app = FastAPI()
    order_lock = LockDependency(redis.asyncio.Redis(), "order:{order_id}", timeout=5)

    @app.post("/orders/{order_id}/ship")
    async def ship(order_id: int, lock: Annotated[AsyncLock, Depends(order_lock)]) -> dict:
        return {"fencing_token": lock.fencing_token}

The lock name is a template formatted with the request's path parameters (and query
parameters, which path parameters override). A request that cannot get the lock within
``timeout`` seconds is answered ``409 Conflict`` (``status_code``) with a ``Retry-After``
header; the endpoint does not run. The lock is released when the dependency exits (FastAPI
runs a ``yield`` dependency's exit code after the endpoint; see
https://fastapi.tiangolo.com/tutorial/dependencies/dependencies-with-yield/).
Needs ``fastapi`` (not a dependency of redislock).
"""

from __future__ import annotations

import string
from collections.abc import AsyncIterator
from typing import Any

from fastapi import HTTPException, Request

from redislock._core import validate
from redislock.aio.lock import AsyncLock
from redislock.errors import LockConfigError

__all__ = ["LockDependency"]


class LockDependency:
    """A FastAPI dependency (``Depends(LockDependency(...))``) that yields the request's
    held :class:`~redislock.AsyncLock`.

    Args:
        client: a ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster`` (or valkey-py's).
        name: the lock name, or a template of path and query parameter names
            (``"order:{order_id}"``).
        status_code: the HTTP status of a request that did not get the lock in time
            (default 409).
        retry_after: seconds for the ``Retry-After`` header of that answer (default 1).
        **options: :class:`~redislock.AsyncLock`'s options; ``timeout`` is the wait in
            seconds (default 0: one try).

    Raises:
        LockConfigError: a bad template, client or option (at construction, no I/O).
    """

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        status_code: int = 409,
        retry_after: float = 1.0,
        **options: Any,
    ) -> None:
        if not isinstance(name, str):
            raise LockConfigError(f"name must be a str, got {type(name).__name__}")
        try:
            self.fields = [f for _, f, _, _ in string.Formatter().parse(name) if f is not None]
        except ValueError as exc:
            raise LockConfigError(f"name template {name!r} is not a format string: {exc}") from exc
        if any(not f.isidentifier() for f in self.fields):
            raise LockConfigError(f"name template {name!r} must use parameter names: {{order_id}}")
        if not self.fields:
            validate.check_name(name)
        if not 100 <= status_code <= 599:
            raise LockConfigError(f"status_code must be an HTTP status, got {status_code!r}")
        self.retry_after = validate.check_duration("retry_after", retry_after)
        options.setdefault("timeout", 0.0)
        AsyncLock(client, "fastapi-template", **options)  # checks the client and options
        self.client = client
        self.name = name
        self.status_code = status_code
        self.options = options

    def lock_name(self, request: Request) -> str:
        """The lock name for ``request``.

        Raises:
            LockConfigError: the template names a parameter the request does not have, or
                the name made is not a valid lock name.
        """
        values: dict[str, Any] = {**request.query_params, **request.path_params}
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise LockConfigError(
                f"lock name template {self.name!r} needs {', '.join(missing)}, "
                f"which {request.url.path!r} does not have"
            )
        return validate.check_name(self.name.format_map(values))

    async def __call__(self, request: Request) -> AsyncIterator[AsyncLock]:
        lock = AsyncLock(self.client, self.lock_name(request), **self.options)
        if not await lock.acquire():
            raise HTTPException(
                self.status_code,
                detail=f"{lock.name!r} is busy",
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        try:
            yield lock
        finally:
            await lock.release()
