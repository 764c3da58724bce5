# SPDX-License-Identifier: MIT
"""One torture worker process: lock cycles against the fault proxies, logged to a history.

Started by the runner as ``python -m redislock.testing.worker CONFIG SLOT W`` so that
SIGSTOP and SIGKILL hit exactly one client (its watchdog included). Each cycle:

1. pick a lock name (seeded), log ``acquire`` invoke;
2. acquire with a wait limit; log ok (with the fencing token), fail or unknown;
3. on ok: write ``begin`` to the oracle with the token, do the critical section (a sleep,
   or the user's section), write ``end``;
4. release; log ok, fail (``LockLostError``: also a loss notification) or unknown.

RLock cycles re-enter once half of the time; ReadWriteLock cycles read 70 % of the time;
Semaphore cycles take one permit. Loss notifications (``on_lost``) are logged as ``lost``
events with the hold id. The worker stops at the end of the cycle in which the stop file
appears. Negative controls (see :mod:`redislock.testing.torture`): ``broken-release``
releases with a plain ``DEL`` (no owner check).
"""

from __future__ import annotations

import importlib
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from redislock import (
    AcquireTimeoutError,
    LockLostError,
    ReadWriteLock,
    Redlock,
    RLock,
    Semaphore,
)
from redislock import Lock as _Lock
from redislock._core.keys import LockKeys
from redislock.testing.history import History
from redislock.testing.oracle import OracleClient

__all__ = ["main"]

_UNKNOWN = (redis.exceptions.TimeoutError, redis.exceptions.ConnectionError)


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


class Worker:
    """The cycle loop of one worker process (see the module docstring)."""

    def __init__(self, cfg: dict[str, Any], slot: int, w: int) -> None:
        self.cfg = cfg
        self.slot = slot
        self.w = w
        self.rng = random.Random(f"{cfg['seed']}:{w}")
        self.hist = History(Path(cfg["directory"]) / f"history-{w}.jsonl", w)
        self.oracle = OracleClient(cfg["oracle"], timeout=10.0)
        self.stop_path = Path(cfg["stop_file"])
        self.names: list[str] = list(cfg["names"])
        self.lease = float(cfg["lease"])
        self.scenario: str = cfg["scenario"]
        self.control: str | None = cfg.get("control")
        self.work = tuple(cfg["work"])
        timeout = float(cfg["socket_timeout"])
        self.clients = [
            redis.Redis(
                host=host,
                port=port,
                # redis-py's default retry policy, as users run it (a command whose reply
                # was lost is sent again); only the timeouts are the run's setting
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                single_connection_client=False,
            )
            for host, port in cfg["proxies"][str(slot)]
        ]
        self.current: dict[int, tuple[str, str, str]] = {}  # id(lock obj) -> hold, name, mode
        self.locks: dict[tuple[str, str], Any] = {}
        self.section: Callable[[str, int], object] | None = None
        if cfg.get("section"):
            module, _, attr = str(cfg["section"]).partition(":")
            self.section = getattr(importlib.import_module(module), attr)

    # ----------------------------------------------------------------- lock objects

    def _on_lost(self, obj: Any) -> None:
        entry = self.current.get(id(obj))
        if entry is not None:
            hold, name, mode = entry
            self.hist.lost(hold, name, mode, err="on_lost")

    def _lock(self, name: str, mode: str) -> Any:
        key = (name, mode)
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
        if s == "lock":
            lock = _Lock(self.clients[0], name, **common)
        elif s == "rlock":
            lock = RLock(self.clients[0], name, **common)
        elif s == "rwlock":
            rw = ReadWriteLock(self.clients[0], name, **common)
            lock = rw.read() if mode == "s" else rw.write()
        elif s == "semaphore":
            lock = Semaphore(self.clients[0], name, permits=int(self.cfg["permits"]), **common)
        elif s == "redlock":
            lock = Redlock(self.clients, name, **common)
        else:
            raise ValueError(f"unknown scenario {s!r}")
        self.locks[key] = lock
        return lock

    # ----------------------------------------------------------------- one cycle

    def _acquire(self, lock: Any, hold: str, name: str, mode: str) -> Any:
        """The held object (the lock, or a Permit), or None."""
        limit = float(self.cfg["acquire_timeout"])
        self.hist.invoke("acquire", hold, name, mode)
        try:
            if isinstance(lock, Semaphore):
                held: Any = lock.acquire(timeout=limit)  # a Permit
            else:
                held = lock if lock.acquire(timeout=limit) else None
        except AcquireTimeoutError:
            held = None
        except _UNKNOWN as exc:
            self.hist.complete("acquire", hold, name, mode, "unknown", err=_err(exc))
            return None
        except Exception as exc:
            self.hist.complete("acquire", hold, name, mode, "fail", err=_err(exc))
            return None
        if held is None:
            self.hist.complete("acquire", hold, name, mode, "fail", err="busy: wait limit")
            return None
        self.current[id(held)] = (hold, name, mode)
        self.hist.complete("acquire", hold, name, mode, "ok", fence=held.fencing_token)
        return held

    def _release(self, held: Any, hold: str, name: str, mode: str, op: str = "release") -> None:
        self.hist.invoke(op, hold, name, mode)
        try:
            if self.control == "broken-release":
                # Negative control: a release that does not check the owner (the bug of
                # redis-py#818-era recipes). It deletes whoever holds the key now.
                # detach() raises LockLostError when the watchdog already saw the loss:
                # the broken release then deletes anyway, which is the bug on show.
                try:
                    held.detach()
                finally:
                    self.clients[0].delete(LockKeys.for_name(name, self.cfg["prefix"]).lock)
            else:
                held.release()
        except LockLostError as exc:
            self.hist.complete(op, hold, name, mode, "fail", err=_err(exc))
            self.hist.lost(hold, name, mode, err=f"{op}: LockLostError")
        except _UNKNOWN as exc:
            # The hold is kept (and renewed) after a failed release: try again, as a user
            # would, until Redis answers (faults heal) or the stop file appears.
            self.hist.complete(op, hold, name, mode, "unknown", err=_err(exc))
            if self.control != "broken-release" and not self.stop_path.exists():
                time.sleep(0.05)
                self._release(held, hold, name, mode, op)
                return
        except Exception as exc:
            self.hist.complete(op, hold, name, mode, "fail", err=_err(exc))
        else:
            self.hist.complete(op, hold, name, mode, "ok")
        if op == "release":
            self.current.pop(id(held), None)

    def _work(self) -> float:
        """Seconds of critical section: mostly short, a share long enough (0.2 to 1.5 leases)
        that the watchdog must renew while faults hit."""
        if self.rng.random() < float(self.cfg["long_share"]):
            return self.rng.uniform(0.2, 1.5) * self.lease
        return self.rng.uniform(*self.work)

    def _write(self, name: str, fence: int, hold: str, phase: str, mode: str) -> None:
        self.oracle.write(name, fence, hold, self.w, phase, mode)

    def cycle(self) -> None:
        name = self.rng.choice(self.names)
        mode = {"rwlock": "s" if self.rng.random() < 0.7 else "x", "semaphore": "p"}.get(
            self.scenario, "x"
        )
        lock = self._lock(name, mode)
        hold = self.hist.new_hold()
        held = self._acquire(lock, hold, name, mode)
        if held is None:
            time.sleep(self.rng.uniform(0, 0.01))
            return
        fence = int(held.fencing_token or 0)
        reenter = self.scenario == "rlock" and self.rng.random() < 0.5
        try:
            self._write(name, fence, hold, "begin", mode)
            if reenter:
                self._reenter(held, hold, name, mode)
            if self.section is not None:
                self.section(name, fence)
            else:
                time.sleep(self._work())
            self._write(name, fence, hold, "end", mode)
        finally:
            self._release(held, hold, name, mode)

    def _reenter(self, lock: Any, hold: str, name: str, mode: str) -> None:
        self.hist.invoke("reenter", hold, name, mode)
        try:
            ok = lock.acquire(timeout=0)
        except _UNKNOWN as exc:
            self.hist.complete("reenter", hold, name, mode, "unknown", err=_err(exc))
            return
        except Exception as exc:
            self.hist.complete("reenter", hold, name, mode, "fail", err=_err(exc))
            return
        if not ok:
            self.hist.complete("reenter", hold, name, mode, "fail", err="refused")
            return
        self.hist.complete("reenter", hold, name, mode, "ok", fence=lock.fencing_token)
        time.sleep(self._work() / 2)
        self._release(lock, hold, name, mode, op="release_inner")

    def run(self) -> None:
        while not self.stop_path.exists():
            self.cycle()


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m redislock.testing.worker CONFIG SLOT W``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m redislock.testing.worker CONFIG SLOT W", file=sys.stderr)
        return 64
    cfg = json.loads(Path(args[0]).read_text())
    Worker(cfg, int(args[1]), int(args[2])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
