# SPDX-License-Identifier: MIT
"""flock's habits in the ``redislock`` command line, and messages that say what happened.

Every test runs ``python -m redislock`` as a subprocess against the suite's real
redis-server (``--url`` given), in the private environment of tests/test_cli.py.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import redis

from redislock import Lock
from redislock.cli import EXIT_BUSY, EXIT_LOST, EXIT_UNAVAILABLE, EXIT_USAGE
from tests.support import reap
from tests.test_cli import cli, cli_env, finish, lock_key, py, start, url, wait_for

__all__ = ["cli_env", "url"]  # the fixtures (cli_env autouse), imported so that they apply here

# Writes its argv (after the file name) and $REDISLOCK_FENCING_TOKEN to argv[1] as JSON.
ARGV = (
    "import json, os, sys\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    json.dump({'argv': sys.argv[2:], 'fence': os.environ.get('REDISLOCK_FENCING_TOKEN')},"
    " f)\n"
)
SLEEPER = (  # writes its pid, then sleeps until a signal ends it
    "import os, sys, time\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f:\n"
    "    f.write(str(os.getpid()))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "time.sleep(60)\n"
)


def held(admin: redis.Redis, name: str) -> Lock:
    lock = Lock(admin, name)
    assert lock.acquire(timeout=5)
    return lock


def lost_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "lost" in line]


# --------------------------------------------------------------------------- busy


def test_nonblock_with_a_conflict_exit_code(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    holder = held(admin, "busy")
    try:
        result = cli(cli_env, url, "run", "busy", "-n", "-E", "3", "touch", str(ran))
        assert result.returncode == 3, result.stderr
        # the message says who holds it (this test process)
        assert "lock 'busy' is busy: held by" in result.stderr
        assert f"pid {os.getpid()}" in result.stderr
        assert not ran.exists()
        # the same with the options clustered and attached, and --url after the subcommand
        result = cli(cli_env, None, "run", "-nE7", "busy", "--url", url, "--", "true")
        assert result.returncode == 7, result.stderr
        result = cli(cli_env, url, "run", "busy", "--nonblock", "true")  # the default status
        assert result.returncode == EXIT_BUSY, result.stderr
    finally:
        holder.release()
    result = cli(cli_env, url, "run", "busy", "-n", "-E", "3", "touch", str(ran))
    assert result.returncode == 0, result.stderr
    assert ran.exists()


def test_wait_quiet_times_out_silently(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    holder = held(admin, "nightly")
    try:
        t0 = time.monotonic()
        result = cli(cli_env, url, "run", "nightly", "-w", "0.3", "-q", "touch", str(ran))
        assert result.returncode == EXIT_BUSY
        assert time.monotonic() - t0 >= 0.3
        assert (result.stdout, result.stderr) == ("", "")
        # -q before the subcommand, too
        result = cli(cli_env, url, "-q", "run", "nightly", "-w", "0.3", "touch", str(ran))
        assert (result.returncode, result.stdout, result.stderr) == (EXIT_BUSY, "", "")
        # without -q: how long it waited, and for whom
        result = cli(cli_env, url, "run", "nightly", "--wait", "0.3", "touch", str(ran))
        assert result.returncode == EXIT_BUSY
        assert "waited 0.3 s for lock 'nightly': held by" in result.stderr, result.stderr
        assert f"pid {os.getpid()}" in result.stderr
        assert "is busy" not in result.stderr
        assert not ran.exists()
    finally:
        holder.release()


def test_once_quiet_and_without_dashes(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    # An explicit period key: with the clock's periods, a period boundary between the
    # calls ran the second one for real (CI run with a CPU hog, at 03:40:00 UTC)
    period = ["--period", "600", "--key", "p1"]
    first = cli(cli_env, url, "once", "job", *period, *py(ARGV, out, "a"))
    assert first.returncode == 0, first.stderr
    assert json.loads(out.read_text())["argv"] == ["a"]
    out.unlink()
    again = cli(cli_env, url, "once", "job", *period, *py(ARGV, out))
    assert again.returncode == 0
    assert "already run" in again.stderr
    quiet = cli(cli_env, url, "once", "-q", "job", *period, *py(ARGV, out))
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    assert not out.exists()
    holder = held(admin, "job2")
    try:
        busy = cli(cli_env, url, "once", "job2", "--period", "600", "-n", "-E", "5", "true")
        assert busy.returncode == 5, busy.stderr
    finally:
        holder.release()


# --------------------------------------------------------------------------- CMD


def test_cmd_follows_name_without_dashes_and_keeps_its_options(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    # the first word after NAME that is not an option starts CMD: "-n -w 5" are CMD's
    result = cli(cli_env, url, "run", "job", "--ttl", "5", *py(ARGV, out, "-n", "-w", "5"))
    assert result.returncode == 0, result.stderr
    seen = json.loads(out.read_text())
    assert seen["argv"] == ["-n", "-w", "5"]
    assert seen["fence"] == "1"
    # "--" still works, and a "--" after CMD is CMD's
    result = cli(cli_env, url, "run", "job", "-n", "--", *py(ARGV, out, "--", "x"))
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text()) == {"argv": ["--", "x"], "fence": "2"}
    # elect too
    result = cli(cli_env, url, "elect", "leader", "-w", "5", *py(ARGV, out, "-q"))
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["argv"] == ["-q"]
    assert admin.exists(lock_key("job")) == 0


def test_global_options_after_the_subcommand(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    probe = (
        "import sys, redis\n"
        "r = redis.Redis.from_url(sys.argv[2])\n"
        "open(sys.argv[1], 'w').write(str(r.exists('night:{job}')))\n"
    )
    out = tmp_path / "out"
    result = cli(
        cli_env, None, "run", "job", "--prefix", "night:", "--url", url, *py(probe, out, url)
    )
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "1"  # held under the key prefix given after the subcommand
    # inspect, list, release take them there too
    holder = Lock(admin, "nightly", prefix="night:")
    assert holder.acquire(timeout=5)
    other = held(admin, "nightly-other-prefix")
    try:
        listed = cli(cli_env, None, "list", "--json", "--url", url, "--prefix", "night:")
        assert listed.returncode == 0, listed.stderr
        assert [i["name"] for i in json.loads(listed.stdout)] == ["nightly"]
        before = cli(cli_env, url, "--prefix", "night:", "list", "--json")
        assert [i["key"] for i in json.loads(before.stdout)] == ["night:{nightly}"]
        # --starts-with filters names; --prefix is the key prefix everywhere
        names = cli(cli_env, url, "list", "--json", "--starts-with", "nightly-")
        assert [i["name"] for i in json.loads(names.stdout)] == ["nightly-other-prefix"]
        shown = cli(cli_env, None, "inspect", "nightly", "--url", url, "--prefix", "night:")
        assert shown.returncode == 0, shown.stderr
        assert f"pid {os.getpid()}" in shown.stdout
    finally:
        holder.release()
        other.release()


def test_shell_command_with_c(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    script = f'echo "token $REDISLOCK_FENCING_TOKEN" > {out}; exit 4'
    result = cli(cli_env, url, "run", "sh", "-c", script)
    assert result.returncode == 4, result.stderr
    assert out.read_text() == "token 1\n"
    both = cli(cli_env, url, "run", "sh", "-c", "true", "true")
    assert both.returncode == EXIT_USAGE
    assert "not both" in both.stderr
    none = cli(cli_env, url, "run", "sh")
    assert none.returncode == EXIT_USAGE
    assert "needs a command after NAME" in none.stderr
    for result in (both, none):  # run's own usage line, not the top-level one
        assert result.stderr.startswith("usage: redislock run "), result.stderr
        assert "redislock run: error: " in result.stderr
    assert admin.exists(lock_key("sh")) == 0


# --------------------------------------------------------------------------- help


def test_bare_redislock_prints_help(cli_env: dict[str, str]) -> None:
    result = cli(cli_env, None)
    assert result.returncode == EXIT_USAGE
    assert result.stdout.startswith("usage: redislock")
    assert "exit status:" in result.stdout
    assert "run a command while holding a lock" in result.stdout


def test_help_lists_exit_codes(cli_env: dict[str, str]) -> None:
    for argv in (["--help"], ["run", "--help"], ["once", "--help"], ["elect", "--help"]):
        result = cli(cli_env, None, *argv)
        assert result.returncode == 0, argv
        table = result.stdout.split("exit status:", 1)[1]
        for code in ("0 ", "1 ", "64", "69", "75", "79", "126", "127", "128+N"):
            assert f"\n  {code}" in table, (argv, code)
        assert "-E/--conflict-exit-code" in table
    run_help = cli(cli_env, None, "run", "--help").stdout
    for flag in ("-n, --nonblock", "-w S, --wait S", "-E N", "-q, --quiet", "-c 'SHELL COMMAND'"):
        assert flag in run_help, flag


def test_require_url_refuses_the_embedded_server(cli_env: dict[str, str], tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    result = cli(cli_env, None, "run", "job", "--require-url", "touch", str(ran))
    assert result.returncode == EXIT_UNAVAILABLE
    assert "--require-url refuses the embedded server" in result.stderr
    assert not ran.exists()


# --------------------------------------------------------------------------- messages


def test_ttl_messages_name_the_flag(cli_env: dict[str, str], url: str, admin: redis.Redis) -> None:
    zero = cli(cli_env, url, "run", "job", "--ttl", "0", "true")
    assert zero.returncode == EXIT_USAGE
    assert "--ttl must be > 0 seconds" in zero.stderr
    assert "watchdog_lease" not in zero.stderr
    long = cli(cli_env, url, "run", "job", "--ttl", "5000", "true")
    assert long.returncode == 0, long.stderr
    assert "--ttl 5000 is 83 minutes; did you mean milliseconds? seconds are expected" in (
        long.stderr
    )
    assert long.stderr.count("milliseconds") == 1  # not the library's warning as well
    quiet = cli(cli_env, url, "run", "job", "--ttl", "5000", "-q", "true")
    assert (quiet.returncode, quiet.stderr) == (0, "")
    hour = cli(cli_env, url, "run", "job", "--ttl", "3600", "true")
    assert (hour.returncode, hour.stderr) == (0, "")
    assert admin.keys("redislock:{job}") == []


def test_a_lost_lease_is_told_once_with_its_reason(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    proc = start(cli_env, url, "run", "gone", "--ttl", "2", "--grace", "5", *py(SLEEPER, pid_file))
    try:
        wait_for(pid_file.exists, what="CMD")
        admin.delete(lock_key("gone"))
        status, _, err = finish(proc, timeout=30)
    finally:
        reap(proc)
    assert status == EXIT_LOST, err
    lines = lost_lines(err)
    assert len(lines) == 1, err
    assert lines[0].startswith("redislock: lease of lock 'gone' was lost while the command ran")


def test_a_stop_longer_than_the_lease_is_named(
    cli_env: dict[str, str], url: str, admin: redis.Redis, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    proc = start(cli_env, url, "run", "stopped", "--ttl", "2", *py(SLEEPER, pid_file))
    try:
        wait_for(pid_file.exists, what="CMD")
        os.kill(proc.pid, signal.SIGSTOP)  # redislock only: CMD runs on
        time.sleep(4.0)  # twice the lease
        os.kill(proc.pid, signal.SIGCONT)
        status, _, err = finish(proc, timeout=30)
    finally:
        reap(proc)
    assert status == EXIT_LOST, err
    lines = lost_lines(err)
    assert len(lines) == 1, err
    assert "the lease ran out while redislock was stopped (SIGSTOP/Ctrl-Z)" in lines[0]
    assert "TimeoutError" not in err
    seconds = float(lines[0].split("suspended for ", 1)[1].split(" s", 1)[0])
    assert seconds >= 3.5, lines[0]
    assert admin.exists(lock_key("stopped")) == 0


def test_library_options_are_keyword_only_with_a_plain_message(admin: redis.Redis) -> None:
    try:
        Lock(admin, "x", 30)  # type: ignore[call-arg]
    except TypeError as exc:
        message = str(exc)
    else:
        raise AssertionError("a positional option was accepted")
    assert message.startswith("Lock.__init__() takes 3 positional arguments"), message
    assert "LockBase" not in message
