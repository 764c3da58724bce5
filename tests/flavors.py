# SPDX-License-Identifier: MIT
"""Run one sync-style test body against both ``Lock`` and ``AsyncLock``.

``AsyncLock`` is driven through :class:`LoopThread`: an event loop in a background thread,
with its own ``redis.asyncio`` client; every coroutine method is run there and awaited
from the test thread. The watchdog task lives on that loop, as it would in an app.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, TypeVar

import redis
import redis.asyncio

from redislock import AsyncLock, Lock
from redislock.server import RedisProcess
from tests import clients

T = TypeVar("T")

FLAVORS = ["sync", "async"]


class LoopThread:
    """An asyncio loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


class AsyncFacade:
    """Sync-looking view of an ``AsyncLock`` whose coroutines run on a :class:`LoopThread`."""

    def __init__(self, lock: AsyncLock, lt: LoopThread) -> None:
        self.inner = lock
        self._lt = lt

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if asyncio.iscoroutinefunction(attr):

            def call(*args: Any, **kwargs: Any) -> Any:
                return self._lt.run(attr(*args, **kwargs))

            return call
        return attr

    def __repr__(self) -> str:
        return repr(self.inner)

    def __enter__(self) -> AsyncFacade:
        self._lt.run(self.inner.__aenter__())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lt.run(self.inner.__aexit__(exc_type, exc, tb))


class Flavor:
    """Factory of locks of one flavour on the test server."""

    def __init__(
        self, name: str, make: Callable[..., Any], client: redis.Redis, lt: LoopThread
    ) -> None:
        self.name = name
        self.make = make
        self.admin = client
        self.loop_thread = lt

    def lock(self, name: str, **kwargs: Any) -> Any:
        """A new lock object (``Lock``, or an ``AsyncFacade`` over ``AsyncLock``)."""
        return self.make(name, **kwargs)


@contextlib.contextmanager
def make_flavor(which: str, server: RedisProcess, decode: bool, lt: LoopThread) -> Iterator[Flavor]:
    """Clients for flavour ``which`` ("sync" or "async"), closed afterwards."""
    admin = redis.Redis(**server.client_kwargs(), decode_responses=True)
    if which == "sync":
        client = clients.sync_client(**server.client_kwargs(), decode_responses=decode)
        try:
            yield Flavor(which, lambda n, **kw: Lock(client, n, **kw), admin, lt)
        finally:
            client.close()
            admin.close()
        return

    async def connect() -> redis.asyncio.Redis:
        return clients.async_client(**server.client_kwargs(), decode_responses=decode)

    aclient = lt.run(connect())
    try:
        yield Flavor(which, lambda n, **kw: AsyncFacade(AsyncLock(aclient, n, **kw), lt), admin, lt)
    finally:
        lt.run(aclient.aclose())
        admin.close()
