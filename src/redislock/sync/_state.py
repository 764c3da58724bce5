# SPDX-License-Identifier: MIT
"""What redislock keeps about one client in this process (threads): the one place per-client
state lives. Hand-written; its asyncio twin is :mod:`redislock.aio._state`.

A client's :class:`ClientState` holds its server's :class:`~redislock._core.features.Features`
(read once), the gate its commands pass (:class:`Gate`), its wake-up channel
(:class:`~redislock.sync._hub.Hub`), and, for a Redlock master, what the fan-out remembers
(:class:`~redislock._core.quorum.MasterMemory`, whether it is suspect, its
:class:`~redislock._lanes.Lane`). It is made on first use and kept while the client lives; a
forked child gets a fresh one on its first use (no thread, socket, queued command or gate
slot of its parent is carried over; the features and the masters' run_ids are: they are
the servers', not the process's).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from redislock._core.wake import gate_size
from redislock._registry import ClientStateBase, Registry
from redislock.sync._hub import Hub

__all__ = ["ClientState", "Gate", "state_of"]


class Gate:
    """A counting semaphore for the driver's ``with gate:``, on :class:`queue.SimpleQueue`
    (C code): taking and returning a slot is one call each, where
    :class:`threading.BoundedSemaphore` runs a Condition in Python (about 4 µs per command,
    on every acquire and release). Waiting for a slot blocks in C and can be interrupted."""

    __slots__ = ("_free",)

    def __init__(self, size: int) -> None:
        self._free: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(size):
            self._free.put(None)

    def __enter__(self) -> None:
        self._free.get()

    def __exit__(self, *exc: object) -> None:
        self._free.put(None)


class ClientState(ClientStateBase):
    """One client's state in this process (see the module's docstring)."""

    __slots__ = ("_gate", "_hub", "lock")

    def __init__(
        self, client: Any, parent: ClientState | None = None, remember: bool = True
    ) -> None:
        super().__init__(client, parent, remember)
        self.lock = threading.Lock()
        size = gate_size(client) if remember else None
        self._gate: Gate | None = None if size is None else Gate(size)
        self._hub: Hub | None = None

    def gate(self) -> Gate | None:
        """The semaphore redislock's commands on the client pass, or None (see
        :func:`redislock._core.wake.gate_size`)."""
        return self._gate

    def hub(self, execute: Callable[[Any, Any], Any]) -> Hub:
        """The client's wake-up channel, made on first use; ``execute`` is the driver's
        (the hub's keeper renews waiter leases with it)."""
        hub = self._hub
        if hub is None:
            client = self.client()
            if client is None:  # (a state is only used by its client's holders)
                raise RuntimeError("the client of this wake-up channel is gone")
            with self.lock:
                hub = self._hub
                if hub is None:
                    hub = self._hub = Hub(client, execute)
        return hub

    def hub_if_any(self) -> Hub | None:
        """The client's wake-up channel if one was made."""
        return self._hub


_STATES: Registry[ClientState] = Registry(ClientState)
"""Every client's state, forgotten with the client: the only registry of clients."""


def state_of(client: Any) -> ClientState:
    """The state of ``client`` in this process (made on first use, made again in a forked
    child). A client that cannot be weakly referenced gets a state of its own each time
    (nothing is remembered for it, and its commands pass no gate)."""
    return _STATES.of(client)
