# SPDX-License-Identifier: MIT
"""``AsyncOnce``: run a job exactly once per period among many processes."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Self, Unpack

from redislock._core.keys import DEFAULT_PREFIX
from redislock._core.once import DEFAULT_PERIOD, OnceCore, OnceRecord
from redislock._core.options import LockKwargs
from redislock.aio import _flavour
from redislock.aio._block import AsyncBlock, noting
from redislock.aio._driver import run
from redislock.aio.lock import AsyncLock
from redislock.errors import AcquireTimeoutError, LockLostError, LockUsageError, NotOwnedError

__all__ = ["AsyncOnce", "AsyncOnceTurn"]


class AsyncOnce:
    """Run a job exactly once per period, whichever of many processes gets there first.

    At noon every instance of a service wakes up and exactly one must draw the lottery:
    a mutex alone does not give that (a second instance that arrives after the first has
    finished takes the free lock and runs the job again). ``AsyncOnce`` keeps a *record*
    of each period's successful run: the winner runs the job and records its fencing
    token, host, pid and time; every other caller of the same period, then or later, finds
    the record and does not run the job.

    Example::

        once = AsyncOnce(redis.asyncio.Redis(), "lottery", period=86400)
        async with once.run() as turn:
            if turn.mine:
                await draw_winners()
            else:
                print("already drawn by", turn.record.host)

    How: :meth:`run` looks for the period's record; without one it takes the
    :class:`AsyncLock` of the name (waiting for a holder, so a late arrival sees what the
    winner writes), looks again, and if there is still none the turn is this caller's.
    When the ``async with`` body ends without an exception, one script writes the record,
    only if the lock is still this caller's (a holder whose lease was lost cannot write
    it: :class:`LockLostError`), then the lock is released. A body that raises writes
    nothing: the period is not done and the next caller runs the job. Runs of one name
    never overlap (they hold the same lock), also across periods.

    Periods: with ``key`` None (default), periods of ``period`` seconds aligned on UTC
    multiples of the period since the Unix epoch (86400: a UTC day from midnight; 3600: an
    hour), keyed by their start (``2026-11-23T00:00:00Z``); a record lives until its
    period's end plus 60 seconds. Aligned periods follow the SERVER's clock (``TIME``, read
    when the turn starts), not the caller's, so hosts whose clocks disagree agree on the
    period; a server clock stepped forward moves the periods with it, one stepped back by
    more than 60 s past a period's end can run that period again. With an explicit ``key``
    (``"2026-11-23"``) the period is that key, and its record lives ``period`` seconds.
    A caller's period is fixed when its turn starts (not when it gets the lock).

    Args:
        client: as for :class:`AsyncLock`.
        name: the job's name, also the name of its :class:`AsyncLock`: as a lock name.
        period: the period's length in seconds (> 0, default 86400: one day).
        key: an explicit period key: a non-empty str of at most 256 UTF-8 bytes, no
            braces or control characters; None (default): the aligned period's start.
        lock options: ttl, on_lost, timeout, watchdog_lease, renew_interval, max_lease,
            recheck_interval, prefix, replicas, replica_timeout: the options of the
            :class:`AsyncLock` held while a caller decides and runs the job (seconds, as for
            :class:`AsyncLock`); ``timeout`` bounds the wait for it.

    Raises:
        LockConfigError: any invalid argument (before any I/O).
    """

    __slots__ = ("_client", "_core", "_options")

    def __init__(
        self,
        client: _flavour.Client,
        name: str,
        *,
        period: float = DEFAULT_PERIOD,
        key: str | None = None,
        **options: Unpack[LockKwargs[AsyncLock]],
    ) -> None:
        AsyncLock(client, name, **options)  # checks the client and the options
        self._core = OnceCore.create(name, period, key, options.get("prefix", DEFAULT_PREFIX))
        self._client = client
        self._options = options

    @property
    def name(self) -> str:
        """The job's name (and its lock's)."""
        return self._core.name

    @property
    def period(self) -> float:
        """The period's length in seconds."""
        return self._core.period

    @property
    def key(self) -> str | None:
        """The explicit period key, or None (periods aligned on UTC multiples)."""
        return self._core.key

    def current_key(self) -> str:
        """The key of the period now by THIS host's clock (the explicit key, or the aligned
        period's start in UTC, ``2026-11-23T00:00:00Z``); no I/O. :meth:`run` and
        :meth:`done` use the server's clock instead, which every host shares."""
        return self._core.current(time.time())[0]

    async def done(self) -> OnceRecord | None:
        """The record of the current period's run, or None if it has not run (one GET).

        Raises:
            UnexpectedReplyError: the record key holds something else.
            redis.exceptions.RedisError: Redis failed.
        """
        return await run(self._client, self._core.peek_now_flow())

    def run(self, timeout: float | None = None) -> AsyncOnceTurn:
        """This caller's turn for the current period, to use with ``async with`` (no I/O
        until then).

        Args:
            timeout: seconds to wait for the lock; None: the ``timeout`` option (default
                no limit); 0: one try.
        """
        lock = AsyncLock(self._client, self._core.name, **self._options)
        return AsyncOnceTurn(self._client, self._core, lock, timeout)

    def __repr__(self) -> str:
        which = self._core.key or f"every {self._core.period:g} s"
        return f"<{type(self).__name__} {self.name!r} {which}>"


class AsyncOnceTurn(AsyncBlock):
    """One caller's turn of an :class:`AsyncOnce` for one period (from :meth:`AsyncOnce.run`).

    Attributes:
        key: the period key: set when the turn starts, from the server's clock ("" until
            then; an explicit key from the outset).
        mine: whether this caller must run the job (it then holds the lock until the end of
            the ``async with`` block).
        record: who ran the job of the period: the winner's record when ``mine`` is False;
            when ``mine``, None until the run's own record is written at the end of the
            block.
        lock: the :class:`AsyncLock` held while ``mine`` (its ``fencing_token`` is the one
            the record keeps).
    """

    __slots__ = ("_client", "_core", "_timeout", "_ttl_ms", "key", "lock", "mine", "record")

    def __init__(self, client: Any, core: OnceCore, lock: AsyncLock, timeout: float | None) -> None:
        self._client = client
        self._core = core
        self._timeout = timeout
        self.key = core.key or ""  # the period: set by start(), from the server's clock
        self._ttl_ms = 0
        self.lock = lock
        self.mine = False
        self.record: OnceRecord | None = None

    async def start(self) -> Self:
        """Decide: look for the record; without one, take the lock (waiting) and look again.

        Returns:
            This turn: ``mine`` True (the lock is held) or False (``record`` says who ran it).

        Raises:
            LockConfigError: a bad ``timeout`` (before any I/O).
            LockUsageError: the turn was started before.
            AcquireTimeoutError: the wait for the lock timed out.
            UnexpectedReplyError: the record key holds something else.
            redis.exceptions.RedisError: Redis failed (nothing is held).
        """
        if self.mine or self.record is not None:
            raise LockUsageError("an AsyncOnce turn can be started once")
        core, client = self._core, self._client
        self.key, self._ttl_ms = await run(client, core.period_flow())
        self.record = await run(client, core.peek_flow(self.key))
        if self.record is not None:
            return self
        begun = time.monotonic()
        if not await self.lock.acquire(timeout=self._timeout):
            raise AcquireTimeoutError(core.name, time.monotonic() - begun)
        try:
            self.record = await run(client, core.peek_flow(self.key))
        except BaseException:
            with contextlib.suppress(Exception):
                await self.lock.release()
            raise
        if self.record is not None:
            await self.lock.release()
        else:
            self.mine = True
        return self

    async def commit(self) -> OnceRecord:
        """Write the record of this caller's run (owner-checked: only while the lock is still
        this caller's). The lock stays held.

        Returns:
            The record written (or, if the period had one already, that one).

        Raises:
            LockUsageError: the turn is not this caller's.
            LockLostError: the lease was lost: nothing was written, the next caller runs
                the job again.
            redis.exceptions.RedisError: Redis failed (the record may not be written).
        """
        token, fence = self.lock.token, self.lock.fencing_token
        if not self.mine or token is None or fence is None:
            raise LockUsageError("commit() needs a turn that is this caller's, still held")
        flow = self._core.record_flow(token, fence, self.key, self._ttl_ms)
        try:
            _, record = await run(self._client, flow)
        except LockLostError as exc:  # found by the record's owner check: told as any loss
            core = self.lock._core
            if core.holding is not None:
                core.mark_lost(core.holding, exc.reason)
            raise
        self.record = record
        return record

    async def __aenter__(self) -> Self:
        return await self.start()

    async def _end(self, exc: BaseException | None) -> None:
        if not self.mine:
            return
        if exc is not None:  # the job failed: nothing is written
            with noting(exc, f"releasing lock {self.lock.name!r}"):
                await self.lock.release()
            return
        try:
            await self.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                await self.lock.release()
            raise
        # The record is written: a lease that ran out since changes nothing.
        with contextlib.suppress(NotOwnedError):
            await self.lock.release()

    def __repr__(self) -> str:
        state = "mine" if self.mine else ("done" if self.record else "undecided")
        return f"<{type(self).__name__} {self._core.name!r} {self.key} {state}>"
