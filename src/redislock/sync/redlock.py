# Generated from src/redislock/aio/redlock.py by tools/gen_sync.py: do not edit.
# Edit that file, then run `python3 dev.py gen`.
# SPDX-License-Identifier: MIT
"""``Redlock``: the :class:`Lock` API over N independent masters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self, Unpack

from redislock._core.lock import LockCore
from redislock._core.options import QuorumKwargs, QuorumOptions
from redislock._core.quorum import RedlockCore, check_masters
from redislock._handle import Holder
from redislock.errors import LockUsageError
from redislock.sync import _flavour
from redislock.sync._fanout import Masters
from redislock.sync.lock import Lock

__all__ = ["Redlock"]


class Redlock(Lock):
    """A distributed mutex over N independent Redis masters (N >= 3, odd).

    The same API as :class:`Lock`; held only while a majority of masters holds it.
    Algorithm: the Redis docs' distributed-locks page ("The Redlock Algorithm"): all
    masters at once, a per-master timeout much shorter than the TTL, a majority within the
    validity ``ttl - elapsed - drift``, release on every master after a failed try, random
    retry delay, extensions counted on a majority. Fencing tokens by the quorum rule of
    :mod:`redislock._core.quorum` (not in the original algorithm; see "Redlock" in the
    README for what it does and does not give).

    Redlock assumes bounded network delay, process pauses and clock drift (Kleppmann
    2016): a holder paused past its validity, or a master whose clock jumps, can give two
    holders. Pass ``fencing_token`` to the protected resource; restart crashed masters only
    after the longest TTL, or run them with ``appendfsync always``.

    Example::

        masters = [redis.Redis(port=p, socket_timeout=0.5) for p in (7001, 7002, 7003)]
        with Redlock(masters, "nightly-report", ttl=10):
            ...

    Args:
        masters: 3 or more ``redis.Redis`` (or ``valkey.Valkey``) clients,
            one per independent master (not replicas of each other); give each a
            ``socket_timeout`` and ``retry=Retry(NoBackoff(), 0)`` (redis-py's default
            retries back off for seconds when a master's connection dies).
        name, ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease, prefix: as
            for :class:`Lock` (seconds).
        node_timeout: seconds to wait for the masters in one round; default a tenth of the
            lease, at most 1 s; at most a third of the lease.
        drift_factor: clock drift allowance as a fraction of the lease (default 0.01); 2 ms
            are added. The local lease estimate ends at ``start + lease - drift``.
        retry_delay: longest random pause between two tries of a blocking acquire, in
            seconds (default 0.2).
        fencing: issue quorum fencing tokens (default True). False skips the extra round
            that balances counters after a master missed grants, and ``fencing_token`` is
            None.

    Raises:
        LockConfigError: bad arguments: fewer than 3 masters, a master given twice, a
            client of the wrong type, bad durations (before any I/O). On the first acquire,
            two masters that are one server (same run_id) also raise it.
    """

    __slots__ = ()
    _core: RedlockCore
    _options = QuorumOptions
    _quorum_core: ClassVar[type[RedlockCore]] = RedlockCore

    def __init__(
        self, masters: Sequence[_flavour.Master], name: Any, **options: Unpack[QuorumKwargs[Self]]
    ) -> None:
        Holder.__init__(self, masters, name, **options)

    def _connect(self, client: Any) -> Any:
        """Check the masters (raises :class:`LockConfigError`); their fan-out driver."""
        hint = f"{_flavour.MASTER_TEXT} ({self._counterpart()}; no cluster)"
        return Masters(client, check_masters(client, _flavour.MASTERS, hint))

    def _make_core(self, client: Any, name: Any, options: Any, *args: Any) -> LockCore:
        masters: Masters = self._client
        core = self._quorum_core.from_quorum(masters.labels, name, options)
        core.memories = masters.masters
        return core

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
