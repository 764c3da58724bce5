# SPDX-License-Identifier: MIT
"""``redislock release NAME --force``: the operator override, for every kind."""

from __future__ import annotations

import shlex
from typing import Any

import redis

from redislock._core.fair import FairCore
from redislock._core.hold import HoldCore
from redislock._core.keys import LockKeys, delay_key
from redislock._core.lock import LockCore
from redislock._core.options import FairOptions, LockOptions
from redislock._core.scripts import SCRIPTS
from redislock.cli import _args, render
from redislock.cli._common import EXIT_CODES, EXIT_USAGE, CliError
from redislock.inspection import inspect
from redislock.sync._driver import run as run_flow

__all__ = ["add_parser", "force_release_command", "run"]


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock release`` to the command line."""
    p = subs.add(
        "release",
        run,
        help="delete a lock whoever holds it (needs --force)",
        description="Operator override for any kind: a Lock is deleted and one waiter woken; "
        "a FairLock is deleted and granted to its next queued waiter; an RLock, "
        "ReadWriteLock or Semaphore loses every hold and all its waiters are woken. "
        "The old holders find their lease gone at their next renewal. A key under NAME "
        "that redislock did not write (another Redis type, a value or hash fields of "
        "another format) is not touched: exit 64.",
        epilog=EXIT_CODES,
    )
    p.add_argument("name")
    p.add_argument("--force", action="store_true", help="yes, really")


def run(ctx: _args.Context) -> int:
    """Run ``redislock release`` (see :func:`force_release_command`).

    Raises:
        CliError: no ``--force`` (64), Redis not found (69), or the key is not a lock (64).
    """
    args = ctx.args
    if not args.force:
        raise CliError(
            "release deletes the lock whoever holds it; add --force to do it", EXIT_USAGE
        )
    return force_release_command(ctx.client(), args.name, args.prefix)


_DELAY_ENDED = "; its lock-delay was ended (the name is free now)"
"""Added when the override ended a lock-delay (the scripts' force answers 2 for it)."""


def _base_core(name: str, prefix: str) -> LockCore:
    """The core of a lock object with the default options (``prefix`` validated)."""
    return LockCore.from_options(name, LockOptions(prefix=prefix))


def _not_ours(info: dict[str, Any]) -> str | None:
    """What the key of ``info`` (:func:`render.as_json`'s) holds if redislock did not write it, in a
    few words; None for a key of one of redislock's kinds (or no key)."""
    kind = info["kind"]
    if kind == "foreign":
        return render.state_text(info)
    if kind in render.LEASE_KINDS and info["held"] and info["holder"] is None:
        return "a string that is not a redislock lock value"
    if kind in render.HOLD_KINDS and info.get("unknown_fields"):
        fields = render.plural(info["unknown_fields"], "hash field")
        return f"a hash with {fields} not written by redislock"
    return None


def force_release_command(client: redis.Redis, name: str, prefix: str) -> int:
    """Delete lock ``name`` whoever holds it and print what was removed; returns the exit
    status (0).

    Raises:
        CliError: the key under ``name`` is not redislock's: a Redis type redislock never
            writes there, a string that is not a lock value, or a hash with fields that are
            not holds (status 64; the key is not touched).
    """
    info = render.as_json(inspect(client, name, prefix=prefix))
    kind = info["kind"]
    label = render.KIND_LABELS[kind]
    foreign = _not_ours(info)
    if foreign is not None:
        raise CliError(
            f"{info['key']} holds {foreign}: not touched (`release --force` deletes only "
            f"what redislock wrote; if you really mean to delete this key: "
            f"redis-cli DEL {shlex.quote(info['key'])})",
            EXIT_USAGE,
        )
    if kind in render.HOLD_KINDS:  # every hold goes; every kind of waiter is woken
        hold_core = HoldCore.for_mode(_base_core(name, prefix), "w")
        removed = run_flow(client, hold_core.force_flow())
        if removed:
            who = "; ".join(render.hold_text(h) for h in info["holds"])
            print(f"released {label} {name!r}: {render.plural(removed, 'hold')} removed ({who})")
        else:
            print(f"{label} {name!r} was not held")
        return 0
    if kind == "fair":  # the next live waiter in the queue is granted the lock
        fair = FairOptions(prefix=prefix)
        base = LockCore.from_options(name, fair)
        fair_core = FairCore.from_base(base, fair.waiter_lease, fair.queue_max)
        ended = run_flow(client, fair_core.force_flow())
        deleted = ended & 1
        text = (
            f"released {label} {name!r} ({render.holder_text(info)})"
            if deleted
            else f"{label} {name!r} was not held"
        ) + _DELAY_ENDED * bool(ended & 2)
        now = inspect(client, name, prefix=prefix)
        if now.kind in render.LEASE_KINDS and now.holders:
            h = now.holders[0]
            text += (
                f"; now held by the next waiter: {h.host} pid {h.pid}, "
                f"fencing token {h.fencing_token}, token ~{h.token_tag}"
            )
        print(text)
        return 0
    keys = LockKeys.for_name(name, prefix)
    script = SCRIPTS["lock_force_release"]
    ended = client.eval(script.source, 4, keys.lock, keys.wait, keys.wake, delay_key(keys.lock))
    said = f"released lock {name!r} ({render.holder_text(info)})" if ended & 1 else None
    print((said or f"lock {name!r} was not held") + _DELAY_ENDED * bool(ended & 2))
    return 0
