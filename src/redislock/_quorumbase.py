# SPDX-License-Identifier: MIT
"""What :class:`~redislock.Redlock`, :class:`~redislock.AsyncRedlock`,
:class:`~redislock.MultiRedlock` and :class:`~redislock.AsyncMultiRedlock` share without
I/O: construction (masters and options validated before any I/O), and their local
properties. The shells (``Lock`` / ``AsyncLock``, next in the MRO) drive the quorum flows
unchanged."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from redislock._base import LockBase
from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.lock import DEFAULT_RECHECK, DEFAULT_WATCHDOG_LEASE
from redislock._core.quorum import (
    DEFAULT_DRIFT_FACTOR,
    DEFAULT_RETRY_DELAY,
    RedlockCore,
    check_masters,
)
from redislock._core.quorum_multi import MultiRedlockCore
from redislock.errors import LockUsageError

__all__ = ["MultiQuorumMixin", "QuorumMixin"]

C = TypeVar("C")


class QuorumMixin(LockBase, Generic[C]):
    """Builds a lock shell over N masters: a :class:`RedlockCore` (``_core_type``) and the
    flavour's quorum client (``_masters_type``: ``Masters`` or ``AsyncMasters``)."""

    __slots__ = ()
    _core: RedlockCore
    _core_type: ClassVar[type[RedlockCore]] = RedlockCore
    _masters_type: ClassVar[type[Any]]
    _master_types: ClassVar[tuple[type, ...]]
    _master_hint: ClassVar[str]

    def __init__(
        self,
        masters: Sequence[C],
        name: Any,
        *,
        ttl: float | None = None,
        on_lost: Callable[[Any], object] | None = None,
        timeout: float | None = None,
        watchdog_lease: float = DEFAULT_WATCHDOG_LEASE,
        renew_interval: float | None = None,
        max_lease: float | None = None,
        node_timeout: float | None = None,
        drift_factor: float = DEFAULT_DRIFT_FACTOR,
        retry_delay: float = DEFAULT_RETRY_DELAY,
        fencing: bool = True,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        labels = check_masters(masters, self._master_types, self._master_hint)
        self._core = self._core_type.build(
            labels,
            name,
            node_timeout=node_timeout,
            drift_factor=drift_factor,
            retry_delay=retry_delay,
            fencing=fencing,
            ttl=ttl,
            watchdog_lease=watchdog_lease,
            renew_interval=renew_interval,
            max_lease=max_lease,
            timeout=timeout,
            recheck_interval=DEFAULT_RECHECK,
            prefix=prefix,
            on_lost=on_lost,
        )
        client: Any = self._masters_type(masters)
        self._client = client
        self._core.memories = client.memories

    @property
    def masters(self) -> tuple[str, ...]:
        """One label per master (``host:port`` or socket path), in the order given."""
        return self._core.labels

    @property
    def quorum(self) -> int:
        """How many masters must agree: ``N // 2 + 1``."""
        return self._core.quorum

    @property
    def fencing_token(self) -> int | None:
        """The quorum fencing token of the current hold, or None (not held, or
        ``fencing=False``). Greater than the token of every hold that was acquired before
        this acquire started, while no master loses its counter."""
        h = self._core.current()
        return None if h is None or not self._core.fencing else h.fence

    def detach(self) -> str:
        """Not supported for Redlock.

        Raises:
            LockUsageError: always (a quorum hold's fencing token cannot be read back).
        """
        raise LockUsageError(
            "Redlock holds cannot be detached: the fencing token of a quorum hold cannot be "
            "read back from the masters by adopt()"
        )


class MultiQuorumMixin(QuorumMixin[C]):
    """A :class:`QuorumMixin` over a set of names (``name`` is an iterable of names)."""

    __slots__ = ()
    _core: MultiRedlockCore
    _core_type: ClassVar[type[RedlockCore]] = MultiRedlockCore

    @property
    def names(self) -> tuple[str, ...]:
        """The distinct names, sorted."""
        return self._core.m.names

    @property
    def key(self) -> str:
        """The lock key of the first name (each name has its own: ``<prefix>{<name>}``)."""
        return self._core.m.chunks[0].locks[0]

    @property
    def fencing_token(self) -> int | None:
        """None: a set has one fencing token per name (see :attr:`fencing_tokens`)."""
        return None

    @property
    def fencing_tokens(self) -> dict[str, int] | None:
        """The quorum fencing token of every name (a new dict) for the current hold, or
        None (not held, or ``fencing=False``)."""
        return self._core.fencing_tokens()
