# SPDX-License-Identifier: MIT
"""Generate the sync shells from the asyncio ones: ``src/redislock/aio/X.py`` is the only
source; ``src/redislock/sync/X.py`` is written from it and checked in.

    python3 tools/gen_sync.py          # rewrite the generated files
    python3 tools/gen_sync.py --check  # exit 1 if one is stale (the test suite checks too)

The code is turned by unasync (https://github.com/python-trio/unasync; elasticsearch-py
generates its sync client with it, httpcore does the same with a script of its own):
``async``/``await`` go, ``__aenter__`` becomes ``__enter__``, and the names in
:data:`NAMES` are swapped. Strings and comments (docstrings, messages) get the same names
and the phrases in :data:`PHRASES`; in docstrings, what only asyncio has is dropped: a line
marked ``(asyncio)`` or naming ``asyncio.CancelledError:`` (with the lines indented under
it), and a paragraph that starts ``Cancellation (asyncio):``. Then ruff sorts the imports
and formats the result.
What differs by design is hand-written in each flavour (:data:`HAND_WRITTEN`): ``_flavour``
(client types, owner, sleep), ``_steps`` (acquire/release steps; cancellation in asyncio),
``_fanout`` (Redlock's masters), ``_hub`` (the shared wake-up channel: a reader task or
thread), ``_guard`` (``guard()``: cancels a task, checks in a thread) and ``renewer`` (the
watchdog).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import tokenize_rt  # type: ignore[import-untyped]
import unasync  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
AIO = ROOT / "src" / "redislock" / "aio"
SYNC = ROOT / "src" / "redislock" / "sync"

HAND_WRITTEN = frozenset(
    {
        "__init__.py",
        "_fanout.py",
        "_flavour.py",
        "_guard.py",
        "_hub.py",
        "_state.py",
        "_steps.py",
        "renewer.py",
    }
)
"""The modules written by hand in each flavour: what differs by design."""

SOURCES = tuple(sorted(p.name for p in AIO.glob("*.py") if p.name not in HAND_WRITTEN))
"""The asyncio modules the sync flavour is generated from (by file name, in aio/): all
but :data:`HAND_WRITTEN`, so a new shell needs no entry here."""


def _names() -> dict[str, str]:
    """Identifiers swapped in code: every ``Async<Name>`` the sources define or use becomes
    ``<Name>`` (unasync's own list adds ``__aenter__`` and friends), and ``aio`` ``sync``."""
    found: set[str] = set()
    for name in SOURCES:
        found.update(re.findall(r"\bAsync[A-Z]\w*", (AIO / name).read_text(encoding="utf-8")))
    names = {n: n.removeprefix("Async") for n in sorted(found)}
    names["aio"] = "sync"
    return names


NAMES = _names()

PHRASES = (
    (r"\bredis\.asyncio\.RedisCluster\b", "redis.cluster.RedisCluster"),
    (r"\bredis\.asyncio\.Redis\b", "redis.Redis"),
    (r"\bvalkey\.asyncio\.ValkeyCluster\b", "valkey.cluster.ValkeyCluster"),
    (r"\bvalkey\.asyncio\.Valkey\b", "valkey.Valkey"),
    (r"\bredislock\.aio\b", "redislock.sync"),
    (r"\basync with\b", "with"),
    (r"\bawait ", ""),
    (r"\ban (?=(:class:`~?|``)?Async[A-Z])", "a "),  # "an AsyncLock" -> "a Lock"
    (r"\bAn (?=(:class:`~?|``)?Async[A-Z])", "A "),
    (r"\bAsync[A-Z]\w*\b", None),  # by NAMES
    (r"\btasks\b", "threads"),
    (r"\btask\b", "thread"),
    (r"\bTask\b", "Thread"),
)
"""Swaps in strings and comments, in order (``None``: the name's entry in :data:`NAMES`)."""

_MARK = "(asyncio)"
_CANCELLED = "asyncio.CancelledError:"
_PARAGRAPH = "Cancellation (asyncio):"


def _phrases(text: str) -> str:
    for pattern, swap in PHRASES:
        if swap is None:
            text = re.sub(pattern, lambda m: NAMES.get(m.group(0), m.group(0)), text)
        else:
            text = re.sub(pattern, swap, text)
    return text


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _drop_asyncio_only(doc: str) -> str:
    """Drop what only the asyncio flavour has from a docstring's text."""
    lines = doc.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(_PARAGRAPH):
            i += 1
            while i < len(lines) and lines[i].strip():
                i += 1
            i += 1  # and the blank line after it
            continue
        if _MARK in line or stripped.startswith(_CANCELLED):
            depth = _indent(line)
            i += 1
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) > depth:
                i += 1
            continue
        out.append(line)
        i += 1
    # A section header ("Raises:") whose every entry was asyncio-only goes too, with the
    # blank line before it.
    k = 0
    while k < len(out):
        header = out[k].strip()
        if re.fullmatch(r"[A-Z][a-z]+:", header):
            nxt = out[k + 1] if k + 1 < len(out) else ""
            if not nxt.strip() or _indent(nxt) <= _indent(out[k]):
                if k > 0 and not out[k - 1].strip():
                    del out[k - 1 : k + 1]
                    k -= 1
                else:
                    del out[k]
                continue
        k += 1
    return "\n".join(out)


def _is_docstring(tokens: list[tokenize_rt.Token], i: int) -> bool:
    """A string that stands alone as a statement (after a newline or an indent)."""
    j = i - 1
    while j >= 0 and tokens[j].name in {"UNIMPORTANT_WS", "INDENT", "DEDENT", "NL", "COMMENT"}:
        if tokens[j].name == "INDENT":
            return True
        j -= 1
    return j < 0 or tokens[j].name in {"NEWLINE", "INDENT", "DEDENT"}


def _unasync(source: str) -> str:
    """unasync's conversion of one module's text, through its public API
    (``unasync_files``, which reads and writes files: a copy under a temporary
    ``.../aio/`` directory becomes ``.../sync/``)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "aio" / "module.py"
        src.parent.mkdir()
        src.write_text(source, encoding="utf-8")
        rule = unasync.Rule("/aio/", "/sync/", additional_replacements=NAMES)
        unasync.unasync_files([str(src)], rules=[rule])
        return (Path(tmp) / "sync" / "module.py").read_text(encoding="utf-8")


def convert(source: str) -> str:
    """The sync module for the text of an asyncio module (not yet formatted)."""
    tokens = tokenize_rt.src_to_tokens(_unasync(source))
    for i, token in enumerate(tokens):
        if token.name == "STRING":
            text = token.src
            if _is_docstring(tokens, i):
                text = _drop_asyncio_only(text)
            tokens[i] = token._replace(src=_phrases(text))
        elif token.name == "COMMENT":
            tokens[i] = token._replace(src=_phrases(token.src))
    out: str = tokenize_rt.tokens_to_src(tokens)
    return out


def _ruff(text: str, target: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(target), "-"]
    done = subprocess.run(cmd, input=text, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ruff {args[0]} failed on {target}: {done.stderr}")
    return done.stdout


def _format(text: str, target: Path) -> str:
    """Imports sorted again (``aio`` and ``sync`` sort differently), then formatted."""
    text = _ruff(text, target, "check", "--fix", "--select", "I", "--quiet", "--exit-zero")
    return _ruff(text, target, "format")


def generated(name: str) -> str:
    """The full text of ``sync/<name>``, header and all."""
    source = (AIO / name).read_text(encoding="utf-8")
    header = (
        f"# Generated from src/redislock/aio/{name} by tools/gen_sync.py: do not edit.\n"
        "# Edit that file, then run `python3 dev.py gen`.\n"
    )
    return _format(header + convert(source), SYNC / name)


def stale() -> list[str]:
    """The generated files whose text differs from what the sources give now."""
    out = []
    for name in SOURCES:
        target = SYNC / name
        if not target.exists() or target.read_text(encoding="utf-8") != generated(name):
            out.append(f"src/redislock/sync/{name}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale()
        for path in bad:
            print(f"stale: {path} (run `python3 dev.py gen`)")
        return 1 if bad else 0
    for name in SOURCES:
        (SYNC / name).write_text(generated(name), encoding="utf-8")
        print(f"wrote src/redislock/sync/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
