# SPDX-License-Identifier: MIT
"""The shared wake-up channel (one pub/sub connection per client per process, see
redislock._core.wake): waiters hold no pooled connection, the holder's commands never starve,
and no wake-up is lost, also when the channel's connection dies, on Cluster and with
Sentinel. Real servers, redis-py default clients.

Waiters use ``recheck_interval=30``: a lost wake-up would show as a wait of about 30 s, so a
wait limit well below that proves every waiter was woken through the channel. (A Lock waiter
also retries every third of its 1 s waiter lease to keep its place in the queue, so for
Lock the limit shows no waiter was left behind; FairLock, whose waiter lease follows
``recheck_interval`` here, shows the grant message itself wakes the waiter.)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

import redislock
from redislock._core.keys import FairKeys, fence_key
from redislock._core.lock import process_tag
from redislock.server import RedisProcess
from tests.cluster import LocalCluster
from tests.sentinel import Topology, aclose_master_client, close_master_client

SLOW = 30.0
"""recheck_interval of the waiters: a lost wake-up costs this long."""


def clients(admin: redis.Redis) -> list[dict[str, Any]]:
    """CLIENT LIST without the admin's own connection."""
    me = admin.client_id()
    return [c for c in admin.client_list() if int(c["id"]) != me]


def pubsub_connections(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in found if int(c.get("sub", 0)) > 0 or "P" in c.get("flags", "")]


async def wait_for(what: str, predicate: Callable[[], Awaitable[bool]], limit: float = 10) -> None:
    deadline = time.monotonic() + limit
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.05)


def wait_sync(what: str, predicate: Callable[[], bool], limit: float = 10) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def grant(name: str) -> str:
    """The grant channel of ``name`` that this process's waiters listen on (a grant is
    published for the waiting process only: FairKeys.grant_for)."""
    return f"{FairKeys.for_name(name).grant}:{process_tag()}"


def subscribers(admin: redis.Redis, channel: str) -> int:
    reply = admin.pubsub_numsub(channel)
    return int(reply[0][1])


@pytest.fixture
def redis_server(spawn_server: Callable[..., RedisProcess]) -> RedisProcess:
    """A server of this test's own, so CLIENT LIST and PUBSUB counts see only this test's
    clients (on the suite's shared server, other tests' idle wake-up channels linger for
    seconds and their clients' pooled connections stay open)."""
    return spawn_server()


# ------------------------------------------------------------------ one name, many waiters


async def test_300_tasks_wait_on_one_async_lock_with_a_default_client(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = redis.asyncio.Redis(**redis_server.client_kwargs())
    try:
        holder = redislock.AsyncLock(client, "one", ttl=10)
        assert await holder.acquire()
        order: list[int] = []

        async def waiter(i: int) -> float:
            lock = redislock.AsyncLock(client, "one", ttl=10, recheck_interval=SLOW)
            start = time.monotonic()
            assert await lock.acquire(timeout=60)
            order.append(i)
            await lock.release()
            return time.monotonic() - start

        tasks = [asyncio.create_task(waiter(i)) for i in range(300)]
        await wait_for(
            "300 waiters wait on the channel",
            lambda: asyncio.sleep(0, subscribers(admin, grant("one")) == 1),
        )
        await asyncio.sleep(0.5)
        found = clients(admin)
        assert len(pubsub_connections(found)) == 1
        assert not [c for c in found if c["cmd"] in ("blpop", "brpop")]
        # the pool's limit (100) bounds redislock's commands in flight; waiting takes none
        assert len(found) <= 100 + 1, [c["cmd"] for c in found]
        busy = [c for c in found if c["cmd"] not in ("subscribe", "NULL", "client|list")]
        started = time.monotonic()
        await holder.release()
        waits = await asyncio.gather(*tasks)
        assert sorted(order) == list(range(300))
        assert time.monotonic() - started < 20, "a wake-up was lost"
        assert max(waits) < 25
        print(f"300 asyncio waiters: {len(found)} connections while waiting, {len(busy)} busy")
    finally:
        await client.aclose()


def test_150_threads_wait_on_one_lock_with_a_default_client(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = redis.Redis(**redis_server.client_kwargs())
    errors: list[BaseException] = []
    got: list[int] = []
    try:
        holder = redislock.Lock(client, "one", ttl=10)
        assert holder.acquire()

        def waiter(i: int) -> None:
            try:
                lock = redislock.Lock(client, "one", ttl=10, recheck_interval=SLOW)
                assert lock.acquire(timeout=60)
                got.append(i)
                lock.release()
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=waiter, args=(i,)) for i in range(150)]
        for t in threads:
            t.start()
        wait_sync(
            "the waiters wait on the channel",
            lambda: subscribers(admin, grant("one")) == 1,
        )
        time.sleep(0.5)
        found = clients(admin)
        assert len(pubsub_connections(found)) == 1
        assert not [c for c in found if c["cmd"] in ("blpop", "brpop")]
        assert len(found) <= 100 + 1
        started = time.monotonic()
        holder.release()
        for t in threads:
            t.join(60)
        assert not errors, errors[:3]
        assert sorted(got) == list(range(150))
        assert time.monotonic() - started < 20, "a wake-up was lost"
        print(f"150 threads: {len(found)} connections while waiting")
    finally:
        client.close()


async def test_a_watchdog_holder_renews_and_releases_under_200_waiters(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = redis.asyncio.Redis(**redis_server.client_kwargs())
    try:
        holder = redislock.AsyncLock(client, "wd", watchdog_lease=1.0)
        assert await holder.acquire()

        async def waiter() -> None:
            lock = redislock.AsyncLock(client, "wd", ttl=10, recheck_interval=SLOW)
            assert await lock.acquire(timeout=60)
            await lock.release()

        tasks = [asyncio.create_task(waiter()) for _ in range(200)]
        fence = holder.fencing_token
        await asyncio.sleep(3.0)  # three leases: renewed all along
        assert admin.pttl("redislock:{wd}") > 0
        # still ours: nobody got in (the slot's counter; no other name in this test)
        assert admin.get(fence_key("redislock:{wd}")) == str(fence)
        await holder.release()  # raises if the lease was lost or the release failed
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    finally:
        await client.aclose()


# ------------------------------------------------------------------ many names


async def test_waiters_on_1000_names_share_one_subscription(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = redis.asyncio.Redis(**redis_server.client_kwargs())
    try:
        names = [f"n{i}" for i in range(1000)]
        holders = [redislock.AsyncLock(client, n, ttl=30) for n in names]
        for h in holders:
            assert await h.acquire()

        async def waiter(name: str) -> float:
            lock = redislock.AsyncLock(client, name, ttl=10, recheck_interval=SLOW)
            start = time.monotonic()
            assert await lock.acquire(timeout=60)
            await lock.release()
            return time.monotonic() - start

        tasks = [asyncio.create_task(waiter(n)) for n in names]

        async def all_subscribed() -> bool:
            found = pubsub_connections(clients(admin))
            return len(found) == 1 and int(found[0]["sub"]) == 1000

        await wait_for("one connection subscribed to 1000 channels", all_subscribed, 20)
        await asyncio.sleep(0.5)
        started = time.monotonic()
        for h in holders:
            await h.release()
        await asyncio.gather(*tasks)
        assert time.monotonic() - started < 20, "a wake-up was lost"
    finally:
        await client.aclose()


# ------------------------------------------------------------------ the channel dies


async def test_a_wake_up_channel_killed_mid_wait_still_wakes_every_waiter(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = redis.asyncio.Redis(**redis_server.client_kwargs())
    try:
        holder = redislock.AsyncLock(client, "k", ttl=30)
        assert await holder.acquire()
        waiters = [
            redislock.AsyncLock(client, "k", ttl=10, recheck_interval=SLOW) for _ in range(50)
        ]

        async def waiter(lock: redislock.AsyncLock) -> None:
            assert await lock.acquire(timeout=60)
            await asyncio.sleep(0.01)
            await lock.release()

        tasks = [asyncio.create_task(waiter(w)) for w in waiters]
        await wait_for(
            "the waiters wait on the channel",
            lambda: asyncio.sleep(0, subscribers(admin, grant("k")) == 1),
        )
        await asyncio.sleep(0.3)
        assert admin.client_kill_filter(_type="pubsub") == 1
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await holder.release()
        await asyncio.wait_for(asyncio.gather(*tasks), 25)
        assert time.monotonic() - started < 10, "a wake-up was lost"
        assert subscribers(admin, grant("k")) == 1  # subscribed again
    finally:
        await client.aclose()


def test_a_wake_up_channel_killed_mid_wait_still_wakes_every_thread(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    client = redis.Redis(**redis_server.client_kwargs())
    errors: list[BaseException] = []
    try:
        holder = redislock.Lock(client, "k", ttl=30)
        assert holder.acquire()

        def waiter() -> None:
            try:
                lock = redislock.Lock(client, "k", ttl=10, recheck_interval=SLOW)
                assert lock.acquire(timeout=60)
                time.sleep(0.01)
                lock.release()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=waiter) for _ in range(30)]
        for t in threads:
            t.start()
        wait_sync(
            "the waiters wait on the channel",
            lambda: subscribers(admin, grant("k")) == 1,
        )
        time.sleep(0.3)
        assert admin.client_kill_filter(_type="pubsub") == 1
        time.sleep(0.3)
        started = time.monotonic()
        holder.release()
        for t in threads:
            t.join(30)
        assert not errors, errors[:3]
        assert time.monotonic() - started < 10, "a wake-up was lost"
    finally:
        client.close()


def test_a_new_channel_is_subscribed_while_the_sync_reader_blocks_reading(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """The sync reader waits in a read of its connection (no socket of its own to select
    on): a waiter that needs another channel wakes it with a PING, so the SUBSCRIBE goes out
    at once, not at the reader's next timed check (seconds later, the channels' linger)."""
    client = redis.Redis(**redis_server.client_kwargs())
    try:
        first, second = redislock.Lock(client, "one", ttl=30), redislock.Lock(client, "two", ttl=30)
        assert first.acquire()
        assert second.acquire()
        done: list[bool] = []

        def waiter(name: str) -> None:
            lock = redislock.Lock(client, name, ttl=10, recheck_interval=SLOW)
            done.append(lock.acquire(timeout=60))
            lock.release()

        one = threading.Thread(target=waiter, args=("one",))
        one.start()
        wait_sync("the first channel is subscribed", lambda: subscribers(admin, grant("one")) == 1)
        time.sleep(0.5)  # the reader is now blocked reading, with nothing to send
        pings = int(admin.info("commandstats").get("cmdstat_ping", {}).get("calls", 0))
        started = time.monotonic()
        two = threading.Thread(target=waiter, args=("two",))
        two.start()
        wait_sync(
            "the second channel is subscribed",
            lambda: subscribers(admin, grant("two")) == 1,
            limit=2,
        )
        assert time.monotonic() - started < 1.0
        after = int(admin.info("commandstats").get("cmdstat_ping", {}).get("calls", 0))
        assert after - pings >= 1  # the waiter's PING woke the reader
        second.release()
        two.join(10)
        first.release()
        one.join(10)
        assert done == [True, True]
    finally:
        client.close()


# ------------------------------------------------------------------ every kind that waits


async def _wakes(
    admin: redis.Redis,
    channel: str,
    hold: Callable[[], Awaitable[Any]],
    unhold: Callable[[], Awaitable[Any]],
    wait: Callable[[], Coroutine[Any, Any, Any]],
) -> None:
    """``wait()`` blocks while ``hold()`` is held and is woken by ``unhold()`` through
    ``channel`` in far less than the re-check interval."""
    await hold()
    task = asyncio.create_task(wait())
    await wait_for(
        f"a waiter listens on {channel}",
        lambda: asyncio.sleep(0, subscribers(admin, channel) == 1),
    )
    await asyncio.sleep(0.2)
    assert not task.done()
    started = time.monotonic()
    await unhold()
    await asyncio.wait_for(task, 10)
    assert time.monotonic() - started < 3, "woken by the re-check, not by the release"


@pytest.mark.parametrize(
    "kind", ["Lock", "RLock", "ReadLock", "WriteLock", "Semaphore", "FairLock", "MultiLock"]
)
async def test_each_kind_that_waits_is_woken_through_the_channel(
    redis_server: RedisProcess, admin: redis.Redis, kind: str
) -> None:
    client = redis.asyncio.Redis(**redis_server.client_kwargs())
    slow: dict[str, Any] = {"ttl": 10, "recheck_interval": SLOW}
    p = "redislock:{x}"
    try:
        if kind == "Semaphore":
            sem = redislock.AsyncSemaphore(client, "x", 1, **slow)
            held = await sem.acquire()
            other = redislock.AsyncSemaphore(client, "x", 1, **slow)

            async def take() -> None:
                permit = await other.acquire(timeout=60)
                await permit.release()

            async def nothing() -> None:
                pass

            await _wakes(admin, p + ":wake", nothing, held.release, take)
            return
        if kind in ("ReadLock", "WriteLock"):
            # readers wait for a writer on rwake; a writer waits for readers on wake
            rw = redislock.AsyncReadWriteLock(client, "x", **slow)
            first = rw.write() if kind == "ReadLock" else rw.read()

            async def waiting() -> None:
                async def in_task() -> None:
                    other = redislock.AsyncReadWriteLock(client, "x", **slow)
                    lock = other.read() if kind == "ReadLock" else other.write()
                    assert await lock.acquire(timeout=60)
                    await lock.release()

                await asyncio.create_task(in_task())

            channel = p + (":rwake" if kind == "ReadLock" else ":wake")
            await _wakes(admin, channel, first.acquire, first.release, waiting)
            return
        make: dict[str, Callable[[], Any]] = {
            "Lock": lambda: redislock.AsyncLock(client, "x", **slow),
            "RLock": lambda: redislock.AsyncRLock(client, "x", **slow),
            "FairLock": lambda: redislock.AsyncFairLock(client, "x", **slow),
            "MultiLock": lambda: redislock.AsyncMultiLock(client, ["w", "x", "y"], **slow),
        }
        channel = grant("x") if kind in ("Lock", "FairLock") else p + ":wake"
        holder = make[kind]() if kind != "MultiLock" else redislock.AsyncLock(client, "x", ttl=10)

        async def acquire_in_own_task() -> None:
            async def in_task() -> None:
                lock = make[kind]()
                assert await lock.acquire(timeout=60)
                await lock.release()

            await asyncio.create_task(in_task())

        await _wakes(admin, channel, holder.acquire, holder.release, acquire_in_own_task)
    finally:
        await client.aclose()


async def test_a_cancelled_waiter_passes_its_wake_up_on(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """Two waiters in one process; the one a release wakes is cancelled before it can try:
    the other still gets the lock at once (not after the re-check interval). An RLock: its
    release publishes a plain wake-up, meant for one waiter per process (a Lock's release
    grants the lock to one waiter by name instead)."""
    client = redis.asyncio.Redis(**redis_server.client_kwargs())
    try:
        holder = redislock.AsyncRLock(client, "c", ttl=10)
        assert await holder.acquire()
        first = asyncio.create_task(
            redislock.AsyncRLock(client, "c", ttl=10, recheck_interval=SLOW).acquire(timeout=60)
        )
        await wait_for(
            "the first waiter listens",
            lambda: asyncio.sleep(0, subscribers(admin, "redislock:{c}:wake") == 1),
        )
        await asyncio.sleep(0.2)
        second_lock = redislock.AsyncRLock(client, "c", ttl=10, recheck_interval=SLOW)

        async def second_takes() -> bool:  # an RLock is released by the task that holds it
            if not await second_lock.acquire(timeout=60):
                return False
            await second_lock.release()
            return True

        second = asyncio.create_task(second_takes())
        await asyncio.sleep(0.3)
        first.cancel()
        await holder.release()
        started = time.monotonic()
        assert await asyncio.wait_for(second, 10)
        assert time.monotonic() - started < 3
        with pytest.raises(asyncio.CancelledError):
            await first
    finally:
        await client.aclose()


# ------------------------------------------------------------------ Cluster and Sentinel


async def test_cluster_waiters_on_every_master_survive_a_killed_channel(
    cluster: LocalCluster, arc: redis.asyncio.cluster.RedisCluster
) -> None:
    # one name per master (by the slot of its hash tag)
    names: dict[str, str] = {}
    for i in range(200):
        name = f"c{i}"
        node = cluster.node_for(f"redislock:{{{name}}}")
        names.setdefault(node.id, name)
        if len(names) == 3:
            break
    assert len(names) == 3
    holders = [redislock.AsyncLock(arc, n, ttl=30) for n in names.values()]
    for h in holders:
        assert await h.acquire()

    async def waiter(name: str) -> None:
        lock = redislock.AsyncLock(arc, name, ttl=10, recheck_interval=SLOW)
        assert await lock.acquire(timeout=60)
        await lock.release()

    tasks = [asyncio.create_task(waiter(n)) for n in names.values() for _ in range(5)]
    await asyncio.sleep(1.0)
    killed = 0
    for node in cluster.nodes:
        killed += int(node.cmd("CLIENT", "KILL", "TYPE", "pubsub"))
    assert killed == 1  # one subscription for the whole cluster
    await asyncio.sleep(0.3)
    started = time.monotonic()
    for h in holders:
        await h.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 25)
    assert time.monotonic() - started < 10, "a wake-up was lost"


def test_cluster_sync_waiters_on_every_master(
    cluster: LocalCluster, rc: redis.cluster.RedisCluster
) -> None:
    names: list[str] = []
    seen: set[str] = set()
    for i in range(200):
        node = cluster.node_for(f"redislock:{{s{i}}}")
        if node.id not in seen:
            seen.add(node.id)
            names.append(f"s{i}")
    assert len(names) == 3
    holders = [redislock.Lock(rc, n, ttl=30) for n in names]
    for h in holders:
        assert h.acquire()
    errors: list[BaseException] = []

    def waiter(name: str) -> None:
        try:
            lock = redislock.Lock(rc, name, ttl=10, recheck_interval=SLOW)
            assert lock.acquire(timeout=60)
            lock.release()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=waiter, args=(n,)) for n in names for _ in range(5)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    # Their waiter leases (1 s) are kept alive by one call per hash slot (not by tries of
    # their own, 15-30 s apart): still queued, no lease ran out.
    for name in names:
        f = FairKeys.for_name(name)
        server_now = rc.time()
        now_ms = int(server_now[0]) * 1000 + int(server_now[1]) // 1000
        assert rc.llen(f.queue) == 5
        assert rc.zcount(f.leases, "-inf", now_ms) == 0
    killed = sum(int(node.cmd("CLIENT", "KILL", "TYPE", "pubsub")) for node in cluster.nodes)
    assert killed == 1
    time.sleep(0.3)
    started = time.monotonic()
    for h in holders:
        h.release()
    for t in threads:
        t.join(30)
    assert not errors, errors[:3]
    assert time.monotonic() - started < 10, "a wake-up was lost"


@pytest.mark.slow
def test_sentinel_waiters_are_woken_after_a_failover(short_tmp: Path) -> None:
    with Topology(short_tmp / "wake-sentinel") as topo:
        client = topo.master_client()
        errors: list[BaseException] = []
        try:
            holder = redislock.Lock(client, "s", ttl=30)
            assert holder.acquire()

            def waiter() -> None:
                try:
                    lock = redislock.Lock(client, "s", ttl=10, recheck_interval=SLOW)
                    assert lock.acquire(timeout=60)
                    lock.release()
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=waiter) for _ in range(10)]
            for t in threads:
                t.start()
            time.sleep(1.0)
            topo.failover()
            time.sleep(0.5)
            started = time.monotonic()
            holder.release()
            for t in threads:
                t.join(40)
            assert not errors, errors[:3]
            assert time.monotonic() - started < 15, "a wake-up was lost"
        finally:
            close_master_client(client)


async def test_sentinel_async_waiters_are_woken_after_a_failover(short_tmp: Path) -> None:
    with Topology(short_tmp / "wake-asentinel") as topo:
        client = topo.async_master_client()
        try:
            holder = redislock.AsyncLock(client, "s", ttl=30)
            assert await holder.acquire()

            async def waiter() -> None:
                lock = redislock.AsyncLock(client, "s", ttl=10, recheck_interval=SLOW)
                assert await lock.acquire(timeout=60)
                await lock.release()

            tasks = [asyncio.create_task(waiter()) for _ in range(10)]
            await asyncio.sleep(1.0)
            await asyncio.to_thread(topo.failover)
            await asyncio.sleep(0.5)
            started = time.monotonic()
            await holder.release()
            await asyncio.wait_for(asyncio.gather(*tasks), 40)
            assert time.monotonic() - started < 15, "a wake-up was lost"
        finally:
            await aclose_master_client(client)
