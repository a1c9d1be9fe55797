"""Ranking comparison for users without Kibana: a PNG and a self-contained HTML file from one run.

The same three views as the Kibana dashboard, computed from the same per-query records:
aggregates per ranker, per-query wins/ties/losses of each ranker against BM25 on the task's primary
metric (MAP for rerank, Acc@1 for retrieval, accuracy for classify), and the queries on which the
rankers disagree most (largest spread of that metric). ``elastic.results_index`` uses ``per_query_table``
so that the index and this report never disagree on a win.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.report import save_figure, write_atomic
from es_plugin_bridge.evaluation.results import TaskResult

BASELINE = "bm25"
PRIMARY_METRIC = {"rerank": "map", "retrieval": "acc@1", "classify": "accuracy"}
PNG_NAME = "comparison.png"
HTML_NAME = "comparison.html"
TIE = 1e-9


@dataclass
class PerQueryTable:
    """Per-query metrics of every ranker: ``values[ranker][query_id] = {metric: percent}``."""

    task: str
    primary: str
    values: dict[str, dict[str, Mapping[str, float]]]
    query_ids: list[str]
    first_relevant: dict[str, dict[str, int | None]] = field(default_factory=dict)

    def metrics(self, ranker: str, query_id: str) -> Mapping[str, float]:
        return self.values[ranker].get(query_id, {})

    def value(self, ranker: str, query_id: str) -> float | None:
        v = self.metrics(ranker, query_id).get(self.primary)
        return None if v is None else float(v)

    def spread(self, query_id: str) -> float:
        """Max − min of the primary metric over the rankers that scored this query (0 with one)."""
        vs = [v for r in self.values if (v := self.value(r, query_id)) is not None]
        return round(max(vs) - min(vs), 4) if vs else 0.0

    def outcome(self, ranker: str, baseline: str, query_id: str) -> str | None:
        """``win``, ``tie`` or ``loss`` of ``ranker`` against ``baseline`` on this query's primary metric."""
        a, b = self.value(ranker, query_id), self.value(baseline, query_id)
        if a is None or b is None:
            return None
        return "tie" if abs(a - b) <= TIE else ("win" if a > b else "loss")


def per_query_table(result: TaskResult) -> PerQueryTable:
    """Index a run's per-query records by ranker and query id (first-seen query order)."""
    primary = PRIMARY_METRIC.get(result.task, result.metric_names[0] if result.metric_names else "")
    values: dict[str, dict[str, Mapping[str, float]]] = {}
    first: dict[str, dict[str, int | None]] = {}
    order: dict[str, None] = {}
    for name, ranker in result.rankers.items():
        values[name], first[name] = {}, {}
        for record in ranker.per_query:
            qid = str(record["query_id"])
            values[name][qid] = record["metrics"]
            first[name][qid] = record.get("rank_first_relevant")
            order.setdefault(qid, None)
    return PerQueryTable(result.task, primary, values, list(order), first)


@dataclass(frozen=True)
class Outcomes:
    """Per-query wins, ties and losses of one ranker against the baseline, and the mean difference."""

    ranker: str
    wins: int
    ties: int
    losses: int
    mean_delta: float
    win_ids: tuple[str, ...] = ()
    loss_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Disagreement:
    """One query: the primary metric of each ranker, their spread, the rank of each first relevant."""

    query_id: str
    spread: float
    values: dict[str, float | None]
    first_relevant: dict[str, int | None]


@dataclass
class Comparison:
    """Everything the report shows, computed once."""

    task: str
    n_queries: int
    primary: str
    baseline: str | None
    aggregates: dict[str, dict[str, float]]
    outcomes: list[Outcomes]
    disagreements: list[Disagreement]
    notes: list[str]


def compare(result: TaskResult, *, baseline: str = BASELINE, top: int = 15) -> Comparison:
    """Aggregates, outcomes against ``baseline`` (when the run has it) and the ``top`` disagreements."""
    if not result.rankers:
        raise UserError("comparison report: the run has no ranker")
    table = per_query_table(result)
    notes = list(result.notes)
    outcomes: list[Outcomes] = []
    base: str | None = baseline if baseline in result.rankers else None
    if base is None:
        notes.append(f"no {baseline} ranker in this run: wins and losses are not computed "
                     f"(add {baseline} to --rankers)")
    else:
        for name in result.rankers:
            if name == base:
                continue
            tags = {q: table.outcome(name, base, q) for q in table.query_ids}
            deltas = [a - b for q in table.query_ids
                      if (a := table.value(name, q)) is not None and (b := table.value(base, q)) is not None]
            wins = tuple(q for q, t in tags.items() if t == "win")
            losses = tuple(q for q, t in tags.items() if t == "loss")
            mean = round(sum(deltas) / len(deltas), 2) if deltas else 0.0
            ties = sum(t == "tie" for t in tags.values())
            outcomes.append(Outcomes(name, len(wins), ties, len(losses), mean, wins, losses))
    spreads = sorted(((table.spread(q), i, q) for i, q in enumerate(table.query_ids)),
                     key=lambda t: (-t[0], t[1]))
    disagreements = [Disagreement(q, s, {r: table.value(r, q) for r in result.rankers},
                                  {r: table.first_relevant[r].get(q) for r in result.rankers})
                     for s, _, q in spreads[:top] if s > 0]
    return Comparison(result.task, result.n_queries, table.primary, base, result.as_json()["rankers"],
                      outcomes, disagreements, notes)


def write_png(comparison: Comparison, path: Path, title: str = "") -> Path:
    """Three panels: aggregates per ranker, wins/ties/losses against the baseline, top disagreements."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    metrics = [m for m in next(iter(comparison.aggregates.values())) if m != "threshold"]
    names = list(comparison.aggregates)
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2), gridspec_kw={"width_ratios": [1.3, 1, 1.2]})
    try:
        ax = axes[0]
        x = np.arange(len(metrics))
        width = 0.8 / max(len(names), 1)
        for i, name in enumerate(names):
            bars = ax.bar(x + (i - (len(names) - 1) / 2) * width,
                          [comparison.aggregates[name][m] for m in metrics], width, label=name)
            ax.bar_label(bars, fmt="%.1f", fontsize=6, padding=1)
        ax.set_xticks(x, metrics)
        ax.set_ylabel("percent")
        ax.set_ylim(0, 105)
        ax.set_title("Aggregates per ranker")
        ax.legend(fontsize="small")
        ax.grid(axis="y", alpha=0.3)

        ax = axes[1]
        if comparison.outcomes:
            labels = [o.ranker for o in comparison.outcomes]
            y = np.arange(len(labels))
            left = np.zeros(len(labels))
            for key, colour in (("wins", "#2e7d32"), ("ties", "#9e9e9e"), ("losses", "#c62828")):
                counts = np.array([getattr(o, key) for o in comparison.outcomes], dtype=float)
                bars = ax.barh(y, counts, left=left, color=colour, label=key)
                ax.bar_label(bars, labels=[str(int(c)) if c else "" for c in counts], label_type="center",
                             fontsize=8, color="white")
                left += counts
            ax.set_yticks(y, labels)
            ax.invert_yaxis()
            ax.set_xlabel("queries")
            ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=3)
            ax.set_title(f"Per query vs {comparison.baseline} ({comparison.primary})")
        else:
            ax.axis("off")
            ax.text(0.5, 0.5, "no bm25 ranker in this run:\nno wins or losses", ha="center", va="center")

        ax = axes[2]
        if comparison.disagreements:
            grid = np.array([[np.nan if d.values[r] is None else d.values[r] for r in names]
                             for d in comparison.disagreements], dtype=float)
            image = ax.imshow(grid, aspect="auto", cmap="RdYlGn", vmin=0, vmax=100)
            ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right")
            ax.set_yticks(np.arange(len(grid)), [d.query_id for d in comparison.disagreements], fontsize=7)
            for (i, j), v in np.ndenumerate(grid):
                if not np.isnan(v):
                    ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=6)
            fig.colorbar(image, ax=ax, fraction=0.04, label=comparison.primary)
            ax.set_title(f"Most disagreement ({comparison.primary} spread)")
        else:
            ax.axis("off")
            ax.text(0.5, 0.5, "the rankers agree on every query", ha="center", va="center")
        fig.suptitle(title or f"{comparison.task}: {comparison.n_queries} queries")
        save_figure(fig, path, dpi=110)
    finally:
        plt.close(fig)
    return Path(path)


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:0.6em 0 1.4em}th,td{padding:3px 9px;border-bottom:1px solid #ddd;
text-align:right}th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}
td.best{font-weight:bold}td.win{color:#2e7d32}td.loss{color:#c62828}img{max-width:100%}
.note{color:#666;font-size:12px}code{background:#f4f4f4;padding:0 3px}"""


def _cell(value: Any, cls: str = "") -> str:
    text = "–" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
    return f'<td class="{cls}">{html.escape(text)}</td>' if cls else f"<td>{html.escape(text)}</td>"


def _row(cells: Sequence[str], header: bool = False) -> str:
    tag = "th" if header else "td"
    return "<tr>" + "".join(c if c.startswith("<td") else f"<{tag}>{html.escape(c)}</{tag}>"
                            for c in cells) + "</tr>"


def render_html(comparison: Comparison, png: bytes | None, title: str = "") -> str:
    """The report as one HTML string: tables, notes and the PNG inlined (no external file or script)."""
    title = title or f"{comparison.task}: {comparison.n_queries} queries"
    metrics = list(next(iter(comparison.aggregates.values())))
    best = {m: max(v[m] for v in comparison.aggregates.values()) for m in metrics if m != "threshold"}
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>",
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p class='note'>Written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by "
             "<code>esrerank evaluate --report</code>. All figures in percent.</p>",
             "<h2>Aggregates per ranker</h2><table>", _row(["ranker", *metrics], header=True)]
    for name, values in comparison.aggregates.items():
        several = len(comparison.aggregates) > 1
        cells = [_cell(values[m], "best" if several and best.get(m) == values[m] else "") for m in metrics]
        parts.append(_row([_cell(name), *cells]))
    parts.append("</table>")
    if comparison.baseline is not None:
        parts += [f"<h2>Per query against {html.escape(comparison.baseline)} "
                  f"({html.escape(comparison.primary)})</h2><table>",
                  _row(["ranker", "wins", "ties", "losses", f"mean Δ {comparison.primary}"], header=True)]
        for o in comparison.outcomes:
            parts.append(_row([_cell(o.ranker), _cell(o.wins, "win"), _cell(o.ties), _cell(o.losses, "loss"),
                               _cell(o.mean_delta, "win" if o.mean_delta > 0 else "loss" if o.mean_delta < 0
                                     else "")]))
        parts.append("</table>")
    parts += [f"<h2>Queries where the rankers disagree most ({html.escape(comparison.primary)})</h2>"]
    if comparison.disagreements:
        names = list(comparison.aggregates)
        parts += ["<p class='note'>Each cell: the query's " + html.escape(comparison.primary)
                  + " (rank of the first relevant item).</p><table>",
                  _row(["query", "spread", *names], header=True)]
        for d in comparison.disagreements:
            top = max(v for v in d.values.values() if v is not None)
            cells = [_cell(None if d.values[r] is None else
                           f"{d.values[r]:.2f} ({d.first_relevant[r] if d.first_relevant[r] else '–'})",
                           "best" if d.values[r] == top else "") for r in names]
            parts.append(_row([_cell(d.query_id), _cell(d.spread), *cells]))
        parts.append("</table>")
    else:
        parts.append("<p>The rankers agree on every query.</p>")
    if png is not None:
        parts.append(f"<h2>Charts</h2><img alt='comparison charts' "
                     f"src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>")
    if comparison.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in comparison.notes)
                     + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(result: TaskResult, out_dir: Path, *, title: str = "", baseline: str = BASELINE,
                 top: int = 15) -> list[Path]:
    """Write ``comparison.png`` and ``comparison.html`` (which inlines the PNG) into ``out_dir``."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--report {out_dir}: exists and is not a directory")
    comparison = compare(result, baseline=baseline, top=top)
    png = write_png(comparison, out_dir / PNG_NAME, title)
    page = render_html(comparison, png.read_bytes(), title)
    html_path = write_atomic(out_dir / HTML_NAME, lambda f: f.write(page))
    return [png, html_path]
