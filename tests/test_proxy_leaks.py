# SPDX-License-Identifier: MIT
"""The test proxies close every socket they accepted or opened when they stop.

A socket left open by a stopping proxy is garbage-collected later, in whatever test runs
next on the same worker, as ``ResourceWarning: unclosed transport`` and ``unclosed
<socket.socket ...>``, which the suite turns into an error of that test's setup. The way it
happened: ``Server.close()`` landing between the accept of a connection and the task that
makes its transport, which then fails in ``Server._attach`` and leaves the accepted socket
to the garbage collector (https://github.com/python/cpython/issues/109564); and, in the
tests' own ``DelayProxy``, a client whose upstream connection failed, or a pipe task
cancelled before it started, that nothing closed.

The stress: client threads connect as fast as they can (and send a PING) while the proxy
stops, many times; then ``gc.collect()``, with every unraisable exception (a warning raised
from ``__del__``) recorded. Without the fix, each run of these tests shows hundreds of
unclosed sockets; with it, none.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from redislock.server import RedisProcess
from redislock.testing.proxy import FaultProxy, ProxyLoop
from tests.proxy import DelayProxy

ROUNDS = 15
THREADS = 4
RACE = 0.02  # seconds of connecting before the stop


class Hammer:
    """Threads that connect to ``address`` in a loop (each sends a PING) until stopped."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self.socks: list[socket.socket] = []
        self.connected = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(THREADS)]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sock = socket.create_connection(self.address, timeout=0.2)
            except OSError:
                continue
            with self._lock:
                self.socks.append(sock)
                self.connected += 1
            with contextlib.suppress(OSError):
                sock.sendall(b"PING\r\n")

    def start(self) -> Hammer:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def all_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """Whether every connected socket sees its peer's close (EOF or reset) in time."""
        deadline = time.monotonic() + timeout
        for sock in self.socks:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                while sock.recv(4096):
                    pass
            except (ConnectionResetError, BrokenPipeError):
                pass
            except TimeoutError:
                return False
        return True

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Unraisable exceptions (with ResourceWarning as an error) as strings, for the test."""
    caught: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: caught.append(repr(u.exc_value)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        yield caught
        gc.collect()


def leaks(caught: list[str]) -> list[str]:
    gc.collect()
    return [text for text in caught if "unclosed" in text]


@pytest.mark.parametrize("shared", [False, True], ids=["own-loop", "shared-loop"])
def test_fault_proxy_closes_what_it_accepted_while_stopping(
    redis_server: RedisProcess, unraisable: list[str], shared: bool
) -> None:
    assert redis_server.socket_path is not None
    accepted = 0
    for _ in range(ROUNDS):
        ploop = ProxyLoop().start() if shared else None
        proxy = FaultProxy(redis_server.socket_path, loop=ploop).start()
        hammer = Hammer(proxy.address).start()
        try:
            time.sleep(RACE)
            proxy.stop()
            if ploop is not None:
                ploop.stop()
        finally:
            hammer.stop()
        try:
            assert hammer.all_closed_by_peer()
        finally:
            hammer.close()
        assert proxy.active == 0
        accepted += proxy.connections
    assert accepted >= ROUNDS  # the race had connections to lose
    assert leaks(unraisable) == []


async def test_delay_proxy_closes_what_it_accepted_while_stopping(
    redis_server: RedisProcess, unraisable: list[str]
) -> None:
    assert redis_server.socket_path is not None
    connected = 0
    for _ in range(ROUNDS):
        proxy = DelayProxy(str(redis_server.socket_path), reply_delay=0.05)
        hammer: Hammer | None = None
        try:
            async with proxy.running():
                hammer = Hammer(("127.0.0.1", proxy.port)).start()
                await asyncio.sleep(RACE)
        finally:
            if hammer is not None:
                hammer.stop()
        assert hammer is not None
        try:
            assert await asyncio.to_thread(hammer.all_closed_by_peer)
        finally:
            hammer.close()
        connected += hammer.connected
    assert connected >= ROUNDS  # the race had connections to lose
    assert leaks(unraisable) == []


async def test_delay_proxy_closes_a_client_it_cannot_forward(
    short_tmp: Path, unraisable: list[str]
) -> None:
    """No server behind the proxy: the client's connection is closed at once, not left open."""
    proxy = DelayProxy(str(short_tmp / "nobody.sock"), reply_delay=0.0)
    async with proxy.running():
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        try:
            async with asyncio.timeout(5.0):
                assert await reader.read() == b""
        finally:
            writer.close()
            await writer.wait_closed()
    assert leaks(unraisable) == []
