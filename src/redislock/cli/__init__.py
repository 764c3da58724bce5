# SPDX-License-Identifier: MIT
"""The ``redislock`` command: run a command under a lock (a Lock, a read or write hold of a
ReadWriteLock, a FairLock, or a Semaphore permit), inspect, list, force-release (every
kind), the lottery demo, and the embedded server.

This module holds :func:`main`, the argument parser and what every subcommand shares
(:func:`connect`, :class:`CliError`, the exit statuses); each subcommand lives in its own
module (``run``, ``once``, ``inspecting``, ``listing``, ``force_release``, ``demo``, ``torture``,
``server_cmd``; ``render`` shows a :class:`~redislock.inspection.LockInfo`), imported when
it runs.

Exit status (also in the README):
    0     success (``run``, ``once``: CMD's own status is passed through; ``once``: also
          when the period's run was already done)
    64    bad usage or invalid argument (EX_USAGE); ``run``: NAME is in use by another kind
          of lock
    69    Redis unreachable (also when ``run`` cannot release after CMD), or no redis-server
          for the embedded server (EX_UNAVAILABLE)
    75    lock busy with ``--no-wait``, or the wait timed out, or a ``--fair`` queue is full
          (EX_TEMPFAIL)
    79    ``run``: the lease was lost while CMD ran; CMD's process group was stopped
          (``elect``: leadership was lost)
    126   ``run``: CMD could not be executed;  127: CMD not found
    128+N ``run``: CMD was killed by signal N
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import sys
import urllib.parse
from collections.abc import Sequence
from typing import NoReturn

import redis

from redislock import server
from redislock._core import validate
from redislock._core.hold import MAX_PERMITS
from redislock._core.keys import DEFAULT_PREFIX
from redislock._version import __version__
from redislock.cli.render import KIND_LABELS as KIND_LABELS
from redislock.errors import LockConfigError, RedisLockError

__all__ = [
    "EXIT_BUSY",
    "EXIT_LOST",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "CliError",
    "connect",
    "main",
]

EXIT_USAGE = 64
EXIT_UNAVAILABLE = 69
EXIT_BUSY = 75
EXIT_LOST = 79


class CliError(Exception):
    """A failure to report on stderr with an exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


_USERINFO = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/@:\s]*):(?P<secret>[^@/\s]*)@", re.I)
_QUERY_SECRET = re.compile(r"(?P<head>[?&][a-z_]*password=)(?P<secret>[^&#\s]*)", re.I)


def mask_url(text: str) -> str:
    """``text`` with the password of every Redis URL in it replaced by ``***``
    (``redis://user:PASSWORD@host``, ``...?password=PASSWORD``)."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:***@", text)
    return _QUERY_SECRET.sub(lambda m: f"{m['head']}***", text)


def redact(text: str, url: str | None) -> str:
    """``text`` safe to print: URLs masked (:func:`mask_url`), and the passwords of ``url``
    removed wherever they appear (a parser's message may quote a piece of the URL)."""
    text = mask_url(text)
    if url:
        secrets = [m["secret"] for m in _USERINFO.finditer(url)]
        secrets += [m["secret"] for m in _QUERY_SECRET.finditer(url)]
        for secret in sorted(filter(None, secrets), key=len, reverse=True):
            text = text.replace(secret, "***")
            text = text.replace(urllib.parse.unquote(secret), "***")
    return text


def connect(url: str | None) -> redis.Redis:
    """A client for ``url``, ``$REDIS_URL``, or the embedded server (started if needed).

    Raises:
        CliError: no redis-server for the embedded server, or it could not start.
    """
    url = url or os.environ.get("REDIS_URL") or None
    if url is None:
        try:
            url = server.ensure_embedded()
        except server.ServerError as exc:
            raise CliError(str(exc), EXIT_UNAVAILABLE) from exc
    try:
        client: redis.Redis = redis.Redis.from_url(
            url, socket_timeout=10.0, socket_connect_timeout=5.0
        )
    except ValueError as exc:
        raise CliError(redact(f"bad Redis URL {url!r}: {exc}", url), EXIT_USAGE) from None
    return client


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0: {text!r}")
    return value


def _permits(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of permits: {text!r}") from None
    if not 1 <= value <= MAX_PERMITS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_PERMITS}: {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits 64 (EX_USAGE) as documented, not 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="redislock",
        description="Distributed locks on Redis. With no --url and no REDIS_URL, an embedded "
        "redis-server on a private unix socket is started (or reused) for this user.",
    )
    p.add_argument("--version", action="version", version=f"redislock {__version__}")
    p.add_argument("--url", help="Redis URL (redis://, rediss://, unix://); default $REDIS_URL")
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help="key prefix (default %(default)s)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a command while holding a lock")
    run.add_argument("name", help="lock name")
    kind = run.add_mutually_exclusive_group()
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
        type=_permits,
        metavar="N",
        help="take one permit of Semaphore(NAME, permits=N) (a count stored in Redis by "
        "set_permits wins)",
    )
    run.add_argument(
        "--ttl",
        type=_seconds,
        default=30.0,
        help="lease in seconds, renewed every third of it while CMD runs (default 30)",
    )
    wait = run.add_mutually_exclusive_group()
    wait.add_argument("--wait", type=_seconds, metavar="S", help="wait at most S seconds")
    wait.add_argument("--no-wait", action="store_true", help="exit 75 at once if busy")
    run.add_argument(
        "--grace",
        type=_seconds,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL when the lease is lost (default 10)",
    )
    run.epilog = (
        "The command follows '--': redislock run NAME [options] -- CMD [ARGS...]. "
        "Without --read, --write, --fair or --permits it holds a plain Lock. "
        "CMD gets the fencing token of its hold in $REDISLOCK_FENCING_TOKEN."
    )

    once = sub.add_parser(
        "once",
        help="run a command exactly once per period among many processes",
        description="Runs CMD if no run of NAME succeeded yet in this period, holding "
        "Lock(NAME) while it runs (as `run` does). Another process of the same period "
        "waits for the lock, finds the record and exits 0 without running CMD, saying on "
        "stderr who ran it. Only a CMD that exits 0 counts: after a failure the next "
        "attempt runs it.",
    )
    once.add_argument("name", help="job name (also the lock's)")
    once.add_argument(
        "--period",
        type=_seconds,
        required=True,
        metavar="S",
        help="period in seconds, aligned on UTC multiples since the Unix epoch "
        "(86400: a UTC day); with --key, how long its record lives",
    )
    once.add_argument("--key", metavar="K", help="an explicit period key (e.g. 2026-11-23) instead")
    once.add_argument(
        "-q", "--quiet", action="store_true", help="say nothing when the period was done"
    )
    once.add_argument(
        "--ttl",
        type=_seconds,
        default=30.0,
        help="lease in seconds, renewed every third of it while CMD runs (default 30)",
    )
    once.add_argument(
        "--wait", type=_seconds, metavar="S", help="wait at most S seconds for the lock"
    )
    once.add_argument(
        "--grace",
        type=_seconds,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL when the lease is lost (default 10)",
    )
    once.epilog = (
        "The command follows '--': redislock once NAME --period S [options] -- CMD [ARGS...]. "
        "CMD gets the fencing token of its hold in $REDISLOCK_FENCING_TOKEN."
    )

    elect = sub.add_parser(
        "elect",
        help="run a command only while this process leads an election",
        description="Campaign for leadership of Election(NAME) (waiting in line), run CMD "
        "while leading, with the term in $REDISLOCK_FENCING_TOKEN; stop CMD if leadership "
        "is lost, or once renewals failed until a quarter of the lease is left, before "
        "another contender can lead (exit 79); resign when CMD exits or redislock is "
        "signalled, so the next contender leads at once.",
    )
    elect.add_argument("name", help="election name")
    elect.add_argument("--identity", help="advertised identity (default <host>:<pid>)")
    elect.add_argument(
        "--ttl",
        type=_seconds,
        default=30.0,
        help="leadership lease in seconds, renewed every third of it; a dead leader is "
        "replaced within it (default 30)",
    )
    elect.add_argument("--wait", type=_seconds, metavar="S", help="campaign at most S seconds")
    elect.add_argument(
        "--grace",
        type=_seconds,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL when leadership is lost (default 10)",
    )
    elect.epilog = "The command follows '--': redislock elect NAME [options] -- CMD [ARGS...]."

    ins = sub.add_parser("inspect", help="show who holds a lock (any kind), and who waits")
    ins.add_argument("name")
    ins.add_argument("--json", action="store_true", help="machine-readable output")

    ls = sub.add_parser("list", help="list held locks of every kind (SCAN, never KEYS)")
    ls.add_argument("--prefix", dest="name_prefix", default="", help="lock names starting so")
    ls.add_argument("--json", action="store_true", help="machine-readable output")

    rel = sub.add_parser(
        "release",
        help="delete a lock whoever holds it (needs --force)",
        description="Operator override for any kind: a Lock is deleted and one waiter woken; "
        "a FairLock is deleted and granted to its next queued waiter; an RLock, "
        "ReadWriteLock or Semaphore loses every hold and all its waiters are woken. "
        "The old holders find their lease gone at their next renewal.",
    )
    rel.add_argument("name")
    rel.add_argument("--force", action="store_true", help="yes, really")

    demo = sub.add_parser("demo", help="the lottery: N processes race, exactly one draws")
    demo.add_argument("--workers", type=int, default=5, help="processes (default 5)")

    from redislock.cli import torture

    torture.add_parser(sub)

    srv = sub.add_parser("server", help="the embedded redis-server")
    srv.add_argument("action", choices=["status", "stop", "start"])
    srv.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in words:  # everything after the first "--" is the command of run, once, elect
        cut = words.index("--")
        words, cmd = words[:cut], words[cut + 1 :]
    args = parser.parse_args(words)
    args.cmd = cmd
    url = getattr(args, "url", None) or os.environ.get("REDIS_URL")

    def say(message: str) -> None:  # never a password, whatever the message quotes
        print(f"redislock: {redact(message, url)}", file=sys.stderr)

    try:
        status = _dispatch(args, parser)
    except KeyboardInterrupt:  # Ctrl-C while waiting for the lock: no traceback
        status = 128 + signal.SIGINT
    except CliError as exc:
        say(str(exc))
        return exc.status
    except LockConfigError as exc:
        say(str(exc))
        return EXIT_USAGE
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        say(f"cannot reach Redis: {exc}")
        return EXIT_UNAVAILABLE
    except (redis.exceptions.RedisError, RedisLockError) as exc:
        say(f"{type(exc).__name__}: {exc}")
        return 1
    if argv is None and status == 128 + signal.SIGINT:
        # Die of SIGINT too, so that a calling shell stops its loop as it would for the
        # command itself (an exit status of 130 does not do that).
        sys.stdout.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status


def _dispatch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    validate.check_prefix(args.prefix)
    if args.command == "run":
        from redislock.cli.run import run_command

        cmd = args.cmd
        if not cmd:
            parser.error("run needs a command after --: redislock run NAME -- CMD [ARGS...]")
        return run_command(
            connect(args.url),
            args.name,
            cmd,
            ttl=args.ttl,
            wait=0.0 if args.no_wait else args.wait,
            grace=args.grace,
            prefix=args.prefix,
            kind="permit" if args.permits is not None else args.kind or "lock",
            permits=args.permits,
        )
    if args.command == "once":
        from redislock.cli.once import once_command

        if not args.cmd:
            parser.error("once needs a command after --: redislock once NAME -- CMD [ARGS...]")
        return once_command(
            connect(args.url),
            args.name,
            args.cmd,
            period=args.period,
            key=args.key,
            ttl=args.ttl,
            wait=args.wait,
            grace=args.grace,
            prefix=args.prefix,
            quiet=args.quiet,
        )
    if args.command == "elect":
        from redislock.cli.run import run_command

        if not args.cmd:
            parser.error("elect needs a command after --: redislock elect NAME -- CMD [ARGS...]")
        return run_command(
            connect(args.url),
            args.name,
            args.cmd,
            ttl=args.ttl,
            wait=args.wait,
            grace=args.grace,
            prefix=args.prefix,
            kind="elect",
            identity=args.identity,
        )
    if args.command == "inspect":
        from redislock.cli.inspecting import inspect_command

        return inspect_command(connect(args.url), args.name, args.prefix, as_json_output=args.json)
    if args.command == "list":
        from redislock.cli.listing import list_command

        client = connect(args.url)
        return list_command(client, args.name_prefix, args.prefix, as_json_output=args.json)
    if args.command == "release":
        from redislock.cli.force_release import force_release_command

        if not args.force:
            raise CliError(
                "release deletes the lock whoever holds it; add --force to do it", EXIT_USAGE
            )
        return force_release_command(connect(args.url), args.name, args.prefix)
    if args.command == "demo":
        from redislock.cli.demo import run_demo

        if args.workers < 1:
            parser.error("--workers must be at least 1")
        url = args.url or os.environ.get("REDIS_URL") or None
        connect(url)  # starts the embedded server once, before the workers race
        return run_demo(url or server.ensure_embedded(), workers=args.workers)
    if args.command == "torture":
        from redislock.cli.torture import torture_command

        try:
            # Only an explicit --url: without one the run starts servers of its own.
            return torture_command(args, args.url)
        except ValueError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
    from redislock.cli.server_cmd import server_command

    return server_command(args.action, as_json_output=args.json)
