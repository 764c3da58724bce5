# SPDX-License-Identifier: MIT
"""Smoke test of ``bench/waiters.py``: the quick sizes end to end, on its own redis-server
(holds shortened to stay near 20 s: 0.3 s on a separate client; on the waiters' client a 1 s
watchdog lease held for one lease)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import redislock

ROOT = Path(__file__).resolve().parent.parent
ROW_KEYS = {
    "scenario", "kind", "lib", "title", "waiters", "names", "status", "acquired", "released",
    "errors", "error_count", "error_samples", "holder_errors", "baseline_clients",
    "peak_connected_clients", "peak_conns", "peak_blocked", "rejected_connections",
    "monitor_polls", "wakeups", "late", "wake_p50_ms", "wake_p99_ms", "wake_max_ms",
    "wait_p50_ms", "wait_p99_ms", "wait_max_ms", "wall_s", "requests", "requests_per_acq",
    "waiter_cpu_s", "overlaps", "shared", "holder_kept", "watchdog_lease_s", "holder_hold_s",
    "holder_renewals", "holder_renewal_failures", "holder_lost", "holder_lost_at_s",
    "holder_lost_reason", "holder_taken", "holder_taken_at_s", "holder_released",
    "holder_release_attempts", "holder_release_s",
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
    ("tasks-shared", "redislock"),
    ("tasks-shared", "redis-py"),
    ("threads-shared", "redislock"),
    ("threads-shared", "redis-py"),
    ("threads-shared", "python-redis-lock"),
]


@pytest.mark.serial  # its peers' rows time out when other test workers load the machine
def test_waiters_quick_json(tmp_path: Path) -> None:
    out = tmp_path / "waiters.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p
    )
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "waiters.py"),
            "--quick",
            "--hold",
            "0.3",
            "--watchdog-lease",
            "1",
            "--hold-leases",
            "1",
            "--json",
            str(out),
        ],
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
    assert (params["watchdog_lease_s"], params["hold_leases"]) == (1, 1.0)
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
        if row["shared"]:
            check_shared_holder(row, where)
        else:
            assert not row["holder_errors"], where
            assert row["watchdog_lease_s"] is None, where
            assert row["holder_taken"] == 0, where
        # The monitor saw the waiters' connections; they are capped by the default pool.
        assert row["monitor_polls"] > 0, where
        assert 0 < row["peak_conns"] <= row["peak_connected_clients"], where
        assert row["peak_connected_clients"] - row["baseline_clients"] == row["peak_conns"]
        assert row["requests"] > 0, where
        assert row["requests_per_acq"] > 0, where
        assert row["wall_s"] > 0, where
        # Wake-ups: every acquisition but those of late starters followed a release (but
        # those that took the name from a shared holder whose lease ran out).
        if row["holder_taken"]:
            assert row["wakeups"] + row["late"] <= row["acquired"], where
        else:
            assert row["wakeups"] + row["late"] == row["acquired"], where
        if row["wakeups"]:
            assert 0 <= row["wake_p50_ms"] <= row["wake_p99_ms"] <= row["wake_max_ms"], where
        assert row["wait_p50_ms"] <= row["wait_p99_ms"] <= row["wait_max_ms"], where

    # Goal lines for each redislock row: errors and peak connections; for a shared row also
    # the holder (kept its lock, released at once).
    ours = [r for r in data["rows"] if r["lib"] == "redislock"]
    assert len(data["goals"]) == 2 * len(ours) + sum(1 for r in ours if r["shared"])
    for goal in data["goals"]:
        assert isinstance(goal["pass"], bool)
        assert goal["line"].startswith("PASS: " if goal["pass"] else "FAIL: ")
    holder_goals = [g for g in data["goals"] if "holder on their client" in g["line"]]
    holder_goals = [g for g in holder_goals if ": holder " in g["line"]]
    assert [g["pass"] for g in holder_goals] == [
        r["holder_kept"] and r["holder_release_attempts"] == 1 for r in ours if r["shared"]
    ]
    assert "| taken by waiters |" in proc.stdout  # the holder table was printed


def check_shared_holder(row: dict[str, Any], where: str) -> None:
    """A shared-client row: the holder on the waiters' client, and what became of it."""
    assert row["names"] == 1, where
    assert row["watchdog_lease_s"] == 1, where
    # It wanted the name one lease from the start, and tried to renew meanwhile (every
    # third of the lease; python-redis-lock every two thirds).
    assert 0.9 <= row["holder_hold_s"] < 3.0, where
    assert row["holder_renewals"] + row["holder_renewal_failures"] >= 1, where
    # Its errors are its own, by phase; a kind is counted once per failure.
    kinds = row["holder_errors"]
    assert all(k.startswith(("holder renew: ", "holder release: ")) for k in kinds), where
    assert set(row["error_samples"]) >= set(kinds), where
    renew = sum(n for k, n in kinds.items() if k.startswith("holder renew: "))
    release = sum(n for k, n in kinds.items() if k.startswith("holder release: "))
    assert renew <= row["holder_renewal_failures"], where
    assert row["holder_release_attempts"] == release + int(row["holder_released"]), where
    assert row["holder_release_attempts"] >= 1, where
    assert row["holder_release_s"] >= 0, where
    assert row["holder_kept"] == (
        not row["holder_lost"] and not row["holder_taken"] and row["holder_released"]
    ), where
    if row["holder_lost"]:
        assert row["holder_lost_reason"], where
        assert row["holder_lost_at_s"] > 0, where
    assert row["holder_taken"] <= row["acquired"], where
    if row["holder_taken"]:  # a waiter got the name while the holder believed it held
        assert 0 < row["holder_taken_at_s"] <= row["holder_hold_s"] + row["holder_release_s"]
