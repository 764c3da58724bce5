# SPDX-License-Identifier: MIT
"""Smoke test of ``bench/waiters.py``: the quick sizes end to end, on its own redis-server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import redislock

ROOT = Path(__file__).resolve().parent.parent
ROW_KEYS = {
    "scenario", "kind", "lib", "title", "waiters", "names", "status", "acquired", "released",
    "errors", "error_count", "error_samples", "holder_errors", "baseline_clients",
    "peak_connected_clients", "peak_conns", "peak_blocked", "rejected_connections",
    "monitor_polls", "wakeups", "late", "wake_p50_ms", "wake_p99_ms", "wake_max_ms",
    "wait_p50_ms", "wait_p99_ms", "wait_max_ms", "wall_s", "requests", "requests_per_acq",
    "waiter_cpu_s", "overlaps",
}  # fmt: skip
# Every scenario with every library that has its flavour: python-redis-lock has no asyncio.
EXPECTED_ROWS = [
    ("tasks-one", "redislock"),
    ("tasks-one", "redis-py"),
    ("tasks-many", "redislock"),
    ("tasks-many", "redis-py"),
    ("threads-one", "redislock"),
    ("threads-one", "redis-py"),
    ("threads-one", "python-redis-lock"),
    ("threads-many", "redislock"),
    ("threads-many", "redis-py"),
    ("threads-many", "python-redis-lock"),
]


def test_waiters_quick_json(tmp_path: Path) -> None:
    out = tmp_path / "waiters.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p
    )
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "waiters.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| # | scenario | row |" in proc.stdout  # the table was printed
    data = json.loads(out.read_text(encoding="utf-8"))

    assert set(data) == {"params", "env", "rows", "goals"}
    params = data["params"]
    assert params["quick"] is True
    assert (params["tasks"], params["threads"], params["names"]) == (500, 150, 50)
    assert data["env"]["redis_server"]
    assert data["env"]["redislock"].startswith(redislock.__version__)
    assert [(r["scenario"], r["lib"]) for r in data["rows"]] == EXPECTED_ROWS

    for row in data["rows"]:
        where = f"{row['scenario']} / {row['title']}"
        assert set(row) == ROW_KEYS, where
        # Every row finished: the harness did not fail, and every waiter is accounted for,
        # as acquired-and-released or under exactly one error kind.
        assert row["status"] in ("ok", "timed out"), where
        assert row["names"] == (50 if row["scenario"].endswith("many") else 1), where
        assert row["waiters"] == (500 if row["kind"] == "tasks" else 150), where
        assert row["error_count"] == sum(row["errors"].values()), where
        assert row["released"] + row["error_count"] == row["waiters"], where
        assert row["released"] <= row["acquired"] <= row["waiters"], where
        assert row["acquired"] > 0, where
        assert set(row["error_samples"]) >= set(row["errors"]) - {
            "unfinished at row timeout",
            "acquire: returned False (row timeout)",
        }, where
        assert row["overlaps"] == 0, where
        assert not row["holder_errors"], where
        # The monitor saw the waiters' connections; they are capped by the default pool.
        assert row["monitor_polls"] > 0, where
        assert 0 < row["peak_conns"] <= row["peak_connected_clients"], where
        assert row["peak_connected_clients"] - row["baseline_clients"] == row["peak_conns"]
        assert row["requests"] > 0, where
        assert row["requests_per_acq"] > 0, where
        assert row["wall_s"] > 0, where
        # Wake-ups: every acquisition but those of late starters followed a release.
        assert row["wakeups"] + row["late"] == row["acquired"], where
        if row["wakeups"]:
            assert 0 <= row["wake_p50_ms"] <= row["wake_p99_ms"] <= row["wake_max_ms"], where
        assert row["wait_p50_ms"] <= row["wait_p99_ms"] <= row["wait_max_ms"], where

    # Goal lines for each redislock row: errors and peak connections.
    ours = sum(1 for r in data["rows"] if r["lib"] == "redislock")
    assert len(data["goals"]) == 2 * ours
    for goal in data["goals"]:
        assert isinstance(goal["pass"], bool)
        assert goal["line"].startswith("PASS: " if goal["pass"] else "FAIL: ")
