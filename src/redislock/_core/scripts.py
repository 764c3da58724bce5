# SPDX-License-Identifier: MIT
"""The Lua scripts, loaded once from ``redislock/scripts/*.lua`` with their SHA1.

No client is involved: the SHA1 is computed locally, so every client, cluster node or
Redlock master can run a script with EVALSHA and fall back to EVAL on NOSCRIPT.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

__all__ = ["SCRIPTS", "Script"]


@dataclass(frozen=True, slots=True)
class Script:
    """One Lua script: its file stem, source text and SHA1 (hex)."""

    name: str
    source: str
    sha: str


_INCLUDE = re.compile(r"^-- include: (_\w+\.lua)\n", re.M)
"""A line that :func:`_load` replaces with that file's text (``_*.lua`` files are shared
parts, not scripts)."""


def _load() -> MappingProxyType[str, Script]:
    folder = resources.files("redislock").joinpath("scripts")
    found: dict[str, Script] = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".lua") and not entry.name.startswith("_"):
            source = _INCLUDE.sub(
                lambda m: folder.joinpath(m[1]).read_text(encoding="utf-8"),
                entry.read_text(encoding="utf-8"),
            )
            sha = hashlib.sha1(source.encode("utf-8"), usedforsecurity=False).hexdigest()
            found[entry.name[: -len(".lua")]] = Script(entry.name[: -len(".lua")], source, sha)
    return MappingProxyType(dict(sorted(found.items())))


SCRIPTS = _load()
"""All scripts by name (file stem), e.g. ``SCRIPTS["lock_acquire"]``."""
