# SPDX-License-Identifier: MIT
"""The documentation site: it builds strictly, its CLI reference is the parser's, and every
`redislock ...` line it shows (README.md too) parses with the real CLI parser."""

from __future__ import annotations

import argparse
import copy
import difflib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis

from redislock.cli import build_parsers, parse
from redislock.cli._args import command_of

ROOT = Path(__file__).resolve().parents[1]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hook", ROOT / "docs/hooks/generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_lists_every_subcommand_and_option() -> None:
    hook = _hook()
    text: str = hook.cli_reference()
    parsers = build_parsers()
    subs = hook.subcommands(parsers)
    assert len(subs) >= 8  # run, once, elect, inspect, list, release, demo, server, ...
    for name, sub in subs.items():
        assert f"## `redislock {name}`" in text
        assert len(sub.options) >= 6, name  # -h, --help and the 4 shared: recorded
        for flag in sub.options:
            assert flag in text, (name, flag)
    assert {"--version", "--url", "-q"} <= set(parsers.top.options)
    for flag in parsers.top.options:
        assert flag in text, flag


def test_torture_and_benchmark_pages_render_from_the_committed_data() -> None:
    hook = _hook()
    tables: str = hook.torture_tables()
    assert "| stale_writes_accepted | 0 | 0 | pass |" in tables
    labels, ratios = hook.uncontended_ratios(hook._load("uncontended.json"))
    assert any("redislock Lock" in label for label in labels)
    assert 1.0 in ratios  # the sync raw pair, against itself
    assert hook.waiters_rows(hook._load("waiters.json"))


class _Reads(dict[str, Any]):
    """A JSON object that records the paths of the fields read from it (list items as *)."""

    def __init__(self, data: dict[str, Any], path: tuple[str, ...], seen: set[tuple[str, ...]]):
        super().__init__(data)
        self.path, self.seen = path, seen

    def __getitem__(self, key: str) -> Any:
        self.seen.add((*self.path, key))
        return _track(super().__getitem__(key), (*self.path, key), self.seen)

    def get(self, key: str, default: Any = None) -> Any:  # a read too: no silent default
        self.seen.add((*self.path, key))
        return _track(super().get(key, default), (*self.path, key), self.seen)


def _track(value: Any, path: tuple[str, ...], seen: set[tuple[str, ...]]) -> Any:
    if isinstance(value, dict):
        return _Reads(value, path, seen)
    if isinstance(value, list):
        return [_track(item, (*path, "*"), seen) for item in value]
    return value


def _without(data: Any, path: tuple[str, ...]) -> bool:
    """Delete the field at ``path`` (``*``: in every item of a list); False if none was there."""
    if not path:
        return False
    head, rest = path[0], path[1:]
    if head == "*":
        found = [_without(item, rest) for item in data] if isinstance(data, list) else []
        return any(found)
    if not isinstance(data, dict) or head not in data:
        return False
    if not rest:
        del data[head]
        return True
    return _without(data[head], rest)


@pytest.mark.parametrize("png", list(_hook().CHARTS))
def test_each_chart_reads_fields_its_data_file_has_and_fails_without_them(
    png: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed data file has every field the chart and its page section read, and a
    file without one of them fails (KeyError) instead of drawing a chart with a gap."""
    hook = _hook()
    name, draw = hook.CHARTS[png]
    data = json.loads((ROOT / "docs" / "data" / name).read_text())
    assert data["rows"], name
    assert draw(data)[:4] == b"\x89PNG"
    monkeypatch.setattr(hook, "bars", lambda *args, **kwargs: b"")  # the fields, not the drawing

    def read(data: dict[str, Any]) -> None:
        hook._run_notes("command", data, name.removesuffix(".json") in hook.INFO)
        draw(data)

    seen: set[tuple[str, ...]] = set()
    read(_track(data, (), seen))
    assert ("env", "load_before") in seen
    assert ("goals", "*", "line") in seen
    assert len(seen) >= 10, seen
    for path in sorted(seen):
        broken = copy.deepcopy(data)
        assert _without(broken, path), path
        with pytest.raises(KeyError):
            read(broken)


def test_the_performance_page_names_each_recorded_run() -> None:
    page = (ROOT / "docs" / "performance.md").read_text()
    for png, (name, _) in _hook().CHARTS.items():
        assert f"<!-- perf-run {name.removesuffix('.json')} -->" in page, name
        assert f"(img/{png})" in page, png


def test_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q"]
    cmd += ["-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    cli = (site / "cli" / "index.html").read_text()
    assert "redislock run" in cli
    assert "--ttl" in cli
    performance = (site / "performance" / "index.html").read_text()
    charts = _hook().CHARTS
    assert len(charts) >= 6  # uncontended, waiters, contention, redlock, bulk, renewals
    for png in charts:
        assert (site / "img" / png).stat().st_size > 1000, png
        assert f'src="../img/{png}"' in performance, png
    assert performance.count("Recorded with <code>python bench/") == len(charts)
    api = (site / "api" / "index.html").read_text()
    assert "AcquireTimeoutError" in api
    assert "fencing_token" in api
    frameworks = (site / "howto-frameworks" / "index.html").read_text()
    assert "LockDependency" in frameworks  # examples/ included, not copied
    # mkdocs --strict checks that a linked page exists, not its #anchor: check each here
    links = 0
    for page in sorted((ROOT / "docs").glob("*.md")):
        for target, anchor in re.findall(r"\]\(([\w-]*)(?:\.md)?#([\w-]+)\)", page.read_text()):
            stem = target or page.stem
            html = site / ("index.html" if stem == "index" else f"{stem}/index.html")
            assert f'id="{anchor}"' in html.read_text(), (page.name, target, anchor)
            links += 1
    assert links >= 5, links


# The library snippets a newcomer runs first work on a machine without Redis.

_PYTHON = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start : end if end >= 0 else len(text)]


@pytest.fixture
def private_runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A private runtime dir for the embedded server (stopped and removed afterwards)."""
    from tests.test_cli import private_cli_env

    yield from private_cli_env(monkeypatch)


def test_the_first_library_snippets_run_without_a_redis(private_runtime: dict[str, str]) -> None:
    """getting-started's and the README's first library snippets, run as shown, with the
    reader's ``build_report`` and ``store``: the lock is held (by redislock, with a fencing
    token) while ``store`` runs, and released after; the embedded server is the only Redis."""
    from redislock.server import embedded_status, ensure_embedded

    started = (ROOT / "docs/getting-started.md").read_text()
    readme = (ROOT / "README.md").read_text()
    snippets = [
        _PYTHON.findall(_section(started, "## The library in a few lines"))[0],
        _PYTHON.findall(_section(readme, "## The library"))[0],
        *[s for s in _PYTHON.findall(readme) if "ensure_embedded" in s],
    ]
    snippets = list(dict.fromkeys(snippets))
    assert len(snippets) == 3, snippets
    assert embedded_status() is None  # nothing running yet in the private runtime dir
    stored: list[tuple[str, int, int]] = []
    try:
        for snippet in snippets:
            assert "ensure_embedded()" in snippet, snippet  # never redis.Redis() (localhost)

            def store(report: str, *, fence: int) -> None:
                probe = redis.Redis.from_url(ensure_embedded())
                held = probe.exists("redislock:{nightly-report}")
                stored.append((report, fence, held))
                probe.close()

            namespace: dict[str, Any] = {"build_report": lambda: "report", "store": store}
            exec(compile(snippet, "<snippet>", "exec"), namespace)
        assert [s[0] for s in stored] == ["report", "report"]  # the last snippet has `...`
        assert all(held == 1 and fence >= 1 for _, fence, held in stored), stored
        assert stored[1][1] > stored[0][1]  # each acquisition a greater token
        after = redis.Redis.from_url(ensure_embedded())
        assert after.exists("redislock:{nightly-report}") == 0  # released at the end
        after.close()
    finally:
        from redislock.server import stop_embedded

        stop_embedded()


# Every `redislock ...` line the docs show must parse with the real CLI parser.

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
_PROGRAM = r"(?:[\w.+-]*/)*redislock"  # redislock, /usr/local/bin/redislock, venv/bin/redislock
_INLINE = re.compile(rf"(?<!`)`({_PROGRAM} [^`]+)`(?!`)")
_OPTIONAL = re.compile(r"\[(-[^\[\]]*)\]")  # [--json], [--match 'night*']: an optional part
_CHOICE = re.compile(r"^[a-z]+(\|[a-z]+)+$")  # status|start|stop: one of
_SHELL_END = re.compile(r"^(\||\|\||&&|;|&|\d*[<>].*)$")  # a pipe, a list, a redirection
_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _redislock_words(tokens: list[str], *, skip: int = 0) -> list[str] | None:
    """The words after the ``redislock`` program in ``tokens`` (None: not a redislock line).
    Leading ``VAR=value`` words and ``skip`` words (cron's schedule) come before it."""
    rest = tokens[skip:]
    while rest and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", rest[0]):
        rest = rest[1:]
    if len(rest) < 2 or rest[0].rsplit("/", 1)[-1] != "redislock":
        return None
    words = rest[1:]
    for i, word in enumerate(words):
        if _SHELL_END.match(word):
            return words[:i]
    return words


def _variants(line: str) -> list[list[str]]:
    """A synopsis line's concrete forms: without and with its optional parts, and each of
    its a|b|c choices."""
    forms = [_OPTIONAL.sub("", line), _OPTIONAL.sub(r"\1", line)]
    out: list[list[str]] = []
    for form in dict.fromkeys(forms):
        words = shlex.split(form, comments=True)
        expanded: list[list[str]] = [[]]
        for word in words:
            choices = word.split("|") if _CHOICE.match(word) else [word]
            expanded = [[*done, choice] for done in expanded for choice in choices]
        out += expanded
    return out


def _logical_lines(text: str) -> list[str]:
    """Lines with their backslash continuations joined, a leading ``$ `` prompt removed."""
    text = re.sub(r"\\\n\s*", " ", text)
    return [line.strip().removeprefix("$ ") for line in text.splitlines()]


def doc_cli_lines(text: str) -> list[list[str]]:
    """The redislock invocations of a Markdown page, as argument lists (without the program):
    in ```sh/console/bash/shell blocks, cron lines, systemd ``ExecStart=`` lines, 4-space
    indented code, and inline code of three or more words."""
    found: list[list[str]] = []

    def add(line: str, skips: tuple[int, ...] = (0,)) -> None:
        if not line or line.startswith("#"):
            return
        for tokens in _variants(line):
            for skip in skips:
                words = _redislock_words(tokens, skip=skip)
                if words is not None:
                    found.append(words)
                    break

    for lang, body in _FENCE.findall(text):
        for line in _logical_lines(body):
            if lang in ("sh", "console", "bash", "shell"):
                add(line)
            elif lang == "cron" and not re.match(r"^[A-Z_]+=", line):
                add(line, skips=(1, 2) if line.startswith("@") else (5, 6))  # user or not
            elif lang == "ini" and line.startswith("ExecStart="):
                add(line.removeprefix("ExecStart=").lstrip("-@+!"))
    prose = _FENCE.sub("", text).splitlines()
    for i, line in enumerate(prose):
        if re.match(rf"^ {{4}}(\$ )?{_PROGRAM} ", line):
            command, j = line, i
            while command.endswith("\\") and j + 1 < len(prose):  # continued on the next line
                j += 1
                command = command[:-1] + " " + prose[j]
            add(command.strip().removeprefix("$ "))
    subcommands = list(_hook().subcommands(build_parsers()))
    for span in _INLINE.findall("\n".join(prose)):
        words = span.split()  # `redislock NAME ...`: a subcommand or a likely misspelling
        if len(words) >= 3 and difflib.get_close_matches(words[1], subcommands, cutoff=0.6):
            add(" ".join(words))
    return found


def scheduled_programs(text: str) -> list[str]:
    """How the cron lines and systemd ``ExecStart=`` lines of a Markdown page that run
    redislock name the program (``redislock``, ``/usr/local/bin/redislock``, ...)."""
    found: list[str] = []
    starts: tuple[int, ...]
    for lang, body in _FENCE.findall(text):
        for line in _logical_lines(body):
            if not line or line.startswith("#"):
                continue
            if lang == "cron" and not re.match(r"^[A-Z_]+=", line):
                fields = shlex.split(line, comments=True)
                starts = (1, 2) if line.startswith("@") else (5, 6)  # with a user or not
            elif lang == "ini" and line.startswith("ExecStart="):
                fields = shlex.split(line.removeprefix("ExecStart=").lstrip("-@+!"))
                starts = (0,)
            else:
                continue
            for start in starts:
                if len(fields) > start and fields[start].rsplit("/", 1)[-1] == "redislock":
                    found.append(fields[start])
                    break
    return found


def parse_cli(words: list[str]) -> argparse.Namespace:
    """``words`` through the CLI's own parsing (CMD split off as ``main`` does); SystemExit
    on a usage error, as ``redislock`` would exit 64."""
    parsers = build_parsers()
    args = parse(parsers, list(words))
    if parsers.commands[args.command].cmd:  # run, once, elect
        command_of(args, parsers.commands[args.command].parser)
    return args


def test_parse_cli_rejects_what_redislock_rejects(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_cli(["run", "job", "-n", "-E", "0", "-q", "./job.sh", "-x"]).cmd == [
        "./job.sh",
        "-x",
    ]
    for bad in (
        ["force-release", "job"],  # no such subcommand
        ["run", "job"],  # no CMD
        ["run", "job", "--no-such-flag", "true"],
        ["once", "job", "--no-wait", "true"],  # --no-wait is run's alias only
        ["demo", "--workers", "N"],
    ):
        with pytest.raises(SystemExit) as caught:
            parse_cli(bad)
        assert caught.value.code == 64, bad
    capsys.readouterr()
    sample = "```sh\nredislock list [--json]  # x\nredislock server status|stop\n"
    sample += "/usr/local/bin/redislock top --once\n```\n"
    sample += "```cron\n15 2 * * *  report  redislock run job -n -- ./a.sh >/dev/null\n"
    sample += "@daily  /opt/venv/bin/redislock once job --period 86400 ./a.sh\n```\n"
    sample += "```ini\nExecStart=/usr/bin/redislock run job -w 5 ./a.sh\n```\n"
    sample += "Inline: `redislock inspect job --json`, not `redislock run`;\n"
    sample += "`/usr/local/bin/redislock list --json` and `venv/bin/redislock config --json`.\n"
    sample += "    /usr/local/bin/redislock release job --force\n"
    assert doc_cli_lines(sample) == [
        ["list"],
        ["list", "--json"],
        ["server", "status"],
        ["server", "stop"],
        ["top", "--once"],
        ["run", "job", "-n", "--", "./a.sh"],
        ["once", "job", "--period", "86400", "./a.sh"],
        ["run", "job", "-w", "5", "./a.sh"],
        ["release", "job", "--force"],
        ["inspect", "job", "--json"],
        ["list", "--json"],
        ["config", "--json"],
    ]
    assert scheduled_programs(sample) == [
        "redislock",
        "/opt/venv/bin/redislock",
        "/usr/bin/redislock",
    ]


@pytest.mark.parametrize("page", _PAGES, ids=lambda p: p.name)
def test_every_cli_line_of_the_docs_parses(page: Path) -> None:
    failures = []
    for words in doc_cli_lines(page.read_text()):
        try:
            parse_cli(words)
        except SystemExit as exc:
            failures.append(f"redislock {shlex.join(words)}  (exit {exc.code})")
    assert not failures, "\n".join(failures)


def test_cron_and_systemd_lines_name_redislock_by_an_absolute_path() -> None:
    """cron's PATH is /usr/bin:/bin and pip installs elsewhere (/usr/local/bin, a venv's
    bin/): a bare ``redislock`` in a crontab is "command not found"."""
    programs = [prog for page in _PAGES for prog in scheduled_programs(page.read_text())]
    assert len(programs) >= 5, programs  # README and command-line.md: cron + ExecStart; howto
    assert all(prog.startswith("/") for prog in programs), programs


def test_every_exit_status_of_the_help_is_in_the_command_line_page() -> None:
    """The exit statuses that ``--help`` lists (``server status``'s 3 among them) are all in
    the table of docs/command-line.md, and ``server --help`` says when status exits 3."""
    from redislock.cli import EXIT_CODES

    codes = re.findall(r"^  (\d+) ", EXIT_CODES, re.M)
    assert {"0", "1", "3", "64", "69", "75", "78", "79", "126", "127"} <= set(codes)
    page = (ROOT / "docs" / "command-line.md").read_text()
    table = "\n".join(line for line in page.splitlines() if line.startswith("| "))
    for code in codes:
        assert re.search(rf"^\| (\d+ / )?{code}( / \d+)? \|", table, re.M), code
    server = _hook().subcommands(build_parsers())["server"]
    assert "status exits 3 when the embedded server is not running" in server.format_help()


def test_the_docs_show_enough_cli_lines_to_check() -> None:
    total = sum(len(doc_cli_lines(page.read_text())) for page in _PAGES)
    assert total >= 60, total


_MERMAID = re.compile(r"^```mermaid\n(.*?)^```", re.M | re.S)


def test_concepts_draws_each_concept_as_a_sequence_diagram() -> None:
    text = (ROOT / "docs" / "concepts.md").read_text()
    sections = dict(re.findall(r"^## ([^\n]+)\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    concepts = ("Lease", "Renewal", "Loss", "Fencing", "Hand-off", "quorum", "replicas=k")
    for concept in (*concepts, "safety model"):
        [head] = [head for head in sections if concept in head]
        assert "```mermaid\nsequenceDiagram\n" in sections[head], head


def test_mermaid_texts_do_not_end_a_statement_early() -> None:
    """mermaid's sequence-diagram grammar ends a message or note text at ``;`` or ``#``: the
    rest of the line becomes a statement of its own, and the page shows a syntax error."""
    blocks = [(page.name, block) for page in _PAGES for block in _MERMAID.findall(page.read_text())]
    for name, block in blocks:
        for line in block.splitlines():
            text = line.split(":", 1)[1] if ":" in line else ""
            assert ";" not in text, (name, line)
            assert "#" not in text, (name, line)
    assert len(blocks) >= 9
