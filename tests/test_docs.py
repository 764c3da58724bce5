# SPDX-License-Identifier: MIT
"""The documentation site: it builds strictly, and its CLI reference is the parser's."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from redislock.cli import _parser

ROOT = Path(__file__).resolve().parents[1]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hook", ROOT / "docs/hooks/generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_lists_every_subcommand_and_option() -> None:
    hook = _hook()
    text: str = hook.cli_reference()
    parser = _parser()
    subs = hook.subcommands(parser)
    assert len(subs) >= 8  # run, once, elect, inspect, list, release, demo, server, ...
    for name, sub in subs.items():
        assert f"## `redislock {name}`" in text
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text, (name, flag)
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            for flag in action.option_strings:
                assert flag in text, flag


def test_torture_and_benchmark_pages_render_from_the_committed_data() -> None:
    hook = _hook()
    tables: str = hook.torture_tables()
    assert "| stale_writes_accepted | 0 | 0 | pass |" in tables
    labels, ratios = hook.uncontended_ratios(hook._load("uncontended.json"))
    assert any("redislock Lock" in label for label in labels)
    assert 1.0 in ratios  # the sync raw pair, against itself
    assert hook.waiters_rows(hook._load("waiters.json"))


def test_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q"]
    cmd += ["-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    cli = (site / "cli" / "index.html").read_text()
    assert "redislock run" in cli
    assert "--ttl" in cli
    assert (site / "img" / "uncontended.png").stat().st_size > 1000
    assert (site / "img" / "waiters.png").stat().st_size > 1000
    api = (site / "api" / "index.html").read_text()
    assert "AcquireTimeoutError" in api
    assert "fencing_token" in api
    frameworks = (site / "howto-frameworks" / "index.html").read_text()
    assert "LockDependency" in frameworks  # examples/ included, not copied
