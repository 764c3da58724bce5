# SPDX-License-Identifier: MIT
"""Every exception redislock raises.

::

    RedisLockError                          root; never raised itself
    ├── LockConfigError (ValueError)        invalid argument, raised before any network I/O
    ├── AcquireTimeoutError (TimeoutError)  gave up waiting for the lock
    ├── NotOwnedError                       release/extend of a lock this object does not hold
    │   └── LockLostError                   the lease ran out or was taken while we held it
    ├── LockUsageError (RuntimeError)       lifecycle misuse, e.g. acquire while held
    │   └── LockUpgradeError                read -> write upgrade (would deadlock)
    ├── QueueFullError                      a FairLock's waiter queue is at its bound
    ├── QuorumError                         Redlock: masters failed (not busy), no majority
    ├── ReplicationError                    replicas=k: fewer replicas acknowledged a write
    ├── UnexpectedReplyError                a reply or key state this version does not know
    ├── NoPermissionError                   an ACL refused a command (redis-py's class too)
    ├── KindConflictError                   a name used by two kinds (WRONGTYPE)
    └── ServerError                         a redis-server process (redislock.server) failed
        └── ServerNotFoundError             no redis-server binary was found

    LongLeaseWarning (UserWarning)          a lease or TTL over an hour: milliseconds meant?

Errors from redis-py (``redis.exceptions.RedisError``: connection refused, timeouts,
``READONLY``, ``OOM``) pass through unwrapped; an ACL refusal becomes
:class:`NoPermissionError` and a ``WRONGTYPE`` on a lock key :class:`KindConflictError`,
both still instances of the redis-py class callers caught before. None is ever turned into
"lock busy" or "not acquired".

With a valkey-py client (``valkey.Valkey``...), the client's own errors are valkey-py's
(``valkey.exceptions.ValkeyError`` and its subclasses), which are not redis-py's classes;
redislock's typed errors stay subclasses of redis-py's (redis-py is always installed), so
catch :class:`NoPermissionError` and :class:`KindConflictError` by redislock's class (or
:class:`RedisLockError`), not by valkey-py's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from redis.exceptions import NoPermissionError as _RedisNoPermissionError
from redis.exceptions import ResponseError as _RedisResponseError

__all__ = [
    "AcquireTimeoutError",
    "KindConflictError",
    "LockConfigError",
    "LockLostError",
    "LockUpgradeError",
    "LockUsageError",
    "LongLeaseWarning",
    "NoPermissionError",
    "NotOwnedError",
    "QueueFullError",
    "QuorumError",
    "RedisLockError",
    "ReplicationError",
    "ServerError",
    "ServerNotFoundError",
    "UnexpectedReplyError",
]


class RedisLockError(Exception):
    """Root of every exception this package raises."""

    _fields: ClassVar[tuple[str, ...]] = ()
    """The attributes a subclass's ``__init__`` takes, in its order: what it is pickled as
    (an exception is otherwise pickled as its class called with its message alone)."""

    def __reduce__(self) -> str | tuple[Any, ...]:
        if not self._fields:
            return super().__reduce__()
        return (type(self), tuple(getattr(self, f) for f in self._fields))


class LockConfigError(RedisLockError, ValueError):
    """An argument is invalid (bad duration, bad name, wrong client type).

    Raised by constructors and methods before any network I/O, so nothing is left in Redis.
    """


class AcquireTimeoutError(RedisLockError, TimeoutError):
    """Waiting for the lock took longer than the allowed timeout.

    Attributes:
        name: the lock name.
        waited: how long the caller waited, in seconds.
    """

    _fields = ("name", "waited")

    def __init__(self, name: str, waited: float) -> None:
        super().__init__(f"timed out after {waited:.3f} s waiting for lock {name!r}")
        self.name = name
        self.waited = waited


class NotOwnedError(RedisLockError):
    """The lock is not held by this object (never acquired, released, expired or taken over).

    Attributes:
        name: the lock name.
    """

    _fields = ("name", "reason")

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"lock {name!r} is not owned by this object: {reason}")
        self.name = name
        self.reason = reason


class LockLostError(NotOwnedError):
    """The lease was lost while this object believed it held the lock.

    The key expired, was deleted or was taken by another holder, or Redis could not be
    reached to renew it before the local lease estimate ran out. Whatever the critical
    section did after that point may have overlapped with another holder: this is what
    fencing tokens are for.
    """


class LockUsageError(RedisLockError, RuntimeError):
    """The lock object was used in a way its life cycle does not allow.

    For example acquiring a ``Lock`` object that already holds the lock (it is not
    reentrant), or using in a forked child a lock acquired by the parent.
    """


class LockUpgradeError(LockUsageError):
    """A holder of a read lock asked for the write lock of the same ReadWriteLock.

    Raised at once, before any I/O: two readers upgrading at the same time would each wait
    for the other forever. Release the read hold first, or take the write lock from the
    start (a writer may take a read hold and then release the write: a downgrade).
    """


class QueueFullError(RedisLockError):
    """A FairLock's waiter queue already holds its maximum number of waiters.

    Attributes:
        name: the lock name.
        length: the queue length Redis reported.
    """

    _fields = ("name", "length")

    def __init__(self, name: str, length: int) -> None:
        super().__init__(f"the waiter queue of lock {name!r} is full ({length} waiters)")
        self.name = name
        self.length = length


class QuorumError(RedisLockError):
    """A quorum operation (Redlock, a MultiLock over Redlock masters) failed because masters
    failed or answered too late, not because the lock was busy.

    Raised instead of returning False: a majority that could not be reached is an outage,
    not contention. Every node's outcome is attached.

    Attributes:
        name: the lock name (or names, joined with ", ").
        operation: "acquire", "extend" or "release".
        needed: how many masters had to agree (``N // 2 + 1``).
        outcomes: one entry per master, in the order given: its label (``host:port`` or
            socket path) mapped to "ok", "busy", "gone", "taken", "late" (answered after the
            validity time or node timeout), "held" / "free" (``locked()``) or
            "error: <type>: <message>".
    """

    _fields = ("name", "operation", "needed", "outcomes")

    def __init__(self, name: str, operation: str, needed: int, outcomes: dict[str, str]) -> None:
        ok = sum(1 for v in outcomes.values() if v == "ok")
        detail = "; ".join(f"{k}: {v}" for k, v in outcomes.items())
        super().__init__(
            f"{operation} of lock {name!r} reached {ok} of {len(outcomes)} masters, "
            f"{needed} needed ({detail})"
        )
        self.name = name
        self.operation = operation
        self.needed = needed
        self.outcomes = dict(outcomes)


class ReplicationError(RedisLockError):
    """Fewer replicas than ``replicas=k`` acknowledged a lock write within the wait limit.

    Raised by acquire after the write was undone (the lock is not held), and by extend
    (the lease was extended on the master only; the watchdog counts it as a failed renewal).
    ``WAIT`` narrows the failover window; it does not make Redis replication synchronous.

    Attributes:
        name: the lock name.
        operation: "acquire" or "extend".
        wanted: the ``replicas`` setting.
        acknowledged: how many replicas acknowledged within the limit.
    """

    _fields = ("name", "operation", "wanted", "acknowledged")

    def __init__(self, name: str, operation: str, wanted: int, acknowledged: int) -> None:
        super().__init__(
            f"{operation} of lock {name!r}: {acknowledged} of {wanted} replicas acknowledged "
            "the write in time"
        )
        self.name = name
        self.operation = operation
        self.wanted = wanted
        self.acknowledged = acknowledged


class UnexpectedReplyError(RedisLockError):
    """Redis returned a reply or key state this version of redislock does not understand.

    Also raised when a lock key exists without a TTL: something other than redislock
    wrote it, and waiting for it would wait forever.
    """


class NoPermissionError(RedisLockError, _RedisNoPermissionError):
    """The Redis user may not run a command a lock operation needs (ACL, ``NOPERM``).

    Also a ``redis.exceptions.NoPermissionError`` (with a valkey-py client too: catch this
    class, or :class:`RedisLockError`, never ``valkey.exceptions.NoPermissionError``,
    which it is not). The scripts refuse before they write
    anything that would be left half-done, so after this error the holder still holds what
    it held (a failed release keeps the hold; a failed acquire holds nothing). The ACL
    profile each kind needs is in ``docs/acl.md``.

    Attributes:
        command: the refused command in capitals (e.g. ``"PEXPIRE"``), or None when Redis
            did not say (a script on a server older than this version's scripts).
    """

    def __init__(self, message: str, command: str | None = None) -> None:
        super().__init__(message)
        self.command = command

    def __reduce__(self) -> tuple[type[NoPermissionError], tuple[str, str | None]]:
        return (type(self), (str(self), self.command))


class KindConflictError(RedisLockError, _RedisResponseError):
    """One lock name is used by two kinds whose keys cannot be shared (Redis ``WRONGTYPE``).

    A ``Lock``, ``FairLock``, ``MultiLock``, ``Redlock`` or ``MultiRedlock`` stores a string
    at the lock key; an ``RLock``, ``ReadWriteLock`` or ``Semaphore`` stores a hash. Also a
    ``redis.exceptions.ResponseError`` whose message starts with ``WRONGTYPE`` (with a
    valkey-py client too: catch this class or :class:`RedisLockError`; it is not a
    ``valkey.exceptions.ResponseError``). Nothing was written. Use another name or another
    ``prefix`` for one of them.

    Attributes:
        name: the lock name (None if the key is not a redislock lock key).
        key: the lock key that holds the other kind.
        wanted: the kinds that were asked for, e.g. ``"Lock or FairLock"``.
        found: what the key holds, e.g. ``"a Semaphore"``.
    """

    _fields = ("name", "key", "wanted", "found")

    def __init__(self, name: str | None, key: str, wanted: str, found: str) -> None:
        what = f"lock name {name!r}" if name is not None else f"key {key!r}"
        super().__init__(
            f"WRONGTYPE {what} is already used by {found}; a {wanted} cannot share it "
            "(one name serves one kind: use another name or prefix)"
        )
        self.name = name
        self.key = key
        self.wanted = wanted
        self.found = found


class ServerError(RedisLockError):
    """A ``redis-server`` process could not be found, started, reached or stopped.

    Raised by :mod:`redislock.server` (the test and CLI helpers that run ``redis-server``),
    never by the locks. The message includes the tail of the server's log when there is one.
    """


class ServerNotFoundError(ServerError):
    """No usable ``redis-server`` binary was found.

    The message says what to install, or how to use an existing server instead.
    """


class LongLeaseWarning(UserWarning):
    """A lease or TTL over one hour was given (``ttl=``, ``watchdog_lease=``, ``extend()``).

    redislock takes every duration in seconds; ``ttl=5000`` is an 83-minute lease, which is
    usually a milliseconds habit (redis-py's ``PX``, Redisson's ``leaseTime``). The value is
    used as given. A program that means hours silences it with
    ``warnings.filterwarnings("ignore", category=redislock.LongLeaseWarning)``.
    """
