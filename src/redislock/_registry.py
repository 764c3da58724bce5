# SPDX-License-Identifier: MIT
"""The registry of per-client state, for both flavours (``aio/_state.py``,
``sync/_state.py``): one weak mapping per flavour from a client to its state, and the one
place a forked child learns that its parent's states are not its own."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from redislock._core.features import Features
from redislock._core.quorum import MasterMemory
from redislock._lanes import Lane

__all__ = ["ClientStateBase", "PerProcess", "Registry", "forks"]

S = TypeVar("S")
T = TypeVar("T")

_forks = 0
"""How many times this process's line forked: a state made before the last fork belongs to
the parent."""

_GUARD = threading.Lock()
"""Held while a state is made (asyncio clients may be used from several threads' loops)."""


def forks() -> int:
    """How many times this process's line forked (states remember it when they are made)."""
    return _forks


def _forked() -> None:
    global _forks, _GUARD
    _forks += 1
    _GUARD = threading.Lock()  # a fork while another thread held it: a fresh one


os.register_at_fork(after_in_child=_forked)


class ClientStateBase:
    """What each flavour's ``ClientState`` keeps about a client whatever the flavour: the
    client (weakly), the fork it was made in, the server's features, and what a Redlock
    fan-out remembers of a master. ``parent``: the state of the client in the parent
    process, whose features and run_id are carried over (they are the servers', not the
    process's); ``remember``: False for a client that cannot be weakly referenced."""

    __slots__ = ("client", "features", "forks", "lane", "master", "suspect")

    def __init__(self, client: Any, parent: ClientStateBase | None, remember: bool) -> None:
        self.client: Callable[[], Any] = weakref.ref(client) if remember else lambda: client
        self.forks = forks()
        self.features: Features | None = None if parent is None else parent.features
        """What the server has natively, once the first :class:`~redislock._core.ops.Probe`
        read it."""
        self.master: MasterMemory = MasterMemory() if parent is None else parent.master
        """A Redlock master's run_id (the quorum cores read and write it)."""
        self.suspect = True
        """A Redlock master that is new, failed or late: the fan-out contacts it through
        its lane, off the caller's path."""
        self.lane = Lane()
        """A Redlock master's commands that run off the caller's path, one at a time."""


class Registry(Generic[S]):
    """Client -> state, forgotten with the client. ``make(client, parent, remember)`` builds
    a state: ``parent`` is the state the client had before the last fork (None: none),
    ``remember`` False for a client that cannot be weakly referenced (its state is made
    again on each lookup and remembers nothing). A state's ``forks`` attribute says when it
    was made."""

    __slots__ = ("_make", "_states")

    def __init__(self, make: Callable[[Any, S | None, bool], S]) -> None:
        self._make = make
        self._states: weakref.WeakKeyDictionary[Any, S] = weakref.WeakKeyDictionary()

    def of(self, client: Any) -> S:
        """The state of ``client`` in this process (made on first use, made again in a
        forked child)."""
        try:
            st = self._states.get(client)
        except TypeError:  # not weak-referenceable
            return self._make(client, None, False)
        if st is not None and getattr(st, "forks", -1) == _forks:
            return st
        with _GUARD:
            found = self._states.get(client)
            if found is None or getattr(found, "forks", -1) != _forks:
                found = self._states[client] = self._make(client, found, True)
            return found


class PerProcess(Generic[T]):
    """One object of the process (the sync watchdog, the fan-out's thread pool), made by
    ``make`` on first use and forgotten in a forked child, whose parent's threads are not
    its own."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._value: T | None = None
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def get(self) -> T:
        """The object, made now if it was not yet (in this process)."""
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value

    def made(self) -> T | None:
        """The object if it was made in this process, else None (makes nothing)."""
        return self._value

    def _forget(self) -> None:
        self._value = None
        self._lock = threading.Lock()  # a fork while another thread held it: a fresh one
