# SPDX-License-Identifier: MIT
"""Fault injection, a fenced oracle and history checkers: prove a lock under faults.

The kit behind ``redislock torture`` (see ``docs/torture.md``), public so that you can run
the same checks against your own deployment and your own critical sections:

* :class:`FaultProxy` / :class:`ProxyLoop` (:mod:`~redislock.testing.proxy`): a TCP proxy
  in front of Redis that can blackhole, reset, delay, or deliver requests and drop replies;
* :func:`make_schedule` / :class:`Nemesis` (:mod:`~redislock.testing.faults`): seeded fault
  schedules (client pauses and kills, proxy faults, Redis stalls, restarts, SCRIPT FLUSH,
  server clock jumps);
* :class:`Oracle` / :class:`OracleClient` (:mod:`~redislock.testing.oracle`): the protected
  resource, its own process, that rejects writes whose fencing token is not greater than
  the last one it accepted, and records every write with a monotonic timestamp;
* :class:`History` (:mod:`~redislock.testing.history`): per-process operation histories
  (invoke, then ok, fail or unknown);
* :class:`Auditor` (:mod:`~redislock.testing.audit`): the server-side audit (holds and their
  lifetimes, keys without a TTL, MONITOR-based detection of releases or extends that touched
  another owner's key);
* :func:`check_run` / :class:`Report` (:mod:`~redislock.testing.checkers`): the checkers;
* :func:`run_torture` / :class:`TortureConfig` (:mod:`~redislock.testing.torture`): all of it
  in one run, with negative controls that must report violations.

Linux only (signals, unix sockets, one system-wide ``CLOCK_MONOTONIC``). Test use only:
MONITOR halves a server's throughput.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redislock.testing.audit import Auditor as Auditor
    from redislock.testing.audit import AuditResult as AuditResult
    from redislock.testing.checkers import Line as Line
    from redislock.testing.checkers import Report as Report
    from redislock.testing.checkers import check_run as check_run
    from redislock.testing.faults import ALL_FAULTS as ALL_FAULTS
    from redislock.testing.faults import CONTROLS as CONTROLS
    from redislock.testing.faults import DEFAULT_FAULTS as DEFAULT_FAULTS
    from redislock.testing.faults import SCENARIOS as SCENARIOS
    from redislock.testing.faults import FaultEvent as FaultEvent
    from redislock.testing.faults import Nemesis as Nemesis
    from redislock.testing.faults import make_schedule as make_schedule
    from redislock.testing.history import History as History
    from redislock.testing.history import read_histories as read_histories
    from redislock.testing.oracle import Oracle as Oracle
    from redislock.testing.oracle import OracleClient as OracleClient
    from redislock.testing.oracle import OracleError as OracleError
    from redislock.testing.proxy import FaultProxy as FaultProxy
    from redislock.testing.proxy import ProxyLoop as ProxyLoop
    from redislock.testing.torture import TortureConfig as TortureConfig
    from redislock.testing.torture import TortureResult as TortureResult
    from redislock.testing.torture import replay as replay
    from redislock.testing.torture import run_torture as run_torture

# Imported on first use (PEP 562), so that the CLI, which imports the fault kinds from
# redislock.testing.faults, does not pay for asyncio and the rest of the kit.
_WHERE = {
    "ALL_FAULTS": "redislock.testing.faults",
    "AuditResult": "redislock.testing.audit",
    "Auditor": "redislock.testing.audit",
    "CONTROLS": "redislock.testing.faults",
    "DEFAULT_FAULTS": "redislock.testing.faults",
    "FaultEvent": "redislock.testing.faults",
    "FaultProxy": "redislock.testing.proxy",
    "History": "redislock.testing.history",
    "Line": "redislock.testing.checkers",
    "Nemesis": "redislock.testing.faults",
    "Oracle": "redislock.testing.oracle",
    "OracleClient": "redislock.testing.oracle",
    "OracleError": "redislock.testing.oracle",
    "ProxyLoop": "redislock.testing.proxy",
    "Report": "redislock.testing.checkers",
    "SCENARIOS": "redislock.testing.faults",
    "TortureConfig": "redislock.testing.torture",
    "TortureResult": "redislock.testing.torture",
    "check_run": "redislock.testing.checkers",
    "make_schedule": "redislock.testing.faults",
    "read_histories": "redislock.testing.history",
    "replay": "redislock.testing.torture",
    "run_torture": "redislock.testing.torture",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ALL_FAULTS",
    "CONTROLS",
    "DEFAULT_FAULTS",
    "SCENARIOS",
    "AuditResult",
    "Auditor",
    "FaultEvent",
    "FaultProxy",
    "History",
    "Line",
    "Nemesis",
    "Oracle",
    "OracleClient",
    "OracleError",
    "ProxyLoop",
    "Report",
    "TortureConfig",
    "TortureResult",
    "check_run",
    "make_schedule",
    "read_histories",
    "replay",
    "run_torture",
]
