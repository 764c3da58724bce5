# SPDX-License-Identifier: MIT
"""Where the CLI finds Redis: flag > environment > user file > system file > embedded server;
``redislock config``; the embedded-server notice and ``--require-url``; one embedded server
per user whether or not ``XDG_RUNTIME_DIR`` is set (cron vs. a login shell); and two "hosts"
(network namespaces) sharing one Redis through their configuration files.

The ``cli_env`` fixture (from tests/test_cli.py) gives every test a private runtime dir, an
empty ``XDG_CONFIG_HOME`` and a system file path that does not exist.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from redislock._core.keys import FairKeys, fence_key
from redislock.cli import EXIT_BUSY, EXIT_USAGE
from redislock.server import RedisProcess, default_runtime_dir, embedded_status
from tests.support import reap
from tests.test_cli import SRC, cli, cli_env, finish, lock_key, py, start, wait_for

__all__ = ["cli_env"]  # the autouse fixture, imported so that it applies here

EXIT_UNAVAILABLE = 69
EXIT_CONFIG = 78
NOTICE = "excludes only processes of this user on this machine"
SECRET = "s3cr3t-pw"


def user_file(env: dict[str, str]) -> Path:
    path = Path(env["XDG_CONFIG_HOME"]) / "redislock" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def system_file(env: dict[str, str]) -> Path:
    return Path(env["REDISLOCK_SYSTEM_CONFIG"])


def config_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    result = cli(env, None, *args, "config", "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


# --------------------------------------------------------------------------- precedence


def test_url_precedence_each_level_beats_the_next(cli_env: dict[str, str]) -> None:
    env = dict(cli_env)
    user, system = user_file(env), system_file(env)
    runtime = Path(env["REDISLOCK_RUNTIME_DIR"])

    got = config_json(env)  # nothing anywhere: the embedded server (not started by `config`)
    assert got["url"]["value"] == f"unix://{runtime / 'redis.sock'}"
    assert got["url"]["source"].startswith("embedded server")
    assert embedded_status() is None

    system.write_text('url = "redis://system-host:6379/0"\n')
    got = config_json(env)
    assert got["url"] == {"value": "redis://system-host:6379/0", "source": f"system file {system}"}

    user.write_text('url = "redis://user-host:6379/0"\n')
    got = config_json(env)
    assert got["url"] == {"value": "redis://user-host:6379/0", "source": f"user file {user}"}

    env["REDIS_URL"] = "redis://env-host:6379/0"
    got = config_json(env)
    assert got["url"] == {"value": "redis://env-host:6379/0", "source": "env REDIS_URL"}

    got = config_json(env, "--url", "redis://flag-host:6379/0")
    assert got["url"] == {"value": "redis://flag-host:6379/0", "source": "flag --url"}


def test_prefix_require_url_and_defaults_precedence(cli_env: dict[str, str]) -> None:
    env = dict(cli_env)
    user, system = user_file(env), system_file(env)
    got = config_json(env)
    assert got["prefix"] == {"value": "redislock:", "source": "default"}
    assert got["require_url"] == {"value": False, "source": "default"}
    assert got["ttl"] == {"value": 30, "source": "default"}
    assert got["wait"] == {"value": None, "source": "default"}  # null: no limit

    system.write_text(
        'url = "redis://h:1/0"\nprefix = "sys:"\nrequire_url = true\n'
        "[defaults]\nttl = 40\nwait = 3\ngrace = 4\n"
    )
    user.write_text('prefix = "usr:"\nrequire_url = false\n[defaults]\nttl = 50\n')
    got = config_json(env)
    assert got["prefix"] == {"value": "usr:", "source": f"user file {user}"}
    assert got["require_url"] == {"value": False, "source": f"user file {user}"}
    assert got["ttl"] == {"value": 50, "source": f"user file {user}"}
    assert got["wait"] == {"value": 3, "source": f"system file {system}"}
    assert got["grace"] == {"value": 4, "source": f"system file {system}"}

    env["REDISLOCK_PREFIX"] = "env:"
    env["REDISLOCK_REQUIRE_URL"] = "1"
    got = config_json(env)
    assert got["prefix"] == {"value": "env:", "source": "env REDISLOCK_PREFIX"}
    assert got["require_url"] == {"value": True, "source": "env REDISLOCK_REQUIRE_URL"}

    env["REDISLOCK_REQUIRE_URL"] = "0"  # the environment can also lift a file's require_url
    user.write_text("require_url = true\n")
    got = config_json(env, "--prefix", "flag:")
    assert got["prefix"] == {"value": "flag:", "source": "flag --prefix"}
    assert got["require_url"] == {"value": False, "source": "env REDISLOCK_REQUIRE_URL"}
    got = config_json(env, "--require-url")
    assert got["require_url"] == {"value": True, "source": "flag --require-url"}


def test_config_json_values_are_typed_and_the_text_keeps_its_words(
    cli_env: dict[str, str],
) -> None:
    """`config --json` gives a boolean, numbers (seconds) and null (no wait limit, or no
    URL when refused), not their text; the text output still says true, 30, forever, -."""
    env = dict(cli_env)
    user_file(env).write_text(
        'url = "redis://h:1/0"\nrequire_url = true\n[defaults]\nttl = 2.5\ngrace = 7\n'
    )
    got = config_json(env)
    assert got["url"]["value"] == "redis://h:1/0"
    assert got["prefix"]["value"] == "redislock:"
    assert got["require_url"]["value"] is True
    assert got["ttl"]["value"] == 2.5
    assert type(got["grace"]["value"]) in (int, float)  # a JSON number, not "7"
    assert got["grace"]["value"] == 7
    assert got["wait"]["value"] is None
    text = cli(env, None, "config").stdout
    lines = {line.split()[0]: line.split()[1] for line in text.splitlines()}
    assert (lines["require_url"], lines["ttl"], lines["grace"]) == ("true", "2.5", "7")
    assert lines["wait"] == "forever"

    user_file(env).write_text("require_url = true\n")  # no URL anywhere: refused
    result = cli(env, None, "config", "--json")
    assert result.returncode == EXIT_UNAVAILABLE
    assert json.loads(result.stdout)["url"]["value"] is None
    result = cli(env, None, "config")
    assert result.stdout.splitlines()[0].split()[:2] == ["url", "-"]


def test_run_uses_the_file_url_prefix_and_ttl(
    cli_env: dict[str, str], redis_server: RedisProcess, admin: redis.Redis
) -> None:
    """Not just reported: `run` locks on the file's server, under its prefix, with its ttl;
    a flag still beats the file."""
    env = dict(cli_env)
    system_file(env).write_text('url = "redis://127.0.0.1:1/0"\n')  # never reached
    user_file(env).write_text(f'url = "{redis_server.url}"\nprefix = "cfg:"\n[defaults]\nttl = 7\n')
    probe = "import redis, sys; print(redis.Redis.from_url(sys.argv[1]).pttl(sys.argv[2]))"
    key = "cfg:{job}"
    result = cli(env, None, "run", "job", "--", *py(probe, redis_server.url, key))
    assert result.returncode == 0, result.stderr
    assert 4000 < int(result.stdout) <= 7000, result.stdout
    assert NOTICE not in result.stderr

    result = cli(env, None, "run", "job", "--ttl", "20", "--", *py(probe, redis_server.url, key))
    assert result.returncode == 0, result.stderr
    assert 15000 < int(result.stdout) <= 20000, result.stdout
    assert admin.exists(lock_key("job")) == 0  # the default prefix was not used


def test_file_defaults_show_in_help_and_wait_forever_overrides_a_file_wait(
    cli_env: dict[str, str], redis_server: RedisProcess
) -> None:
    """`--help` names a default a file changed (value and file); `-w forever` (or `inf`)
    lifts a file's `wait` for one run; `wait = inf` in a file means no limit too."""
    env = dict(cli_env)
    user = user_file(env)
    user.write_text(f'url = "{redis_server.url}"\n[defaults]\nttl = 120\nwait = 0.4\n')

    def help_of(command: str) -> str:  # argparse wraps lines, at spaces and hyphens
        return "".join(cli(env, None, command, "--help").stdout.split())

    def flat(text: str) -> str:
        return "".join(text.split())

    text = help_of("run")
    assert flat(f"runs (default 30); here 120 s (user file {user})") in text
    assert flat(f"no limit, the default); here 0.4 s (user file {user})") in text
    assert flat("(= --wait 0)") in text
    assert flat("(= --wait 0); here") not in text  # -n's help is unchanged

    # The holder holds until the test lets it go (a fixed sleep ran out on a loaded machine
    # before the second CLI process had even started).
    go = user.parent / "go"
    wait_go = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)"
    holder = start(env, None, "run", "job", "--", *py(wait_go, go))
    admin = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        wait_for(lambda: redis.Redis.from_url(redis_server.url).exists(lock_key("job")) == 1)
        busy = cli(env, None, "run", "job", "true")  # the file's wait: 0.4 s
        assert busy.returncode == EXIT_BUSY, busy.stderr
        assert "waited 0.4 s" in busy.stderr
        forever = start(env, None, "run", "job", "-w", "forever", "echo", "ran")
        queue = FairKeys.for_name("job").queue
        queued = wait_for(lambda: admin.llen(queue) == 1, what="the second run queued")
        time.sleep(0.6)
        assert forever.poll() is None  # still waiting, past the file's 0.4 s
        assert time.monotonic() - queued > 0.5
        go.touch()
        assert finish(forever)[:2] == (0, "ran\n")
    finally:
        go.touch()
        assert finish(holder)[0] == 0
        admin.close()

    user.write_text(f'url = "{redis_server.url}"\n[defaults]\nwait = inf\n')
    assert config_json(env)["wait"] == {"value": None, "source": f"user file {user}"}
    assert flat(f"here forever (user file {user})") in help_of("once")
    assert cli(env, None, "run", "job", "-w", "INF", "true").returncode == 0
    bad = cli(env, None, "run", "job", "-w", "never", "true")
    assert bad.returncode == EXIT_USAGE
    assert "not a number of seconds: 'never'" in bad.stderr


# --------------------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('url = "unterminated\n', "not valid TOML"),
        ("url = 5\n", "key 'url'"),
        ('prefix = "a{b}"\n', "key 'prefix'"),
        ('require_url = "yes"\n', "key 'require_url'"),
        ("colour = 1\n", "key 'colour': unknown key"),
        ("[defaults]\nttl = 0\n", "key 'defaults.ttl'"),
        ("[defaults]\nwait = -1\n", "key 'defaults.wait'"),
        ("[defaults]\nwait = -inf\n", "key 'defaults.wait'"),
        ("[defaults]\nttl = inf\n", "key 'defaults.ttl'"),
        ('[defaults]\ngrace = "10s"\n', "key 'defaults.grace'"),
        ("[defaults]\nlease = 3\n", "key 'defaults.lease': unknown key"),
        ("defaults = 3\n", "key 'defaults'"),
    ],
)
@pytest.mark.parametrize("which", ["user", "system"])
def test_bad_file_is_a_config_error_naming_file_and_key(
    cli_env: dict[str, str], text: str, needle: str, which: str
) -> None:
    path = user_file(cli_env) if which == "user" else system_file(cli_env)
    path.write_text(text)
    for args in (["config"], ["run", "x", "--", "true"]):
        result = cli(cli_env, None, *args)
        assert result.returncode == EXIT_CONFIG, (args, result.stderr)
        assert f"config file {path}" in result.stderr
        assert needle in result.stderr
        assert "Traceback" not in result.stderr
    assert embedded_status() is None  # it did not fall back to the embedded server


def test_bad_url_in_file_and_bad_env_value(cli_env: dict[str, str]) -> None:
    path = user_file(cli_env)
    path.write_text(f'url = "redis://:{SECRET}@host:notaport/0"\n')
    result = cli(cli_env, None, "config")
    assert result.returncode == EXIT_CONFIG
    assert "key 'url'" in result.stderr
    assert str(path) in result.stderr
    assert SECRET not in result.stderr + result.stdout
    path.unlink()

    env = {**cli_env, "REDISLOCK_REQUIRE_URL": "maybe"}
    result = cli(env, None, "run", "x", "--", "true")
    assert result.returncode == EXIT_USAGE
    assert "REDISLOCK_REQUIRE_URL" in result.stderr


# --------------------------------------------------------------------------- require-url, notice


def test_require_url_refuses_the_embedded_fallback(cli_env: dict[str, str]) -> None:
    runtime = Path(cli_env["REDISLOCK_RUNTIME_DIR"])
    cases: list[tuple[dict[str, str], list[str], str]] = [
        (cli_env, ["--require-url"], "flag --require-url"),
        ({**cli_env, "REDISLOCK_REQUIRE_URL": "1"}, [], "env REDISLOCK_REQUIRE_URL"),
    ]
    for env, flags, source in cases:
        for args in (["run", "x", "--", "true"], ["list"], ["config"]):
            result = cli(env, None, *flags, *args)
            assert result.returncode == EXIT_UNAVAILABLE, (args, result.stderr)
            assert source in result.stderr
            assert "refuses the embedded server" in result.stderr
    system_file(cli_env).write_text("require_url = true\n")
    result = cli(cli_env, None, "run", "x", "--", "true")
    assert result.returncode == EXIT_UNAVAILABLE
    assert f"system file {system_file(cli_env)}" in result.stderr
    assert not (runtime / "redis.sock").exists()  # never started
    assert embedded_status() is None


def test_embedded_notice_once_and_silenced_by_q(
    cli_env: dict[str, str], redis_server: RedisProcess
) -> None:
    runtime = Path(cli_env["REDISLOCK_RUNTIME_DIR"])
    result = cli(cli_env, None, "run", "n", "--", "echo", "ran")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ran\n"
    lines = [line for line in result.stderr.splitlines() if NOTICE in line]
    assert len(lines) == 1, result.stderr
    assert f"unix://{runtime / 'redis.sock'}" in lines[0]
    assert result.stderr.count("\n") == 1  # nothing else

    for args in (["-q", "run", "n", "--", "true"], ["-q", "list"], ["-q", "inspect", "n"]):
        result = cli(cli_env, None, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert NOTICE not in result.stderr, args
        if args[1] == "run":
            assert result.stderr == ""
    result = cli(cli_env, None, "list")
    assert result.stderr.count(NOTICE) == 1

    # A configured URL: no notice.
    result = cli(cli_env, redis_server.url, "run", "n", "--", "true")
    assert result.returncode == 0
    assert result.stderr == ""


def test_secrets_are_redacted_everywhere(cli_env: dict[str, str]) -> None:
    secret_url = f"redis://:{SECRET}@127.0.0.1:1/0"
    user_file(cli_env).write_text(f'url = "{secret_url}"\n')
    for env, flags in [
        (cli_env, []),
        ({**cli_env, "REDIS_URL": secret_url}, []),
        (cli_env, ["--url", secret_url]),
    ]:
        for args in (["config"], ["config", "--json"], ["run", "x", "--", "true"]):
            result = cli(env, None, *flags, *args)
            assert SECRET not in result.stdout + result.stderr, (flags, args)
            if args[0] == "config":
                assert result.returncode == 0
                assert "127.0.0.1:1" in result.stdout
                assert "***" in result.stdout
            else:
                assert result.returncode == EXIT_UNAVAILABLE  # nothing listens on port 1


def test_config_points_at_an_embedded_server_left_in_the_old_place(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "redislock").mkdir(parents=True)
    env = {**cli_env, "XDG_RUNTIME_DIR": str(xdg)}
    result = cli(env, None, "config")
    assert result.returncode == 0
    assert "old place" not in result.stderr  # no socket there: nothing to say
    (xdg / "redislock" / "redis.sock").touch()
    result = cli(env, None, "config")
    assert result.returncode == 0
    assert f"REDISLOCK_RUNTIME_DIR={xdg / 'redislock'} redislock server stop" in result.stderr


# --------------------------------------------------------------------------- cron vs. shell


@pytest.fixture
def default_runtime(cli_env: dict[str, str]) -> Iterator[Path]:
    """The real default runtime dir, /tmp/redislock-<uid>; the embedded server there is
    stopped afterwards if this test started it."""
    path = default_runtime_dir()
    env = {k: v for k, v in cli_env.items() if k != "REDISLOCK_RUNTIME_DIR"}
    was_running = cli(env, None, "server", "status").returncode == 0 if path.is_dir() else False
    yield path
    if not was_running:
        cli(env, None, "server", "stop")


def test_cron_and_shell_share_one_embedded_server(
    cli_env: dict[str, str], default_runtime: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    xdg_runtime = tmp_path / "xdg-run"
    xdg_runtime.mkdir(mode=0o700)
    shell = {k: v for k, v in cli_env.items() if k != "REDISLOCK_RUNTIME_DIR"}
    shell |= {"XDG_RUNTIME_DIR": str(xdg_runtime), "HOME": str(home)}
    # cron: `env -i` with HOME and PATH only (and our source, and no system file of this
    # machine: the test must not depend on one)
    cron_env = [
        "env",
        "-i",
        f"HOME={home}",
        "PATH=/usr/bin:/bin",
        f"PYTHONPATH={SRC}",
        f"REDISLOCK_SYSTEM_CONFIG={system_file(cli_env)}",
    ]
    if os.environ.get("REDISLOCK_REDIS_SERVER"):
        cron_env.append(f"REDISLOCK_REDIS_SERVER={os.environ['REDISLOCK_REDIS_SERVER']}")
    name = f"cron-{os.getpid()}-{time.time_ns()}"
    marker = tmp_path / "held"
    holder = start(shell, None, "run", name, "--", *py(HOLD, marker))
    try:
        wait_for(marker.exists, timeout=60, what="the shell's CMD")
        cron = subprocess.run(
            [*cron_env, sys.executable, "-m", "redislock", "run", name, "--no-wait", "--", "true"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert cron.returncode == EXIT_BUSY, cron.stderr
        socket = f"unix://{default_runtime / 'redis.sock'}"
        assert socket in cron.stderr
        assert NOTICE in cron.stderr
        marker.unlink()  # let the shell's CMD exit
        code, _out, err = finish(holder, timeout=60)
        assert code == 0, err
        assert socket in err
        assert NOTICE in err
        assert not (xdg_runtime / "redislock").exists()
        # and the other way round: cron holds, the shell is busy
        marker2 = tmp_path / "held2"
        cron_holder = subprocess.Popen(
            [
                *cron_env,
                sys.executable,
                "-m",
                "redislock",
                "-q",
                "run",
                name,
                "--",
                *py(HOLD, marker2),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(marker2.exists, timeout=60, what="cron's CMD")
            result = cli(shell, None, "-q", "run", name, "--no-wait", "--", "true")
            assert result.returncode == EXIT_BUSY, result.stderr
            marker2.unlink()
            code, _, err = finish(cron_holder, timeout=60)
            assert code == 0, err
            assert err == ""
        finally:
            reap(cron_holder)
    finally:
        reap(holder)


HOLD = (  # creates the marker, then runs until the test removes it
    "import os, sys, time\n"
    "open(sys.argv[1], 'w').close()\n"
    "deadline = time.monotonic() + 60\n"
    "while os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
    "    time.sleep(0.05)\n"
)


# --------------------------------------------------------------------------- two hosts


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def two_hosts(base: str) -> Iterator[tuple[list[str], str]]:
    """Network namespaces ``<tag>A`` and ``<tag>B``, each linked by a veth pair to the root
    namespace (``<base>.1.1 <-> <base>.1.2``, ``<base>.2.1 <-> <base>.2.2``) with a default
    route to it. Yields the namespace names and the root side's address on A's link, which
    both reach. Everything is deleted on exit."""
    if shutil.which("ip") is None:
        pytest.fail("the two-host test needs `ip` (iproute2): apt-get install iproute2")
    if os.geteuid() != 0:
        pytest.fail("the two-host test needs root to create network namespaces")
    tag = f"rl{os.getpid() % 100000}"
    names = [f"{tag}A", f"{tag}B"]
    try:
        for i, ns in enumerate(names, start=1):
            outer, inner = f"{ns}o", f"{ns}i"
            _ip("netns", "add", ns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("addr", "add", f"{base}.{i}.1/24", "dev", outer)
            _ip("link", "set", outer, "up")
            _ip("-n", ns, "addr", "add", f"{base}.{i}.2/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "route", "add", "default", "via", f"{base}.{i}.1")
        yield names, f"{base}.1.1"
    finally:
        for ns in names:
            subprocess.run(["ip", "link", "del", f"{ns}o"], capture_output=True, check=False)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def test_two_hosts_exclude_each_other_through_the_config_file(
    cli_env: dict[str, str],
    spawn_server: Callable[..., RedisProcess],
    tmp_path: Path,
) -> None:
    base = f"10.{200 + os.getpid() % 50}"
    with two_hosts(base) as (hosts, shared_ip):
        server = spawn_server(
            unix_socket=False, args=["--bind", "127.0.0.1", shared_ip, "--protected-mode", "no"]
        )
        assert server.port is not None
        shared_url = f"redis://{shared_ip}:{server.port}/0"
        admin = redis.Redis(host="127.0.0.1", port=server.port, decode_responses=True)
        name = "nightly"
        procs: list[subprocess.Popen[str]] = []
        try:
            for ns in hosts:
                home = tmp_path / ns
                home.mkdir()
                conf = home / "etc-redislock-config.toml"
                conf.write_text(f'url = "{shared_url}"\nrequire_url = true\n')
                # A cron job of each host: `env -i`, the system file holds the shared URL.
                argv = [
                    "ip", "netns", "exec", ns,
                    "env", "-i", f"HOME={home}", "PATH=/usr/bin:/bin", f"PYTHONPATH={SRC}",
                    f"REDISLOCK_SYSTEM_CONFIG={conf}",
                    sys.executable, "-m", "redislock", "run", name, "--no-wait", "--",
                    "sh", "-c", f"echo {ns} running, token $REDISLOCK_FENCING_TOKEN; sleep 6",
                ]  # fmt: skip
                procs.append(
                    subprocess.Popen(
                        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                    )
                )
            results = [finish(p, timeout=120) for p in procs]
        finally:
            for p in procs:
                reap(p)
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, EXIT_BUSY], results
        ran = [out for code, out, _ in results if code == 0]
        assert len(ran) == 1, results
        assert "running, token 1" in ran[0], results
        assert all(NOTICE not in err for _, _, err in results)  # never the embedded server
        # The hold was on the shared server (its first), and it is released.
        assert admin.get(fence_key(lock_key(name))) == "1"
        assert admin.exists(lock_key(name)) == 0
        # From inside a namespace, the root's loopback (the embedded server's world) is not
        # reachable: the hosts really are separate.
        probe = subprocess.run(
            ["ip", "netns", "exec", hosts[0], sys.executable, "-c",
             "import socket, sys; s = socket.socket(); s.settimeout(3)\n"
             "sys.exit(s.connect_ex(('127.0.0.1', int(sys.argv[1]))) == 0)",
             str(server.port)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert probe.returncode == 0, probe.stderr
        admin.close()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in listed for ns in hosts), listed  # cleaned up
