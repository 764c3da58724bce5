# SPDX-License-Identifier: MIT
"""The sync shells are generated from the asyncio ones (tools/gen_sync.py): none is stale,
each names its source, and no hand-written sync module has a hand-written asyncio twin."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import gen_sync  # noqa: E402


@pytest.mark.parametrize("name", gen_sync.SOURCES)
def test_generated_file_is_fresh(name: str) -> None:
    path = gen_sync.SYNC / name
    assert path.read_text(encoding="utf-8") == gen_sync.generated(name), (
        f"src/redislock/sync/{name} is stale: run `python3 dev.py gen`"
    )


@pytest.mark.parametrize("name", gen_sync.SOURCES)
def test_generated_file_names_its_source(name: str) -> None:
    first = (gen_sync.SYNC / name).read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(f"# Generated from src/redislock/aio/{name} by tools/gen_sync.py")


def test_every_sync_module_is_generated_or_hand_written_by_design() -> None:
    sync = {p.name for p in gen_sync.SYNC.glob("*.py")}
    aio = {p.name for p in gen_sync.AIO.glob("*.py")}
    assert sync == aio, "each flavour has the same modules"
    assert sync == set(gen_sync.SOURCES) | gen_sync.HAND_WRITTEN
    assert len(gen_sync.SOURCES) >= 9  # _driver, _lease and the seven kinds' shells


def test_generated_code_has_no_asyncio_left() -> None:
    for name in gen_sync.SOURCES:
        tree = ast.parse((gen_sync.SYNC / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            assert not isinstance(node, ast.AsyncFunctionDef | ast.Await | ast.AsyncWith), name
            if isinstance(node, ast.Name | ast.Attribute):
                text = ast.unparse(node)
                assert "asyncio" not in text, (name, text)
                assert ".aio" not in text, (name, text)
            if isinstance(node, ast.ImportFrom):
                assert node.module is None or "aio" not in node.module.split("."), name


def test_docstring_rules() -> None:
    """What only asyncio has is dropped from the sync docstrings; names are swapped."""
    source = '''
class AsyncThing:
    """An :class:`AsyncLock` for the calling task.

    Cancellation (asyncio): a cancelled call
    gives everything back.

    Raises:
        NotOwnedError: the calling task holds nothing.
        LockUsageError: (asyncio) not called from inside a task.
        asyncio.CancelledError: cancelled; a key this call
            may have set is deleted.
    """

    async def go(self) -> None:
        async with self.lock:  # an AsyncLock
            await self.run("the calling task holds nothing")
'''
    out = gen_sync.convert(source)
    assert "Cancellation" not in out
    assert "CancelledError" not in out
    assert "LockUsageError" not in out
    assert "A :class:`Lock` for the calling thread." in out
    assert "NotOwnedError: the calling thread holds nothing." in out
    assert "    def go(self) -> None:" in out
    assert "with self.lock:  # a Lock" in out
    assert 'self.run("the calling thread holds nothing")' in out
