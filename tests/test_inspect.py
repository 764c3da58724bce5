# SPDX-License-Identifier: MIT
"""``redislock.inspection.inspect`` and ``ainspect``: every kind, both ``decode_responses``
settings (the ``r`` / ``ar`` fixtures), sync and asyncio, Redis Cluster clients, bad input
refused before any I/O, and no owner token anywhere in the result; a CountDownLatch's count
and a Barrier's round also through ``redislock inspect`` and ``redislock list``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock import (
    AsyncBarrier,
    AsyncCountDownLatch,
    AsyncFairLock,
    AsyncLock,
    AsyncMultiLock,
    AsyncReadWriteLock,
    AsyncRLock,
    AsyncSemaphore,
    Barrier,
    BarrierInfo,
    CountDownLatch,
    Election,
    FairLock,
    LatchInfo,
    LeaderInfo,
    Lock,
    LockConfigError,
    MultiLock,
    ReadWriteLock,
    RLock,
    Semaphore,
)
from redislock._core.codec import encode_hold_value, encode_lock_value, permit_id, token_tag
from redislock._core.inspection import decode_reply
from redislock._core.ops import as_str
from redislock.cli.inspecting import inspect_command
from redislock.cli.listing import list_command
from redislock.inspection import HoldInfo, LockInfo, PermitsInfo, WaiterInfo, ainspect, inspect

HOST = socket.gethostname()
NO_RETRY = Retry(NoBackoff(), 0)
ASYNC_NO_RETRY = AsyncRetry(NoBackoff(), 0)
PID = os.getpid()
TTL = 10.0


def key(name: str, prefix: str = "redislock:") -> str:
    return f"{prefix}{{{name}}}"


def values(obj: object) -> Iterator[object]:
    """Every value inside a result: the fields of nested dataclasses and tuples."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from values(getattr(obj, f.name))
    elif isinstance(obj, tuple):
        for item in obj:
            yield from values(item)
    else:
        yield obj


def assert_no_secret(info: LockInfo, *tokens: str | None) -> None:
    """No owner token in ``repr(info)`` nor in any field; each holder shows its tag."""
    text = repr(info)
    for token in tokens:
        assert token is not None
        secret = token.rpartition(".")[2]  # a queue token's public process tag may show
        assert len(secret) >= 28
        assert secret not in text
        for value in values(info):
            assert not (isinstance(value, str) and secret in value)


def assert_lease(seconds: float | None, lease: float = TTL) -> None:
    assert seconds is not None
    assert lease - 1.0 < seconds <= lease


def assert_recent(unix_seconds: float) -> None:
    assert time.time() - 60 < unix_seconds <= time.time() + 1


def holder_of(info: LockInfo) -> HoldInfo:
    [holder] = info.holders
    return holder


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.005)


async def async_wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(0.005)


# ------------------------------------------------------------------ sync, one server


def test_an_absent_name(r: redis.Redis) -> None:
    assert inspect(r, "nobody") == LockInfo(
        name="nobody",
        key=key("nobody"),
        kind="none",
        key_type="none",
        held=False,
        ttl=None,
        fencing_counter=0,
    )


def test_a_lock(r: redis.Redis) -> None:
    for _ in range(2):
        with Lock(r, "job", ttl=TTL):
            pass
    info = inspect(r, "job")
    assert (info.kind, info.held, info.fencing_counter, info.holders) == ("none", False, 2, ())
    waiter = Lock(r, "job", ttl=TTL)
    with Lock(r, "job", ttl=TTL) as lock:
        assert waiter.acquire(timeout=0.05) is False  # queued, then left the queue
        info = inspect(r, "job")
        assert (info.name, info.key, info.kind, info.key_type) == (
            "job",
            key("job"),
            "lock",
            "string",
        )
        assert (info.held, info.fencing_counter, info.waiting) == (True, 3, False)
        assert_lease(info.ttl)
        holder = holder_of(info)
        assert (holder.role, holder.host, holder.pid, holder.hold_count) == ("holder", HOST, PID, 1)
        assert holder.fencing_token == lock.fencing_token == 3
        assert holder.lease_remaining == info.ttl
        assert holder.token_tag == token_tag(str(lock.token))
        assert holder.permit_id is None
        assert_recent(holder.acquired_at)
        assert (info.queue, info.permits, info.readers_waiting, info.unknown_fields) == (
            (),
            None,
            False,
            0,
        )
        assert_no_secret(info, lock.token)


def test_an_rlock_counts_re_entries(r: redis.Redis) -> None:
    lock = RLock(r, "re", ttl=TTL)
    with lock, lock, lock:
        info = inspect(r, "re")
        assert (info.kind, info.key_type, info.held, info.fencing_counter) == (
            "rlock",
            "hash",
            True,
            1,
        )
        holder = holder_of(info)
        assert (holder.role, holder.hold_count, holder.fencing_token) == ("writer", 3, 1)
        assert (holder.host, holder.pid, holder.token_tag) == (
            HOST,
            PID,
            token_tag(str(lock.token)),
        )
        assert_lease(holder.lease_remaining)
        assert_lease(info.ttl)
        assert info.permits is None
        assert_no_secret(info, lock.token)
    assert inspect(r, "re").held is False


def test_a_read_write_lock_with_readers_then_a_writer(r: redis.Redis) -> None:
    readers = [ReadWriteLock(r, "catalog", ttl=TTL) for _ in range(2)]
    for rw in readers:
        assert rw.read().acquire(timeout=5)
    writer = ReadWriteLock(r, "catalog", ttl=TTL)
    steps = [threading.Event() for _ in range(4)]
    tokens: list[str | None] = []

    def write_then_downgrade() -> None:  # holds belong to the thread that took them
        with writer.write():
            tokens.append(writer.write().token)
            steps[0].set()
            steps[1].wait(30)
            with writer.read():  # a writer may also read (downgrade)
                tokens.append(writer.read().token)
                steps[2].set()
                steps[3].wait(30)

    thread = threading.Thread(target=write_then_downgrade)
    thread.start()
    try:
        wait_for(lambda: inspect(r, "catalog").waiting)  # the writer waits
        info = inspect(r, "catalog")
        assert (info.kind, info.held, info.fencing_counter) == ("rwlock", True, 2)
        assert [(h.role, h.hold_count, h.fencing_token) for h in info.holders] == [
            ("reader", 1, 1),
            ("reader", 1, 2),
        ]
        assert [h.token_tag for h in info.holders] == [
            token_tag(str(rw.read().token)) for rw in readers
        ]
        for h in info.holders:
            assert (h.host, h.pid, h.permit_id) == (HOST, PID, None)
            assert_lease(h.lease_remaining)
        assert (info.waiting, info.readers_waiting) == (True, False)
        assert_no_secret(info, *(rw.read().token for rw in readers))
        for rw in readers:
            rw.read().release()
        assert steps[0].wait(30)
        info = inspect(r, "catalog")
        assert (info.kind, info.waiting) == ("rlock", False)  # a writer alone: like an RLock
        holder = holder_of(info)
        assert (holder.role, holder.fencing_token, holder.hold_count) == ("writer", 3, 1)
        assert holder.token_tag == token_tag(str(tokens[0]))
        steps[1].set()
        assert steps[2].wait(30)
        info = inspect(r, "catalog")
        assert info.kind == "rwlock"  # writers listed before readers
        assert [(h.role, h.fencing_token) for h in info.holders] == [("writer", 3), ("reader", 4)]
        assert_no_secret(info, *tokens)
    finally:
        for step in steps:
            step.set()
        thread.join(30)
    assert inspect(r, "catalog").held is False


def test_a_fair_lock_with_queued_waiters(r: redis.Redis) -> None:
    holder = FairLock(r, "fq", ttl=TTL)
    assert holder.acquire(timeout=5)
    assert inspect(r, "fq").kind == "lock"  # nobody queued: a FairLock looks like a Lock
    waiters = [FairLock(r, "fq", ttl=TTL, waiter_lease=2.0) for _ in range(2)]
    got: list[bool] = []
    threads = []
    try:
        for n, waiter in enumerate(waiters, 1):

            def take(w: FairLock = waiter) -> None:
                got.append(w.acquire(timeout=30))
                w.release()

            threads.append(threading.Thread(target=take))
            threads[-1].start()
            wait_for(lambda n=n: len(inspect(r, "fq").queue) == n)
        info = inspect(r, "fq")
        assert (info.kind, info.key_type, info.held, info.waiting) == ("fair", "string", True, True)
        assert info.fencing_counter == holder.fencing_token == 1
        h = holder_of(info)
        assert (h.role, h.pid, h.fencing_token, h.token_tag) == (
            "holder",
            PID,
            1,
            token_tag(str(holder.token)),
        )
        queued = [as_str(t) for t in r.lrange(key("fq") + ":queue", 0, -1)]
        assert [(w.position, w.token_tag) for w in info.queue] == [
            (1, token_tag(queued[0])),
            (2, token_tag(queued[1])),
        ]
        for w in info.queue:
            assert isinstance(w, WaiterInfo)
            assert_lease(w.lease_remaining, 2.0)
        assert_no_secret(info, holder.token, *queued)
    finally:
        holder.release()
        for thread in threads:
            thread.join(30)
    assert got == [True, True]
    info = inspect(r, "fq")
    assert (info.kind, info.held, info.fencing_counter, info.queue) == ("none", False, 3, ())


def test_a_lock_with_a_queued_waiter(r: redis.Redis) -> None:
    """A Lock's waiters queue as a FairLock's do (one queue per name): shown as kind "fair"."""
    holder = Lock(r, "lq", ttl=TTL)
    assert holder.acquire(timeout=5)
    waiter = Lock(r, "lq", ttl=TTL)
    got: list[bool] = []

    def take() -> None:
        got.append(waiter.acquire(timeout=30))
        waiter.release()

    thread = threading.Thread(target=take)
    thread.start()
    try:
        wait_for(lambda: len(inspect(r, "lq").queue) == 1)
        info = inspect(r, "lq")
        assert (info.kind, info.held, info.waiting) == ("fair", True, True)
        [queued] = [as_str(t) for t in r.lrange(key("lq") + ":queue", 0, -1)]
        assert [(w.position, w.token_tag) for w in info.queue] == [(1, token_tag(queued))]
        assert_lease(info.queue[0].lease_remaining, 1.0)  # Lock's waiter lease
        assert_no_secret(info, holder.token, queued)
    finally:
        holder.release()
        thread.join(30)
    assert got == [True]
    info = inspect(r, "lq")
    assert (info.kind, info.held, info.fencing_counter, info.queue) == ("none", False, 2, ())


def test_a_semaphore_with_permits(r: redis.Redis) -> None:
    sem = Semaphore(r, "gpu", permits=3, ttl=TTL)
    permits = [sem.acquire(timeout=5), sem.acquire(timeout=5)]
    try:
        info = inspect(r, "gpu")
        assert (info.kind, info.held, info.fencing_counter) == ("semaphore", True, 2)
        assert info.permits == PermitsInfo(limit=None, used=2)  # only the clients know 3
        assert [(h.role, h.hold_count, h.fencing_token, h.permit_id) for h in info.holders] == [
            ("permit", 1, p.fencing_token, p.id) for p in permits
        ]
        for h, p in zip(info.holders, permits, strict=True):
            assert h.token_tag == token_tag(str(p.token))
            assert h.permit_id == permit_id(str(p.token))
            assert (h.host, h.pid) == (HOST, PID)
            assert_lease(h.lease_remaining)
        assert_no_secret(info, *(p.token for p in permits))
        sem.set_permits(2)  # the count in Redis wins over the clients' 3
        assert inspect(r, "gpu").permits == PermitsInfo(limit=2, used=2)
    finally:
        for p in permits:
            p.release()
    info = inspect(r, "gpu")  # free, but the :permits key tells the kind
    assert (info.kind, info.key_type, info.held, info.holders) == ("semaphore", "none", False, ())
    assert info.permits == PermitsInfo(limit=2, used=0)


def test_an_election_shows_its_leader(r: redis.Redis) -> None:
    with Lock(r, "el", ttl=TTL):
        pass  # the next term is 2
    contender = Election(r, "el", identity="node-a")
    with contender.campaign(timeout=5) as term:
        info = inspect(r, "el")
        assert (info.kind, info.held, term) == ("lock", True, 2)
        assert info.leader == LeaderInfo("node-a", 2, "")
        assert holder_of(info).fencing_token == 2
        contender.proclaim("10.0.0.7:8080")
        assert inspect(r, "el").leader == LeaderInfo("node-a", 2, "10.0.0.7:8080")
    assert inspect(r, "el").leader is None  # resigned: nobody leads
    with Lock(r, "plain", ttl=TTL):
        assert inspect(r, "plain").leader is None  # not an election


def test_multilock_names_are_plain_locks_of_one_holder(r: redis.Redis) -> None:
    names = ["m:a", "m:b", "m:c"]
    with Lock(r, "m:b", ttl=TTL):
        pass  # m:b's counter is ahead of the others
    with MultiLock(r, names, ttl=TTL) as multi:
        infos = [inspect(r, n) for n in names]
        assert [i.kind for i in infos] == ["lock"] * 3
        assert [i.fencing_counter for i in infos] == [1, 2, 1]
        assert multi.fencing_tokens == dict(zip(names, [1, 2, 1], strict=True))
        holders = [holder_of(i) for i in infos]
        assert {(h.token_tag, h.pid, h.host) for h in holders} == {
            (token_tag(str(multi.token)), PID, HOST)
        }
        for info in infos:
            assert_lease(info.ttl)
            assert_no_secret(info, multi.token)
    assert [inspect(r, n).held for n in names] == [False] * 3


def test_a_custom_prefix_and_foreign_values(r: redis.Redis) -> None:
    with Lock(r, "job", ttl=TTL, prefix="app:"):
        assert inspect(r, "job").kind == "none"
        info = inspect(r, "job", prefix="app:")
        assert (info.key, info.kind, info.fencing_counter) == (key("job", "app:"), "lock", 1)
    r.rpush(key("odd"), "x")
    assert inspect(r, "odd") == LockInfo(
        name="odd",
        key=key("odd"),
        kind="foreign",
        key_type="list",
        held=True,
        ttl=None,
        fencing_counter=0,
    )
    r.set(key("garbage"), "not a lock value", px=5000)
    info = inspect(r, "garbage")
    assert (info.kind, info.held, info.holders) == ("lock", True, ())  # held, by whom unknown
    assert_lease(info.ttl, 5.0)


def test_hold_fields_not_written_by_redislock_are_counted(r: redis.Redis) -> None:
    now_ms = int(time.time() * 1000)
    token, other = "a" * 32, "b" * 32
    meta = f"host-x|42|{now_ms}"
    r.hset(
        key("h"),
        mapping={
            token: encode_hold_value("w", 2, now_ms + 60_000, 7, meta),
            other: encode_hold_value("w", 1, now_ms - 1_000, 6, meta),  # its lease ended
            "junk": "zzz",
            "junk2": "w|x|1|1|h|1|1",
        },
    )
    info = inspect(r, "h")
    assert (info.kind, info.held, info.unknown_fields, info.ttl) == ("rlock", True, 2, None)
    holder = holder_of(info)
    assert (holder.host, holder.pid, holder.hold_count, holder.fencing_token) == (
        "host-x",
        42,
        2,
        7,
    )
    assert holder.acquired_at == now_ms / 1000.0
    assert 55.0 < (holder.lease_remaining or 0) <= 60.0
    assert_no_secret(info, token, other)


def test_the_result_is_frozen(r: redis.Redis) -> None:
    info = inspect(r, "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.held = True  # type: ignore[misc]


# ------------------------------------------------------------------ bad input, errors


@pytest.fixture
def nowhere(tmp_path: Path) -> Iterator[redis.Redis]:
    """A client of a unix socket nobody listens on: any I/O raises ConnectionError."""
    client = redis.Redis(unix_socket_path=str(tmp_path / "no-server.sock"), retry=NO_RETRY)
    yield client
    client.close()


@pytest.mark.parametrize(
    ("name", "prefix", "message"),
    [
        ("", "redislock:", "name"),
        ("a\nb", "redislock:", "name"),
        (b"job", "redislock:", "name"),
        (None, "redislock:", "name"),
        ("x" * 1025, "redislock:", "name"),
        ("job", "a\tb:", "prefix"),
        ("job", "x" * 257, "prefix"),
        ("job", 7, "prefix"),
        ("job", "a{b", "prefix"),
    ],
)
def test_bad_input_raises_lock_config_error_before_any_io(
    nowhere: redis.Redis, name: Any, prefix: Any, message: str
) -> None:
    with pytest.raises(LockConfigError, match=message):
        inspect(nowhere, name, prefix=prefix)


def test_redis_errors_propagate(nowhere: redis.Redis) -> None:
    with pytest.raises(redis.exceptions.ConnectionError):
        inspect(nowhere, "job")  # good input: the I/O happens, and its error propagates


async def test_bad_input_raises_before_any_io_asyncio(tmp_path: Path) -> None:
    client = redis.asyncio.Redis(
        unix_socket_path=str(tmp_path / "no-server.sock"), retry=ASYNC_NO_RETRY
    )
    try:
        with pytest.raises(LockConfigError, match="name"):
            await ainspect(client, "")
        with pytest.raises(LockConfigError, match="prefix"):
            await ainspect(client, "job", prefix="a}")
        with pytest.raises(redis.exceptions.ConnectionError):
            await ainspect(client, "job")
    finally:
        await client.aclose()


async def test_a_client_of_the_wrong_flavour_is_refused(
    nowhere: redis.Redis, tmp_path: Path
) -> None:
    aclient = redis.asyncio.Redis(unix_socket_path=str(tmp_path / "no-server.sock"))
    try:
        with pytest.raises(LockConfigError, match=r"for asyncio use ainspect\(\)\), got Redis$"):
            inspect(aclient, "job")  # type: ignore[arg-type]
        with pytest.raises(LockConfigError, match=r"for a sync client use inspect\(\)"):
            await ainspect(nowhere, "job")  # type: ignore[arg-type]
        with pytest.raises(LockConfigError, match="got str"):
            inspect("redis://localhost", "job")  # type: ignore[arg-type]
    finally:
        await aclient.aclose()


APART: list[Any] = [[], -2, [], -2, 0, -1]
"""inspect.lua's last six values for a name without a latch or a barrier round."""


def test_decode_reply_reads_resp3_false_as_nil() -> None:
    """Over RESP3 a script's ``false`` may arrive as False rather than None."""
    token = "a" * 32
    value = encode_lock_value(token, "h|1|1700000000000", 3)
    reply = ["string", value, [], 5000, False, 0, 0, False, [], [], 1_700_000_000_000]
    info = decode_reply("n", key("n"), [*reply, False, *APART])
    assert (info.kind, info.fencing_counter, info.permits, info.ttl) == ("lock", 0, None, 5.0)
    assert (holder_of(info).token_tag, holder_of(info).fencing_token) == (token_tag(token), 3)
    assert info.leader is None


def test_decode_reply_trusts_a_leader_key_of_the_holders_term_only() -> None:
    value = encode_lock_value("a" * 32, "h|1|1700000000000", 7)
    reply = ["string", value, [], 5000, "7", 0, 0, None, [], [], 1_700_000_000_000]
    info = decode_reply("n", key("n"), [*reply, "7|node-a|10.0.0.7:8080", *APART])
    assert info.leader == LeaderInfo("node-a", 7, "10.0.0.7:8080")
    for stale in ("6|node-a|x", "7||x", "garbage"):  # an earlier term's key, or not ours
        assert decode_reply("n", key("n"), [*reply, stale, *APART]).leader is None
    free: list[Any] = ["none", None, [], -2, "7", 0, 0, None, [], [], 1_700_000_000_000]
    assert decode_reply("n", key("n"), [*free, "7|node-a|x", *APART]).leader is None  # nobody holds


# ------------------------------------------------------------------ asyncio


async def test_asyncio_every_kind(ar: redis.asyncio.Redis) -> None:
    assert (await ainspect(ar, "a:none")).kind == "none"
    async with AsyncLock(ar, "a:lock", ttl=TTL) as lock:
        info = await ainspect(ar, "a:lock")
        holder = holder_of(info)
        assert (info.kind, info.fencing_counter, holder.fencing_token) == ("lock", 1, 1)
        assert (holder.host, holder.pid, holder.token_tag) == (
            HOST,
            PID,
            token_tag(str(lock.token)),
        )
        assert_lease(info.ttl)
        assert_no_secret(info, lock.token)

    rlock = AsyncRLock(ar, "a:re", ttl=TTL)
    async with rlock, rlock:
        info = await ainspect(ar, "a:re")
        assert (info.kind, holder_of(info).hold_count, holder_of(info).role) == (
            "rlock",
            2,
            "writer",
        )
        assert_no_secret(info, rlock.token)

    rw = [AsyncReadWriteLock(ar, "a:rw", ttl=TTL) for _ in range(2)]
    for lock_ in rw:
        assert await lock_.read().acquire(timeout=5)
    info = await ainspect(ar, "a:rw")
    assert info.kind == "rwlock"
    assert [(h.role, h.fencing_token) for h in info.holders] == [("reader", 1), ("reader", 2)]
    assert_no_secret(info, *(lock_.read().token for lock_ in rw))
    for lock_ in rw:
        await lock_.read().release()

    sem = AsyncSemaphore(ar, "a:sem", permits=5, ttl=TTL)
    permits = [await sem.acquire(timeout=5) for _ in range(3)]
    info = await ainspect(ar, "a:sem")
    assert (info.kind, info.permits) == ("semaphore", PermitsInfo(limit=None, used=3))
    assert [h.permit_id for h in info.holders] == [p.id for p in permits]
    assert_no_secret(info, *(p.token for p in permits))
    for p in permits:
        await p.release()

    async with AsyncMultiLock(ar, ["a:m1", "a:m2"], ttl=TTL) as multi:
        for name in ("a:m1", "a:m2"):
            info = await ainspect(ar, name)
            assert holder_of(info).token_tag == token_tag(str(multi.token))
            assert_no_secret(info, multi.token)


async def test_asyncio_fair_lock_queue(ar: redis.asyncio.Redis) -> None:
    holder = AsyncFairLock(ar, "a:fq", ttl=TTL)
    assert await holder.acquire(timeout=5)
    waiter = AsyncFairLock(ar, "a:fq", ttl=TTL, waiter_lease=2.0)
    task = asyncio.create_task(waiter.acquire(timeout=30))
    try:

        async def queued() -> bool:
            return len((await ainspect(ar, "a:fq")).queue) == 1

        await async_wait_for(queued)
        info = await ainspect(ar, "a:fq")
        assert (info.kind, info.waiting, holder_of(info).fencing_token) == ("fair", True, 1)
        [w] = info.queue
        [in_queue] = [as_str(t) for t in await ar.lrange(key("a:fq") + ":queue", 0, -1)]
        assert (w.position, w.token_tag) == (1, token_tag(in_queue))
        assert_lease(w.lease_remaining, 2.0)
        assert_no_secret(info, holder.token, in_queue)
    finally:
        await holder.release()
        assert await task
    info = await ainspect(ar, "a:fq")
    assert (info.kind, info.fencing_counter, holder_of(info).token_tag) == (
        "lock",
        2,
        token_tag(str(waiter.token)),
    )
    await waiter.release()


# ------------------------------------------------------------------ Redis Cluster


def test_cluster_client(rc: redis.cluster.RedisCluster) -> None:
    assert inspect(rc, "c:none").kind == "none"
    names = ["c:lock", "c:other", "c:third"]  # different hash slots
    locks = [Lock(rc, n, ttl=TTL) for n in names]
    for lock in locks:
        assert lock.acquire(timeout=5)
    try:
        for name, lock in zip(names, locks, strict=True):
            info = inspect(rc, name)
            assert (info.kind, info.fencing_counter) == ("lock", 1)
            assert holder_of(info).token_tag == token_tag(str(lock.token))
            assert_lease(info.ttl)
            assert_no_secret(info, lock.token)
    finally:
        for lock in locks:
            lock.release()
    rlock = RLock(rc, "c:re", ttl=TTL)
    with rlock, rlock:
        info = inspect(rc, "c:re")
        assert (info.kind, holder_of(info).hold_count) == ("rlock", 2)
    permit = Semaphore(rc, "c:sem", permits=2, ttl=TTL).acquire(timeout=5)
    with permit:
        info = inspect(rc, "c:sem")
        assert info.permits == PermitsInfo(limit=None, used=1)
        assert holder_of(info).permit_id == permit.id


async def test_asyncio_cluster_client(arc: redis.asyncio.cluster.RedisCluster) -> None:
    assert (await ainspect(arc, "c:none")).kind == "none"
    async with AsyncLock(arc, "c:lock", ttl=TTL) as lock:
        info = await ainspect(arc, "c:lock")
        assert (info.kind, holder_of(info).token_tag) == ("lock", token_tag(str(lock.token)))
        assert_no_secret(info, lock.token)
    rw = AsyncReadWriteLock(arc, "c:rw", ttl=TTL)
    assert await rw.read().acquire(timeout=5)
    try:
        info = await ainspect(arc, "c:rw")
        assert (info.kind, [h.role for h in info.holders]) == ("rwlock", ["reader"])
    finally:
        await rw.read().release()


# ------------------------------------------------------------------ CountDownLatch, Barrier


def party_token(party: Any) -> str:
    """A Barrier party's owner token (its lease core's), to look for in the results."""
    token: str = party._core.holding.token
    return token


def test_a_count_down_latch(r: redis.Redis) -> None:
    latch = CountDownLatch(r, "gate", 2, ttl=TTL)
    assert inspect(r, "gate").kind == "none"
    assert latch.try_set_count()
    gen = latch.generation()
    info = inspect(r, "gate")
    assert (info.kind, info.held, info.key, info.key_type) == (
        "latch",
        True,
        key("gate") + ":latch",
        "hash",
    )
    assert info.latch is not None
    assert (info.latch.count, info.latch.generation) == (2, gen)
    assert_lease(info.latch.ttl)
    assert info.ttl == info.latch.ttl
    assert info.fencing_counter >= gen
    assert (info.holders, info.queue, info.waiting, info.barrier) == ((), (), False, None)
    assert latch.count_down() == 1
    one = inspect(r, "gate")
    assert one.latch == LatchInfo(1, gen, one.ttl)
    assert latch.count_down() == 0
    done = inspect(r, "gate")
    assert (done.kind, done.held) == ("latch", False)  # reached zero: nothing counts
    assert done.latch is not None
    assert (done.latch.count, done.latch.generation) == (0, gen)


def test_a_barrier_round(r: redis.Redis) -> None:
    a, b = Barrier(r, "meet", 2, lease=TTL), Barrier(r, "meet", 2, lease=TTL)
    assert inspect(r, "meet").kind == "none"
    entering = threading.Thread(target=a.enter, args=(10,))
    entering.start()
    try:
        wait_for(lambda: inspect(r, "meet").kind == "barrier")
        info = inspect(r, "meet")
        assert (info.held, info.key, info.key_type) == (True, key("meet") + ":barrier", "hash")
        assert info.barrier is not None
        assert (info.barrier.state, info.barrier.parties, info.barrier.entered) == ("enter", 2, 1)
        assert_lease(info.barrier.next_lease_end)
        assert_lease(info.ttl)  # the keys expire with the latest member lease
        assert (info.holders, info.latch) == ((), None)
        assert b.enter(10)
    finally:
        entering.join(10)
    info = inspect(r, "meet")
    assert info.barrier is not None
    ends = info.barrier.next_lease_end
    assert info.barrier == BarrierInfo(a.generation or 0, "open", 2, 2, ends)
    assert a.generation == b.generation
    assert_lease(ends)
    assert_no_secret(info, party_token(a), party_token(b))
    leaving = threading.Thread(target=a.leave, args=(10,))
    leaving.start()
    try:
        assert b.leave(10)
    finally:
        leaving.join(10)
    assert inspect(r, "meet").kind == "none"  # the round closed: its keys are gone


def test_a_name_that_is_a_lock_and_a_latch_shows_both(r: redis.Redis) -> None:
    lock = Lock(r, "both", ttl=TTL)
    latch = CountDownLatch(r, "both", 3)
    assert lock.acquire(timeout=5)
    assert latch.try_set_count()
    try:
        info = inspect(r, "both")
        assert (info.kind, info.key) == ("lock", key("both"))  # the lock key's kind first
        assert holder_of(info).fencing_token == lock.fencing_token
        assert info.latch is not None
        assert info.latch.count == 3
    finally:
        lock.release()


def test_decode_reply_ignores_latch_and_round_fields_it_did_not_write() -> None:
    base: list[Any] = ["none", None, [], -2, None, 0, 0, None, [], [], 1000, None]
    foreign = decode_reply(
        "x",
        "k",
        [*base, ["count", "many"], 5000, ["gen", "1", "state", "odd", "parties", "2"], 5000, 1, 10],
    )
    assert (foreign.kind, foreign.latch, foreign.barrier) == ("none", None, None)
    fine = decode_reply(
        "x",
        "k",
        [*base, [b"count", b"0", b"gen", b"4", b"since", b"4"], -1, [], -2, 0, -1],
    )
    assert fine.latch == LatchInfo(0, 4, None)  # a key without a TTL
    assert (fine.kind, fine.held, fine.ttl) == ("latch", False, None)


def test_the_cli_inspects_and_lists_a_latch_and_a_barrier(
    admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    latch = CountDownLatch(admin, "cli:gate", 3, ttl=TTL)
    assert latch.try_set_count()
    party = Barrier(admin, "cli:meet", 1, lease=TTL)
    assert party.enter(5)  # one party: the round opens as it enters
    try:
        capsys.readouterr()
        assert inspect_command(admin, "cli:gate", "redislock:", as_json_output=True) == 0
        gate = json.loads(capsys.readouterr().out)
        assert (gate["kind"], gate["held"], gate["key"]) == (
            "latch",
            True,
            key("cli:gate") + ":latch",
        )
        assert gate["latch"]["count"] == 3
        assert gate["latch"]["generation"] == latch.generation()
        assert_lease(gate["latch"]["ttl"])
        assert "holder" not in gate
        assert inspect_command(admin, "cli:gate", "redislock:", as_json_output=False) == 0
        text = capsys.readouterr().out
        assert text.startswith(
            f"count-down latch 'cli:gate' ({key('cli:gate')}:latch): counting down, 3 left "
            f"(generation {latch.generation()})"
        ), text
        assert "  ttl: " in text
        assert "fencing counter: " in text
        assert "waiters" not in text

        assert inspect_command(admin, "cli:meet", "redislock:", as_json_output=True) == 0
        meet = json.loads(capsys.readouterr().out)
        assert meet["kind"] == "barrier"
        round_ = meet["barrier"]
        assert (round_["state"], round_["parties"], round_["entered"]) == ("open", 1, 1)
        assert round_["generation"] == party.generation
        assert_lease(round_["next_lease_end"])
        assert party_token(party) not in json.dumps(meet)
        assert inspect_command(admin, "cli:meet", "redislock:", as_json_output=False) == 0
        text = capsys.readouterr().out
        assert text.startswith(
            f"barrier 'cli:meet' ({key('cli:meet')}:barrier): round {party.generation} open, "
            "1 of 1 party in"
        ), text
        assert "  parties: 1, entered: 1" in text
        assert "  next lease end: in " in text

        assert list_command(admin, "cli:", "redislock:", as_json_output=True) == 0
        listed = {i["name"]: i["kind"] for i in json.loads(capsys.readouterr().out)}
        assert listed == {"cli:gate": "latch", "cli:meet": "barrier"}
        assert list_command(admin, "cli:", "redislock:", as_json_output=False) == 0
        lines = dict(line.split("\t", 1) for line in capsys.readouterr().out.splitlines())
        assert "count-down latch: counting down, 3 left" in lines["cli:gate"]
        assert "barrier: round " in lines["cli:meet"]
    finally:
        party.leave(5)
    for _ in range(3):
        latch.count_down()
    assert list_command(admin, "cli:", "redislock:", as_json_output=True) == 0
    assert json.loads(capsys.readouterr().out) == []  # done latch, closed round: not held


def test_the_cli_shows_a_latch_beside_a_lock_of_the_same_name(
    admin: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = Lock(admin, "cli:both", ttl=TTL)
    assert lock.acquire(timeout=5)
    assert CountDownLatch(admin, "cli:both", 2).try_set_count()
    try:
        capsys.readouterr()
        assert inspect_command(admin, "cli:both", "redislock:", as_json_output=False) == 0
        text = capsys.readouterr().out
        assert text.startswith(f"lock 'cli:both' ({key('cli:both')}): held by ")
        assert "  also a count-down latch: counting down, 2 left" in text
        assert "waiters: none seen" in text  # the lock's lines, as before
    finally:
        lock.release()


async def test_asyncio_a_latch_and_a_barrier(ar: redis.asyncio.Redis) -> None:
    latch = AsyncCountDownLatch(ar, "agate", 1)
    assert await latch.try_set_count()
    info = await ainspect(ar, "agate")
    assert (info.kind, info.held) == ("latch", True)
    assert info.latch is not None
    assert info.latch.count == 1
    party = AsyncBarrier(ar, "ameet", 1, lease=TTL)
    assert await party.enter(5)
    try:
        info = await ainspect(ar, "ameet")
        assert info.barrier is not None
        assert (info.kind, info.barrier.state, info.barrier.entered) == ("barrier", "open", 1)
        assert_no_secret(info, party_token(party))
    finally:
        assert await party.leave(5)
    assert (await ainspect(ar, "ameet")).kind == "none"
