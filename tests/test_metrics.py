# SPDX-License-Identifier: MIT
"""OpenTelemetry metrics (redislock/metrics.py), collected with the SDK's in-memory reader
from the global MeterProvider, on a real server: every instrument, its outcome and kind
attributes, the name attribute off by default and templated on request, and nothing at all
(no import, no error) without opentelemetry."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from opentelemetry import metrics as otel
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import redislock
from redislock import metrics
from redislock.server import RedisProcess
from tests.support import wait_for

Key = tuple[str, frozenset[tuple[str, Any]]]


@pytest.fixture(scope="session")
def reader() -> InMemoryMetricReader:
    """The SDK's in-memory reader on the global MeterProvider (set once per process; a
    meter taken before it was set follows it)."""
    found = InMemoryMetricReader()
    otel.set_meter_provider(MeterProvider(metric_readers=[found]))
    return found


@pytest.fixture
def client(redis_server: RedisProcess, reader: InMemoryMetricReader) -> Iterator[redis.Redis]:
    c = redis.Redis(**redis_server.client_kwargs())
    c.flushall()
    yield c
    c.close()
    metrics.configure(name=False)


def points(reader: InMemoryMetricReader) -> dict[Key, float]:
    """Every redislock data point now: a counter's value, a histogram's count."""
    out: dict[Key, float] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            if sm.scope.name != "redislock":
                continue
            for m in sm.metrics:
                for p in m.data.data_points:
                    value: float = getattr(p, "count", None) or getattr(p, "value", 0) or 0
                    out[(m.name, frozenset((p.attributes or {}).items()))] = float(value)
    return out


def delta(
    before: dict[Key, float], after: dict[Key, float], kind: str | None = "Lock"
) -> dict[Key, float]:
    """What changed, for the series of ``kind`` (None: all): other tests' watchdogs may
    still record in the background."""
    keys = set(before) | set(after)
    changed = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in keys}
    wanted = None if kind is None else ("redislock.kind", kind)
    return {k: v for k, v in changed.items() if v and (wanted is None or wanted in k[1])}


def key(name: str, **attrs: str) -> Key:
    return (name, frozenset(attrs.items()))


LOCK = {"redislock.kind": "Lock"}


def test_acquire_outcomes_hold_duration_and_waiters(
    client: redis.Redis, reader: InMemoryMetricReader
) -> None:
    assert metrics.enabled()
    before = points(reader)
    holder = redislock.Lock(client, "order:1", ttl=10)
    assert holder.acquire(blocking=False)
    assert not redislock.Lock(client, "order:1", ttl=10).acquire(blocking=False)
    assert not redislock.Lock(client, "order:1", ttl=10).acquire(timeout=0.2)
    holder.release()
    dead = redis.Redis(unix_socket_path="/nonexistent/redis.sock")
    with pytest.raises(redis.ConnectionError):
        redislock.Lock(dead, "order:1", ttl=10).acquire(blocking=False)
    dead.close()
    got = delta(before, points(reader))
    assert got == {
        key("redislock.acquires", **LOCK, outcome="acquired"): 1,
        key("redislock.acquires", **LOCK, outcome="busy"): 1,
        key("redislock.acquires", **LOCK, outcome="timeout"): 1,
        key("redislock.acquires", **LOCK, outcome="error"): 1,
        key("redislock.acquire.duration", **LOCK, outcome="acquired"): 1,
        key("redislock.acquire.duration", **LOCK, outcome="busy"): 1,
        key("redislock.acquire.duration", **LOCK, outcome="timeout"): 1,
        key("redislock.acquire.duration", **LOCK, outcome="error"): 1,
        key("redislock.hold.duration", **LOCK): 1,
    }  # the waiter counted +1 then -1: no change left in the up-down counter


async def test_asyncio_kinds_count_as_their_sync_name(
    redis_server: RedisProcess, reader: InMemoryMetricReader
) -> None:
    ar = redis.asyncio.Redis(**redis_server.client_kwargs())
    await ar.flushall()
    before = points(reader)
    try:
        sem = redislock.AsyncSemaphore(ar, "gpu", permits=1, ttl=10)
        async with sem.acquire(timeout=1):
            pass
        async with redislock.AsyncFairLock(ar, "fair", ttl=10):
            pass
    finally:
        await ar.aclose()
    got = delta(before, points(reader), kind=None)
    assert got[key("redislock.acquires", **{"redislock.kind": "Semaphore"}, outcome="acquired")]
    assert got[key("redislock.acquires", **{"redislock.kind": "FairLock"}, outcome="acquired")]
    assert got[key("redislock.hold.duration", **{"redislock.kind": "Semaphore"})] == 1


def test_an_election_counts_as_election(client: redis.Redis, reader: InMemoryMetricReader) -> None:
    """An Election's hold is counted under its own kind (it was "Lock" while the list of
    kinds the metrics name was kept by hand and Election was missing from it)."""
    before = points(reader)
    election = redislock.Election(client, "leader", ttl=10)
    with election.campaign(timeout=5):
        pass
    got = delta(before, points(reader), kind="Election")
    elected = {"redislock.kind": "Election"}
    assert got[key("redislock.acquires", **elected, outcome="acquired")] == 1
    assert got[key("redislock.hold.duration", **elected)] == 1
    assert not delta(before, points(reader), kind="Lock")


def test_a_barrier_party_counts_as_kind_barrier(
    client: redis.Redis, reader: InMemoryMetricReader
) -> None:
    """A party's membership is a lease: its join is an acquire, its leave ends the hold."""
    before = points(reader)
    party = redislock.Barrier(client, "shards", 1, lease=10)
    assert party.enter(5)
    assert party.leave(5)
    assert not redislock.Barrier(client, "shards", 2, lease=10).enter(0.1)  # joins, then leaves
    got = delta(before, points(reader), kind="Barrier")
    barrier = {"redislock.kind": "Barrier"}
    assert got == {
        key("redislock.acquires", **barrier, outcome="acquired"): 2,
        key("redislock.acquire.duration", **barrier, outcome="acquired"): 2,
        key("redislock.hold.duration", **barrier): 2,
    }


def test_lost_lease_and_renewals_are_counted_once(
    client: redis.Redis, reader: InMemoryMetricReader
) -> None:
    before = points(reader)
    lost: list[object] = []
    lock = redislock.Lock(client, "stolen", watchdog_lease=0.6, on_lost=lost.append)
    assert lock.acquire(blocking=False)
    time.sleep(0.5)  # at least one renewal
    client.set(lock.key, "someone-else", px=10_000)
    deadline = time.monotonic() + 3
    while not lost and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lost == [lock]
    with pytest.raises(redislock.LockLostError):
        lock.release()
    got = delta(before, points(reader))
    assert got[key("redislock.lost", **LOCK)] == 1  # the watchdog's report, not the release's
    assert got[key("redislock.hold.duration", **LOCK)] == 1
    assert got[key("redislock.renewals", **LOCK, outcome="ok")] >= 1
    assert got[key("redislock.renewals", **LOCK, outcome="failed")] == 1


def test_waiters_counts_calls_waiting_now(
    client: redis.Redis, reader: InMemoryMetricReader
) -> None:
    import threading

    holder = redislock.Lock(client, "busy", ttl=10)
    assert holder.acquire()
    before = points(reader)
    result: list[bool] = []
    waiter = threading.Thread(
        target=lambda: result.append(redislock.Lock(client, "busy", ttl=10).acquire(timeout=5))
    )
    waiter.start()
    # the waiter counts once it is in its wait (a loaded machine starts the thread late)
    wait_for(lambda: delta(before, points(reader)) == {key("redislock.waiters", **LOCK): 1})
    holder.release()
    waiter.join()
    assert result == [True]
    assert key("redislock.waiters", **LOCK) not in delta(before, points(reader))


def test_the_name_attribute_is_off_by_default_and_templated_on_request(
    client: redis.Redis, reader: InMemoryMetricReader
) -> None:
    metrics.configure(name=lambda n: n.split(":")[0])
    before = points(reader)
    for order in ("order:1", "order:2"):
        with redislock.Lock(client, order, ttl=10):
            pass
    got = delta(before, points(reader))
    attrs = {"redislock.kind": "Lock", "redislock.name": "order", "outcome": "acquired"}
    assert got[("redislock.acquires", frozenset(attrs.items()))] == 2
    with pytest.raises(TypeError):
        metrics.configure(name="yes")  # type: ignore[arg-type]


def test_without_opentelemetry_nothing_is_imported_and_locks_work(
    redis_server: RedisProcess,
) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["opentelemetry"] = None  # as if not installed
        import redis, redislock
        from redislock import metrics
        r = redis.Redis(unix_socket_path={str(redis_server.socket_path)!r})
        with redislock.Lock(r, "plain", ttl=10):
            pass
        assert not metrics.enabled()
        assert not any(m.startswith("opentelemetry.") for m in sys.modules)
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.stdout.strip() == "ok", out.stderr
