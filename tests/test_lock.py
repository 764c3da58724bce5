# SPDX-License-Identifier: MIT
"""Behaviour of ``Lock`` and ``AsyncLock``: each test runs against both flavours (see
``tests/flavors.py``) and both ``decode_responses`` settings, on a real redis-server."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from redislock import (
    AcquireTimeoutError,
    LockLostError,
    LockUsageError,
    NotOwnedError,
    UnexpectedReplyError,
)
from redislock._core.keys import LockKeys
from redislock._core.lock import process_tag
from tests.flavors import Flavor

pytestmark = pytest.mark.pythons  # dev.py's STAGES: where else it runs


def fence(lock: Any) -> int | None:
    """The fencing token (a function, so mypy does not narrow the property across calls)."""
    token: int | None = lock.fencing_token
    return token


def wait_for(predicate: Any, timeout: float = 5.0) -> float:
    """Poll ``predicate`` until true; return the seconds it took (fail after ``timeout``)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - start


def acquire_in_thread(lock: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Start ``lock.acquire(timeout=20)`` in a thread; the dict gets "ok" and "at" (monotonic)."""
    result: dict[str, Any] = {}

    def wait() -> None:
        result["ok"] = lock.acquire(timeout=20)
        result["at"] = time.monotonic()

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, result


def test_acquire_release_roundtrip(flavor: Flavor) -> None:
    lock = flavor.lock("job", ttl=10)
    assert not lock.locked()
    assert not lock.owned()
    assert lock.remaining() is None
    assert fence(lock) is None
    assert lock.acquire() is True
    assert lock.locked()
    assert lock.owned()
    remaining = lock.remaining()
    assert remaining is not None
    assert 9.0 < remaining <= 10.0
    assert lock.fencing_token == 1
    assert not lock.lost
    assert flavor.admin.pttl(lock.key) > 9000
    lock.release()
    assert not lock.locked()
    assert not lock.owned()
    assert lock.fencing_token is None
    assert flavor.admin.exists(lock.key) == 0


def test_fencing_token_strictly_increases_across_holders(flavor: Flavor) -> None:
    tokens = []
    for i in range(5):
        lock = flavor.lock("fenced", ttl=5)
        assert lock.acquire()
        tokens.append(lock.fencing_token)
        if i % 2:
            lock.release()
        else:  # let it expire instead of releasing: the counter must still grow
            flavor.admin.delete(lock.key)
    assert tokens == [1, 2, 3, 4, 5]
    assert flavor.admin.get(LockKeys.for_name("fenced").fence) == "5"
    assert flavor.admin.exists("redislock:{fenced}:fence") == 0  # no per-name counter


def test_busy_lock_is_not_acquired(flavor: Flavor) -> None:
    holder = flavor.lock("busy", ttl=10)
    assert holder.acquire()
    other = flavor.lock("busy", ttl=10)
    assert other.acquire(blocking=False) is False
    start = time.monotonic()
    assert other.acquire(timeout=0.3) is False
    assert 0.3 <= time.monotonic() - start < 2.0
    assert other.acquire(timeout=0) is False
    assert fence(other) is None
    stats = other.statistics()
    assert stats.failed_acquisitions == 3
    assert stats.acquisitions == 0
    holder.release()
    assert other.acquire(blocking=False) is True
    assert other.fencing_token == 2
    other.release()


def test_waiter_is_woken_by_release_not_by_polling(flavor: Flavor) -> None:
    holder = flavor.lock("wake", ttl=30)
    assert holder.acquire()
    # With a 10 s recheck interval only the wake-up push can hand the lock over quickly.
    waiter = flavor.lock("wake", ttl=30, recheck_interval=10.0)
    thread, result = acquire_in_thread(waiter)
    time.sleep(0.3)  # the waiter is blocked by now
    assert "ok" not in result
    released = time.monotonic()
    holder.release()
    thread.join(10)
    assert result["ok"] is True
    assert result["at"] - released < 10.0 / 4  # a quarter of the re-check: the push did it
    assert waiter.fencing_token == 2
    waiter.release()


def test_waiter_gets_an_expired_lock_within_its_ttl(flavor: Flavor) -> None:
    holder = flavor.lock("expiring", ttl=0.5)
    assert holder.acquire()
    waiter = flavor.lock("expiring", ttl=5, recheck_interval=10.0)
    start = time.monotonic()
    assert waiter.acquire(timeout=5)
    # Nobody released: the waiter slept until the holder's TTL ran out, not 10 s.
    assert time.monotonic() - start < 1.5
    waiter.release()
    with pytest.raises(LockLostError):
        holder.release()


def test_lost_wake_up_costs_at_most_the_recheck_interval(flavor: Flavor) -> None:
    holder = flavor.lock("lost-wake", ttl=30)
    assert holder.acquire()
    waiter = flavor.lock("lost-wake", ttl=30, recheck_interval=2.0)
    thread, result = acquire_in_thread(waiter)
    time.sleep(0.2)
    deleted = time.monotonic()
    flavor.admin.delete(holder.key)  # freed without a release: nobody pushes a wake-up
    thread.join(30)
    assert result["ok"] is True
    # one re-check (and its round trip on a loaded machine), not the holder's 30 s TTL
    assert result["at"] - deleted < 2.0 + 1.0
    waiter.release()


def test_release_errors(flavor: Flavor) -> None:
    lock = flavor.lock("rel", ttl=10)
    with pytest.raises(NotOwnedError) as never:
        lock.release()
    assert not isinstance(never.value, LockLostError)
    assert lock.acquire()
    lock.release()
    with pytest.raises(NotOwnedError):
        lock.release()


def test_release_after_takeover_never_touches_the_new_holder(flavor: Flavor) -> None:
    first = flavor.lock("takeover", ttl=10)
    assert first.acquire()
    flavor.admin.delete(first.key)  # as if it expired
    second = flavor.lock("takeover", ttl=10)
    assert second.acquire()
    with pytest.raises(LockLostError):
        first.release()
    assert first.lost
    assert second.owned()
    with pytest.raises(NotOwnedError):  # the failed release ended this object's hold
        first.extend(5)
    assert second.owned()
    second.release()


def test_extend(flavor: Flavor) -> None:
    lock = flavor.lock("ext", ttl=2)
    assert lock.acquire()
    new_ttl = lock.extend(3)
    assert 4.5 < new_ttl <= 5.0
    assert 4500 < flavor.admin.pttl(lock.key) <= 5000
    assert lock.extend(1, replace=True) == 1.0
    assert flavor.admin.pttl(lock.key) <= 1000
    lock.release()
    with pytest.raises(NotOwnedError):
        lock.extend(1)


def test_extend_of_expired_lock_fails_and_never_resurrects(flavor: Flavor) -> None:
    lock = flavor.lock("resurrect", ttl=0.2)
    assert lock.acquire()
    time.sleep(0.35)
    with pytest.raises(LockLostError):
        lock.extend(10)
    assert flavor.admin.exists(lock.key) == 0
    assert lock.lost
    with pytest.raises(LockLostError):
        lock.release()


def test_acquire_while_held_is_a_usage_error(flavor: Flavor) -> None:
    lock = flavor.lock("twice", ttl=10)
    assert lock.acquire()
    with pytest.raises(LockUsageError):
        lock.acquire(blocking=False)
    assert lock.fencing_token == 1
    lock.release()


def test_context_manager(flavor: Flavor) -> None:
    lock = flavor.lock("ctx", ttl=10)
    with lock as held:
        assert held is lock
        assert lock.owned()
    assert not lock.locked()


def test_context_manager_times_out(flavor: Flavor) -> None:
    holder = flavor.lock("ctx-busy", ttl=10)
    assert holder.acquire()
    waiter = flavor.lock("ctx-busy", ttl=10, timeout=0.2)
    with pytest.raises(AcquireTimeoutError) as err, waiter:
        pytest.fail("must not enter")
    assert isinstance(err.value, TimeoutError)
    assert err.value.name == "ctx-busy"
    assert err.value.waited >= 0.2
    holder.release()


def test_context_manager_reports_loss_at_exit(flavor: Flavor) -> None:
    lock = flavor.lock("ctx-lost", ttl=10)
    with pytest.raises(LockLostError), lock:
        flavor.admin.delete(lock.key)


def test_context_manager_does_not_mask_the_body_error(flavor: Flavor) -> None:
    lock = flavor.lock("ctx-body", ttl=10)

    def body() -> None:
        with lock:
            flavor.admin.delete(lock.key)
            raise KeyError("body")

    with pytest.raises(KeyError) as err:
        body()
    notes = getattr(err.value, "__notes__", [])
    assert any("releasing lock 'ctx-body' also failed" in note for note in notes)


def test_watchdog_keeps_a_short_lease_alive(flavor: Flavor) -> None:
    lock = flavor.lock("watchdog", watchdog_lease=1.0)
    assert lock.acquire()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        assert flavor.admin.pttl(lock.key) > 0
        time.sleep(0.1)
    assert lock.owned()
    assert not lock.lost
    stats = lock.statistics()
    assert stats.renewals >= 12  # every 1/3 s for 5 s
    assert stats.renewal_failures == 0
    lock.release()
    time.sleep(0.5)
    assert flavor.admin.exists(lock.key) == 0
    assert lock.statistics().renewals <= stats.renewals + 1  # renewal stopped with release


def test_on_lost_fires_within_one_renewal_interval(flavor: Flavor) -> None:
    fired: list[float] = []
    lock = flavor.lock(
        "lost", watchdog_lease=10.0, renew_interval=0.5, on_lost=lambda _: fired.append(1.0)
    )
    assert lock.acquire()
    time.sleep(0.2)
    flavor.admin.delete(lock.key)
    took = wait_for(lambda: bool(fired), timeout=10.0)
    # the next renewal found it (every 0.5 s, late on a loaded machine), not the 10 s lease
    assert took <= 0.5 + 1.5
    assert lock.lost
    assert fired == [1.0]
    with pytest.raises(LockLostError):
        lock.release()
    assert lock.lost


def test_on_lost_when_another_holder_took_the_key(flavor: Flavor) -> None:
    fired = threading.Event()
    lock = flavor.lock(
        "stolen", watchdog_lease=3.0, renew_interval=0.3, on_lost=lambda _: fired.set()
    )
    assert lock.acquire()
    flavor.admin.set(lock.key, "f" * 32 + "|elsewhere|1|0", px=10_000)
    assert fired.wait(2.0)
    with pytest.raises(LockLostError):
        lock.extend(1)
    with pytest.raises(LockLostError):
        lock.release()
    assert flavor.admin.get(lock.key) == "f" * 32 + "|elsewhere|1|0"


@pytest.mark.parametrize("call", ["release", "extend"])
@pytest.mark.parametrize("lease", ["watchdog", "ttl"])
def test_a_loss_the_holders_own_call_finds_is_told_once(
    flavor: Flavor, call: str, lease: str, caplog: pytest.LogCaptureFixture
) -> None:
    """However a loss is found - here by the holder's own release() or extend(), before
    any renewal could (the next one is 5 s away, or there is no watchdog) - it sets
    ``lost``, logs one WARNING and calls ``on_lost`` once, before the call raises."""
    fired: list[object] = []
    timing: dict[str, float] = (
        {"watchdog_lease": 15.0, "renew_interval": 5.0} if lease == "watchdog" else {"ttl": 15.0}
    )
    lock = flavor.lock("found", on_lost=fired.append, **timing)
    assert lock.acquire()
    flavor.admin.delete(lock.key)
    found = lock.release if call == "release" else lambda: lock.extend(5)
    with caplog.at_level(logging.WARNING, logger="redislock"), pytest.raises(LockLostError):
        found()
    assert lock.lost
    assert len(fired) == 1  # told once, by the call that found it
    told = [r for r in caplog.records if "lost" in r.getMessage() and r.levelno == logging.WARNING]
    assert len(told) == 1, [r.getMessage() for r in caplog.records]
    if call == "extend":  # found again by the release: told no second time
        with pytest.raises(LockLostError):
            lock.release()
        assert len(fired) == 1


def test_max_lease_caps_a_hung_holder(flavor: Flavor) -> None:
    fired = threading.Event()
    lock = flavor.lock("capped", watchdog_lease=0.6, max_lease=1.2, on_lost=lambda _: fired.set())
    assert lock.acquire()
    start = time.monotonic()
    assert fired.wait(4.0)
    assert 1.1 <= time.monotonic() - start <= 2.2
    assert lock.lost
    # Reported lost no later than the key expires (the local estimate runs out first).
    wait_for(lambda: flavor.admin.exists(lock.key) == 0, timeout=0.3)


def test_detach_and_adopt_hand_off(flavor: Flavor) -> None:
    first = flavor.lock("handoff", ttl=10)
    assert first.acquire()
    fence = first.fencing_token
    token = first.detach()
    assert first.fencing_token is None
    with pytest.raises(NotOwnedError):
        first.release()
    assert flavor.admin.exists(first.key) == 1  # detach does not touch Redis
    second = flavor.lock("handoff", ttl=10)
    second.adopt(token)
    assert second.fencing_token == fence
    assert second.owned()
    assert second.token == token
    second.release()
    third = flavor.lock("handoff", ttl=10)
    with pytest.raises(NotOwnedError):
        third.adopt(token)


def test_adopted_watchdog_lock_is_renewed(flavor: Flavor) -> None:
    first = flavor.lock("adopt-wd", watchdog_lease=1.0)
    assert first.acquire()
    token = first.detach()
    second = flavor.lock("adopt-wd", watchdog_lease=1.0)
    second.adopt(token)
    time.sleep(1.8)
    assert second.owned()
    second.release()


def test_noscript_after_script_flush_is_transparent(flavor: Flavor) -> None:
    lock = flavor.lock("noscript", ttl=10)
    flavor.admin.script_flush()
    assert lock.acquire()
    flavor.admin.script_flush()
    assert lock.extend(1) > 0
    flavor.admin.script_flush()
    assert lock.owned()
    flavor.admin.script_flush()
    lock.release()
    assert not lock.locked()


def test_key_without_ttl_is_reported_not_waited_on(flavor: Flavor) -> None:
    flavor.admin.set("redislock:{squatted}", "x")
    lock = flavor.lock("squatted", ttl=10)
    with pytest.raises(UnexpectedReplyError):
        lock.acquire(timeout=5)


def test_custom_prefix_and_repr_hide_the_token(flavor: Flavor) -> None:
    lock = flavor.lock("app", ttl=10, prefix="myapp:locks:")
    assert lock.key == "myapp:locks:{app}"
    assert lock.acquire()
    assert flavor.admin.exists("myapp:locks:{app}") == 1
    text = repr(lock)
    assert "held" in text
    assert "fence=1" in text
    assert lock.token is not None
    assert lock.token not in text
    lock.release()
    assert "unlocked" in repr(lock)


def test_holder_metadata_is_stored(flavor: Flavor) -> None:
    import os

    lock = flavor.lock("meta", ttl=10)
    assert lock.acquire()
    value = flavor.admin.get(lock.key)
    assert isinstance(value, str)
    token, fence, _host, pid, acquired_ms = value.split("|")
    assert token == lock.token
    tag, dot, secret = token.partition(".")  # "<process tag>.<112 random bits in hex>"
    assert (tag, dot, len(secret)) == (process_tag(), ".", 28)
    assert fence == str(lock.fencing_token)  # the holder's token is stored with its hold
    assert flavor.admin.get(LockKeys.for_name("meta").fence) == str(lock.fencing_token)
    assert int(pid) == os.getpid()
    assert abs(int(acquired_ms) / 1000 - time.time()) < 5
    lock.release()


def test_a_fixed_lease_that_ran_out_counts_as_lost(flavor: Flavor) -> None:
    lock = flavor.lock("fixed-out", ttl=0.3)
    assert lock.acquire()
    assert not lock.lost
    time.sleep(0.45)
    assert lock.lost
    assert not lock.statistics().held
    other = flavor.lock("fixed-out", ttl=5)
    assert other.acquire(blocking=False)
    assert lock.acquire(timeout=0) is False  # no "already held" error: its hold is over
    other.release()


def test_acquire_is_idempotent_for_a_retried_script(flavor: Flavor) -> None:
    """redis-py retries a command whose reply was lost; the retried acquire script must see
    its own hold as success (same fencing token), not as "busy"."""
    from redislock._core.scripts import SCRIPTS

    script = SCRIPTS["lock_acquire"]
    k = LockKeys.for_name("retried")
    keys = (k.lock, k.fence, k.wait)
    args = ("a" * 32, 10_000, "host|1|0", 0)
    first = flavor.admin.eval(script.source, 3, *keys, *args)
    flavor.admin.incr(k.fence)  # another name of the slot takes the next token meanwhile
    again = flavor.admin.eval(script.source, 3, *keys, *args)
    assert first == ["ok", 1]
    assert again == ["ok", 1]  # the holder's own token, not the counter's value
    assert flavor.admin.get(k.fence) == "2"
    other = flavor.admin.eval(script.source, 3, *keys, "b" * 32, 10_000, "host|2|0", 0)
    assert other[0] == "busy"


def test_many_watchdog_leases_survive_script_flushes(flavor: Flavor) -> None:
    """Renewals of many locks go out pipelined; NOSCRIPT inside a batch is recovered."""
    locks = [flavor.lock(f"many{i}", watchdog_lease=0.6) for i in range(40)]
    for lock in locks:
        assert lock.acquire(blocking=False)
    for _ in range(6):
        flavor.admin.script_flush()
        time.sleep(0.3)
    assert not any(lock.lost for lock in locks)
    assert all(flavor.admin.pttl(lock.key) > 0 for lock in locks)
    assert all(lock.statistics().renewals >= 4 for lock in locks)
    for lock in locks:
        lock.release()


def test_max_lease_loss_is_reported_before_the_lease_ends(flavor: Flavor) -> None:
    """The last renewal under max_lease sets a TTL shorter than the interval: the loss must
    be reported by that TTL's end, before another client can take the lock."""
    fired: list[float] = []
    lock = flavor.lock(
        "cap-early",
        watchdog_lease=3.0,
        renew_interval=1.5,
        max_lease=3.2,
        on_lost=lambda _: fired.append(time.monotonic()),
    )
    start = time.monotonic()
    assert lock.acquire()
    other = flavor.lock("cap-early", ttl=5)
    assert other.acquire(timeout=6)
    got_it = time.monotonic()
    assert fired, "the loss was not reported before another client acquired"
    assert fired[0] <= got_it
    assert fired[0] - start <= 3.2 + 0.1
    other.release()


def test_a_capped_lock_in_a_batch_does_not_hide_its_loss(flavor: Flavor) -> None:
    """A max_lease lock renewed in the same batch as healthy ones: its loss fires once and
    the others keep their leases."""
    fired: list[str] = []
    capped = flavor.lock(
        "cap-batch", watchdog_lease=0.6, max_lease=1.0, on_lost=lambda _: fired.append("cap")
    )
    others = [flavor.lock(f"batch{i}", watchdog_lease=0.6) for i in range(5)]
    assert capped.acquire()
    for lock in others:
        assert lock.acquire()
    time.sleep(2.0)
    assert fired == ["cap"]
    assert capped.lost
    assert not any(lock.lost for lock in others)
    assert all(lock.owned() for lock in others)
    for lock in others:
        lock.release()
