# SPDX-License-Identifier: MIT
"""``LongLeaseWarning``: a lease or TTL over an hour is flagged (milliseconds meant?).

``ttl=5000`` is an 83-minute lease in redislock (seconds) and 5 s in redis-py's ``px=`` or
Redisson's ``leaseTime`` habit. The value is used as given, with a warning that points at
the caller's line; an hour or less, and durations that are not leases (a ``Once`` period,
a wait ``timeout``), never warn.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

import redislock
from redislock import (
    AsyncLock,
    Election,
    FairLock,
    Lock,
    LongLeaseWarning,
    MultiLock,
    Once,
    ReadWriteLock,
    RLock,
    Semaphore,
)
from redislock.compat import RedisPyLock
from redislock.errors import RedisLockError
from redislock.server import RedisProcess

MAKERS: dict[str, Callable[[redis.Redis, dict[str, Any]], object]] = {
    "Lock": lambda c, kw: Lock(c, "job", **kw),
    "RLock": lambda c, kw: RLock(c, "job", **kw),
    "FairLock": lambda c, kw: FairLock(c, "job", **kw),
    "ReadWriteLock": lambda c, kw: ReadWriteLock(c, "job", **kw),
    "Semaphore": lambda c, kw: Semaphore(c, "job", 3, **kw),
    "MultiLock": lambda c, kw: MultiLock(c, ["a", "b"], **kw),
    "Election": lambda c, kw: Election(c, "job", **kw),
}


def test_the_warning_is_public_and_not_an_error() -> None:
    assert redislock.LongLeaseWarning is LongLeaseWarning
    assert issubclass(LongLeaseWarning, UserWarning)
    assert not issubclass(LongLeaseWarning, RedisLockError)  # the value is used, not refused


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_every_kind_warns_at_the_callers_line(kind: str, admin: redis.Redis) -> None:
    with pytest.warns(LongLeaseWarning) as caught:
        MAKERS[kind](admin, {"ttl": 5000})
    assert {str(w.message) for w in caught} == {
        "ttl=5000 is a lease of 1.4 hours: redislock takes seconds, so if milliseconds were "
        "meant, pass 5. To mean it and silence this: "
        "warnings.filterwarnings('ignore', category=redislock.LongLeaseWarning)"
    }
    assert {w.filename for w in caught} == {__file__}  # the user's line, not redislock's


def test_watchdog_lease_and_redlock_and_asyncio_warn(
    admin: redis.Redis, redis_server: RedisProcess
) -> None:
    with pytest.warns(LongLeaseWarning, match=r"^watchdog_lease=7200 is a lease of 2\.0 hours"):
        Lock(admin, "job", watchdog_lease=7200)
    masters = [redis.Redis(**redis_server.client_kwargs(), db=n) for n in range(3)]
    with pytest.warns(LongLeaseWarning, match=r"^ttl=4000\.5 "):
        redislock.Redlock(masters, "job", ttl=4000.5)
    aclient = redis.asyncio.Redis(**redis_server.client_kwargs())
    with pytest.warns(LongLeaseWarning, match=r"^ttl=86400 is a lease of 24\.0 hours"):
        AsyncLock(aclient, "job", ttl=86400)
    for client in masters:
        client.close()


def test_an_hour_or_less_and_durations_that_are_not_leases_do_not_warn(
    admin: redis.Redis,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        for kind in MAKERS:
            MAKERS[kind](admin, {"ttl": 3600})
            MAKERS[kind](admin, {})  # the default watchdog lease
        Lock(admin, "job", timeout=86400, max_lease=7 * 86400)  # a wait and a cap, no lease
        Once(admin, "daily", period=86400)  # a period, not a lease


def test_each_construction_warns_although_the_options_are_cached(admin: redis.Redis) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            Lock(admin, "job", ttl=5000)  # the second and third reuse the cached options
    assert [w.category for w in caught] == [LongLeaseWarning] * 3


def test_filtered_out_it_is_silent_and_the_lease_is_used_as_given(admin: redis.Redis) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=LongLeaseWarning)
        lock = Lock(admin, "job", ttl=5000)
    with lock:
        left = admin.pttl("redislock:{job}")
        assert 4_990_000 < left <= 5_000_000  # seconds, as documented: not 5 s


def test_extend_by_more_than_an_hour_warns(admin: redis.Redis) -> None:
    lock = Lock(admin, "job", ttl=60)
    with lock:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lock.extend(60)
            lock.extend(3600, replace=True)
        with pytest.warns(LongLeaseWarning, match=r"^seconds=5000 ") as caught:
            lock.extend(5000, replace=True)
        assert caught[0].filename == __file__
        assert admin.pttl("redislock:{job}") > 4_990_000  # and it was done
    compat = RedisPyLock(admin, "drop-in", timeout=60)
    assert compat.acquire()
    with pytest.warns(LongLeaseWarning, match=r"^additional_time=7200 "):
        compat.extend(7200)
    compat.release()
