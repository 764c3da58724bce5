# SPDX-License-Identifier: MIT
"""Helpers shared by the test modules of the primitives (``RLock``, ``ReadWriteLock``,
``Semaphore``, ``FairLock``).

Threads: :func:`in_thread` runs a function in a new thread and returns its result,
:class:`Background` leaves it running; :func:`wait_for` / :func:`async_wait_for` poll a
condition. Bad input: :class:`Dead` is one flavour (sync or asyncio) of a primitive built on
clients of a socket that does not exist (``tests.test_validation.dead_clients``), so a call
that got as far as I/O fails with ``ConnectionError``; :func:`invoke` runs a method of
either flavour.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar

import pytest
import redis
import redis.asyncio

from tests.test_validation import dead_clients

T = TypeVar("T")
P = TypeVar("P")
S = TypeVar("S")
A = TypeVar("A")


# ------------------------------------------------------------------ dev.py


def load_dev() -> ModuleType:
    """dev.py as a module (its STAGES, OTHER_PYTHONS: where and how the suite runs)."""
    spec = importlib.util.spec_from_file_location(
        "redislock_dev", Path(__file__).resolve().parent.parent / "dev.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ threads and polling


def in_thread(fn: Callable[[], T]) -> T:
    """Run ``fn`` in a new thread and return its result (or raise its exception here)."""
    out: list[T] = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    if errors:
        raise errors[0]
    return out[0]


class Background:
    """``fn`` running in a thread; ``result``/``at`` are set when it returns."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self.at: float | None = None
        self._fn = fn
        self._thread = threading.Thread(target=self._body)
        self._thread.start()

    def _body(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as exc:
            self.error = exc
        self.at = time.monotonic()

    @property
    def done(self) -> bool:
        return self.at is not None

    def join(self, timeout: float = 30.0) -> object:
        self._thread.join(timeout)
        assert not self._thread.is_alive()
        if self.error is not None:
            raise self.error
        return self.result


def wait_for(predicate: Callable[[], object], timeout: float = 5.0) -> float:
    """Poll ``predicate`` until true; return the seconds it took (fail after ``timeout``)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - start


async def async_wait_for(predicate: Callable[[], object], timeout: float = 5.0) -> float:
    """``wait_for`` for coroutines: ``predicate`` may return an awaitable."""
    start = time.monotonic()
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(0.005)


# ------------------------------------------------------------------ bad input, before any I/O


@dataclass(frozen=True)
class Dead(Generic[P]):
    """A primitive class of one flavour, a client of that flavour on a dead socket, and one
    of the other flavour; ``make()`` builds the primitive on the first client."""

    cls: type[P]
    client: Any
    other: Any
    defaults: dict[str, Any]  # constructor arguments besides the name (Semaphore: permits)

    def make(self, name: Any = "job", **kwargs: Any) -> P:
        make: Callable[..., P] = self.cls
        return make(self.client, name, **(self.defaults | kwargs))


def dead_pair(
    flavour: str,
    clients: tuple[redis.Redis, redis.asyncio.Redis],
    sync_cls: type[S],
    async_cls: type[A],
    **defaults: Any,
) -> Dead[S | A]:
    """The ``dead`` fixture's value for ``flavour`` ("sync" or "async")."""
    sync_client, async_client = clients
    if flavour == "sync":
        return Dead[S | A](sync_cls, sync_client, async_client, defaults)
    return Dead[S | A](async_cls, async_client, sync_client, defaults)


def closing_dead_clients() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    """``dead_clients()``, closed when resumed: a ``clients`` fixture yields from this."""
    sync_client, async_client = dead_clients()
    yield sync_client, async_client
    sync_client.close()
    asyncio.run(async_client.aclose())


def invoke(obj: object, method: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``obj.method(...)``; run a coroutine on a fresh loop (inside a task)."""
    result = getattr(obj, method)(*args, **kwargs)
    if asyncio.iscoroutine(result):  # also a coroutine object of a class (AsyncAcquiring)
        result = asyncio.run(result)
    return result


def reap(proc: subprocess.Popen[Any]) -> None:
    """Kill ``proc`` if it still runs, wait for it, and close its pipes, also when it had
    ended. A pipe left open is garbage-collected unclosed: a ResourceWarning (an error
    here) in whatever later test the collector runs in (CI run with a CPU hog: 4 of them
    failed a test of another file after a CLI test had failed). Closes without reading: a
    background job of CMD may hold the pipe's other end for long."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
