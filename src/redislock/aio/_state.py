# SPDX-License-Identifier: MIT
"""What redislock keeps about one client in this process (asyncio): the one place per-client
state lives. Hand-written; its sync twin is :mod:`redislock.sync._state`.

A client's :class:`ClientState` holds its server's :class:`~redislock._core.features.Features`
(read once), per event loop the gate its commands pass (an :class:`asyncio.Semaphore`) and
its wake-up channel (:class:`~redislock.aio._hub.Hub`), and, for a Redlock master, what the
fan-out remembers (:class:`~redislock._core.quorum.MasterMemory`, whether it is suspect, its
:class:`~redislock._lanes.Lane`, which belongs to one event loop). It is made on first use
and kept while the client lives; a forked child gets a fresh one on its first use (the
features and the masters' run_ids are carried over: they are the servers', not the
process's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from redislock._core.wake import gate_size
from redislock._registry import ClientStateBase, Registry
from redislock.aio._hub import Hub

__all__ = ["ClientState", "state_of"]


class ClientState(ClientStateBase):
    """One client's state in this process (see the module's docstring). Its :attr:`lane`
    runs on the event loop of :attr:`Lane.owner`."""

    __slots__ = ("_gates", "_hubs", "size")

    def __init__(
        self, client: Any, parent: ClientState | None = None, remember: bool = True
    ) -> None:
        super().__init__(client, parent, remember)
        self.size = gate_size(client) if remember else None
        self._gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._hubs: dict[asyncio.AbstractEventLoop, Hub] = {}

    def gate(self) -> asyncio.Semaphore | None:
        """The semaphore redislock's commands on the client pass in the running event loop,
        or None (see :func:`redislock._core.wake.gate_size`)."""
        if self.size is None:
            return None
        loop = asyncio.get_running_loop()
        found = self._gates.get(loop)
        if found is None:
            for old in [lp for lp in self._gates if lp.is_closed()]:
                del self._gates[old]
            found = self._gates[loop] = asyncio.Semaphore(self.size)
        return found

    def hub(self, execute: Callable[[Any, Any], Any]) -> Hub:
        """The client's wake-up channel in the running event loop, made on first use;
        ``execute`` is the driver's (the hub's keeper renews waiter leases with it)."""
        loop = asyncio.get_running_loop()
        found = self._hubs.get(loop)
        if found is None:
            client = self.client()
            if client is None:  # (a state is only used by its client's holders)
                raise RuntimeError("the client of this wake-up channel is gone")
            for old in [lp for lp in self._hubs if lp.is_closed()]:
                del self._hubs[old]
            found = self._hubs[loop] = Hub(client, loop, execute)
        return found

    def hub_if_any(self) -> Hub | None:
        """The client's wake-up channel in the running event loop, if one was made."""
        return self._hubs.get(asyncio.get_running_loop())


_STATES: Registry[ClientState] = Registry(ClientState)
"""Every client's state, forgotten with the client: the only registry of clients."""


def state_of(client: Any) -> ClientState:
    """The state of ``client`` in this process (made on first use, made again in a forked
    child). A client that cannot be weakly referenced gets a state of its own each time
    (nothing is remembered for it, and its commands pass no gate)."""
    return _STATES.of(client)
