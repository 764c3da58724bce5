# SPDX-License-Identifier: MIT
"""Least privilege (docs/acl.md): the documented ACL profiles (one per row of the kinds
table, redislock._core.kinds, and the tools') are exactly what the scripts and the Python
code run; every generic kind, the Redlock ones on each master, works end to end as a user
made from its documented line (sync and asyncio; Election's and Once's users are in their
own test files); and with any one command of the Lock or MultiLock
profile removed, the operations that need it raise ``NoPermissionError`` naming it, leave
no key without a TTL (fencing counters excepted) and never mislead the holder."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

import redislock
from redislock import NoPermissionError
from redislock._core import kinds
from redislock._core.keys import LockKeys
from redislock._core.scripts import SCRIPTS
from redislock.server import RedisProcess
from tests import clients
from tests.masters import amaster, close_amasters, master
from tests.primitives import KINDS, Actor, Env, Kind, Subject
from tests.test_latch import Side

pytestmark = pytest.mark.servers  # dev.py's STAGES: where else it runs

DOC = Path(__file__).resolve().parents[1] / "docs" / "acl.md"

TOOLS: dict[str, tuple[set[str], set[str]]] = {
    "inspect": ({"inspect"}, {"EVALSHA", "EVAL"}),
    "CLI list": ({"inspect"}, {"EVALSHA", "EVAL", "SCAN"}),
    "CLI force-release": (
        {"inspect", "lock_force_release", "hold_force", "fair_force"},
        {"EVALSHA", "EVAL"},
    ),
}
"""The profiles of what is not a lock kind: inspect and the CLI's operator commands."""

# What each profile runs: scripts (every command in them), and commands sent from Python:
# a profile per kind of the kinds table (its scripts and commands), then the tools'.
PROFILES: dict[str, tuple[set[str], set[str]]] = {
    **{row.acl_profile: (set(row.scripts), set(row.commands)) for row in kinds.KINDS},
    **TOOLS,
}
NOT_A_LOCK = {"fenced_write"}  # the CLI demo's guarded write at the protected resource

_CALL = re.compile(r"redis\.p?call\(\s*'(\w+)'")
_PROFILE = re.compile(r"^### (.+?)\n.*?^```\n(ACL SETUSER .+?)\n```", re.M | re.S)


def script_commands(name: str) -> set[str]:
    """The commands a script runs (parsed from its source), in capitals."""
    code = "\n".join(line.split("--", 1)[0] for line in SCRIPTS[name].source.splitlines())
    return {c.upper() for c in _CALL.findall(code)}


def documented() -> dict[str, list[str]]:
    """Each profile of docs/acl.md: its ``ACL SETUSER`` line, split."""
    return {m[1]: m[2].split() for m in _PROFILE.finditer(DOC.read_text(encoding="utf-8"))}


def allowed(rule: list[str]) -> set[str]:
    return {word[1:].upper() for word in rule if word.startswith("+")}


# ------------------------------------------------------------------ the page and the code


def test_every_profile_is_documented_once() -> None:
    assert set(documented()) == set(PROFILES)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_profile_is_exactly_what_the_code_runs(profile: str) -> None:
    scripts, extra = PROFILES[profile]
    needed = set(extra)
    for name in scripts:
        needed |= script_commands(name)
    rule = documented()[profile]
    assert allowed(rule) == needed
    assert rule[:2] == ["ACL", "SETUSER"]
    assert {"on", "resetkeys", "~redislock:*", "resetchannels", "-@all"} <= set(rule)
    # the wake-up channels: only where a script publishes or a waiter subscribes
    channels = "PUBLISH" in needed or "SUBSCRIBE" in needed
    assert ("&redislock:*" in rule) == channels
    if channels:
        assert rule.index("resetchannels") < rule.index("&redislock:*")


def test_every_lock_script_belongs_to_a_profile() -> None:
    used = set().union(*(scripts for scripts, _ in PROFILES.values()))
    assert used | NOT_A_LOCK == set(SCRIPTS)


# ------------------------------------------------------------------ users on the server


def acl(admin: redis.Redis, *args: str) -> Any:
    return admin.execute_command("ACL", *args)  # type: ignore[no-untyped-call]


@contextmanager
def user(admin: redis.Redis, rule: list[str], drop: str = "") -> Iterator[dict[str, Any]]:
    """A user made from a documented line (``drop``: one command taken out); yields the
    username/password keywords."""
    name, words = f"acl-test-{rule[2]}", rule[3:]
    words = [w for w in words if not w.startswith(">") and w != f"+{drop.lower()}"]
    acl(admin, "SETUSER", name, "reset", *words, ">pw")
    try:
        yield {"username": name, "password": "pw"}
    finally:
        acl(admin, "DELUSER", name)


def scripts_check_the_acl(admin: redis.Redis) -> bool:
    """Whether the server has ``redis.acl_check_cmd`` (Redis 7.0+, Valkey), which the
    scripts use to check every command before they write (docs/acl.md). Redis 6.2 has not:
    a refusal there is still a ``NoPermissionError``, but it cannot name the command, and a
    command a call does not reach is not refused."""
    info = admin.info("server")
    if "valkey_version" in info:
        return True
    return tuple(int(x) for x in str(info["redis_version"]).split(".")[:2]) >= (7, 0)


TAIL = {"DEL", "PUBLISH"}
"""What a hold release (hold_release.lua, hold_release_permit.lua) runs after it removed the
hold (settling the keys' TTL, waking waiters). Redis 7+ refuses such a release before it
writes (the preflight); Redis 6.2 has no preflight, so there the release completes and the
refused tail is skipped."""


async def release_completes_without_its_tail(
    kind: Kind, drop: str, server: RedisProcess, admin: redis.Redis
) -> None:
    """Redis 6.2, a hold kind, ``drop`` in :data:`TAIL` refused: the release is done (not
    "refused" while the hold is gone), nothing is left without a TTL."""
    full = documented()[profile_of(kind)]
    with user(admin, full) as auth:
        client = clients.sync_client(**server.client_kwargs(), **auth, decode_responses=True)
        aclient = clients.async_client(**server.client_kwargs(), **auth, decode_responses=True)
        e = Env(client, aclient, [], [], [admin])
        actor = Actor(kind)
        holder = Subject(kind, kind.build(e, "acl", {"ttl": 10}), actor)
        try:
            assert await holder.acquire(blocking=False)
            wait = LockKeys.for_name("acl").wait  # someone waits: the release publishes
            seconds, micros = admin.time()
            admin.zadd(wait, {"f" * 32: seconds * 1000 + micros // 1000 + 5000})
            admin.pexpire(wait, 5000)
            admin.config_resetstat()
            admin.acl_log_reset()
            acl(admin, "SETUSER", f"acl-test-{full[2]}", f"-{drop.lower()}")
            await holder.release()  # completes: the tail's refusal is not the release's
            stats = admin.info("commandstats")
            assert stats.get("cmdstat_hdel", {}).get("calls", 0) >= 1  # the hold was removed
            if drop == "PUBLISH":  # reached, refused (ACL LOG), and still a release
                denied = [e.get("object") for e in admin.acl_log()]
                assert "publish" in denied, denied
            await check_not_misled(kind, [holder], admin)
            assert not (await actor.call(holder.holder.statistics)).held
            assert keys_without_ttl(admin) == []
        finally:
            actor.close()
            client.close()
            await aclient.aclose()


def keys_without_ttl(admin: redis.Redis) -> list[str]:
    """Keys that would never expire, fencing counters and release rings (and a Semaphore's
    run-time permit count, which the user sets) excepted."""
    names = [str(k) for k in admin.keys("*")]  # the admin client decodes
    kept = (":slotfence", ":slotrel", ":permits")
    return [k for k in names if admin.pttl(k) == -1 and not k.endswith(kept)]


SINGLE = [k for k in KINDS if not k.quorum]


@pytest.fixture
def server(redis_server: RedisProcess, admin: redis.Redis) -> RedisProcess:
    """The suite's server, flushed, with every script loaded (as after a first use)."""
    for script in SCRIPTS.values():
        admin.script_load(script.source)
    return redis_server


PROFILE_OF = {
    **{row.name: row.acl_profile for row in kinds.KINDS},
    **{part.name: row.acl_profile for row in kinds.KINDS for part in row.parts},
}
"""A generic row's id (a kind, or a side it hands out) -> its profile in docs/acl.md."""


def profile_of(kind: Kind) -> str:
    return PROFILE_OF[kind.id]


@pytest.mark.parametrize("kind", SINGLE, ids=lambda k: f"{k.id}-{k.flavour}")
async def test_every_kind_works_as_its_documented_user(
    kind: Kind, server: RedisProcess, admin: redis.Redis
) -> None:
    """Acquire, extend, owned, a waiter woken by the release, inspect: all as the user."""
    with user(admin, documented()[profile_of(kind)]) as auth:
        client = clients.sync_client(**server.client_kwargs(), **auth)
        aclient = clients.async_client(**server.client_kwargs(), **auth)
        e = Env(client, aclient, [], [], [admin])
        one, two = Actor(kind), Actor(kind)
        try:
            first = Subject(kind, kind.build(e, "acl", {"ttl": 10}), one)
            assert await first.acquire(blocking=False)
            await one.call(first.holder.extend, 5)
            assert await one.call(first.holder.owned)
            if kind.exclusive:
                second = Subject(kind, kind.build(e, "acl", {"ttl": 10}), two)

                async def wait_then_release() -> bool:  # one task: a reentrant owner
                    if not await second.acquire(timeout=10):
                        return False
                    await second.release()
                    return True

                waiter = asyncio.ensure_future(wait_then_release())
                await asyncio.sleep(0.3)  # the waiter waits on the wake-up channel
                assert not waiter.done()
                await first.release()
                assert await waiter  # woken by the release, well before its timeout
            else:
                await first.release()
            with user(admin, documented()["inspect"]) as look:
                reader = clients.sync_client(**server.client_kwargs(), **look)
                try:
                    info = redislock.inspect(reader, "acl")
                    assert not info.held
                finally:
                    reader.close()
            assert keys_without_ttl(admin) == []
        finally:
            one.close()
            two.close()
            client.close()
            await aclient.aclose()


QUORUM = [k for k in KINDS if k.quorum]


@pytest.mark.parametrize("kind", QUORUM, ids=lambda k: f"{k.id}-{k.flavour}")
async def test_every_quorum_kind_works_as_its_documented_user(
    kind: Kind, servers: list[RedisProcess], admins: list[redis.Redis]
) -> None:
    """Redlock and MultiRedlock over three masters, each with a user made from the kind's
    line: acquire, extend, owned, refused while held, release, then taken by another."""
    used, own = servers[:3], admins[:3]
    with ExitStack() as stack:
        auths = [stack.enter_context(user(a, documented()[profile_of(kind)])) for a in own]
        masters = [master(s, **auth) for s, auth in zip(used, auths, strict=True)]
        amasters = [amaster(s, **auth) for s, auth in zip(used, auths, strict=True)]
        e = Env(None, None, masters, amasters, own)
        one, two = Actor(kind), Actor(kind)
        try:
            first = Subject(kind, kind.build(e, "acl", {"ttl": 10}), one)
            second = Subject(kind, kind.build(e, "acl", {"ttl": 10}), two)
            assert await first.acquire(blocking=False)
            await one.call(first.holder.extend, 5)
            assert await one.call(first.holder.owned)
            assert not await second.acquire(blocking=False)
            await first.release()
            assert await second.acquire(blocking=False)
            await second.release()
            for admin in own:
                assert keys_without_ttl(admin) == []
        finally:
            one.close()
            two.close()
            for client in masters:
                client.close()
            await close_amasters(amasters)


def test_the_redis_py_drop_in_works_as_its_documented_user(
    server: RedisProcess, admin: redis.Redis
) -> None:
    """RedisPyLock as the user of its profile (lock names under ``locks:``): acquire,
    extend, reacquire, owned, locked, the watchdog's renewal, release; every needed command
    allowed, and each one of them refused in turn fails with the command named."""
    from redislock.compat import RedisPyLock

    rule = documented()["RedisPyLock"]
    with user(admin, rule) as auth:
        client = redis.Redis(**server.client_kwargs(), **auth)
        try:
            lock = RedisPyLock(client, "locks:acl", timeout=10)
            assert lock.acquire(blocking=False)
            assert lock.extend(5)
            assert lock.reacquire()
            assert lock.owned()
            assert lock.locked()
            lock.release()
            watched = RedisPyLock(client, "locks:watched", watchdog_lease=0.3)
            assert watched.acquire(blocking=False)
            time.sleep(0.5)  # renewed as this user
            assert not watched.lost
            watched.release()
            assert keys_without_ttl(admin) == []
        finally:
            client.close()
    for drop in ("SET", "INCR", "PEXPIRE", "DEL"):
        with user(admin, rule, drop=drop) as auth:
            client = redis.Redis(**server.client_kwargs(), **auth)
            try:
                lock = RedisPyLock(client, "locks:refused", timeout=10)

                def use(lock: RedisPyLock = lock) -> None:  # refused at one of these steps
                    assert lock.acquire(blocking=False)
                    lock.extend(5)
                    lock.release()

                with pytest.raises(redislock.NoPermissionError) as refused:
                    use()
                assert refused.value.command == drop
            finally:
                client.close()
        admin.delete("locks:refused")
        assert keys_without_ttl(admin) == []


# ------------------------------------------------------------------ one command refused


LOCKISH = [k for k in KINDS if k.id in ("Lock", "MultiLock")]
HASHED = [
    k
    for k in KINDS
    if any(s.startswith("hold_") for s in PROFILES[profile_of(k)][0]) and k.exclusive
]
"""Kinds on the hold scripts (RLock, a ReadWriteLock's writer, Semaphore: the kinds table's
rows that run them; the scenario needs an exclusive hold), which check every command they may
run on each key they declare before they read or write (redis.acl_check_cmd): a refusal names
its command and changes nothing."""
FAIR = [k for k in KINDS if k.id == "FairLock"]  # fair_*.lua check first, as the hold scripts do
NEVER_RUN = (
    {("MultiLock", "TIME"), ("MultiLock", "ZSCORE")}
    | {(profile, "UNSUBSCRIBE") for profile, (_, sent) in PROFILES.items() if "UNSUBSCRIBE" in sent}
    | {("RLock", "GET"), ("WriteLock", "GET"), ("WriteLock", "SET"), ("Semaphore", "SET")}
)
"""Profile commands the scenario never runs: multi_release.lua's check of a queued Lock waiter's
waiter lease (TIME, ZSCORE: only when such a waiter is queued on a name it releases);
UNSUBSCRIBE, sent only once a wake-up channel had no waiter for a few seconds (refused, the
channel stays subscribed until the connection closes); and of the hold profiles, which have
every command of the hold scripts their kinds run (with all of _hold.lua), GET for an RLock
and a ReadWriteLock's writer (a side is named by its own id; only a Semaphore's call reads a
permit count), SET for a ReadWriteLock's writer (only its reader sets a marker) and for a
Semaphore (its ``set_permits``, which the scenario does not call, sends SET itself)."""


def refusable(kind: Kind) -> list[tuple[Kind, str]]:
    return [(kind, c) for c in sorted(allowed(documented()[profile_of(kind)]))]


async def scenario(
    kind: Kind, e: Env, admin: redis.Redis, drop: str, subjects: list[Subject]
) -> None:
    """Every operation of the kind, in order, until one fails; ``subjects`` gets the lock
    objects (whose local state the caller checks). EVAL is needed only when the server lacks
    a script."""
    if drop == "EVAL":
        admin.script_flush()
    a = Subject(kind, kind.build(e, "acl", {"ttl": 10}), Actor(kind))
    b = Subject(kind, kind.build(e, "acl", {"ttl": 10}), Actor(kind))
    subjects += [a, b]  # the caller closes their actors
    assert await a.acquire(blocking=False)
    await a.actor.call(a.holder.extend, 5)
    await a.actor.call(a.holder.extend, 20, replace=True)
    assert await a.actor.call(a.holder.owned)
    assert await a.actor.call(a.obj.locked)
    assert not await b.acquire(timeout=0.2)  # waits for a wake-up, leaves a waiters marker
    await a.release()  # publishes the wake-up
    assert await b.acquire(blocking=False)
    await b.release()


async def check_not_misled(kind: Kind, subjects: list[Subject], admin: redis.Redis) -> None:
    """Each object's belief matches Redis: held -> its token is in every key; not held and
    not lost -> none of its keys is there."""
    for s in subjects:
        if s.holder is None:
            continue  # a semaphore that never got a permit: no token of its own
        stats = await s.actor.call(s.holder.statistics)  # a reentrant lock's: the actor's
        token = await s.view("token")
        names = ["acl", "acl:b"] if kind.id == "MultiLock" else ["acl"]
        values: list[Any]
        if kind in HASHED:
            values = [admin.hkeys(LockKeys.for_name("acl").lock)]
            mine = [token is not None and token in values[0]]
        else:
            values = [admin.get(LockKeys.for_name(n).lock) for n in names]
            mine = [
                v is not None and token is not None and v.startswith(token + "|") for v in values
            ]
        if stats.held:
            assert all(mine), (stats, values)
        elif not stats.lost:
            assert not any(mine), (stats, values)


@pytest.mark.parametrize(
    ("kind", "drop"),
    [
        pytest.param(k, c, id=f"{k.id}-{k.flavour}-no-{c}")
        for k in LOCKISH + HASHED + FAIR
        for _, c in refusable(k)
    ],
)
async def test_a_refused_command_is_named_and_leaves_nothing_half_done(
    kind: Kind, drop: str, server: RedisProcess, admin: redis.Redis
) -> None:
    """Every command of a kind's profile taken out in turn: the first operation that needs it
    raises ``NoPermissionError`` naming it. The hold scripts share _hold.lua, so a hold
    profile has a command or two that one kind never runs (NEVER_RUN): without it, that kind
    works."""
    with user(admin, documented()[profile_of(kind)], drop=drop) as auth:
        client = clients.sync_client(**server.client_kwargs(), **auth, decode_responses=True)
        aclient = clients.async_client(**server.client_kwargs(), **auth, decode_responses=True)
        e = Env(client, aclient, [], [], [admin])
        subjects: list[Subject] = []
        try:
            if {(profile_of(kind), drop), (kind.id, drop)} & NEVER_RUN:
                await scenario(kind, e, admin, drop, subjects)
                assert keys_without_ttl(admin) == []
                return
            if not scripts_check_the_acl(admin):  # Redis 6.2: refused where it is reached
                refusal: NoPermissionError | None = None
                admin.acl_log_reset()
                try:
                    await scenario(kind, e, admin, drop, subjects)
                except NoPermissionError as exc:
                    refusal = exc
                denied = {entry.get("object") for entry in admin.acl_log()}
                if refusal is None:  # not reached, or only in a hold release's tail
                    assert drop.lower() not in denied or (kind in HASHED and drop in TAIL)
                else:  # named where redislock checks it itself (a pcall), else 6.2 cannot
                    assert refusal.command in (None, drop), refusal
                    assert drop.lower() in denied, denied
                assert keys_without_ttl(admin) == []
                await check_not_misled(kind, subjects, admin)
                return
            with pytest.raises(NoPermissionError) as refused:
                await scenario(kind, e, admin, drop, subjects)
            assert refused.value.command == drop
            assert isinstance(refused.value, redis.exceptions.NoPermissionError)
            assert keys_without_ttl(admin) == []
            await check_not_misled(kind, subjects, admin)
        finally:
            for s in subjects:
                s.actor.close()
            client.close()
            await aclient.aclose()


@pytest.mark.parametrize(
    ("kind", "drop"),
    [
        *(
            pytest.param(k, c, id=f"{k.id}-{k.flavour}-no-{c}")
            for k in LOCKISH
            for c in (
                ("DEL", "PUBLISH", "SETBIT", "EXISTS")  # SETBIT: the slot's release ring
                if k.id == "Lock"
                else ("DEL", "PUBLISH", "SET", "MGET")  # SET: MultiLock's done keys
            )
        ),
        *(
            pytest.param(k, c, id=f"{k.id}-{k.flavour}-no-{c}")
            for k in HASHED
            for c in ("HDEL", "DEL", "PUBLISH", "PEXPIRE", "ZADD", "ZREMRANGEBYSCORE")
        ),
    ],
)
async def test_a_refused_release_keeps_the_hold(
    kind: Kind, drop: str, server: RedisProcess, admin: redis.Redis
) -> None:
    """A release that needs a refused command raises it and still holds; never "released"
    while its key stays, never "held" while its key is gone."""
    if kind in HASHED and drop in TAIL and not scripts_check_the_acl(admin):
        await release_completes_without_its_tail(kind, drop, server, admin)
        return
    full = documented()[profile_of(kind)]
    with user(admin, full) as auth:
        client = clients.sync_client(**server.client_kwargs(), **auth, decode_responses=True)
        aclient = clients.async_client(**server.client_kwargs(), **auth, decode_responses=True)
        e = Env(client, aclient, [], [], [admin])
        actor = Actor(kind)
        holder = Subject(kind, kind.build(e, "acl", {"ttl": 10}), actor)
        try:
            assert await holder.acquire(blocking=False)
            for name in ["acl", "acl:b"] if kind.id == "MultiLock" else ["acl"]:
                wait = LockKeys.for_name(name).wait  # someone waits
                if kind in HASHED:
                    seconds, micros = admin.time()
                    admin.zadd(wait, {"f" * 32: seconds * 1000 + micros // 1000 + 5000})
                    admin.pexpire(wait, 5000)
                else:
                    admin.set(wait, "1", px=5000)
            acl(admin, "SETUSER", f"acl-test-{full[2]}", f"-{drop.lower()}")
            with pytest.raises(NoPermissionError) as refused:
                await holder.release()
            # Redis 6.2's script error may not name the command (docs/acl.md)
            named = (drop,) if scripts_check_the_acl(admin) else (drop, None)
            assert refused.value.command in named
            await check_not_misled(kind, [holder], admin)
            assert (await actor.call(holder.holder.statistics)).held  # still held, its key too
            assert keys_without_ttl(admin) == []
            if kind.id == "Lock":  # not released: its token's bit is not set (or undone)
                ring = LockKeys.for_name("acl").ring
                assert admin.getbit(ring, holder.holder.fencing_token) == 0
            acl(admin, "SETUSER", f"acl-test-{full[2]}", f"+{drop.lower()}")
            await holder.release()  # allowed again: a normal release
            await check_not_misled(kind, [holder], admin)
            assert not (await actor.call(holder.holder.statistics)).held
        finally:
            actor.close()
            client.close()
            await aclient.aclose()


# ------------------------------------------------------------------ CountDownLatch, Barrier


async def latch_scenario(side: Side, made: list[Any]) -> None:
    """Every operation of a CountDownLatch, in order, until one fails (``made``: the objects
    made, for the caller's checks)."""
    latch = side.latch("acl", 2)
    made.append(latch)
    assert await side.call(latch.try_set_count)
    assert await side.call(latch.count) == 2
    waiter = side.task(side.latch("acl", 2).wait, 10)
    await asyncio.sleep(0.3)  # waits on the wake-up channel (or its SUBSCRIBE was refused)
    if waiter.done():
        await waiter
    assert await side.call(latch.count_down) == 1
    assert await side.call(latch.count_down) == 0  # publishes the wake-up
    assert await asyncio.wait_for(waiter, 10)
    assert await side.call(latch.generation) > 0


async def barrier_scenario(side: Side, made: list[Any]) -> None:
    """Every operation of a Barrier, in order, until one fails: two parties enter (one
    waits, the other opens the round), the watchdog renews them, they leave."""
    cls = redislock.Barrier if side.sync else redislock.AsyncBarrier
    a, b = (cls(side.client, "acl", 2, lease=1) for _ in range(2))
    made += [a, b]
    entering = side.task(a.enter, 10)
    await asyncio.sleep(0.3)
    if entering.done():
        await entering
    assert await side.call(b.enter, 10)  # opens the round: published
    assert await asyncio.wait_for(entering, 10)
    await asyncio.sleep(0.6)  # renewed by the watchdog (a third of the 1 s lease)
    assert not a.lost
    assert not b.lost
    assert await side.call(a.entered) == 2
    leaving = side.task(a.leave, 10)
    await asyncio.sleep(0.3)
    if leaving.done():
        await leaving
    assert await side.call(b.leave, 10)  # closes the round: published
    assert await asyncio.wait_for(leaving, 10)


SCENARIOS = {"CountDownLatch": latch_scenario, "Barrier": barrier_scenario}
SYNCHRONIZER_NEVER_RUN = {
    ("CountDownLatch", "UNSUBSCRIBE"),
    ("Barrier", "UNSUBSCRIBE"),
    # GET: _fence.lua's peek_fence, included in both scripts, is for the locks' SET NX
    ("CountDownLatch", "GET"),
    ("Barrier", "GET"),
}
"""UNSUBSCRIBE goes only once a channel had no waiter for a few seconds."""


async def leave_what_is_in(side: Side, made: list[Any]) -> None:
    """Let every party still in leave (its renewals would outlive the test)."""
    for obj in made:
        if getattr(obj, "generation", None) is not None:
            with contextlib.suppress(Exception):
                await side.call(obj.leave, 0)


@contextlib.asynccontextmanager
async def side_as(server: RedisProcess, flavour: str, auth: dict[str, Any]) -> AsyncIterator[Side]:
    if flavour == "sync":
        client: Any = clients.sync_client(**server.client_kwargs(), **auth)
    else:
        client = clients.async_client(**server.client_kwargs(), **auth)
    try:
        yield Side(flavour, client)
    finally:
        if flavour == "sync":
            client.close()
        else:
            await client.aclose()


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
@pytest.mark.parametrize("kind", sorted(SCENARIOS))
async def test_the_synchronizers_work_as_their_documented_users(
    kind: str, flavour: str, server: RedisProcess, admin: redis.Redis
) -> None:
    made: list[Any] = []
    with user(admin, documented()[kind]) as auth:
        async with side_as(server, flavour, auth) as side:
            try:
                await SCENARIOS[kind](side, made)
            finally:
                await leave_what_is_in(side, made)
    assert keys_without_ttl(admin) == []


async def refused_scenario(kind: str, drop: str, side: Side, admin: redis.Redis) -> None:
    """The kind's scenario as a user without ``drop``: refused naming it (Redis 7), or where
    it is reached (Redis 6.2), or never needed."""
    made: list[Any] = []
    try:
        if (kind, drop) in SYNCHRONIZER_NEVER_RUN:
            await SCENARIOS[kind](side, made)
        elif not scripts_check_the_acl(admin):  # Redis 6.2: refused where it is reached
            admin.acl_log_reset()
            refusal: NoPermissionError | None = None
            try:
                await SCENARIOS[kind](side, made)
            except NoPermissionError as exc:
                refusal = exc
            denied = {entry.get("object") for entry in admin.acl_log()}
            if refusal is None:
                # not reached (SET, DEL: only with a legacy counter), or a PUBLISH after the
                # write, which the scripts let pass there: the waiters' re-checks find it
                assert drop.lower() not in denied or drop == "PUBLISH", denied
            else:  # named where redislock checks it itself (a pcall), else 6.2 cannot
                assert refusal.command in (None, drop), refusal
                assert drop.lower() in denied, denied
        else:
            with pytest.raises(NoPermissionError) as refused:
                await SCENARIOS[kind](side, made)
            assert refused.value.command == drop
        assert keys_without_ttl(admin) == []
    finally:
        acl(admin, "SETUSER", f"acl-test-{documented()[kind][2]}", f"+{drop.lower()}")
        await leave_what_is_in(side, made)


@pytest.mark.parametrize(
    ("kind", "flavour", "drop"),
    [
        pytest.param(k, f, c, id=f"{k}-{f}-no-{c}")
        for k in sorted(SCENARIOS)
        for f in ("sync", "asyncio")
        for c in sorted(allowed(documented()[k]))
    ],
)
async def test_a_refused_command_of_a_synchronizer_is_named(
    kind: str, flavour: str, drop: str, server: RedisProcess, admin: redis.Redis
) -> None:
    """Every command of the profile taken out in turn: the first operation that needs it
    raises ``NoPermissionError`` naming it (Redis 7: the scripts check before they write),
    and no key is left without a TTL."""
    if drop == "EVAL":
        admin.script_flush()  # EVAL is needed only when the server lacks the script
    with user(admin, documented()[kind], drop=drop) as auth:
        async with side_as(server, flavour, auth) as side:
            await refused_scenario(kind, drop, side, admin)
    assert keys_without_ttl(admin) == []
