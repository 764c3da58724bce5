# SPDX-License-Identifier: MIT
"""The client libraries redislock takes clients of: redis-py always, valkey-py
(https://github.com/valkey-io/valkey-py, ``pip install redislock[valkey]``) when it can be
imported. No I/O.

The two libraries share their design but no classes: a ``valkey.Valkey`` is not a
``redis.Redis``, and valkey-py's exceptions (``valkey.exceptions.ResponseError``...) are not
subclasses of redis-py's. A valkey-py client raises valkey-py's exceptions and returns them
in a pipeline's replies, so every ``except`` and ``isinstance`` on a client's error in
redislock names the tuples here (:data:`RESPONSE_ERRORS`...), never one library's class.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

__all__ = [
    "ASYNC_CLIENTS",
    "ASYNC_CLIENTS_TEXT",
    "ASYNC_CLUSTERS",
    "ASYNC_MASTERS",
    "ASYNC_MASTERS_TEXT",
    "ASYNC_SINGLE",
    "BUSY_LOADING_ERRORS",
    "CLIENT_ERRORS",
    "CLUSTERS",
    "CONNECTION_ERRORS",
    "FAMILIES",
    "NO_PERMISSION_ERRORS",
    "NO_SCRIPT_ERRORS",
    "RESPONSE_ERRORS",
    "SENTINEL_POOLS",
    "SYNC_CLIENTS",
    "SYNC_CLIENTS_TEXT",
    "SYNC_CLUSTERS",
    "SYNC_MASTERS",
    "SYNC_MASTERS_TEXT",
    "SYNC_SINGLE",
    "TIMEOUT_ERRORS",
    "Family",
    "errors_of",
    "family_of",
    "wrong_client",
]


@dataclass(frozen=True)
class Family:
    """One client library: its client classes, and the module of its exceptions."""

    package: str
    """The import name: ``redis`` or ``valkey``."""
    sync_client: type
    async_client: type
    sync_cluster: type
    async_cluster: type
    sentinel_pools: tuple[type, ...]
    """Its Sentinel connection pools (sync and asyncio)."""
    errors: ModuleType
    """Its ``exceptions`` module (``ResponseError``, ``NoScriptError``, ...)."""
    base_error: type[Exception]
    """The base of its exceptions: ``RedisError`` or ``ValkeyError``."""
    async_retry: type
    """Its asyncio ``Retry`` class."""
    async_pool: type
    """Its asyncio ``ConnectionPool`` class."""
    no_backoff: type
    """Its ``NoBackoff`` class."""

    @property
    def clients(self) -> tuple[type, ...]:
        """Its four client classes."""
        return (self.sync_client, self.async_client, self.sync_cluster, self.async_cluster)

    def name(self, cls: type) -> str:
        """How a user spells ``cls`` of this library (``redis.asyncio.RedisCluster``)."""
        path = {
            self.sync_client: "",
            self.async_client: "asyncio.",
            self.sync_cluster: "cluster.",
            self.async_cluster: "asyncio.",
        }[cls]
        return f"{self.package}.{path}{cls.__name__}"


def _family(package: str) -> Family:
    """The family of ``package``, ``"redis"`` or ``"valkey"`` (ImportError when it is not
    installed). valkey-py is a fork of redis-py with the same modules and classes, its
    own named ``Valkey...`` where redis-py's are ``Redis...``."""
    stem = package.capitalize()

    def get(module: str, attr: str) -> Any:
        return getattr(importlib.import_module(f"{package}.{module}".rstrip(".")), attr)

    return Family(
        package=package,
        sync_client=get("", stem),
        async_client=get("asyncio", stem),
        sync_cluster=get("cluster", f"{stem}Cluster"),
        async_cluster=get("asyncio.cluster", f"{stem}Cluster"),
        sentinel_pools=(
            get("sentinel", "SentinelConnectionPool"),
            get("asyncio.sentinel", "SentinelConnectionPool"),
        ),
        errors=importlib.import_module(f"{package}.exceptions"),
        base_error=get("exceptions", f"{stem}Error"),
        async_retry=get("asyncio.retry", "Retry"),
        async_pool=get("asyncio", "ConnectionPool"),
        no_backoff=get("backoff", "NoBackoff"),
    )


def _valkey_py() -> Family | None:
    """valkey-py's family, or None when it is not installed (it is optional)."""
    try:
        return _family("valkey")
    except ImportError:
        return None


REDIS_PY: Final = _family("redis")
FAMILIES: Final[tuple[Family, ...]] = tuple(f for f in (REDIS_PY, _valkey_py()) if f is not None)
"""The client libraries found: redis-py first, then valkey-py if installed."""


def _classes(attr: str) -> tuple[type[Any], ...]:
    return tuple(getattr(f, attr) for f in FAMILIES)


def _text(classes: tuple[type, ...]) -> str:
    names = [f.name(c) for f in FAMILIES for c in f.clients if c in classes]
    if len(names) == 1:
        return f"a {names[0]}"
    return "a " + ", ".join(names[:-1]) + " or " + names[-1]


SYNC_SINGLE: Final = _classes("sync_client")
ASYNC_SINGLE: Final = _classes("async_client")
SYNC_CLUSTERS: Final = _classes("sync_cluster")
ASYNC_CLUSTERS: Final = _classes("async_cluster")
CLUSTERS: Final = SYNC_CLUSTERS + ASYNC_CLUSTERS
SYNC_CLIENTS: Final = SYNC_SINGLE + SYNC_CLUSTERS
ASYNC_CLIENTS: Final = ASYNC_SINGLE + ASYNC_CLUSTERS
SENTINEL_POOLS: Final = tuple(p for f in FAMILIES for p in f.sentinel_pools)
SYNC_MASTERS: Final = SYNC_SINGLE
ASYNC_MASTERS: Final = ASYNC_SINGLE

SYNC_CLIENTS_TEXT: Final = _text(SYNC_CLIENTS)
ASYNC_CLIENTS_TEXT: Final = _text(ASYNC_CLIENTS)
SYNC_MASTERS_TEXT: Final = _text(SYNC_MASTERS)
ASYNC_MASTERS_TEXT: Final = _text(ASYNC_MASTERS)


def _errors(name: str) -> tuple[type[Exception], ...]:
    return tuple(getattr(f.errors, name) for f in FAMILIES)


RESPONSE_ERRORS: Final = _errors("ResponseError")
"""An error reply (the connection is fine): every library's ``ResponseError``."""
NO_SCRIPT_ERRORS: Final = _errors("NoScriptError")
NO_PERMISSION_ERRORS: Final = _errors("NoPermissionError")
CONNECTION_ERRORS: Final = _errors("ConnectionError")
TIMEOUT_ERRORS: Final = _errors("TimeoutError")
BUSY_LOADING_ERRORS: Final = _errors("BusyLoadingError")
CLIENT_ERRORS: Final = tuple(f.base_error for f in FAMILIES)
"""Whatever a client raises: ``redis.exceptions.RedisError``, ``valkey.exceptions.ValkeyError``."""


def family_of(obj: Any) -> Family:
    """The library ``obj`` (a client, a connection, a PubSub...) is an object of, by the
    modules its class and bases come from; redis-py for anything else."""
    for family in FAMILIES[1:]:
        for cls in type(obj).__mro__:
            if cls.__module__.partition(".")[0] == family.package:
                return family
    return REDIS_PY


def errors_of(exc: BaseException) -> ModuleType:
    """The exceptions module of the library that raised ``exc`` (redis-py's for anything
    else), to raise a typed error of the same library."""
    for family in FAMILIES[1:]:
        if isinstance(exc, family.base_error):
            return family.errors
    return REDIS_PY.errors


def wrong_client(cls: str, accepted: str, client: object) -> str:
    """The message for a client of the wrong type given to class ``cls`` (the other
    flavour's client, a URL...): ``accepted`` names the client classes it takes."""
    if cls.startswith("Async"):
        other = f"for sync use {cls.removeprefix('Async')}"
    else:
        other = f"for asyncio use Async{cls}"
    return f"{cls} needs {accepted} ({other}), got {type(client).__name__}"
