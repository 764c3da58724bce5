# SPDX-License-Identifier: MIT
"""mkdocs hook: pages made at build time, so they cannot drift from the code and the data.

- ``cli.md``: the ``<!-- cli-reference -->`` marker becomes one section per subcommand of
  ``redislock.cli.build_parsers()`` (its help line and its ``--help`` text);
- ``performance.md``: charts drawn with matplotlib from ``docs/data/<bench>.json`` (the
  benchmarks' ``--json`` output, recorded by ``tools/record_perf.py``), added to the site as
  files (``CHARTS``);
- ``torture-results.md``: the ``<!-- torture-results -->`` marker becomes tables of the
  recorded ``redislock torture --json`` report in ``docs/data/torture.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from mkdocs.structure.files import Files

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data"
RED, GREY = "#c0392b", "#7f8c8d"


def subcommands(subs: Any) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers of ``redislock.cli.build_parsers()``, by name, in the order
    they were added."""
    return {name: command.parser for name, command in subs.commands.items()}


def cli_reference() -> str:
    """Markdown for every subcommand of the CLI's argparse parser."""
    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: make it fixed
    if str(ROOT / "src") not in sys.path:  # the checkout's code, installed or not
        sys.path.insert(0, str(ROOT / "src"))
    from redislock.cli import build_parsers

    subs = build_parsers()
    out = ["## `redislock`", "", "```text", subs.top.format_help().rstrip(), "```", ""]
    for name, command in subs.commands.items():
        out += [f"## `redislock {name}`", ""]
        if command.help:
            out += [command.help[:1].upper() + command.help[1:] + ".", ""]
        out += ["```text", command.parser.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


class Panel(NamedTuple):
    """One panel of a chart: a value per row (None: the row has none), and the goal."""

    title: str
    labels: list[str]
    values: list[float | None]
    goal: float | None = None  # drawn as a dashed line
    higher_is_better: bool = False
    log: bool = False


def _num(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def bars(title: str, panels: list[Panel], note: str = "") -> bytes:
    """PNG: horizontal bars per row, one panel each; redislock's rows in red, the goal dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    rows = max(len(p.labels) for p in panels)
    fig, axes = plt.subplots(
        1, len(panels), figsize=(3.6 * len(panels) + 3, 0.36 * rows + 1.6), layout="constrained"
    )
    previous: list[str] = []
    for ax, panel in zip(list(getattr(axes, "flat", [axes])), panels, strict=True):
        labels, values = panel.labels[::-1], panel.values[::-1]  # first row on top
        colors = [RED if "redislock" in label else GREY for label in labels]
        drawn = ax.barh(labels, [v or 0.0 for v in values], color=colors)
        if panel.labels == previous:  # the same rows as the panel on its left
            ax.tick_params(labelleft=False)
        previous = panel.labels
        ax.bar_label(drawn, [_num(v) for v in values], fontsize=8)
        if panel.goal is not None:
            ax.axvline(panel.goal, color="black", linestyle="--", linewidth=1)
            ax.annotate(
                f"goal {panel.goal:,g}",
                (panel.goal, 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=8,
                ha="left",
                va="bottom",
            )
        if panel.log:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
        elif max((v or 0.0 for v in values), default=0.0) <= 0 and panel.goal is None:
            ax.set_xlim(0, 1)  # all zero: an axis around 0 rather than -0.06..0.06
        ax.margins(x=0.2)
        better = "higher" if panel.higher_is_better else "lower"
        ax.set_title(f"{panel.title}\n({better} is better)", fontsize=10, pad=14)
    fig.suptitle(f"{title} (redislock in red)" + (f"\n{note}" if note else ""))
    png = _png(fig)
    plt.close(fig)
    return png


def uncontended_ratios(data: dict[str, Any]) -> tuple[list[str], list[float]]:
    """Row labels and their p50 relative to row 1 (the sync raw pair)."""
    named = [(str(r["name"]), float(r["p50_us"])) for r in data["rows"] if r["p50_us"]]
    base = next(p for n, p in named if "raw pair, sync" in n)
    return [n for n, _ in named], [round(p / base, 2) for _, p in named]


def uncontended_chart(data: dict[str, Any]) -> bytes:
    labels, ratios = uncontended_ratios(data)
    panel = Panel("p50 of acquire+release ÷ the sync raw pair's", labels, list(ratios), goal=1.5)
    return bars("Uncontended acquire+release", [panel], "goal: Lock 1.5x, AsyncLock 2x")


def waiters_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The waiters benchmark's rows that ran (each with its error count and latencies)."""
    return [r for r in data["rows"] if isinstance(r["error_count"], int)]


def waiters_chart(data: dict[str, Any]) -> bytes:
    rows = waiters_rows(data)
    labels = [f"{r['scenario']} · {r['title']}" for r in rows]
    limit = float(data["params"]["pool_max_connections"]) + 4  # bench/waiters.py's goal

    def panel(key: str, title: str, goal: float | None = None) -> Panel:
        return Panel(title, labels, [float(r[key] or 0) for r in rows], goal)

    return bars(
        "Many waiters in one process",
        [
            panel("error_count", "waiters that failed"),
            panel("peak_conns", "peak server connections", limit),
            panel("requests_per_acq", "server requests per acquisition"),
            panel("wake_p99_ms", "wake-up latency p99 (ms)"),
        ],
    )


def contention_chart(data: dict[str, Any]) -> bytes:
    rows = data["rows"]
    labels = [str(r["title"]) for r in rows]

    def metric(key: str) -> list[float | None]:
        return [None if r["metrics"] is None else float(r["metrics"][key]) for r in rows]

    return bars(
        f"{data['params']['procs']} processes, one lock, {data['params']['hold_ms']:g} ms held",
        [
            Panel(
                "lock busy %",
                labels,
                [None if b is None else 100 * b for b in metric("busy")],
                goal=90,
                higher_is_better=True,
            ),
            Panel("hand-off p99 (ms)", labels, metric("handoff_p99_ms"), goal=2),
            Panel("max wait (ms, log)", labels, metric("wait_max_ms"), goal=50, log=True),
            Panel(
                "requests per acquisition", labels, [r["requests_per_acq"] for r in rows], goal=3
            ),
        ],
        "goals: busy ≥ 90 %, hand-off p99 ≤ 2 ms, ≤ 3 requests; max wait ≤ 50 ms",
    )


def redlock_chart(data: dict[str, Any]) -> bytes:
    rows = data["rows"]
    lock = next(float(r["p50_us"]) for r in rows if r["slug"] == "lock")
    labels = [f"{r['title']} ({r['masters']})" for r in rows]
    ratios: list[float | None] = [float(r["p50_us"]) / lock if r["p50_us"] else None for r in rows]
    panel = Panel("p50 ÷ our Lock's p50 (1 master), log", labels, ratios, goal=1.5, log=True)
    return bars("Redlock (masters in brackets)", [panel], "goal: Redlock over 5 masters ≤ 1.5x")


def bulk_chart(data: dict[str, Any]) -> bytes:
    names = int(data["params"]["names"])
    rows = data["rows"]
    labels = [str(r["title"]) for r in rows]
    best = [r["best"] for r in rows]
    acquire: list[float | None] = [None if b is None else names / b["acquire_s"] for b in best]
    rates: list[float | None] = [
        None if b is None else names / (b["acquire_s"] + b["release_s"]) for b in best
    ]
    mem = data["memory"]
    panels = [
        Panel(f"locks/s acquired, {names:,} names", labels, acquire, higher_is_better=True),
        Panel("locks/s acquired and released", labels, rates, goal=30_000, higher_is_better=True),
    ]
    if not mem:
        raise KeyError("bulk.json has no memory rows: record it with --mem-names > 0")
    # "in all": the lock key and the name's share of the per-slot fencing counters
    mem_labels = [f"redislock {m['what']}: {part}" for m in mem for part in ("key", "in all")]
    per_lock: list[float | None] = [float(m[k]) for m in mem for k in ("lock_b", "held_b")]
    panels.append(Panel("Redis bytes per held lock", mem_labels, per_lock, goal=200))
    return bars("Many names at once", panels, "goals: MultiLock ≥ 30,000 locks/s, ≤ 200 B a lock")


def renewals_chart(data: dict[str, Any]) -> bytes:
    rows = data["rows"]
    labels = [f"redislock {r['flavor']}, {r['locks']:,} leases" for r in rows]
    return bars(
        f"Keeping watchdog leases alive ({data['params']['lease_s']:g} s leases)",
        [
            Panel(
                "client CPU, % of one core",
                labels,
                [float(r["client_cpu_percent"]) for r in rows],
                goal=10,
            ),
            Panel(
                "redis-server CPU, % of one core",
                labels,
                [float(r["server_cpu_percent"]) for r in rows],
            ),
            Panel("leases lost", labels, [float(r["lost"]) for r in rows]),
        ],
        "goal: 10,000 leases with < 10 % of one core",
    )


# chart file -> (data file, how it is drawn); each data file is a benchmark's --json output
CHARTS: dict[str, tuple[str, Callable[[dict[str, Any]], bytes]]] = {
    "uncontended.png": ("uncontended.json", uncontended_chart),
    "waiters.png": ("waiters.json", waiters_chart),
    "contention.png": ("contention.json", contention_chart),
    "redlock.png": ("redlock.json", redlock_chart),
    "bulk.png": ("bulk.json", bulk_chart),
    "renewals.png": ("renewals.json", renewals_chart),
}


def charts() -> dict[str, bytes]:
    """PNG charts (file name -> bytes) from the benchmarks' JSON outputs. A missing file or
    field fails the build (KeyError, FileNotFoundError) rather than leaving a chart out."""
    return {png: draw(_load(data)) for png, (data, draw) in CHARTS.items()}


def run_notes(name: str) -> str:
    """Markdown for ``<!-- perf-run NAME -->``: how ``docs/data/NAME.json`` was recorded (the
    command of ``tools/record_perf.py``, the load average) and the goal lines of that run."""
    spec = importlib.util.spec_from_file_location("record_perf", ROOT / "tools/record_perf.py")
    assert spec is not None
    assert spec.loader is not None
    record_perf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record_perf)
    return _run_notes(record_perf.command(name), _load(f"{name}.json"), name in INFO)


INFO = ("uncontended",)
"""The benchmarks whose ``info`` lines (ratios shown, not judged) the page lists too."""


def _run_notes(command: str, data: dict[str, Any], with_info: bool = False) -> str:
    env = data["env"]
    out = [
        f"Recorded with `{command}`, redislock {env['redislock'].split()[0]}, "
        f"Redis {str(env['redis_server']).removeprefix('redis ')}, {env['cpus']} CPUs; load "
        f"average {env['load_before'].split()[0]} before, {env['load_after'].split()[0]} after. "
        "Goals in this run:",
        "",
    ]
    goals = sorted(data["goals"], key=lambda g: g["pass"] is not False)  # failures first
    # uncontended.py also prints the specification's stricter ratios, not judged
    info = [str(line).replace("<", "&lt;") for line in data["info"]] if with_info else []
    return "\n".join([*out, *(f"- {_goal_text(g)}" for g in goals), *(f"- {i}" for i in info), ""])


def _goal_text(goal: dict[str, Any]) -> str:
    """A benchmark's goal line, its verdict in one form: ``**FAIL:**``, ``PASS:`` or none."""
    line = str(goal["line"]).replace("<", "&lt;")
    verdict = {True: "PASS:", False: "**FAIL:**"}.get(goal["pass"])
    if verdict is None:  # an info line, not judged
        return line
    return f"{verdict} {line.removeprefix('PASS').removeprefix('FAIL').lstrip(': ')}"


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
    markdown = re.sub(r"<!-- perf-run (\w+) -->", lambda m: run_notes(m[1]), markdown)
    if "<!-- torture-results -->" in markdown:
        markdown = markdown.replace("<!-- torture-results -->", torture_tables())
    return markdown
