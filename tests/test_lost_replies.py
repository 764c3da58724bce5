# SPDX-License-Identifier: MIT
"""Every operation of every primitive, with its reply lost after the command ran.

Each row of ``tests/primitives.py`` (every kind, sync and asyncio) runs through
:class:`~redislock.testing.FaultProxy` fault proxies, one per server, with redis-py's
DEFAULT clients, whose retry policy sends a command again on a new connection when its
reply was lost. Right before each call under test, every proxy is set to lose its next
reply (``lose_reply``: the command took effect, the reply never arrives, the connection is
reset), and the test checks the fault really hit (``lost_replies`` grew). For Redlock and
MultiRedlock one master (a minority) loses its reply: the round must still reach its quorum
(a master whose reply is lost on the fast path counts as a failed vote; it is not sent again
within the round). What must hold:

* acquire: held once, the key has a TTL, and the local lease estimate ends no later than
  the key;
* ``extend(s)`` adds ``s`` seconds once, not twice; ``extend(s, replace=True)`` sets it;
* ``owned()`` is True and ``locked()`` True (no false "not owned");
* a re-entry (RLock) counts once: two releases free it;
* release is a normal release: no false ``LockLostError``, nothing left in Redis.

``tests/test_retries.py`` and ``tests/test_retries_hold.py`` check the same for single
operations in more detail; this module covers the whole matrix.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
import redis.asyncio

from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from redislock.testing import FaultProxy
from tests.primitives import KINDS, Actor, Env, Kind, Subject
from tests.primitives import held_in_redis as held_on_majority

NAME = "lost"
QUORUM = 3
TTL = 10.0
SLACK = 0.3  # seconds: round trips and scheduling between reading and acting


class Proxied:
    """The servers of one row behind fault proxies, with default clients through them."""

    def __init__(self, servers: list[RedisProcess]) -> None:
        self.proxies: list[FaultProxy] = []
        for server in servers:
            assert server.socket_path is not None
            self.proxies.append(FaultProxy(server.socket_path).start())
        self.admins = [redis.Redis(**s.client_kwargs(), decode_responses=True) for s in servers]
        for admin in self.admins:
            admin.flushall()
            for script in SCRIPTS.values():  # EVALSHA finds them: the lost reply is the script's
                admin.script_load(script.source)
        self.clients = [redis.Redis(**p.client_kwargs()) for p in self.proxies]
        self.aclients = [redis.asyncio.Redis(**p.client_kwargs()) for p in self.proxies]

    def env(self) -> Env:
        return Env(self.clients[0], self.aclients[0], self.clients, self.aclients, self.admins)

    def lose_next_replies(self) -> int:
        """Make the first proxy lose its next reply (one server; for Redlock a minority);
        returns the count of lost replies so far."""
        before = self.lost()
        self.proxies[0].set_fault("lose_reply")
        return before

    def lost(self) -> int:
        return sum(p.lost_replies for p in self.proxies)

    def heal(self) -> None:
        for proxy in self.proxies:
            proxy.set_fault("pass")

    async def close(self) -> None:
        for c in self.clients + self.admins:
            c.close()
        for ac in self.aclients:
            await ac.aclose()
        for proxy in self.proxies:
            proxy.stop()


@pytest.fixture
async def proxied(
    request: pytest.FixtureRequest, redis_server: RedisProcess, servers: list[RedisProcess]
) -> AsyncIterator[Proxied]:
    kind: Kind = request.getfixturevalue("kind")
    made = Proxied(servers[:QUORUM] if kind.quorum else [redis_server])
    yield made
    await made.close()


def held_in_redis(kind: Kind, p: Proxied) -> bool:
    """Whether a majority of the row's servers show a hold of its names."""
    return held_on_majority(kind, p.admins, NAME)


def pttls(kind: Kind, p: Proxied) -> list[float]:
    """The TTL, in seconds, of every lock key of the row on every server."""
    return [a.pttl(f"redislock:{{{n}}}") / 1000.0 for a in p.admins for n in kind.names(NAME)]


def least_pttl(kind: Kind, p: Proxied) -> float:
    """The least TTL, in seconds, of the row's lock keys on a majority of its servers (for
    one server: on it). A Redlock master whose command finishes in its lane, after the call
    returned, is the minority this leaves out."""
    ttls = sorted(
        min(a.pttl(f"redislock:{{{n}}}") for n in kind.names(NAME)) / 1000.0 for a in p.admins
    )
    return ttls[len(ttls) // 2]


def wait_for_a_loss(p: Proxied, before: int, timeout: float = 5.0) -> None:
    """Wait until a proxy lost a reply since the count was ``before`` (at most ``timeout``
    seconds; the caller checks)."""
    deadline = time.monotonic() + timeout
    while p.lost() == before and time.monotonic() < deadline:
        time.sleep(0.01)


async def lost_once(p: Proxied, call: Any) -> Any:
    """``await call()`` with the next reply of every proxy lost; checks a reply was lost."""
    before = p.lose_next_replies()
    try:
        result = await call()
        # A Redlock round may end once its quorum answered; a suspect master's command then
        # finishes in its lane, in the background: wait for it.
        await asyncio.to_thread(wait_for_a_loss, p, before)
    finally:
        p.heal()
    assert p.lost() > before, "the fault did not hit: no reply was lost"
    return result


@pytest.mark.parametrize("kind", [pytest.param(k, id=f"{k.id}-{k.flavour}") for k in KINDS])
async def test_every_operation_with_its_reply_lost_acts_once(kind: Kind, proxied: Proxied) -> None:
    p = proxied
    actor = Actor(kind)
    try:
        lock = Subject(kind, kind.build(p.env(), NAME, {"ttl": TTL}), actor)

        assert await lost_once(p, lambda: lock.acquire(blocking=False))
        assert held_in_redis(kind, p)
        before = time.monotonic()
        estimate = await lock.remaining()
        assert estimate is not None
        assert before + estimate <= time.monotonic() + least_pttl(kind, p) + 0.01

        began = time.monotonic()
        remaining = await lock.remaining()
        assert remaining is not None
        await lost_once(p, lambda: actor.call(lock.holder.extend, 5))
        assert max(pttls(kind, p)) <= remaining + 5 + SLACK  # added once, not twice
        # at least the estimate's end plus 5 (the keys live at least as long as the estimate)
        assert least_pttl(kind, p) >= remaining + 5 - (time.monotonic() - began) - 0.002

        began = time.monotonic()
        await lost_once(p, lambda: actor.call(lock.holder.extend, 20, replace=True))
        assert least_pttl(kind, p) >= 20 - (time.monotonic() - began) - 0.002
        assert max(pttls(kind, p)) <= 20

        assert await lost_once(p, lambda: actor.call(lock.holder.owned))
        assert await lost_once(p, lambda: actor.call(lock.obj.locked))

        if kind.id == "RLock":  # a re-entry counts once
            assert await lost_once(p, lambda: lock.acquire(blocking=False))
            await lost_once(p, lock.release)
            assert held_in_redis(kind, p)  # one hold left

        await lost_once(p, lock.release)  # no false LockLostError
        assert not held_in_redis(kind, p)
        stats = await actor.call(lock.holder.statistics)
        assert not stats.held
        assert not stats.lost
    finally:
        actor.close()
