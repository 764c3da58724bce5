# SPDX-License-Identifier: MIT
"""``redislock demo``: the seeds' lottery.

At "noon" N worker processes race to draw 10 winners from a table of users, through a
:class:`~redislock.Once` for the round: the first one in takes its lock, draws, and stores
the winners with a fenced write (the store rejects a token not greater than the last
accepted one); the round's record then says it ran. Every later one (waiting for the lock,
or arriving after) finds the record and reports who drew. Exactly one worker must draw.
"""

from __future__ import annotations

import os
import random
import secrets
import sys
import time
from typing import Any

import redis

from redislock._core.ops import as_int, as_str
from redislock._core.scripts import SCRIPTS
from redislock.cli import _args
from redislock.sync.once import Once

__all__ = ["add_parser", "run", "run_demo"]

USERS = 1000
WINNERS = 10
DRAW_SECONDS = 0.3  # the drawing "work", so the others really wait


def _worker(url: str, round_id: str, index: int, start_at: float) -> dict[str, Any]:
    client = redis.Redis.from_url(url, socket_timeout=10.0, decode_responses=True)
    users_key = f"redislock-demo:{round_id}:users"
    result_key = f"redislock-demo:{round_id}:result"
    once = Once(client, "demo:lottery", key=round_id, period=3600, timeout=60.0)
    time.sleep(max(0.0, start_at - time.time()))  # everybody starts at "noon"
    asked = time.monotonic()
    with once.run() as turn:
        waited = time.monotonic() - asked
        fence: int | None = None
        drawn_by = client.hget(result_key, "drawn_by")
        role = "saw result"
        if turn.mine:
            fence = turn.lock.fencing_token
            assert fence is not None
            users = [as_str(u) for u in client.lrange(users_key, 0, -1)]
            winners = random.SystemRandom().sample(users, WINNERS)
            time.sleep(DRAW_SECONDS)
            script = SCRIPTS["fenced_write"]
            accepted, _ = client.eval(
                script.source,
                1,
                result_key,
                fence,
                "drawn_by",
                f"worker {index} (pid {os.getpid()})",
                "winners",
                ",".join(winners),
            )
            role = "drew" if as_int(accepted) == 1 else "write rejected (stale token)"
            drawn_by = client.hget(result_key, "drawn_by")
    client.close()
    return {
        "worker": index,
        "pid": os.getpid(),
        "waited_ms": waited * 1000.0,
        "fence": fence,
        "role": role,
        "drawn_by": as_str(drawn_by),
    }


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock demo`` to the command line."""
    p = subs.add("demo", run, help="the lottery: N processes race, exactly one draws")
    p.add_argument("--workers", type=int, default=5, help="processes (default 5)")


def run(ctx: _args.Context) -> int:
    """Run ``redislock demo`` (see :func:`run_demo`).

    Raises:
        CliError: Redis not found or the embedded server could not start (69).
    """
    if ctx.args.workers < 1:
        ctx.parser.error("--workers must be at least 1")
    # Starts the embedded server once, before the workers race.
    return run_demo(ctx.locate(), workers=ctx.args.workers)


def run_demo(url: str, *, workers: int) -> int:
    """Run the lottery with ``workers`` processes against ``url``; 0 if exactly one drew."""
    import multiprocessing as mp  # not for every subcommand's parser

    client = redis.Redis.from_url(url, socket_timeout=10.0, decode_responses=True)
    round_id = secrets.token_hex(4)
    users_key = f"redislock-demo:{round_id}:users"
    result_key = f"redislock-demo:{round_id}:result"
    client.rpush(users_key, *(f"user{n:04d}" for n in range(1, USERS + 1)))
    client.expire(users_key, 3600)
    print(f"lottery round {round_id}: {workers} workers race to draw {WINNERS} of {USERS} users")
    ctx = mp.get_context("spawn")
    start_at = time.time() + 1.0 + 0.15 * workers  # time for the workers to start up
    with ctx.Pool(workers) as pool:
        results = pool.starmap(
            _worker, [(url, round_id, i, start_at) for i in range(1, workers + 1)]
        )
    results.sort(key=lambda r: (r["fence"] is None, r["waited_ms"]))  # the drawer first
    print(f"{'worker':>6} {'pid':>8} {'fencing token':>13} {'waited ms':>10}  outcome")
    for r in results:
        outcome = r["role"] if r["role"] != "saw result" else f"saw result by {r['drawn_by']}"
        fence = "-" if r["fence"] is None else r["fence"]  # only the drawer holds the lock
        print(f"{r['worker']:>6} {r['pid']:>8} {fence:>13} {r['waited_ms']:>10.1f}  {outcome}")
    winners = as_str(client.hget(result_key, "winners") or "")
    client.expire(result_key, 3600)
    print(f"winners: {winners.replace(',', ', ')}")
    drew = [r for r in results if r["role"] == "drew"]
    client.close()
    if len(drew) == 1:
        print(
            f"OK: exactly one worker drew (worker {drew[0]['worker']}); the others saw its result"
        )
        return 0
    print(f"FAIL: {len(drew)} workers drew", file=sys.stderr)
    return 1
