# SPDX-License-Identifier: MIT
"""A release whose reply is lost, resent by redis-py's default client after other holders
took (and released) the name meanwhile, answers "released": the slot's release ring
(scripts/_ring.lua) remembers the token's release, however many holders came and went. It
never frees the lock of the holder it finds, and a hold that was really lost still says so.

Before the ring, the name kept one ``:done`` memo, which the next holder's release
overwrote: the resent release was told "gone" or "taken" and a ``with lock:`` whose work
succeeded raised ``LockLostError`` (``LockNotOwnedError`` for the drop-ins).

The recipe: a :class:`~redislock.testing.FaultProxy` discards the release's reply
(``drop_reply``: the release has taken effect on the server); rivals on a direct connection
take and release the name; then the proxy resets the connection, and redis-py's retry
policy sends the release again on a new one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.exceptions import LockNotOwnedError

import redislock
from redislock._core.scripts import SCRIPTS
from redislock.compat import AsyncRedisPyLock, RedisPyLock
from redislock.server import RedisProcess
from redislock.testing import FaultProxy

KINDS = ["Lock", "FairLock", "RedisPyLock"]
RIVALS = [1, 60]
"""Holders that take the name between the release and its resend: one, and more than a
single memo could remember."""


@pytest.fixture
def proxy(redis_server: RedisProcess, admin: redis.Redis) -> Iterator[FaultProxy]:
    """The fault proxy in front of the (flushed) suite's server, which has every script
    already: the reply the proxy discards is the release's own, not a NOSCRIPT."""
    for script in SCRIPTS.values():
        admin.script_load(script.source)
    assert redis_server.socket_path is not None
    with FaultProxy(redis_server.socket_path) as fp:
        yield fp


def make(kind: str, client: Any, name: str, ttl: float = 10.0, flavor: str = "sync") -> Any:
    if flavor == "sync":
        if kind == "RedisPyLock":
            return RedisPyLock(client, name, timeout=ttl)
        return getattr(redislock, kind)(client, name, ttl=ttl)
    if kind == "RedisPyLock":
        return AsyncRedisPyLock(client, name, timeout=ttl)
    return getattr(redislock, "Async" + kind)(client, name, ttl=ttl)


def lock_key(kind: str, name: str) -> str:
    return name if kind == "RedisPyLock" else f"redislock:{{{name}}}"


def lost_errors(kind: str) -> tuple[type[Exception], ...]:
    return (LockNotOwnedError,) if kind == "RedisPyLock" else (redislock.LockLostError,)


def wait_until(check: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def rivals_take_and_release(admin: redis.Redis, kind: str, name: str, times: int) -> Any:
    """``times`` other holders take the free name on a direct connection; all but the last
    release it. Returns the last one, still holding it."""
    rival = None
    for i in range(times):
        if rival is not None:
            rival.release()
        rival = make(kind, admin, name)
        assert rival.acquire(blocking=False), f"rival {i} found the name held"
    return rival


def holder(lock: Any, outcome: list[object], before_release: Callable[[], None]) -> Any:
    """A thread that takes ``lock``, then (once ``before_release`` ran here) releases it;
    ``outcome`` gets "released" or the release's exception. (One thread for both: the
    drop-ins keep redis-py's token per thread.)"""
    acquired, go = threading.Event(), threading.Event()

    def run() -> None:
        assert lock.acquire(blocking=False)
        acquired.set()
        go.wait(30)
        try:
            lock.release()
            outcome.append("released")
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert acquired.wait(30), "not acquired"
    before_release()
    go.set()
    return thread


def resend(proxy: FaultProxy) -> None:
    """End the connection whose reply was discarded: redis-py sends the command again."""
    proxy.set_fault("reset")
    proxy.set_fault("pass")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rivals", RIVALS, ids=lambda n: f"{n}rivals")
@pytest.mark.parametrize("last_holds", [False, True], ids=["then-free", "then-held"])
def test_a_resent_release_that_worked_says_released(
    proxy: FaultProxy,
    redis_server: RedisProcess,
    kind: str,
    rivals: int,
    last_holds: bool,
) -> None:
    admin = redis.Redis(**redis_server.client_kwargs())  # rivals: a direct connection
    client = redis.Redis(**proxy.client_kwargs())  # redis-py's defaults: retries on
    name = f"ring-{kind}-{rivals}-{last_holds}"
    try:
        lock = make(kind, client, name)
        outcome: list[object] = []
        thread = holder(lock, outcome, lambda: proxy.set_fault("drop_reply"))
        wait_until(lambda: not admin.exists(lock_key(kind, name)), "the release never ran")
        rival = rivals_take_and_release(admin, kind, name, rivals)
        if not last_holds:
            rival.release()
        resend(proxy)
        thread.join(30)
        assert not thread.is_alive()
        assert outcome == ["released"]
        if kind != "RedisPyLock":
            assert not lock.lost
        if last_holds:  # the resent release found the rival's hold and left it alone
            assert rival.owned()
            rival.release()
        assert not admin.exists(lock_key(kind, name))
    finally:
        proxy.heal()
        client.close()
        admin.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_resent_release_of_a_lost_hold_still_reports_the_loss(
    proxy: FaultProxy, redis_server: RedisProcess, kind: str
) -> None:
    """The lease ended before the release came; a rival took and released the name; the
    release's reply is lost and it is sent again: both sends found the hold gone, so the
    holder is told its hold was lost (the ring has no bit for it)."""
    admin = redis.Redis(**redis_server.client_kwargs())
    client = redis.Redis(**proxy.client_kwargs())
    name = f"ring-lost-{kind}"
    try:
        lock = make(kind, client, name, ttl=0.3)

        def lease_ended_and_name_reused() -> None:
            wait_until(lambda: not admin.exists(lock_key(kind, name)), "the lease never ended")
            rivals_take_and_release(admin, kind, name, 3).release()
            proxy.set_fault("drop_reply")

        outcome: list[object] = []
        thread = holder(lock, outcome, lease_ended_and_name_reused)
        wait_until(lambda: proxy.dropped_replies > 0, "the release never reached the server")
        resend(proxy)
        thread.join(30)
        assert not thread.is_alive()
        assert len(outcome) == 1
        assert isinstance(outcome[0], lost_errors(kind)), outcome
    finally:
        proxy.heal()
        client.close()
        admin.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_asyncio_a_resent_release_that_worked_says_released(
    proxy: FaultProxy, redis_server: RedisProcess, kind: str
) -> None:
    admin = redis.Redis(**redis_server.client_kwargs())
    client = redis.asyncio.Redis(**proxy.client_kwargs())
    name = f"ring-async-{kind}"
    try:
        lock = make(kind, client, name, flavor="async")
        assert await lock.acquire(blocking=False)
        await asyncio.to_thread(proxy.set_fault, "drop_reply")
        task = asyncio.ensure_future(lock.release())
        deadline = time.monotonic() + 10
        while admin.exists(lock_key(kind, name)):
            assert time.monotonic() < deadline, "the release never ran"
            await asyncio.sleep(0.005)
        rival = await asyncio.to_thread(rivals_take_and_release, admin, kind, name, RIVALS[-1])
        await asyncio.to_thread(rival.release)
        await asyncio.to_thread(resend, proxy)
        await asyncio.wait_for(task, 30)  # no LockLostError / LockNotOwnedError
        if kind != "RedisPyLock":
            assert not lock.lost
    finally:
        await asyncio.to_thread(proxy.heal)
        await client.aclose()
        admin.close()
