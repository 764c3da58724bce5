# SPDX-License-Identifier: MIT
"""redislock: distributed locks on Redis with leases, fencing tokens and loss detection.

Public surface: :class:`Lock` (sync) and :class:`AsyncLock` (asyncio), their statistics
snapshot, and the exception tree of :mod:`redislock.errors`.
"""

from redislock._core.lock import LockStatistics as LockStatistics
from redislock._version import __version__ as __version__
from redislock.aio.lock import AsyncLock as AsyncLock
from redislock.errors import AcquireTimeoutError as AcquireTimeoutError
from redislock.errors import LockConfigError as LockConfigError
from redislock.errors import LockLostError as LockLostError
from redislock.errors import LockUsageError as LockUsageError
from redislock.errors import NotOwnedError as NotOwnedError
from redislock.errors import RedisLockError as RedisLockError
from redislock.errors import UnexpectedReplyError as UnexpectedReplyError
from redislock.sync.lock import Lock as Lock

__all__ = [
    "AcquireTimeoutError",
    "AsyncLock",
    "Lock",
    "LockConfigError",
    "LockLostError",
    "LockStatistics",
    "LockUsageError",
    "NotOwnedError",
    "RedisLockError",
    "UnexpectedReplyError",
    "__version__",
]

for _obj in (
    AcquireTimeoutError,
    AsyncLock,
    Lock,
    LockConfigError,
    LockLostError,
    LockStatistics,
    LockUsageError,
    NotOwnedError,
    RedisLockError,
    UnexpectedReplyError,
):
    _obj.__module__ = "redislock"
del _obj
