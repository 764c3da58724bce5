# Generated from src/redislock/aio/barrier.py by tools/gen_sync.py: do not edit.
# Edit that file, then run `python3 dev.py gen`.
# SPDX-License-Identifier: MIT
"""``Barrier``: a double barrier, ``parties`` processes enter together and leave
together; each party is a member with a lease, renewed by the watchdog."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Self

from redislock._clients import wrong_client
from redislock._core import validate
from redislock._core.barrier import (
    DEFAULT_BARRIER_LEASE,
    DEFAULT_BARRIER_RECHECK,
    BarrierCore,
    check_parties,
)
from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.options import MultiOptions
from redislock._handle import _follows_sentinel
from redislock.errors import AcquireTimeoutError, LockConfigError, LockLostError
from redislock.sync import _flavour, _steps
from redislock.sync._block import Block, noting
from redislock.sync._driver import run

__all__ = ["Barrier"]


class Barrier(Block):
    """A distributed double barrier: ``parties`` processes (or threads) enter together, work,
    and leave together. One object is one party.

    :meth:`enter` makes this party a member of the barrier's current *round* and returns
    True once ``parties`` live parties are in (the round *opens*); :meth:`leave` removes
    it and returns True once every party of the round has left (the round *closes*). Used
    as ``with Barrier(...) as party:``, it enters (raising
    :class:`~redislock.AcquireTimeoutError` if ``timeout`` runs out) and leaves at the end.

    A party is a hold with a lease of ``lease`` seconds, renewed by the process's watchdog
    while it is in (as a lock's ``watchdog_lease``), so a party whose process died leaves
    when its lease ends: the others' :meth:`enter` then keeps waiting for a live party
    (:meth:`entered` shows how many are in) and their :meth:`leave` returns. A party whose
    lease was lost (its renewals failed until it ran out) is reported as a lost lock is:
    ``on_lost(party)``, :attr:`lost`, and :class:`~redislock.LockLostError` from
    :meth:`leave` (or from :meth:`enter` if it happened there).

    Rounds: the first party to enter when no live party is in starts a round, whose
    *generation* is the next fencing token of the name's hash slot: generations strictly
    increase, and :attr:`fencing_token` (= :attr:`generation`) is the round's while the
    party is in, the same for every party of the round. A party that comes to a round
    that is already open waits until it closed, then starts or joins the next, so a round
    opens with exactly ``parties`` parties. The first party fixes the round's party count:
    a party with another count waiting for it raises :class:`~redislock.LockUsageError`.

    Every change is published on the channel named like the barrier key, which the
    waiters hear through their process's shared wake-up connection (no pooled connection
    held while waiting); a waiter also reads again every ``recheck_interval`` seconds and
    when the earliest party lease would end, so a lost wake-up or a dead party delays it
    by at most that.

    Modelled on Apache Curator's ``DistributedDoubleBarrier``
    (https://curator.apache.org/docs/recipes-double-barrier) and kazoo's ``DoubleBarrier``
    (https://kazoo.readthedocs.io/en/latest/api/recipe/barrier.html), with a lease where
    they have an ephemeral znode.

    Example::

        with Barrier(redis.Redis(), "shard-sync", 3, lease=10) as party:
            compute(epoch=party.generation)  # all 3 are in
        # all 3 have left

    Construction does no I/O.

    Args:
        client: a ``redis.Redis`` or ``redis.cluster.RedisCluster``, or valkey-py's
            ``valkey.Valkey`` or ``valkey.cluster.ValkeyCluster``.
        name: the barrier name (rules as for :class:`~redislock.Lock`; a barrier and a lock
            of one name do not meet: their keys differ).
        parties: how many parties open a round, an int from 1 to 1,000,000.
        lease: a party's lease in seconds (default 30), renewed every third of it while
            it is in; a dead party leaves within it.
        timeout: the default wait of :meth:`enter` and :meth:`leave` in seconds (default
            None: no limit), also of ``with``.
        recheck_interval: seconds between a waiter's reads when no wake-up comes (default
            5.0).
        prefix: the key prefix (default ``"redislock:"``), as for :class:`~redislock.Lock`.
        on_lost: called with this object when its party's lease was lost (as a lock's).

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    __slots__ = ("__weakref__", "_client", "_core")

    def __init__(
        self,
        client: _flavour.Client,
        name: str,
        parties: int,
        *,
        lease: float = DEFAULT_BARRIER_LEASE,
        timeout: float | None = None,
        recheck_interval: float = DEFAULT_BARRIER_RECHECK,
        prefix: str = DEFAULT_PREFIX,
        on_lost: Callable[[Self], object] | None = None,
    ) -> None:
        if not isinstance(client, _flavour.CLIENTS):
            raise LockConfigError(wrong_client(type(self).__name__, _flavour.CLIENTS_TEXT, client))
        count = check_parties(parties)
        seconds = validate.check_duration("lease", lease)
        validate.warn_long_lease("lease", seconds)
        options = MultiOptions(
            watchdog_lease=seconds,
            timeout=timeout,
            recheck_interval=recheck_interval,
            prefix=prefix,
            on_lost=on_lost,
        )
        self._client: Any = client
        self._core = BarrierCore.from_options(
            name, options, sentinel=_follows_sentinel(client), parties=count
        )
        self._core.label = "Barrier"

    def _subject(self) -> object:
        return self  # what on_lost receives

    # ------------------------------------------------------------------ local state

    @property
    def name(self) -> str:
        """The barrier name."""
        return self._core.name

    @property
    def key(self) -> str:
        """The Redis key of the barrier's round (``<prefix>{<name>}:barrier``)."""
        return self._core.bkey

    @property
    def parties(self) -> int:
        """How many parties open a round (no I/O)."""
        return self._core.parties

    @property
    def lease(self) -> float:
        """A party's lease, in seconds (no I/O)."""
        return self._core.lease

    @property
    def generation(self) -> int | None:
        """The generation of the round this party is in (from :meth:`enter` until
        :meth:`leave`), else None. Strictly increasing across rounds; the same for every
        party of one round (no I/O)."""
        h = self._core.current()
        return None if h is None else h.fence

    @property
    def fencing_token(self) -> int | None:
        """The same as :attr:`generation`: a fencing token for what the round writes."""
        return self.generation

    @property
    def lost(self) -> bool:
        """True if this party's latest membership was lost: its lease ended while it was in
        (renewals failed until it ran out). No I/O."""
        return self._core.is_lost()

    def __repr__(self) -> str:
        h = self._core.current()
        state = "out" if h is None else f"{'lost' if h.lost else 'in'} generation={h.fence}"
        return f"<{type(self).__name__} {self.name!r} parties={self.parties} {state}>"

    # ------------------------------------------------------------------ I/O

    def enter(self, timeout: float | None = None) -> bool:
        """Enter the barrier: become a member of its current round (of the next one if it is
        open already) and wait until ``parties`` live parties are in.

        The party's lease is renewed by the watchdog from the moment it is a member.

        Args:
            timeout: the longest wait in seconds; None uses the object's ``timeout``
                (default: no limit); 0: no wait (True only if this party opens the round).

        Returns:
            True once the round is open (:attr:`generation` is set); False when ``timeout``
            ran out first: then this party has left again.

        Raises:
            LockConfigError: a bad ``timeout`` (before any I/O).
            LockUsageError: this party has entered already, or the round counts another
                number of parties.
            LockLostError: the party's lease ended before the round opened (it left).
            UnexpectedReplyError: the barrier's keys hold something redislock did not write.
            redis.exceptions.RedisError: Redis failed; nothing is left registered (a
                membership made before the failure is removed, or if that fails too, no
                longer renewed).
        """
        core = self._core
        wait = core.check_acquire_args(True, timeout)
        deadline = None if wait is None else time.monotonic() + wait
        if not _steps.acquire(self, core, core.join_flow(wait), single=wait == 0):
            return False
        h = core.require_holding()
        try:
            opened = run(self._client, core.opened_flow(h, deadline))
        except BaseException:
            with contextlib.suppress(Exception):  # (LockLostError: it is no member already)
                _steps.release(self, core, h)
            raise
        if not opened:
            with contextlib.suppress(LockLostError):
                _steps.release(self, core, h)
        return opened

    def leave(self, timeout: float | None = None) -> bool:
        """Leave the barrier: remove this party from its round at once, then wait until
        every party of the round has left (or its lease ended).

        Args:
            timeout: the longest wait in seconds; None uses the object's ``timeout``
                (default: no limit); 0: no wait.

        Returns:
            True once the round is empty (closed); False when ``timeout`` ran out first
            (this party has left all the same).

        Raises:
            LockConfigError: a bad ``timeout`` (before any I/O).
            NotOwnedError: this party is not in (never entered, or left).
            LockLostError: the party's lease had ended (it was no member any more).
            UnexpectedReplyError: the barrier's keys hold something redislock did not write.
            redis.exceptions.RedisError: Redis failed; if the removal got no reply, the
                party is still in and ``leave()`` may be called again.
        """
        core = self._core
        wait = core.check_acquire_args(True, timeout)
        h = core.require_holding(allow_lost=True)
        deadline = None if wait is None else time.monotonic() + wait
        _steps.release(self, core, h)
        return run(self._client, core.left_flow(deadline))

    def entered(self) -> int:
        """How many live parties are in the current round now (one round trip, read only;
        0 without a round).

        Raises:
            UnexpectedReplyError: the barrier's keys hold something redislock did not write.
            redis.exceptions.RedisError: Redis failed.
        """
        state = run(self._client, self._core.read_flow())
        return state.entered

    def __enter__(self) -> Self:
        start = time.monotonic()
        if not self.enter():
            raise AcquireTimeoutError(self.name, time.monotonic() - start)
        return self

    def _end(self, exc: BaseException | None) -> None:
        start = time.monotonic()
        if exc is None:
            if not self.leave():
                raise AcquireTimeoutError(self.name, time.monotonic() - start)
            return
        with noting(exc, f"leaving barrier {self.name!r}"):
            self.leave()
