# SPDX-License-Identifier: MIT
"""What a server can do natively, found once per client (no I/O here: the drivers send
``INFO server`` once per client and cache the :class:`Features` parsed from the reply).

A plain ``Lock`` (and ``FairLock``, and the redis-py drop-ins) extends with
``replace=True`` by a native compare-and-set instead of a script where the server has one:
``SET key value IFEQ value PX ms``: Valkey 8.1+ (https://valkey.io/commands/set/), Redis
8.4+.

Releases are always the scripts: a release also sets its fencing token's bit in the slot's
release ring, only if the key was this hold's (a release sent again after a lost reply
finds it there), and no native compare-and-delete (Valkey 9's ``DELIFEQ``, Redis 8.4's
``DELEX ... IFEQ``) can make a second write depend on its outcome in one round trip.

Valkey reports ``redis_version:7.2.4`` for compatibility, so the version is read from
``valkey_version`` (with ``server_name:valkey``), never from ``redis_version`` alone.
``REDISLOCK_NATIVE=0`` in the environment turns the native paths off (the scripts are used
everywhere); a native command the server refuses (an ACL without it, a proxy that does not
know it) turns them off for that client.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["ENV_NATIVE", "Features", "parse_info"]

ENV_NATIVE: Final = "REDISLOCK_NATIVE"
"""Set to ``0`` to use the scripts even where the server has native commands."""


@dataclass(slots=True)
class Features:
    """The native commands one client's server has (mutable: a refused command turns its
    path off for the client)."""

    server: str = "unknown"
    """``"redis"`` or ``"valkey"`` (``"unknown"`` if ``INFO`` was refused or unreadable)."""
    version: tuple[int, int, int] = (0, 0, 0)
    """The server's own version (``valkey_version`` on Valkey)."""
    set_ifeq: bool = False
    """Whether ``SET ... IFEQ`` exists (compare-and-set)."""

    def describe(self) -> str:
        v = ".".join(map(str, self.version))
        return f"{self.server} {v}: native {'SET IFEQ' if self.set_ifeq else 'none (scripts)'}"


_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def _version(text: object) -> tuple[int, int, int] | None:
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    m = _VERSION.match(str(text or ""))
    if m is None:
        return None
    return int(m[1]), int(m[2]), int(m[3] or 0)


def _field(info: Mapping[object, object], name: str) -> object:
    return info.get(name, info.get(name.encode()))


def parse_info(info: object) -> Features:
    """:class:`Features` from an ``INFO server`` reply as redis-py or valkey-py parse it (a
    dict; from a Cluster client, maybe a dict of such dicts per node: the first is used,
    the nodes of one cluster run one version). Anything unreadable: no native commands.
    ``REDISLOCK_NATIVE=0``: none either."""
    if isinstance(info, Mapping) and info and _field(info, "redis_version") is None:
        first = next(iter(info.values()))  # a Cluster client's {node: info}
        info = first if isinstance(first, Mapping) else {}
    if not isinstance(info, Mapping):
        return Features()
    valkey = _version(_field(info, "valkey_version"))
    name = _field(info, "server_name")
    if isinstance(name, bytes):
        name = name.decode("ascii", "replace")
    if valkey is not None or name == "valkey":
        version = valkey or (0, 0, 0)
        feats = Features(server="valkey", version=version)
        feats.set_ifeq = version >= (8, 1, 0)
    else:
        redis = _version(_field(info, "redis_version"))
        if redis is None:
            return Features()
        feats = Features(server="redis", version=redis)
        feats.set_ifeq = redis >= (8, 4, 0)
    if os.environ.get(ENV_NATIVE, "").strip() == "0":
        feats.set_ifeq = False
    return feats
