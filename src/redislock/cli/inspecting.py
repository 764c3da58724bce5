# SPDX-License-Identifier: MIT
"""``redislock inspect NAME``: who holds a lock of any kind, and who waits; a
CountDownLatch's count, a Barrier's round."""

from __future__ import annotations

import json
from typing import Any

import redis

from redislock.cli import _args
from redislock.cli.render import (
    HOLD_KINDS,
    KIND_LABELS,
    OWN_KINDS,
    as_json,
    hold_text,
    own_lines,
    plural,
    state_text,
)
from redislock.inspection import inspect

__all__ = ["add_parser", "inspect_command", "run"]


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock inspect`` to the command line."""
    p = subs.add("inspect", run, help="show who holds a lock (any kind), and who waits")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(ctx: _args.Context) -> int:
    """Run ``redislock inspect`` (see :func:`inspect_command`).

    Raises:
        CliError: Redis not found (69).
    """
    args = ctx.args
    return inspect_command(ctx.client(), args.name, args.prefix, as_json_output=args.json)


def _yes(flag: bool) -> str:
    return "yes" if flag else "none seen"


def inspect_command(client: redis.Redis, name: str, prefix: str, *, as_json_output: bool) -> int:
    """Print what is stored under ``name`` (text, or JSON with ``as_json_output``); returns
    the exit status (0). Redis errors propagate."""
    info = as_json(inspect(client, name, prefix=prefix))
    if as_json_output:
        print(json.dumps(info, sort_keys=True))
        return 0
    _print_text(name, info)
    return 0


def _print_text(name: str, info: dict[str, Any]) -> None:
    kind = info["kind"]
    print(f"{KIND_LABELS[kind]} {name!r} ({info['key']}): {state_text(info)}")
    if kind == "foreign":
        return
    for line in own_lines(info):  # a latch's or a round's details, or that the name is one too
        print(f"  {line}")
    counter = (
        f"  fencing counter: {info['fencing_counter']} (its hash slot's; the next token is greater)"
    )
    if kind in OWN_KINDS:  # no holder, no lease, no waiters stored (they wait on its channel)
        print(counter)
        return
    if info["held"]:
        ttl = info["ttl"]
        print(f"  ttl: {ttl} s" if ttl is not None else "  ttl: none (the key never expires)")
    if info.get("leader"):
        value = info["leader"]["value"]
        print(f"  leader's value: {value!r}" if value else "  leader's value: none proclaimed")
    print(counter)  # the slot's counter, shared by the names of the slot
    if kind in HOLD_KINDS:
        if kind == "semaphore":
            count = info["permit_count"]
            source = f"{count} (the :permits key)" if count is not None else "set by clients"
            print(f"  permit count: {source}")
        for h in info["holds"]:
            print(f"  {hold_text(h)}")
        if info.get("unknown_fields"):
            print(f"  fields not written by redislock: {info['unknown_fields']}")
        if kind == "rwlock":
            waiting, readers = _yes(info["waiters"]), _yes(info["reader_waiters"])
            print(f"  waiters: writers {waiting}, readers {readers}")
            return
    if kind == "fair":
        queue = info["queue"]
        print(f"  queue: {plural(len(queue), 'waiter')}")
        for w in queue:
            lease = w["lease_remaining"]
            print(f"    {w['position']}. token ~{w['token_tag']}, waiter lease {lease} s")
        return
    print(f"  waiters: {'yes' if info['waiters'] else 'none seen'}")
