# SPDX-License-Identifier: MIT
"""The kinds table (src/redislock/_core/kinds.py) against every place it should feed, so a
kind cannot be missing from one: the exports, the scripts and their cases, the ACL profiles
and the tests that run them, the torture scenarios, the metrics labels, the kind-conflict
error, inspect and the CLI's words, and the generic test table."""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect as pyinspect
from pathlib import Path
from typing import Any, get_args

import pytest
import redis
import redis.asyncio

import redislock
import redislock.compat
from redislock import KindConflictError
from redislock._core import kinds
from redislock._core.barrier import BARRIER_SUFFIX
from redislock._core.codec import HOLD_MODES
from redislock._core.compat import CompatCore
from redislock._core.inspection import _ROLES, Kind
from redislock._core.keys import DEFAULT_PREFIX, LockKeys
from redislock._core.kinds import KINDS, STORED, KindSpec
from redislock._core.latch import LATCH_SUFFIX
from redislock._core.options import LockOptions
from redislock._core.scripts import SCRIPTS
from redislock._handle import Handle, Holder, _label
from redislock.cli import build_parsers, parse, render
from redislock.cli.render import HOLD_KINDS, KIND_LABELS, LEASE_KINDS, OWN_KINDS
from redislock.cli.top import scan_names
from redislock.testing import faults, worker
from redislock.testing.torture import HANDOFF_SCENARIOS, TortureConfig
from tests import primitives, test_acl, test_scripts
from tests.support import load_dev

ROOT = Path(__file__).resolve().parents[1]

NOT_KINDS = {
    "Guard",
    "AsyncGuard",  # what a holder's guard() returns
    "OnceTurn",
    "AsyncOnceTurn",  # what Once.run() yields
    "HoldInfo",
    "LockInfo",
    "LatchInfo",
    "BarrierInfo",
    "PermitsInfo",
    "WaiterInfo",
    "LeaderInfo",
    "LockStatistics",
    "OnceRecord",  # snapshots
}
"""Exported classes that are not a kind's (a new export is a kind, with a row, or here)."""

OWN_ACL_TESTS = {
    "Election": ("tests.test_election", "test_works_as_the_documented_acl_user"),
    "Once": ("tests.test_once", "test_once_works_as_its_documented_acl_user"),
    "RedisPyLock": ("tests.test_acl", "test_the_redis_py_drop_in_works_as_its_documented_user"),
    "CountDownLatch": ("tests.test_acl", "test_the_synchronizers_work_as_their_documented_users"),
    "Barrier": ("tests.test_acl", "test_the_synchronizers_work_as_their_documented_users"),
}
"""The kinds outside the generic table: the test that runs each as its documented user."""


def _barrier_counts_as_barrier() -> None:
    # A Barrier is no Handle: each party's lease core carries the label (no I/O to build).
    path = "/nonexistent/redislock-test.sock"
    client, aclient = redis.Redis(unix_socket_path=path), redis.asyncio.Redis(unix_socket_path=path)
    try:
        assert redislock.Barrier(client, "b", 2)._core.label == "Barrier"
        assert redislock.AsyncBarrier(aclient, "b", 2)._core.label == "Barrier"
    finally:
        client.close()  # (neither connected: nothing to close on the asyncio one)


def _latch_records_no_metrics() -> None:
    # A CountDownLatch holds nothing: no acquire, hold or loss to count.
    assert not issubclass(redislock.CountDownLatch, Handle)


OWN_METRICS = {"Barrier": _barrier_counts_as_barrier, "CountDownLatch": _latch_records_no_metrics}
"""The kinds that are no Handle and no use of another kind: how their metrics are labelled."""


def ids(rows: tuple[KindSpec, ...] = KINDS) -> list[Any]:
    return [pytest.param(row, id=row.name) for row in rows]


def classes(row: KindSpec) -> list[type]:
    """The row's public classes, both flavours, and those of the holders it hands out."""
    module = importlib.import_module(row.module)
    names = [row.name, *(p.name for p in row.parts)]
    return [getattr(module, n) for name in names for n in (name, "Async" + name)]


# ------------------------------------------------------------------ the table itself


def test_rows_are_unique_and_name_known_things() -> None:
    assert len({row.name for row in KINDS}) == len(KINDS)
    assert len({row.acl_profile for row in KINDS}) == len(KINDS)
    scenarios = [row.torture for row in KINDS if row.torture]
    assert len(set(scenarios)) == len(scenarios)
    uses = {row.name for row in KINDS if row.primitive}
    for row in KINDS:
        assert row.uses is None or row.uses in uses, row
        assert kinds.by_name(row.name) is kinds.by_name(row.asyncio_name) is row
        assert row.holder != bool(row.parts) or not row.lock_api, row  # a lock holds or hands out
        assert all(c == c.upper() for c in row.commands), row
        assert row.queues == ("fair_acquire" in row.scripts)


# ------------------------------------------------------------------ exports


def test_every_exported_kind_has_a_row() -> None:
    """Every class redislock (and redislock.compat) exports is a row's (the class, its
    asyncio twin, a holder it hands out), an exception, or explicitly not a kind."""
    covered = {cls for row in KINDS for cls in classes(row)}
    for module in (redislock, redislock.compat):
        for name in module.__all__:
            obj = getattr(module, name)
            if not isinstance(obj, type) or issubclass(obj, BaseException) or name in NOT_KINDS:
                continue
            assert obj in covered, f"{module.__name__}.{name} is a kind without a row"


@pytest.mark.parametrize("row", ids())
def test_a_rows_classes_are_exported_and_are_what_it_says(row: KindSpec) -> None:
    module = importlib.import_module(row.module)
    for name in (row.name, row.asyncio_name):
        assert name in module.__all__, name
        if row.module == "redislock":  # (the drop-ins are redis-py's Lock classes)
            assert issubclass(getattr(module, name), Holder) == row.holder, name
    for part in row.parts:
        for name in (part.name, "Async" + part.name):
            assert name in module.__all__, name
            assert issubclass(getattr(module, name), Holder), name
        assert callable(getattr(getattr(module, row.name), part.method)), part


def test_every_kind_of_the_package_is_in_the_api_reference() -> None:
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for row in KINDS:
        if row.module == "redislock":
            assert f"::: redislock.{row.name}\n" in api, row.name


# ------------------------------------------------------------------ scripts and their cases


@pytest.mark.parametrize("row", ids())
def test_every_script_of_a_row_exists_and_has_cases_on_every_stage_server(row: KindSpec) -> None:
    """A row's scripts are loaded, each has cases in a tests/test_scripts_*.py file, and that
    file is marked ``servers``: dev.py's stages run it on Valkey, Redis 6.2 and 8.2."""
    staged = {s.server for s in load_dev().STAGES if "servers" in s.include}
    assert {"valkey", "redis6.2", "redis8.2"} <= staged
    for script in row.scripts:
        assert script in SCRIPTS, script
        cased = [m for m in test_scripts.CASE_MODULES if any(c.script == script for c in m.CASES)]
        assert cased, f"no cases for {script}.lua"
        for module in cased:
            marks = (
                module.pytestmark if isinstance(module.pytestmark, list) else [module.pytestmark]
            )
            assert "servers" in {m.name for m in marks}, module.__name__


# ------------------------------------------------------------------ ACL profiles


def test_every_row_has_its_acl_profile_on_the_page_and_in_the_test() -> None:
    page = test_acl.documented()
    for row in KINDS:
        assert row.acl_profile in page, f"docs/acl.md has no ### {row.acl_profile}"
        assert test_acl.PROFILES[row.acl_profile] == (set(row.scripts), set(row.commands))


@pytest.mark.parametrize("row", ids())
def test_every_row_runs_as_its_documented_user_somewhere(row: KindSpec) -> None:
    """A generic row's holds run in test_acl.py's end-to-end tests (one server or the Redlock
    masters); every other row has a test of its own that uses its profile."""
    if row.lock_api:
        generic = {
            (k.id, k.flavour) for k in primitives.KINDS if test_acl.profile_of(k) == row.acl_profile
        }
        ran = {(k.id, k.flavour) for k in [*test_acl.SINGLE, *test_acl.QUORUM]}
        assert generic, row
        assert generic <= ran, generic - ran
        return
    module_name, test_name = OWN_ACL_TESTS[row.name]
    test = getattr(importlib.import_module(module_name), test_name)
    source = pyinspect.getsource(test)
    user = test_acl.documented()[row.acl_profile][2]  # ACL SETUSER <user> ...
    by_table = "documented()[kind]" in source and row.acl_profile in getattr(
        importlib.import_module(module_name), "SCENARIOS", {}
    )  # a test parametrized over its module's SCENARIOS, one per profile
    assert f'documented()["{row.acl_profile}"]' in source or user in source or by_table, test_name


# ------------------------------------------------------------------ torture


@pytest.mark.parametrize("row", ids(tuple(r for r in KINDS if r.torture)))
def test_every_torture_scenario_is_accepted_by_the_cli(row: KindSpec) -> None:
    assert row.torture is not None
    args = parse(build_parsers(), ["torture", "--scenario", row.torture])
    cfg = TortureConfig(
        scenario=args.scenario, masters=args.masters, names=args.names, permits=args.permits
    ).validated()
    assert cfg.scenario == row.torture
    assert row.torture in faults.SCENARIOS
    assert (row.torture in faults.QUORUM_SCENARIOS) == (row.clients == "masters")
    assert (row.torture in faults.MULTI_SCENARIOS) == (row.names == "several")
    assert (row.torture in HANDOFF_SCENARIOS) == row.queues
    cls = worker._CLASSES[row.torture]
    assert cls == (row.uses or row.name)
    assert hasattr(redislock, cls)
    assert hasattr(redislock, "Async" + cls)


def test_an_unknown_scenario_is_refused() -> None:
    with pytest.raises(ValueError, match="scenario must be one of"):
        TortureConfig(scenario="mutex").validated()
    assert set(faults.SCENARIOS) == {row.torture for row in KINDS if row.torture}


# ------------------------------------------------------------------ metrics


@pytest.mark.parametrize("row", ids())
def test_metrics_label_each_class_by_its_own_name(row: KindSpec) -> None:
    """A row's classes (and the holders it hands out) count under their sync name, a user's
    subclass too; a drop-in's core says it; a class that is no handle (Once) counts as the
    kind it uses."""
    assert row.name in kinds.metrics_labels()
    for cls in classes(row):
        sync_name = cls.__name__.removeprefix("Async")
        if issubclass(cls, Handle):
            assert _label(cls) == sync_name, cls
            assert _label(type("Mine", (cls,), {"__slots__": ()})) == sync_name, cls
    if row.name == "RedisPyLock":
        assert CompatCore.for_redis_py("job", LockOptions()).label == row.name
    elif row.name in OWN_METRICS:
        OWN_METRICS[row.name]()
    elif not any(issubclass(cls, Handle) for cls in classes(row)):
        assert row.uses is not None, "a class that is no handle counts as the kind it uses"


# ------------------------------------------------------------------ kind conflicts


@pytest.mark.parametrize("row", ids())
def test_a_conflict_names_the_kinds_that_run_the_script(row: KindSpec) -> None:
    """A script a row runs on one client names that row (or the primitive it uses) as the
    kind asked for; found names every primitive of a shape, a hold's kind by its mode."""
    for script in row.scripts:
        wanted = named(kinds.conflict_wanted(script))
        if row.clients == "one":
            assert {row.name, row.uses} & set(wanted), (script, wanted)
    if row.primitive and kinds.stored(row.stored).at_lock_key:
        found = kinds.conflict_found(kinds.stored(row.stored).key_type)
        assert found is not None
        assert row.name in named(found.split(" ", 1)[1])  # after its article
    modes = kinds.hold_mode_found()
    for mode in [row.hold_mode, *(p.mode for p in row.parts)]:
        if mode is not None:
            assert row.name in modes[mode], (mode, modes)


def named(text: str) -> list[str]:
    """The kinds of ``"A, B or C"``."""
    return text.replace(" or ", ", ").split(", ")


def test_the_hold_modes_of_the_table_are_those_hold_values_have() -> None:
    """Every hold mode (_hold.lua) a row or part writes is a mode of the hold value format (codec),
    which inspect shows as a role, and every such mode is some row's."""
    modes = set(kinds.hold_mode_found())
    assert modes == set(HOLD_MODES) == set(_ROLES)


SINGLE = [k for k in primitives.KINDS if not k.quorum and k.flavour == "sync"]


def row_of(kind: primitives.Kind) -> KindSpec:
    """The kinds-table row of a generic row (a kind, or a side it hands out)."""
    return next(r for r in KINDS if kind.id in (r.name, *(p.name for p in r.parts)))


@pytest.mark.parametrize("kind", SINGLE, ids=lambda k: k.id)
def test_a_name_held_by_the_other_shape_raises_a_conflict_naming_both(
    kind: primitives.Kind, redis_server: Any, admin: redis.Redis
) -> None:
    """On a real server: each single-client generic kind, asked for a name that a kind of
    the other shape holds, raises KindConflictError naming its own row and the holder's."""
    row = row_of(kind)
    client = redis.Redis(**redis_server.client_kwargs())
    env = primitives.Env(client, None, [], [], [admin])
    try:
        if row.shape == "lease":
            holder: Any = redislock.Semaphore(client, "clash", 2, ttl=10)
            hold = holder.acquire()
            holder_row = "Semaphore"
        else:
            hold = holder = redislock.Lock(client, "clash", ttl=10)
            assert holder.acquire(blocking=False)
            holder_row = "Lock"
        subject = kind.build(env, "clash", {"ttl": 10})
        with pytest.raises(KindConflictError) as caught:
            subject.acquire(blocking=False)
        assert row.name in named(caught.value.wanted)
        assert holder_row in caught.value.found
        hold.release()
    finally:
        client.close()


# ------------------------------------------------------------------ inspect and the CLI


def test_inspect_kinds_and_the_cli_words_are_the_stored_kinds() -> None:
    codes = [s.code for s in STORED]
    assert set(get_args(kinds.StoredCode)) == set(codes)
    assert set(get_args(Kind)) == {"none", *codes, "foreign"}
    assert set(KIND_LABELS) == {None, *codes, "foreign"}
    for s in STORED:
        assert KIND_LABELS[s.code] == s.label
    assert set(HOLD_KINDS) == {s.code for s in STORED if s.shape == "holds"}
    assert set(LEASE_KINDS) == {s.code for s in STORED if s.shape == "lease"}
    assert {s.code: s.shape for s in STORED if not s.at_lock_key} == OWN_KINDS
    # every stored kind is shown one way: a lease, holds, or a shape of its own with words
    assert sorted([*HOLD_KINDS, *LEASE_KINDS, *OWN_KINDS]) == sorted(codes)
    assert set(OWN_KINDS.values()) == set(render._OWN_TEXTS)
    assert set(get_args(kinds.Shape)) == {s.shape for s in STORED}
    assert {row.stored for row in KINDS} <= set(codes)
    assert set(codes) <= {row.stored for row in KINDS}  # every stored kind is some kind's
    # a kind kept apart has its key at the lock key plus its suffix, as its core names it
    assert kinds.stored("latch").key_suffix == LATCH_SUFFIX
    assert kinds.stored("barrier").key_suffix == BARRIER_SUFFIX
    for s in STORED:
        assert not s.at_lock_key or kinds.conflict_found(s.key_type) is not None, s


@pytest.mark.parametrize("kind", SINGLE, ids=lambda k: k.id)
def test_inspect_tells_a_held_name_by_its_rows_shape(
    kind: primitives.Kind, redis_server: Any, admin: redis.Redis
) -> None:
    row = row_of(kind)
    client = redis.Redis(**redis_server.client_kwargs())
    env = primitives.Env(client, None, [], [], [admin])
    try:
        subject = kind.build(env, "seen", {"ttl": 10})
        held = subject.acquire(blocking=False)
        assert held
        for name in kind.names("seen"):
            info = redislock.inspect(admin, name)
            assert info.held, name
            assert kinds.stored(info.kind).shape == row.shape, (info.kind, row)
        (held if kind.permit else subject).release()
    finally:
        client.close()


OTHERS_SYNC = [k for k in primitives.OTHERS if k.flavour == "sync"]


@pytest.mark.parametrize("kind", OTHERS_SYNC, ids=lambda k: k.id)
def test_inspect_tells_a_name_kept_apart_by_its_row(
    kind: primitives.Kind, redis_server: Any, admin: redis.Redis
) -> None:
    """A row whose state is not at the lock key (a latch, a barrier's round): in use, its
    name is its row's stored kind, held, at its own key, and listed by the CLI's scan."""
    row = row_of(kind)
    spec = kinds.stored(row.stored)
    assert not spec.at_lock_key
    client = redis.Redis(**redis_server.client_kwargs())
    env = primitives.Env(client, None, [], [], [admin])
    actor = primitives.Actor(kind)
    try:
        subject = primitives.Subject(kind, kind.build(env, "apart", {}), actor)
        assert asyncio.run(subject.take())
        info = redislock.inspect(admin, "apart")
        assert (info.kind, info.held, info.key_type) == (row.stored, True, spec.key_type)
        assert info.key == LockKeys.for_name("apart").lock + spec.key_suffix
        assert getattr(info, row.stored) is not None  # its own object: info.latch, ...
        assert "apart" in scan_names(admin, DEFAULT_PREFIX)
        asyncio.run(subject.give())
    finally:
        actor.close()
        client.close()


# ------------------------------------------------------------------ the generic tests


def test_every_lock_api_row_is_in_the_generic_table() -> None:
    """Each lock_api row gives generic rows in both flavours: itself (a holder or a kind
    acquired by its permit) or each side it hands out."""
    generic = {(k.id, k.flavour) for k in primitives.KINDS}
    others = {(k.id, k.flavour) for k in primitives.OTHERS}
    for row in KINDS:
        if not row.lock_api:
            assert not {k for k in generic if k[0] == row.name}, row
            # a primitive of its own gets the generic tests about any primitive
            assert ({(row.name, "sync"), (row.name, "asyncio")} <= others) == row.primitive, row
            continue
        names = (
            [row.name]
            if row.holder
            else [row.name if p.method == "acquire" else p.name for p in row.parts]
        )
        for name in names:
            assert {(name, "sync"), (name, "asyncio")} <= generic, name


def test_every_lock_api_holder_is_in_the_guard_tests() -> None:
    """tests/test_guard.py's every-holder-kind tests build each holder by hand: each holder
    of a lock_api row (the kind, or what it hands out) must be there."""
    from tests import test_guard

    holders = {
        name
        for row in KINDS
        if row.lock_api
        for name in ([row.name] if row.holder else [p.name for p in row.parts])
    }
    assert holders <= set(test_guard.KINDS), holders - set(test_guard.KINDS)


def test_the_table_module_does_no_io() -> None:
    """kinds.py imports nothing but the standard library's dataclasses and typing."""
    tree = ast.parse((ROOT / "src" / "redislock" / "_core" / "kinds.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert imported <= {"__future__", "dataclasses", "typing"}, imported
