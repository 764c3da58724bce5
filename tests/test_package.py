# SPDX-License-Identifier: MIT
"""The package as a release ships it: ``python -m build`` (no isolation: the ``release``
extra brings build and hatchling) makes an sdist, then a wheel from that sdist, out of a
copy of the checkout with junk planted in it (a venv, a built docs site, a torture run,
bytecode, a benchmark's JSON). The sdist holds what building and testing need and none of
the junk; the wheel holds the package with its scripts and py.typed; the metadata names the
license, the project URLs, the version of ``redislock.__version__`` and exactly the Python
versions dev.py tests on. And ``redislock --version``.

The whole check of a release (twine, the wheel installed into a fresh venv outside the
checkout, ``redislock demo`` run from it) is ``python3 dev.py release-check``, part of
``python3 dev.py test``.
"""

from __future__ import annotations

import email.message
import email.parser
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

import redislock
from redislock._version import __version__
from tests.support import load_dev

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.name for p in (ROOT / "src" / "redislock" / "scripts").glob("*.lua"))
URL = "https://github.com/redislock/redislock"

JUNK = (
    ".venv/lib/python3.11/site-packages/junk.py",
    ".venv-3.12/bin/python",
    "site/index.html",
    "runs/torture-1/history.jsonl",
    "bench-2026.json",
    "dist/redislock-0.0.1.tar.gz",
    "tests/__pycache__/junk.cpython-311.pyc",
    "src/redislock/__pycache__/junk.cpython-311.pyc",
    ".mypy_cache/junk.json",
)
"""Files a working checkout has that no release may carry."""

# what a copy of the checkout leaves out (big, and beside the point: JUNK is planted anew)
_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv*",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "site",
    "dist",
    "build",
    "__pycache__",
)


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    tmp = tmp_path_factory.mktemp("package")
    tree = tmp / "checkout"
    shutil.copytree(ROOT, tree, ignore=_NOT_COPIED)
    for junk in JUNK:
        (tree / junk).parent.mkdir(parents=True, exist_ok=True)
        (tree / junk).write_text("junk\n")
    out = tmp / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sdists = list(out.glob("*.tar.gz"))
    wheels = list(out.glob("*.whl"))
    assert len(sdists) == 1, sdists
    assert len(wheels) == 1, wheels
    return Dists(sdist=sdists[0], wheel=wheels[0])


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(f"redislock-{__version__}.dist-info/METADATA").decode()
    return email.parser.Parser().parsestr(text)


def test_version_is_the_package_version(dists: Dists) -> None:
    assert redislock.__version__ == __version__
    assert dists.wheel.name == f"redislock-{__version__}-py3-none-any.whl"
    assert dists.sdist.name == f"redislock-{__version__}.tar.gz"
    assert wheel_metadata(dists.wheel)["Version"] == __version__


def test_license_metadata(dists: Dists) -> None:
    meta = wheel_metadata(dists.wheel)
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    # PEP 639: the expression replaces the License field and the License :: classifiers
    assert meta["License"] is None
    assert not [c for c in meta.get_all("Classifier", []) if c.startswith("License ::")]
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the redislock authors" in license_text
    with zipfile.ZipFile(dists.wheel) as zf:
        shipped = zf.read(f"redislock-{__version__}.dist-info/licenses/LICENSE").decode()
    assert shipped == license_text


def test_project_urls(dists: Dists) -> None:
    urls = {
        label.strip(): url.strip()
        for label, url in (
            u.split(",", 1) for u in wheel_metadata(dists.wheel).get_all("Project-URL", [])
        )
    }
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues", "Source"}
    assert all(url.startswith(URL) for url in urls.values()), urls
    assert urls["Issues"] == f"{URL}/issues"
    assert urls["Changelog"].endswith("/CHANGELOG.md")


def test_classifiers_name_exactly_the_pythons_the_suite_runs_on(dists: Dists) -> None:
    meta = wheel_metadata(dists.wheel)
    classifiers = meta.get_all("Classifier", [])
    pythons = sorted(
        m[1]
        for c in classifiers
        if (m := re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", c))
    )
    tested = ["3.11", *load_dev().OTHER_PYTHONS]
    assert pythons == tested
    assert meta["Requires-Python"] == f">={tested[0]}"
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in tested  # this run, too
    for wanted in (
        "Development Status :: 4 - Beta",
        "Framework :: AsyncIO",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3 :: Only",
        "Typing :: Typed",
    ):
        assert wanted in classifiers


def test_wheel_holds_the_package_its_scripts_and_py_typed(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as zf:
        names = set(zf.namelist())
        entry_points = zf.read(f"redislock-{__version__}.dist-info/entry_points.txt").decode()
    assert "redislock/py.typed" in names
    assert "redislock/_version.py" in names
    assert "redislock/cli/demo.py" in names
    lua = sorted(n.removeprefix("redislock/scripts/") for n in names if n.endswith(".lua"))
    assert lua == SCRIPTS
    assert len(SCRIPTS) >= 10
    assert {n.split("/")[0] for n in names} == {"redislock", f"redislock-{__version__}.dist-info"}
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert "redislock = redislock.cli:main" in entry_points


def test_sdist_holds_what_a_build_needs_and_no_junk(dists: Dists) -> None:
    top = f"redislock-{__version__}/"
    with tarfile.open(dists.sdist) as tf:
        names = {n.removeprefix(top) for n in tf.getnames() if n != top.rstrip("/")}
    for wanted in (
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "pyproject.toml",
        "PKG-INFO",
        "dev.py",
        "src/redislock/py.typed",
        "src/redislock/_version.py",
        "tests/conftest.py",
        "tests/test_package.py",
        "tools/gen_sync.py",
        "examples/django_cache_lock.py",
        "docs/architecture.md",
        "bench/uncontended.py",
        ".ci/run",
    ):
        assert wanted in names, wanted
    assert (
        sorted(n.removeprefix("src/redislock/scripts/") for n in names if n.endswith(".lua"))
        == SCRIPTS
    )
    planted = [junk for junk in JUNK if junk in names]
    assert planted == []
    parts = {part for name in names for part in name.split("/")}
    assert not parts & {".venv", "site", "runs", "dist", "__pycache__", ".git", ".mypy_cache"}
    assert not [p for p in parts if p.startswith(".venv") or p.endswith(".pyc")]


def test_version_flag_prints_one_line_and_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "redislock", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    python = ".".join(map(str, sys.version_info[:3]))
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout == f"redislock {__version__} (redis-py {redis.__version__}, Python {python})\n"
    )
    assert done.stderr == ""
