# SPDX-License-Identifier: MIT
"""mkdocs hook: pages made at build time, so they cannot drift from the code and the data.

- ``cli.md``: the ``<!-- cli-reference -->`` marker becomes one section per subcommand of
  ``redislock.cli._parser()`` (its help line and its ``--help`` text);
- ``performance.md``: charts drawn with matplotlib from ``docs/data/uncontended.json`` and
  ``docs/data/waiters.json`` (the benchmarks' ``--json`` output), added to the site as files;
- ``torture-results.md``: the ``<!-- torture-results -->`` marker becomes tables of the
  recorded ``redislock torture --json`` report in ``docs/data/torture.json``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data"


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``parser``, by name, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices.items())
    return {}


def _help_lines(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def cli_reference() -> str:
    """Markdown for every subcommand of the CLI's argparse parser."""
    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: make it fixed
    if str(ROOT / "src") not in sys.path:  # the checkout's code, installed or not
        sys.path.insert(0, str(ROOT / "src"))
    from redislock.cli import _parser

    parser = _parser()
    out = ["## `redislock`", "", "```text", parser.format_help().rstrip(), "```", ""]
    helps = _help_lines(parser)
    for name, sub in subcommands(parser).items():
        out += [f"## `redislock {name}`", ""]
        if helps.get(name):
            out += [helps[name][:1].upper() + helps[name][1:] + ".", ""]
        out += ["```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def _row_p50(row: dict[str, Any]) -> float | None:
    for key in ("p50_us", "p50", "median_us"):
        if isinstance(row.get(key), int | float):
            return float(row[key])
    return None


def charts() -> dict[str, bytes]:
    """PNG charts (file name -> bytes) from the benchmarks' JSON outputs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, bytes] = {}
    unc = DATA / "uncontended.json"
    if unc.exists():
        labels, ratios = uncontended_ratios(_load(unc.name))
        fig, ax = plt.subplots(figsize=(7, 0.45 * len(labels) + 1))
        colors = ["#c0392b" if "redislock" in lab else "#7f8c8d" for lab in labels[::-1]]
        ax.barh(labels[::-1], ratios[::-1], color=colors)
        ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel("p50 of acquire+release, relative to the sync raw pair (lower is better)")
        ax.set_title("Uncontended acquire+release (redislock in red)")
        out["uncontended.png"] = _png(fig)
        plt.close(fig)
    wai = DATA / "waiters.json"
    if wai.exists():
        rows = waiters_rows(_load(wai.name))
        if rows:
            labels = [f"{r['scenario']} · {r['title']}" for r in rows][::-1]
            panels = (
                ("error_count", "waiters that failed"),
                ("requests_per_acq", "server requests per acquisition"),
                ("wake_p99_ms", "wake-up latency p99 (ms)"),
            )
            fig, axes = plt.subplots(1, 3, figsize=(12, 0.35 * len(labels) + 1.2), sharey=True)
            for ax, (key, title) in zip(axes, panels, strict=True):
                values = [float(r[key] or 0) for r in rows][::-1]
                colors = ["#c0392b" if "redislock" in lab else "#7f8c8d" for lab in labels]
                ax.barh(labels, values, color=colors)
                ax.set_title(title + "\n(lower is better)", fontsize=10)
            fig.suptitle("Many waiters in one process (redislock in red)")
            out["waiters.png"] = _png(fig)
            plt.close(fig)
    return out


def uncontended_ratios(data: dict[str, Any]) -> tuple[list[str], list[float]]:
    """Row labels and their p50 relative to row 1 (the sync raw pair)."""
    rows = data.get("rows", [])
    named = [(str(r.get("name") or r.get("row")), _row_p50(r)) for r in rows]
    named = [(n, p) for n, p in named if p]
    base = next((p for n, p in named if "raw pair, sync" in n), None) or named[0][1]
    return [n for n, _ in named], [round(p / base, 2) for _, p in named]  # type: ignore[operator]


def waiters_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The waiters benchmark's rows that ran (each with its error count and latencies)."""
    rows = data.get("rows", [])
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("error_count"), int)]


def torture_tables() -> str:
    """Markdown tables of the recorded ``redislock torture --json`` report (a list of runs)."""
    runs = _load("torture.json")
    out: list[str] = []
    for run in runs:
        cfg = run["config"]
        out += [f"## Scenario `{cfg['scenario']}`", "", "| setting | value |", "|---|---|"]
        for key in ("flavour", "processes", "names", "duration", "seed", "lease"):
            out.append(f"| {key} | `{cfg.get(key)}` |")
        out.append(f"| faults | {', '.join(f'`{f}`' for f in cfg.get('faults', []))} |")
        out += [
            f"| elapsed (s) | `{run['elapsed']}` |",
            f"| cycles | `{run['cycles']}` |",
            f"| faults applied | `{run['faults_applied']}` |",
            f"| passed | **{'yes' if run['passed'] else 'NO'}** |",
            "",
            "### Checks",
            "",
            "| check | value | goal | result | detail |",
            "|---|---|---|---|---|",
        ]
        for line in run["report"]["lines"]:
            cells = [line["name"], line["value"], line["goal"], line["result"], line["detail"]]
            out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
        counts = run["report"].get("counts", {})
        ops = counts.get("ops", {})
        if ops:
            cols = list(next(iter(ops.values())))
            out += ["", "### Operations", "", "| op | " + " | ".join(cols) + " |"]
            out.append("|---|" + "---|" * len(cols))
            for op, row in ops.items():
                out.append(f"| {op} | " + " | ".join(str(row[c]) for c in cols) + " |")
        faults = counts.get("faults", {})
        if faults:
            out += ["", "### Faults injected", "", "| fault | times |", "|---|---|"]
            out += [f"| `{k}` | {v} |" for k, v in sorted(faults.items())]
        out.append("")
    return "\n".join(out)


def on_files(files: Files, config: Any) -> Files:
    from mkdocs.structure.files import File

    for name, content in charts().items():
        files.append(File.generated(config, f"img/{name}", content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if "<!-- cli-reference -->" in markdown:
        markdown = markdown.replace("<!-- cli-reference -->", cli_reference())
    if "<!-- torture-results -->" in markdown:
        markdown = markdown.replace("<!-- torture-results -->", torture_tables())
    return markdown
