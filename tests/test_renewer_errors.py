# SPDX-License-Identifier: MIT
"""A renewal that fails with an exception that is not a Redis error (a closed client, a bug
in a client wrapper) is a failed renewal like any other: retried while the local lease
estimate lasts, then reported through ``on_lost`` once, never only logged."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import redis
import redis.asyncio

from redislock import AsyncLock, Lock
from redislock.server import RedisProcess

LEASE = 1.0


class BreakableClient(redis.Redis):
    """A default client whose every call raises RuntimeError once ``broken`` is set."""

    broken = False

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if self.broken:
            raise RuntimeError("client wrapper failed")
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise RuntimeError("client wrapper failed")
        return super().pipeline(*args, **kwargs)


class AsyncBreakableClient(redis.asyncio.Redis):
    """As :class:`BreakableClient`, for asyncio."""

    broken = False

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if self.broken:
            raise RuntimeError("client wrapper failed")
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise RuntimeError("client wrapper failed")
        return super().pipeline(*args, **kwargs)


def test_sync_unexpected_renewal_error_reports_the_loss(redis_server: RedisProcess) -> None:
    client = BreakableClient(**redis_server.client_kwargs())
    lost = threading.Event()
    locks = [
        Lock(client, f"ue{i}", ttl=None, watchdog_lease=LEASE, on_lost=lambda _: lost.set())
        for i in range(2)
    ]
    try:
        for lock in locks:
            assert lock.acquire()
        client.broken = True
        started = time.monotonic()
        assert lost.wait(LEASE + 2.0), "on_lost was never called"
        # (the second lock's on_lost may come a moment later)
        assert time.monotonic() - started <= LEASE + 0.5
        deadline = time.monotonic() + 1.0
        while not all(lock.lost for lock in locks) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(lock.lost for lock in locks)
    finally:
        client.broken = False
        client.close()


def test_async_unexpected_renewal_error_reports_the_loss(redis_server: RedisProcess) -> None:
    async def go() -> None:
        client = AsyncBreakableClient(**redis_server.client_kwargs())
        calls: list[str] = []
        lost = asyncio.Event()

        def on_lost(subject: Any) -> None:
            calls.append(subject.name)
            if len(calls) == 2:
                lost.set()

        locks = [
            AsyncLock(client, f"ue{i}", ttl=None, watchdog_lease=LEASE, on_lost=on_lost)
            for i in range(2)
        ]
        try:
            for lock in locks:
                assert await lock.acquire()
            client.broken = True
            started = time.monotonic()
            async with asyncio.timeout(LEASE + 2.0):
                await lost.wait()
            assert time.monotonic() - started <= LEASE + 0.5
            assert all(lock.lost for lock in locks)
            await asyncio.sleep(LEASE)
            assert sorted(calls) == ["ue0", "ue1"]  # once per lock
        finally:
            client.broken = False
            await client.aclose()

    asyncio.run(go())


def test_batched_renewals_report_each_lock_on_its_own(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """Leases of one plain client due together are renewed by ONE lock_renew call (counted
    with INFO commandstats); a lock whose key was deleted and one taken over are lost, each
    once, while the others in the same call keep being renewed."""

    async def go() -> None:
        client = redis.asyncio.Redis(**redis_server.client_kwargs())
        lost: list[str] = []
        locks = [
            AsyncLock(client, f"b{i}", watchdog_lease=LEASE, on_lost=lambda s: lost.append(s.name))
            for i in range(20)
        ]
        try:
            for lock in locks:
                assert await lock.acquire()
            admin.delete(locks[3].key)
            admin.set(locks[7].key, "someone-else|meta", px=60_000)
            admin.config_resetstat()
            await asyncio.sleep(LEASE * 2.2)  # about six renewals each
            stats = admin.info("commandstats")
            renew_calls = stats.get("cmdstat_evalsha", {}).get("calls", 0)
            renewals = sum(lock.statistics().renewals for lock in locks)
            assert sorted(lost) == ["b3", "b7"]
            assert locks[3].lost
            assert locks[7].lost
            assert renewals >= 18 * 5
            assert renew_calls < renewals / 4  # batched: far fewer calls than renewals
            for i, lock in enumerate(locks):
                if i in (3, 7):
                    continue
                assert lock.statistics().held
                assert 0 < admin.pttl(lock.key) <= LEASE * 1000
            assert admin.get(locks[7].key) == "someone-else|meta"  # never touched
        finally:
            for i, lock in enumerate(locks):
                if i not in (3, 7):
                    await lock.release()
            await client.aclose()

    asyncio.run(go())


def test_sync_batched_renewals_report_each_lock_on_its_own(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = redis.Redis(**redis_server.client_kwargs())
    lost: list[str] = []
    locks = [
        Lock(client, f"s{i}", watchdog_lease=LEASE, on_lost=lambda s: lost.append(s.name))
        for i in range(20)
    ]
    try:
        for lock in locks:
            assert lock.acquire()
        admin.delete(locks[2].key)
        admin.config_resetstat()
        time.sleep(LEASE * 2.2)
        renew_calls = admin.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        renewals = sum(lock.statistics().renewals for lock in locks)
        assert lost == ["s2"]
        assert renewals >= 19 * 5
        assert renew_calls < renewals / 4
        assert all(lock.statistics().held for i, lock in enumerate(locks) if i != 2)
    finally:
        for i, lock in enumerate(locks):
            if i != 2:
                lock.release()
        client.close()
