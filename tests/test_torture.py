# SPDX-License-Identifier: MIT
"""The torture runner end to end: every scenario under every fault kind, and the negative
controls, each against redis-servers the run starts itself (short runs; the long run is by
hand, see docs/torture.md)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from redislock.testing.checkers import election_checks, once_checks
from redislock.testing.faults import (
    ALL_FAULTS,
    CLIENT_FAULTS,
    SCENARIOS,
    SERVER_FAULTS,
    make_schedule,
)
from redislock.testing.torture import TortureConfig, TortureResult, run_torture

MUST_BE_ZERO = (
    "stale_writes_accepted",
    "token_regressions",
    "foreign_touches",
    "keys_without_ttl",
    "leases_alive_after_death",
)


def _lines(result: TortureResult) -> dict[str, object]:
    return {line.name: line for line in result.report.lines}


def _explain(result: TortureResult) -> str:
    return f"{result.report.table()}\nrecords: {result.directory}"


def assert_clean(result: TortureResult, cycles: int = 30) -> None:
    """The run passed, every must-be-zero line held, and it did real work (>= ``cycles``
    acquisitions)."""
    lines = _lines(result)
    assert result.passed, _explain(result)
    for name in MUST_BE_ZERO:
        assert lines[name].ok is True, _explain(result)  # type: ignore[attr-defined]
    assert result.cycles >= cycles, _explain(result)


def _acquired(path: Path) -> int:
    """Acquisitions (acquire oks) in one worker's history."""
    events = (json.loads(line) for line in path.read_text().splitlines() if line)
    return sum(1 for e in events if e.get("op") == "acquire" and e.get("ph") == "ok")


# ----------------------------------------------------------------------------- schedule


def test_schedule_is_a_function_of_its_seed() -> None:
    kw = {"duration": 60.0, "kinds": ALL_FAULTS, "slots": 4, "servers": 5, "lease": 1.0}
    first = make_schedule(7, **kw)  # type: ignore[arg-type]
    assert first == make_schedule(7, **kw)  # type: ignore[arg-type]
    assert first != make_schedule(8, **kw)  # type: ignore[arg-type]
    assert {e.kind for e in first} == set(ALL_FAULTS)
    for lane in (CLIENT_FAULTS, SERVER_FAULTS):
        events = [e for e in first if e.kind in lane]
        for a, b in itertools.pairwise(events):
            assert b.at >= a.at + a.duration + a.params.get("delay", 0.0)  # one at a time
    for e in first:
        assert 0 < e.at < 60.0
        assert 0 <= e.target < (4 if e.kind in CLIENT_FAULTS else 5)
        assert 0 <= e.server < 5


def test_schedule_and_config_reject_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown fault kinds"):
        make_schedule(1, duration=1, kinds=["gremlins"], slots=1, servers=1, lease=1)
    bad = [
        {"scenario": "mutex"},
        {"control": "nothing"},
        {"faults": ("gremlins",)},
        {"processes": 0},
        {"lease": 0.0},
        {"persistence": "sometimes"},
        {"scenario": "redlock", "masters": 2},
        {"scenario": "redlock", "url": "redis://127.0.0.1:1"},
    ]
    for kwargs in bad:
        with pytest.raises(ValueError):
            run_torture(TortureConfig(directory=str(tmp_path / "never"), **kwargs))  # type: ignore[arg-type]
    assert not (tmp_path / "never").exists()  # refused before anything started


# ----------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize(
    "scenario",
    [  # the lock scenario on every server (dev.py's STAGES), the others on Redis 7
        pytest.param(s, marks=pytest.mark.servers) if s == "lock" else s for s in SCENARIOS
    ],
)
def test_scenario_under_all_faults_keeps_every_must_be_zero_line(
    scenario: str, tmp_path: Path
) -> None:
    cfg = TortureConfig(
        scenario=scenario,
        processes=3,
        duration=8.0,
        seed=11,
        masters=3,
        faults=ALL_FAULTS,  # server clock jumps included (dev.py installs libfaketime)
        directory=str(tmp_path / scenario),
    )
    result = run_torture(cfg)
    # A term costs more round trips than a lock cycle (advertise, leader(), withdraw), each
    # held up by the faults; Once runs at most once per period and name. A floor that shows
    # real work, not a throughput goal: with a CPU hog beside the suite, multilock did 20
    # cycles in its 8 s (the goal was 30 then).
    assert_clean(result, cycles=8 if scenario in ("election", "once") else 10)
    assert result.faults_applied >= 4
    assert not result.nemesis_errors, result.nemesis_errors
    # The records are complete and replayable.
    for name in ("config.json", "schedule.json", "nemesis.jsonl", "oracle.jsonl", "audit.json"):
        assert (result.directory / name).is_file(), name
    assert list(result.directory.glob("history-*.jsonl"))
    nemesis = (result.directory / "nemesis.jsonl").read_text().splitlines()
    kinds = {json.loads(x)["kind"] for x in nemesis}
    assert kinds & set(CLIENT_FAULTS)
    assert kinds & set(SERVER_FAULTS)
    # flavour "both": sync workers (even ids) and asyncio workers (odd ids) both held locks.
    held = [0, 0]
    for path in result.directory.glob("history-*.jsonl"):
        held[int(path.stem.split("-")[1]) % 2] += _acquired(path)
    assert held[0] > 0, held
    assert held[1] > 0, held


def test_crash_points_kill_workers_whose_command_ran_and_leave_no_lease_behind(
    tmp_path: Path,
) -> None:
    """``client_crash_unreplied``: each worker it hits is SIGKILLed right after one of its
    commands ran on the server and before the reply was read (an acquire that took the
    lock for a process now dead, a release that went through unseen). Every lease such a
    crash left must be gone within a lease of the death, and nothing else may break."""
    cfg = TortureConfig(
        scenario="lock",
        processes=3,
        duration=8.0,
        seed=4,
        faults=("client_crash_unreplied",),
        gap=(0.1, 0.3),
        directory=str(tmp_path / "crash"),
    )
    result = run_torture(cfg)
    assert result.passed, _explain(result)
    nemesis = [json.loads(x) for x in (result.directory / "nemesis.jsonl").read_text().split()]
    fired = [e for e in nemesis if e["params"]["crashed"]]
    assert len(fired) >= 3, nemesis
    assert all(e["t_death"] >= e["t0"] for e in fired)
    # Where each crash landed: the killed worker's last event is an invoke never completed.
    landed = []
    for e in fired:
        text = (result.directory / f"history-{e['w']}.jsonl").read_text()
        last = json.loads(text.splitlines()[-1])
        landed.append(last["op"] if last["ph"] == "invoke" else "between calls")
    assert {"acquire", "release"} & set(landed), landed
    assert _lines(result)["leases_alive_after_death"].value == 0, _explain(result)  # type: ignore[attr-defined]


def test_server_clock_jumps_keep_every_must_be_line_and_losses_are_told(tmp_path: Path) -> None:
    """Only ``server_clock_jump`` on the lock scenario: the servers run under libfaketime;
    forward jumps past the lease end holds server-side with no client fault, and every such
    loss must still reach its worker in time (``loss_notifications`` stays a must-be line);
    backward jumps (and the heals of forward ones) keep dead holders' leases longer."""
    cfg = TortureConfig(
        scenario="lock",
        processes=3,
        duration=8.0,
        seed=1,  # two backward jumps, then three forward ones past the lease
        faults=("server_clock_jump",),
        long_share=0.5,  # holds long enough for the auditor to see them end
        directory=str(tmp_path / "clock"),
    )
    result = run_torture(cfg)
    assert_clean(result)
    assert not result.nemesis_errors, result.nemesis_errors
    assert (result.directory / "s0" / "clock").is_file()  # started under libfaketime
    applied = [json.loads(x) for x in (result.directory / "nemesis.jsonl").read_text().splitlines()]
    assert len(applied) == result.faults_applied >= 3
    for entry in applied:
        assert entry["kind"] == "server_clock_jump"
        assert "error" not in entry
        assert entry["t1"] > entry["t0"]
        assert 0.5 <= abs(entry["params"]["jump"]) / cfg.lease <= 3.0
    assert any(e["params"]["jump"] > cfg.lease for e in applied)  # a forward jump past it
    assert any(e["params"]["jump"] < 0 for e in applied)
    # Forward jumps took holds away, and every one of those losses was told in time.
    loss = _lines(result)["loss_notifications"]
    told, judged = (int(x) for x in str(loss.value).split()[0].split("/"))  # type: ignore[attr-defined]
    assert told == judged > 0, _explain(result)
    assert loss.ok is True  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- election, once


def _acts(result: TortureResult) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in sorted(result.directory.glob("acts-*.jsonl"))
        for line in path.read_text().splitlines()
        if line
    ]


@pytest.mark.serial  # loss notifications are judged against a deadline: not under 3 workers
def test_election_under_default_faults_never_lets_a_stale_leader_act(tmp_path: Path) -> None:
    """Leaders campaign, act with their term as fencing token, read leader() and resign
    while the default faults pause, kill and cut them off: no stale leader's act is
    accepted, terms never go back, no read names a deposed leader."""
    result = run_torture(
        TortureConfig(
            scenario="election",
            processes=3,
            duration=8.0,
            seed=7,
            directory=str(tmp_path / "election"),
        )
    )
    # one server: its pauses and sleeps stop every contender at once, so cycles are fewer
    assert_clean(result, cycles=15)
    lines = _lines(result)
    assert lines["stale_leader_reads"].ok is True, _explain(result)  # type: ignore[attr-defined]
    reads = [a for a in _acts(result) if a["kind"] == "leader"]
    # leader() named the reading leader itself, with its own term, most of the time
    assert sum(1 for r in reads if r.get("term") == r.get("mine")) >= 10, _explain(result)
    assert result.faults_applied >= 4
    # every term acted at the oracle is a granted one (acts carry the term as fence)
    grants = set()
    for path in result.directory.glob("history-*.jsonl"):
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if e["op"] == "acquire" and e["ph"] == "ok":
                grants.add(e["fence"])
    writes = [json.loads(x) for x in (result.directory / "oracle.jsonl").read_text().splitlines()]
    assert writes
    assert {w["fence"] for w in writes} <= grants


@pytest.mark.serial  # loss notifications are judged against a deadline: not under 3 workers
def test_once_under_default_faults_never_runs_a_period_twice(tmp_path: Path) -> None:
    """Workers race for short periods, a quarter of the jobs fail on purpose: never two
    successful runs of one period; failed periods are run again by someone."""
    result = run_torture(
        TortureConfig(
            scenario="once", processes=3, duration=8.0, seed=7, directory=str(tmp_path / "once")
        )
    )
    # a run per period and name at most: 1 s and 0.5 s periods, two names
    assert_clean(result, cycles=15)
    lines = _lines(result)
    assert lines["double_runs"].ok is True, _explain(result)  # type: ignore[attr-defined]
    outcomes = [a["outcome"] for a in _acts(result) if a["kind"] == "once"]
    assert outcomes.count("ok") >= 10, _explain(result)
    assert "ok-foreign" not in outcomes, _explain(result)
    assert outcomes.count("skipped") > 0, _explain(result)
    assert outcomes.count("failed") > 0, _explain(result)
    assert int(lines["failed_periods_rerun"].value) > 0, _explain(result)  # type: ignore[attr-defined]


def test_election_and_once_checkers_fail_on_made_up_violations() -> None:
    """The two scenarios' own lines fail on records that break them (pure checkers)."""
    grant = {"t": 1.0, "w": 1, "pid": 9, "hold": "1.0", "op": "acquire", "ph": "ok",
             "name": "n0", "mode": "x", "fence": 7, "err": None}  # fmt: skip
    read = {"kind": "leader", "w": 2, "name": "n0", "t": 2.0, "t0": 2.0, "t1": 2.1,
            "identity": "w0", "term": 6, "mine": 8}  # fmt: skip
    early = {**read, "t": 0.5, "t0": 0.5, "t1": 0.6}  # before term 7 was granted: fine
    lines = {ln.name: ln for ln in election_checks([grant], [read, early])}
    assert lines["stale_leader_reads"].ok is False
    assert lines["stale_leader_reads"].value == 1
    assert "read term 6" in lines["stale_leader_reads"].detail
    assert {ln.name: ln for ln in election_checks([grant], [early])}["stale_leader_reads"].ok

    def run(t: float, outcome: str, key: str = "k1", fence: int = 1) -> dict[str, object]:
        return {"kind": "once", "w": 1, "name": "n0", "key": key, "t": t, "outcome": outcome,
                "fence": fence}  # fmt: skip

    ok = once_checks([run(1, "failed"), run(2, "ok"), run(3, "skipped"), run(1, "lost", "k2")])
    by = {ln.name: ln for ln in ok}
    assert by["double_runs"].ok is True
    assert by["failed_periods_rerun"].value == 1
    assert by["failed_periods_undone"].value == 1
    bad = {ln.name: ln for ln in once_checks([run(1, "ok"), run(2, "ok-foreign", fence=2)])}
    assert bad["double_runs"].ok is False
    assert bad["double_runs"].value == 1


# ----------------------------------------------------------------------------- controls


@pytest.mark.parametrize(
    ("control", "line"),
    [
        ("broken-release", "foreign_touches"),
        ("unfenced-pause", "stale_writes_accepted"),
        ("redlock-restart", "overlapping_holders"),
        ("election-unfenced", "stale_writes_accepted"),
        ("once-mutex", "double_runs"),
    ],
)
def test_negative_control_is_reported(control: str, line: str, tmp_path: Path) -> None:
    cfg = TortureConfig(
        control=control,
        processes=3,
        names=1,
        duration=8.0,
        seed=5,
        masters=3,
        lease=0.5,
        directory=str(tmp_path / control),
    )
    result = run_torture(cfg)
    assert result.control_detected, _explain(result)
    assert int(str(_lines(result)[line].value).split()[0]) > 0, _explain(result)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- CLI


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "redislock", "torture", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_runs_and_replays(tmp_path: Path) -> None:
    out = _cli(
        "--duration", "3", "--processes", "2", "--seed", "3",
        "--faults", "client_kill,proxy_reset", "--json", "--dir", str(tmp_path / "a"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    [run] = json.loads(out.stdout)
    assert run["passed"] is True
    assert run["cycles"] > 0
    first = Path(run["directory"])
    again = _cli("--replay", str(first), "--dir", str(tmp_path / "b"), "--json")
    assert again.returncode == 0, again.stderr + again.stdout
    [rerun] = json.loads(again.stdout)
    assert (first / "schedule.json").read_text() == (
        Path(rerun["directory"]) / "schedule.json"
    ).read_text()


def test_cli_usage_errors_exit_64() -> None:
    for args in (["--scenario", "mutex"], ["--faults", "gremlins"], ["--control", "x"]):
        out = _cli(*args, "--duration", "1")
        assert out.returncode == 64, (args, out.stderr)
        assert "redislock:" in out.stderr
