# SPDX-License-Identifier: MIT
"""What is stored under one lock name, whatever its kind, as one snapshot. No I/O.

:func:`inspection_flow` is a flow (see :mod:`redislock._core.ops`) of one operation: the
read-only ``scripts/inspect.lua`` reads every key of the name and the server's clock at
once (all keys share one hash tag, so this works on Redis Cluster too); the reply is
decoded here with :mod:`redislock._core.codec` into a :class:`LockInfo`.

The kind comes from the lock key's TYPE: a string is a Lock (or a MultiLock name), or a
FairLock when a waiter queue exists (a FairLock nobody waits for looks exactly like a
Lock); a hash holds the holds of a Semaphore (permits, or a ``:permits`` key), a
ReadWriteLock (readers, or a reader waiting) or else an RLock (writer holds only: an RLock,
or a ReadWriteLock whose writer holds it). Without a lock key (nor a queue or permit
count), a name is a CountDownLatch when it has a latch key, else a Barrier when it has a
round (the kinds table's :data:`~redislock._core.kinds.STORED` rows with a ``key_suffix``);
a latch or round is also shown beside a lock of the same name. Leases are compared with the
server's clock (TIME), never the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from redislock._core import validate
from redislock._core.barrier import MEMBERS_SUFFIX
from redislock._core.codec import decode_hold_value, decode_lock_value, permit_id, token_tag
from redislock._core.election import LEADER_SUFFIX, LeaderInfo, advertised
from redislock._core.keys import FairKeys, HoldKeys, LockKeys
from redislock._core.kinds import STORED, StoredCode
from redislock._core.kinds import stored as stored_kind
from redislock._core.ops import Eval, Flow, as_int, as_str
from redislock._core.scripts import SCRIPTS
from redislock.errors import UnexpectedReplyError

__all__ = [
    "BarrierInfo",
    "HoldInfo",
    "Kind",
    "LatchInfo",
    "LockInfo",
    "PermitsInfo",
    "Role",
    "WaiterInfo",
    "decode_reply",
    "inspection_flow",
    "name_of_key",
]

_INSPECT = SCRIPTS["inspect"]
_LATCH, _BARRIER = stored_kind("latch"), stored_kind("barrier")

Kind: TypeAlias = Literal["none", StoredCode, "foreign"]
"""What a name holds: ``"none"`` (nothing to tell the kind by), one of redislock's stored
kinds (the kinds table's :data:`~redislock._core.kinds.STORED`: ``"lock"``, a Lock, a
MultiLock name, or a FairLock nobody waits for; ``"fair"``, a FairLock or a Lock with a
waiter queue: they share one; ``"rlock"``, ``"rwlock"``, ``"semaphore"``; ``"latch"``, a
CountDownLatch; ``"barrier"``, a Barrier's round), or ``"foreign"`` (the lock key is a
Redis type redislock never writes there)."""

Role: TypeAlias = Literal["holder", "writer", "reader", "permit"]
"""A hold's role: ``"holder"`` of a Lock / FairLock / MultiLock name; ``"writer"`` of an
RLock or a ReadWriteLock; ``"reader"`` of a ReadWriteLock; ``"permit"`` of a Semaphore."""

_ROLES: Final[dict[str, Role]] = {"w": "writer", "r": "reader", "p": "permit"}
_ORDER: Final = ("writer", "reader", "permit")


@dataclass(frozen=True, slots=True)
class HoldInfo:
    """One live hold: who holds it. No secret: the owner token is shown as a tag only.

    Attributes:
        role: see :data:`Role`.
        host: host name of the holder (as the holder's process saw it).
        pid: process id of the holder.
        hold_count: re-entries counted (RLock, ReadWriteLock); 1 for the other kinds.
        fencing_token: the hold's fencing token (stored with the hold).
        lease_remaining: seconds left on the hold's lease, by the server's clock; None for a
            Lock key without a TTL (not written by redislock, or PERSISTed).
        acquired_at: Unix time of the acquisition, in seconds, by the holder's clock.
        token_tag: 8 hex digits of SHA-256 of the owner token, as in the holder's ``repr``.
        permit_id: a Semaphore permit's public id (``Permit.id``); None for other kinds.
    """

    role: Role
    host: str
    pid: int
    hold_count: int
    fencing_token: int
    lease_remaining: float | None
    acquired_at: float
    token_tag: str
    permit_id: str | None = None


@dataclass(frozen=True, slots=True)
class WaiterInfo:
    """One live waiter queued for a FairLock (a waiter whose waiter lease ended is left out:
    the next script run drops it).

    Attributes:
        position: 1 for the waiter granted next, then 2, ...
        token_tag: 8 hex digits of SHA-256 of the waiter's token.
        lease_remaining: seconds left on its waiter lease (it renews it while it waits).
    """

    position: int
    token_tag: str
    lease_remaining: float


@dataclass(frozen=True, slots=True)
class PermitsInfo:
    """A Semaphore's permits.

    Attributes:
        limit: the permit count stored in Redis (``Semaphore.set_permits``, the ``:permits``
            key), or None when only the clients know it (each passes its own).
        used: live permits held.
    """

    limit: int | None
    used: int


@dataclass(frozen=True, slots=True)
class LatchInfo:
    """A CountDownLatch (its key ``<lock key>:latch``).

    Attributes:
        count: what is left to count down (0: its generation reached zero).
        generation: the generation counting (or that reached zero): the fencing token its
            set took.
        ttl: seconds left on the latch key's TTL (every set and count-down renews it);
            None for a key without one.
    """

    count: int
    generation: int
    ttl: float | None


@dataclass(frozen=True, slots=True)
class BarrierInfo:
    """A Barrier's current round (its keys ``<lock key>:barrier`` and ``:barrier:members``).

    Attributes:
        generation: the round's generation (the fencing token of its parties).
        state: ``"enter"`` (parties are entering) or ``"open"`` (all entered; they leave).
        parties: how many parties the round waits for.
        entered: the live members (parties whose lease has not ended).
        next_lease_end: seconds until the earliest live member lease ends (a party that
            does not renew drops out then); None without a live member.
    """

    generation: int
    state: Literal["enter", "open"]
    parties: int
    entered: int
    next_lease_end: float | None


@dataclass(frozen=True, slots=True)
class LockInfo:
    """What is stored under one lock name, as one consistent snapshot.

    Attributes:
        name: the lock name.
        key: the key of its kind: the lock key (``<prefix>{<name>}``), a latch's key
            (``<lock key>:latch``) or a barrier's (``<lock key>:barrier``).
        kind: see :data:`Kind`.
        key_type: the Redis TYPE of that key (``"none"`` when absent).
        held: whether anybody holds it: the lock key exists (Lock, FairLock), or a live
            hold does (RLock, ReadWriteLock, Semaphore); a foreign key counts as held; a
            latch is held while it counts (``count > 0``), a barrier's round while a party
            is in.
        ttl: seconds left on that key's TTL; None when the key is absent or has none.
        fencing_counter: the counter the name's next fencing token comes from: its hash
            slot's counter, shared with the other names of that slot (0 if none of them was
            ever acquired). The next token of the name is greater than this.
        holders: the live holds: writers, then readers, then permits, each by fencing
            token; one ``"holder"`` for a held Lock or FairLock; empty when free, or when
            the value was not written by redislock.
        queue: a FairLock's live waiters in grant order.
        waiting: some client waits: the waiter marker exists (Lock; RLock and
            ReadWriteLock: a writer; Semaphore: a permit), or a FairLock's queue has a
            live waiter.
        readers_waiting: a ReadWriteLock reader waits.
        permits: a Semaphore's permits; None for the other kinds.
        unknown_fields: hash fields not written by redislock (a hold kind's key).
        leader: the leader an ``Election`` of this name advertises (identity, term, value),
            when its term is the current holder's fencing token; None otherwise (not an
            election, nobody leads, or a leader key left by an earlier term).
        latch: the name's CountDownLatch, if it has one (whatever the kind: a name may
            be a lock and a latch at once); None otherwise, or when the latch key holds
            fields redislock did not write.
        barrier: the name's Barrier round, if one is current (as for ``latch``).
    """

    name: str
    key: str
    kind: Kind
    key_type: str
    held: bool
    ttl: float | None
    fencing_counter: int
    holders: tuple[HoldInfo, ...] = ()
    queue: tuple[WaiterInfo, ...] = ()
    waiting: bool = False
    readers_waiting: bool = False
    permits: PermitsInfo | None = None
    unknown_fields: int = 0
    leader: LeaderInfo | None = None
    latch: LatchInfo | None = None
    barrier: BarrierInfo | None = None


def name_of_key(key: str, prefix: str) -> str | None:
    """The name whose lock key is ``key``, or whose key of a kind kept apart (the kinds
    table's ``key_suffix``: a latch's ``<lock key>:latch``, a barrier's
    ``<lock key>:barrier``) it is; None for any other key (``:queue``, ``:wait``, ...)."""
    for s in STORED:
        if s.key_suffix and key.endswith("}" + s.key_suffix):
            name = LockKeys.name_of(key[: -len(s.key_suffix)], prefix)
            if name is not None:
                return name
    return LockKeys.name_of(key, prefix)


def inspection_flow(name: Any, prefix: Any) -> Flow[LockInfo]:
    """Read lock ``name`` under key prefix ``prefix``: a flow of one script call.

    Raises :class:`~redislock.errors.LockConfigError` for a bad name or prefix at once,
    before the flow runs (so before any I/O).
    """
    name = validate.check_name(name)
    keys = LockKeys.for_name(name, validate.check_prefix(prefix))
    return _inspect(name, keys)


def _inspect(name: str, keys: LockKeys) -> Flow[LockInfo]:
    hkeys, fkeys = HoldKeys.of(keys.lock), FairKeys.of(keys.lock)
    reply = yield Eval(
        _INSPECT,
        (
            keys.lock,
            keys.fence,
            keys.wait,
            hkeys.rwait,
            hkeys.permits,
            fkeys.queue,
            fkeys.leases,
            keys.lock + LEADER_SUFFIX,
            keys.lock + _LATCH.key_suffix,
            keys.lock + _BARRIER.key_suffix,
            keys.lock + _BARRIER.key_suffix + MEMBERS_SUFFIX,
        ),
        (),
    )
    if not isinstance(reply, list) or len(reply) != 18:
        raise UnexpectedReplyError(f"inspect replied {reply!r}")
    return decode_reply(name, keys.lock, reply)


def _absent(value: object) -> bool:
    # nil arrives as None; over RESP3 a script's false may arrive as False
    return value is None or value is False


def decode_reply(name: str, key: str, reply: list[Any]) -> LockInfo:
    """The :class:`LockInfo` of ``scripts/inspect.lua``'s reply (either decode setting)."""
    (
        key_type_raw,
        value,
        fields,
        pttl,
        fence,
        waiting,
        rwaiting,
        permits,
        queue,
        leases,
        now,
        leader_raw,
        latch_raw,
        latch_pttl,
        round_raw,
        round_pttl,
        live,
        next_ms,
    ) = reply
    latch = _latch(latch_raw, as_int(latch_pttl))
    barrier = _round(round_raw, as_int(live), as_int(next_ms))
    own: dict[str, Any] = {"latch": latch, "barrier": barrier}
    key_type = as_str(key_type_raw)
    now_ms = as_int(now)
    exists = key_type != "none"
    pttl_ms = as_int(pttl)
    base: dict[str, Any] = {
        "name": name,
        "key": key,
        "key_type": key_type,
        "ttl": pttl_ms / 1000.0 if exists and pttl_ms >= 0 else None,
        "fencing_counter": 0 if _absent(fence) else as_int(fence),
        "waiting": bool(as_int(waiting)),
        "readers_waiting": bool(as_int(rwaiting)),
    }
    limit = None if _absent(permits) else as_int(permits)
    if key_type == "hash" or (key_type == "none" and limit is not None and not queue):
        holds, unknown = _holds(fields, now_ms)
        used = sum(1 for h in holds if h.role == "permit")
        readers = sum(1 for h in holds if h.role == "reader")
        semaphore = used > 0 or limit is not None
        rw = readers > 0 or base["readers_waiting"]
        kind: Kind = "semaphore" if semaphore else "rwlock" if rw else "rlock"
        return LockInfo(
            **base,
            **own,
            kind=kind,
            held=bool(holds),
            holders=holds,
            permits=PermitsInfo(limit, used) if semaphore else None,
            unknown_fields=unknown,
        )
    if key_type not in ("string", "none"):
        return LockInfo(**base, **own, kind="foreign", held=True)
    holders: tuple[HoldInfo, ...] = ()
    stored = None if _absent(value) else decode_lock_value(value)
    if stored is not None:
        holder = HoldInfo(
            role="holder",
            host=stored.host,
            pid=stored.pid,
            hold_count=1,
            fencing_token=stored.fence,
            lease_remaining=base["ttl"],
            acquired_at=stored.acquired_ms / 1000.0,
            token_tag=token_tag(stored.token),
        )
        holders = (holder,)
    waiters = _queue(queue, leases, now_ms)
    base["waiting"] = base["waiting"] or bool(waiters)
    if not exists and not queue and latch is not None:  # a CountDownLatch, its key its own
        mine = {"key": key + _LATCH.key_suffix, "key_type": _LATCH.key_type, "ttl": latch.ttl}
        return LockInfo(**{**base, **mine}, **own, kind="latch", held=latch.count > 0)
    if not exists and not queue and barrier is not None:  # a Barrier's round
        ttl_ms = as_int(round_pttl)
        mine = {
            "key": key + _BARRIER.key_suffix,
            "key_type": _BARRIER.key_type,
            "ttl": ttl_ms / 1000.0 if ttl_ms >= 0 else None,
        }
        return LockInfo(**{**base, **mine}, **own, kind="barrier", held=barrier.entered > 0)
    kind = "fair" if queue else "lock" if exists else "none"
    leader = advertised(leader_raw, holders[0].fencing_token) if holders else None
    return LockInfo(
        **base, **own, kind=kind, held=exists, holders=holders, queue=waiters, leader=leader
    )


def _fields(raw: list[Any]) -> dict[str, str]:
    """A hash as HGETALL gives it (``[field, value, ...]``), decoded."""
    return {as_str(f): as_str(v) for f, v in zip(raw[::2], raw[1::2], strict=True)}


def _latch(raw: list[Any], pttl_ms: int) -> LatchInfo | None:
    """The latch of a latch key's fields (as ``scripts/_latch.lua`` writes them), or None:
    no latch, or fields it did not write."""
    fields = _fields(raw)
    values = [fields.get(f, "") for f in ("count", "gen", "since")]
    if not all(v.isdigit() and v.isascii() for v in values):
        return None
    return LatchInfo(int(values[0]), int(values[1]), pttl_ms / 1000.0 if pttl_ms >= 0 else None)


def _round(raw: list[Any], live: int, next_ms: int) -> BarrierInfo | None:
    """The round of a barrier key's fields (as ``scripts/_barrier.lua`` writes them), or
    None: no round, or fields it did not write. ``live``, ``next_ms``: inspect.lua's count
    of live members and time to the earliest of their lease ends (-1: none)."""
    fields = _fields(raw)
    gen, state, parties = (fields.get(f, "") for f in ("gen", "state", "parties"))
    if not (gen.isdigit() and parties.isdigit() and gen.isascii() and parties.isascii()):
        return None
    if state not in ("enter", "open"):
        return None
    ends = next_ms / 1000.0 if next_ms >= 0 else None
    return BarrierInfo(int(gen), "open" if state == "open" else "enter", int(parties), live, ends)


def _holds(fields: list[Any], now_ms: int) -> tuple[tuple[HoldInfo, ...], int]:
    """The live holds of a hold hash (as ``[field, value, ...]``), writers first, then
    readers, then permits, each by fencing token; and how many fields were not holds."""
    holds: list[HoldInfo] = []
    unknown = 0
    for raw_token, raw_value in zip(fields[::2], fields[1::2], strict=True):
        stored = decode_hold_value(raw_value)
        if stored is None:
            unknown += 1
            continue
        if stored.expires_ms <= now_ms:
            continue  # expired; the next script run removes it
        token = as_str(raw_token)
        role = _ROLES[stored.mode]
        holds.append(
            HoldInfo(
                role=role,
                host=stored.host,
                pid=stored.pid,
                hold_count=stored.count,
                fencing_token=stored.fence,
                lease_remaining=(stored.expires_ms - now_ms) / 1000.0,
                acquired_at=stored.acquired_ms / 1000.0,
                token_tag=token_tag(token),
                permit_id=permit_id(token) if role == "permit" else None,
            )
        )
    holds.sort(key=lambda h: (_ORDER.index(h.role), h.fencing_token))
    return tuple(holds), unknown


def _queue(queue: list[Any], leases: list[Any], now_ms: int) -> tuple[WaiterInfo, ...]:
    """The live waiters of a FairLock in queue order (a waiter whose waiter lease ended is
    dropped by the next script run; it is not shown)."""
    ends = {as_str(t): float(as_str(s)) for t, s in zip(leases[::2], leases[1::2], strict=True)}
    rows: list[WaiterInfo] = []
    for raw in queue:
        token = as_str(raw)
        end = ends.get(token)
        if end is None or end <= now_ms:
            continue
        rows.append(WaiterInfo(len(rows) + 1, token_tag(token), (end - now_ms) / 1000.0))
    return tuple(rows)
