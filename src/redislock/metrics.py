# SPDX-License-Identifier: MIT
"""OpenTelemetry metrics, through the global ``MeterProvider``, when ``opentelemetry-api``
is installed (``pip install redislock[otel]``); without it nothing is recorded and nothing
is imported (each record is one check of a module flag).

Instruments (meter ``redislock``; names per the OpenTelemetry semantic conventions' style):

============================  ==============  =====  ========================================
name                          type            unit   what
============================  ==============  =====  ========================================
``redislock.acquire.duration``  histogram     s      one ``acquire()`` call, whatever its
                                                     outcome (the wait included)
``redislock.acquires``        counter         1      acquire calls, by ``outcome``:
                                                     ``acquired``, ``busy`` (a single try
                                                     found it held), ``timeout`` (the wait
                                                     limit passed), ``error`` (Redis failed,
                                                     a bad reply; a cancelled call is
                                                     not counted)
``redislock.hold.duration``   histogram       s      from acquired to released (or lost)
``redislock.lost``            counter         1      leases lost while held (reported once)
``redislock.renewals``        counter         1      watchdog renewals, by ``outcome``:
                                                     ``ok`` or ``failed``
``redislock.waiters``         up-down counter 1      calls waiting for a lock right now
                                                     (this process)
============================  ==============  =====  ========================================

Attributes: ``redislock.kind`` (``Lock``, ``FairLock``, ``RLock``, ``ReadLock``,
``WriteLock``, ``Semaphore``, ``MultiLock``, ``Redlock``, ``MultiRedlock``, ``Election``,
``RedisPyLock``, ``Barrier`` (a party's membership: its join, renewals and loss): the sync
and asyncio classes alike; a ``Once`` counts as its ``Lock``),
and ``redislock.name`` only if :func:`configure` says so: lock names are often per order or
per user, and a name per attribute value would explode a metrics backend's cardinality.
The drop-ins for redis-py's ``Lock`` poll in redis-py's own loop: only their acquisitions
(and errors) are counted, not each busy poll, and their ``acquire.duration`` is the
successful poll's. With ``opentelemetry-api`` but no
SDK configured, the API's instruments do nothing, at about 1 µs per acquire and release.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["NAME_ATTRIBUTE", "configure", "enabled"]  # the rest: redislock's own hooks

NAME_ATTRIBUTE: Final = "redislock.name"
KIND_ATTRIBUTE: Final = "redislock.kind"

_lock = threading.Lock()
_instruments: dict[str, Any] = {}
_name_of: Callable[[str], str | None] | None = None
_checked = False
_enabled = False


def configure(*, name: bool | Callable[[str], str | None] = False) -> None:
    """Choose the ``redislock.name`` attribute: ``False`` (default): none; ``True``: the
    lock name as is; a function of the name: its result (``None``: no attribute), e.g.
    ``lambda n: n.split(":")[0]`` to keep ``order`` of ``order:42``.

    Raises:
        TypeError: ``name`` is neither a bool nor callable.
    """
    global _name_of
    if name is True:
        _name_of = str
    elif name is False:
        _name_of = None
    elif callable(name):
        _name_of = name
    else:
        raise TypeError(f"name must be a bool or a function of the lock name, got {name!r}")


def enabled() -> bool:
    """Whether metrics are recorded (``opentelemetry-api`` is importable)."""
    _setup()
    return _enabled


def _setup() -> None:
    if not _checked:
        _start()


def _start() -> None:
    """Create the instruments once (under a lock: the first records may race)."""
    global _checked, _enabled
    with _lock:
        if _checked:
            return
        with contextlib.suppress(ImportError):
            from opentelemetry.metrics import get_meter

            from redislock._version import __version__

            meter = get_meter("redislock", __version__)
            for key, make, name, unit, description in _INSTRUMENTS:
                _instruments[key] = getattr(meter, make)(name, unit=unit, description=description)
            _enabled = True
        _checked = True


_INSTRUMENTS: Final = (
    ("acquire", "create_histogram", "redislock.acquire.duration", "s", "acquire() calls"),
    ("acquires", "create_counter", "redislock.acquires", "1", "acquire() calls by outcome"),
    ("hold", "create_histogram", "redislock.hold.duration", "s", "from acquired to released"),
    ("lost", "create_counter", "redislock.lost", "1", "leases lost while held"),
    ("renewals", "create_counter", "redislock.renewals", "1", "watchdog renewals by outcome"),
    ("waiters", "create_up_down_counter", "redislock.waiters", "1", "calls waiting for a lock"),
)
"""Each instrument: its key here, the Meter method that makes it, name, unit, description."""


def _attributes(kind: str, name: str, **more: str) -> dict[str, str]:
    attrs = {KIND_ATTRIBUTE: kind, **more}  # kind: a core's label, already without "Async"
    if _name_of is not None:
        value = _name_of(name)
        if value is not None:
            attrs[NAME_ATTRIBUTE] = value
    return attrs


def attributes(kind: str, name: str) -> dict[str, str] | None:
    """The attributes of one lock (kind, and the name if configured), or None when
    nothing is recorded: taken once per acquire call, so its +1 and -1 on ``waiters``
    land on the same series even if :func:`configure` changes in between."""
    _setup()
    return _attributes(kind, name) if _enabled else None


def acquire(attrs: dict[str, str] | None, seconds: float, outcome: str) -> None:
    """Record one acquire call with the attributes of :func:`attributes` (``outcome``:
    acquired, busy, timeout or error)."""
    if attrs is not None:
        tagged = {**attrs, "outcome": outcome}
        _instruments["acquire"].record(seconds, tagged)
        _instruments["acquires"].add(1, tagged)


def waiting(attrs: dict[str, str] | None, delta: int) -> None:
    """One more (+1) or one fewer (-1) call waiting for a lock (attributes of
    :func:`attributes`)."""
    if attrs is not None:
        _instruments["waiters"].add(delta, attrs)


def held(kind: str, name: str, seconds: float) -> None:
    """Record one hold's duration, at its release or loss."""
    _setup()
    if _enabled:
        _instruments["hold"].record(seconds, _attributes(kind, name))


def lost(kind: str, name: str) -> None:
    """Record one lease lost while held."""
    _setup()
    if _enabled:
        _instruments["lost"].add(1, _attributes(kind, name))


def renewal(kind: str, name: str, ok: bool) -> None:
    """Record one watchdog renewal."""
    _setup()
    if _enabled:
        _instruments["renewals"].add(1, _attributes(kind, name, outcome="ok" if ok else "failed"))
