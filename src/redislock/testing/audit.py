# SPDX-License-Identifier: MIT
"""Server-side audit of lock keys while a torture run goes on: hold intervals, keys without
a TTL, and foreign touches seen through MONITOR.

An :class:`Auditor` connects DIRECTLY to every Redis server (never through the fault
proxies) and runs daemon threads, two per server, so a server that is SIGSTOPped, killed,
restarted, in ``DEBUG SLEEP`` or ``CLIENT PAUSE`` delays only its own threads (every socket
has a 0.2 s timeout; connections are re-made after errors):

* the **snapshot poller** reads, every ``poll_interval`` seconds and in one MULTI/EXEC of
  read-only commands (atomic, and allowed under ``CLIENT PAUSE WRITE``), the server ``TIME``
  and for each lock name ``N`` the key ``<prefix>{N}``: a Lock/Redlock/FairLock string
  ``"<token>|<fence>|<host>|<pid>|<unix_ms>"``, or an RLock/ReadWriteLock/Semaphore hash
  ``token -> "<mode>|<count>|<expires_ms>|<fence>|<host>|<pid>|<acquired_unix_ms>"`` (holds
  whose ``expires_ms`` is not after the server ``TIME`` are logically expired and skipped).
  It keeps one :class:`HoldInterval` per hold and server:
  first seen, last seen present, first seen absent (``gone``). A failed poll is not an
  absence: an interval closes only on a successful snapshot that lacks the hold (after a
  restart without persistence that is the first successful poll). Every ``scan_every``
  polls it also SCANs ``<prefix>*`` and PTTLs every key: a key that is not a fencing counter
  (``…:slotfence``), a release ring (``…:slotrel``) nor a permit count (``…:permits``) with
  no TTL is a :class:`TtlViolation`.
* the **MONITOR reader** keeps a shadow of every lock key (string value and expiry, hash
  fields) from the writes it sees, and flags a :class:`ForeignTouch` when a script deletes,
  expires or overwrites a lock key or hold that, per the shadow, belonged to another token
  and was still live (the exact rules are in :class:`Auditor`).

This module holds the :class:`Auditor` and its two threads. The parts live beside it and
their public names are importable from here too:

* :mod:`~redislock.testing.audit_records`: the records and :class:`AuditResult`;
* :mod:`~redislock.testing.monitor`: the MONITOR connection and :func:`parse_monitor_line`;
* :mod:`~redislock.testing.audit_shadow`: the shadow of lock keys and the foreign-touch
  rules;

Timestamps: every ``t``, ``first``, ``last`` and ``gone`` is ``time.monotonic()`` in
seconds, comparable across processes on Linux. A snapshot's time is the server ``TIME`` read
inside the snapshot (the atomic instant the keys were read), moved onto the monotonic clock
with this process's wall-minus-monotonic offset and clamped into [request sent, reply
received]; so it is never later than the monotonic time taken right after the reply. A
MONITOR line's time is its server wall-clock stamp moved onto the monotonic clock the same
way. Both conversions assume the wall clock does not jump during the run (same machine).
When a server's own clock is moved (``server_clock_jump``), the shadow still works on that
server's times, as Redis does; a snapshot whose TIME falls outside its round trip is
placed at the round trip's start for the holds it saw and at its end for the holds it
found gone (the instant is only known to lie in between); only a reported touch's ``t`` is
off by the clock's offset (its ``server_time`` is exact).

MONITOR is a test-only tool: the server copies every command of every client to the
monitoring connection (the Redis documentation measured one MONITOR client cutting a
server's throughput by more than half), its output buffer has no limit by default, and
this process parses every line in Python (tens of thousands of lines per second cost a
good part of one core). Never point an Auditor at a production server.

Known blind spots (the rules err towards missing a touch rather than inventing one):

* key expiry and eviction do not show in MONITOR; the shadow tracks each key's expiry from
  the ``PX``/``PEXPIRE`` arguments, and a touch within 5 ms of the owner's expiry is not
  flagged (clock granularity);
* expiry follows the server's wall clock, so when it steps back (a ``server_clock_jump``)
  the shadow cannot tell whether Redis deleted a key that had expired before the step:
  every key not surely alive at the latest time seen becomes unknown until its next write;
* between a MONITOR (re)connection and the re-read of the keys of ``names`` (a few
  milliseconds) lines are not audited, and lock keys of names not in ``names`` are unknown
  until the next write seen for them;
* commands run while a MONITOR connection is down (server stopped, restarting) are lost;
* plain client commands other than DEL/UNLINK/GETDEL are not audited, only tracked, and
  commands the shadow does not model (RENAME, RESTORE, ...) make the keys they name
  unknown;
* only the database of each server's ``db`` keyword (default 0) is audited;
* Redis Cluster is not supported (one server per entry of ``servers``; Redlock masters are
  separate servers and fine), nor TLS connections.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple, cast

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock._core.codec import decode_hold_value, decode_lock_value
from redislock._core.keys import DEFAULT_PREFIX, FENCE_SUFFIX, RING_SUFFIX, LockKeys
from redislock._lifecycle import Startable
from redislock.testing.audit_records import (
    HASH_MODES,
    STRING_MODE,
    TOKEN_CHARS,
    AuditResult,
    ForeignTouch,
    HoldInterval,
    RestartNote,
    TtlViolation,
)
from redislock.testing.audit_shadow import ScriptContext, Shadow, Touch, library_by_sha
from redislock.testing.monitor import (
    MonitorLine,
    arg_text,
    monitor_lines,
    monitor_repr,
    open_monitor,
    parse_monitor_line,
)

__all__ = [
    "AuditResult",
    "Auditor",
    "ForeignTouch",
    "HoldInterval",
    "MonitorLine",
    "RestartNote",
    "TtlViolation",
    "parse_monitor_line",
]

_SOCKET_TIMEOUT: Final = 0.2  # seconds, every connection of the auditor
_RECONNECT_DELAY: Final = 0.05  # seconds between reconnection attempts
_TTL_DEDUPE: Final = 1.0  # seconds: one TtlViolation record per key per second at most
_MAX_ERRORS: Final = 20  # error messages kept in the result
_MARKER: Final = "redislock-audit:"
_INF: Final = math.inf


def _short(token: str | None) -> str | None:
    return None if token is None else token[:TOKEN_CHARS]


def _client(kwargs: Mapping[str, Any]) -> redis.Redis:
    """A bytes client with short timeouts and no retries (a failed poll just fails)."""
    options = dict(kwargs)
    options.update(
        socket_timeout=_SOCKET_TIMEOUT,
        socket_connect_timeout=_SOCKET_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
        decode_responses=False,
        health_check_interval=0,
    )
    return redis.Redis(**options)


def snapshot_times(sent: float, got: float, wall: float, server: float) -> tuple[float, float]:
    """When a snapshot ran, as ``(t_seen, t_gone)`` monotonic seconds: the time to give the
    holds it saw, and the time to give the holds it found gone.

    ``sent`` / ``got``: monotonic seconds just before the request and just after the reply;
    ``wall``: this process's wall clock (Unix seconds) at ``got``; ``server``: the server's
    ``TIME`` read inside the snapshot (Unix seconds). The server's time moved onto the
    monotonic clock is the instant, for both, when it falls within ``[sent, got]``. When it
    does not (the server's clock was stepped: ``server_clock_jump``), the instant is only
    known to lie in that window: holds seen are dated at its start (no lease looks longer
    than it was) and holds gone at its end (no hold looks gone before a release that ran
    while the snapshot waited its turn).
    """
    t = got - (wall - server)
    if sent <= t <= got:
        return t, t
    return sent, got


def _mono_of_wall(wall: float) -> float:
    """Move a wall-clock instant (Unix seconds) onto the monotonic clock."""
    return time.monotonic() - (time.time() - wall)


# ---------------------------------------------------------------------------- auditor


class _Seed(NamedTuple):
    time: float  # server TIME of the read, Unix seconds
    replies: list[Any]  # per name: GET, HGETALL, PTTL of the lock key


class _Server:
    """Per-server state; counters are guarded by the auditor's lock."""

    def __init__(self, index: int, kwargs: Mapping[str, Any]) -> None:
        self.index = index
        self.kwargs = dict(kwargs)
        self.db = int(self.kwargs.get("db", 0) or 0)
        self.polls = 0
        self.monitor_connects = 0
        self.monitor_live = False  # a seeded MONITOR connection is being read
        self.reseed = threading.Event()
        self.sync_seen: set[str] = set()
        self.open: dict[tuple[str, Any], HoldInterval] = {}
        self.ttl_last: dict[str, float] = {}


class Auditor(Startable):
    """Watch lock keys on every server: hold intervals, keys without TTL, foreign touches.

    Use as a context manager (or :meth:`start` / :meth:`stop`), then read :meth:`result`::

        with Auditor([server.client_kwargs()], names=["job"]) as auditor:
            run_workers()
            auditor.sync()
        report = auditor.result()

    Foreign-touch rules (MONITOR): every script call is identified by its SHA1 (EVALSHA)
    or the SHA1 of its body (EVAL). A redislock script that carries a caller token
    (``lock_acquire``, ``lock_release``, ``lock_extend``, ``lock_status``, ``hold``,
    ``fair``, ``multi``) is audited with that token; its ``force`` ops and
    ``lock_force_release`` are operator overrides (only counted). A script that is not
    redislock's is audited when ``audit_unknown_scripts`` is true, with its arguments as
    the tokens it may present. Inside an audited script:

    * ``DEL``/``UNLINK``/``PEXPIRE``/``EXPIRE``/``PEXPIREAT``/``EXPIREAT``/``PERSIST``/
      ``SET`` of a string lock key whose shadow value is live (its expiry more than 5 ms
      after the command) and does not start with the caller token + ``|`` is a touch;
    * ``HDEL``/``HSET`` of a hold field other than the caller's token whose lease
      (``expires_ms``) is still in the future at the command's server time, ``DEL`` of a
      hash with such a hold, or a TTL that ends before such a hold's lease, is a touch.
      Removing holds already expired is legitimate cleanup.

    ``SET … NX`` changes nothing it could steal; ``lock_acquire`` reads the key right after
    a refused ``SET NX``, which tells the shadow whether the write happened. With
    ``foreign_plain_dels`` a plain (non-script) ``DEL``/``UNLINK``/``GETDEL`` of a lock key
    with a live owner is a touch too: redislock never deletes a lock key outside a
    script, so this catches, for instance, a deliberately broken lock that releases without
    checking its token.

    Args:
        servers: redis client keyword arguments, one dict per server (for example
            ``RedisProcess.client_kwargs()``); the list index is the ``server`` field of
            every record. Supported keys: ``unix_socket_path`` or ``host``/``port``,
            ``db``, ``username``, ``password`` (others are passed to ``redis.Redis`` for
            polling only).
        prefix: the locks' key prefix.
        names: lock names whose holds are polled (all kinds share the key ``P{N}``).
        poll_interval: seconds between snapshots of one server (> 0).
        monitor: run the MONITOR readers (foreign touches); False polls only.
        scan_every: run the TTL scan every this many polls (>= 1).
        foreign_plain_dels: flag plain DEL/UNLINK/GETDEL of a live lock key.
        audit_unknown_scripts: audit scripts that are not redislock's.

    Raises:
        ValueError: no servers, a bad ``poll_interval`` or ``scan_every``, an empty prefix.
    """

    def __init__(
        self,
        servers: Sequence[Mapping[str, Any]],
        *,
        prefix: str = DEFAULT_PREFIX,
        names: Sequence[str],
        poll_interval: float = 0.02,
        monitor: bool = True,
        scan_every: int = 10,
        foreign_plain_dels: bool = True,
        audit_unknown_scripts: bool = True,
    ) -> None:
        if not servers:
            raise ValueError("servers must name at least one server")
        if isinstance(names, str):
            raise ValueError("names must be a sequence of lock names, not a string")
        if not 0 < poll_interval < math.inf:
            raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval!r}")
        if isinstance(scan_every, bool) or scan_every < 1:
            raise ValueError(f"scan_every must be an int >= 1, got {scan_every!r}")
        if not prefix:
            raise ValueError("prefix must not be empty")
        self._prefix = prefix
        self._names = list(dict.fromkeys(names))
        self._keys = [LockKeys.for_name(n, prefix) for n in self._names]
        self._poll_interval = float(poll_interval)
        self._monitor = monitor
        self._scan_every = scan_every
        self._plain_dels = foreign_plain_dels
        self._unknown_scripts = audit_unknown_scripts
        self._servers = [_Server(i, kw) for i, kw in enumerate(servers)]
        self._scripts = library_by_sha()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        # results, guarded by self._lock
        self._closed: list[HoldInterval] = []
        self._ttl: list[TtlViolation] = []
        self._ttl_observations = 0
        self._ttl_checks = 0
        self._touches: list[ForeignTouch] = []
        self._monitor_lines = 0
        self._audited = 0
        self._admin = 0
        self._poll_errors = 0
        self._restarts: list[RestartNote] = []
        self._errors: list[str] = []

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Start the threads (two per server; daemon threads).

        Raises:
            RuntimeError: already started.
        """
        if self._started:
            raise RuntimeError("this Auditor was already started")
        self._started = True
        for srv in self._servers:
            self._spawn(self._poll_loop, srv, f"audit-poll-{srv.index}")
            if self._monitor:
                self._spawn(self._monitor_loop, srv, f"audit-monitor-{srv.index}")

    def _spawn(self, target: Callable[[_Server], None], srv: _Server, name: str) -> None:
        thread = threading.Thread(target=target, args=(srv,), name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the threads and wait for them, at most ``timeout`` seconds each.

        Idempotent. The collected data stays available through :meth:`result`.
        """
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    # ------------------------------------------------------------------ public

    def note_restart(self, server: int, persistent: bool) -> None:
        """Tell the auditor that ``server`` was restarted.

        Recorded in :attr:`AuditResult.restarts`; the MONITOR reader of that server
        reconnects and re-reads its keys. Hold intervals need nothing: without persistence
        the first successful poll after the restart closes them (``gone``).

        Raises:
            IndexError: no such server.
        """
        srv = self._servers[server]
        with self._lock:
            self._restarts.append(RestartNote(server, time.monotonic(), bool(persistent)))
        srv.reseed.set()

    def sync(self, timeout: float = 2.0) -> bool:
        """Wait until every server has been polled twice more and, with MONITOR, until its
        reader has seen everything the server ran before this call.

        The MONITOR part sends an ``ECHO`` marker to each server (again every 0.1 s while
        its reader is reconnecting) and waits until the reader has seen it.

        Args:
            timeout: the longest wait, seconds.

        Returns:
            True if every server caught up, False if one did not within ``timeout`` (it is
            down, paused or restarting) or the auditor is stopped.
        """
        deadline = time.monotonic() + timeout
        nonce = f"{_MARKER}sync:{os.urandom(8).hex()}"
        with self._lock:
            wanted = {srv.index: srv.polls + 2 for srv in self._servers}
        sent_at: dict[int, float] = {}
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                with self._lock:
                    unseen = [s for s in self._servers if nonce not in s.sync_seen]
                    behind = [s for s in self._servers if s.polls < wanted[s.index]]
                if not self._monitor:
                    unseen = []
                if not unseen and not behind:
                    return True
                if now >= deadline:
                    return False
                for srv in unseen:
                    if srv.monitor_live and now - sent_at.get(srv.index, -math.inf) >= 0.1:
                        sent_at[srv.index] = now
                        with (
                            contextlib.suppress(redis.RedisError, OSError),
                            _client(srv.kwargs) as client,
                        ):
                            client.echo(nonce)
                with self._cond:
                    self._cond.wait(min(max(deadline - time.monotonic(), 0.0), 0.02))
            return False
        finally:
            with self._lock:
                for srv in self._servers:
                    srv.sync_seen.discard(nonce)

    def result(self) -> AuditResult:
        """A copy of everything collected so far (callable while running)."""
        with self._lock:
            holds = list(self._closed)
            for srv in self._servers:
                holds.extend(dataclasses.replace(h) for h in srv.open.values())
            holds.sort(key=lambda h: (h.server, h.first, h.name))
            return AuditResult(
                ttl_violations=[dataclasses.replace(v) for v in self._ttl],
                ttl_observations=self._ttl_observations,
                holds=holds,
                foreign_touches=[dataclasses.replace(t) for t in self._touches],
                monitor_lines=self._monitor_lines,
                audited_scripts=self._audited,
                polls=[srv.polls for srv in self._servers],
                poll_errors=self._poll_errors,
                ttl_checks=self._ttl_checks,
                admin_overrides=self._admin,
                monitor_connects=[srv.monitor_connects for srv in self._servers],
                restarts=[dataclasses.replace(r) for r in self._restarts],
                errors=list(self._errors),
            )

    # ------------------------------------------------------------------ poller

    def _error(self, where: str, err: BaseException) -> None:
        with self._lock:
            if len(self._errors) < _MAX_ERRORS:
                self._errors.append(f"{where}: {type(err).__name__}: {err}")

    def _poll_loop(self, srv: _Server) -> None:
        client = _client(srv.kwargs)
        n = 0
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                try:
                    self._poll_once(srv, client)
                    n += 1
                    if n % self._scan_every == 0:
                        self._scan_once(srv, client)
                except (redis.RedisError, OSError):
                    with self._lock:
                        self._poll_errors += 1
                    with contextlib.suppress(Exception):
                        client.connection_pool.disconnect()
                except Exception as err:  # a bug must not end the audit silently
                    with self._lock:
                        self._poll_errors += 1
                    self._error(f"poll server {srv.index}", err)
                self._stop.wait(max(0.0, self._poll_interval - (time.monotonic() - began)))
        finally:
            client.close()

    def _poll_once(self, srv: _Server, client: redis.Redis) -> None:
        pipe = client.pipeline(transaction=True)
        pipe.time()
        for keys in self._keys:
            pipe.get(keys.lock)
            pipe.hgetall(keys.lock)
        sent = time.monotonic()
        replies = pipe.execute(raise_on_error=False)
        got = time.monotonic()
        wall = time.time()
        now = replies[0]
        if isinstance(now, BaseException):
            raise now
        sec, usec = int(now[0]), int(now[1])
        now_ms = sec * 1000 + usec // 1000
        t, t_gone = snapshot_times(sent, got, wall, sec + usec / 1e6)
        seen: dict[tuple[str, Any], HoldInterval] = {}
        for i, name in enumerate(self._names):
            value, fields = replies[1 + 2 * i : 3 + 2 * i]
            if isinstance(value, bytes):
                hold = decode_lock_value(value)
                if hold is None:
                    continue
                seen[(name, ("s", arg_text(value)))] = HoldInterval(
                    srv.index, name, hold.pid, hold.fence, t, t, None, STRING_MODE,
                    hold.token[:TOKEN_CHARS], hold.host,
                )  # fmt: skip
            elif isinstance(fields, dict):
                for raw_f, raw_v in fields.items():
                    h = decode_hold_value(raw_v)
                    if h is None or h.expires_ms <= now_ms:
                        continue
                    token = arg_text(raw_f)
                    seen[(name, ("h", token, h.fence))] = HoldInterval(
                        srv.index, name, h.pid, h.fence, t, t, None, HASH_MODES[h.mode],
                        token[:TOKEN_CHARS], h.host,
                    )  # fmt: skip
        with self._cond:
            for ident, fresh in seen.items():
                cur = srv.open.get(ident)
                if cur is None:
                    srv.open[ident] = fresh
                else:
                    cur.last = t
                    cur.fence = max(cur.fence, fresh.fence)
            for ident in [i for i in srv.open if i not in seen]:
                gone = srv.open.pop(ident)
                gone.gone = t_gone
                self._closed.append(gone)
            srv.polls += 1
            self._cond.notify_all()

    def _scan_once(self, srv: _Server, client: redis.Redis) -> None:
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in self._prefix) + "*"
        keys: list[bytes] = []
        cursor: int = 0
        while True:
            cursor, batch = client.scan(cursor, match=pattern, count=1000)
            keys.extend(cast(list[bytes], batch))
            if int(cursor) == 0:
                break
        checked = [
            k
            for k in keys
            if not k.endswith((FENCE_SUFFIX.encode(), RING_SUFFIX.encode(), b":permits"))
        ]
        if not checked:
            return
        pipe = client.pipeline(transaction=False)
        for key in checked:
            pipe.pttl(key)
        ttls = pipe.execute(raise_on_error=False)
        t = time.monotonic()
        bad = [k for k, ttl in zip(checked, ttls, strict=True) if ttl == -1]
        types: list[Any] = []
        if bad:
            pipe = client.pipeline(transaction=False)
            for key in bad:
                pipe.type(key)
            types = pipe.execute(raise_on_error=False)
        with self._lock:
            self._ttl_checks += len(checked)
            self._ttl_observations += len(bad)
            for key, kind in zip(bad, types, strict=True):
                text = arg_text(key)
                last = srv.ttl_last.get(text)
                if last is not None and t - last < _TTL_DEDUPE:
                    continue
                srv.ttl_last[text] = t
                kind_s = arg_text(kind) if isinstance(kind, bytes | str) else "?"
                self._ttl.append(TtlViolation(t, srv.index, text, kind_s))

    # ------------------------------------------------------------------ MONITOR

    def _reporter(
        self, srv: _Server, shadow: Shadow
    ) -> Callable[[ScriptContext | None, float, str, Touch], None]:
        def report(ctx: ScriptContext | None, ts: float, label: str, touch: Touch) -> None:
            record = ForeignTouch(
                server=srv.index,
                t=_mono_of_wall(ts),
                script=label,
                key=touch.key,
                caller=_short(ctx.shown if ctx is not None else None),
                owner=_short(touch.owner),
                command=touch.command,
                client=ctx.client if ctx is not None else shadow.last_client,
                server_time=ts,
            )
            with self._lock:
                self._touches.append(record)

        return report

    def _count_script(self, admin: bool) -> None:
        with self._lock:
            if admin:
                self._admin += 1
            else:
                self._audited += 1

    def _monitor_loop(self, srv: _Server) -> None:
        shadow = Shadow(
            self._prefix,
            self._scripts,
            plain_dels=self._plain_dels,
            unknown_scripts=self._unknown_scripts,
            report=lambda *a: None,
            count_script=self._count_script,
        )
        shadow.report = self._reporter(srv, shadow)
        while not self._stop.is_set():
            sock: socket.socket | None = None
            try:
                sock = open_monitor(srv.kwargs, _SOCKET_TIMEOUT)
                self._monitor_read(srv, sock, shadow)
            except (OSError, ValueError, redis.RedisError):
                pass
            except Exception as err:  # a bug must not end the audit silently
                self._error(f"monitor server {srv.index}", err)
            finally:
                srv.monitor_live = False
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()
            shadow.reset()
            self._stop.wait(_RECONNECT_DELAY)

    def _monitor_read(self, srv: _Server, sock: socket.socket, shadow: Shadow) -> None:
        """Read one MONITOR connection until it fails, the auditor stops or a reseed.

        Right after MONITOR is on, the keys of ``names`` are read in one MULTI that also
        ECHOes a marker; lines before the marker are skipped and the shadow starts from
        that read at the marker, exactly where the server ran it.
        """
        srv.reseed.clear()
        acks = 2 if srv.kwargs.get("password") else 1
        marker = f"{_MARKER}seed:{os.urandom(8).hex()}"
        marker_b = marker.encode()
        prefix_b = monitor_repr(self._prefix.encode())
        seed: _Seed | None = None
        seeded = False
        for raw in monitor_lines(sock, self._stop):
            if srv.reseed.is_set():
                return
            if raw is None:
                if seed is not None and not seeded:
                    return  # the seed's marker never showed: start over
                continue
            if acks:
                if raw.startswith(b"-"):
                    raise ConnectionError(raw.decode("utf-8", "replace"))
                acks -= 1
                if not acks:
                    seed = self._read_seed(srv, marker)
                    if seed is None:
                        return
                continue
            if not seeded:
                if seed is not None and marker_b in raw:
                    self._install_seed(shadow, seed)
                    seeded = True
                    with self._cond:
                        srv.monitor_connects += 1
                        srv.monitor_live = True
                        self._cond.notify_all()
                continue
            self._monitor_line(srv, shadow, raw, prefix_b)

    def _monitor_line(self, srv: _Server, shadow: Shadow, raw: bytes, prefix_b: bytes) -> None:
        with self._lock:
            self._monitor_lines += 1
        # Cheap path: lines that cannot touch a lock key are not parsed in full.
        head = raw.find(b'] "')
        is_lua = raw.find(b" lua] ", 0, head + 2) >= 0 if head > 0 else False
        name_end = raw.find(b'"', head + 3)
        command = raw[head + 3 : name_end].lower() if head > 0 and name_end > 0 else b""
        relevant = (
            prefix_b in raw
            or command.startswith(b"eval")
            or command in (b"flushall", b"flushdb", b"swapdb", b"echo")
        )
        if not relevant:
            shadow.feed_other(is_lua)
            return
        line = parse_monitor_line(raw)
        if line is None:
            shadow.feed_other(is_lua)
            return
        if line.args[0].lower() == b"echo" and len(line.args) == 2:
            text = arg_text(line.args[1])
            if text.startswith(f"{_MARKER}sync:"):
                with self._cond:  # seen even if another database: sync() only waits
                    srv.sync_seen.add(text)
                    self._cond.notify_all()
        if line.db != srv.db:
            shadow.feed_other(is_lua)
            return
        if not is_lua:
            shadow.last_client = line.client
        try:
            shadow.feed(line)
        except (ValueError, IndexError) as err:  # a malformed argument: forget everything
            shadow.reset()
            self._error(f"monitor server {srv.index}", err)

    def _read_seed(self, srv: _Server, marker: str) -> _Seed | None:
        """Read the keys of ``names`` atomically, with a marker MONITOR will show."""
        try:
            with _client(srv.kwargs) as client:
                pipe = client.pipeline(transaction=True)
                pipe.echo(marker)
                pipe.time()
                for keys in self._keys:
                    pipe.get(keys.lock)
                    pipe.hgetall(keys.lock)
                    pipe.pttl(keys.lock)
                replies = pipe.execute(raise_on_error=False)
        except (redis.RedisError, OSError):
            return None
        now = replies[1]
        if isinstance(now, BaseException):
            return None
        return _Seed(int(now[0]) + int(now[1]) / 1e6, list(replies[2:]))

    def _install_seed(self, shadow: Shadow, seed: _Seed) -> None:
        shadow.reset()
        now, replies = seed
        for i, keys in enumerate(self._keys):
            value, fields, pttl = replies[3 * i : 3 * i + 3]
            if not isinstance(pttl, int) or pttl == -2:
                shadow.seed_string(keys.lock, None, _INF)
                continue
            expires = _INF if pttl < 0 else now + pttl / 1000.0
            if isinstance(value, bytes):
                shadow.seed_string(keys.lock, arg_text(value), expires)
            elif isinstance(fields, dict):
                shadow.seed_hash(
                    keys.lock, {arg_text(f): arg_text(v) for f, v in fields.items()}, expires
                )
