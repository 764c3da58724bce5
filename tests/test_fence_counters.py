# SPDX-License-Identifier: MIT
"""Fencing counters per hash slot, on real servers: tokens strictly increase per name across
holders, kinds and the names that share a slot's counter; across a restart with AOF; on a
Cluster. A released name leaves no key of its own behind once the TTLs of its short-lived
keys have run out.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster
from redis.crc import key_slot

import redislock
from redislock import FairLock, Lock, MultiLock, ReadWriteLock, RLock, Semaphore
from redislock._core.keys import FENCE_SUFFIX, LockKeys
from redislock._core.lock import DONE_MS
from redislock.server import RedisProcess
from tests.cluster import LocalCluster


def slot_of(name: str) -> int:
    return key_slot(LockKeys.for_name(name).lock.encode())


def names_in_one_slot(count: int, base: str = "order") -> list[str]:
    """``base`` and ``count - 1`` more names with other hash tags in ``base``'s slot (so
    they share its counter without sharing its hash tag)."""
    target = slot_of(base)
    found = [base]
    i = 0
    while len(found) < count:
        name = f"{base}-{i}"
        if slot_of(name) == target:
            found.append(name)
        i += 1
    return found


def take(kind: str, client: Any, name: str) -> int:
    """Acquire ``name`` as ``kind`` once, release it, and return the fencing token it got."""
    if kind == "lock":
        lock = Lock(client, name, ttl=10)
        assert lock.acquire(timeout=5)
        token = lock.fencing_token
        lock.release()
    elif kind == "rlock":
        rlock = RLock(client, name, ttl=10)
        assert rlock.acquire(timeout=5)
        token = rlock.fencing_token
        rlock.release()
    elif kind == "read":
        rw = ReadWriteLock(client, name, ttl=10)
        with rw.read() as reader:
            token = reader.fencing_token
    elif kind == "fair":
        fair = FairLock(client, name, ttl=10)
        assert fair.acquire(timeout=5)
        token = fair.fencing_token
        fair.release()
    elif kind == "permit":
        with Semaphore(client, name, permits=2, ttl=10).acquire(timeout=5) as permit:
            token = permit.fencing_token
    else:
        raise AssertionError(kind)
    assert isinstance(token, int)
    return token


KINDS = ("lock", "rlock", "read", "fair", "permit")


@pytest.fixture
def client(admin: redis.Redis, redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """A default redis-py client on the flushed suite server."""
    c = redis.Redis(**redis_server.client_kwargs())
    yield c
    c.close()


def fence_keys(admin: redis.Redis) -> list[str]:
    return sorted(str(k) for k in admin.scan_iter(match="*"))


# ------------------------------------------------------------------ monotonicity


def test_tokens_increase_per_name_across_holders_kinds_and_names_of_one_slot(
    admin: redis.Redis, client: redis.Redis
) -> None:
    """Names of one slot, each locked in turn by every kind and by a MultiLock, draw from
    one counter: every token is new, and per name they strictly increase."""
    names = names_in_one_slot(6)
    tokens: dict[str, list[int]] = defaultdict(list)
    issued: list[int] = []
    for round_ in range(3):
        for i, name in enumerate(names):
            kind = KINDS[(i + round_) % len(KINDS)]
            token = take(kind, client, name)  # a name may change kind once released
            tokens[name].append(token)
            issued.append(token)
        multi = MultiLock(client, names[:3], ttl=10)
        assert multi.acquire(timeout=5)
        assert multi.fencing_tokens is not None
        for name, token in multi.fencing_tokens.items():
            tokens[name].append(token)
            issued.append(token)
        multi.release()
    assert issued == sorted(issued)
    assert len(set(issued)) == len(issued)  # one counter: never the same token twice
    for name, seq in tokens.items():
        assert all(a < b for a, b in itertools.pairwise(seq)), (name, seq)
    # One key is left: the slot's counter, at the last token issued.
    assert {k for k in fence_keys(admin) if k.endswith(FENCE_SUFFIX)} == {
        LockKeys.for_name(names[0]).fence
    }
    assert admin.get(LockKeys.for_name(names[0]).fence) == str(issued[-1])


def test_a_retried_acquire_answers_the_holders_own_token(
    admin: redis.Redis, client: redis.Redis
) -> None:
    """While a holder holds, other names of its slot move the counter on; the holder's
    token (read back by owned()/adopt(), and by a lost-reply retry in
    test_lost_replies.py) is still its own."""
    a, b = names_in_one_slot(2, "retry")
    holder = Lock(client, a, ttl=10)
    assert holder.acquire()
    mine = holder.fencing_token
    assert mine is not None
    assert take("lock", client, b) == mine + 1
    token = holder.detach()
    again = Lock(client, a, ttl=10)
    again.adopt(token)
    assert again.fencing_token == mine
    info = redislock.inspect(client, a)
    assert info.holders[0].fencing_token == mine
    assert info.fencing_counter == mine + 1  # the slot's counter, shared with b
    again.release()


# ------------------------------------------------------------------ bounded memory


def test_released_names_leave_only_slot_counters(short_tmp: Path) -> None:
    """Many names of every kind, each locked once and released: once the short-lived keys'
    TTLs (at most the 60 s done key) have run out, Redis holds only per-slot keys: a counter
    per slot used, and a release ring per slot where a Lock or FairLock was released. The
    server's clock is moved 2 minutes on instead of waiting."""
    directory = short_tmp / "fence-ttl"
    with RedisProcess(directory, name="ttl", clock_file=directory / "offset") as proc:
        c = redis.Redis(**proc.client_kwargs(), decode_responses=True)
        # 300 names spread over the slots, 100 in one slot ("grp}<i>": hash tag "grp")
        names = [f"n{i}" for i in range(300)] + [f"grp}}{i}" for i in range(100)]
        rings = set()
        for i, name in enumerate(names):
            kind = KINDS[i % len(KINDS)]
            take(kind, c, name)
            if kind in ("lock", "fair"):
                rings.add(LockKeys.for_name(name).ring)
        multi = MultiLock(c, [f"m{i}" for i in range(50)], ttl=10)
        assert multi.acquire()
        multi.release()
        names += [f"m{i}" for i in range(50)]
        counters = {LockKeys.for_name(n).fence for n in names}
        assert len(counters) < len(names)
        slotted = counters | rings
        keys = [str(k) for k in c.keys("*")]
        assert slotted <= set(keys)
        assert all(0 < c.pttl(k) <= DONE_MS for k in set(keys) - slotted)  # all will expire
        proc.set_clock_offset(2 * DONE_MS / 1000)
        deadline = time.monotonic() + 20
        while c.dbsize() != len(slotted):  # the server's active expiry reclaims them
            assert time.monotonic() < deadline, (c.dbsize(), len(slotted))
            time.sleep(0.1)
        assert set(c.keys("*")) == slotted
        assert all(c.strlen(k) <= 8192 // 8 for k in rings)  # at most 1 KiB each
        c.close()


# ------------------------------------------------------------------ restarts with AOF


def test_tokens_keep_increasing_across_a_restart_with_aof(short_tmp: Path) -> None:
    directory = short_tmp / "fence-aof"
    args = ["--appendonly", "yes", "--appendfsync", "always"]
    with RedisProcess(directory, name="aof", args=args) as proc:
        names = names_in_one_slot(3, "aof")
        before: dict[str, int] = {}
        c = redis.Redis(**proc.client_kwargs())
        for name in names:
            before[name] = take("lock", c, name)
        c.close()
        proc.kill()  # SIGKILL: only what the AOF has survives
        proc.start()
        c = redis.Redis(**proc.client_kwargs())
        for name in names:
            assert take("lock", c, name) > max(before.values())
        c.close()


# ------------------------------------------------------------------ Cluster


def test_cluster_tokens_increase_per_name_and_counters_live_in_each_slot(
    cluster: LocalCluster, rc: redis.cluster.RedisCluster
) -> None:
    """On a Cluster, a name's counter is in the name's slot (so each script runs on one
    node), names with other hash tags in that slot share it, and each master keeps the
    counters of its slots only."""
    names = names_in_one_slot(3, "cl") + [f"other-{i}" for i in range(20)]
    seen: dict[str, list[int]] = defaultdict(list)
    for round_ in range(2):
        for i, name in enumerate(names):
            seen[name].append(take(KINDS[(i + round_) % len(KINDS)], rc, name))
    for name, seq in seen.items():
        assert seq[0] < seq[1], (name, seq)
    counters = 0
    for node in cluster.masters():
        slots = node.view()[node.id].slots
        for key in node.admin.scan_iter(match=f"*{FENCE_SUFFIX}"):
            assert key_slot(str(key).encode()) in slots
            counters += 1
    assert counters == len({slot_of(n) for n in names})
    multi = MultiLock(rc, [*names[:3], "other-0", "other-1"], ttl=10)
    assert multi.acquire(timeout=5)
    assert multi.fencing_tokens is not None
    for name, token in multi.fencing_tokens.items():
        assert token > seen[name][-1]
    multi.release()
