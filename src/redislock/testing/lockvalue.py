# SPDX-License-Identifier: MIT
"""Parse the values redislock stores in a lock key, as the auditor reads them.

Two layouts (see ``scripts/lock_acquire.lua`` and ``scripts/hold.lua``):

* a Lock/Redlock/FairLock string ``"<token>|<host>|<pid>|<unix_ms>"``;
* an RLock/ReadWriteLock/Semaphore hash ``token -> "<mode>|<count>|<expires_ms>|<fence>|
  <host>|<pid>|<acquired_unix_ms>"``.

The host may itself contain ``|``: the pid and the timestamp are read from the end.
Everything here is pure (no I/O) and returns None for a value it does not recognise.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = [
    "HASH_MODES",
    "STRING_MODE",
    "HashHold",
    "StringHold",
    "parse_hash",
    "parse_string",
    "string_owner",
]

#: The audit mode of a string hold (always exclusive).
STRING_MODE: Final = "x"
#: A hash hold's stored mode -> its audit mode: ``w`` (write, RLock) is exclusive ``x``,
#: ``r`` (read) is shared ``s``, ``p`` is a semaphore permit.
HASH_MODES: Final = {"w": "x", "r": "s", "p": "p"}


class StringHold(NamedTuple):
    """The parts of a string lock value the auditor uses."""

    token: str
    host: str
    pid: int


def string_owner(value: str) -> str:
    """The owner token of a string lock value: everything before the first ``|``."""
    return value.split("|", 1)[0]


def parse_string(value: str) -> StringHold | None:
    """``"<token>|<host>|<pid>|<unix_ms>"`` -> its parts, or None."""
    parts = value.split("|")
    if len(parts) < 4 or not parts[-2].isdigit():
        return None
    return StringHold(parts[0], "|".join(parts[1:-2]), int(parts[-2]))


class HashHold(NamedTuple):
    """The parts of a hash hold's value the auditor uses (``expires_ms``: server time in
    milliseconds at which the hold's lease ends)."""

    mode: str
    expires_ms: int
    fence: int
    host: str
    pid: int


def parse_hash(value: str) -> HashHold | None:
    """``"<mode>|<count>|<expires_ms>|<fence>|<host>|<pid>|<acquired_unix_ms>"`` or None."""
    parts = value.split("|")
    if len(parts) < 7 or parts[0] not in HASH_MODES:
        return None
    exp, fence, pid = parts[2], parts[3], parts[-2]
    if not (exp.isdigit() and fence.isdigit() and pid.isdigit()):
        return None
    return HashHold(parts[0], int(exp), int(fence), "|".join(parts[4:-2]), int(pid))
