# SPDX-License-Identifier: MIT
"""redislock.testing.proxy.FaultProxy on a real redis-server: each fault, counters, lifecycle."""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock.server import RedisProcess
from redislock.testing.proxy import FAULT_KINDS, FaultProxy, ProxyLoop

TIMEOUT = 0.3  # seconds: the socket timeout of clients that go through the proxy


def connect(proxy: FaultProxy, timeout: float = TIMEOUT) -> redis.Redis:
    """A decoded client through ``proxy`` that neither retries nor waits long."""
    return redis.Redis(
        **proxy.client_kwargs(),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
    )


def last_up(proxy: FaultProxy) -> float | None:
    """``proxy.last_upstream``, read through a call so mypy does not keep an old narrowing."""
    return proxy.last_upstream


def running(thing: FaultProxy | ProxyLoop) -> bool:
    return thing.running


def wait_until(predicate: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def proxy(redis_server: RedisProcess) -> Iterator[FaultProxy]:
    assert redis_server.socket_path is not None
    with FaultProxy(redis_server.socket_path) as fp:
        yield fp


@pytest.fixture
def client(proxy: FaultProxy) -> Iterator[redis.Redis]:
    c = connect(proxy)
    yield c
    c.close()


def test_pass_forwards_both_ways(
    proxy: FaultProxy, client: redis.Redis, admin: redis.Redis
) -> None:
    assert proxy.fault == "pass"
    assert proxy.delay == 0.0
    assert proxy.address == ("127.0.0.1", proxy.port)
    assert proxy.client_kwargs() == {"host": "127.0.0.1", "port": proxy.port}
    assert last_up(proxy) is None
    assert client.ping() is True
    assert client.set("k", "v") is True
    assert admin.get("k") == "v"
    assert client.get("k") == "v"
    assert proxy.connections == 1
    assert proxy.active == 1
    assert proxy.bytes_up > 0
    assert proxy.bytes_down > 0
    assert proxy.dropped_replies == 0
    assert proxy.last_upstream is not None
    assert proxy.last_upstream <= time.monotonic()


def test_tcp_upstream(spawn_server: Callable[..., RedisProcess]) -> None:
    server = spawn_server(unix_socket=False)
    assert server.port is not None
    with FaultProxy(("127.0.0.1", server.port)) as fp:
        assert fp.upstream == ("127.0.0.1", server.port)
        c = connect(fp)
        assert c.ping() is True
        fp.set_fault("reset")
        with pytest.raises(redis.ConnectionError):
            c.ping()
        fp.heal()
        assert c.ping() is True
        c.close()


def test_blackhole_times_out_then_heal_delivers_the_queued_write(
    proxy: FaultProxy, client: redis.Redis, admin: redis.Redis
) -> None:
    assert client.ping() is True
    proxy.set_fault("blackhole")
    assert proxy.fault == "blackhole"
    up_before = proxy.bytes_up
    with pytest.raises(redis.TimeoutError):
        client.set("bh", "1")  # the client gives up and closes its connection
    # a new connection is accepted but nothing flows
    late = connect(proxy)
    with pytest.raises(redis.TimeoutError):
        late.ping()
    late.close()
    assert proxy.bytes_up == up_before
    assert admin.get("bh") is None

    proxy.heal()
    assert proxy.fault == "pass"
    assert wait_until(lambda: admin.get("bh") == "1")  # the write sent during the partition
    assert client.ping() is True  # a new connection works
    assert proxy.bytes_up > up_before


def test_reset_fails_at_once_and_resets_new_connections(
    proxy: FaultProxy, client: redis.Redis
) -> None:
    slow = connect(proxy, timeout=1.0)
    assert slow.ping() is True
    assert client.ping() is True
    raw = socket.create_connection(proxy.address, timeout=1.0)
    raw.sendall(b"PING\r\n")
    assert raw.recv(100) == b"+PONG\r\n"
    assert proxy.active == 3
    proxy.set_fault("reset")
    assert proxy.active == 0
    with pytest.raises(ConnectionResetError):  # an RST, not a FIN (which reads b"")
        raw.recv(100)
    raw.close()
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        slow.ping()
    assert time.monotonic() - started < 0.5  # an RST, not a timeout
    fresh = connect(proxy, timeout=1.0)
    started = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        fresh.ping()
    assert time.monotonic() - started < 0.5
    with (
        pytest.raises(ConnectionResetError),  # at connect() or at the first read
        socket.create_connection(proxy.address, timeout=1.0) as fresh_raw,
    ):
        fresh_raw.recv(100)
    assert proxy.active == 0

    proxy.heal()
    assert slow.ping() is True
    assert fresh.ping() is True
    assert client.ping() is True
    slow.close()
    fresh.close()


def test_delay_adds_latency_both_ways_in_order(proxy: FaultProxy) -> None:
    client = connect(proxy, timeout=2.0)
    assert client.ping() is True
    proxy.set_fault("delay", delay=0.15)
    assert (proxy.fault, proxy.delay) == ("delay", 0.15)
    started = time.monotonic()
    assert client.ping() is True
    assert time.monotonic() - started >= 0.3  # request and reply each wait 0.15 s
    client.delete("n")
    pipe = client.pipeline(transaction=False)
    for _ in range(50):
        pipe.incr("n")
    assert pipe.execute() == list(range(1, 51))
    proxy.heal()
    assert client.ping() is True
    client.close()


def test_drop_reply_applies_the_command_but_loses_the_reply(
    proxy: FaultProxy, client: redis.Redis, admin: redis.Redis
) -> None:
    assert client.ping() is True
    proxy.set_fault("drop_reply")
    up_before = proxy.bytes_up
    down_before = proxy.bytes_down
    with pytest.raises(redis.TimeoutError):
        client.set("dr", "v")
    assert admin.get("dr") == "v"
    assert proxy.bytes_up > up_before
    assert proxy.bytes_down == down_before
    assert proxy.dropped_replies >= len(b"+OK\r\n")
    proxy.heal()
    assert client.get("dr") == "v"


def test_lose_reply_resets_once_and_a_default_client_retries(
    proxy: FaultProxy, admin: redis.Redis
) -> None:
    client = redis.Redis(**proxy.client_kwargs())  # redis-py's defaults: retries on
    try:
        assert client.ping() is True
        proxy.set_fault("lose_reply")
        # INCR took effect, its reply was lost, the connection reset; the retry ran it again
        assert client.incr("lr") == 2
        assert admin.get("lr") == "2"
        assert proxy.lost_replies == 1
        assert proxy.fault == "pass"
        assert client.incr("lr") == 3  # healed: nothing more is lost
        assert proxy.lost_replies == 1
    finally:
        client.close()


def test_last_upstream_advances_only_when_bytes_go_up(
    proxy: FaultProxy, client: redis.Redis
) -> None:
    assert client.ping() is True
    first = proxy.last_upstream
    assert first is not None
    time.sleep(0.01)
    assert client.ping() is True
    second = proxy.last_upstream
    assert second is not None
    assert second > first
    proxy.set_fault("blackhole")
    with pytest.raises(redis.TimeoutError):
        client.ping()
    assert proxy.last_upstream == second
    proxy.heal()
    assert wait_until(lambda: proxy.last_upstream != second)
    assert proxy.last_upstream is not None
    assert proxy.last_upstream > second


def test_many_proxies_share_one_loop(redis_server: RedisProcess) -> None:
    assert redis_server.socket_path is not None
    # Threads compared as sets: a thread of an earlier test that ends meanwhile changes a
    # count, not what this test started.
    before = set(threading.enumerate())

    def started() -> set[threading.Thread]:
        return set(threading.enumerate()) - before

    with ProxyLoop() as loop:
        assert loop.running
        assert len(started()) == 1  # the loop's thread
        proxies = [FaultProxy(redis_server.socket_path, loop=loop).start() for _ in range(4)]
        assert len(started()) == 1  # proxies on a shared loop start no thread of their own
        assert len({p.port for p in proxies}) == 4
        clients = [connect(p) for p in proxies]
        assert all(c.ping() for c in clients)
        proxies[1].set_fault("blackhole")
        proxies[2].set_fault("reset")
        assert clients[0].ping() is True
        assert clients[3].ping() is True
        with pytest.raises(redis.TimeoutError):
            clients[1].ping()
        with pytest.raises(redis.ConnectionError):
            clients[2].ping()
        proxies[3].stop()  # one proxy stops, the loop and the others go on
        assert clients[0].ping() is True
        for c in clients:
            c.close()
    assert not running(loop)
    assert not any(running(p) for p in proxies)  # the loop stopped the proxies still running
    proxies[0].stop()  # a no-op now
    assert wait_until(lambda: not started())


def test_stop_is_clean_and_idempotent(
    redis_server: RedisProcess, caplog: pytest.LogCaptureFixture
) -> None:
    assert redis_server.socket_path is not None
    caplog.set_level(logging.DEBUG, logger="asyncio")
    before = set(threading.enumerate())  # a set: an earlier test's thread may end meanwhile
    fp = FaultProxy(redis_server.socket_path)
    with pytest.raises(RuntimeError):
        _ = fp.port
    fp.stop()  # never started: a no-op
    fp.start()
    port = fp.port
    idle = connect(fp)
    assert idle.ping() is True
    fp.set_fault("delay", delay=5.0)
    raw = socket.create_connection(fp.address)
    raw.sendall(b"PING\r\n")  # queued in the proxy
    assert wait_until(lambda: fp.active == 2)
    fp.set_fault("blackhole")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fp.stop()
        fp.stop()
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not fp.running
    assert fp.active == 0
    assert wait_until(lambda: not set(threading.enumerate()) - before)
    with pytest.raises(redis.ConnectionError):
        connect(fp).ping()  # nobody listens
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    # a stopped proxy starts again on the same port, with the fault it had
    with fp:
        assert fp.port == port
        assert fp.fault == "blackhole"
        fp.heal()
        again = connect(fp)
        assert again.ping() is True
        again.close()
    idle.close()
    raw.close()


def test_upstream_connect_failure_closes_the_client(short_tmp: Path) -> None:
    with FaultProxy(short_tmp / "nobody.sock") as fp:
        started = time.monotonic()
        with pytest.raises(redis.ConnectionError):
            connect(fp, timeout=2.0).ping()
        assert time.monotonic() - started < 1.0
        assert fp.active == 0


def test_bad_arguments(proxy: FaultProxy) -> None:
    assert "drop_reply" in FAULT_KINDS
    with pytest.raises(ValueError, match="fault kind"):
        proxy.set_fault("partition")
    with pytest.raises(ValueError, match="> 0"):
        proxy.set_fault("delay")
    with pytest.raises(ValueError, match="> 0"):
        proxy.set_fault("delay", delay=-1.0)
    for bad in (float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="finite"):
            proxy.set_fault("delay", delay=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only meaningful"):
        proxy.set_fault("pass", delay=1.0)
    assert proxy.fault == "pass"
    for upstream in (("127.0.0.1", 0), ("127.0.0.1", 70000), ("", 6379), ("h", "1"), ("h",), ""):
        with pytest.raises(ValueError, match="upstream"):
            FaultProxy(upstream)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="upstream"):
        FaultProxy(6379)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="listen_port"):
        FaultProxy("/x.sock", listen_port=-1)
    with pytest.raises(ValueError, match="listen_host"):
        FaultProxy("/x.sock", listen_host="")
    shared = ProxyLoop()
    with pytest.raises(RuntimeError, match="not running"):
        FaultProxy("/x.sock", loop=shared).start()


def test_set_fault_from_the_loop_thread(proxy: FaultProxy, client: redis.Redis) -> None:
    async def partition() -> str:
        proxy.set_fault("blackhole")  # applied at once, no wait for itself
        return proxy.fault

    assert client.ping() is True
    assert proxy.loop.run(partition()) == "blackhole"
    with pytest.raises(redis.TimeoutError):
        client.ping()

    async def stop_from_inside() -> None:
        proxy.stop()  # would wait for its own thread

    with pytest.raises(RuntimeError, match="own thread"):
        proxy.loop.run(stop_from_inside())
    assert running(proxy)
    proxy.heal()
    assert client.ping() is True
