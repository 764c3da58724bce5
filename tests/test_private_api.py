# SPDX-License-Identifier: MIT
"""Other packages through their public API only: no ``obj._name`` of redis-py, valkey-py,
argparse, ... anywhere in ``src/redislock`` (nor in ``dev.py``, ``examples/`` and the docs
hook, ``tools/``, ``bench/``).

The rule, read from the source (no types): an access to a private attribute ``X._name`` (one
leading underscore or a mangled ``__name``, not a ``__dunder__``; also
``getattr``/``setattr``/``hasattr``/``delattr`` with the name as a constant string) whose
receiver is not ``self`` or ``cls`` is redislock's own only if ``_name`` is defined in the
module that uses it or in a redislock module that it imports (any ``import`` in the file,
``TYPE_CHECKING`` ones too): as a function, a class, a name assigned at any level (class
attributes, dataclass and NamedTuple fields), a ``self._x``/``cls._x`` attribute, a
``__slots__`` entry, an import alias, or a module of the package (or, for ``bench/`` and
``tools/``, a module beside it). Anything else is another package's private attribute, as is
``from other_package import _name``. Only documented names with a leading underscore are
allowed: namedtuple's ``_replace``, ``_asdict``, ``_fields``, ``_make``,
``_field_defaults``, and ``sys._getframe``, ``os._exit``.

EXPECTED lists known uses still to be removed (none today): the test fails when a new one
appears and when one of them is gone without the set being updated. ``tools/`` and
``bench/`` are checked too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "redislock"

EXPECTED: set[tuple[str, str]] = set()
"""Known uses still to remove (none: the fan-out and the hub went to redis-py's public API)."""

DOCUMENTED = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})
"""namedtuple's API (documented with the underscore, so as not to clash with fields)."""
DOCUMENTED_OF = frozenset({("sys", "_getframe"), ("os", "_exit")})
"""Documented standard-library functions whose names start with an underscore."""

_ATTR_FUNCTIONS = ("getattr", "setattr", "hasattr", "delattr")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: str) -> str:
    """``src/redislock/aio/_fanout.py`` -> ``redislock.aio._fanout``; ``dev.py`` -> ``dev``."""
    parts = list(Path(path).with_suffix("").parts)
    if parts[0] == "src":
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.Module, name: str, is_package: bool) -> set[str]:
    """The redislock modules that module ``name`` imports (as dotted names; a ``from M
    import x`` also names ``M.x``, which may be a module)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + is_package]
                module = ".".join([*base, module] if module else base)
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return {m for m in found if m.split(".")[0] == PACKAGE}


def _defined(tree: ast.Module) -> set[str]:
    """Every name the module defines, at any level (see the module's docstring)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
                    elif _on_self(sub):
                        assert isinstance(sub, ast.Attribute)
                        names.add(sub.attr)
                if isinstance(target, ast.Name) and target.id == "__slots__" and node.value:
                    names |= {
                        c.value
                        for c in ast.walk(node.value)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str)
                    }
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


def _on_self(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("self", "cls")
    )


def _accesses(tree: ast.Module) -> Iterable[tuple[str, int, str | None]]:
    """Each private attribute used on a receiver other than self/cls: (name, line, the
    receiver's name if it is a plain name)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and not _on_self(node):
            receiver = node.value.id if isinstance(node.value, ast.Name) else None
            yield node.attr, node.lineno, receiver
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _ATTR_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))
        ):
            receiver = node.args[0].id if isinstance(node.args[0], ast.Name) else None
            yield node.args[1].value, node.lineno, receiver


def private_uses(sources: dict[str, str]) -> dict[tuple[str, str], list[int]]:
    """``{(path, name): lines}``: the other packages' private names that the modules in
    ``sources`` (path relative to the checkout: source) use. The modules that the rule
    may find a definition in are those of ``sources`` (so give it every module of the
    package)."""
    trees = {path: ast.parse(text, path) for path, text in sources.items()}
    names = {module_name(path): path for path in trees}
    defined = {path: _defined(tree) for path, tree in trees.items()}
    found: dict[tuple[str, str], list[int]] = {}
    for path, tree in trees.items():
        name = module_name(path)
        imported = _imported(tree, name, path.endswith("__init__.py"))
        known = set(defined[path]) | {Path(path).stem}
        for module in imported:
            known |= set(module.split("."))  # redislock._core.keys: _core is ours
            if module in names:
                known |= defined[names[module]]
        for attr, line, receiver in _accesses(tree):
            if attr in known or attr in DOCUMENTED or (receiver, attr) in DOCUMENTED_OF:
                continue
            found.setdefault((path, attr), []).append(line)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                sibling = f"{Path(path).parent.as_posix()}/{node.module}.py" in sources
                foreign = node.module.split(".")[0] != PACKAGE and not sibling
                for alias in node.names:
                    if foreign and _private(alias.name):
                        found.setdefault((path, alias.name), []).append(node.lineno)
    return found


def _checked() -> dict[str, str]:
    paths = [
        *sorted((ROOT / "src" / PACKAGE).rglob("*.py")),
        ROOT / "dev.py",
        ROOT / "docs" / "hooks" / "generate.py",
        *sorted((ROOT / "tools").glob("*.py")),
        *sorted((ROOT / "bench").glob("*.py")),
        *sorted((ROOT / "examples").glob("*.py")),
    ]
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in paths}


def test_no_private_attribute_of_another_package() -> None:
    found = private_uses(_checked())
    new = {key: lines for key, lines in found.items() if key not in EXPECTED}
    assert not new, (
        "private attributes of another package (use its public API; if the name is "
        "redislock's own, define it where the rule can see it: see this test's "
        f"docstring): {sorted(new.items())}"
    )
    gone = EXPECTED - set(found)
    assert not gone, f"no longer used: remove them from EXPECTED: {sorted(gone)}"
    assert not any("/cli/" in path for path, _ in EXPECTED)


def test_the_rule_tells_our_private_names_from_other_packages() -> None:
    ours = """
from dataclasses import dataclass
from typing import NamedTuple
class Mine:
    __slots__ = ("_slot",)
    _level = 1
    def __init__(self) -> None:
        self._attr = 2
@dataclass
class Data:
    _field: int
class Row(NamedTuple):
    _col: int
def _helper() -> None: ...
_CONSTANT = 3
"""
    user = """
import os, sys, argparse
from redislock import ours
from redislock.ours import Mine
def f(m: Mine, conn, parser, row) -> None:
    m._attr, m._slot, m._level, m._field, m._col, ours._helper(), ours._CONSTANT
    sys._getframe(1), os._exit, row._replace(a=1), row._asdict(), m.__dict__
    conn._sock                         # 1: another package's (redis-py's Connection)
    getattr(conn, "_parser", None)     # 2
    parser._actions                    # 3
    super()._option_string_actions     # 4
    row._exit                          # 5: only os._exit is documented
from argparse import _SubParsersAction  # 6
"""
    stranger = """
def g(m) -> None:
    m._attr   # 7: defined by redislock.ours, which this module does not import
"""
    found = private_uses(
        {
            "src/redislock/ours.py": ours,
            "src/redislock/user.py": user,
            "src/redislock/stranger.py": stranger,
        }
    )
    assert sorted(found) == [
        ("src/redislock/stranger.py", "_attr"),
        ("src/redislock/user.py", "_SubParsersAction"),
        ("src/redislock/user.py", "_actions"),
        ("src/redislock/user.py", "_exit"),
        ("src/redislock/user.py", "_option_string_actions"),
        ("src/redislock/user.py", "_parser"),
        ("src/redislock/user.py", "_sock"),
    ]
    assert found[("src/redislock/user.py", "_sock")] == [8]
