# SPDX-License-Identifier: MIT
"""redislock.compat: the drop-ins for redis-py's Lock, against real servers.

redis-py's own lock tests run in tests/redispy/; these check what the drop-in adds or
promises beyond them: wire compatibility with redis-py's Lock in both directions (a fleet
moving process by process), fencing tokens, the watchdog lease for ``timeout=None`` and
its loss reports, redis-py's exceptions for a lost lease, idempotence under the default
client's retries (a lost reply), redis-py's compare for ownership (a token that is a prefix
of the value owns nothing), Redis Cluster, and bad input before any I/O.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import pickle
import threading
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
import redis.cluster
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock as PyLock

import redislock
from redislock._core.compat import LeaseLostError as CoreLeaseLostError
from redislock._core.compat import compat_keys
from redislock._core.keys import LockKeys, key_slot
from redislock._core.scripts import SCRIPTS
from redislock.compat import AsyncRedisPyLock, CompatArgumentError, LeaseLostError, RedisPyLock
from redislock.server import RedisProcess
from redislock.testing import FaultProxy

pytestmark = pytest.mark.dropins  # dev.py's STAGES: where else it runs


@pytest.fixture
def rp(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """A default bytes client on a flushed server (redis-py's tests use bytes too)."""
    client = redis.Redis(**redis_server.client_kwargs())
    client.flushall()
    yield client
    client.close()


# ------------------------------------------------------------------ wire compatibility


def test_redis_py_lock_and_drop_in_exclude_each_other_both_ways(rp: redis.Redis) -> None:
    old = rp.lock("order:1", timeout=10)  # redis-py's own Lock
    new = rp.lock("order:1", timeout=10, lock_class=RedisPyLock)
    assert type(old) is PyLock
    assert old.acquire(blocking=False)
    assert not new.acquire(blocking=False)  # the old process holds it
    old.release()
    assert new.acquire(blocking=False)
    assert rp.get("order:1") == new.local.token  # the same key, the token as its value
    assert not old.acquire(blocking=False)  # the new process holds it
    assert old.locked()
    new.release()
    assert rp.get("order:1") is None
    assert old.acquire(blocking=False)
    old.release()


def test_redis_py_lock_cannot_release_the_drop_in_and_back(rp: redis.Redis) -> None:
    new = RedisPyLock(rp, "job", timeout=10)
    assert new.acquire(blocking=False)
    stale = PyLock(rp, "job", timeout=10)
    stale.local.token = b"another-token"
    with pytest.raises(LockNotOwnedError):
        stale.release()
    assert new.owned()
    new.release()
    old = PyLock(rp, "job", timeout=10)
    assert old.acquire(blocking=False)
    new.local.token = b"another-token"  # a drop-in that believes it holds: it does not
    with pytest.raises(LockNotOwnedError):
        new.release()
    assert old.owned()
    old.release()


async def test_async_drop_in_and_redis_py_lock_exclude_each_other(
    redis_server: RedisProcess,
) -> None:
    ar = redis.asyncio.Redis(**redis_server.client_kwargs())
    await ar.flushall()
    try:
        old = ar.lock("batch", timeout=10)
        new = ar.lock("batch", timeout=10, lock_class=AsyncRedisPyLock)
        assert isinstance(new, AsyncRedisPyLock)
        assert await old.acquire(blocking=False)
        assert not await new.acquire(blocking=False)
        await old.release()
        async with new:
            assert await ar.get("batch") == new.local.token
            assert not await old.acquire(blocking=False)
            assert new.fencing_token is not None
        assert await ar.get("batch") is None
    finally:
        await ar.aclose()


def test_redis_py_lock_is_not_held_by_a_token_prefix(admin: redis.Redis) -> None:
    """redis-py's compare: the value IS the token. A token that is a prefix of the value up
    to a "|" (redislock's own format) owns nothing in redis-py's format."""
    keys = compat_keys("pfx")
    admin.set("pfx", "a|b", px=10_000)
    release = SCRIPTS["compat_release"]
    assert admin.eval(release.source, 3, keys.lock, keys.ring, keys.fence, "a", 0) == "taken"
    extend = SCRIPTS["lock_extend"]
    reply = admin.eval(extend.source, 1, keys.lock, "a", 5000, "set", "", 0, "exact")
    assert reply == ["taken", 0]
    assert admin.get("pfx") == "a|b"


# ------------------------------------------------------------------ what it adds


def test_fencing_tokens_increase_across_holders_of_a_name(rp: redis.Redis) -> None:
    seen = []
    for _ in range(5):
        lock = rp.lock("fenced", timeout=10, lock_class=RedisPyLock)
        with lock:
            assert lock.fencing_token is not None
            seen.append(lock.fencing_token)
        assert lock.fencing_token is None
    assert seen == sorted(seen)
    assert len(set(seen)) == 5


def test_fencing_token_comes_from_the_names_slot_counter(rp: redis.Redis) -> None:
    lock = RedisPyLock(rp, "slotted", timeout=10)
    assert lock.acquire(blocking=False)
    keys = compat_keys("slotted")
    assert key_slot(keys.fence) == key_slot(keys.done) == key_slot("slotted")
    assert key_slot(keys.ring) == key_slot("slotted")
    fence = lock.fencing_token
    assert fence is not None
    assert rp.get(keys.fence) == str(fence).encode()
    lock.release()
    # released: the name left nothing of its own but its acquire's memo, which has a TTL;
    # the slot's counter and release ring (the token's bit set: released by its holder)
    left = {k.decode() if isinstance(k, bytes) else k for k in rp.keys("*")}
    assert left == {keys.fence, keys.ring, keys.done}
    assert 0 < rp.pttl(keys.done) <= 60_000
    assert rp.getbit(keys.ring, fence) == 1


def test_timeout_none_is_a_watchdog_lease_never_a_key_without_ttl(rp: redis.Redis) -> None:
    lock = RedisPyLock(rp, "watched", watchdog_lease=0.6)
    assert lock.acquire(blocking=False)
    try:
        assert 0 < rp.pttl("watched") <= 600
        time.sleep(1.5)  # more than two leases: renewed meanwhile
        assert 0 < rp.pttl("watched") <= 600
        assert not lock.lost
        assert lock.owned()
    finally:
        lock.release()
    assert rp.get("watched") is None


def test_a_stolen_lease_is_reported_once_and_release_raises_redis_py_error(
    rp: redis.Redis,
) -> None:
    lost: list[object] = []
    lock = RedisPyLock(rp, "stolen", watchdog_lease=0.6, on_lost=lost.append)
    assert lock.acquire(blocking=False)
    rp.set("stolen", b"someone-else", px=10_000)
    deadline = time.monotonic() + 3
    while not lost and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lost == [lock]
    assert lock.lost
    with pytest.raises(LeaseLostError) as caught:
        lock.release()
    assert isinstance(caught.value, LockNotOwnedError)  # redis-py's except clauses
    assert isinstance(caught.value, LockError)
    assert isinstance(caught.value, redislock.LockLostError)
    assert caught.value.lock_name == "stolen"
    assert "another holder" in caught.value.reason
    assert rp.get("stolen") == b"someone-else"  # never touched
    assert lost == [lock]  # reported once


def test_lease_lost_error_pickles_with_its_fields() -> None:
    error = CoreLeaseLostError("n", "Cannot release a lock that's no longer owned", "expired")
    again = pickle.loads(pickle.dumps(error))
    assert (again.lock_name, again.reason, str(again)) == ("n", "expired", str(error))


def test_lease_lost_error_has_a_repr_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    """redis-py's errors set their attributes in RedisError.__init__ (redis-py 8: its
    __repr__ reads error_type): the drop-in's error runs that constructor, so repr() and
    logging's %r work, as for every other redis-py error."""
    error = CoreLeaseLostError("n", "Cannot release a lock that's no longer owned", "expired")
    assert "LeaseLostError" in repr(error)
    assert repr(pickle.loads(pickle.dumps(error))) == repr(error)
    with caplog.at_level(logging.ERROR):
        logging.getLogger("app").error("release failed: %r", error)
    assert "LeaseLostError" in caplog.text
    assert str(error) == "Cannot release a lock that's no longer owned: expired"


def test_an_expired_fixed_lease_raises_lease_lost_on_extend_and_reacquire(
    rp: redis.Redis,
) -> None:
    lock = RedisPyLock(rp, "short", timeout=0.2)
    assert lock.acquire(blocking=False)
    time.sleep(0.3)
    with pytest.raises(LeaseLostError):
        lock.extend(1)
    with pytest.raises(LockNotOwnedError):
        lock.reacquire()
    assert rp.get("short") is None  # never re-created


def test_threads_keep_their_own_tokens_and_holds(rp: redis.Redis) -> None:
    lock = RedisPyLock(rp, "threads", timeout=10)
    assert lock.acquire(blocking=False)
    seen: list[object] = []

    def other() -> None:  # thread_local=True: this thread holds nothing
        seen.append(lock.fencing_token)
        seen.append(lock.acquire(blocking=False))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [None, False]
    assert lock.fencing_token is not None
    lock.release()


def test_lock_class_with_redislock_options_through_partial(rp: redis.Redis) -> None:
    """``functools.partial`` carries redislock's own options through ``r.lock()``."""
    lock_class = functools.partial(RedisPyLock, watchdog_lease=5.0, prefix="app:")
    lock = rp.lock("opt", lock_class=lock_class)
    with lock:
        assert 0 < rp.pttl("opt") <= 5000
        assert rp.exists(compat_keys("opt", "app:").fence)


def test_two_holders_with_the_same_chosen_token_still_exclude_each_other(
    rp: redis.Redis,
) -> None:
    """redis-py lets the caller choose the token; a token shared by two objects (or by a
    redis-py Lock) does not make the second a retry of the first."""
    first = RedisPyLock(rp, "shared", timeout=10)
    second = RedisPyLock(rp, "shared", timeout=10)
    assert first.acquire(token="worker")
    assert not second.acquire(token="worker", blocking=False)
    first.release()
    old = PyLock(rp, "shared")  # redis-py, no timeout: a key without TTL
    assert old.acquire(token="worker")
    assert not second.acquire(token="worker", blocking=False)
    assert rp.ttl("shared") == -1  # the drop-in put no TTL on the old process's key
    old.release()


def test_a_release_of_an_expired_hold_is_not_excused_by_an_earlier_one(
    rp: redis.Redis,
) -> None:
    """The done key remembers a release per hold, not per token: a later hold with the
    same token whose lease ran out is reported lost, not released."""
    lock = RedisPyLock(rp, "memo", timeout=10)
    assert lock.acquire(token="worker")
    lock.release()
    assert lock.acquire(token="worker", blocking=False)
    rp.delete("memo")  # its lease is gone
    with pytest.raises(LeaseLostError):
        lock.release()


def test_timeout_zero_is_a_watchdog_lease_that_extend_and_reacquire_refuse(
    rp: redis.Redis,
) -> None:
    lock = RedisPyLock(rp, "zero", timeout=0, watchdog_lease=5)
    assert lock.acquire(blocking=False)
    assert 0 < rp.pttl("zero") <= 5000
    with pytest.raises(LockError, match="no timeout"):
        lock.reacquire()
    with pytest.raises(LockError, match="no timeout"):
        lock.do_extend(5, False)
    assert 4000 < rp.pttl("zero") <= 5000  # not cut short
    lock.release()


def test_a_bad_extend_amount_is_a_lock_error_before_any_io(rp: redis.Redis) -> None:
    lock = RedisPyLock(rp, "amount", timeout=10)
    assert lock.acquire(blocking=False)
    for bad in (0, -1, float("nan")):
        with pytest.raises(CompatArgumentError) as caught:
            lock.extend(bad)
        assert isinstance(caught.value, LockError)
        assert isinstance(caught.value, redislock.LockConfigError)
    assert 9000 < rp.pttl("amount") <= 10_000
    lock.release()


# ------------------------------------------------------------------ the client's retries


def test_a_release_whose_reply_was_lost_is_not_reported_as_not_owned(
    redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """redis-py's default client sends a command again after a lost reply; redis-py's own
    release script then finds nothing and raises LockNotOwnedError. The drop-in's done key
    makes the repeat answer as the first."""
    assert redis_server.socket_path is not None
    for script in SCRIPTS.values():
        admin.script_load(script.source)
    proxy = FaultProxy(redis_server.socket_path).start()
    client = redis.Redis(**proxy.client_kwargs())
    try:
        lock = RedisPyLock(client, "retried", timeout=10)
        assert lock.acquire(blocking=False)
        proxy.set_fault("lose_reply")
        lock.release()  # sent twice by the client: no error
        assert proxy.lost_replies >= 1
        proxy.set_fault("pass")
        assert admin.get("retried") is None
        # acquire with its reply lost: held once, with a TTL and a fencing token
        again = RedisPyLock(client, "retried", timeout=10)
        before = proxy.lost_replies
        proxy.set_fault("lose_reply")
        assert again.acquire(blocking=False)
        proxy.set_fault("pass")
        assert proxy.lost_replies > before
        assert again.fencing_token is not None
        assert 0 < admin.pttl("retried") <= 10_000
        again.release()
    finally:
        client.close()
        proxy.stop()


# ------------------------------------------------------------------ Cluster


def test_drop_in_on_a_cluster(rc: redis.cluster.RedisCluster) -> None:
    lock = rc.lock("orders{7}", timeout=10, lock_class=RedisPyLock)
    old = rc.lock("orders{7}", timeout=10)
    with lock:
        assert lock.fencing_token is not None
        assert not old.acquire(blocking=False)
        assert lock.extend(5)
    assert rc.get("orders{7}") is None


# ------------------------------------------------------------------ bad input, no I/O


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("", {}),
        (123, {}),
        ("x" * 1025, {}),
        (b"\xff", {}),
        ("n", {"timeout": -1}),
        ("n", {"sleep": -0.1}),
        ("n", {"blocking_timeout": "5"}),
        ("n", {"watchdog_lease": 0}),
        ("n", {"prefix": "a{b"}),
    ],
)
def test_bad_arguments_raise_lock_config_error_before_any_io(
    name: object, kwargs: dict[str, object]
) -> None:
    client = redis.Redis(unix_socket_path="/nonexistent")  # never connected
    with pytest.raises(redislock.LockConfigError):
        RedisPyLock(client, name, **kwargs)  # type: ignore[arg-type]
    client.close()


def test_the_wrong_flavour_of_client_is_refused(redis_server: RedisProcess) -> None:
    sync = redis.Redis(**redis_server.client_kwargs())
    asynchronous = redis.asyncio.Redis(**redis_server.client_kwargs())
    with pytest.raises(redislock.LockConfigError, match=r"redis\.asyncio\.Redis"):
        AsyncRedisPyLock(sync, "n")
    with pytest.raises(redislock.LockConfigError, match=r"redis\.Redis"):
        RedisPyLock(asynchronous, "n")
    sync.close()
    asyncio.run(asynchronous.aclose())


def test_keys_of_a_drop_in_never_collide_with_redislock_locks() -> None:
    keys = compat_keys("job")
    ours = LockKeys.for_name("job")
    assert keys.lock == "job"
    assert not {keys.done, keys.wait, keys.wake} & set(ours)
    assert keys.fence == ours.fence  # one slot, one counter: "job" and "redislock:{job}"
    other = compat_keys("a{job}b")  # a hash tag: the counter of the tag's slot
    assert key_slot(other.fence) == key_slot("a{job}b") == key_slot("job")


def test_a_drop_in_on_a_sentinel_client_knows_it_follows_a_master() -> None:
    # No I/O: a Sentinel client's pool asks the sentinels only when it first connects.
    import redis.asyncio.sentinel
    import redis.sentinel

    sentinels = [("127.0.0.1", 1)]
    sync_master = redis.sentinel.Sentinel(sentinels).master_for("m")  # type: ignore[no-untyped-call]
    async_sentinel = redis.asyncio.sentinel.Sentinel(sentinels)  # type: ignore[no-untyped-call]
    async_master = async_sentinel.master_for("m")
    assert RedisPyLock(sync_master, "n")._sentinel is True
    assert AsyncRedisPyLock(async_master, "n")._sentinel is True
    assert RedisPyLock(redis.Redis(), "n")._sentinel is False
    assert AsyncRedisPyLock(redis.asyncio.Redis(), "n")._sentinel is False
