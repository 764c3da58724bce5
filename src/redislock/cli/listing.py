# SPDX-License-Identifier: MIT
"""``redislock list``: the held locks of every kind under a prefix (SCAN, never KEYS)."""

from __future__ import annotations

import json
import sys
from typing import Any

import redis

from redislock._core.inspection import name_of_key
from redislock.cli import _args
from redislock.cli.render import HOLD_KINDS, KIND_LABELS, as_json, holder_text, state_text
from redislock.inspection import inspect

__all__ = ["add_parser", "list_command", "run"]


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock list`` to the command line."""
    p = subs.add("list", run, help="list held locks of every kind (SCAN, never KEYS)")
    p.add_argument(
        "--starts-with",
        dest="name_prefix",
        default="",
        metavar="TEXT",
        help="only lock names starting with TEXT (literally; --prefix is the key prefix)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(ctx: _args.Context) -> int:
    """Run ``redislock list`` (see :func:`list_command`).

    Raises:
        CliError: Redis not found (69).
    """
    args = ctx.args
    return list_command(ctx.client(), args.name_prefix, args.prefix, as_json_output=args.json)


def _list_text(info: dict[str, Any]) -> str:
    kind = info["kind"]
    if kind in (None, "lock"):
        return holder_text(info)  # as before the other kinds existed
    text = f"{KIND_LABELS[kind]}: {state_text(info)}"
    if kind == "fair":
        text += f", {len(info['queue'])} queued"
    if kind in HOLD_KINDS:
        who = ", ".join(f"{h['role']} {h['host']} pid {h['pid']}" for h in info["holds"])
        text += f" ({who})"
    return text


def list_command(
    client: redis.Redis, name_prefix: str, prefix: str, *, as_json_output: bool
) -> int:
    """Print every held lock whose name starts with ``name_prefix``, sorted by name (text,
    or a JSON list with ``as_json_output``); returns the exit status (0)."""
    escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix + "{" + name_prefix)
    names = []
    for raw in client.scan_iter(match=escaped + "*", count=1000):
        key = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        name = name_of_key(key, prefix)  # None for the internal keys (:queue, :wait ...)
        if name is not None and name.startswith(name_prefix):
            names.append(name)
    found = (inspect(client, n, prefix=prefix) for n in sorted(set(names)))
    infos = [as_json(i) for i in found if i.held]
    if as_json_output:
        print(json.dumps(infos, sort_keys=True))
        return 0
    for info in infos:
        print(f"{info['name']}\tttl {info['ttl']} s\t{_list_text(info)}")
    if not infos:
        print("no locks held", file=sys.stderr)
    return 0
