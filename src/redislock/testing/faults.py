# SPDX-License-Identifier: MIT
"""Seeded fault schedules and the nemesis that plays them.

A schedule is a pure function of its seed: :func:`make_schedule` draws every fault's start,
kind, target, duration and parameters from ``random.Random(seed)``, so a run is replayed by
running it again with the same seed (the faults land at the same offsets on the same
targets; thread interleavings and network timing are not replayed).

Faults come in two lanes that run side by side, each one fault at a time with a quiet gap
between faults (Jepsen's alternating start/stop nemesis):

* the client lane hits one worker process or its connections:

  - ``client_pause``: SIGSTOP, then SIGCONT after ``duration`` seconds (GC pause, VM stall:
    the worker's watchdog stops with it);
  - ``client_kill``: SIGKILL (a crash at whatever point the worker was; the runner starts a
    new worker in its slot);
  - ``client_crash_unreplied``: a crash point: the replies from one server to the worker
    are dropped, and the moment one is (a command, an acquire script say, ran on the server
    and its reply will never be read) the worker is SIGKILLed; if none comes within the
    fault's length, nothing is killed (``params["crashed"]`` says which);
  - ``proxy_blackhole``, ``proxy_reset``, ``proxy_delay``, ``proxy_drop_reply``,
    ``proxy_lose_reply``: the fault proxy between that worker and one server (see
    :mod:`redislock.testing.proxy`); ``lose_reply`` loses one reply after the command
    took effect and resets the connection, so redis-py sends the command again: a double
    effect (time added twice, a count taken twice, a false loss) shows in the checks;

* the server lane hits one server (for Redlock, a minority: one master at a time):

  - ``server_pause``: SIGSTOP / SIGCONT of redis-server;
  - ``server_debug_sleep``: ``DEBUG SLEEP`` (needs ``--enable-debug-command local`` on
    Redis >= 7);
  - ``server_client_pause``: ``CLIENT PAUSE <ms> WRITE`` (every script waits);
  - ``server_restart``: SIGKILL and restart; the server keeps or loses its data as its
    persistence says (``appendonly yes`` + ``appendfsync always``, or none);
    ``params["delay"]`` seconds pass before the restart;
  - ``script_flush``: ``SCRIPT FLUSH`` (the next EVALSHA gets NOSCRIPT);
  - ``server_clock_jump``: the server's wall clock steps by ``params["jump"]`` seconds
    (forward if positive, back if negative; 0.5 to 3 leases either way) and steps back to
    the real time after ``duration`` seconds. The heal is a jump too, of the opposite sign:
    keys written during a forward jump live that much longer after it, and a backward jump
    heals forward. Redis expires keys (and the hash kinds' holds, and BLPOP timeouts) by
    the wall clock, so a forward jump past a lease ends the hold at once. The servers run
    under libfaketime (``RedisProcess(clock_file=...)``, Debian package ``faketime``), so
    this kind is not in :data:`DEFAULT_FAULTS`.

Every fault applied is logged as one JSON line (see ``/docs/torture.md``): ``t0``/``t1``
(``time.monotonic()`` seconds when it started and healed), ``kind``, ``target``, ``pid``,
``w``, ``params``; a ``client_kill`` adds ``t_death``; for ``server_clock_jump`` ``t0`` is
when the clock stepped by ``params["jump"]`` and ``t1`` when it stepped back.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from redislock._core.kinds import KINDS
from redislock.testing.history import JsonlWriter

__all__ = [
    "ALL_FAULTS",
    "CLIENT_FAULTS",
    "CLOCK_FAULTS",
    "CONTROLS",
    "DEFAULT_FAULTS",
    "FLAVOURS",
    "MULTI_SCENARIOS",
    "QUORUM_SCENARIOS",
    "SCENARIOS",
    "SERVER_FAULTS",
    "FaultEvent",
    "FaultTargets",
    "Nemesis",
    "make_schedule",
]

#: What a torture run locks (see :mod:`redislock.testing.torture`): the kinds table's
#: scenarios (:data:`redislock._core.kinds.KINDS`, ``torture``), in its order.
SCENARIOS = tuple(row.torture for row in KINDS if row.torture is not None)
#: Scenarios over several masters (Redlock's quorum).
QUORUM_SCENARIOS = tuple(
    row.torture for row in KINDS if row.torture is not None and row.clients == "masters"
)
#: Scenarios that lock two names at a time (each logged as a hold of its own).
MULTI_SCENARIOS = tuple(
    row.torture for row in KINDS if row.torture is not None and row.names == "several"
)
#: Worker flavours: every worker sync, every worker asyncio, or both (odd ids asyncio).
FLAVOURS = ("both", "sync", "asyncio")
#: The negative controls: runs that must report violations.
CONTROLS = (
    "broken-release",
    "unfenced-pause",
    "redlock-restart",
    "election-unfenced",
    "once-mutex",
)

CLIENT_FAULTS = (
    "client_pause",
    "client_kill",
    "proxy_blackhole",
    "proxy_reset",
    "proxy_delay",
    "proxy_drop_reply",
    "proxy_lose_reply",
    "client_crash_unreplied",
)
SERVER_FAULTS = (
    "server_pause",
    "server_debug_sleep",
    "server_client_pause",
    "server_restart",
    "script_flush",
    "server_clock_jump",
)
ALL_FAULTS = CLIENT_FAULTS + SERVER_FAULTS
#: The kinds that need the servers to run under libfaketime.
CLOCK_FAULTS = ("server_clock_jump",)
#: What a run injects unless told otherwise: every kind but :data:`CLOCK_FAULTS`.
DEFAULT_FAULTS = tuple(k for k in ALL_FAULTS if k not in CLOCK_FAULTS)

# Fault lengths as multiples of the lease (the table under "Faults" in docs/torture.md).
_SPANS: dict[str, tuple[float, float]] = {
    "client_pause": (0.5, 3.0),
    "client_kill": (0.0, 0.0),
    "proxy_blackhole": (0.1, 2.0),
    "proxy_reset": (0.1, 2.0),
    "proxy_delay": (0.1, 2.0),
    "proxy_drop_reply": (0.1, 2.0),
    "proxy_lose_reply": (0.05, 0.5),
    "client_crash_unreplied": (0.5, 2.0),  # how long to wait for a command to land
    "server_pause": (0.2, 2.0),
    "server_debug_sleep": (0.2, 2.0),
    "server_client_pause": (0.2, 2.0),
    "server_restart": (0.0, 0.0),
    "script_flush": (0.0, 0.0),
    "server_clock_jump": (0.5, 3.0),
}
#: How far a ``server_clock_jump`` moves the clock, as multiples of the lease, either way.
_JUMP = (0.5, 3.0)


@dataclass(frozen=True)
class FaultEvent:
    """One scheduled fault.

    Attributes:
        at: start, in seconds after the run started.
        kind: one of :data:`ALL_FAULTS`.
        target: worker slot (client lane) or server index (server lane).
        duration: how long the fault lasts, in seconds (0 for instant faults).
        server: for proxy faults, the server whose proxy is hit (Redlock: one master).
        params: extra parameters: ``delay`` (seconds) for ``proxy_delay`` and for a
            delayed ``server_restart``; ``jump`` (seconds, signed) for
            ``server_clock_jump``.
    """

    at: float
    kind: str
    target: int
    duration: float
    server: int = 0
    params: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def make_schedule(
    seed: int,
    *,
    duration: float,
    kinds: Sequence[str],
    slots: int,
    servers: int,
    lease: float,
    gap: tuple[float, float] = (0.2, 1.0),
    restart_delay: float = 0.0,
) -> list[FaultEvent]:
    """The fault schedule of a run: a pure function of its arguments.

    Args:
        seed: the run's seed.
        duration: length of the run in seconds; no fault starts after it.
        kinds: the fault kinds to draw from (subset of :data:`ALL_FAULTS`); client and
            server kinds go to their own lanes.
        slots: number of worker slots (client targets).
        servers: number of servers (server targets; proxy faults pick one).
        lease: the lock lease in seconds; fault lengths are drawn as multiples of it.
        gap: quiet time between two faults of one lane, drawn uniformly, in seconds.
        restart_delay: seconds a restarted server stays down (0: restart at once; a
            Redlock master without persistence is only safe with at least the longest
            lease, per the Redis distlock page).

    Returns:
        The events sorted by start time.

    Raises:
        ValueError: an unknown kind, or a non-positive duration, lease, slots or servers.
    """
    unknown = sorted(set(kinds) - set(ALL_FAULTS))
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {', '.join(ALL_FAULTS)}")
    if duration <= 0 or lease <= 0 or slots < 1 or servers < 1:
        raise ValueError("duration and lease must be > 0, slots and servers >= 1")
    rng = random.Random(seed)
    events: list[FaultEvent] = []
    for lane in (CLIENT_FAULTS, SERVER_FAULTS):
        pool = [k for k in ALL_FAULTS if k in lane and k in kinds]
        if not pool:
            continue
        now = rng.uniform(*gap)
        while now < duration:
            kind = rng.choice(pool)
            low, high = _SPANS[kind]
            length = rng.uniform(low, high) * lease
            target = rng.randrange(slots if lane is CLIENT_FAULTS else servers)
            via_proxy = kind.startswith("proxy_") or kind == "client_crash_unreplied"
            server = rng.randrange(servers) if via_proxy else target
            params: dict[str, float] = {}
            if kind == "proxy_delay":
                params["delay"] = rng.uniform(0.05, 0.5) * lease
            if kind == "server_restart":
                params["delay"] = restart_delay
            if kind == "server_clock_jump":
                sign = rng.choice((1.0, -1.0))
                params["jump"] = round(sign * rng.uniform(*_JUMP) * lease, 3)
            events.append(FaultEvent(round(now, 4), kind, target, round(length, 4), server, params))
            now += length + params.get("delay", 0.0) + rng.uniform(*gap)
    events.sort(key=lambda e: (e.at, e.kind))
    return events


class FaultTargets(Protocol):
    """What the nemesis acts on; the torture runner implements it."""

    def worker_pid(self, slot: int) -> tuple[int, int] | None:
        """``(worker id, pid)`` of the live worker in ``slot``, or None."""

    def kill_worker(self, slot: int) -> tuple[int, int, float] | None:
        """SIGKILL the worker in ``slot``: ``(worker id, pid, t_death)`` or None."""

    def set_proxy_fault(self, slot: int, server: int, kind: str, delay: float) -> None:
        """Set the fault of the proxy between worker ``slot`` and ``server``."""

    def dropped_replies(self, slot: int, server: int) -> int:
        """Reply bytes the proxy between worker ``slot`` and ``server`` dropped so far."""

    def server_pid(self, server: int) -> int | None:
        """pid of redis-server ``server`` (None if it is not ours)."""

    def server_command(self, server: int, *args: Any, timeout: float = 5.0) -> object:
        """Run one admin command on ``server`` directly (not through a proxy)."""

    def restart_server(self, server: int, delay: float) -> None:
        """SIGKILL ``server``, wait ``delay`` seconds, start it again."""

    def set_server_clock(self, server: int, offset: float) -> None:
        """Set the wall clock of ``server`` to ``offset`` seconds from the real time."""


class Nemesis:
    """Plays a schedule against a :class:`FaultTargets`, one thread per lane.

    Args:
        targets: the workers, proxies and servers.
        schedule: from :func:`make_schedule`.
        log_path: the nemesis log (JSON lines).
        on_error: called with each exception a fault raised (the fault is logged with
            ``error``); the nemesis goes on.
    """

    def __init__(
        self,
        targets: FaultTargets,
        schedule: Sequence[FaultEvent],
        log_path: str,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> None:
        self._targets = targets
        self._lanes = [
            [e for e in schedule if e.kind in CLIENT_FAULTS],
            [e for e in schedule if e.kind in SERVER_FAULTS],
        ]
        self._log = JsonlWriter(log_path)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._on_error = on_error
        self._t_start = 0.0
        self.applied = 0
        self.errors: list[str] = []

    def start(self, t_start: float) -> None:
        """Start playing; event offsets count from ``t_start`` (``time.monotonic()``)."""
        self._t_start = t_start
        for i, lane in enumerate(self._lanes):
            thread = threading.Thread(
                target=self._play, args=(lane,), name=f"nemesis-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the faults under way have healed (no new fault starts)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        self._log.close()

    def _wait_until(self, when: float) -> bool:
        return not self._stop.wait(max(0.0, when - time.monotonic()))

    def _play(self, lane: list[FaultEvent]) -> None:
        for event in lane:
            if not self._wait_until(self._t_start + event.at):
                return
            record: dict[str, Any] = {
                "t0": time.monotonic(),
                "t1": None,
                "kind": event.kind,
                "target": "",
                "pid": None,
                "w": None,
                "params": dict(event.params),
            }
            try:
                self._apply(event, record)
            except Exception as exc:
                record["error"] = f"{type(exc).__name__}: {exc}"
                self.errors.append(record["error"])
                if self._on_error is not None:
                    self._on_error(exc)
            if record["t1"] is None:
                record["t1"] = time.monotonic()
            self.applied += 1
            self._log.write(record)

    @staticmethod
    def _hold(seconds: float) -> None:
        # A fault always heals, even when the run is being stopped: sleep its length out
        # (bounded by the schedule) rather than leave a worker or server stopped.
        time.sleep(seconds)

    def _pause(self, pid: int, seconds: float) -> None:
        """SIGSTOP ``pid``, hold the fault for ``seconds``, then SIGCONT it (if it still
        exists)."""
        os.kill(pid, signal.SIGSTOP)
        try:
            self._hold(seconds)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def _apply(self, event: FaultEvent, record: dict[str, Any]) -> None:
        t = self._targets
        kind = event.kind
        if kind.startswith(("client_", "proxy_")):
            found = t.worker_pid(event.target)
            record["target"] = f"worker:{event.target}"
            if found is not None:
                record["w"], record["pid"] = found
        if kind == "client_pause":
            if record["pid"] is None:
                return
            self._pause(record["pid"], event.duration)
        elif kind == "client_kill":
            killed = t.kill_worker(event.target)
            if killed is not None:
                record["w"], record["pid"], record["t_death"] = killed
        elif kind == "client_crash_unreplied":
            record["target"] = f"worker:{event.target}:{event.server}"
            self._crash_unreplied(event, record)
        elif kind.startswith("proxy_"):
            record["target"] = f"proxy:{event.target}:{event.server}"
            mode = kind.removeprefix("proxy_")
            t.set_proxy_fault(event.target, event.server, mode, event.params.get("delay", 0.0))
            try:
                self._hold(event.duration)
            finally:
                t.set_proxy_fault(event.target, event.server, "pass", 0.0)
        else:
            self._apply_server(event, record)

    def _crash_unreplied(self, event: FaultEvent, record: dict[str, Any]) -> None:
        """Drop the replies of one server to the worker; SIGKILL the worker as soon as one
        is dropped (within ``event.duration`` seconds), then let replies pass again."""
        t = self._targets
        record["params"]["crashed"] = 0.0
        if record["pid"] is None:
            return
        before = t.dropped_replies(event.target, event.server)
        t.set_proxy_fault(event.target, event.server, "drop_reply", 0.0)
        try:
            deadline = time.monotonic() + event.duration
            while time.monotonic() < deadline:
                if t.dropped_replies(event.target, event.server) > before:
                    killed = t.kill_worker(event.target)
                    if killed is not None:
                        record["w"], record["pid"], record["t_death"] = killed
                        record["params"]["crashed"] = 1.0
                    return
                time.sleep(0.001)
        finally:
            t.set_proxy_fault(event.target, event.server, "pass", 0.0)

    def _apply_server(self, event: FaultEvent, record: dict[str, Any]) -> None:
        t = self._targets
        kind = event.kind
        record["target"] = f"server:{event.target}"
        record["pid"] = t.server_pid(event.target)
        if kind == "server_pause":
            if record["pid"] is None:
                raise RuntimeError("server_pause needs a server started by the runner")
            self._pause(record["pid"], event.duration)
        elif kind == "server_debug_sleep":
            t.server_command(
                event.target, "DEBUG", "SLEEP", f"{event.duration:.3f}", timeout=event.duration + 5
            )
        elif kind == "server_client_pause":
            ms = max(1, round(event.duration * 1000))
            t.server_command(event.target, "CLIENT", "PAUSE", str(ms), "WRITE")
            self._hold(event.duration)
        elif kind == "server_restart":
            t.restart_server(event.target, event.params.get("delay", 0.0))
        elif kind == "script_flush":
            t.server_command(event.target, "SCRIPT", "FLUSH")
        elif kind == "server_clock_jump":
            record["t0"] = time.monotonic()
            t.set_server_clock(event.target, event.params["jump"])
            try:
                self._hold(event.duration)
            finally:
                t.set_server_clock(event.target, 0.0)  # itself a jump, the other way
                record["t1"] = time.monotonic()
        else:  # pragma: no cover - make_schedule validates kinds
            raise ValueError(f"unknown fault kind {kind!r}")
