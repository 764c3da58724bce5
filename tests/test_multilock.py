# SPDX-License-Identifier: MIT
"""Behaviour of ``MultiLock`` and ``AsyncMultiLock`` on a real redis-server: all or
nothing (also across chunks), exclusion and one fencing sequence per name shared with
``Lock``, deadlock freedom under overlapping sets taken in opposite orders, the watchdog
over every name and the loss of one name, release of a lost set, bad input before any I/O,
and asyncio cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.crc import key_slot

from redislock import (
    AcquireTimeoutError,
    AsyncFairLock,
    AsyncLock,
    AsyncMultiLock,
    FairLock,
    Lock,
    LockConfigError,
    LockLostError,
    LockUsageError,
    MultiLock,
    NotOwnedError,
    RLock,
    UnexpectedReplyError,
)
from redislock._core.keys import FairKeys, LockKeys
from redislock._core.lock import DONE_MS, HolderInfo
from redislock._core.multi import CHUNK, MAX_NAMES, plan
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from tests.flavors import AsyncFacade, LoopThread
from tests.proxy import DelayProxy
from tests.support import Background, async_wait_for, closing_dead_clients, wait_for

# ------------------------------------------------------------------ helpers


def key(name: str) -> str:
    return LockKeys.for_name(name).lock


def lock_keys_left(admin: redis.Redis, names: list[str] | tuple[str, ...]) -> int:
    """How many of ``names`` have a lock key (EXISTS in slices)."""
    keys = [key(n) for n in names]
    return sum(int(admin.exists(*keys[i : i + 500])) for i in range(0, len(keys), 500))


def get(admin: redis.Redis, k: str) -> str:
    """A string value (the admin client decodes), "" if the key is missing."""
    value = admin.get(k)
    return "" if value is None else str(value)


def fences(m: Any) -> dict[str, int] | None:
    """The fencing tokens (a function, so mypy does not narrow the property across calls)."""
    tokens: dict[str, int] | None = m.fencing_tokens
    return tokens


def markers_left(admin: redis.Redis) -> list[str]:
    """Waiters markers and wake lists present (a finished waiter may leave none behind
    beyond their short TTLs, but a non-blocking try must never write one)."""
    return sorted(k for k in admin.scan_iter("*") if k.endswith((":wait", ":wake")))


class Multi:
    """One flavour (sync, or asyncio through a loop thread) of MultiLock and Lock."""

    def __init__(self, name: str, client: Any, admin: redis.Redis, lt: LoopThread) -> None:
        self.name = name
        self.client = client
        self.admin = admin
        self.lt = lt

    def multi(self, names: Any, **kwargs: Any) -> Any:
        if self.name == "sync":
            return MultiLock(self.client, names, **kwargs)
        return AsyncFacade(cast(Any, AsyncMultiLock(self.client, names, **kwargs)), self.lt)

    def lock(self, name: str, **kwargs: Any) -> Any:
        if self.name == "sync":
            return Lock(self.client, name, **kwargs)
        return AsyncFacade(AsyncLock(self.client, name, **kwargs), self.lt)

    def fair(self, name: str, **kwargs: Any) -> Any:
        if self.name == "sync":
            return FairLock(self.client, name, **kwargs)
        return AsyncFacade(AsyncFairLock(self.client, name, **kwargs), self.lt)


@pytest.fixture(params=[("sync", False), ("async", True)], ids=["sync-bytes", "async-decoded"])
def fl(
    request: pytest.FixtureRequest,
    redis_server: RedisProcess,
    admin: redis.Redis,
    loop_thread: LoopThread,
) -> Iterator[Multi]:
    """MultiLock of one flavour on the flushed suite server, with a decoded admin client."""
    which, decode = request.param
    if which == "sync":
        client: Any = redis.Redis(**redis_server.client_kwargs(), decode_responses=decode)
        yield Multi(which, client, admin, loop_thread)
        client.close()
        return

    async def connect() -> redis.asyncio.Redis:
        return redis.asyncio.Redis(**redis_server.client_kwargs(), decode_responses=decode)

    aclient = loop_thread.run(connect())
    yield Multi(which, aclient, admin, loop_thread)
    loop_thread.run(aclient.aclose())


# ------------------------------------------------------------------ the API


def public(cls: type) -> dict[str, Any]:
    return {n: inspect.getattr_static(cls, n) for n in dir(cls) if not n.startswith("_")}


def test_sync_and_async_twins_have_one_api() -> None:
    sync, aio = public(MultiLock), public(AsyncMultiLock)
    assert sync.keys() == aio.keys()
    assert {"acquire", "release", "extend", "locked", "owned", "remaining", "statistics"} <= set(
        sync
    )
    assert {"names", "fencing_tokens", "lost", "token"} <= set(sync)
    assert inspect.signature(MultiLock) == inspect.signature(AsyncMultiLock)
    params = list(inspect.signature(MultiLock).parameters.values())
    assert [p.name for p in params[:2]] == ["client", "names"]
    assert all(p.kind is p.KEYWORD_ONLY for p in params[2:])
    lock_options = list(inspect.signature(Lock).parameters)[2:]
    assert [p.name for p in params[2:]][: len(lock_options)] == lock_options[: len(params) - 2]
    io = sorted(n for n, m in aio.items() if inspect.iscoroutinefunction(m))
    # adopt (and detach) exist as on Lock, and refuse: see the test below
    assert io == ["acquire", "adopt", "extend", "locked", "owned", "release", "remaining"]
    for name in sync:
        s, a = sync[name], aio[name]
        assert type(s) is type(a), name
        assert not inspect.iscoroutinefunction(s), name
        if isinstance(s, property):
            assert s.fset is None
            assert s.__doc__
            assert a.__doc__
        else:
            # The asyncio twin returns the Async* flavour of the same class (guard()).
            want = inspect.signature(a)
            want = want.replace(return_annotation=str(want.return_annotation).removeprefix("Async"))
            assert inspect.signature(s) == want, name
            assert s.__doc__, name
            assert a.__doc__, name
    for cls in (MultiLock, AsyncMultiLock):
        doc = inspect.getdoc(cls)
        assert doc is not None
        assert "Example::" in doc
        assert "LockConfigError" in doc
        assert "Coffman" in doc  # the algorithm's source
        for name in io:
            method_doc = inspect.getdoc(getattr(cls, name))
            assert method_doc is not None
            assert "redis.exceptions.RedisError" in method_doc.split("Raises:", 1)[1], name
    assert MultiLock.__module__ == AsyncMultiLock.__module__ == "redislock"


def test_adopt_and_detach_refuse_before_any_io(r: redis.Redis) -> None:
    """A set's fencing tokens cannot be read back by token: no hand-off between objects."""
    lock = MultiLock(r, ["a", "b"], ttl=5)
    with pytest.raises(LockUsageError):
        lock.adopt("0" * 32)
    assert lock.acquire()
    with pytest.raises(LockUsageError):
        lock.detach()
    assert lock.owned()  # refusing changed nothing
    lock.release()


# ------------------------------------------------------------------ the basics


def test_acquire_release_writes_exactly_lock_keys(fl: Multi) -> None:
    m = fl.multi(["b", "a", "c", "a"], ttl=10)
    assert m.names == ("a", "b", "c")  # sorted, duplicates dropped
    assert not m.locked()
    assert fences(m) is None
    assert m.remaining() is None
    assert m.acquire() is True
    assert fences(m) == {"a": 1, "b": 1, "c": 1}
    assert m.owned()
    assert m.locked()
    assert 9.0 < m.remaining() <= 10.0
    status = SCRIPTS["lock_status"]
    for name in m.names:
        k = LockKeys.for_name(name)
        value = get(fl.admin, k.lock)
        assert value.startswith(m.token + "|")
        info = HolderInfo.parse(value)  # what `redislock inspect` shows
        assert info is not None
        assert info.pid > 0
        assert 9000 < fl.admin.pttl(k.lock) <= 10000
        # lock_status.lua (Lock.owned, adopt, inspect) reads it as a Lock's hold
        reply = fl.admin.eval(status.source, 2, k.lock, k.fence, m.token)
        assert reply[0] == "ok"
        assert reply[2] == 1
    stats = m.statistics()
    assert stats.held
    assert stats.fencing_token is None
    assert stats.name == "a, b, c"
    assert m.token not in repr(m)
    m.release()
    assert not m.locked()
    assert fences(m) is None
    assert lock_keys_left(fl.admin, ["a", "b", "c"]) == 0
    # Left: the fence counters, and the release's memo for a client that sends it again
    # (one done key per chunk, with a short TTL).
    done = LockKeys.for_name("a").done
    expected = sorted([*(LockKeys.for_name(n).fence for n in "abc"), done])
    assert sorted(fl.admin.keys("*")) == expected
    assert 0 < fl.admin.pttl(done) <= DONE_MS
    assert m.statistics().acquisitions == 1
    with pytest.raises(NotOwnedError):
        m.release()


def test_one_busy_name_takes_none(fl: Multi) -> None:
    holder = fl.lock("m", ttl=10)
    assert holder.acquire()
    m = fl.multi(["a", "m", "z"], ttl=10)
    assert m.acquire(blocking=False) is False
    assert m.acquire(timeout=0) is False
    assert m.fencing_tokens is None
    assert lock_keys_left(fl.admin, ["a", "z"]) == 0
    assert get(fl.admin, key("m")).startswith(holder.token + "|")
    assert markers_left(fl.admin) == []  # a single try never marks itself as waiting
    assert m.statistics().failed_acquisitions == 2
    assert m.locked()  # somebody holds one of the names
    assert not m.owned()
    holder.release()
    assert m.acquire(blocking=False)
    m.release()


def test_rollback_across_chunks_leaves_nothing(fl: Multi) -> None:
    names = [f"n{i:05d}" for i in range(2 * CHUNK + 500)]  # three chunks
    last = names[-1]
    holder = fl.lock(last, ttl=10)
    assert holder.acquire()
    m = fl.multi(names, ttl=10)
    assert m.acquire(blocking=False) is False
    # The first two chunks were taken, then given back when the third was busy.
    assert lock_keys_left(fl.admin, names) == 1
    before = int(get(fl.admin, LockKeys.for_name(names[0]).fence))
    holder.release()
    assert m.acquire(blocking=False)
    tokens = fences(m)
    assert tokens is not None
    assert len(tokens) == len(names)
    assert tokens[names[0]] > before
    assert tokens[last] == 2  # the holder's 1, then ours
    assert lock_keys_left(fl.admin, names) == len(names)
    m.release()
    assert lock_keys_left(fl.admin, names) == 0


def test_waiter_gets_every_name_when_the_busy_one_is_released(fl: Multi) -> None:
    names = [f"w{i:05d}" for i in range(CHUNK + 10)]
    holder = fl.lock(names[-1], ttl=30)
    assert holder.acquire()
    m = fl.multi(names, ttl=10)
    waiter = Background(lambda: m.acquire(timeout=20))
    # It waits on the busy name holding nothing: the first chunk was given back.
    wait_for(
        lambda: (
            fl.admin.exists(LockKeys.for_name(names[-1]).wait) == 1
            and lock_keys_left(fl.admin, names[:-1]) == 0
        )
    )
    holder.release()
    assert waiter.join() is True
    assert m.owned()
    m.release()


def test_excludes_lock_both_ways(fl: Multi) -> None:
    m = fl.multi(["a", "b"], ttl=10)
    assert m.acquire()
    assert fl.lock("b", ttl=10).acquire(blocking=False) is False
    assert fl.multi(["b", "c"], ttl=10).acquire(blocking=False) is False
    m.release()
    lock = fl.lock("b", ttl=10)
    assert lock.acquire(blocking=False)
    assert m.acquire(blocking=False) is False
    # A Lock waiter is woken by the MultiLock's release, and the other way round.
    waiter = Background(lambda: m.acquire(timeout=20))
    wait_for(lambda: fl.admin.exists(LockKeys.for_name("b").wait) == 1)
    lock.release()
    assert waiter.join() is True
    other = fl.lock("a", ttl=10)
    lock_waiter = Background(lambda: other.acquire(timeout=20))
    wait_for(lambda: fl.admin.exists(FairKeys.for_name("a").queue) == 1)  # Lock waiters queue
    m.release()  # wakes the queue's first live waiter, which then takes the lock
    assert lock_waiter.join() is True
    other.release()
    # The wake-up serves it, not a re-check: a FairLock waiter (the same queue) that
    # re-checks only every 20 s is served at once.
    assert m.acquire(blocking=False)
    slow = fl.fair("a", ttl=10, waiter_lease=60, recheck_interval=20)
    fair_waiter = Background(lambda: slow.acquire(timeout=30))
    wait_for(lambda: fl.admin.exists(FairKeys.for_name("a").queue) == 1)
    time.sleep(0.1)  # waiting on its grant channel
    started = time.monotonic()
    m.release()
    assert fair_waiter.join() is True
    assert time.monotonic() - started < 5
    slow.release()


def test_fencing_tokens_are_one_sequence_per_name_shared_with_lock(fl: Multi) -> None:
    seen_a: list[int] = []
    seen_b: list[int] = []
    for round_ in range(4):
        lock = fl.lock("a", ttl=10)
        assert lock.acquire()
        seen_a.append(lock.fencing_token)
        lock.release()
        m = fl.multi(["a", "b"], ttl=10)
        assert m.acquire()
        tokens = fences(m)
        assert tokens is not None
        seen_a.append(tokens["a"])
        seen_b.append(tokens["b"])
        m.release()
        if round_ == 1:  # a set busy on "b" burns no token of "b"
            blocker = fl.lock("b", ttl=10)
            assert blocker.acquire()
            seen_b.append(blocker.fencing_token)
            assert not fl.multi(["a", "b"], ttl=10).acquire(blocking=False)
            blocker.release()
    assert seen_a == sorted(set(seen_a)), seen_a  # strictly increasing
    assert seen_b == list(range(1, len(seen_b) + 1))


def test_extend_and_replace(fl: Multi) -> None:
    m = fl.multi([f"e{i}" for i in range(CHUNK + 5)], ttl=5)
    start = time.monotonic()  # the lease began after this
    assert m.acquire()
    got = m.extend(10)
    assert 15.0 - (time.monotonic() - start) < got <= 15.0  # 5 s less what has passed, + 10
    left = fl.admin.pttl(key("e0")) / 1000
    assert 15.0 - (time.monotonic() - start) < left <= 15.0
    assert 14.0 < fl.admin.pttl(key(f"e{CHUNK + 4}")) / 1000 <= 15.0
    assert m.extend(2, replace=True) == 2.0
    assert 1.0 < m.remaining() <= 2.0
    with pytest.raises(LockConfigError):
        m.extend(0)
    fl.admin.delete(key("e7"))
    with pytest.raises(LockLostError, match="e7"):
        m.extend(10)
    assert fl.admin.exists(key("e7")) == 0  # never re-created
    assert m.lost
    with pytest.raises(LockLostError):
        m.release()
    assert lock_keys_left(fl.admin, m.names) == 0


def test_release_of_a_lost_set_never_touches_another_owner(fl: Multi) -> None:
    m = fl.multi(["a", "b", "c"], ttl=10)
    assert m.acquire()
    stolen = "f" * 32 + "|elsewhere|1|0"
    fl.admin.set(key("b"), stolen, px=10_000)
    assert not m.owned()
    with pytest.raises(LockLostError, match="'b'"):
        m.release()
    assert get(fl.admin, key("b")) == stolen
    assert lock_keys_left(fl.admin, ["a", "c"]) == 0  # ours were given back
    assert m.lost
    assert fences(m) is None


def test_usage_errors_and_context_manager(fl: Multi) -> None:
    m = fl.multi(["a", "b"], ttl=10)
    with m:
        with pytest.raises(LockUsageError):
            m.acquire(blocking=False)
        assert m.owned()
    assert not m.locked()
    holder = fl.lock("b", ttl=10)
    assert holder.acquire()
    with pytest.raises(AcquireTimeoutError), fl.multi(["a", "b"], ttl=10, timeout=0.2):
        pass
    holder.release()

    def body() -> None:
        with m:
            fl.admin.delete(key("a"))
            raise KeyError("body")

    with pytest.raises(KeyError) as err:
        body()
    notes = getattr(err.value, "__notes__", [])
    assert any("also failed" in note and "LockLostError" in note for note in notes)


def test_key_without_ttl_is_reported_and_nothing_is_left(fl: Multi) -> None:
    fl.admin.set(key("z"), "not ours")
    m = fl.multi(["a", "z"], ttl=10)
    with pytest.raises(UnexpectedReplyError, match="without a TTL"):
        m.acquire(timeout=5)
    assert lock_keys_left(fl.admin, ["a"]) == 0


def test_a_name_held_by_another_kind_is_wrongtype(r: redis.Redis, admin: redis.Redis) -> None:
    rlock = RLock(r, "shared", ttl=10)
    assert rlock.acquire()
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        MultiLock(r, ["a", "shared"], ttl=10).acquire(timeout=5)
    assert lock_keys_left(admin, ["a"]) == 0
    assert admin.exists(LockKeys.for_name("a").fence) == 0  # nothing was written
    rlock.release()


# ------------------------------------------------------------------ deadlock freedom


def test_overlapping_sets_in_opposite_orders_all_finish(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """Four threads take overlapping sets, given in opposite orders (two of them spanning
    three chunks, one a plain Lock on a shared name); nobody ever holds a name another
    holds, and every thread finishes all its rounds."""
    names = [f"d{i:05d}" for i in range(2 * CHUNK + 400)]
    sets: list[list[str]] = [
        names[: CHUNK + 700],
        list(reversed(names[700:])),
        [names[-1], names[0], names[CHUNK]],
        [names[CHUNK]],  # taken with a plain Lock
    ]
    rounds = 15
    guard = threading.Lock()
    inside: dict[str, int] = {}
    overlaps: list[str] = []
    done = [0] * len(sets)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        client = redis.Redis(**redis_server.client_kwargs())  # redis-py defaults
        try:
            for _ in range(rounds):
                obj: Any = (
                    Lock(client, sets[k][0], ttl=30)
                    if k == 3
                    else MultiLock(client, sets[k], ttl=30, recheck_interval=0.2)
                )
                assert obj.acquire(timeout=60)
                with guard:
                    clash = [n for n in sets[k] if n in inside]
                    overlaps.extend(clash)
                    for n in sets[k]:
                        inside[n] = k
                time.sleep(0.002)
                with guard:
                    for n in sets[k]:
                        inside.pop(n, None)
                obj.release()
                done[k] += 1
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(sets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert not any(thread.is_alive() for thread in threads), "a thread never finished"
    assert errors == []
    assert overlaps == []
    assert done == [rounds] * len(sets)
    assert lock_keys_left(admin, names) == 0


# ------------------------------------------------------------------ watchdog and loss


def test_watchdog_keeps_every_name_alive(fl: Multi) -> None:
    names = [f"k{i:05d}" for i in range(CHUNK + 200)]  # two chunks
    m = fl.multi(names, watchdog_lease=1.0)
    assert m.acquire()
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert fl.admin.pttl(key(names[0])) > 0
        assert fl.admin.pttl(key(names[-1])) > 0
        time.sleep(0.1)
    assert m.owned()
    assert not m.lost
    stats = m.statistics()
    assert stats.renewals >= 4  # every 1/3 s for 2.5 s
    assert stats.renewal_failures == 0
    m.release()
    assert lock_keys_left(fl.admin, names) == 0


def test_losing_one_name_loses_the_set(fl: Multi) -> None:
    fired: list[object] = []
    names = [f"l{i:05d}" for i in range(CHUNK + 50)]
    m = fl.multi(names, watchdog_lease=3.0, renew_interval=0.3, on_lost=fired.append)
    assert m.acquire()
    victim = names[CHUNK + 10]  # in the second chunk
    stolen = "f" * 32 + "|elsewhere|1|0"
    fl.admin.set(key(victim), stolen, px=10_000)
    wait_for(lambda: bool(fired), timeout=3.0)
    assert fired == [getattr(m, "inner", m)]  # on_lost gets the MultiLock itself
    assert m.lost
    with pytest.raises(LockLostError, match=victim):
        m.extend(1)
    with pytest.raises(LockLostError, match=victim):
        m.release()
    assert get(fl.admin, key(victim)) == stolen
    assert lock_keys_left(fl.admin, names) == 1


def test_max_lease_caps_the_set(fl: Multi) -> None:
    fired = threading.Event()
    m = fl.multi(["a", "b"], watchdog_lease=0.6, max_lease=1.2, on_lost=lambda _: fired.set())
    assert m.acquire()
    assert fired.wait(4.0)
    assert m.lost
    with pytest.raises(LockLostError):
        m.release()


# ------------------------------------------------------------------ bad input, before I/O


@pytest.fixture(scope="module")
def dead() -> Iterator[tuple[redis.Redis, redis.asyncio.Redis]]:
    """Clients on a socket that does not exist: a call that reaches I/O fails at once."""
    yield from closing_dead_clients()


BAD_NAMES: list[tuple[str, Any, str]] = [
    ("empty list", list, "must not be empty"),
    ("empty generator", lambda: iter(()), "must not be empty"),
    ("a str", lambda: "abc", "not a single str"),
    ("bytes", lambda: b"abc", "not a single bytes"),
    ("an int", lambda: 42, "iterable of str, got int"),
    ("None", lambda: None, "iterable of str, got NoneType"),
    ("an int name", lambda: ["a", 7], r"names\[1\]: lock name must be a str, got int"),
    ("an empty name", lambda: ["a", ""], r"names\[1\]: lock name must not be empty"),
    ("a brace first", lambda: ["a", "}x"], r"names\[1\]: .*must not start with '}'"),
    ("a newline", lambda: ["a", "bad\nname"], r"names\[1\]: .*control"),
    ("a long name", lambda: ["x" * 1025], r"names\[0\]: lock name is 1025 bytes long"),
    ("too many", lambda: (f"n{i}" for i in range(MAX_NAMES + 1)), "more than 1000000 items"),
]


@pytest.mark.parametrize(("what", "make", "match"), BAD_NAMES, ids=[b[0] for b in BAD_NAMES])
def test_bad_names_raise_before_io(
    dead: tuple[redis.Redis, redis.asyncio.Redis], what: str, make: Any, match: str
) -> None:
    for cls, client in ((MultiLock, dead[0]), (AsyncMultiLock, dead[1])):
        with pytest.raises(LockConfigError, match=match):
            cls(client, make())  # type: ignore[arg-type]


def test_other_bad_arguments_raise_before_io(
    dead: tuple[redis.Redis, redis.asyncio.Redis],
) -> None:
    sync_client, async_client = dead
    with pytest.raises(LockConfigError, match=r"^MultiLock needs a redis\.Redis"):
        MultiLock(async_client, ["a"])  # type: ignore[arg-type]
    with pytest.raises(LockConfigError, match=r"^AsyncMultiLock needs a redis\.asyncio"):
        AsyncMultiLock(sync_client, ["a"])  # type: ignore[arg-type]
    with pytest.raises(LockConfigError, match="needs"):
        MultiLock(object(), ["a"])  # type: ignore[arg-type]
    for kwargs in (
        {"ttl": -1},
        {"ttl": 0.0001},
        {"timeout": -1},
        {"renew_interval": 20},
        {"on_lost": 5},
        {"prefix": "a{b"},
        {"max_lease": 1},
    ):
        with pytest.raises(LockConfigError):
            MultiLock(sync_client, ["a"], **kwargs)
    m = MultiLock(sync_client, iter(["b", "a", "b"]))  # any iterable; nothing sent yet
    assert m.names == ("a", "b")
    with pytest.raises(LockConfigError):
        m.acquire(blocking="yes")  # type: ignore[arg-type]
    with pytest.raises(LockConfigError):
        m.acquire(blocking=False, timeout=1)
    with pytest.raises(NotOwnedError):
        m.release()
    with pytest.raises(LockConfigError):
        m.extend(-1)
    with pytest.raises(redis.exceptions.ConnectionError):
        m.acquire(blocking=False)  # the first thing that reaches Redis


# ------------------------------------------------------------------ asyncio cancellation


async def test_cancelled_waiter_holds_nothing(ar: redis.asyncio.Redis) -> None:
    names = [f"c{i:05d}" for i in range(CHUNK + 10)]
    holder = AsyncLock(ar, names[-1], ttl=10)
    assert await holder.acquire()
    m = AsyncMultiLock(ar, names, ttl=10)
    task = asyncio.create_task(m.acquire(timeout=30))

    async def blocked() -> bool:  # waiting for a wake-up, after giving back the first chunk
        # (its first wait on a channel only just subscribed returns at once: one more try,
        # which takes the first chunk again for a moment)
        reply = await ar.pubsub_numsub(key(names[-1]) + ":wake")
        if int(reply[0][1]) != 1:
            return False
        return int(await ar.exists(*(key(n) for n in names[:-1]))) == 0

    await async_wait_for(blocked)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert m.token is None
    assert await ar.exists(*(key(n) for n in names[:-1])) == 0
    await holder.release()
    assert await m.acquire(blocking=False)  # the object is still usable
    await m.release()


@pytest.fixture
async def delayed(
    redis_server: RedisProcess,
) -> AsyncIterator[tuple[redis.asyncio.Redis, redis.asyncio.Redis]]:
    """(a client whose replies arrive 0.3 s late, a direct admin client) on a flushed server."""
    assert redis_server.socket_path is not None
    async with DelayProxy(str(redis_server.socket_path), reply_delay=0.3).running() as proxy:
        slow = redis.asyncio.Redis(port=proxy.port)
        admin = redis.asyncio.Redis(**redis_server.client_kwargs())
        await admin.flushall()
        await admin.script_load(SCRIPTS["multi_acquire"].source)
        await admin.script_load(SCRIPTS["multi_release"].source)
        await slow.ping()
        yield slow, admin
        await slow.aclose()
        await admin.aclose()


async def test_cancel_after_chunks_were_taken_gives_them_back(
    delayed: tuple[redis.asyncio.Redis, redis.asyncio.Redis],
) -> None:
    slow, admin = delayed
    names = [f"x{i:05d}" for i in range(CHUNK + 10)]
    m = AsyncMultiLock(slow, names, ttl=30)
    task = asyncio.create_task(m.acquire())
    # The first chunk's script runs at once; its reply is still on the way.
    await async_wait_for(lambda: admin.exists(key(names[0])))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def none_left() -> bool:
        return await admin.exists(*(key(n) for n in names)) == 0

    await async_wait_for(none_left, timeout=10.0)  # a cancelled acquire left no orphan key
    assert fences(m) is None


async def test_cancelled_release_completes_in_the_background(
    delayed: tuple[redis.asyncio.Redis, redis.asyncio.Redis],
) -> None:
    slow, admin = delayed
    names = [f"r{i:05d}" for i in range(CHUNK + 10)]
    m = AsyncMultiLock(slow, names, ttl=30)
    assert await m.acquire()
    task = asyncio.create_task(m.release())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = await admin.exists(*(key(n) for n in names))
        assert not (m.token is None and left), "released locally while keys remain"
        if m.token is None and not left:
            break
        await asyncio.sleep(0.01)
    assert m.token is None
    assert await admin.exists(*(key(n) for n in names)) == 0
    assert not m.lost


async def test_async_watchdog_and_loss(ar: redis.asyncio.Redis) -> None:
    lost = asyncio.Event()

    async def on_lost(_: object) -> None:
        lost.set()

    m = AsyncMultiLock(ar, ["p", "q"], watchdog_lease=1.0, on_lost=on_lost)
    assert await m.acquire()
    await asyncio.sleep(1.5)
    assert await m.owned()
    assert m.statistics().renewals >= 2
    await ar.delete(key("q"))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(3):
            await lost.wait()
    assert lost.is_set()
    with pytest.raises(LockLostError, match="'q'"):
        await m.release()
    assert await ar.exists(key("p")) == 0


# ------------------------------------------------------------------ Redis Cluster


def cluster_names() -> list[str]:
    """Names on every master, plus more names in one slot ("big}<i>": hash tag "big")
    than fit in one chunk."""
    return [f"c:{i}" for i in range(60)] + [f"big}}{i}" for i in range(CHUNK + 20)]


def test_cluster_plan_is_one_slot_per_chunk_in_slot_order() -> None:
    names = tuple(sorted(cluster_names()))
    chunks = plan(names, "redislock:", True)
    slots = [{key_slot(k.encode()) for k in chunk.locks} for chunk in chunks]
    assert all(len(s) == 1 for s in slots)
    order = [s.pop() for s in slots]
    assert order == sorted(order)
    assert sorted(n for chunk in chunks for n in chunk.names) == list(names)
    assert all(list(chunk.names) == sorted(chunk.names) for chunk in chunks)
    assert max(len(chunk.names) for chunk in chunks) == CHUNK  # the "big" slot is cut
    assert len(plan(names, "redislock:", False)) == 2  # one server: just chunks


def cluster_keys_left(client: redis.cluster.RedisCluster, names: list[str]) -> int:
    return sum(int(client.exists(key(n))) for n in names)


def test_cluster_multilock_across_slots(rc: redis.cluster.RedisCluster) -> None:
    names = cluster_names()
    blocker = Lock(rc, "c:30", ttl=10)
    assert blocker.acquire()
    m = MultiLock(rc, names, ttl=10)
    assert m.acquire(blocking=False) is False
    assert cluster_keys_left(rc, names) == 1  # the chunks taken before "c:30" were given back
    # A waiter is woken by the release of the busy name (through the wake-up channel).
    waiter = Background(lambda: m.acquire(timeout=20))
    wait_for(lambda: rc.exists(LockKeys.for_name("c:30").wait) == 1)
    released = time.monotonic()  # the waiter's hold began after this
    blocker.release()
    assert waiter.join() is True
    tokens = fences(m)
    assert tokens is not None
    assert tokens["c:30"] == 2
    assert cluster_keys_left(rc, names) == len(names)
    assert m.owned()
    got = m.extend(5)
    assert 15.0 - (time.monotonic() - released) < got <= 15.0  # 10 s less what has passed, + 5
    assert Lock(rc, "big}7", ttl=10).acquire(blocking=False) is False
    other = Lock(rc, "c:5", ttl=10)
    lock_waiter = Background(lambda: other.acquire(timeout=20))
    wait_for(lambda: rc.exists(FairKeys.for_name("c:5").queue) == 1)  # Lock waiters queue
    m.release()
    assert lock_waiter.join() is True
    other.release()
    assert cluster_keys_left(rc, names) == 0


def test_cluster_watchdog_and_loss(rc: redis.cluster.RedisCluster) -> None:
    fired = threading.Event()
    names = [f"c:{i}" for i in range(30)]
    m = MultiLock(rc, names, watchdog_lease=1.0, on_lost=lambda _: fired.set())
    assert m.acquire()
    time.sleep(1.5)
    assert m.owned()
    assert m.statistics().renewals >= 2
    rc.delete(key("c:17"))
    assert fired.wait(3.0)
    with pytest.raises(LockLostError, match="c:17"):
        m.release()
    assert cluster_keys_left(rc, names) == 0


async def test_cluster_async_multilock(arc: redis.asyncio.cluster.RedisCluster) -> None:
    names = cluster_names()
    blocker = AsyncLock(arc, "big}3", ttl=10)
    assert await blocker.acquire()
    m = AsyncMultiLock(arc, names, ttl=10)
    assert await m.acquire(blocking=False) is False
    left = [int(await arc.exists(key(n))) for n in names]
    assert sum(left) == 1
    await blocker.release()
    assert await m.acquire(timeout=10)
    assert await m.owned()
    assert await m.locked()
    assert 9.0 < (await m.remaining() or 0) <= 10.0
    assert await AsyncLock(arc, "c:0", ttl=10).acquire(blocking=False) is False
    await m.release()
    assert not await m.locked()
