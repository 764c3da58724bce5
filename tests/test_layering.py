# SPDX-License-Identifier: MIT
"""The package's layering, read from its source (no server): no import cycle between
redislock's modules, and cores (``src/redislock/_core/``) that decide without I/O.

docs/architecture.md: cores yield operations; drivers (``aio/``, ``sync/``) perform them.
A cycle (the driver importing the hub, the hub importing the driver's ``execute``) or a
core that imports ``threading`` is where that line blurred before.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "redislock"

CORE_BANNED = frozenset(
    {"asyncio", "concurrent", "hiredis", "queue", "select", "selectors", "threading"}
)
"""Modules a core must not import: threads, event loops, sockets' readiness, the parser."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Ids of the nodes under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(sub) for sub in ast.walk(node))
    return found


def imports_of(name: str) -> set[str]:
    """The redislock modules ``name`` imports, at module level or inside functions (a lazy
    import is still a dependency), not counting those for annotations only."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:
                    found.add(full)
                elif base in MODULES:
                    found.add(base)
    found.discard(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_lazy_and_relative_imports() -> None:
    # The hub used to import the driver inside a function: that must count.
    assert "redislock.aio._state" in imports_of("redislock.aio._driver")
    assert "redislock.errors" in imports_of("redislock._core.lock")


def test_no_import_cycle_between_redislock_modules() -> None:
    graph = {name: imports_of(name) for name in MODULES}
    assert cycles(graph) == []


def _core_modules() -> list[str]:
    return [n for n in MODULES if n.startswith("redislock._core")]


@pytest.mark.parametrize("name", _core_modules())
def test_a_core_module_does_no_io(name: str) -> None:
    """No thread, event loop, readiness poll or reply parser under ``_core/``; ``socket``
    for ``gethostname`` only; no ``os.write`` / ``os.read``."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & CORE_BANNED, sorted(imported & CORE_BANNED)
    uses = {
        (ast.unparse(node.value), node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }
    socket_uses = {attr for base, attr in uses if base == "socket"}
    assert socket_uses <= {"gethostname"}, socket_uses
    assert not {("os", "write"), ("os", "read")} & uses
