# SPDX-License-Identifier: MIT
"""One torture worker process: lock cycles against the fault proxies, logged to a history.

Started by the runner as ``python -m redislock.testing.worker CONFIG SLOT W`` so that
SIGSTOP and SIGKILL hit exactly one client (its watchdog included). Each cycle:

1. pick a lock name (seeded; two distinct names for MultiLock and MultiRedlock), log
   ``acquire`` invoke;
2. acquire with a wait limit; log ok (with the fencing token), fail or unknown;
3. on ok: write ``begin`` to the oracle with the token, do the critical section (a sleep,
   or the user's section), write ``end``;
4. release; log ok, fail (``LockLostError``: also a loss notification) or unknown.

RLock cycles re-enter once half of the time; ReadWriteLock cycles read 70 % of the time;
Semaphore cycles take one permit. A MultiLock or MultiRedlock hold is logged as one hold per
name (its own hold id, the name's fencing token), so every check reads it as it reads single
locks. Loss notifications (``on_lost``) are logged as ``lost`` events with the hold id. The
worker stops at the end of the cycle in which the stop file appears. Negative controls (see
:mod:`redislock.testing.torture`): ``broken-release`` releases with a plain ``DEL`` (no
owner check).

Election and Once (scenarios ``election`` and ``once``) have cycles of their own, which also
append one record per act to ``acts-<w>.jsonl`` (see "Election" and "Once" in
``docs/torture.md``):

* ``election``: campaign (``Election.campaign``, identity ``w<W>``) on one name, logged as an
  acquire whose fence is the term; as leader, write ``begin`` / ``end`` to the oracle with
  the term as fencing token, read ``leader()`` once (an act record ``leader`` with the
  identity and term it reported, stamped before and after the call), then resign (logged as
  the release; ``LockLostError`` is a loss). Control ``election-unfenced``: the same against
  an oracle that does not check tokens.
* ``once``: ``Once.run()`` for the current period (half the cycles an explicit key that
  rotates every half second, ``period=60``; half aligned periods of 1 second); when the turn is
  this worker's (logged as an acquire with the lock's fence), the job writes ``begin`` /
  ``end`` to the oracle and fails on purpose (raises) a quarter of the time; an act record
  ``once`` gives the period key, the fence and the outcome (``ok``: the record written is
  this run's; ``ok-foreign``: the block ended well but the record is another run's;
  ``failed``; ``lost``; ``unknown``; ``error``; ``skipped``: someone had run it, with the
  record's fence). Control ``once-mutex``: the job runs under a plain Lock, without looking
  for a record (a mutex is not once-per-period), and every run that ends well counts as
  ``ok``.

Flavour: a worker is sync or asyncio (the config's ``flavour``: ``sync``, ``asyncio``, or
``both``, which makes odd worker ids asyncio). Both run the same cycle, a coroutine on one
event loop: a sync lock's calls return values, an asyncio lock's return awaitables, and
:meth:`Worker.do` takes either; so a cycle is one task, which is what an ``AsyncRLock``'s
re-entry needs, and a sync lock's watchdog runs in its own thread as usual.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

import redislock
from redislock import AcquireTimeoutError, LockLostError
from redislock._core.keys import LockKeys
from redislock._core.kinds import KINDS
from redislock.testing.faults import MULTI_SCENARIOS, QUORUM_SCENARIOS
from redislock.testing.history import History, JsonlWriter
from redislock.testing.oracle import OracleClient

__all__ = ["main"]

_UNKNOWN = (redis.exceptions.TimeoutError, redis.exceptions.ConnectionError)

_CLASSES = {row.torture: row.uses or row.name for row in KINDS if row.torture is not None}
"""Scenario -> the lock class (``Async`` + it for an asyncio worker), from the kinds table:
the kind's own class, or the one whose lock it holds (the ``once`` scenario's once-mutex
control runs a plain Lock; ``election`` and ``once`` cycles build their own objects)."""


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def is_asyncio(flavour: str, w: int) -> bool:
    """Whether worker ``w`` is an asyncio worker under the config's ``flavour``."""
    return flavour == "asyncio" or (flavour == "both" and w % 2 == 1)


Part = tuple[str, str]
"""One name of a hold: (hold id, lock name)."""


class Worker:
    """The cycle loop of one worker process (see the module docstring)."""

    def __init__(self, cfg: dict[str, Any], slot: int, w: int) -> None:
        self.cfg = cfg
        self.slot = slot
        self.w = w
        self.rng = random.Random(f"{cfg['seed']}:{w}")
        self.hist = History(Path(cfg["directory"]) / f"history-{w}.jsonl", w)
        self.acts: JsonlWriter | None = None
        if cfg["scenario"] in ("election", "once"):
            self.acts = JsonlWriter(Path(cfg["directory"]) / f"acts-{w}.jsonl")
        self.oracle = OracleClient(cfg["oracle"], timeout=10.0)
        self.stop_path = Path(cfg["stop_file"])
        self.names: list[str] = list(cfg["names"])
        self.lease = float(cfg["lease"])
        self.scenario: str = cfg["scenario"]
        self.control: str | None = cfg.get("control")
        self.work = tuple(cfg["work"])
        self.asyncio = is_asyncio(str(cfg.get("flavour", "sync")), w)
        # redis-py's default client, as users run it (its retry policy sends a command again
        # when the reply was lost); a run may set the socket timeouts (None: redis-py's)
        timeout = cfg.get("socket_timeout")
        kwargs: dict[str, Any] = {}
        if timeout is not None:
            kwargs = {"socket_timeout": float(timeout), "socket_connect_timeout": float(timeout)}
        client_class: Any = redis.asyncio.Redis if self.asyncio else redis.Redis
        self.clients = [
            client_class(host=host, port=port, **kwargs) for host, port in cfg["proxies"][str(slot)]
        ]
        self.current: dict[int, tuple[list[Part], str]] = {}  # id(lock obj) -> parts, mode
        self.locks: dict[tuple[tuple[str, ...], str], Any] = {}
        self.section: Callable[[str, int], object] | None = None
        if cfg.get("section"):
            module, _, attr = str(cfg["section"]).partition(":")
            self.section = getattr(importlib.import_module(module), attr)

    @staticmethod
    async def do(value: Any) -> Any:
        """A lock call's result: awaited for an asyncio lock, as is for a sync one."""
        return await value if inspect.isawaitable(value) else value

    # ----------------------------------------------------------------- lock objects

    def _on_lost(self, obj: Any) -> None:
        entry = self.current.get(id(obj))
        if entry is not None:
            parts, mode = entry
            for hold, name in parts:
                self.hist.lost(hold, name, mode, err="on_lost")

    def _expect(self, obj: Any, parts: list[Part], mode: str) -> None:
        """Log an ``on_lost(obj)`` against ``parts`` from now on (before the acquiring call
        returns: see :meth:`_acquire`)."""
        self.current[id(obj)] = (parts, mode)

    def _lock(self, names: tuple[str, ...], mode: str) -> Any:
        key = (names, mode)
        lock = self.locks.get(key)
        if lock is not None:
            return lock
        common: dict[str, Any] = {
            "ttl": None,
            "watchdog_lease": self.lease,
            "on_lost": self._on_lost,
            "prefix": self.cfg["prefix"],
        }
        s = self.scenario
        if s not in _CLASSES:
            raise ValueError(f"unknown scenario {s!r}")
        cls = getattr(redislock, ("Async" if self.asyncio else "") + _CLASSES[s])
        where: Any = self.clients if s in QUORUM_SCENARIOS else self.clients[0]
        what: Any = list(names) if s in MULTI_SCENARIOS else names[0]
        if s == "rwlock":
            rw = cls(where, what, **common)
            lock = rw.read() if mode == "s" else rw.write()
        elif s == "semaphore":
            lock = cls(where, what, permits=int(self.cfg["permits"]), **common)
        else:
            lock = cls(where, what, **common)
        self.locks[key] = lock
        return lock

    # ----------------------------------------------------------------- one cycle

    def _fences(self, held: Any, parts: list[Part]) -> dict[str, int]:
        if self.scenario in MULTI_SCENARIOS:
            tokens = held.fencing_tokens or {}
            return {name: int(tokens.get(name) or 0) for _, name in parts}
        return {parts[0][1]: int(held.fencing_token or 0)}

    def _log(self, op: str, parts: list[Part], mode: str, phase: str, **kw: Any) -> None:
        for hold, name in parts:
            if phase == "invoke":
                self.hist.invoke(op, hold, name, mode)
            else:
                self.hist.complete(op, hold, name, mode, phase, **kw)

    def _acquire_failed(
        self, obj: Any, parts: list[Part], mode: str, exc: Exception | None
    ) -> None:
        """Log an acquire of ``obj`` that returned no hold: busy (``exc`` None, or
        :class:`AcquireTimeoutError`: the wait limit), unknown (a timeout or a lost
        connection: the hold may exist) or failed; an ``on_lost(obj)`` is not expected."""
        self.current.pop(id(obj), None)
        if exc is None or isinstance(exc, AcquireTimeoutError):
            self._log("acquire", parts, mode, "fail", err="busy: wait limit")
        else:
            phase = "unknown" if isinstance(exc, _UNKNOWN) else "fail"
            self._log("acquire", parts, mode, phase, err=_err(exc))

    async def _acquire(self, lock: Any, parts: list[Part], mode: str) -> Any:
        """The held object (the lock, or a Permit), or None."""
        limit = float(self.cfg["acquire_timeout"])
        self._log("acquire", parts, mode, "invoke")
        # on_lost may come before the call returns (a sync lock's watchdog thread, a reply
        # that came after the local lease estimate ran out): the hold is known from now on.
        # (A Semaphore's on_lost gets the Permit, which only the call returns.)
        if self.scenario != "semaphore":
            self._expect(lock, parts, mode)
        try:
            if self.scenario == "semaphore":
                held: Any = await self.do(lock.acquire(timeout=limit))  # a Permit
            else:
                held = lock if await self.do(lock.acquire(timeout=limit)) else None
        except AcquireTimeoutError:
            held = None
        except Exception as exc:
            self._acquire_failed(lock, parts, mode, exc)
            return None
        if held is None:
            self._acquire_failed(lock, parts, mode, None)
            return None
        self.current[id(held)] = (parts, mode)
        fences = self._fences(held, parts)
        for hold, name in parts:
            self.hist.complete("acquire", hold, name, mode, "ok", fence=fences[name])
        return held

    async def _release(self, held: Any, parts: list[Part], mode: str, op: str = "release") -> None:
        self._log(op, parts, mode, "invoke")
        try:
            if self.control == "broken-release":
                # Negative control: a release that does not check the owner (the bug of
                # redis-py#818-era recipes). It deletes whoever holds the key now.
                # detach() raises LockLostError when the watchdog already saw the loss:
                # the broken release then deletes anyway, which is the bug on show.
                try:
                    await self.do(held.detach())
                finally:
                    for _, name in parts:
                        key = LockKeys.for_name(name, self.cfg["prefix"]).lock
                        await self.do(self.clients[0].delete(key))
            else:
                await self.do(held.release())
        except LockLostError as exc:
            self._log(op, parts, mode, "fail", err=_err(exc))
            for hold, name in parts:
                self.hist.lost(hold, name, mode, err=f"{op}: LockLostError")
        except _UNKNOWN as exc:
            # The hold is kept (and renewed) after a failed release: try again, as a user
            # would, until Redis answers (faults heal) or the stop file appears.
            self._log(op, parts, mode, "unknown", err=_err(exc))
            if self.control != "broken-release" and not self.stop_path.exists():
                await asyncio.sleep(0.05)
                await self._release(held, parts, mode, op)
                return
        except Exception as exc:
            self._log(op, parts, mode, "fail", err=_err(exc))
        else:
            self._log(op, parts, mode, "ok")
        if op == "release":
            self.current.pop(id(held), None)

    def _work(self) -> float:
        """Seconds of critical section: mostly short, a share long enough (0.2 to 1.5 leases)
        that the watchdog must renew them while faults hit."""
        if self.rng.random() < float(self.cfg["long_share"]):
            return self.rng.uniform(0.2, 1.5) * self.lease
        return self.rng.uniform(*self.work)

    def _write(self, parts: list[Part], fences: dict[str, int], phase: str, mode: str) -> None:
        for hold, name in parts:
            self.oracle.write(name, fences[name], hold, self.w, phase, mode)

    async def cycle(self) -> None:
        if self.scenario == "election":
            await self.election_cycle()
            return
        if self.scenario == "once":
            await self.once_cycle()
            return
        if self.scenario in MULTI_SCENARIOS and len(self.names) >= 2:
            names = tuple(sorted(self.rng.sample(self.names, 2)))
        else:
            names = (self.rng.choice(self.names),)
        mode = {"rwlock": "s" if self.rng.random() < 0.7 else "x", "semaphore": "p"}.get(
            self.scenario, "x"
        )
        lock = self._lock(names, mode)
        parts = [(self.hist.new_hold(), name) for name in names]
        held = await self._acquire(lock, parts, mode)
        if held is None:
            await asyncio.sleep(self.rng.uniform(0, 0.01))
            return
        fences = self._fences(held, parts)
        reenter = self.scenario == "rlock" and self.rng.random() < 0.5
        try:
            self._write(parts, fences, "begin", mode)
            if reenter:
                await self._reenter(held, parts, mode)
            if self.section is not None:
                name = parts[0][1]  # in a thread: an asyncio lock's watchdog runs meanwhile
                await asyncio.to_thread(self.section, name, fences[name])
            else:
                await asyncio.sleep(self._work())
            self._write(parts, fences, "end", mode)
        finally:
            await self._release(held, parts, mode)

    async def _reenter(self, lock: Any, parts: list[Part], mode: str) -> None:
        self._log("reenter", parts, mode, "invoke")
        try:
            ok = await self.do(lock.acquire(timeout=0))
        except _UNKNOWN as exc:
            self._log("reenter", parts, mode, "unknown", err=_err(exc))
            return
        except Exception as exc:
            self._log("reenter", parts, mode, "fail", err=_err(exc))
            return
        if not ok:
            self._log("reenter", parts, mode, "fail", err="refused")
            return
        self._log("reenter", parts, mode, "ok", fence=lock.fencing_token)
        await asyncio.sleep(self._work() / 2)
        await self._release(lock, parts, mode, op="release_inner")

    # ----------------------------------------------------------------- election

    def _act(self, kind: str, **fields: Any) -> None:
        assert self.acts is not None
        self.acts.write({"kind": kind, "w": self.w, "pid": os.getpid(), **fields})

    def _election(self, name: str) -> Any:
        key = ((name,), "election")
        election = self.locks.get(key)
        if election is None:
            cls = redislock.AsyncElection if self.asyncio else redislock.Election
            election = cls(
                self.clients[0],
                name,
                identity=f"w{self.w}",
                ttl=None,
                watchdog_lease=self.lease,
                on_lost=self._on_lost,
                prefix=self.cfg["prefix"],
            )
            self.locks[key] = election
        return election

    async def election_cycle(self) -> None:
        """Campaign, act as leader with the term as fencing token, read leader(), resign."""
        name = self.rng.choice(self.names)
        election = self._election(name)
        parts = [(self.hist.new_hold(), name)]
        self._log("acquire", parts, "x", "invoke")
        campaign = election.campaign(timeout=float(self.cfg["acquire_timeout"]))
        # the lease may be lost (on_lost) while the campaign still advertises the leader
        self._expect(election, parts, "x")
        try:
            if self.asyncio:
                term = await campaign.__aenter__()
            else:
                term = campaign.__enter__()
        except Exception as exc:
            self._acquire_failed(election, parts, "x", exc)
            if isinstance(exc, AcquireTimeoutError):
                await asyncio.sleep(self.rng.uniform(0, 0.01))
            return
        self.hist.complete("acquire", parts[0][0], name, "x", "ok", fence=int(term))
        fences = {name: int(term)}
        self._write(parts, fences, "begin", "x")
        await asyncio.sleep(self._work())
        t0 = time.monotonic()
        try:
            info = await self.do(election.leader())
        except Exception as exc:
            self._act("leader", name=name, t=t0, t0=t0, t1=time.monotonic(), err=_err(exc))
        else:
            self._act(
                "leader",
                name=name,
                t=t0,
                t0=t0,
                t1=time.monotonic(),
                identity=None if info is None else info.identity,
                term=None if info is None else info.term,
                mine=int(term),
            )
        self._write(parts, fences, "end", "x")
        self._log("release", parts, "x", "invoke")
        try:
            if self.asyncio:
                await campaign.__aexit__(None, None, None)
            else:
                campaign.__exit__(None, None, None)
        except LockLostError as exc:
            self._log("release", parts, "x", "fail", err=_err(exc))
            self.hist.lost(parts[0][0], name, "x", err="release: LockLostError")
        except _UNKNOWN as exc:
            # resign() failed: this object still leads; resign again as a user would
            self._log("release", parts, "x", "unknown", err=_err(exc))
            if not self.stop_path.exists():
                await asyncio.sleep(0.05)
                await self._release(election, parts, "x")
                return
        except Exception as exc:
            self._log("release", parts, "x", "fail", err=_err(exc))
        else:
            self._log("release", parts, "x", "ok")
        self.current.pop(id(election), None)

    # ----------------------------------------------------------------- once

    async def once_cycle(self) -> None:
        """One caller's turn of a Once for the current period (see the module docstring)."""
        name = self.rng.choice(self.names)
        if self.rng.random() < 0.5:
            period, key = 60.0, f"k{int(time.time() * 2)}"
        else:
            period, key = 1.0, None
        options: dict[str, Any] = {
            "ttl": None,
            "watchdog_lease": self.lease,
            "on_lost": self._on_lost,
            "prefix": self.cfg["prefix"],
        }
        parts = [(self.hist.new_hold(), name)]
        limit = float(self.cfg["acquire_timeout"])
        if self.control == "once-mutex":
            await self._once_mutex(name, key or f"a{int(time.time())}", parts)
            return
        cls = redislock.AsyncOnce if self.asyncio else redislock.Once
        turn: Any = cls(self.clients[0], name, period=period, key=key, **options).run(timeout=limit)
        self._log("acquire", parts, "x", "invoke")
        lock = turn.lock
        # the lease may be lost (on_lost) while the turn still looks for the record again
        self._expect(lock, parts, "x")
        try:
            await self.do(turn.start())
        except Exception as exc:
            self._acquire_failed(lock, parts, "x", exc)
            return
        t = time.monotonic()
        if not turn.mine:
            self.current.pop(id(lock), None)
            fence = turn.record.fencing_token if turn.record is not None else None
            self._log("acquire", parts, "x", "fail", err=f"done: record of fence {fence}")
            self._act("once", name=name, key=turn.key, t=t, outcome="skipped", fence=fence)
            await asyncio.sleep(self.rng.uniform(0, 0.05))
            return
        fence = int(lock.fencing_token or 0)
        self.hist.complete("acquire", parts[0][0], name, "x", "ok", fence=fence)
        fences = {name: fence}
        self._write(parts, fences, "begin", "x")
        await asyncio.sleep(self._work())
        self._write(parts, fences, "end", "x")
        failed = self.rng.random() < 0.25
        err: BaseException | None = RuntimeError("the job failed on purpose") if failed else None
        self._log("release", parts, "x", "invoke")
        outcome = "failed"
        try:
            if err is not None:
                if self.asyncio:
                    await turn.__aexit__(RuntimeError, err, None)
                else:
                    turn.__exit__(RuntimeError, err, None)
            elif self.asyncio:
                await turn.__aexit__(None, None, None)
            else:
                turn.__exit__(None, None, None)
            if err is None:
                record = turn.record
                mine = record is not None and record.fencing_token == fence
                outcome = "ok" if mine else "ok-foreign"
            elif lock.lost:
                # The release found the lease lost: the turn keeps the job's own exception
                # and tells that in a note on it (and in ``lock.lost``), not by raising.
                notes = "; ".join(getattr(err, "__notes__", ()))
                raise LockLostError(name, f"the job failed; {notes}")
        except LockLostError as exc:
            if err is None:
                outcome = "lost"
            self._log("release", parts, "x", "fail", err=_err(exc))
            which = "commit" if err is None else "release"
            self.hist.lost(parts[0][0], name, "x", err=f"{which}: LockLostError")
        except _UNKNOWN as exc:
            outcome = "unknown"
            self._log("release", parts, "x", "unknown", err=_err(exc))
        except Exception as exc:
            outcome = "error"
            self._log("release", parts, "x", "fail", err=_err(exc))
        else:
            self._log("release", parts, "x", "ok")
        self.current.pop(id(lock), None)
        self._act(
            "once",
            name=name,
            key=turn.key,
            t=t,
            t_end=time.monotonic(),
            outcome=outcome,
            fence=fence,
        )

    async def _once_mutex(self, name: str, key: str, parts: list[Part]) -> None:
        """Negative control ``once-mutex``: the job under a plain Lock (what ``redislock run``
        gives), no record looked for; every run that ends is recorded as ``ok``."""
        lock = self._lock((name,), "x")
        held = await self._acquire(lock, parts, "x")
        if held is None:
            await asyncio.sleep(self.rng.uniform(0, 0.01))
            return
        t = time.monotonic()
        fence = int(held.fencing_token or 0)
        self._write(parts, {name: fence}, "begin", "x")
        await asyncio.sleep(self._work())
        self._write(parts, {name: fence}, "end", "x")
        await self._release(held, parts, "x")
        self._act(
            "once", name=name, key=key, t=t, t_end=time.monotonic(), outcome="ok", fence=fence
        )

    async def run(self) -> None:
        while not self.stop_path.exists():
            await self.cycle()


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m redislock.testing.worker CONFIG SLOT W``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m redislock.testing.worker CONFIG SLOT W", file=sys.stderr)
        return 64
    cfg = json.loads(Path(args[0]).read_text())
    asyncio.run(Worker(cfg, int(args[1]), int(args[2])).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
