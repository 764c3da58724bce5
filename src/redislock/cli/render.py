# SPDX-License-Identifier: MIT
"""How the CLI shows a :class:`~redislock.inspection.LockInfo`: the JSON object of
``inspect --json`` (one per lock in ``list --json``) and the words of the text output, shared
by ``inspect``, ``list``, ``top`` and ``release --force``."""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from redislock._core.kinds import STORED
from redislock.inspection import HoldInfo, LockInfo

__all__ = [
    "HOLD_KINDS",
    "KIND_LABELS",
    "LEASE_KINDS",
    "OWN_KINDS",
    "as_json",
    "hold_text",
    "holder_text",
    "own_lines",
    "plural",
    "state_text",
]

KIND_LABELS: Final[dict[str | None, str]] = {
    None: "lock",  # nothing there: shown as a free lock
    **{stored.code: stored.label for stored in STORED},
    "foreign": "key",
}
"""How ``inspect`` names each kind (the kinds table's stored kinds); the keys are the
``kind`` field of the JSON output."""

HOLD_KINDS: Final = tuple(stored.code for stored in STORED if stored.shape == "holds")
"""The kinds kept as a hash of holds (see scripts/_hold.lua)."""

LEASE_KINDS: Final = tuple(stored.code for stored in STORED if stored.shape == "lease")
"""The kinds kept as one lock value, a string at the lock key (Lock, FairLock, ...)."""

OWN_KINDS: Final = {stored.code: stored.shape for stored in STORED if not stored.at_lock_key}
"""The kinds kept at a key of their own, no lease and no holder (a CountDownLatch's count,
a Barrier's round), by their shape: each has an object of its own in the JSON output
(``latch``, ``barrier``), shown also beside a lock of the same name."""

_MODES: Final = {"writer": "w", "reader": "r", "permit": "p"}


def _iso(unix_seconds: float) -> str:
    return dt.datetime.fromtimestamp(unix_seconds, dt.UTC).isoformat()


def plural(n: int, word: str) -> str:
    """``"1 word"``, ``"2 words"``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _hold(h: HoldInfo) -> dict[str, Any]:
    hold: dict[str, Any] = {
        "mode": _MODES[h.role],
        "role": h.role,
        "host": h.host,
        "pid": h.pid,
        "count": h.hold_count,
        "fencing_token": h.fencing_token,
        "lease_remaining": h.lease_remaining,
        "acquired_at": _iso(h.acquired_at),
        "token_tag": h.token_tag,
    }
    if h.permit_id is not None:  # as Permit.id: not a secret
        hold["permit_id"] = h.permit_id
    return hold


def _own(info: LockInfo, out: dict[str, Any]) -> None:
    """A CountDownLatch's and a Barrier's round of the name, into ``out``, if it has them."""
    if info.latch is not None:
        latch = info.latch
        out["latch"] = {"count": latch.count, "generation": latch.generation, "ttl": latch.ttl}
    if info.barrier is not None:
        b = info.barrier
        out["barrier"] = {
            "generation": b.generation,
            "state": b.state,
            "parties": b.parties,
            "entered": b.entered,
            "next_lease_end": b.next_lease_end,
        }


def as_json(info: LockInfo) -> dict[str, Any]:
    """The JSON object of ``inspect --json`` for ``info`` (``kind`` null for ``"none"``)."""
    out: dict[str, Any] = {
        "name": info.name,
        "key": info.key,
        "held": info.held,
        "ttl": info.ttl,
        "fencing_counter": info.fencing_counter,
        "waiters": info.waiting,
        "kind": None if info.kind == "none" else info.kind,
    }
    _own(info, out)
    if info.kind in OWN_KINDS:
        return out
    if info.kind in HOLD_KINDS:
        holds = [_hold(h) for h in info.holders]
        out.update(
            holds=holds,
            writers=sum(1 for h in holds if h["mode"] == "w"),
            readers=sum(1 for h in holds if h["mode"] == "r"),
            permits_held=sum(1 for h in holds if h["mode"] == "p"),
            reader_waiters=info.readers_waiting,
        )
        if info.unknown_fields:
            out["unknown_fields"] = info.unknown_fields
        if info.permits is not None:
            out["permit_count"] = info.permits.limit
        return out
    out["holder"] = None
    if info.kind == "foreign":
        out["type"] = info.key_type
        return out
    if info.holders:
        h = info.holders[0]
        out["holder"] = {
            "fencing_token": h.fencing_token,
            "host": h.host,
            "pid": h.pid,
            "acquired_at": _iso(h.acquired_at),
            "token_tag": h.token_tag,
        }
    if info.leader is not None:  # an Election's lock: who leads, as Election.leader() says
        out["leader"] = {
            "identity": info.leader.identity,
            "term": info.leader.term,
            "value": info.leader.value,
        }
    if info.kind == "fair":
        out["queue"] = [
            {"position": w.position, "token_tag": w.token_tag, "lease_remaining": w.lease_remaining}
            for w in info.queue
        ]
    return out


def holder_text(info: dict[str, Any]) -> str:
    """The holder of a Lock or FairLock (``info``: :func:`as_json`'s) in a few words."""
    h = info["holder"]
    if not info["held"]:
        return "free"
    if h is None:
        return "held (not by redislock: unknown value format)"
    leader = info.get("leader")
    leads = f"election leader {leader['identity']!r} (term {leader['term']}), " if leader else ""
    return (
        f"{leads}held by {h['host']} pid {h['pid']} since {h['acquired_at']}, "
        f"fencing token {h['fencing_token']}, token ~{h['token_tag']}"
    )


def _latch_text(latch: dict[str, Any]) -> str:
    gen = latch["generation"]
    if latch["count"]:
        return f"counting down, {latch['count']} left (generation {gen})"
    return f"reached zero (generation {gen})"


def _round_text(b: dict[str, Any]) -> str:
    parties = f"{b['parties']} {'party' if b['parties'] == 1 else 'parties'}"
    state = "open" if b["state"] == "open" else "entering"
    return f"round {b['generation']} {state}, {b['entered']} of {parties} in"


_OWN_TEXTS: Final = {"latch": _latch_text, "round": _round_text}
"""The words for each shape of :data:`OWN_KINDS`, from its object of :func:`as_json`."""


def own_lines(info: dict[str, Any]) -> list[str]:
    """The lines ``inspect`` adds for a CountDownLatch or a Barrier's round (``info``:
    :func:`as_json`'s): their details when the name is one, else one line each saying
    the name is one too (beside a lock of the same name)."""
    lines = []
    for code, shape in OWN_KINDS.items():
        own = info.get(code)
        if own is None:
            continue
        if info["kind"] != code:
            lines.append(f"also a {KIND_LABELS[code]}: {_OWN_TEXTS[shape](own)}")
        elif shape == "latch":
            ttl = own["ttl"]
            lines.append(f"ttl: {ttl} s" if ttl is not None else "ttl: none (never expires)")
        else:
            ends = own["next_lease_end"]
            lines.append(f"parties: {own['parties']}, entered: {own['entered']}")
            lines.append(
                f"next lease end: in {ends} s" if ends is not None else "next lease end: none"
            )
    return lines


def state_text(info: dict[str, Any]) -> str:
    """The state of any kind in a few words (the first line of ``inspect``)."""
    kind = info["kind"]
    if kind in OWN_KINDS:
        return _OWN_TEXTS[OWN_KINDS[kind]](info[kind])
    if kind == "foreign":
        return f"a Redis {info['type']}, not a redislock lock"
    if kind not in HOLD_KINDS:
        return holder_text(info)
    if kind == "semaphore":
        count, held = info["permit_count"], info["permits_held"]
        if count is None:  # "1 permit held", "2 permits held", "1 of 4 permits held"
            return f"{plural(held, 'permit')} held"
        return f"{held} of {plural(count, 'permit')} held"
    parts = [plural(info[k], k[:-1]) for k in ("writers", "readers") if info[k]]
    return "held by " + " and ".join(parts) if parts else "free"


def hold_text(h: dict[str, Any]) -> str:
    """One hold of :func:`as_json`'s ``holds`` in a line."""
    text = (
        f"{h['role']}: {h['host']} pid {h['pid']}, hold count {h['count']}, "
        f"fencing token {h['fencing_token']}, lease {h['lease_remaining']} s, "
        f"since {h['acquired_at']}, token ~{h['token_tag']}"
    )
    return text + (f", permit id {h['permit_id']}" if "permit_id" in h else "")
