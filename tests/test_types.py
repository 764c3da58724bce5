# SPDX-License-Identifier: MIT
"""Types that catch misuse: ``mypy --strict`` (the project's configuration) on a user's
file rejects a URL or the other flavour's client where a lock takes a client (redis-py's
or valkey-py's), and accepts the right clients of both libraries, the Cluster clients, and
the drop-ins through ``r.lock(lock_class=...)``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api

WRONG = """
    import redis
    import redis.asyncio
    import valkey
    import valkey.asyncio

    from redislock import AsyncLock, AsyncSemaphore, Lock, Redlock, inspect

    sync_client = redis.Redis()
    async_client = redis.asyncio.Redis()
    Lock("redis://localhost", "n")
    AsyncLock(sync_client, "n")
    Lock(async_client, "n")
    AsyncSemaphore(sync_client, "n", 3)
    inspect(async_client, "n")
    AsyncLock(valkey.Valkey(), "n")
    Lock(valkey.asyncio.Valkey(), "n")
    Redlock([valkey.asyncio.Valkey()], "n")
"""

RIGHT = """
    import redis
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.cluster
    import valkey
    import valkey.asyncio
    import valkey.asyncio.cluster
    import valkey.cluster

    from redislock import (
        AsyncLock,
        AsyncRedlock,
        AsyncSemaphore,
        FairLock,
        Lock,
        ReadWriteLock,
        Redlock,
        inspect,
    )
    from redislock.compat import AsyncRedisPyLock, RedisPyLock

    sync_client = redis.Redis()
    async_client = redis.asyncio.Redis()
    Lock(sync_client, "n")
    Lock(redis.cluster.RedisCluster(host="localhost"), "n")
    AsyncLock(async_client, "n")
    AsyncLock(redis.asyncio.cluster.RedisCluster(host="localhost"), "n")
    ReadWriteLock(sync_client, "n")
    AsyncSemaphore(async_client, "n", 3)
    inspect(sync_client, "n")
    lock = sync_client.lock("n", timeout=5, lock_class=RedisPyLock)
    alock = async_client.lock("n", timeout=5, lock_class=AsyncRedisPyLock)

    # valkey-py's clients (valkey-py is an optional dependency: redislock[valkey])
    Lock(valkey.Valkey(), "n")
    Lock(valkey.cluster.ValkeyCluster(host="localhost"), "n")
    AsyncLock(valkey.asyncio.Valkey(), "n")
    AsyncLock(valkey.asyncio.cluster.ValkeyCluster(host="localhost"), "n")
    FairLock(valkey.Valkey(), "n")
    Redlock([valkey.Valkey(), valkey.Valkey(port=6380), redis.Redis(port=6381)], "n")
    AsyncRedlock([valkey.asyncio.Valkey() for _ in range(3)], "n")
    inspect(valkey.Valkey(), "n")


    async def use(sem: AsyncSemaphore) -> None:
        async with sem.acquire(timeout=5) as permit:
            token: int | None = permit.fencing_token
"""


def check(tmp_path: Path, code: str) -> tuple[str, int]:
    path = tmp_path / "user_code.py"
    path.write_text(textwrap.dedent(code))
    out, err, status = api.run([str(path), "--strict", "--no-error-summary"])
    return out + err, status


@pytest.mark.slow
def test_misuse_fails_the_type_check(tmp_path: Path) -> None:
    out, status = check(tmp_path, WRONG)
    assert status == 1, out
    lines = [line for line in out.splitlines() if "error:" in line]
    assert [line.split(":")[1] for line in lines] == [
        "11",
        "12",
        "13",
        "14",
        "15",
        "16",  # a valkey-py sync client for AsyncLock
        "17",  # and an asyncio one for Lock
        "18",  # and for Redlock's masters
    ], out
    assert all("[arg-type]" in line or "[list-item]" in line for line in lines), out


@pytest.mark.slow
def test_right_use_passes_the_type_check(tmp_path: Path) -> None:
    out, status = check(tmp_path, RIGHT)
    assert status == 0, out


ON_LOST = """
    import redis
    import redis.asyncio

    from redislock import (
        AsyncLock, AsyncPermit, FairLock, Lock, MultiLock, Permit, ReadLock, ReadWriteLock,
        Redlock, RLock, Semaphore, WriteLock,
    )

    r = redis.Redis()


    def on_lock(lock: Lock) -> None: ...
    def on_permit(permit: Permit) -> None: ...
    def on_side(side: ReadLock | WriteLock) -> None: ...
    def on_anything(obj: object) -> None: ...


    Lock(r, "n", on_lost=on_lock)
    Lock(r, "n", on_lost=lambda lock: print(lock.fencing_token))
    Lock(r, "n", on_lost=on_anything)
    RLock(r, "n", on_lost=lambda lock: lock.hold_count())
    FairLock(r, "n", on_lost=lambda lock: lock.name)
    MultiLock(r, ["a", "b"], on_lost=lambda multi: multi.names)
    Redlock([r, r, r], "n", on_lost=lambda lock: lock.fencing_token)
    Semaphore(r, "n", 3, on_lost=on_permit)
    ReadWriteLock(r, "n", on_lost=on_side)
    AsyncLock(redis.asyncio.Redis(), "n", on_lost=lambda lock: lock.release())
    Semaphore(r, "n", 3, on_lost=on_lock)  # line 29: a Permit is not a Lock
    ReadWriteLock(r, "n", on_lost=on_lock)  # line 30
    Lock(r, "n", on_lost=lambda lock: lock.no_such_attribute)  # line 31
    FairLock(r, "n", on_lost=on_permit)  # line 32
"""


@pytest.mark.slow
def test_on_lost_is_typed_with_what_it_receives(tmp_path: Path) -> None:
    """``on_lost`` gets the lock object itself (a Semaphore's: the Permit; a
    ReadWriteLock's: the side), so a callback for another type fails the type check."""
    out, status = check(tmp_path, ON_LOST)
    assert status == 1, out
    lines = [line for line in out.splitlines() if "error:" in line]
    assert [line.split(":")[1] for line in lines] == ["29", "30", "31", "32"], out
