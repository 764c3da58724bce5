# SPDX-License-Identifier: MIT
"""``redislock run NAME -- CMD``: hold a lock while a command runs (like ``flock``).

Every kind goes through one code path: :func:`guard` builds what to hold (a ``Lock``, the
read or write side of a ``ReadWriteLock``, a ``FairLock``, or one ``Permit`` of a
``Semaphore``) behind the small :class:`Held` interface that :func:`run_command` uses.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Final, Protocol

import redis

from redislock.cli import _args
from redislock.errors import AcquireTimeoutError, LockLostError, NotOwnedError, QueueFullError
from redislock.sync.election import Election
from redislock.sync.fair import FairLock
from redislock.sync.lock import Lock
from redislock.sync.rlock import ReadWriteLock
from redislock.sync.semaphore import Semaphore

__all__ = [
    "ENV_FENCING_TOKEN",
    "KINDS",
    "Guard",
    "Held",
    "Settled",
    "add_parser",
    "guard",
    "run",
    "run_command",
]

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

ENV_FENCING_TOKEN: Final = "REDISLOCK_FENCING_TOKEN"
"""The environment variable that gives CMD the fencing token of the hold it runs under."""

KINDS: Final = ("lock", "read", "write", "fair", "permit", "elect")
"""What ``run`` can hold: a Lock, a read or write hold of a ReadWriteLock, a FairLock,
one permit of a Semaphore, or the leadership of an Election (``redislock elect``)."""


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock run`` to the command line."""
    p = subs.add(
        "run",
        run,
        cmd=True,
        help="run a command while holding a lock",
        usage="redislock run [options] NAME [--] CMD [ARGS...]\n"
        "       redislock run [options] NAME -c 'SHELL COMMAND'",
        allow_abbrev=False,
        epilog=_args.epilog(
            _args.CMD_TAIL + "Without --read, --write, --fair or --permits it holds a plain "
            "Lock. CMD gets the fencing token of its hold in $REDISLOCK_FENCING_TOKEN."
        ),
    )
    p.add_argument("name", help="lock name")
    kind = p.exclusive()
    kind.add_argument(
        "--read",
        dest="kind",
        action="store_const",
        const="read",
        help="take a read hold of ReadWriteLock(NAME): shared with other readers",
    )
    kind.add_argument(
        "--write",
        dest="kind",
        action="store_const",
        const="write",
        help="take the write hold of ReadWriteLock(NAME): exclusive",
    )
    kind.add_argument(
        "--fair",
        dest="kind",
        action="store_const",
        const="fair",
        help="take FairLock(NAME): granted in arrival order",
    )
    kind.add_argument(
        "--permits",
        type=_args.permits,
        metavar="N",
        help="take one permit of Semaphore(NAME, permits=N) (a count stored in Redis by "
        "set_permits wins)",
    )
    _args.hold_options(p, subs.files, lease=_args.LEASE_HELP, nowait_alias=True)


def run(ctx: _args.Context) -> int:
    """Run ``redislock run`` (see :func:`run_command`).

    Raises:
        CliError: a usage error found before any I/O (64), or Redis not found (69).
    """
    args = ctx.args
    cmd, hold = _args.hold_settings(ctx)
    return run_command(
        ctx.client(),
        args.name,
        cmd,
        kind="permit" if args.permits is not None else args.kind or "lock",
        permits=args.permits,
        **hold,
    )


class Held(Protocol):
    """What ``run`` needs of a hold: a Lock, a ReadLock / WriteLock, a FairLock, a Permit."""

    @property
    def fencing_token(self) -> int | None: ...

    @property
    def lost(self) -> bool: ...

    def owned(self) -> bool: ...

    def release(self) -> None: ...

    def statistics(self) -> Any: ...


class _Acquirable(Held, Protocol):
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool: ...


@dataclass(frozen=True, slots=True)
class Guard:
    """How to take one kind of hold: ``take(wait)`` returns the hold, or None if the wait
    (None: no limit, 0: one try) ended without it, or raises :class:`Settled` when CMD must
    not run at all. ``what`` names the kind in messages. ``commit(hold)``, if given, runs
    after CMD exited 0 with the hold not lost, before the release (``once`` writes its
    record there); its :class:`LockLostError` counts as a loss."""

    what: str
    take: Callable[[float | None], Held | None]
    commit: Callable[[Held], None] | None = None


class Settled(Exception):  # noqa: N818 (not an error: an outcome)
    """Raised by a :class:`Guard`'s ``take``: CMD must not run; exit with ``status`` (the
    guard has said why and released what it took)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _taker(lock: _Acquirable) -> Callable[[float | None], Held | None]:
    def take(wait: float | None) -> Held | None:
        return lock if lock.acquire(timeout=wait) else None

    return take


def guard(
    kind: str,
    client: redis.Redis,
    name: str,
    *,
    ttl: float,
    prefix: str,
    permits: int | None,
    on_lost: Callable[[Any], object],
    identity: str | None = None,
) -> Guard:
    """The :class:`Guard` of ``kind`` (one of :data:`KINDS`) for ``name``, with a watchdog
    lease of ``ttl`` seconds; ``permits`` is the semaphore's permit count (``permit``),
    ``identity`` the leader's advertised identity (``elect``; None: ``<host>:<pid>``).

    Raises:
        LockConfigError: an invalid argument (before any I/O).
    """
    options: dict[str, Any] = {"watchdog_lease": ttl, "prefix": prefix, "on_lost": on_lost}
    if kind == "lock":
        return Guard("lock", _taker(Lock(client, name, **options)))
    if kind == "fair":
        return Guard("fair lock", _taker(FairLock(client, name, **options)))
    if kind in ("read", "write"):
        rw = ReadWriteLock(client, name, **options)
        side = rw.read() if kind == "read" else rw.write()
        return Guard(f"{kind} lock", _taker(side))
    if kind == "permit":
        if permits is None:
            raise ValueError("a permit needs the permit count")
        semaphore = Semaphore(client, name, permits, **options)

        def take_permit(wait: float | None) -> Held | None:
            try:
                return semaphore.acquire(timeout=wait)
            except AcquireTimeoutError:
                return None

        return Guard("semaphore", take_permit)
    if kind == "elect":
        election = Election(client, name, identity=identity, **options)

        def lead(wait: float | None) -> Held | None:
            try:
                election.lead(wait)  # waits in line; advertises the identity
            except AcquireTimeoutError:
                return None
            return election

        return Guard("election", lead)
    raise ValueError(f"unknown kind {kind!r}")


GUARD_FIRED: Final = 3
"""The guard's exit status when it stopped CMD at a deadline (``redislock.cli._guard``)."""

STEP_DOWN: Final = 0.25
"""``redislock elect`` stops CMD when its local lease estimate has less than this fraction
of the lease left (Kubernetes client-go's renew deadline, shorter than the lease: renewals
that keep failing stop the leader before another contender can lead; the watchdog alone
reports the loss only when the estimate ends). A healthy leader renews every third of the
lease, so this fires only after renewals failed or stalled for over five twelfths of it."""


def _step_down_in_time(
    election: Election, margin: float, ended: threading.Event, stop: Callable[[], None]
) -> None:
    # Polls the local estimate (no I/O), so a renewal stuck on an unresponsive server
    # cannot delay it.
    while not ended.wait(0.05):
        try:
            election.check(margin)
        except LockLostError:
            if not ended.is_set():
                stop()
            return
        except Exception:  # resigned meanwhile: nothing to watch
            return


def run_command(
    client: redis.Redis,
    name: str,
    cmd: list[str],
    *,
    ttl: float,
    wait: float | None,
    grace: float,
    prefix: str,
    kind: str = "lock",
    permits: int | None = None,
    custom: Callable[[Callable[[Any], object]], Guard] | None = None,
    identity: str | None = None,
    conflict_status: int | None = None,
    quiet: bool = False,
) -> int:
    """Acquire ``name`` (watchdog lease of ``ttl`` seconds), run ``cmd``, release.

    ``wait``: seconds to wait for the lock (None: no limit, 0: one try). ``grace``: seconds
    between SIGTERM and SIGKILL when the lease is lost. ``kind``: what to hold (one of
    :data:`KINDS`; ``permits``: the permit count of the semaphore; ``identity``: the
    leader's, for ``elect``), or ``custom(on_lost)`` the :class:`Guard` to use instead
    (``once``). CMD gets the fencing token of the hold (an election's term) in
    ``$REDISLOCK_FENCING_TOKEN``. For ``elect``, releasing is resigning: when CMD exits
    or we are signalled (the signal is forwarded, CMD exits, then we resign), the next
    contender leads at once. ``conflict_status``: the exit status when busy or the wait
    timed out (None: 75); ``quiet``: say nothing then.

    CMD runs in its own process group, so that everything it starts can be stopped together.
    SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to us are forwarded to that group. When stdin
    is a terminal, the group is made the terminal's foreground group for the duration (as a
    shell does), so CMD can read the terminal and gets Ctrl-C from it directly.

    Returns:
        CMD's exit status (128+N if killed by signal N); 75 if the lock was busy or the
        wait timed out; 79 if the lease was lost (CMD and its group were stopped, or it
        finished after the loss); 69 if Redis failed at release (or at the guard's commit);
        126/127 if CMD could not be started; a :class:`Settled` guard's status.

    Raises:
        CliError: ``name`` is in use by another kind of lock (status 64).
        LockConfigError: an invalid argument (before any I/O).
    """
    from redislock.cli._common import EXIT_BUSY, EXIT_LOST, EXIT_UNAVAILABLE, EXIT_USAGE, CliError

    busy = EXIT_BUSY if conflict_status is None else conflict_status
    lost = threading.Event()
    guarded = threading.Event()  # the guard stopped CMD: we were not heard from in time
    stopped_for: list[float] = []

    def beat() -> None:
        # The guard's deadlines follow the local lease estimate, which each renewal moves:
        # stopped or starved, we stop moving them, and the guard stops CMD in time.
        if held is not None and not lost.is_set():
            left = held.statistics().lease_remaining
            if left is not None:
                child.tell_deadline(time.monotonic() + left, ttl, grace)

    clock = _StopClock(beat)

    def stop_child() -> None:
        # Runs in the renewer: SIGTERM the group now, SIGKILL after the grace period.
        if not lost.is_set():
            stopped_for.append(clock.longest_gap())
        lost.set()
        child.send(signal.SIGTERM)
        child.kill_later(grace)

    def still_ours() -> bool:
        # After we were stopped and continued: is the lease still ours? If not, CMD must
        # not run on; stop it (it gets SIGCONT after this, so it can act on the SIGTERM).
        try:
            if held is not None and held.owned():
                return True
        except Exception as exc:  # Redis unreachable: we cannot know, so treat it as lost
            print(f"redislock: cannot check the lease after a stop: {exc}", file=sys.stderr)
        if not lost.is_set():
            stop_child()
        return False

    child = _Child(_terminal(), still_ours)
    held: Held | None = None
    ended = threading.Event()

    def on_lost(_: Any) -> None:
        stop_child()

    def step_down() -> None:
        if not lost.is_set():  # (on_lost stopped CMD already: one SIGTERM)
            stop_child()

    if custom is not None:
        how = custom(on_lost)
    else:
        how = guard(
            kind,
            client,
            name,
            ttl=ttl,
            prefix=prefix,
            permits=permits,
            on_lost=on_lost,
            identity=identity,
        )
    try:
        held = how.take(wait)
    except Settled as done:
        return done.status
    except QueueFullError as exc:
        if not quiet:
            print(f"redislock: {how.what} {name!r} is busy: {exc}", file=sys.stderr)
        return busy
    except redis.exceptions.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        raise CliError(
            f"{name!r} is in use by another kind of lock than a {how.what} (Lock and "
            "FairLock keep a string, RLock, ReadWriteLock and Semaphore a hash): see "
            f"`redislock inspect {name}`",
            EXIT_USAGE,
        ) from exc
    if held is None:
        if not quiet:
            print(f"redislock: {_busy(client, how.what, name, prefix, wait)}", file=sys.stderr)
        return busy
    previous: dict[int, Any] = {}
    release_error: Exception | None = None
    commit_error: Exception | None = None
    status = 0
    try:
        # Handlers go in before the child exists: a signal in between is kept and delivered.
        # A signal ignored when we started (nohup) stays ignored, here and in CMD.
        for sig in _FORWARDED:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, child.forward)
        previous[signal.SIGTSTP] = signal.signal(signal.SIGTSTP, child.on_tstp)
        if not lost.is_set():
            clock.start()
            if isinstance(held, Election):
                deadline = threading.Thread(
                    target=_step_down_in_time, args=(held, ttl * STEP_DOWN, ended, step_down)
                )
                deadline.daemon = True
                deadline.start()
            try:
                left = held.statistics().lease_remaining
                child.start(
                    cmd,
                    {**os.environ, ENV_FENCING_TOKEN: str(held.fencing_token)},
                    lease=None if left is None else (time.monotonic() + left, ttl, grace),
                )
            except FileNotFoundError:
                print(f"redislock: command not found: {cmd[0]}", file=sys.stderr)
                return 127
            except OSError as exc:  # no permission, not an executable format, ...
                print(f"redislock: cannot execute {cmd[0]}: {exc.strerror}", file=sys.stderr)
                return 126
            status = child.wait()
            if lost.is_set():
                child.wait_group(grace)
            elif status == 0 and how.commit is not None:
                try:
                    how.commit(held)
                except LockLostError:
                    lost.set()
                except Exception as exc:
                    commit_error = exc
    finally:
        clock.stop()
        ended.set()
        if child.done():  # the guard stopped CMD at its deadline
            guarded.set()
            if not lost.is_set():
                stopped_for.append(clock.longest_gap())
                lost.set()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        try:
            held.release()  # after a loss too: a key that is still ours is freed at once
        except NotOwnedError:
            lost.set()
        except Exception as exc:
            release_error = exc
    if lost.is_set():
        message = _lost(how.what, name, ttl, stopped_for, guarded.is_set())
        print(f"redislock: {message}", file=sys.stderr)
        return EXIT_LOST
    if commit_error is not None:
        print(
            f"redislock: the command succeeded but its record for {name!r} was not "
            f"written: {commit_error}",
            file=sys.stderr,
        )
        return EXIT_UNAVAILABLE
    if release_error is not None:
        print(f"redislock: release of {name!r} failed: {release_error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    return 128 - status if status < 0 else status


def _holder(client: redis.Redis, name: str, prefix: str) -> str:
    """Who holds ``name``, in a few words ("" if it cannot be told)."""
    from redislock.cli.render import as_json
    from redislock.inspection import inspect

    try:
        info = as_json(inspect(client, name, prefix=prefix))
    except Exception:  # only for the message: the status is what counts
        return ""
    if info.get("holder"):
        h = info["holder"]
        return f"held by {h['host']} pid {h['pid']} since {h['acquired_at']}"
    holds = info.get("holds") or []
    if holds:
        who = ", ".join(f"{h['role']} {h['host']} pid {h['pid']}" for h in holds[:3])
        more = f" and {len(holds) - 3} more" if len(holds) > 3 else ""
        return f"held by {who}{more}"
    return "held (holder unknown)" if info.get("held") else "freed just now"


def _busy(client: redis.Redis, what: str, name: str, prefix: str, wait: float | None) -> str:
    """The message for a busy name: one try (``wait`` 0) or a wait that timed out."""
    holder = _holder(client, name, prefix)
    tail = f": {holder}" if holder else ""
    if not wait:
        return f"{what} {name!r} is busy{tail}"
    return f"waited {wait:.1f} s for {what} {name!r}{tail}"


def _lost(what: str, name: str, ttl: float, stopped_for: list[float], guarded: bool) -> str:
    """The one message for a lost lease, with its reason in plain words (``guarded``: the
    guard stopped CMD because no renewal was heard of before the lease would end)."""
    from redislock.cli._common import lost_reason

    head = f"lease of {what} {name!r} was lost while the command ran"
    told = "; its guard stopped the command before the lease ended" if guarded else ""
    gap = stopped_for[0] if stopped_for else 0.0
    if gap >= ttl / 2:
        return (
            f"{head}: the lease ran out while redislock was stopped (SIGSTOP/Ctrl-Z) or "
            f"suspended for {gap:.1f} s (--ttl {ttl:g} s){told}"
        )
    renewal = "could not renew before the lease ran out: "  # the library's words
    reason = lost_reason(name)
    if reason is None and guarded:  # alive, but no renewal was confirmed in time
        reason = f"{renewal}no renewal was confirmed in time"
    if reason is None:
        return head
    if reason.startswith(renewal):
        cause = reason.removeprefix(renewal)
        if cause.startswith("TimeoutError: no answer to the renewal"):
            cause = "Redis did not answer (it is unreachable, or too slow)"
        reason = f"could not renew within the --ttl {ttl:g} s lease: {cause}"
    return f"{head}: {reason}{told}"


class _StopClock:
    """A thread ticking every 0.1 s: the longest gap between two ticks tells how long this
    process was stopped (SIGSTOP, Ctrl-Z) or the machine suspended. Each tick also calls
    ``beat`` (the guard's heartbeat: :meth:`_Child.tell_deadline`)."""

    def __init__(self, beat: Callable[[], None] | None = None) -> None:
        self._last = time.monotonic()
        self._gap = 0.0
        self._beat = beat
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="redislock-stopclock")
        self._thread.daemon = True

    def start(self) -> None:
        self._last = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._done.set()

    def _tick(self) -> None:
        while not self._done.wait(0.1):
            now = time.monotonic()
            self._gap = max(self._gap, now - self._last)
            self._last = now
            if self._beat is not None:
                try:
                    self._beat()
                except Exception as exc:  # never stop the clock; the guard then fires
                    print(f"redislock: the guard's heartbeat failed: {exc!r}", file=sys.stderr)
                    self._beat = None

    def longest_gap(self) -> float:
        """The longest time between two ticks so far, the current one included (s)."""
        return max(self._gap, time.monotonic() - self._last)


def _terminal() -> int | None:
    """The fd of our controlling terminal, if stdin is it."""
    try:
        fd = sys.stdin.fileno()
        if os.isatty(fd):
            return fd
    except (AttributeError, OSError, ValueError):
        pass
    return None


def _in_foreground(fd: int) -> bool:
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False


def _is_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped right now (Linux /proc; elsewhere assume it is)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in (b"T", b"t")


_GO_SH = 'read -r _ <&{fd} || exit 125; exec {fd}<&-; exec "$@"'
"""CMD's first process, when the go-ahead pipe is on a descriptor ``sh`` can name (3-9):
it execs CMD once a line arrives; at end-of-file (we died first) it exits 125, CMD unrun."""

_GO_PY = """\
import os, sys
fd = int(sys.argv[1])
if not os.read(fd, 3):
    sys.exit(125)
os.close(fd)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    print(f"redislock: cannot execute {sys.argv[2]}: {exc.strerror}", file=sys.stderr)
    sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""
"""The same in Python, for a descriptor above 9 (``sh`` cannot name those): slower to start."""


def _after_go_ahead(fd: int, cmd: list[str]) -> list[str]:
    """The argv that runs ``cmd`` once a line can be read from ``fd`` (see :data:`_GO_SH`)."""
    if fd <= 9:
        return ["/bin/sh", "-c", _GO_SH.format(fd=fd), "redislock-run", *cmd]
    return [sys.executable, "-I", "-S", "-c", _GO_PY, str(fd), *cmd]


def _check_runnable(program: str, env: dict[str, str]) -> None:
    """Raise what exec of ``program`` would, before anything is started: FileNotFoundError
    (no such program on ``env``'s PATH), PermissionError (found, not executable)."""
    if os.sep in program:
        candidates = [program]
    else:
        candidates = [os.path.join(d or os.curdir, program) for d in os.get_exec_path(env)]
    denied = None
    for path in candidates:
        if os.path.isdir(path):
            denied = denied or path
        elif os.path.exists(path):
            if os.access(path, os.X_OK):
                return
            denied = denied or path
    if denied is not None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


class _Child:
    """CMD's process group: signals, the terminal hand-over, and job control.

    Job control mirrors CMD onto us, as sudo does: when CMD stops (Ctrl-Z, or reading the
    terminal in the background) we take the terminal back and stop ourselves, so the shell
    sees the job stopped; when the shell continues us, we check that the lease is still
    ours, give CMD the terminal again if we are in the foreground, and continue it. When
    we are stopped directly (Ctrl-Z with stdin not a terminal), we stop CMD first.
    """

    def __init__(self, terminal: int | None, still_ours: Callable[[], bool]) -> None:
        self.terminal = terminal
        self.still_ours = still_ours
        self.proc: subprocess.Popen[bytes] | None = None
        self.pending: list[int] = []
        self.timers: list[threading.Timer] = []
        self.finished = False
        self.tstp_pending = False  # Ctrl-Z came while CMD was being started (on_tstp)
        self.guard: subprocess.Popen[bytes] | None = None
        self.guard_pipe: int | None = None  # the only write end of the guard's stdin
        self.told_kill_at = -math.inf  # the guard's latest kill_at (tell_deadline)

    def start(
        self, cmd: list[str], env: dict[str, str], lease: tuple[float, float, float] | None
    ) -> None:
        """Start CMD in a group of its own, guarded: the guard learns the group and, in the
        same write, the first deadline (``lease``: the local estimate's end, the ttl and
        the grace, as for :meth:`tell_deadline`), so no moment leaves CMD unguarded."""
        _check_runnable(cmd[0], env)  # "not found" / "cannot execute" as exec would say
        self._start_guard()
        go_read, go_write = os.pipe()
        try:
            # CMD's first process waits for the go-ahead before it execs CMD: the guard
            # knows the group before any of CMD runs, even if we die the moment Popen
            # returned (or are starved of CPU while CMD would run).
            wait_fd = fcntl.fcntl(go_read, fcntl.F_DUPFD_CLOEXEC, 3)  # the lowest free >= 3
            try:
                self.proc = subprocess.Popen(
                    _after_go_ahead(wait_fd, cmd), process_group=0, env=env, pass_fds=(wait_fd,)
                )
            finally:
                os.close(wait_fd)
            self._tell_guard(f"{self.proc.pid}\n" + ("" if lease is None else self._until(*lease)))
            os.write(go_write, b"go\n")
        finally:
            os.close(go_read)
            os.close(go_write)
        self._give_terminal_if_foreground()
        for sig in self.pending:
            self.send(sig)
        if self.tstp_pending:  # Ctrl-Z while Popen ran: CMD may run already; stop both now
            self.tstp_pending = False
            self.on_tstp(signal.SIGTSTP, None)

    def _give_terminal_if_foreground(self) -> None:
        fd = self.terminal
        if fd is not None and self.proc is not None and _in_foreground(fd):
            with contextlib.suppress(OSError):
                os.tcsetpgrp(fd, self.proc.pid)
            # If it read the terminal before it was its own, it was stopped: wake it.
            self.send(signal.SIGCONT)

    def _take_terminal_back(self) -> None:
        fd = self.terminal
        if fd is None or self.proc is None:
            return
        try:
            if os.tcgetpgrp(fd) != self.proc.pid:
                return  # not CMD's: the shell or nobody has it; leave it alone
        except OSError:
            return
        # tcsetpgrp from a background group raises SIGTTOU unless it is ignored.
        old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        try:
            os.tcsetpgrp(fd, os.getpgrp())
        except OSError:
            pass
        finally:
            signal.signal(signal.SIGTTOU, old)

    def _stop_and_resume(self) -> None:
        """Stop ourselves like CMD was stopped; on continue, check the lease and go on."""
        self._take_terminal_back()
        os.kill(os.getpid(), signal.SIGSTOP)
        # ... continued by the shell (fg or bg).
        if self.still_ours():
            self._give_terminal_if_foreground()
        self.send(signal.SIGCONT)

    def on_tstp(self, _signum: int, _frame: FrameType | None) -> None:
        """SIGTSTP to us (Ctrl-Z while CMD is not the terminal's foreground)."""
        if self.proc is None:
            # CMD is being started (Popen has not returned: it may run already, and its
            # group is not known yet): stop both once it is (start)
            self.tstp_pending = True
            return
        self.send(signal.SIGSTOP)
        self._stop_and_resume()

    def kill_later(self, grace: float) -> None:
        """SIGKILL the group after ``grace`` seconds (from any thread)."""
        timer = threading.Timer(grace, self.send, (signal.SIGKILL,))
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def _start_guard(self) -> None:
        """Start the guard (see :mod:`redislock.cli._guard`) before CMD, so that CMD never
        runs unguarded: if we die by any signal, it kills CMD's group at once."""
        read_end, self.guard_pipe = os.pipe()
        try:
            self.guard = subprocess.Popen(
                [sys.executable, "-I", str(Path(__file__).with_name("_guard.py"))],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # no terminal signal reaches it
            )
        except OSError as exc:  # not "command not found" for CMD: say what failed
            raise RuntimeError(f"cannot start the guard of the command: {exc}") from exc
        finally:
            os.close(read_end)

    def _tell_guard(self, line: str) -> None:
        if self.guard_pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self.guard_pipe, line.encode())

    def tell_deadline(self, lease_end: float, ttl: float, grace: float) -> None:
        """Tell the guard when to stop CMD if it hears nothing newer (monotonic seconds):
        SIGKILL a tenth of the lease before ``lease_end`` (the local estimate's end), SIGTERM
        the grace period before that (at most 0.15 of the lease). Written only when the
        estimate moved (a renewal), and only once CMD runs."""
        if self.proc is None or self.finished:
            return
        if lease_end - max(0.1 * ttl, 0.05) - self.told_kill_at >= 0.05:
            self._tell_guard(self._until(lease_end, ttl, grace))

    def _until(self, lease_end: float, ttl: float, grace: float) -> str:
        kill_at = lease_end - max(0.1 * ttl, 0.05)
        self.told_kill_at = kill_at
        term_at = kill_at - min(grace, 0.15 * ttl)
        return f"until {term_at:.3f} {kill_at:.3f}\n"

    def done(self) -> bool:
        """Take the terminal back and cancel pending kills: the group id may be reused;
        dismiss the guard (CMD exited, or its group was killed after a loss). True if the
        guard had stopped CMD at its deadline (this process was not heard from in time)."""
        self.finished = True
        self._tell_guard("done\n")
        if self.guard_pipe is not None:
            os.close(self.guard_pipe)
            self.guard_pipe = None
        fired = False
        if self.guard is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                fired = self.guard.wait(5.0) == GUARD_FIRED
        for timer in self.timers:
            timer.cancel()
        self._take_terminal_back()
        return fired

    def forward(self, signum: int, _frame: FrameType | None) -> None:
        self.send(signum)

    def send(self, sig: int) -> None:
        """Signal the whole group, even after its leader (CMD itself) has exited."""
        if self.proc is None:
            self.pending.append(sig)
            return
        if self.finished:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def wait(self) -> int:
        """Wait for CMD to exit (following its stops); its status as Popen reports it."""
        assert self.proc is not None
        pid = self.proc.pid
        while True:
            _, status = os.waitpid(pid, os.WUNTRACED)
            if os.WIFSTOPPED(status):
                if _is_stopped(pid):  # not a stop we made and already undid
                    self._stop_and_resume()
                continue
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            return self.proc.returncode

    def wait_group(self, grace: float) -> None:
        """After a loss: wait until no process of the group is left, SIGKILL it after
        ``grace`` seconds."""
        assert self.proc is not None
        deadline = time.monotonic() + grace + 1.0
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)
        self.send(signal.SIGKILL)
