# SPDX-License-Identifier: MIT
"""The torture run: servers, fault proxies, oracle, auditor, workers and nemesis, then checks.

:func:`run_torture` starts (or, with ``url``, reuses) the Redis servers, one fault proxy per
worker and server, the fenced oracle, the server-side auditor and ``processes`` worker
processes, plays a seeded fault schedule (:mod:`redislock.testing.faults`) while the
workers run lock cycles, then stops everything and checks the records
(:func:`redislock.testing.checkers.check_run`). Everything a run wrote stays in its
directory (``config.json``, ``schedule.json``, ``nemesis.jsonl``, ``history-*.jsonl``,
``oracle.jsonl``, ``audit.json``, ``report.json``, ``report.md`` and the servers' logs), and
``replay(directory)`` runs the same configuration and schedule again.

Negative controls (``control=``) are runs that MUST report violations, which shows the
checkers are not blind (see "Negative controls" in ``docs/torture.md``):

* ``broken-release``: releases delete the key without checking the owner, under client
  pauses longer than the lease: foreign touches and overlapping holders;
* ``unfenced-pause``: the oracle accepts writes without checking fencing tokens, under
  client pauses longer than the lease: stale writes accepted;
* ``redlock-restart``: Redlock over masters without persistence that restart at once
  (no delay of one lease, against the Redis distlock page's advice): overlapping holders;
* ``election-unfenced``: the ``election`` scenario against an oracle that does not check
  tokens, under client pauses longer than the lease: a deposed leader's acts accepted;
* ``once-mutex``: the ``once`` scenario with the job under a plain Lock instead of
  ``Once`` (no record of the period's run): two successful runs in one period.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import redis

from redislock._core.kinds import KINDS
from redislock._core.options import DEFAULT_WAITER_LEASE
from redislock.server import RedisProcess, find_redis_server
from redislock.testing.audit import Auditor
from redislock.testing.checkers import Line, Report, check_run, election_checks, once_checks
from redislock.testing.faults import (
    ALL_FAULTS,
    CLOCK_FAULTS,
    CONTROLS,
    DEFAULT_FAULTS,
    FLAVOURS,
    MULTI_SCENARIOS,
    QUORUM_SCENARIOS,
    SCENARIOS,
    SERVER_FAULTS,
    FaultEvent,
    Nemesis,
    make_schedule,
)
from redislock.testing.history import read_histories, read_jsonl
from redislock.testing.oracle import Oracle
from redislock.testing.proxy import FaultProxy, ProxyLoop

__all__ = [
    "CONTROLS",
    "QUORUM_SCENARIOS",
    "SCENARIOS",
    "TortureConfig",
    "TortureResult",
    "replay",
    "run_torture",
]


REDIS_PY_SOCKET_TIMEOUT = 5.0
"""redis-py's default ``socket_timeout`` and ``socket_connect_timeout`` (8.x), seconds."""

WORKER_START_TIMEOUT = 60.0
"""How long the runner waits for its first workers to be ready before it starts the clock
anyway, seconds."""


@dataclass(frozen=True)
class TortureConfig:
    """What one torture run does. Every duration is in seconds.

    Attributes:
        scenario: ``lock``, ``rlock``, ``rwlock``, ``semaphore``, ``fairlock``,
            ``multilock`` (two names per hold), ``redlock``, ``multiredlock``, ``election``
            (``Election``: campaign, act with the term, resign) or ``once`` (``Once``: one
            successful run per period).
        flavour: ``both`` (odd worker ids run asyncio locks, even ids sync ones), ``sync``
            or ``asyncio``.
        processes: worker processes (each with its own connections and fault proxies).
        names: how many lock names the workers share.
        duration: how long the workers run (the run ends earlier if ``cycles`` is reached).
        cycles: stop after this many successful acquisitions in all (None: no limit).
        seed: the seed of the fault schedule and of every worker's choices.
        faults: the fault kinds to inject (see :data:`redislock.testing.faults.ALL_FAULTS`);
            empty for a run without faults. The default is every kind but
            ``server_clock_jump``, which needs libfaketime (Debian package ``faketime``):
            with it, the run starts its servers under libfaketime.
        lease: the watchdog lease of every lock (``ttl=None, watchdog_lease=lease``).
        socket_timeout: the workers' redis-py socket (and connect) timeout; None: redis-py's
            default (5 seconds in redis-py 8), as users run it.
        acquire_timeout: how long a worker waits for a busy lock.
        work: the critical section's sleep, drawn uniformly from this range.
        long_share: the share of critical sections that last 0.2 to 1.5 leases instead
            (the watchdog must renew them while faults hit).
        permits: the Semaphore's permit count.
        masters: Redlock's number of masters.
        persistence: ``always`` (AOF, ``appendfsync always``) or ``none``.
        restart_delay: how long a killed server stays down before its restart.
        gap: quiet time between faults of one lane, drawn from this range.
        control: a negative control (see the module docstring), or None.
        url: test an existing server instead of starting one (server faults are then
            impossible and are dropped; the auditor uses MONITOR unless ``monitor`` is
            false). Keys use ``prefix``, so nothing of yours is touched.
        monitor: run the MONITOR-based foreign-touch audit.
        prefix: key prefix of the torture locks.
        section: ``module:function`` called as ``function(name, fencing_token)`` inside
            every critical section instead of the sleep (your own code under faults).
        directory: where the run's records go (None: a new temporary directory).
    """

    scenario: str = "lock"
    flavour: str = "both"
    processes: int = 4
    names: int = 2
    duration: float = 10.0
    cycles: int | None = None
    seed: int = 1
    faults: tuple[str, ...] = DEFAULT_FAULTS
    lease: float = 1.0
    socket_timeout: float | None = None
    acquire_timeout: float = 2.0
    work: tuple[float, float] = (0.0, 0.005)
    long_share: float = 0.1
    permits: int = 2
    masters: int = 5
    persistence: str = "always"
    restart_delay: float = 0.0
    gap: tuple[float, float] = (0.2, 1.0)
    control: str | None = None
    url: str | None = None
    monitor: bool = True
    prefix: str = "torture:"
    section: str | None = None
    directory: str | None = None

    def validated(self) -> TortureConfig:
        """This config, checked, with control defaults applied.

        Raises:
            ValueError: an unknown scenario, control, fault kind or persistence mode, or
                a non-positive count or duration.
        """
        if self.scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}")
        if self.flavour not in FLAVOURS:
            raise ValueError(f"flavour must be one of {', '.join(FLAVOURS)}")
        if self.control is not None and self.control not in CONTROLS:
            raise ValueError(f"control must be one of {', '.join(CONTROLS)}")
        if self.persistence not in ("always", "none"):
            raise ValueError("persistence must be 'always' or 'none'")
        unknown = sorted(set(self.faults) - set(ALL_FAULTS))
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {', '.join(ALL_FAULTS)}")
        if self.processes < 1 or self.names < 1 or self.permits < 1:
            raise ValueError("processes, names and permits must be >= 1")
        if self.duration <= 0 or self.lease <= 0 or self.timeout <= 0:
            raise ValueError("duration, lease and socket_timeout must be > 0 seconds")
        if self.scenario in QUORUM_SCENARIOS and self.masters < 3:
            raise ValueError(f"{self.scenario} needs masters >= 3")
        if self.scenario in MULTI_SCENARIOS and self.names < 2:
            raise ValueError(f"{self.scenario} locks two names at a time: names must be >= 2")
        cfg = self
        if cfg.control == "redlock-restart":
            cfg = replace(
                cfg,
                scenario="redlock",
                persistence="none",
                restart_delay=0.0,
                faults=("server_restart",),
                gap=(0.05, 0.2),
                work=(0.05, 0.2),
            )
        elif cfg.control in ("broken-release", "unfenced-pause", "election-unfenced"):
            # Critical sections fill most of each cycle, so nearly every pause lands in one
            # (a pause between holds shows nothing): the control must not depend on luck.
            scenario = "election" if cfg.control == "election-unfenced" else "lock"
            cfg = replace(
                cfg, scenario=scenario, faults=("client_pause",), gap=(0.0, 0.05), work=(0.1, 0.3)
            )
        elif cfg.control == "once-mutex":
            cfg = replace(cfg, scenario="once")
        if cfg.url is not None:
            cfg = replace(cfg, faults=tuple(k for k in cfg.faults if k not in SERVER_FAULTS))
            if cfg.scenario in QUORUM_SCENARIOS:
                raise ValueError(
                    f"url= tests one server; the {cfg.scenario} scenario needs masters"
                )
        return cfg

    @property
    def servers(self) -> int:
        """How many servers the run uses."""
        return self.masters if self.scenario in QUORUM_SCENARIOS else 1

    @property
    def timeout(self) -> float:
        """The workers' socket timeout in seconds (redis-py's default when None)."""
        return REDIS_PY_SOCKET_TIMEOUT if self.socket_timeout is None else self.socket_timeout

    @property
    def fenced(self) -> bool:
        """Whether the oracle checks fencing tokens (not under the unfenced controls)."""
        return self.control not in ("unfenced-pause", "election-unfenced")

    @property
    def names_per_hold(self) -> int:
        """How many names one acquisition takes (each is logged as a hold of its own)."""
        return 2 if self.scenario in MULTI_SCENARIOS else 1

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``TortureConfig(**d)`` rebuilds it, tuples as lists)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TortureConfig:
        """The config saved by :meth:`to_json`."""
        d = dict(data)
        for key in ("faults", "work", "gap"):
            d[key] = tuple(d[key])
        return cls(**d)


@dataclass
class TortureResult:
    """A finished run: its report, where its records are, and what happened."""

    config: TortureConfig
    report: Report
    directory: Path
    schedule: list[FaultEvent] = field(default_factory=list)
    elapsed: float = 0.0
    cycles: int = 0
    faults_applied: int = 0
    nemesis_errors: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every "must be" line held (for a negative control: see :attr:`control_detected`)."""
        return self.report.passed

    @property
    def control_detected(self) -> bool:
        """A negative control reported the violation it exists to provoke."""
        lines = {line.name: line for line in self.report.lines}
        control = self.config.control
        if control == "broken-release":
            names = ("foreign_touches",)
        elif control in ("unfenced-pause", "election-unfenced"):
            names = ("stale_writes_accepted",)
        elif control == "once-mutex":
            names = ("double_runs",)
        elif control == "redlock-restart":
            names = ("overlapping_holders",)
        else:
            return False
        return all(_count(lines[n].value) > 0 for n in names if n in lines)


def _count(value: object) -> int:
    if isinstance(value, int | float):
        return int(value)
    m = re.match(r"\s*(\d+)", str(value))
    return int(m.group(1)) if m else 0


def _server_version(binary: str) -> tuple[int, ...]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    m = re.search(r"v=(\d+)\.(\d+)", out.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


HANDOFF_SCENARIOS = tuple(row.torture for row in KINDS if row.torture and row.queues)
"""Scenarios whose waiters queue in fair_acquire.lua (the kinds table's rows that run it): Lock and
FairLock, and the Lock an Election's contenders and a Once's callers wait for."""


def handoff_allowance(scenario: str) -> float:
    """The ``handoff`` of :func:`~redislock.testing.checkers.leases_alive_after_death` for a
    scenario, in seconds: a killed waiter of the queue (fair_acquire.lua) is skipped one
    waiter lease after it stopped renewing, and until then a release may hand it the lock (a
    torture run of the ``election`` scenario saw a contender granted 0.85 s after its
    death); 0 for the kinds without hand-off."""
    return DEFAULT_WAITER_LEASE if scenario in HANDOFF_SCENARIOS else 0.0


RESTART_TIMEOUT = 120.0
"""Seconds a restarted server may take to answer PING. It replays its append-only file,
which grows over a run (17 MB after 13 minutes of a once run with persistence "always"),
and a 2-core machine under load replays it slowly: once it took more than 10 s (the
default), the runner stopped it, and the rest of that run had no server."""


class _Run:
    """The machinery of one run; implements :class:`redislock.testing.faults.FaultTargets`."""

    def __init__(self, cfg: TortureConfig, directory: Path) -> None:
        self.cfg = cfg
        self.dir = directory
        self.names = [f"n{i}" for i in range(cfg.names)]
        self.servers: list[RedisProcess] = []
        self.upstreams: list[str | tuple[str, int]] = []
        self.admins: list[redis.Redis] = []
        self.kwargs: list[dict[str, Any]] = []  # direct client kwargs per server
        self.loop = ProxyLoop()
        self.proxies: dict[tuple[int, int], FaultProxy] = {}
        self.workers: dict[int, tuple[int, subprocess.Popen[bytes]]] = {}
        self.spawned: list[tuple[int, subprocess.Popen[bytes]]] = []
        self.killed: set[int] = set()  # worker ids the nemesis killed
        self.next_w = 0
        self.lock = threading.Lock()
        self.stopping = False
        self.oracle = Oracle(directory, fenced=cfg.fenced)
        self.auditor: Auditor | None = None
        self.config_path = directory / "config-worker.json"

    # ------------------------------------------------------------------ set-up

    def start_servers(self) -> None:
        cfg = self.cfg
        if cfg.url is not None:
            probe = redis.Redis.from_url(cfg.url)
            pool_kwargs = dict(probe.connection_pool.connection_kwargs)
            probe.close()
            if "path" in pool_kwargs:
                self.upstreams.append(str(pool_kwargs["path"]))
                kwargs: dict[str, Any] = {"unix_socket_path": pool_kwargs["path"]}
            else:
                host = str(pool_kwargs.get("host", "127.0.0.1"))
                port = int(pool_kwargs.get("port", 6379))
                self.upstreams.append((host, port))
                kwargs = {"host": host, "port": port}
            for key in ("username", "password", "db"):
                if key in pool_kwargs:
                    kwargs[key] = pool_kwargs[key]
            self.kwargs.append(kwargs)
            self.admins.append(redis.Redis(**kwargs, socket_timeout=5))
            return
        binary = find_redis_server()
        args: list[str] = []
        if cfg.persistence == "always":
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        if _server_version(binary) >= (7, 0):
            args += ["--enable-debug-command", "local"]
        clocked = any(k in CLOCK_FAULTS for k in cfg.faults)
        for i in range(cfg.servers):
            directory = self.dir / f"s{i}"
            server = RedisProcess(
                directory,
                binary=binary,
                args=args,
                name="redis",
                clock_file=directory / "clock" if clocked else None,
            )
            server.start()
            self.servers.append(server)
            assert server.socket_path is not None
            self.upstreams.append(str(server.socket_path))
            self.kwargs.append(server.client_kwargs())
            self.admins.append(redis.Redis(**server.client_kwargs(), socket_timeout=5))

    def start_proxies(self) -> dict[str, list[tuple[str, int]]]:
        self.loop.start()
        table: dict[str, list[tuple[str, int]]] = {}
        for slot in range(self.cfg.processes):
            for i, upstream in enumerate(self.upstreams):
                proxy = FaultProxy(upstream, loop=self.loop)
                proxy.start()
                self.proxies[(slot, i)] = proxy
                table.setdefault(str(slot), []).append(("127.0.0.1", proxy.port))
        return table

    def wait_ready(self, timeout: float) -> None:
        """Wait until every worker spawned so far is ready to cycle (it opened its history
        file, which it does once everything is imported) or exited, for at most ``timeout``
        seconds."""
        deadline = time.monotonic() + timeout
        with self.lock:
            pending = list(self.spawned)
        while pending and time.monotonic() < deadline:
            pending = [
                (w, proc)
                for w, proc in pending
                if proc.poll() is None and not (self.dir / f"history-{w}.jsonl").exists()
            ]
            if pending:
                time.sleep(0.02)

    def spawn(self, slot: int) -> None:
        with self.lock:
            if self.stopping:
                return
            w = self.next_w
            self.next_w += 1
            log = (self.dir / f"worker-{w}.log").open("ab")
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "redislock.testing.worker",
                    str(self.config_path),
                    str(slot),
                    str(w),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                close_fds=True,
            )
            log.close()
            self.workers[slot] = (w, proc)
            self.spawned.append((w, proc))

    # ------------------------------------------------------------------ FaultTargets

    def worker_pid(self, slot: int) -> tuple[int, int] | None:
        with self.lock:
            entry = self.workers.get(slot)
        if entry is None or entry[1].poll() is not None:
            return None
        return entry[0], entry[1].pid

    def kill_worker(self, slot: int) -> tuple[int, int, float] | None:
        with self.lock:
            entry = self.workers.get(slot)
        if entry is None or entry[1].poll() is not None:
            return None
        w, proc = entry
        self.killed.add(w)
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        t_kill = time.monotonic()
        last = [
            p.last_upstream
            for (s, _), p in self.proxies.items()
            if s == slot and p.last_upstream is not None
        ]
        t_death = max([t_kill, *last])
        threading.Timer(0.1, self.spawn, args=(slot,)).start()
        return w, proc.pid, t_death

    def set_proxy_fault(self, slot: int, server: int, kind: str, delay: float) -> None:
        proxy = self.proxies[(slot, server)]
        if kind == "delay":
            proxy.set_fault("delay", delay=delay)
        else:
            proxy.set_fault(kind)

    def dropped_replies(self, slot: int, server: int) -> int:
        return self.proxies[(slot, server)].dropped_replies

    def server_pid(self, server: int) -> int | None:
        return self.servers[server].pid if self.servers else None

    def server_command(self, server: int, *args: Any, timeout: float = 5.0) -> object:
        client = redis.Redis(**self.kwargs[server], socket_timeout=timeout)
        try:
            return cast(Any, client).execute_command(*args)
        finally:
            client.close()

    def restart_server(self, server: int, delay: float) -> None:
        proc = self.servers[server]
        proc.kill(signal.SIGKILL)
        if delay > 0:
            time.sleep(delay)
        proc.start(RESTART_TIMEOUT)
        if self.auditor is not None:
            self.auditor.note_restart(server, self.cfg.persistence == "always")

    def set_server_clock(self, server: int, offset: float) -> None:
        if not self.servers or self.servers[server].clock_file is None:
            raise RuntimeError("server_clock_jump needs a server started by the runner")
        self.servers[server].set_clock_offset(offset)

    # ------------------------------------------------------------------ progress

    def cycles(self, offsets: dict[Path, int], count: list[int]) -> int:
        """Count acquire-ok events in the histories, reading only what is new."""
        for path in self.dir.glob("history-*.jsonl"):
            start = offsets.get(path, 0)
            with path.open("rb") as f:
                f.seek(start)
                data = f.read()
            end = data.rfind(b"\n") + 1
            offsets[path] = start + end
            for line in data[:end].splitlines():
                if b'"acquire"' in line and b'"ok"' in line:
                    with contextlib.suppress(ValueError):
                        event = json.loads(line)
                        if event.get("op") == "acquire" and event.get("ph") == "ok":
                            count[0] += 1
        return count[0]

    # ------------------------------------------------------------------ tear-down

    def stop_workers(self, grace: float) -> None:
        with self.lock:
            self.stopping = True
        (self.dir / "stop").touch()
        deadline = time.monotonic() + grace
        for _, proc in list(self.workers.values()):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def crashed(self) -> list[str]:
        """Workers that exited on their own with a failure (their log has the traceback)."""
        return [
            f"worker {w} exit {proc.returncode} (worker-{w}.log)"
            for w, proc in self.spawned
            if w not in self.killed and proc.returncode not in (0, None)
        ]

    def close(self) -> None:
        for proxy in self.proxies.values():
            with contextlib.suppress(Exception):
                proxy.stop()
        with contextlib.suppress(Exception):
            self.loop.stop()
        for admin in self.admins:
            admin.close()
        for server in self.servers:
            server.stop()
        self.oracle.stop()


def run_torture(cfg: TortureConfig) -> TortureResult:
    """Run one torture run and check it (see the module docstring).

    Args:
        cfg: what to run.

    Returns:
        The :class:`TortureResult`; its ``report`` has one line per check.

    Raises:
        ValueError: a bad config (before anything starts).
        redislock.errors.ServerError: a redis-server could not start, or the faults include
            ``server_clock_jump`` and libfaketime was not found.
    """
    cfg = cfg.validated()
    directory = Path(cfg.directory or tempfile.mkdtemp(prefix="redislock-torture-"))
    directory.mkdir(parents=True, exist_ok=True)
    cfg = replace(cfg, directory=str(directory))
    (directory / "config.json").write_text(json.dumps(cfg.to_json(), indent=2))
    with contextlib.suppress(FileNotFoundError):
        (directory / "stop").unlink()
    schedule = make_schedule(
        cfg.seed,
        duration=cfg.duration,
        kinds=cfg.faults,
        slots=cfg.processes,
        servers=cfg.servers,
        lease=cfg.lease,
        gap=cfg.gap,
        restart_delay=cfg.restart_delay,
    )
    (directory / "schedule.json").write_text(json.dumps([e.to_json() for e in schedule], indent=1))
    run = _Run(cfg, directory)
    t_begin = time.monotonic()
    startup = 0.0
    nemesis: Nemesis | None = None
    count = [0]
    try:
        run.start_servers()
        proxies = run.start_proxies()
        run.oracle.start()
        run.auditor = Auditor(run.kwargs, prefix=cfg.prefix, names=run.names, monitor=cfg.monitor)
        run.auditor.start()
        worker_cfg = {
            **cfg.to_json(),
            "names": run.names,
            "proxies": proxies,
            "oracle": str(run.oracle.socket_path),
            "stop_file": str(directory / "stop"),
        }
        run.config_path.write_text(json.dumps(worker_cfg))
        for slot in range(cfg.processes):
            run.spawn(slot)
        # On a loaded machine a worker takes seconds to start (interpreter, imports): the
        # run's clock and the fault schedule start once every worker is ready to cycle, or
        # the first faults hit processes still importing and the run loses that time.
        t_spawned = time.monotonic()
        run.wait_ready(timeout=WORKER_START_TIMEOUT)
        t_start = time.monotonic()
        startup = t_start - t_spawned
        nemesis = Nemesis(run, schedule, str(directory / "nemesis.jsonl"))
        nemesis.start(t_start)
        offsets: dict[Path, int] = {}
        while time.monotonic() - t_start < cfg.duration:
            time.sleep(0.25)
            done = run.cycles(offsets, count) // cfg.names_per_hold
            if cfg.cycles is not None and done >= cfg.cycles:
                break
        nemesis.stop()
        run.stop_workers(grace=cfg.acquire_timeout + 3 * cfg.lease + 5)
        # Let ghost leases (lost replies, killed holders) run out under the auditor's eye.
        time.sleep(cfg.lease + 0.5)
        run.auditor.stop()
        audit = run.auditor.result()
        (directory / "audit.json").write_text(audit.to_json())
    finally:
        if nemesis is not None:
            nemesis.stop()
        run.stop_workers(grace=1.0)
        if run.auditor is not None:
            with contextlib.suppress(Exception):
                run.auditor.stop()
        run.close()
    elapsed = time.monotonic() - t_begin
    history = read_histories(directory)
    report = check_run(
        history,
        run.oracle.records(),
        read_jsonl(directory / "nemesis.jsonl"),
        audit.to_dict(),
        fenced=cfg.fenced,
        lease=cfg.lease,
        bound=cfg.lease / 3 + cfg.timeout,
        permits=cfg.permits if cfg.scenario == "semaphore" else None,
        persistent=cfg.persistence == "always" or cfg.url is not None,
        handoff=handoff_allowance(cfg.scenario),
    )
    report.counts["worker_start"] = round(startup, 3)  # seconds, spawn to ready
    if cfg.scenario in ("election", "once"):
        acts = read_histories(directory, "acts-*.jsonl")
        if cfg.scenario == "election":
            report.lines.extend(election_checks(history, acts))
        else:
            report.lines.extend(once_checks(acts))
    # The harness itself must have worked, or the zeros above mean nothing.
    polls = audit.polls or [0]
    connects = audit.monitor_connects or [0]
    oks = sum(1 for e in history if e.get("op") == "acquire" and e.get("ph") == "ok")
    cycles = oks // cfg.names_per_hold
    coverage_ok = (
        min(polls) > 0
        and (not cfg.monitor or min(connects) > 0)
        and (cycles == 0 or len(audit.holds) > 0)
    )
    report.lines.append(
        Line(
            "harness",
            f"{len(nemesis.errors)} fault errors, {len(run.crashed())} worker crashes, "
            f"{min(polls)}+ polls/server, {audit.poll_errors} poll errors, "
            f"{len(audit.holds)} holds seen",
            "faults applied, workers alive, every server audited",
            coverage_ok and not nemesis.errors and not run.crashed(),
            "; ".join((nemesis.errors + run.crashed() + audit.errors)[:3]),
        )
    )
    result = TortureResult(
        cfg,
        report,
        directory,
        schedule,
        elapsed,
        cycles,
        nemesis.applied,
        list(nemesis.errors),
    )
    (directory / "report.json").write_text(json.dumps(report.to_json(), indent=1))
    (directory / "report.md").write_text(report.table() + "\n")
    return result


def replay(directory: str | os.PathLike[str], into: str | None = None) -> TortureResult:
    """Run a recorded run again: the same config, seed and therefore schedule.

    Args:
        directory: a run directory (it has ``config.json``).
        into: where the new run's records go (None: a new temporary directory).

    Raises:
        FileNotFoundError: no ``config.json`` in ``directory``.
    """
    data = json.loads((Path(directory) / "config.json").read_text())
    return run_torture(replace(TortureConfig.from_json(data), directory=into))
