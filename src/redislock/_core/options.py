# SPDX-License-Identifier: MIT
"""The options of every lock kind: their keyword types, their defaults and their checks, in
one place. No I/O.

A public constructor takes its options as keywords typed by one of the ``*Kwargs``
:class:`~typing.TypedDict` classes below (PEP 692: ``**options: Unpack[LockKwargs]``), and
builds the matching frozen options object, which validates every value when it is made
(raising :class:`~redislock.errors.LockConfigError` before any I/O). The cores take their
settings from that object. :func:`signature` writes the keyword signature out for
``help()`` and :func:`inspect.signature`.

To add an option: a field (with its default) on the options class, the same name and type
on its ``*Kwargs`` class, and its check in ``__post_init__``; tests/test_options.py holds
the two lists equal.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Final, Generic, TypedDict, TypeVar, cast

from redislock._core import validate
from redislock._core.keys import DEFAULT_PREFIX
from redislock.errors import LockConfigError

__all__ = [
    "DEFAULT_DRIFT_FACTOR",
    "DEFAULT_QUEUE_MAX",
    "DEFAULT_RECHECK",
    "DEFAULT_REPLICA_TIMEOUT",
    "DEFAULT_RETRY_DELAY",
    "DEFAULT_WAITER_LEASE",
    "DEFAULT_WATCHDOG_LEASE",
    "FairKwargs",
    "FairOptions",
    "LeaseKwargs",
    "LockKwargs",
    "LockOptions",
    "MultiKwargs",
    "MultiOptions",
    "QuorumKwargs",
    "QuorumOptions",
    "signature",
]

DEFAULT_WATCHDOG_LEASE: Final = 30.0
"""Lease length, in seconds, when ``ttl=None`` (renewed by the watchdog)."""

DEFAULT_RECHECK: Final = 0.5
"""Longest a waiter blocks between two tries, in seconds, should a wake-up be lost."""

DEFAULT_REPLICA_TIMEOUT: Final = 1.0
"""Seconds ``WAIT`` may take when ``replicas`` > 0."""

DEFAULT_WAITER_LEASE: Final = 1.0
"""Seconds a FairLock waiter stays queued without renewing (it renews every third of this)."""

DEFAULT_QUEUE_MAX: Final = 10_000
"""Most waiters one FairLock queues; one more gets :class:`~redislock.QueueFullError`."""

DEFAULT_DRIFT_FACTOR: Final = 0.01
"""Redlock's clock drift allowance as a fraction of the lease (the Redis docs' value)."""

DEFAULT_RETRY_DELAY: Final = 0.2
"""Longest random pause, in seconds, between two tries of a blocking Redlock acquire."""

_DRIFT_FLOOR: Final = 0.002
"""Seconds added to Redlock's drift allowance (the Redis docs' "plus 2 milliseconds")."""

_MIN_WAITER_LEASE: Final = 0.05


# ---------------------------------------------------------------------------- keywords


HandleT = TypeVar("HandleT")
"""What ``on_lost`` receives: the lock object itself (``Unpack[LockKwargs[Self]]``), or for
a ReadWriteLock the side and for a Semaphore the permit that lost its lease."""


class LeaseKwargs(TypedDict, Generic[HandleT], total=False):
    """The keyword options every kind takes (the lease, the wait, the keys)."""

    ttl: float | None
    on_lost: Callable[[HandleT], object] | None
    timeout: float | None
    watchdog_lease: float
    renew_interval: float | None
    max_lease: float | None
    prefix: str


class MultiKwargs(LeaseKwargs[HandleT], total=False):
    """The keyword options of :class:`~redislock.MultiLock` (and the base of the others)."""

    recheck_interval: float


class LockKwargs(MultiKwargs[HandleT], total=False):
    """The keyword options of :class:`~redislock.Lock`, ``RLock``, ``ReadWriteLock`` and
    ``Semaphore``."""

    replicas: int
    replica_timeout: float
    lock_delay: float


class FairKwargs(LockKwargs[HandleT], total=False):
    """The keyword options of :class:`~redislock.FairLock`."""

    waiter_lease: float
    queue_max: int


class QuorumKwargs(LeaseKwargs[HandleT], total=False):
    """The keyword options of :class:`~redislock.Redlock` and ``MultiRedlock``."""

    node_timeout: float | None
    drift_factor: float
    retry_delay: float
    fencing: bool


# ---------------------------------------------------------------------------- options


@functools.lru_cache(maxsize=256, typed=True)  # typed: True and 1 are different keys
def _timing(
    ttl: Any,
    watchdog_lease: Any,
    renew_interval: Any,
    max_lease: Any,
    timeout: Any,
    recheck_interval: Any,
) -> tuple[float | None, float, float, float | None, float | None, float]:
    """The validated timing ``(ttl, lease, renew_interval, max_lease, timeout, recheck)`` in
    seconds (cached: most programs build many locks with the same settings)."""
    fixed = validate.check_optional_duration("ttl", ttl)
    watchdog = validate.check_duration("watchdog_lease", watchdog_lease)
    lease = fixed if fixed is not None else watchdog
    if renew_interval is None:
        interval = lease / 3.0
    else:
        interval = validate.check_duration("renew_interval", renew_interval)
        if interval >= lease:
            raise LockConfigError(
                f"renew_interval ({interval} s) must be shorter than the lease ({lease} s)"
            )
        if interval > lease / 2.0:
            raise LockConfigError(
                f"renew_interval ({interval} s) must be at most half the lease "
                f"({lease} s), or one failed renewal loses the lock"
            )
    if fixed is not None and renew_interval is not None:
        raise LockConfigError("renew_interval applies to watchdog leases (ttl=None) only")
    cap = validate.check_optional_duration("max_lease", max_lease)
    if cap is not None and cap < lease:
        raise LockConfigError(f"max_lease ({cap} s) must be >= the lease ({lease} s)")
    if cap is not None and fixed is not None:
        raise LockConfigError("max_lease applies to watchdog leases (ttl=None) only")
    wait = validate.check_timeout("timeout", timeout)
    recheck = validate.check_duration("recheck_interval", recheck_interval)
    return fixed, lease, interval, cap, wait, recheck


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiOptions:
    """The validated options of one lock object (frozen; every duration in seconds).

    Made from the constructor's keywords; ``__post_init__`` checks every value and replaces
    it by its normal form (floats for durations, the resolved ``renew_interval``).

    Raises:
        LockConfigError: a value is out of range or of the wrong type.
    """

    ttl: float | None = None
    on_lost: Callable[[Any], object] | None = None
    timeout: float | None = None
    watchdog_lease: float = DEFAULT_WATCHDOG_LEASE
    renew_interval: float | None = None
    max_lease: float | None = None
    recheck_interval: float = DEFAULT_RECHECK
    prefix: str = DEFAULT_PREFIX
    lease: float = field(init=False, default=0.0)
    """The lease in seconds: ``ttl``, or ``watchdog_lease`` when ``ttl`` is None."""
    lease_ms: int = field(init=False, default=0)
    """The lease in milliseconds (as the scripts take it)."""
    marker_ms: int = field(init=False, default=0)
    """Milliseconds a waiter's "somebody waits" marker lives: ``recheck_interval`` + 1 s."""

    kwargs: ClassVar[type] = MultiKwargs
    """The keywords a constructor with these options takes (for its signature)."""

    def __post_init__(self) -> None:
        prefix = validate.check_prefix(self.prefix)
        if self.on_lost is not None and not callable(self.on_lost):
            raise LockConfigError(f"on_lost must be callable, got {self.on_lost!r}")
        raw = (
            self.ttl,
            self.watchdog_lease,
            self.renew_interval,
            self.max_lease,
            self.timeout,
            self.recheck_interval,
        )
        try:
            timing = _timing(*raw)
        except TypeError:  # an unhashable argument: validate it uncached (and reject it)
            timing = _timing.__wrapped__(*raw)
        ttl, lease, interval, cap, wait, recheck = timing
        put = object.__setattr__
        put(self, "prefix", prefix)
        put(self, "ttl", ttl)
        put(self, "lease", lease)
        put(self, "renew_interval", interval)
        put(self, "max_lease", cap)
        put(self, "timeout", wait)
        put(self, "recheck_interval", recheck)
        put(self, "lease_ms", validate.to_ms(lease))
        put(self, "marker_ms", validate.to_ms(recheck + 1.0))
        put(self, "watchdog_lease", float(self.watchdog_lease))  # checked by _timing

    @classmethod
    def check_keywords(cls, owner: str, given: Mapping[str, Any]) -> None:
        """Reject a keyword that constructor ``owner`` does not take.

        Raises:
            TypeError: an unknown keyword (as Python's own message).
        """
        allowed = cls.kwargs.__annotations__
        for key in given:
            if key not in allowed:
                raise TypeError(f"{owner}() got an unexpected keyword argument {key!r}")

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> Any:
        """The options for the ``given`` keywords (checked by :meth:`check_keywords`),
        shared between constructors with equal hashable keywords and no ``on_lost``: they
        are frozen.

        Warns:
            LongLeaseWarning: the lease is over an hour (each time: the cache is not asked).

        Raises:
            LockConfigError: a value is out of range or of the wrong type.
        """
        options: MultiOptions | None = None
        if given.get("on_lost") is None:
            try:
                options = _cached(
                    cast(Any, cls), tuple(given.items()), tuple(map(type, given.values()))
                )
            except TypeError as exc:  # an unhashable value: build uncached (and reject it)
                if "unhashable" not in str(exc):
                    raise
        if options is None:
            options = cls(**given)
        if options.lease > validate.LONG_LEASE:  # the common case pays one comparison
            what = "ttl" if options.ttl is not None else "watchdog_lease"
            validate.warn_long_lease(what, options.lease)
        return options


@functools.lru_cache(maxsize=256)
def _cached(cls: Any, items: tuple[tuple[str, Any], ...], types: tuple[type, ...]) -> Any:
    """Options without a callback (a cached callback would keep its object alive). The
    values' ``types`` are part of the key: ``True == 1``, but ``ttl=True`` is an error."""
    return cls(**dict(items))


@dataclass(frozen=True, slots=True, kw_only=True)
class LockOptions(MultiOptions):
    """:class:`MultiOptions` plus replication: ``replicas`` (an int >= 0) that must
    acknowledge each lock write within ``replica_timeout`` seconds; and ``lock_delay``
    (seconds, >= 0, default 0: off) during which the name cannot be taken again after a hold
    that ended without a release (Lock and FairLock only; the other kinds raise
    :class:`~redislock.errors.LockConfigError` for a delay above 0)."""

    replicas: int = 0
    replica_timeout: float = DEFAULT_REPLICA_TIMEOUT
    lock_delay: float = 0.0
    replica_timeout_ms: int = field(init=False, default=0)
    """``replica_timeout`` in milliseconds (WAIT takes them)."""
    lock_delay_ms: int = field(init=False, default=0)
    """``lock_delay`` in milliseconds; 0: off."""

    kwargs: ClassVar[type] = LockKwargs

    def __post_init__(self) -> None:
        MultiOptions.__post_init__(self)
        replicas = validate.check_replicas(self.replicas)
        wait = validate.check_duration("replica_timeout", self.replica_timeout)
        if replicas and wait > self.lease / 2.0:
            raise LockConfigError(
                f"replica_timeout ({wait} s) must be at most half the lease ({self.lease} s), "
                "or one slow acknowledgement would use up the time left to renew"
            )
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "replica_timeout", wait)
        object.__setattr__(self, "replica_timeout_ms", validate.to_ms(wait))
        delay = validate.check_delay("lock_delay", self.lock_delay)
        object.__setattr__(self, "lock_delay", delay)
        object.__setattr__(self, "lock_delay_ms", validate.to_ms(delay) if delay else 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class FairOptions(LockOptions):
    """:class:`LockOptions` plus the queue's: ``waiter_lease`` (seconds a queued waiter
    stays without renewing, >= 0.05) and ``queue_max`` (most waiters, an int >= 1)."""

    waiter_lease: float = DEFAULT_WAITER_LEASE
    queue_max: int = DEFAULT_QUEUE_MAX

    kwargs: ClassVar[type] = FairKwargs

    def __post_init__(self) -> None:
        LockOptions.__post_init__(self)
        lease = validate.check_duration("waiter_lease", self.waiter_lease)
        if lease < _MIN_WAITER_LEASE:
            raise LockConfigError(f"waiter_lease must be at least 0.05 s, got {lease}")
        limit: object = self.queue_max
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise LockConfigError(f"queue_max must be an int >= 1, got {limit!r}")
        object.__setattr__(self, "waiter_lease", lease)


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumOptions(MultiOptions):
    """:class:`MultiOptions` plus Redlock's: ``node_timeout`` (seconds per round, default a
    tenth of the lease, at most 1 s; at most a third of the lease), ``drift_factor`` (a
    fraction of the lease in [0, 0.5)), ``retry_delay`` (seconds) and ``fencing``.
    Source: the Redis docs' distributed-locks page ("The Redlock Algorithm")."""

    node_timeout: float | None = None
    drift_factor: float = DEFAULT_DRIFT_FACTOR
    retry_delay: float = DEFAULT_RETRY_DELAY
    fencing: bool = True
    drift: float = field(init=False, default=0.0)
    """Seconds of clock drift allowed: ``lease * drift_factor`` plus 2 ms."""

    kwargs: ClassVar[type] = QuorumKwargs

    def __post_init__(self) -> None:
        # Redlock's own arguments are checked first, as before this options type existed.
        if not isinstance(self.fencing, bool):
            raise LockConfigError(f"fencing must be a bool, got {self.fencing!r}")
        factor = self.drift_factor
        if isinstance(factor, bool) or not isinstance(factor, int | float):
            raise LockConfigError(f"drift_factor must be a number, got {factor!r}")
        if not 0.0 <= factor < 0.5:
            raise LockConfigError(f"drift_factor must be in [0, 0.5), got {factor!r}")
        delay = validate.check_duration("retry_delay", self.retry_delay)
        MultiOptions.__post_init__(self)
        lease = self.lease
        if self.node_timeout is None:
            timeout = min(1.0, lease / 10.0)
        else:
            timeout = validate.check_duration("node_timeout", self.node_timeout)
            if timeout > lease / 3.0:
                raise LockConfigError(
                    f"node_timeout ({timeout} s) must be at most a third of the lease "
                    f"({lease} s): a slow master must not eat the validity time"
                )
        drift = lease * float(factor) + _DRIFT_FLOOR
        if lease - drift - timeout <= 0:
            raise LockConfigError(
                f"the lease ({lease} s) leaves no validity after the drift allowance "
                f"({drift:.4f} s) and node_timeout ({timeout} s)"
            )
        put = object.__setattr__
        put(self, "node_timeout", timeout)
        put(self, "retry_delay", delay)
        put(self, "drift", drift)


# ---------------------------------------------------------------------------- signatures


def signature(
    options: type[MultiOptions], leading: tuple[tuple[str, Any], ...]
) -> inspect.Signature:
    """The constructor signature for ``help()``: the ``leading`` positional parameters
    (name, annotation), then every option of ``options`` as a keyword with its default."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(name, kind, annotation=note) for name, note in leading]
    hints = {
        name: getattr(hint, "__forward_arg__", hint)
        for name, hint in options.kwargs.__annotations__.items()
    }
    keyword = inspect.Parameter.KEYWORD_ONLY
    params.extend(
        inspect.Parameter(f.name, keyword, default=f.default, annotation=hints[f.name])
        for f in fields(options)
        if f.init and f.name in hints
    )
    return inspect.Signature(params, return_annotation=None)
