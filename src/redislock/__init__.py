# SPDX-License-Identifier: MIT
"""redislock: distributed locks on Redis with leases, fencing tokens and loss detection.

Public surface, each kind in a sync and an asyncio flavour with the same API:
:class:`Lock` / :class:`AsyncLock` (mutex), :class:`RLock` / :class:`AsyncRLock`
(reentrant per thread / task), :class:`ReadWriteLock` / :class:`AsyncReadWriteLock`,
:class:`FairLock` / :class:`AsyncFairLock` (FIFO hand-off), :class:`Semaphore` /
:class:`AsyncSemaphore` (permits with leases), :class:`MultiLock` /
:class:`AsyncMultiLock` (several names, all or nothing), :class:`Redlock` /
:class:`AsyncRedlock` (a majority of N independent masters), :class:`MultiRedlock` /
:class:`AsyncMultiRedlock` (several names over N masters), :class:`Once` / :class:`AsyncOnce`
(a job exactly once per period), :class:`CountDownLatch` / :class:`AsyncCountDownLatch`
(wait until N parties counted down), :class:`Barrier` / :class:`AsyncBarrier` (N parties
enter and leave together); the statistics snapshot, and the
exception tree of :mod:`redislock.errors`; :class:`Guard` / :class:`AsyncGuard` (what a holder's
``guard()`` returns); :func:`inspect` / :func:`ainspect` tell who holds a
name (a :class:`LockInfo`).
"""

from redislock._core.election import LeaderInfo as LeaderInfo
from redislock._core.lock import LockStatistics as LockStatistics
from redislock._core.once import OnceRecord as OnceRecord
from redislock._version import __version__ as __version__
from redislock.aio._guard import AsyncGuard as AsyncGuard
from redislock.aio.barrier import AsyncBarrier as AsyncBarrier
from redislock.aio.election import AsyncElection as AsyncElection
from redislock.aio.fair import AsyncFairLock as AsyncFairLock
from redislock.aio.latch import AsyncCountDownLatch as AsyncCountDownLatch
from redislock.aio.lock import AsyncLock as AsyncLock
from redislock.aio.multi import AsyncMultiLock as AsyncMultiLock
from redislock.aio.multiredlock import AsyncMultiRedlock as AsyncMultiRedlock
from redislock.aio.once import AsyncOnce as AsyncOnce
from redislock.aio.once import AsyncOnceTurn as AsyncOnceTurn
from redislock.aio.redlock import AsyncRedlock as AsyncRedlock
from redislock.aio.rlock import AsyncReadLock as AsyncReadLock
from redislock.aio.rlock import AsyncReadWriteLock as AsyncReadWriteLock
from redislock.aio.rlock import AsyncRLock as AsyncRLock
from redislock.aio.rlock import AsyncWriteLock as AsyncWriteLock
from redislock.aio.semaphore import AsyncPermit as AsyncPermit
from redislock.aio.semaphore import AsyncSemaphore as AsyncSemaphore
from redislock.decorators import locked as locked
from redislock.errors import AcquireTimeoutError as AcquireTimeoutError
from redislock.errors import KindConflictError as KindConflictError
from redislock.errors import LockConfigError as LockConfigError
from redislock.errors import LockLostError as LockLostError
from redislock.errors import LockUpgradeError as LockUpgradeError
from redislock.errors import LockUsageError as LockUsageError
from redislock.errors import LongLeaseWarning as LongLeaseWarning
from redislock.errors import NoPermissionError as NoPermissionError
from redislock.errors import NotOwnedError as NotOwnedError
from redislock.errors import QueueFullError as QueueFullError
from redislock.errors import QuorumError as QuorumError
from redislock.errors import RedisLockError as RedisLockError
from redislock.errors import ReplicationError as ReplicationError
from redislock.errors import ServerError as ServerError
from redislock.errors import ServerNotFoundError as ServerNotFoundError
from redislock.errors import UnexpectedReplyError as UnexpectedReplyError
from redislock.inspection import BarrierInfo as BarrierInfo
from redislock.inspection import HoldInfo as HoldInfo
from redislock.inspection import LatchInfo as LatchInfo
from redislock.inspection import LockInfo as LockInfo
from redislock.inspection import PermitsInfo as PermitsInfo
from redislock.inspection import WaiterInfo as WaiterInfo
from redislock.inspection import ainspect as ainspect
from redislock.inspection import inspect as inspect
from redislock.sync._guard import Guard as Guard
from redislock.sync.barrier import Barrier as Barrier
from redislock.sync.election import Election as Election
from redislock.sync.fair import FairLock as FairLock
from redislock.sync.latch import CountDownLatch as CountDownLatch
from redislock.sync.lock import Lock as Lock
from redislock.sync.multi import MultiLock as MultiLock
from redislock.sync.multiredlock import MultiRedlock as MultiRedlock
from redislock.sync.once import Once as Once
from redislock.sync.once import OnceTurn as OnceTurn
from redislock.sync.redlock import Redlock as Redlock
from redislock.sync.rlock import ReadLock as ReadLock
from redislock.sync.rlock import ReadWriteLock as ReadWriteLock
from redislock.sync.rlock import RLock as RLock
from redislock.sync.rlock import WriteLock as WriteLock
from redislock.sync.semaphore import Permit as Permit
from redislock.sync.semaphore import Semaphore as Semaphore

__all__ = [
    "AcquireTimeoutError",
    "AsyncBarrier",
    "AsyncCountDownLatch",
    "AsyncElection",
    "AsyncFairLock",
    "AsyncGuard",
    "AsyncLock",
    "AsyncMultiLock",
    "AsyncMultiRedlock",
    "AsyncOnce",
    "AsyncOnceTurn",
    "AsyncPermit",
    "AsyncRLock",
    "AsyncReadLock",
    "AsyncReadWriteLock",
    "AsyncRedlock",
    "AsyncSemaphore",
    "AsyncWriteLock",
    "Barrier",
    "BarrierInfo",
    "CountDownLatch",
    "Election",
    "FairLock",
    "Guard",
    "HoldInfo",
    "KindConflictError",
    "LatchInfo",
    "LeaderInfo",
    "Lock",
    "LockConfigError",
    "LockInfo",
    "LockLostError",
    "LockStatistics",
    "LockUpgradeError",
    "LockUsageError",
    "LongLeaseWarning",
    "MultiLock",
    "MultiRedlock",
    "NoPermissionError",
    "NotOwnedError",
    "Once",
    "OnceRecord",
    "OnceTurn",
    "Permit",
    "PermitsInfo",
    "QueueFullError",
    "QuorumError",
    "RLock",
    "ReadLock",
    "ReadWriteLock",
    "RedisLockError",
    "Redlock",
    "ReplicationError",
    "Semaphore",
    "ServerError",
    "ServerNotFoundError",
    "UnexpectedReplyError",
    "WaiterInfo",
    "WriteLock",
    "__version__",
    "ainspect",
    "inspect",
    "locked",
]

# Every export but __version__ claims the package as its module (help(), repr, pickle by
# the public name): read from __all__, so a new export cannot be left out.
for _name in __all__:
    if _name != "__version__":
        globals()[_name].__module__ = "redislock"
del _name
