# SPDX-License-Identifier: MIT
"""The ``redislock`` command: run a command under a lock (a Lock, a read or write hold of a
ReadWriteLock, a FairLock, or a Semaphore permit), inspect, list, force-release (every
kind), the lottery demo, and the embedded server.

Exit status (also in the README):
    0     success (``run``: CMD's own status is passed through)
    64    bad usage or invalid argument (EX_USAGE); ``run``: NAME is in use by another kind
          of lock
    69    Redis unreachable (also when ``run`` cannot release after CMD), or no redis-server
          for the embedded server (EX_UNAVAILABLE)
    75    lock busy with ``--no-wait``, or the wait timed out, or a ``--fair`` queue is full
          (EX_TEMPFAIL)
    79    ``run``: the lease was lost while CMD ran; CMD's process group was stopped
    126   ``run``: CMD could not be executed;  127: CMD not found
    128+N ``run``: CMD was killed by signal N
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, Final, NoReturn

import redis

from redislock import server
from redislock._core import validate
from redislock._core.fair import DEFAULT_QUEUE_MAX, DEFAULT_WAITER_LEASE, FairCore
from redislock._core.hold import MAX_PERMITS, HoldCore
from redislock._core.keys import DEFAULT_PREFIX, FairKeys, HoldKeys, LockKeys
from redislock._core.lock import (
    DEFAULT_RECHECK,
    DEFAULT_WATCHDOG_LEASE,
    HolderInfo,
    LockCore,
    token_tag,
)
from redislock._core.ops import as_int, as_str
from redislock._core.scripts import SCRIPTS
from redislock._version import __version__
from redislock.errors import LockConfigError, RedisLockError
from redislock.sync._driver import run as run_flow

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
            kind="permit" if args.permits is not None else args.kind or "lock",
            permits=args.permits,
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
    if args.command == "torture":
        from redislock.cli.torture import torture_command

        try:
            # Only an explicit --url: without one the run starts servers of its own.
            return torture_command(args, args.url)
        except ValueError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
    return _server(args.action, as_json=args.json)


KIND_LABELS: Final = {
    None: "lock",  # nothing there: shown as a free lock
    "lock": "lock",
    "fair": "fair lock",
    "rlock": "reentrant lock",
    "rwlock": "read-write lock",
    "semaphore": "semaphore",
    "foreign": "key",
}
"""How ``inspect`` names each kind; the keys are the ``kind`` field of the JSON output."""

_HOLD_KINDS: Final = ("rlock", "rwlock", "semaphore")
_ROLES: Final = {"w": "writer", "r": "reader", "p": "permit"}


def _iso(unix_ms: int) -> str:
    return dt.datetime.fromtimestamp(unix_ms / 1000.0, dt.UTC).isoformat()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _describe(client: redis.Redis, name: str, prefix: str) -> dict[str, Any]:
    """What is stored under ``name``, whatever its kind, as one consistent snapshot.

    The kind comes from the key's TYPE: a string is a Lock, or a FairLock when a waiter
    queue exists (a FairLock nobody waits for looks exactly like a Lock); a hash holds the
    holds of a Semaphore (permits, or a ``:permits`` key), a ReadWriteLock (readers, or a
    reader waiting) or else an RLock (writer holds only: an RLock, or a ReadWriteLock
    whose writer holds it). Leases are compared with the server's clock (TIME), never ours.
    """
    keys = LockKeys.for_name(validate.check_name(name), prefix)
    hkeys, fkeys = HoldKeys.of(keys.lock), FairKeys.of(keys.lock)
    pipe = client.pipeline(transaction=True)  # one consistent view of every key of the name
    pipe.type(keys.lock)
    pipe.get(keys.lock)  # fails (the error comes back in place) when the key is a hash,
    pipe.hgetall(keys.lock)  # and this one when it is a string
    pipe.pttl(keys.lock)
    pipe.get(keys.fence)
    pipe.exists(keys.wait)
    pipe.exists(hkeys.rwait)
    pipe.get(hkeys.permits)
    pipe.lrange(fkeys.queue, 0, -1)
    pipe.zrange(fkeys.leases, 0, -1, withscores=True)
    pipe.time()
    replies = pipe.execute(raise_on_error=False)
    key_type, value, fields, pttl, fence, waiting, rwaiting, permits, queue, leases, now = replies
    now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
    key_type = as_str(key_type)
    held = key_type != "none"
    info: dict[str, Any] = {
        "name": name,
        "key": keys.lock,
        "held": held,
        "ttl": pttl / 1000.0 if held and pttl >= 0 else None,
        "fencing_counter": as_int(fence) if fence is not None else 0,
        "waiters": bool(waiting),
    }
    if key_type == "hash" or (key_type == "none" and permits is not None and not queue):
        info.update(_describe_holds(fields if held else {}, now_ms))
        semaphore = info["permits_held"] > 0 or permits is not None
        rw = info["readers"] > 0 or bool(rwaiting)
        info["kind"] = "semaphore" if semaphore else "rwlock" if rw else "rlock"
        info["held"] = bool(info["holds"])
        info["reader_waiters"] = bool(rwaiting)
        if semaphore:
            info["permit_count"] = as_int(permits) if permits is not None else None
        return info
    if key_type not in ("string", "none"):
        info.update(kind="foreign", type=key_type, holder=None)
        return info
    holder = HolderInfo.parse(value) if held else None
    info["kind"] = "fair" if queue else "lock" if held else None
    info["holder"] = None
    if holder is not None:
        info["holder"] = {
            "fencing_token": info["fencing_counter"],
            "host": holder.host,
            "pid": holder.pid,
            "acquired_at": dt.datetime.fromtimestamp(holder.acquired_at, dt.UTC).isoformat(),
            "token_tag": holder.token_tag,
        }
    if queue:
        info["queue"] = _describe_queue(queue, leases, now_ms)
        info["waiters"] = info["waiters"] or bool(info["queue"])
    return info


def _describe_queue(queue: list[Any], leases: list[Any], now_ms: int) -> list[dict[str, Any]]:
    """The live waiters of a FairLock in queue order (a waiter whose waiter lease ended is
    dropped by the next script run; it is not shown)."""
    ends = {as_str(token): float(score) for token, score in leases}
    rows: list[dict[str, Any]] = []
    for raw in queue:
        token = as_str(raw)
        end = ends.get(token)
        if end is None or end <= now_ms:
            continue
        rows.append(
            {
                "position": len(rows) + 1,
                "token_tag": token_tag(token),
                "lease_remaining": (end - now_ms) / 1000.0,
            }
        )
    return rows


def _describe_holds(fields: dict[Any, Any], now_ms: int) -> dict[str, Any]:
    """The live holds of a hold hash (see scripts/hold.lua), writers first, then readers,
    then permits, each by fencing token."""
    holds: list[dict[str, Any]] = []
    unknown = 0
    for raw_token, raw_value in fields.items():
        parts = as_str(raw_value).split("|")
        if len(parts) != 7 or parts[0] not in _ROLES:
            unknown += 1
            continue
        mode, count, expires, fence, host, pid, acquired = parts
        try:
            numbers = [int(x) for x in (count, expires, fence, pid, acquired)]
        except ValueError:
            unknown += 1
            continue
        if numbers[1] <= now_ms:
            continue  # expired; the next script run removes it
        token = as_str(raw_token)
        hold: dict[str, Any] = {
            "mode": mode,
            "role": _ROLES[mode],
            "host": host,
            "pid": numbers[3],
            "count": numbers[0],
            "fencing_token": numbers[2],
            "lease_remaining": (numbers[1] - now_ms) / 1000.0,
            "acquired_at": _iso(numbers[4]),
            "token_tag": token_tag(token),
        }
        if mode == "p":  # as Permit.id: not a secret
            hold["permit_id"] = hashlib.sha256(token.encode()).hexdigest()[:16]
        holds.append(hold)
    holds.sort(key=lambda h: ("wrp".index(h["mode"]), h["fencing_token"]))
    result: dict[str, Any] = {
        "holds": holds,
        "writers": sum(1 for h in holds if h["mode"] == "w"),
        "readers": sum(1 for h in holds if h["mode"] == "r"),
        "permits_held": sum(1 for h in holds if h["mode"] == "p"),
    }
    if unknown:
        result["unknown_fields"] = unknown
    return result


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


def _state_text(info: dict[str, Any]) -> str:
    """The state of any kind in a few words (the first line of ``inspect``)."""
    kind = info["kind"]
    if kind == "foreign":
        return f"a Redis {info['type']}, not a redislock lock"
    if kind not in _HOLD_KINDS:
        return _holder_text(info)
    if kind == "semaphore":
        count = info["permit_count"]
        of = f" of {count}" if count is not None else ""
        return f"{info['permits_held']}{of} permits held"
    parts = [_plural(info[k], k[:-1]) for k in ("writers", "readers") if info[k]]
    return "held by " + " and ".join(parts) if parts else "free"


def _hold_text(h: dict[str, Any]) -> str:
    text = (
        f"{h['role']}: {h['host']} pid {h['pid']}, hold count {h['count']}, "
        f"fencing token {h['fencing_token']}, lease {h['lease_remaining']} s, "
        f"since {h['acquired_at']}, token ~{h['token_tag']}"
    )
    return text + (f", permit id {h['permit_id']}" if "permit_id" in h else "")


def _yes(flag: bool) -> str:
    return "yes" if flag else "none seen"


def _inspect(client: redis.Redis, name: str, prefix: str, *, as_json: bool) -> int:
    info = _describe(client, name, prefix)
    if as_json:
        print(json.dumps(info, sort_keys=True))
        return 0
    kind = info["kind"]
    print(f"{KIND_LABELS[kind]} {name!r} ({info['key']}): {_state_text(info)}")
    if kind == "foreign":
        return 0
    if info["held"]:
        print(f"  ttl: {info['ttl']} s")
    print(f"  fencing counter: {info['fencing_counter']}")
    if kind in _HOLD_KINDS:
        if kind == "semaphore":
            count = info["permit_count"]
            source = f"{count} (the :permits key)" if count is not None else "set by clients"
            print(f"  permit count: {source}")
        for h in info["holds"]:
            print(f"  {_hold_text(h)}")
        if info.get("unknown_fields"):
            print(f"  fields not written by redislock: {info['unknown_fields']}")
        if kind == "rwlock":
            waiting, readers = _yes(info["waiters"]), _yes(info["reader_waiters"])
            print(f"  waiters: writers {waiting}, readers {readers}")
            return 0
    if kind == "fair":
        queue = info["queue"]
        print(f"  queue: {_plural(len(queue), 'waiter')}")
        for w in queue:
            lease = w["lease_remaining"]
            print(f"    {w['position']}. token ~{w['token_tag']}, waiter lease {lease} s")
        return 0
    print(f"  waiters: {'yes' if info['waiters'] else 'none seen'}")
    return 0


def _list_text(info: dict[str, Any]) -> str:
    kind = info["kind"]
    if kind in (None, "lock"):
        return _holder_text(info)  # as before the other kinds existed
    text = f"{KIND_LABELS[kind]}: {_state_text(info)}"
    if kind == "fair":
        text += f", {len(info['queue'])} queued"
    if kind in _HOLD_KINDS:
        who = ", ".join(f"{h['role']} {h['host']} pid {h['pid']}" for h in info["holds"])
        text += f" ({who})"
    return text


def _list(client: redis.Redis, name_prefix: str, prefix: str, *, as_json: bool) -> int:
    escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix + "{" + name_prefix)
    names = []
    for raw in client.scan_iter(match=escaped + "*", count=1000):
        key = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        name = LockKeys.name_of(key, prefix)  # None for the internal keys (:fence, :queue ...)
        if name is not None and name.startswith(name_prefix):
            names.append(name)
    infos = [i for i in (_describe(client, n, prefix) for n in sorted(set(names))) if i["held"]]
    if as_json:
        print(json.dumps(infos, sort_keys=True))
        return 0
    for info in infos:
        print(f"{info['name']}\tttl {info['ttl']} s\t{_list_text(info)}")
    if not infos:
        print("no locks held", file=sys.stderr)
    return 0


def _base_core(name: str, prefix: str) -> LockCore:
    return LockCore.create(
        name,
        ttl=None,
        watchdog_lease=DEFAULT_WATCHDOG_LEASE,
        renew_interval=None,
        max_lease=None,
        timeout=None,
        recheck_interval=DEFAULT_RECHECK,
        prefix=prefix,
        on_lost=None,
        socket_timeout=None,
    )


def _force_release(client: redis.Redis, name: str, prefix: str) -> int:
    info = _describe(client, name, prefix)
    kind = info["kind"]
    label = KIND_LABELS[kind]
    if kind == "foreign":
        raise CliError(f"{info['key']} holds {_state_text(info)}: not touched", 1)
    if kind in _HOLD_KINDS:  # every hold goes; every kind of waiter is woken
        hold_core = HoldCore.for_mode(_base_core(name, prefix), "w")
        removed = run_flow(client, hold_core.force_flow())
        if removed:
            who = "; ".join(_hold_text(h) for h in info["holds"])
            print(f"released {label} {name!r}: {_plural(removed, 'hold')} removed ({who})")
        else:
            print(f"{label} {name!r} was not held")
        return 0
    if kind == "fair":  # the next live waiter in the queue is granted the lock
        fair_core = FairCore.from_base(
            _base_core(name, prefix), DEFAULT_WAITER_LEASE, DEFAULT_QUEUE_MAX
        )
        deleted = run_flow(client, fair_core.force_flow())
        text = (
            f"released {label} {name!r} ({_holder_text(info)})"
            if deleted
            else f"{label} {name!r} was not held"
        )
        now = _describe(client, name, prefix)
        if now["kind"] in ("lock", "fair") and now["holder"] is not None:
            h = now["holder"]
            text += (
                f"; now held by the next waiter: {h['host']} pid {h['pid']}, "
                f"fencing token {h['fencing_token']}, token ~{h['token_tag']}"
            )
        print(text)
        return 0
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
