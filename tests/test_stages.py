# SPDX-License-Identifier: MIT
"""dev.py's STAGES choose what else a test runs on (another server, other clients, another
Python) by pytest markers, never by names: here every stage selects what its markers say,
the files that claim a stage are in it, and no marker is left without a stage.

The suite is collected in subprocesses (``--collect-only``) with tests/markers_report.py,
which writes each test's markers: once whole, then once per stage's ``-m`` expression, so
what pytest selects is compared with what the stage's own rule (Stage.selects) says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import load_dev

ROOT = Path(__file__).resolve().parent.parent
STAGE_MARKERS = {"servers", "dropins", "pythons", "one_server"}
"""The markers only the stages read (pyproject's ``markers``)."""


def collect(tmp: Path, *args: str) -> dict[str, set[str]]:
    """Node id -> marker names of every test pytest collects with ``args``."""
    report = tmp / f"markers-{len(list(tmp.iterdir()))}.json"
    env = {**os.environ, "REDISLOCK_MARKERS_REPORT": str(report)}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "tests.markers_report", *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    raw: dict[str, list[str]] = json.loads(report.read_text())
    return {node: set(marks) for node, marks in raw.items()}


@pytest.fixture(scope="module")
def dev() -> Any:
    return load_dev()


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The whole suite: node id -> marker names."""
    return collect(tmp_path_factory.mktemp("stages"))


def files_of(nodes: set[str]) -> set[str]:
    return {node.split("::")[0] for node in nodes}


def test_every_stage_names_a_known_server_and_registered_markers(
    dev: Any, pytestconfig: pytest.Config
) -> None:
    registered = {line.split(":")[0].strip() for line in pytestconfig.getini("markers")}
    assert registered >= STAGE_MARKERS
    assert dev.STAGES
    for stage in dev.STAGES:
        assert stage.server in dev.SERVERS, stage
        assert stage.client in ("redis", "valkey"), stage
        assert stage.include, stage
        assert set(stage.include) | set(stage.exclude) <= registered, stage
    assert {s.server for s in dev.STAGES} >= {"valkey", "redis6.2", "redis8.2"}
    assert sorted({s.python for s in dev.STAGES if s.python}) == list(dev.OTHER_PYTHONS)


@pytest.mark.timeout(600)  # three whole-suite collections: minutes on a loaded machine
def test_the_stages_select_what_their_markers_say(
    dev: Any, suite: dict[str, set[str]], tmp_path: Path
) -> None:
    """Each distinct ``-m`` expression, given to pytest, selects exactly the tests the
    stage's rule picks from the whole suite's markers, and at least one."""
    for expression in dict.fromkeys(stage.markers() for stage in dev.STAGES):
        stage = next(s for s in dev.STAGES if s.markers() == expression)
        chosen = collect(tmp_path, "-m", expression)
        assert chosen, f"{stage.name}: {expression!r} selects no test"
        assert set(chosen) == {n for n, marks in suite.items() if stage.selects(marks)}


def test_the_files_that_claim_a_stage_are_in_it(dev: Any, suite: dict[str, set[str]]) -> None:
    """Every server stage runs every script's cases (each tests/test_scripts_*.py file, so
    a new one cannot be left out), every primitive, the ACL profiles, the CLI and the
    torture kit's lock scenario; the drop-ins' stages their tests; the Pythons' stages the
    fast part."""
    expected = {
        "servers": {
            *(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_scripts*.py")),
            "tests/test_generic.py",
            "tests/test_acl.py",
            "tests/test_cli.py",
        },
        "dropins": {
            "tests/test_compat.py",
            "tests/redispy/test_dropin_lock.py",
            "tests/redispy/aio/test_dropin_lock.py",
        },
        "pythons": {
            "tests/test_lock.py",
            "tests/test_async.py",
            "tests/test_core.py",
            "tests/test_cli.py",
            "tests/test_scripts.py",
            "tests/test_once.py",
            "tests/test_election.py",
            "tests/test_guard.py",
            "tests/test_generic.py",
        },
    }
    for marker, files in expected.items():
        stages = [s for s in dev.STAGES if marker in s.include]
        assert stages, marker
        for stage in stages:
            selected = {n for n, marks in suite.items() if stage.selects(marks)}
            assert files <= files_of(selected), (stage.name, files - files_of(selected))
    torture = "tests/test_torture.py::test_scenario_under_all_faults_keeps_every_must_be_zero_line"
    assert "servers" in suite[f"{torture}[lock]"]
    for stage in (s for s in dev.STAGES if "servers" in s.include):
        assert stage.selects(suite[f"{torture}[lock]"])
    cancel = [n for n in suite if "test_generic.py::test_a_cancelled_acquire" in n]
    assert cancel
    assert all(s.selects(suite[n]) for n in cancel for s in dev.STAGES if s.python)


def test_every_stage_marker_means_something(dev: Any, suite: dict[str, set[str]]) -> None:
    """A test marked for a stage runs in one (unless it also says it runs on Redis 7
    alone); ``one_server`` only where a file also runs elsewhere; no test is ``pythons``
    and ``slow`` at once (the Pythons' stages leave slow tests out, so it would run
    nowhere but 3.11)."""
    for node, marks in suite.items():
        claims = marks & {"servers", "dropins", "pythons"}
        if "one_server" in marks:
            assert marks & {"servers", "dropins"}, f"{node}: one_server in a file nowhere else"
        if "pythons" in marks:
            assert "slow" not in marks, f"{node}: marked pythons and slow"
        if claims and "one_server" not in marks:
            assert any(s.selects(marks) for s in dev.STAGES), f"{node} runs in no stage"
