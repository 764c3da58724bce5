# SPDX-License-Identifier: MIT
"""A reply lost after the command took effect, with redis-py's DEFAULT clients (which send
the command again on a new connection): no false LockLostError or NotOwnedError, no time
added twice, no double effect, and a local lease estimate never beyond the key's TTL.

A :class:`~redislock.testing.FaultProxy` sits in front of the suite's server; its one-shot
``lose_reply`` fault is set right before the call under test. Lock and MultiLock, sync and
asyncio (through a loop thread); the watchdog's "max" renewal too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock import AsyncLock, AsyncMultiLock, Lock, LockLostError, MultiLock
from redislock._core.keys import LockKeys
from redislock._core.lock import DONE_MS
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from redislock.testing import FaultProxy
from tests.flavors import AsyncFacade, LoopThread

NAMES = ("r1", "r2", "r3")
KINDS = ["lock", "multi"]


class Kit:
    """A default client (sync or asyncio) through a fault proxy, and lock factories."""

    def __init__(
        self, flavor: str, kind: str, proxy: FaultProxy, admin: redis.Redis, lt: LoopThread
    ) -> None:
        self.flavor, self.kind, self.proxy, self.admin, self.lt = flavor, kind, proxy, admin, lt
        if flavor == "sync":
            self.client: Any = redis.Redis(**proxy.client_kwargs())  # redis-py's defaults
            self.client.ping()  # connected: the next reply is the command's
        else:

            async def connect() -> redis.asyncio.Redis:
                client = redis.asyncio.Redis(**proxy.client_kwargs())
                await client.ping()
                return client

            self.client = lt.run(connect())

    def close(self) -> None:
        if self.flavor == "sync":
            self.client.close()
        else:
            self.lt.run(self.client.aclose())

    def lock(self, **options: Any) -> Any:
        """A Lock on "r1", or a MultiLock on NAMES, of the kit's flavour."""
        if self.flavor == "sync":
            if self.kind == "lock":
                return Lock(self.client, NAMES[0], **options)
            return MultiLock(self.client, NAMES, **options)
        if self.kind == "lock":
            return AsyncFacade(AsyncLock(self.client, NAMES[0], **options), self.lt)
        return AsyncFacade(AsyncMultiLock(self.client, NAMES, **options), self.lt)

    @property
    def names(self) -> tuple[str, ...]:
        return NAMES[:1] if self.kind == "lock" else NAMES

    def pttls(self) -> list[int]:
        """The PTTL of every lock key, in milliseconds."""
        return [self.admin.pttl(LockKeys.for_name(n).lock) for n in self.names]

    def lose_next_reply(self) -> None:
        self.proxy.set_fault("lose_reply")

    def lost(self) -> int:
        return self.proxy.lost_replies


@pytest.fixture
def proxy(redis_server: RedisProcess) -> Iterator[FaultProxy]:
    assert redis_server.socket_path is not None
    with FaultProxy(redis_server.socket_path) as fp:
        yield fp


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture(params=KINDS)
def kit(
    request: pytest.FixtureRequest,
    flavor: str,
    proxy: FaultProxy,
    admin: redis.Redis,
    loop_thread: LoopThread,
) -> Iterator[Kit]:
    for script in SCRIPTS.values():  # EVALSHA finds them: the lost reply is the script's
        admin.script_load(script.source)
    made = Kit(flavor, request.param, proxy, admin, loop_thread)
    yield made
    made.close()


def estimate_within_key(kit: Kit, lock: Any) -> None:
    """The local lease estimate ends no later than the key with the least TTL."""
    before = time.monotonic()
    estimate = lock.statistics().lease_remaining
    least = min(kit.pttls()) / 1000.0
    after = time.monotonic()
    assert estimate is not None
    # the key's end (as of `after`) is at least the estimate's end (as of `before`)
    assert before + estimate <= after + least + 0.002, (estimate, least)


# ------------------------------------------------------------------ acquire


def test_acquire_whose_reply_is_lost_holds_once_with_a_fresh_ttl(kit: Kit) -> None:
    lock = kit.lock(ttl=10)
    kit.lose_next_reply()
    assert lock.acquire(blocking=False)
    assert kit.lost() == 1
    assert lock.owned()
    # one fencing token per name: the retry found its own hold, nothing was taken twice
    for name in kit.names:
        assert kit.admin.get(LockKeys.for_name(name).fence) == "1"
    assert all(9000 < ttl <= 10000 for ttl in kit.pttls())
    estimate_within_key(kit, lock)
    lock.release()
    assert kit.admin.exists(*(LockKeys.for_name(n).lock for n in kit.names)) == 0


def test_the_lease_estimate_starts_before_the_first_send(kit: Kit) -> None:
    lock = kit.lock(ttl=10)
    kit.proxy.set_fault("delay", delay=0.3)  # every chunk, both ways, waits 0.3 s
    try:
        assert lock.acquire(blocking=False)
    finally:
        kit.proxy.heal()
    remaining = lock.statistics().lease_remaining
    assert remaining is not None
    assert remaining <= 10 - 0.3  # the reply took >= 0.3 s: counted against the lease
    estimate_within_key(kit, lock)
    lock.release()


# ------------------------------------------------------------------ release


def test_release_whose_reply_is_lost_is_a_normal_release(kit: Kit) -> None:
    lock = kit.lock(ttl=10)
    assert lock.acquire(blocking=False)
    kit.lose_next_reply()
    fence = lock.fencing_token
    lock.release()  # no LockLostError: the first one worked, the retry says so
    assert kit.lost() == 1
    assert not lock.statistics().held
    assert not lock.statistics().lost
    assert kit.admin.exists(*(LockKeys.for_name(n).lock for n in kit.names)) == 0
    if kit.kind == "lock":  # the retry found the token's bit in the slot's release ring
        assert kit.admin.getbit(LockKeys.for_name(NAMES[0]).ring, fence) == 1
        assert kit.admin.exists(LockKeys.for_name(NAMES[0]).done) == 0  # no key of the name
    else:  # MultiLock: the memo of the release lives a short while, then costs nothing
        done = [kit.admin.pttl(LockKeys.for_name(n).done) for n in kit.names]
        assert any(0 < ttl <= DONE_MS for ttl in done)
        assert all(ttl == -2 or 0 < ttl <= DONE_MS for ttl in done)
    other = kit.lock(ttl=10)  # free for the next holder
    assert other.acquire(blocking=False)
    other.release()


def test_release_of_a_lost_hold_still_reports_the_loss(kit: Kit) -> None:
    lock = kit.lock(ttl=10)
    assert lock.acquire(blocking=False)
    kit.admin.delete(*(LockKeys.for_name(n).lock for n in kit.names))  # the lease is gone
    with pytest.raises(LockLostError):
        lock.release()


# ------------------------------------------------------------------ extend


def test_extend_add_whose_reply_is_lost_adds_the_time_once(kit: Kit) -> None:
    lock = kit.lock(ttl=10)
    assert lock.acquire(blocking=False)
    kit.lose_next_reply()
    new = lock.extend(20)
    assert kit.lost() == 1
    ttls = kit.pttls()
    assert all(28_500 < ttl <= 30_000 for ttl in ttls), ttls  # 10 + 20, not 10 + 20 + 20
    assert new <= 30.0
    estimate_within_key(kit, lock)
    # a second extend is a new call: it adds again
    assert lock.extend(5) > 30.0 - 1.0
    assert all(33_500 < ttl <= 35_000 for ttl in kit.pttls())
    lock.release()


def test_extend_set_whose_reply_is_lost_sets_the_ttl(kit: Kit) -> None:
    lock = kit.lock(ttl=10)
    assert lock.acquire(blocking=False)
    kit.lose_next_reply()
    new = lock.extend(20, replace=True)
    assert kit.lost() == 1
    assert all(19_000 < ttl <= 20_000 for ttl in kit.pttls())
    assert new <= 20.0
    estimate_within_key(kit, lock)
    lock.release()


def test_watchdog_renewal_whose_reply_is_lost_keeps_the_hold(kit: Kit) -> None:
    lost: list[Any] = []
    lock = kit.lock(watchdog_lease=1.5, renew_interval=0.3, on_lost=lost.append)
    assert lock.acquire(blocking=False)
    kit.lose_next_reply()  # the next renewal ("max" mode) loses its reply
    deadline = time.monotonic() + 5
    while kit.lost() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert kit.lost() == 1
    time.sleep(0.7)  # more renewals after the retried one
    assert lock.owned()
    assert not lost
    assert not lock.statistics().lost
    assert all(0 < ttl <= 1500 for ttl in kit.pttls())  # "max" never added time
    estimate_within_key(kit, lock)
    lock.release()


# ------------------------------------------------------------------ owned, remaining


def test_owned_and_remaining_whose_reply_is_lost(kit: Kit) -> None:
    lock = kit.lock(ttl=10)
    assert lock.acquire(blocking=False)
    kit.lose_next_reply()
    assert lock.owned()
    kit.lose_next_reply()
    remaining = lock.remaining()
    assert kit.lost() == 2
    assert remaining is not None
    assert 8.0 < remaining <= 10.0
    lock.release()
    kit.lose_next_reply()
    assert not lock.owned()  # nothing held: no round trip, so nothing is lost
    assert kit.lost() == 2
    kit.proxy.heal()
