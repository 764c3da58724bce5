# SPDX-License-Identifier: MIT
"""What an :class:`~redislock.testing.audit.Auditor` records: hold intervals, keys without a
TTL, foreign touches and restarts, gathered in an :class:`AuditResult` that round-trips
through JSON.

Every ``t``, ``first``, ``last`` and ``gone`` is ``time.monotonic()`` in seconds; owner
tokens are cut to their first :data:`TOKEN_CHARS` characters.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "HASH_MODES",
    "STRING_MODE",
    "TOKEN_CHARS",
    "AuditResult",
    "ForeignTouch",
    "HoldInterval",
    "RestartNote",
    "TtlViolation",
]

#: Tokens in records are cut to this many characters.
TOKEN_CHARS: Final = 8


#: The audit mode of a string hold (always exclusive).
STRING_MODE: Final = "x"
#: A hash hold's stored mode -> its audit mode: ``w`` (write, RLock) is exclusive ``x``,
#: ``r`` (read) is shared ``s``, ``p`` is a semaphore permit.
HASH_MODES: Final = {"w": "x", "r": "s", "p": "p"}


@dataclass
class TtlViolation:
    """A key under the prefix seen without a TTL (PTTL -1) that must have one.

    Attributes:
        t: monotonic time of the observation, seconds.
        server: index of the server in ``Auditor(servers=...)``.
        key: the key.
        type: its Redis type (``"string"``, ``"hash"``, ...; ``"?"`` if unknown).
    """

    t: float
    server: int
    key: str
    type: str


@dataclass
class HoldInterval:
    """One hold as seen on one server by the snapshot poller.

    Attributes:
        server: index of the server.
        name: lock name.
        pid: holder pid, from the hold's metadata.
        fence: fencing token: the hold's own, stored with it (a string hold of an earlier
            version: the name's counter read in the same atomic step, the largest seen
            during the hold); for a Redlock, the token this master issued.
        first: monotonic time of the first snapshot that showed the hold, seconds.
        last: monotonic time of the last snapshot that showed it, seconds.
        gone: monotonic time of the first successful snapshot without it, seconds; None
            while it is still present (or the server never answered again).
        mode: ``"x"`` (Lock, RLock, write side), ``"s"`` (read side) or ``"p"`` (permit).
        token: the first 8 characters of the owner token.
        host: holder host name, from the hold's metadata.
    """

    server: int
    name: str
    pid: int
    fence: int
    first: float
    last: float
    gone: float | None = None
    mode: str = STRING_MODE
    token: str = ""
    host: str = ""


@dataclass
class ForeignTouch:
    """A write on a lock key or hold owned by another token that was still live.

    Attributes:
        server: index of the server.
        t: monotonic time of the command, seconds.
        script: the script that wrote: a library script as ``"<file stem>"`` or
            ``"<file stem>:<op>"`` (``"fair:release"``), ``"eval:<sha1 prefix>"`` for a
            script not shipped by redislock, or ``"(plain)"`` for a plain client command.
        key: the lock key.
        caller: first 8 characters of the caller's token (a library script's token
            argument; for another script its first argument that looks like a token), or
            None (plain commands).
        owner: first 8 characters of the token that owned the key or hold, or None.
        command: the command, with tokens cut to 8 characters (``"DEL <key>"``,
            ``"HDEL <key> 0123abcd…"``).
        client: the client address MONITOR showed for the caller.
        server_time: the server's wall-clock time of the command, Unix seconds.
    """

    server: int
    t: float
    script: str
    key: str
    caller: str | None
    owner: str | None
    command: str
    client: str = ""
    server_time: float = 0.0


@dataclass
class RestartNote:
    """A server restart reported through :meth:`Auditor.note_restart`.

    Attributes:
        server: index of the server.
        t: monotonic time of the call, seconds.
        persistent: whether the server kept its data across the restart.
    """

    server: int
    t: float
    persistent: bool


@dataclass
class AuditResult:
    """What an :class:`Auditor` saw; JSON-serialisable with :meth:`to_json`.

    Attributes:
        ttl_violations: keys without a TTL (at most one record per key per second).
        ttl_observations: how many times a key without a TTL was observed (every scan that
            saw one counts once per key).
        holds: hold intervals, sorted by server and first sighting.
        foreign_touches: writes on others' live lock keys or holds.
        monitor_lines: MONITOR lines processed (all servers).
        audited_scripts: script calls whose writes were audited (library scripts that
            carry a caller token, and other scripts).
        polls: successful snapshots per server (index = server).
        poll_errors: failed snapshots and scans, all servers.
        ttl_checks: keys whose TTL was checked (all scans).
        admin_overrides: force-release calls seen (``lock_force_release``, ``hold`` and
            ``fair`` op ``force``): deliberate operator actions, never foreign touches.
        monitor_connects: MONITOR connections made and seeded, per server.
        restarts: restarts reported with :meth:`Auditor.note_restart`.
        errors: the first unexpected error messages (at most 20), for diagnosis.
    """

    ttl_violations: list[TtlViolation] = field(default_factory=list)
    ttl_observations: int = 0
    holds: list[HoldInterval] = field(default_factory=list)
    foreign_touches: list[ForeignTouch] = field(default_factory=list)
    monitor_lines: int = 0
    audited_scripts: int = 0
    polls: list[int] = field(default_factory=list)
    poll_errors: int = 0
    ttl_checks: int = 0
    admin_overrides: int = 0
    monitor_connects: list[int] = field(default_factory=list)
    restarts: list[RestartNote] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The result as plain dicts, lists and scalars (``json.dumps`` takes it)."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """The result as one JSON object (no newline inside)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditResult:
        """Rebuild a result from :meth:`to_dict` output.

        Raises:
            TypeError: a record has missing or unknown fields.
            KeyError, ValueError: ``data`` is not a result.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        plain = {k: v for k, v in data.items() if k in known}
        plain["ttl_violations"] = [TtlViolation(**d) for d in data.get("ttl_violations", [])]
        plain["holds"] = [HoldInterval(**d) for d in data.get("holds", [])]
        plain["foreign_touches"] = [ForeignTouch(**d) for d in data.get("foreign_touches", [])]
        plain["restarts"] = [RestartNote(**d) for d in data.get("restarts", [])]
        plain["polls"] = list(data.get("polls", []))
        plain["monitor_connects"] = list(data.get("monitor_connects", []))
        plain["errors"] = list(data.get("errors", []))
        return cls(**plain)

    @classmethod
    def from_json(cls, text: str) -> AuditResult:
        """Rebuild a result from :meth:`to_json` output.

        Raises:
            json.JSONDecodeError: ``text`` is not JSON.
            TypeError, KeyError, ValueError: it is not a result.
        """
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("an AuditResult is a JSON object")
        return cls.from_dict(data)
