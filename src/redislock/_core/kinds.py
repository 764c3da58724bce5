# SPDX-License-Identifier: MIT
"""The kinds table: one row per public lock kind, the one list of what kinds exist. No I/O.

Every place that needs to know the kinds reads :data:`KINDS` (and :data:`STORED`, how a
name looks in Redis) instead of keeping a list of its own:

- metrics labels (:mod:`redislock._handle`: a class counts under its row's name);
- the kind-conflict error (:func:`redislock._core.ops.error_flow`: which kinds a script
  serves, which kinds store what the lock key holds);
- ``inspect``'s kinds and the CLI's words for them (:mod:`redislock._core.inspection`,
  :mod:`redislock.cli.render` and the commands that use it);
- the torture scenarios (:mod:`redislock.testing.faults`, ``testing/worker.py``,
  ``testing/torture.py``, ``redislock torture --scenario``);
- the tests: the generic behaviour table (``tests/primitives.py``), the ACL profiles
  (``tests/test_acl.py`` against ``docs/acl.md``), and ``tests/test_kinds.py``, which fails
  when a kind is missing from a place the table cannot feed (a script without cases, a
  profile missing from the page, an export without a row).

A new primitive adds a row here (docs/architecture.md, "Adding a primitive"). The row
describes what its objects are, not how they work: a count-down latch (not a holder: its
objects ``count_down()`` and ``wait()``) is ``holder=False`` with no ``parts``; a barrier
whose parties enter and leave with leases is ``holder=True`` (each object one party), or
hands out its parties as a :class:`Part`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

__all__ = [
    "KINDS",
    "STORED",
    "KindSpec",
    "Part",
    "Shape",
    "Stored",
    "StoredCode",
    "by_name",
    "conflict_found",
    "conflict_wanted",
    "hold_mode_found",
    "metrics_labels",
    "stored",
]

StoredCode: TypeAlias = Literal["lock", "fair", "rlock", "rwlock", "semaphore", "latch", "barrier"]
"""What ``inspect`` calls a name of one of redislock's kinds (:class:`Stored`.code; with
``"none"`` and ``"foreign"`` it is :data:`redislock.inspection.Kind`)."""

Shape: TypeAlias = Literal["lease", "holds", "latch", "round"]
"""What a kind keeps at its key: at the lock key ``<prefix>{<name>}``, ``"lease"``, a string
lock value ``<token>|<fence>|<meta>`` with the lease as its TTL (one holder), or
``"holds"``, a hash of holds, one field per owner token (``scripts/_hold.lua``); at a key of
its own (:attr:`Stored.key_suffix`), ``"latch"``, a count-down latch's hash {count, gen,
since} with a TTL (``scripts/_latch.lua``), or ``"round"``, a barrier's round, a hash {gen,
state, parties} beside a sorted set of its members' leases (``scripts/_barrier.lua``). No
lease and no holder is stored in the last two: ``inspect`` shows their own state."""

_KEY_TYPES: Final[dict[Shape, str]] = {
    "lease": "string",
    "holds": "hash",
    "latch": "hash",
    "round": "hash",
}


@dataclass(frozen=True, slots=True)
class Stored:
    """How a name looks in Redis: what ``inspect`` can tell from the keys (several public
    kinds may look alike: a MultiLock name, a Redlock master's key and a Lock are all
    ``"lock"``).

    Attributes:
        code: ``LockInfo.kind``, the ``kind`` of ``inspect --json``.
        label: how the CLI names it (``inspect``, ``list``, ``top``, ``release --force``).
        shape: what its key holds (:data:`Shape`).
        key_suffix: where that key is: the lock key ``<prefix>{<name>}`` plus this (""
            for the lock key itself; ``":latch"``: ``<prefix>{<name>}:latch``).
    """

    code: StoredCode
    label: str
    shape: Shape
    key_suffix: str = ""

    @property
    def key_type(self) -> str:
        """The Redis TYPE of the key of a name of this kind."""
        return _KEY_TYPES[self.shape]

    @property
    def at_lock_key(self) -> bool:
        """It keeps its state at the lock key (which a kind-conflict error looks at)."""
        return not self.key_suffix


STORED: Final = (
    Stored("lock", "lock", "lease"),
    Stored("fair", "fair lock", "lease"),
    Stored("rlock", "reentrant lock", "holds"),
    Stored("rwlock", "read-write lock", "holds"),
    Stored("semaphore", "semaphore", "holds"),
    Stored("latch", "count-down latch", "latch", key_suffix=":latch"),
    Stored("barrier", "barrier", "round", key_suffix=":barrier"),
)
"""Every :class:`Stored` kind, in the order ``inspect`` documents them. ``"fair"`` is a
name with a waiter queue (a FairLock, or a Lock someone waits for: they share the queue);
a FairLock nobody waits for looks like a ``"lock"``. A name is shown as the first kind whose
key it has: the lock key's, else a latch, else a barrier's round."""


def stored(code: str) -> Stored:
    """The :class:`Stored` kind of ``code`` (``KeyError`` if none)."""
    for s in STORED:
        if s.code == code:
            return s
    raise KeyError(code)


@dataclass(frozen=True, slots=True)
class Part:
    """A holder that a non-holder kind hands out (a ReadWriteLock's sides, a Semaphore's
    permits).

    Attributes:
        name: its public class (sync; the asyncio class is ``"Async" + name``).
        method: the kind's method that returns it (``"read"``; ``"acquire"`` for a permit,
            which it returns once acquired).
        exclusive: one holder at a time (a read side is not).
        mode: the hold mode (``scripts/_hold.lua``) its holds are written with (``"r"``,
            ``"w"``, ``"p"``), or None.
        found: how a kind-conflict error names a name whose hash has a hold of this part
            (``"a ReadWriteLock's writer"``); empty for a part that writes no hold hash.
    """

    name: str
    method: str
    exclusive: bool = True
    mode: str | None = None
    found: str = ""


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One row of the kinds table: one public kind (a class in both flavours).

    Attributes:
        name: the public sync class (``"Lock"``); the asyncio class is :attr:`asyncio_name`.
        stored: what ``inspect`` calls a name of this kind (its :attr:`Stored.code`); a
            kind whose state is not at the lock key (a latch's count, a barrier's round)
            has a :class:`Stored` of its own with a ``key_suffix``, which a kind-conflict
            error never meets at a lock key.
        scripts: the scripts its objects run (``_core/scripts.py``'s names): its ACL
            profile has every command they run.
        commands: the commands it sends itself, besides its scripts (in capitals): the rest
            of its ACL profile.
        holder: its objects hold a lease themselves (a :class:`~redislock._handle.Holder`:
            acquire/release or enter/leave); False for a kind that hands out its holders
            (``parts``) or holds nothing (a latch).
        parts: the holders it hands out, if any.
        lock_api: its holds follow the common lock API (``acquire(blocking, timeout)``,
            ``release``, ``extend``, ``owned``, ``remaining``, ``with``): the generic
            behaviour tests (``tests/test_generic.py``) run over it and its parts.
        clients: ``"one"``: one client (a server, a Cluster, a Sentinel master);
            ``"masters"``: Redlock's independent masters.
        names: ``"one"`` lock name, or ``"several"`` taken all or nothing.
        hold_mode: the hold mode (``scripts/_hold.lua``) its own holds are written with (a
            holder on the hold hash), or None.
        article: ``"a"`` or ``"an"``, as a kind-conflict error says it (``"an RLock"``).
        torture: its ``redislock torture --scenario`` name, or None.
        uses: the kind whose lock it holds, for a row that is a use of another kind rather
            than a kind of its own (Election, Once: ``"Lock"``); None for a primitive.
            A kind-conflict error names the primitives, not their uses.
        module: the module that exports it.
    """

    name: str
    stored: StoredCode
    scripts: tuple[str, ...]
    commands: tuple[str, ...]
    holder: bool
    parts: tuple[Part, ...] = ()
    lock_api: bool = True
    clients: Literal["one", "masters"] = "one"
    names: Literal["one", "several"] = "one"
    hold_mode: str | None = None
    article: str = "a"
    torture: str | None = None
    uses: str | None = None
    module: str = "redislock"

    @property
    def acl_profile(self) -> str:
        """Its section of ``docs/acl.md`` (``### <acl_profile>``): its :attr:`name`."""
        return self.name

    @property
    def asyncio_name(self) -> str:
        """The public asyncio class (``"AsyncLock"``)."""
        return "Async" + self.name

    @property
    def a_name(self) -> str:
        """Its name with its article, as a kind-conflict error says it (``"an RLock"``)."""
        return f"{self.article} {self.name}"

    @property
    def shape(self) -> Shape:
        """What its key holds (its stored kind's :data:`Shape`)."""
        return stored(self.stored).shape

    @property
    def primitive(self) -> bool:
        """A lock kind of its own (not a use of another kind, nor a drop-in)."""
        return self.uses is None and self.module == "redislock"

    @property
    def queues(self) -> bool:
        """Its waiters queue in ``fair_acquire.lua``'s queue, each with a waiter lease (the
        ``waiter_lease`` option)."""
        return "fair_acquire" in self.scripts


_WAKES = ("EVALSHA", "EVAL", "SUBSCRIBE", "UNSUBSCRIBE")  # scripts and the wake-up channel
_SUBSCRIBES = (*_WAKES, "EXISTS")
_MASTER = ("EVALSHA", "EVAL", "EXISTS", "INFO")  # a Redlock master's
_HOLD_SCRIPTS = ("hold_extend", "hold_status", "hold_leave")
_WRITE_SCRIPTS = ("hold_acquire_write", "hold_reenter", "hold_release", *_HOLD_SCRIPTS)
_PERMIT_SCRIPTS = ("hold_acquire_permit", "hold_release_permit", "hold_count", *_HOLD_SCRIPTS)
_FAIR_SCRIPTS = ("fair_acquire", "fair_release", "fair_cancel")
"""The queue's scripts a Lock's or FairLock's objects run (``fair_force`` too: the operator's
force-release of their core)."""
_LEASE_SCRIPTS = (
    *_FAIR_SCRIPTS,
    "fair_force",
    "lock_extend",
    "lock_renew",
    "lock_status",
    "waiter_keep",
)
_MULTI_SCRIPTS = ("multi_acquire", "multi_release", "multi_extend", "multi_status")

KINDS: Final = (
    KindSpec(
        "Lock",
        stored="lock",
        scripts=_LEASE_SCRIPTS,
        commands=_SUBSCRIBES,
        holder=True,
        torture="lock",
    ),
    KindSpec(
        "RLock",
        stored="rlock",
        scripts=_WRITE_SCRIPTS,
        commands=_SUBSCRIBES,
        holder=True,
        hold_mode="w",
        article="an",
        torture="rlock",
    ),
    KindSpec(
        "ReadWriteLock",
        stored="rwlock",
        scripts=(*_WRITE_SCRIPTS, "hold_acquire_read"),
        commands=_SUBSCRIBES,
        holder=False,
        parts=(
            Part("WriteLock", "write", mode="w", found="a ReadWriteLock's writer"),
            Part(
                "ReadLock", "read", exclusive=False, mode="r", found="a ReadWriteLock (read holds)"
            ),
        ),
        torture="rwlock",
    ),
    KindSpec(
        "Semaphore",
        stored="semaphore",
        scripts=_PERMIT_SCRIPTS,
        commands=(*_SUBSCRIBES, "SET", "DEL"),  # set_permits
        holder=False,
        parts=(Part("Permit", "acquire", mode="p", found="a Semaphore"),),
        torture="semaphore",
    ),
    KindSpec(
        "FairLock",
        stored="fair",
        scripts=_LEASE_SCRIPTS,
        commands=_SUBSCRIBES,
        holder=True,
        torture="fairlock",
    ),
    KindSpec(
        "MultiLock",
        stored="lock",
        scripts=_MULTI_SCRIPTS,
        commands=_SUBSCRIBES,
        holder=True,
        names="several",
        torture="multilock",
    ),
    KindSpec(
        "Redlock",
        stored="lock",
        scripts=("lock_acquire", "lock_release", "lock_extend", "lock_status", "redlock_fence"),
        commands=_MASTER,
        holder=True,
        clients="masters",
        torture="redlock",
    ),
    KindSpec(
        "MultiRedlock",
        stored="lock",
        scripts=(*_MULTI_SCRIPTS, "redlock_fence"),
        commands=_MASTER,
        holder=True,
        clients="masters",
        names="several",
        torture="multiredlock",
    ),
    KindSpec(
        "Election",
        stored="lock",
        scripts=(
            *_FAIR_SCRIPTS,
            "lock_extend",
            "lock_status",
            "waiter_keep",
            "election_advertise",
            "election_keep",
            "election_clear",
            "election_read",
        ),
        commands=_WAKES,
        holder=True,
        lock_api=False,
        torture="election",
        uses="Lock",
    ),
    KindSpec(
        "Once",
        stored="lock",
        scripts=(*_LEASE_SCRIPTS, "once_record"),
        commands=(*_SUBSCRIBES, "GET"),  # GET: the period's record, before the lock
        holder=False,
        lock_api=False,
        torture="once",
        uses="Lock",
    ),
    KindSpec(
        "RedisPyLock",
        stored="lock",  # its lock key is the name itself, not <prefix>{<name>}
        scripts=("compat_acquire", "compat_release", "lock_extend"),
        commands=("EVALSHA", "EVAL", "GET"),  # owned(), locked(): redis-py's own GET
        holder=True,
        lock_api=False,
        module="redislock.compat",
    ),
    KindSpec(
        "CountDownLatch",
        stored="latch",  # <prefix>{<name>}:latch, a hash: not the lock key
        scripts=("latch_set", "latch_down", "latch_read"),
        commands=_WAKES,
        holder=False,
        lock_api=False,
    ),
    KindSpec(
        "Barrier",
        stored="barrier",  # <prefix>{<name>}:barrier and :members: not the lock key
        scripts=(
            "barrier_enter",
            "barrier_check",
            "barrier_renew",
            "barrier_leave",
            "barrier_left",
            "barrier_read",
        ),
        commands=_WAKES,
        holder=False,  # each object is one party, a lease the watchdog renews, but no Holder
        lock_api=False,
    ),
)
"""Every public kind, one row each; the order is the order each place lists them in
(torture scenarios, the generic tests, the kinds a conflict error names)."""


def by_name(name: str) -> KindSpec:
    """The row of public class ``name``, sync or asyncio (``KeyError`` if none)."""
    plain = name.removeprefix("Async")
    for row in KINDS:
        if row.name == plain:
            return row
    raise KeyError(name)


def metrics_labels() -> frozenset[str]:
    """The ``redislock.kind`` values of the metrics: every row's class and the holders it
    hands out, by their sync names."""
    return frozenset({row.name for row in KINDS} | {p.name for row in KINDS for p in row.parts})


def _either(names: list[str]) -> str:
    """``"A"``, ``"A or B"``, ``"A, B or C"``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def conflict_found(key_type: str) -> str | None:
    """The primitives that keep a ``key_type`` at the lock key, for a kind-conflict error,
    with the first one's article (``"a Lock, FairLock, MultiLock, Redlock or
    MultiRedlock"``); None if none does."""
    rows = [
        r
        for r in KINDS
        if r.primitive and stored(r.stored).at_lock_key and stored(r.stored).key_type == key_type
    ]
    return f"{rows[0].article} {_either([r.name for r in rows])}" if rows else None


def conflict_wanted(script: str) -> str:
    """The kinds that run ``script`` on one client, for a kind-conflict error (the
    single-client driver raises it; a Redlock master's failure counts as that master's):
    those that are kinds of their own, else the uses that run it (``election``: Election).
    A script no such row runs (Redlock's own) names the primitives that keep a lease."""
    runs = [r for r in KINDS if script in r.scripts and r.clients == "one"]
    names = [r.name for r in runs if r.uses is None] or [r.name for r in runs]
    if names:
        return _either(names)
    return _either([r.name for r in KINDS if r.primitive and r.shape == "lease"])


def hold_mode_found() -> dict[str, str]:
    """A hold mode (``scripts/_hold.lua``) -> how a kind-conflict error names a hash with a
    hold of that mode (``"w"``: ``"an RLock or a ReadWriteLock's writer"``)."""
    texts: dict[str, list[str]] = {}
    for row in KINDS:
        if row.hold_mode is not None:
            texts.setdefault(row.hold_mode, []).append(row.a_name)
        for part in row.parts:
            if part.mode is not None:
                texts.setdefault(part.mode, []).append(part.found)
    return {mode: " or ".join(found) for mode, found in texts.items()}
