# SPDX-License-Identifier: MIT
"""``redislock top``: a live view of the locks under a prefix (SCAN plus :func:`inspect`).

Every refresh scans the lock keys under the prefix (SCAN with a MATCH pattern, never KEYS; a
Cluster client scans every primary), reads each name with one :func:`inspect` script call
and shows the held or awaited ones: kind, holders (host, pid), how long held, the lease left,
waiters and the fencing counter; a counting CountDownLatch (its count and generation, its
TTL as the lease) and a Barrier's round with a party in (its state, the parties entered,
the time to the next member lease end as the lease). ``--once --json`` prints one snapshot
for scripts.

The table is drawn with `rich <https://rich.readthedocs.io/>`_ (its ``Live`` display),
imported when ``top`` runs (not for every subcommand's parser).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import time
from typing import TYPE_CHECKING, Any

import redis
import redis.cluster

from redislock._core.inspection import name_of_key
from redislock.cli import _args
from redislock.cli.render import HOLD_KINDS, KIND_LABELS, OWN_KINDS, as_json, plural, state_text
from redislock.inspection import inspect

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["add_parser", "run", "scan_names", "snapshot", "top_command"]


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock top`` to the command line."""
    p = subs.add(
        "top",
        run,
        help="a live view of the locks under the prefix: holders, leases, waiters",
        description="Refreshes every --interval seconds (Ctrl-C ends it) from SCAN plus "
        "inspect: each held or awaited lock's kind, holders (host, pid), how long held, "
        "the lease left, waiters and fencing counter. --once prints one table, --json one "
        "snapshot as JSON. Hold times compare this machine's clock with the holder's.",
    )
    p.add_argument(
        "--match", default="*", metavar="GLOB", help="lock names matching GLOB (default *)"
    )
    p.add_argument(
        "--interval", type=_args.seconds, default=1.0, help="seconds between refreshes (default 1)"
    )
    p.add_argument("--once", action="store_true", help="one snapshot, then exit")
    p.add_argument("--json", action="store_true", help="one snapshot as JSON, then exit")
    p.add_argument("--count", type=int, metavar="N", help="exit after N refreshes")
    p.add_argument(
        "--cluster",
        action="store_true",
        help="the URL is a node of a Redis Cluster: scan every primary",
    )


def run(ctx: _args.Context) -> int:
    """Run ``redislock top`` (see :func:`top_command`); with ``--cluster`` the URL is a
    seed node of a Redis Cluster.

    Raises:
        CliError: Redis not found (69).
        redis.RedisError: the server could not be read.
    """
    args = ctx.args
    if args.count is not None and args.count < 1:
        ctx.parser.error("--count must be at least 1")
    if args.interval <= 0:
        ctx.parser.error("--interval must be > 0 seconds")
    single = ctx.client()
    client: redis.Redis | redis.cluster.RedisCluster = single
    if args.cluster:
        # a seed node, with the URL's settings (credentials, TLS, timeouts)
        seed = dict(single.connection_pool.connection_kwargs)
        seed.pop("db", None)
        client = redis.cluster.RedisCluster(**seed)
    return top_command(
        client,
        args.prefix,
        match=args.match,
        interval=args.interval,
        once=args.once,
        as_json_output=args.json,
        count=args.count,
    )


_SCAN_SPECIALS = "*?[]\\"


def _escape(text: str) -> str:
    return "".join(f"\\{c}" if c in _SCAN_SPECIALS else c for c in text)


def scan_names(
    client: redis.Redis | redis.cluster.RedisCluster, prefix: str, match: str = "*"
) -> list[str]:
    """The lock names under key ``prefix`` whose name matches the glob ``match``, sorted.

    SCAN only (``COUNT 1000``), never KEYS: a Cluster client scans every primary. Internal
    keys of a name (``:queue``, ``:wait``, ...) give the name once; a latch's and a
    barrier's keys (``:latch``, ``:barrier``) give their name.

    Raises:
        redis.RedisError: the server could not be read.
    """
    # The name's first characters before any glob special narrow the server-side MATCH.
    literal = ""
    for c in match:
        if c in "*?[\\":
            break
        literal += c
    pattern = _escape(prefix + "{" + literal) + "*"
    names: set[str] = set()
    for raw in client.scan_iter(match=pattern, count=1000):
        key = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        name = name_of_key(key, prefix)
        if name is not None and fnmatch.fnmatchcase(name, match):
            names.add(name)
    return sorted(names)


def _holders(info: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """Every holder of ``info`` (:func:`as_json`'s) with ``held_for`` seconds added."""
    if info["kind"] in HOLD_KINDS:
        holds = [dict(h) for h in info["holds"]]
    elif info.get("holder"):
        holds = [dict(info["holder"], role="holder", lease_remaining=info["ttl"])]
    else:
        holds = []
    for h in holds:
        acquired = dt.datetime.fromisoformat(h["acquired_at"]).timestamp()
        h["held_for"] = round(max(0.0, now - acquired), 3)
    return holds


def snapshot(
    client: redis.Redis | redis.cluster.RedisCluster, prefix: str, match: str = "*"
) -> dict[str, Any]:
    """One snapshot of the locks under ``prefix`` whose names match ``match``.

    Returns:
        ``{"time": ISO 8601 UTC, "prefix": ..., "match": ..., "locks": [...]}``; each lock
        is ``inspect --json``'s object (only names held or awaited) plus ``holders`` (every
        hold with ``host``, ``pid``, ``role``, ``fencing_token``, ``lease_remaining`` and
        ``held_for`` seconds, by this machine's clock against the holder's) and
        ``waiter_count`` (a FairLock's queue length; None where only "someone waits" is
        stored). Durations are seconds.

    Raises:
        redis.RedisError: the server could not be read.
    """
    now = time.time()
    locks = []
    for name in scan_names(client, prefix, match):
        info = as_json(inspect(client, name, prefix=prefix))
        if not (info["held"] or info["waiters"]):
            continue
        info["holders"] = _holders(info, now)
        info["waiter_count"] = len(info["queue"]) if info["kind"] == "fair" else None
        locks.append(info)
    return {
        "time": dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="milliseconds"),
        "prefix": prefix,
        "match": match,
        "locks": locks,
    }


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _own_lease(lock: dict[str, Any]) -> float | None:
    """The lease column of a kind kept apart: a barrier's next member lease end, a latch's
    TTL."""
    if lock["kind"] == "barrier":
        ends: float | None = lock["barrier"]["next_lease_end"]
        return ends
    ttl: float | None = lock["ttl"]
    return ttl


def _waiters(lock: dict[str, Any]) -> str:
    """A FairLock's queue length; elsewhere whether writers/permits or readers wait."""
    if lock["waiter_count"] is not None:
        return str(lock["waiter_count"])
    who = [w for w, on in (("yes", lock["waiters"]), ("readers", lock.get("reader_waiters"))) if on]
    return ", ".join(who) or "0"


def table(snap: dict[str, Any]) -> Table:
    """The snapshot as a ``rich`` table: a row per holder (the lock's name, kind, waiters and
    fencing counter on its first), one row for a lock nobody holds."""
    from rich import box
    from rich.table import Table

    shown = f"{snap['prefix']}{{{snap['match']}}}"
    count = plural(len(snap["locks"]), "lock")
    t = Table(
        title=f"redislock top: {count} under {shown}  ({snap['time']})",
        box=box.SIMPLE_HEAD,
    )
    # At 80 columns (a pipe, cron's mail) the numbers keep their width and headers; the
    # text columns fold long names and holders onto more lines instead.
    for col, wide in (("name", 10), ("kind", 9), ("holder", 12)):
        t.add_column(col, min_width=wide, overflow="fold")
    for col in ("held s", "lease s", "waiters", "fencing"):
        t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for lock in snap["locks"]:
        head = [lock["name"], KIND_LABELS[lock["kind"]]]
        tail = [_waiters(lock), str(lock["fencing_counter"])]
        holders = lock["holders"]
        if not holders:  # one row: nobody holds it (or not with redislock's values)
            if lock["kind"] in OWN_KINDS:  # a latch's count, a barrier's round: no holder
                t.add_row(*head, state_text(lock), "-", _seconds(_own_lease(lock)), *tail)
                continue
            if lock["kind"] == "foreign":
                who = f"a Redis {lock['type']}, not a lock"
            else:
                who = "free" if not lock["held"] else "held (value not redislock's)"
            t.add_row(*head, who, "-", _seconds(lock["ttl"]), *tail)
            continue
        for n, h in enumerate(holders):  # a row per holder: its numbers stay on its line
            who = f"{h['host']} pid {h['pid']}" + (
                "" if h["role"] == "holder" else f" ({h['role']})"
            )
            if n == 0 and lock.get("leader"):  # an Election: its leader's identity first
                who = f"leader {lock['leader']['identity']}: {who}"
            t.add_row(
                *(head if n == 0 else ["", ""]),
                who,
                _seconds(h["held_for"]),
                _seconds(h["lease_remaining"]),
                *(tail if n == 0 else ["", ""]),
            )
    return t


def top_command(
    client: redis.Redis | redis.cluster.RedisCluster,
    prefix: str,
    *,
    match: str = "*",
    interval: float = 1.0,
    once: bool = False,
    as_json_output: bool = False,
    count: int | None = None,
) -> int:
    """Show the locks under ``prefix`` (names matching the glob ``match``): refreshed every
    ``interval`` seconds until Ctrl-C or ``count`` refreshes, or one snapshot with ``once``
    (as JSON with ``as_json_output``). Returns the exit status (0).

    Raises:
        redis.RedisError: the server could not be read.
    """
    from rich.console import Console
    from rich.live import Live

    if once or as_json_output:
        snap = snapshot(client, prefix, match)
        if as_json_output:
            print(json.dumps(snap, sort_keys=True))
        else:
            Console().print(table(snap))
        return 0
    shown = 0
    try:
        with Live(table(snapshot(client, prefix, match)), auto_refresh=False) as live:
            shown = 1
            while count is None or shown < count:
                time.sleep(interval)
                live.update(table(snapshot(client, prefix, match)), refresh=True)
                shown += 1
    except KeyboardInterrupt:
        pass
    return 0
