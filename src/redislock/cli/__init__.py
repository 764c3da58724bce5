# SPDX-License-Identifier: MIT
"""The ``redislock`` command: run a command under a lock, inspect, list, force-release,
the lottery demo, and the embedded server.

Exit status (also in the README):
    0     success (``run``: CMD's own status is passed through)
    64    bad usage or invalid argument (EX_USAGE)
    69    Redis unreachable (also when ``run`` cannot release after CMD), or no redis-server
          for the embedded server (EX_UNAVAILABLE)
    75    lock busy with ``--no-wait``, or the wait timed out (EX_TEMPFAIL)
    79    ``run``: the lease was lost while CMD ran; CMD's process group was stopped
    126   ``run``: CMD could not be executed;  127: CMD not found
    128+N ``run``: CMD was killed by signal N
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import redis

from redislock import server
from redislock._core import validate
from redislock._core.keys import DEFAULT_PREFIX, LockKeys
from redislock._core.lock import HolderInfo
from redislock._core.ops import as_int
from redislock._core.scripts import SCRIPTS
from redislock._version import __version__
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
        raise CliError(f"bad Redis URL {url!r}: {exc}", EXIT_USAGE) from exc
    return client


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0: {text!r}")
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
    run.epilog = "The command follows '--': redislock run NAME [options] -- CMD [ARGS...]"

    ins = sub.add_parser("inspect", help="show who holds a lock")
    ins.add_argument("name")
    ins.add_argument("--json", action="store_true", help="machine-readable output")

    ls = sub.add_parser("list", help="list held locks (SCAN, never KEYS)")
    ls.add_argument("--prefix", dest="name_prefix", default="", help="lock names starting so")
    ls.add_argument("--json", action="store_true", help="machine-readable output")

    rel = sub.add_parser("release", help="delete a lock whoever holds it (needs --force)")
    rel.add_argument("name")
    rel.add_argument("--force", action="store_true", help="yes, really")

    demo = sub.add_parser("demo", help="the lottery: N processes race, exactly one draws")
    demo.add_argument("--workers", type=int, default=5, help="processes (default 5)")

    srv = sub.add_parser("server", help="the embedded redis-server")
    srv.add_argument("action", choices=["status", "stop", "start"])
    srv.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in words:  # everything after the first "--" is the command of `run`
        cut = words.index("--")
        words, cmd = words[:cut], words[cut + 1 :]
    args = parser.parse_args(words)
    args.cmd = cmd
    try:
        status = _dispatch(args, parser)
    except KeyboardInterrupt:  # Ctrl-C while waiting for the lock: no traceback
        status = 128 + signal.SIGINT
    except CliError as exc:
        print(f"redislock: {exc}", file=sys.stderr)
        return exc.status
    except LockConfigError as exc:
        print(f"redislock: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        print(f"redislock: cannot reach Redis: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except (redis.exceptions.RedisError, RedisLockError) as exc:
        print(f"redislock: {type(exc).__name__}: {exc}", file=sys.stderr)
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
        )
    if args.command == "inspect":
        return _inspect(connect(args.url), args.name, args.prefix, as_json=args.json)
    if args.command == "list":
        return _list(connect(args.url), args.name_prefix, args.prefix, as_json=args.json)
    if args.command == "release":
        if not args.force:
            raise CliError(
                "release deletes the lock whoever holds it; add --force to do it", EXIT_USAGE
            )
        return _force_release(connect(args.url), args.name, args.prefix)
    if args.command == "demo":
        from redislock.cli.demo import run_demo

        if args.workers < 1:
            parser.error("--workers must be at least 1")
        url = args.url or os.environ.get("REDIS_URL") or None
        connect(url)  # starts the embedded server once, before the workers race
        return run_demo(url or server.ensure_embedded(), workers=args.workers)
    return _server(args.action, as_json=args.json)


def _describe(client: redis.Redis, name: str, prefix: str) -> dict[str, Any]:
    keys = LockKeys.for_name(validate.check_name(name), prefix)
    pipe = client.pipeline(transaction=True)  # one consistent view of the four keys
    pipe.get(keys.lock)
    pipe.pttl(keys.lock)
    pipe.get(keys.fence)
    pipe.exists(keys.wait)
    value, pttl, fence, waiting = pipe.execute()
    holder = HolderInfo.parse(value) if value is not None else None
    info: dict[str, Any] = {
        "name": name,
        "key": keys.lock,
        "held": value is not None,
        "ttl": pttl / 1000.0 if value is not None and pttl >= 0 else None,
        "fencing_counter": as_int(fence) if fence is not None else 0,
        "waiters": bool(waiting),
        "holder": None,
    }
    if holder is not None:
        info["holder"] = {
            "fencing_token": info["fencing_counter"],
            "host": holder.host,
            "pid": holder.pid,
            "acquired_at": dt.datetime.fromtimestamp(holder.acquired_at, dt.UTC).isoformat(),
            "token_tag": holder.token_tag,
        }
    return info


def _holder_text(info: dict[str, Any]) -> str:
    h = info["holder"]
    if not info["held"]:
        return "free"
    if h is None:
        return "held (not by redislock: unknown value format)"
    return (
        f"held by {h['host']} pid {h['pid']} since {h['acquired_at']}, "
        f"fencing token {h['fencing_token']}, token ~{h['token_tag']}"
    )


def _inspect(client: redis.Redis, name: str, prefix: str, *, as_json: bool) -> int:
    info = _describe(client, name, prefix)
    if as_json:
        print(json.dumps(info, sort_keys=True))
        return 0
    print(f"lock {name!r} ({info['key']}): {_holder_text(info)}")
    if info["held"]:
        print(f"  ttl: {info['ttl']} s")
    print(f"  fencing counter: {info['fencing_counter']}")
    print(f"  waiters: {'yes' if info['waiters'] else 'none seen'}")
    return 0


def _list(client: redis.Redis, name_prefix: str, prefix: str, *, as_json: bool) -> int:
    escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix + "{" + name_prefix)
    names = []
    for raw in client.scan_iter(match=escaped + "*", count=1000):
        key = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        name = LockKeys.name_of(key, prefix)
        if name is not None and name.startswith(name_prefix):
            names.append(name)
    infos = [i for i in (_describe(client, n, prefix) for n in sorted(set(names))) if i["held"]]
    if as_json:
        print(json.dumps(infos, sort_keys=True))
        return 0
    for info in infos:
        print(f"{info['name']}\tttl {info['ttl']} s\t{_holder_text(info)}")
    if not infos:
        print("no locks held", file=sys.stderr)
    return 0


def _force_release(client: redis.Redis, name: str, prefix: str) -> int:
    info = _describe(client, name, prefix)
    keys = LockKeys.for_name(name, prefix)
    script = SCRIPTS["lock_force_release"]
    deleted = client.eval(script.source, 3, keys.lock, keys.wait, keys.wake, 1000)
    if deleted:
        print(f"released lock {name!r} ({_holder_text(info)})")
    else:
        print(f"lock {name!r} was not held")
    return 0


def _server(action: str, *, as_json: bool) -> int:
    try:
        if action == "start":
            server.ensure_embedded()
        if action == "stop":
            stopped = server.stop_embedded()
            print(
                "stopped the embedded server" if stopped else "the embedded server was not running"
            )
            return 0
        status = server.embedded_status()
    except server.ServerError as exc:
        raise CliError(str(exc), EXIT_UNAVAILABLE) from exc
    if as_json:
        print(json.dumps(status, sort_keys=True, default=str))
    elif status is None:
        print(f"the embedded server is not running (runtime dir {server.runtime_dir()})")
    else:
        for key, value in sorted(status.items()):
            print(f"{key}: {value}")
    return 0 if status is not None else 3
