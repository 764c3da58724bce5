# SPDX-License-Identifier: MIT
"""``MultiRedlock`` / ``AsyncMultiRedlock``: several names, all or nothing, over 5 real
masters (MultiLock's algorithm on each master, Redlock's rules across them)."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest
import redis
import redis.asyncio

from redislock import (
    AsyncMultiRedlock,
    LockConfigError,
    LockLostError,
    MultiLock,
    MultiRedlock,
    QuorumError,
    Redlock,
)
from redislock._core.keys import fence_key
from redislock._core.multi import CHUNK
from redislock.server import RedisProcess

TTL = 10.0
NAMES = ["account:7", "account:9", "order:1"]


def key(name: str) -> str:
    return f"redislock:{{{name}}}"


def holders(admins: list[redis.Redis], name: str) -> list[str | None]:
    """The owner token on each master for ``name`` (None where free)."""
    out: list[str | None] = []
    for a in admins:
        value = a.get(key(name))
        out.append(None if value is None else str(value).split("|")[0])
    return out


def test_all_names_on_every_master_then_released(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lock = MultiRedlock(masters, NAMES, ttl=TTL)
    assert lock.names == tuple(sorted(NAMES))
    assert lock.acquire()
    token = lock.token
    for name in NAMES:
        assert holders(admins, name) == [token] * 5
        assert all(0 < a.pttl(key(name)) <= TTL * 1000 for a in admins)
    assert lock.fencing_token is None
    assert lock.fencing_tokens == dict.fromkeys(sorted(NAMES), 1)
    assert lock.owned()
    assert lock.locked()
    remaining = lock.remaining()
    assert remaining is not None
    assert 0 < remaining < TTL
    lock.release()
    for name in NAMES:
        assert holders(admins, name) == [None] * 5
    assert not lock.locked()


def test_one_busy_name_on_a_majority_blocks_the_whole_set(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    other = Redlock(masters, "order:1", ttl=TTL)
    assert other.acquire()
    lock = MultiRedlock(masters, NAMES, ttl=TTL)
    assert lock.acquire(blocking=False) is False
    for name in ("account:7", "account:9"):  # nothing of ours is left anywhere
        assert holders(admins, name) == [None] * 5
    assert holders(admins, "order:1") == [other.token] * 5
    other.release()
    assert lock.acquire(blocking=False)
    lock.release()


def test_a_minority_busy_on_one_name_still_grants(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    foreign = "f" * 32 + "|host|1|1"
    for a in admins[:2]:
        a.set(key("account:9"), foreign, px=60_000)
    lock = MultiRedlock(masters, NAMES, ttl=TTL)
    assert lock.acquire(blocking=False)
    # The two masters that refused hold nothing of ours (their try gave everything back).
    for a in admins[:2]:
        assert a.get(key("account:9")) == foreign
        assert a.get(key("account:7")) is None
    lock.release()
    for a in admins[:2]:
        assert a.get(key("account:9")) == foreign  # another owner's key is never touched


def test_excludes_multilock_and_redlock_on_a_shared_name(masters: list[redis.Redis]) -> None:
    lock = MultiRedlock(masters, NAMES, ttl=TTL)
    assert lock.acquire()
    assert not Redlock(masters, "account:9", ttl=TTL).acquire(blocking=False)
    assert not MultiLock(masters[0], ["account:7", "zzz"], ttl=TTL).acquire(blocking=False)
    lock.release()


def test_a_blocked_set_is_granted_when_the_holder_releases(masters: list[redis.Redis]) -> None:
    first = MultiRedlock(masters, NAMES, ttl=TTL, retry_delay=0.02)
    second = MultiRedlock(masters, list(reversed(NAMES)), ttl=TTL, retry_delay=0.02)
    assert first.acquire()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(second.acquire(timeout=10)))
    waiter.start()
    first.release()
    waiter.join(15)
    assert got == [True]
    second.release()


def test_fencing_tokens_per_name_increase_and_are_written_back(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    # Unequal counters: the tokens must still exceed every earlier grant's.
    admins[0].set(fence_key(key("account:7")), 100)
    admins[1].set(fence_key(key("account:7")), 40)
    seen: dict[str, list[int]] = {name: [] for name in NAMES}
    for _ in range(4):
        lock = MultiRedlock(masters, NAMES, ttl=TTL)
        assert lock.acquire()
        tokens = lock.fencing_tokens
        assert tokens is not None
        for name, token in tokens.items():
            seen[name].append(token)
            counters = [int(a.get(fence_key(key(name))) or 0) for a in admins]
            assert sum(c >= token for c in counters) >= 3  # a majority has it
        lock.release()
    for values in seen.values():
        assert values == sorted(set(values))  # strictly increasing
    assert seen["account:7"][0] == 101


def test_watchdog_keeps_the_set_and_loss_of_one_name_loses_it(
    masters: list[redis.Redis], admins: list[redis.Redis]
) -> None:
    lost: list[object] = []
    done = threading.Event()

    def on_lost(lock: object) -> None:
        lost.append(lock)
        done.set()

    lock = MultiRedlock(masters, NAMES, watchdog_lease=0.6, on_lost=on_lost)
    assert lock.acquire()
    for a in admins:
        assert a.pttl(key("order:1")) > 0
    # Delete one name on a majority: the next renewal finds the set lost.
    for a in admins[:3]:
        a.delete(key("order:1"))
    assert done.wait(10)
    assert lost == [lock]
    assert lock.lost
    with pytest.raises(LockLostError):
        lock.release()


def test_a_majority_down_raises_quorum_error_and_leaves_nothing(
    servers: list[RedisProcess], admins: list[redis.Redis]
) -> None:
    clients = [redis.Redis(**s.client_kwargs()) for s in servers]
    for server in servers[:3]:
        server.kill(signal.SIGSTOP)
    try:
        lock = MultiRedlock(clients, NAMES, ttl=TTL, node_timeout=0.2)
        with pytest.raises(QuorumError) as info:
            lock.acquire(blocking=False)
        words = [value.split(":")[0] for value in info.value.outcomes.values()]
        assert words.count("late") == 3
        assert words.count("ok") == 2
    finally:
        for server in servers[:3]:
            server.kill(signal.SIGCONT)
    for name in NAMES:  # given back where it was granted
        for a in admins[3:]:
            assert a.get(key(name)) is None
    for c in clients:
        c.close()


def test_more_names_than_a_chunk(masters: list[redis.Redis], admins: list[redis.Redis]) -> None:
    names = [f"n{i:05d}" for i in range(CHUNK + 10)]
    lock = MultiRedlock(masters, names, ttl=TTL)
    assert lock.acquire()
    assert all(a.dbsize() >= 2 * len(names) for a in admins)  # lock + fence per name
    tokens = lock.fencing_tokens
    assert tokens is not None
    assert len(tokens) == len(names)
    lock.release()
    assert all(a.get(key(names[-1])) is None for a in admins)


def test_validation_before_io(masters: list[redis.Redis]) -> None:
    with pytest.raises(LockConfigError):
        MultiRedlock(masters, [], ttl=TTL)
    with pytest.raises(LockConfigError):
        MultiRedlock(masters, "account:7", ttl=TTL)
    with pytest.raises(LockConfigError):
        MultiRedlock(masters[:2], NAMES, ttl=TTL)
    with pytest.raises(LockConfigError):
        MultiRedlock(masters, ["ok", "bad\n"], ttl=TTL)
    with pytest.raises(LockConfigError):
        MultiRedlock(masters, NAMES, ttl=-1)


async def test_async_set_and_cancellation_leaves_nothing(
    amasters: list[redis.asyncio.Redis], admins: list[redis.Redis]
) -> None:
    lock = AsyncMultiRedlock(amasters, NAMES, ttl=TTL)
    async with lock:
        assert lock.fencing_tokens == dict.fromkeys(sorted(NAMES), 1)
        assert await lock.owned()
        blocked = AsyncMultiRedlock(amasters, NAMES, ttl=TTL, retry_delay=0.05)
        task = asyncio.ensure_future(blocked.acquire())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    for name in NAMES:
        assert holders(admins, name) == [None] * 5
