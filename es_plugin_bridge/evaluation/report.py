"""Outputs of an evaluation run: the contract JSON, per-query JSONL, a terminal table, a bar chart.

Every file is written atomically (a temporary file in the same directory, then ``os.replace``), so
an error never leaves a partial file where a previous good one was, or where a reader expects one.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from es_plugin_bridge.evaluation.results import TaskResult
from es_plugin_bridge.evaluation.significance import significance, verdict

PER_QUERY_SUFFIX = ".per_query.jsonl"


#: Inside :func:`all_or_none`: each file written so far and the previous file it replaced (kept aside).
_BATCH: contextvars.ContextVar[list[tuple[Path, Path | None]] | None] = contextvars.ContextVar(
    "batch", default=None)


@contextlib.contextmanager
def all_or_none() -> Iterator[None]:
    """Every file written atomically inside the block stays only if all of them were written.

    A run that asks for JSON, per-query JSONL and a plot and cannot write the plot leaves none of them:
    the files already written are removed and any previous version of them is put back.
    """
    batch: list[tuple[Path, Path | None]] = []
    token = _BATCH.set(batch)
    try:
        yield
    except BaseException:
        for path, previous in reversed(batch):
            if previous is not None:
                os.replace(previous, path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        raise
    finally:
        _BATCH.reset(token)
    for _, previous in batch:
        if previous is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(previous)


@contextlib.contextmanager
def atomic_path(path: Path, suffix: str = "") -> Iterator[Path]:
    """A temporary path next to ``path``; renamed onto ``path`` only when the block succeeds (inside
    :func:`all_or_none`, undone again if a later output fails)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix or ".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        batch = _BATCH.get()
        if batch is not None:
            previous = None
            if path.is_file():
                fd, kept = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".previous", dir=path.parent)
                os.close(fd)
                previous = Path(kept)
                os.replace(path, previous)
            batch.append((path, previous))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise



def save_figure(fig: Any, path: Path, dpi: int = 120) -> None:
    """Lay out a matplotlib figure and write it as PNG through :func:`atomic_path` (the caller closes it)."""
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)

def write_atomic(path: Path, write: Callable[[IO[str]], None]) -> Path:
    """Write a text file through ``write(handle)`` atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        write(handle)
    return Path(path)


def per_query_path(json_path: Path) -> Path:
    """``OUT.json`` → ``OUT.per_query.jsonl`` (next to the JSON)."""
    json_path = Path(json_path)
    stem = json_path.name[:-5] if json_path.name.endswith(".json") else json_path.name
    return json_path.with_name(stem + PER_QUERY_SUFFIX)


def write_json(result: TaskResult, path: Path) -> Path:
    """The contract JSON, ``{"task", "n_queries", "rankers": {name: {metric: percent}}}``, plus
    ``"significance"``: each ranker's paired tests against the first stage and the best other ranker."""
    body = {**result.as_json(), "significance": significance(result)}
    return write_atomic(path, lambda f: f.write(json.dumps(body, indent=2) + "\n"))


def write_per_query(result: TaskResult, path: Path) -> Path:
    """One JSON object per (query, ranker): query id, ranker, metrics, rank of the first relevant item.

    Per-query metrics use the aggregate's names and units (percent): a query's ``map`` is its AP, its
    ``mrr`` its reciprocal rank, so Kibana can average them back into the reported figures.
    """
    def write(handle: IO[str]) -> None:
        for ranker in result.rankers.values():
            for record in ranker.per_query:
                handle.write(json.dumps({"task": result.task, **record}) + "\n")

    return write_atomic(path, write)


def table(result: TaskResult, title: str = "", tests: Mapping[str, Any] | None = None) -> Table:
    """A rich table: one row per ranker, one column per metric (percent), best value in bold, then the
    paired tests' p-values on the main metric against the first stage and the best other ranker
    (``evaluation.significance``; ``*`` below 0.05)."""
    table = Table(title=escape(title) if title else f"{result.task} ({result.n_queries} queries)")
    table.add_column("ranker", style="cyan")
    for metric in result.metric_names:
        table.add_column(metric, justify="right")
    tests = tests if tests is not None else significance(result)
    by_ranker = tests["rankers"]
    shown = len(result.rankers) > 1 and bool(by_ranker)
    if shown:
        table.caption = (f"p: paired Fisher randomization test on per-query {tests['metric']}, two-sided; "
                         f"* p < {tests['alpha']}")
        table.add_column(f"p vs {tests['first_stage'] or 'first stage'}", justify="right")
        table.add_column("p vs best other", justify="right")
    table.add_column("seconds", justify="right", style="dim")
    data = result.as_json()["rankers"]
    best = {m: max(v[m] for v in data.values()) for m in result.metric_names if m != "threshold"}
    for name, values in data.items():
        cells = [f"[bold]{values[m]:.2f}[/bold]" if best.get(m) == values[m] and len(data) > 1
                 else f"{values[m]:.2f}" for m in result.metric_names]
        if shown:
            mine = by_ranker.get(name, {})
            against = mine.get("vs_best_other")
            cells += [verdict(mine.get("vs_first_stage")),
                      verdict(against) + (f" ({escape(against['ranker'])})" if against else "")]
        table.add_row(escape(result.label(name)), *cells, f"{result.rankers[name].seconds:.1f}")
    return table


def print_result(result: TaskResult, console: Console | None = None, title: str = "") -> None:
    """The table, then the notes (what was dropped or skipped)."""
    console = console or Console()
    console.print(table(result, title))
    for note in result.notes:
        console.print(f"[dim]note: {escape(note)}[/dim]", soft_wrap=True, highlight=False)


def markdown_table(result: TaskResult) -> str:
    """The same figures as a Markdown table (for the docs and the demo summary)."""
    data = result.as_json()["rankers"]
    lines = ["| ranker | " + " | ".join(result.metric_names) + " |",
             "| --- | " + " | ".join("---:" for _ in result.metric_names) + " |"]
    lines += [f"| {name} | " + " | ".join(f"{v[m]:.2f}" for m in result.metric_names) + " |"
              for name, v in data.items()]
    return "\n".join(lines)


def write_plot(result: TaskResult, path: Path, title: str = "") -> Path:
    """A grouped bar chart (PNG): one group per metric, one bar per ranker (``threshold`` left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    metrics = [m for m in result.metric_names if m != "threshold"]
    data = result.as_json()["rankers"]
    names = list(data)
    x = np.arange(len(metrics))
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 1.5 + 0.4 * len(metrics) * len(names))), 4.5))
    try:
        for i, name in enumerate(names):
            offset = (i - (len(names) - 1) / 2) * width
            bars = ax.bar(x + offset, [data[name][m] for m in metrics], width, label=name)
            ax.bar_label(bars, fmt="%.1f", fontsize=6, padding=1)
        top = max((v[m] for v in data.values() for m in metrics), default=0.0)
        ax.set_xticks(x, metrics)
        ax.set_ylabel("percent")
        ax.set_ylim(0, min(100.0, top * 1.25 + 1.0))
        ax.set_title(title or f"{result.task}: {result.n_queries} queries")
        ax.legend(fontsize="small", ncols=min(len(names), 4))
        ax.grid(axis="y", alpha=0.3)
        save_figure(fig, path, dpi=120)
    finally:
        plt.close(fig)
    return Path(path)
