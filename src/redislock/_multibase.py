# SPDX-License-Identifier: MIT
"""What :class:`~redislock.MultiLock` and :class:`~redislock.AsyncMultiLock` share without
I/O: construction (names, then the lock options, validated before any I/O) over a
:class:`MultiCore`, and the set's local properties. The shells (``Lock`` / ``AsyncLock``,
next in the MRO) drive the multi flows unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from redislock._base import LockBase, _socket_timeout
from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.lock import (
    DEFAULT_RECHECK,
    DEFAULT_WATCHDOG_LEASE,
    LockCore,
    token_tag,
)
from redislock._core.multi import MultiCore, check_names
from redislock.errors import LockConfigError, LockUsageError

__all__ = ["MultiMixin"]


class MultiMixin(LockBase):
    """Builds a lock shell over a :class:`MultiCore` (a set of names)."""

    _cluster_types: tuple[type, ...] = ()

    __slots__ = ()

    _core: MultiCore

    def __init__(
        self,
        client: Any,
        names: Iterable[str],
        *,
        ttl: float | None = None,
        on_lost: Callable[[Any], object] | None = None,
        timeout: float | None = None,
        watchdog_lease: float = DEFAULT_WATCHDOG_LEASE,
        renew_interval: float | None = None,
        max_lease: float | None = None,
        recheck_interval: float = DEFAULT_RECHECK,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if not isinstance(client, self._client_types):
            raise LockConfigError(
                f"{type(self).__name__} needs {self._client_hint}, got {type(client).__name__}"
            )
        checked = check_names(names)
        base = LockCore.create(
            checked[0],
            ttl=ttl,
            watchdog_lease=watchdog_lease,
            renew_interval=renew_interval,
            max_lease=max_lease,
            timeout=timeout,
            recheck_interval=recheck_interval,
            prefix=prefix,
            on_lost=on_lost,
            socket_timeout=_socket_timeout(client),
        )
        self._client = client
        cluster = isinstance(client, self._cluster_types)
        self._core = MultiCore.from_base(base, checked, prefix, cluster)

    @property
    def names(self) -> tuple[str, ...]:
        """The distinct names, sorted."""
        return self._core.names

    @property
    def fencing_tokens(self) -> dict[str, int] | None:
        """The fencing token of every name (a new dict) for the current hold, or None.

        Each name keeps its own counter, shared with ``Lock`` on that name: strictly
        increasing across all holders of the name (Kleppmann, "How to do distributed
        locking", 2016). Pass a name's token with each write to the resource it guards.
        """
        return self._core.fencing_tokens()

    @property
    def fencing_token(self) -> int | None:
        """None: a set has one fencing token per name (see :attr:`fencing_tokens`)."""
        return None

    def detach(self) -> str:
        """Not supported for a set of names.

        Raises:
            LockUsageError: always.
        """
        raise LockUsageError("MultiLock holds cannot be detached (nor adopted)")

    def __repr__(self) -> str:
        h = self._core.current()
        if h is None:
            state = "unlocked"
        else:
            state = f"{'lost' if h.lost else 'held'} token~{token_tag(h.token)}"
        return f"<{type(self).__name__} {self._core.name!r} {state}>"
