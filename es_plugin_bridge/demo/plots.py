"""The demo's two pictures: each ranker's Acc@k against BM25 on the same queries, and the transformer's
per-query wins and losses against BM25 (the Kibana dashboard's view, drawn without Kibana).

Both read the per-query records an evaluation already holds (rank of the first relevant document,
each query's primary metric), so a picture never disagrees with the tables it sits beside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from es_plugin_bridge.evaluation.compare import per_query_table
from es_plugin_bridge.evaluation.report import save_figure
from es_plugin_bridge.evaluation.results import TaskResult

#: Retrieval is judged on each ranker's top 10 (evaluation.retrieval.DEPTH).
DEPTH = 10
GREEN, GREY, RED = "#2e7d32", "#bdbdbd", "#c62828"


def _pyplot():  # noqa: ANN202 - matplotlib's module
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def acc_at_k(result: TaskResult, ranker: str, depth: int = DEPTH) -> np.ndarray:
    """Acc@1..depth in percent: the share of queries with a relevant document in the top k."""
    ranks = [r.get("rank_first_relevant") for r in result.rankers[ranker].per_query]
    found = np.array([r if r is not None else depth + 1 for r in ranks], dtype=float)
    return np.array([100.0 * float(np.mean(found <= k)) for k in range(1, depth + 1)])


def write_acc_at_k(result: TaskResult, path: Path, title: str, baseline: str = "bm25") -> Path:
    """One curve per ranker (the baseline dashed black), Acc@k for k = 1..10 on the same queries; the
    legend gives each ranker's Acc@1 as a multiple of the baseline's."""
    plt = _pyplot()
    ks = np.arange(1, DEPTH + 1)
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    try:
        base = acc_at_k(result, baseline) if baseline in result.rankers else None
        for name in result.rankers:
            values = acc_at_k(result, name)
            if name == baseline:
                ax.plot(ks, values, "k--", linewidth=2.2, label=f"{name} (baseline)", zorder=5)
                continue
            label = name
            if base is not None and base[0] > 0:
                label += f" ({values[0] / base[0]:.2f}× {baseline} at k=1)"
            ax.plot(ks, values, marker="o", markersize=3, linewidth=1.6, label=label)
        ax.set_xticks(ks)
        ax.set_xlabel("k (top-k documents searched among every title)")
        ax.set_ylabel("Acc@k, % of queries")
        ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="upper left")
        save_figure(fig, path, dpi=120)
    finally:
        plt.close(fig)
    return Path(path)


def _rank_grid(result: TaskResult, ranker: str, baseline: str) -> np.ndarray:
    """Counts of queries by (baseline's rank of the first relevant, ranker's); index DEPTH = not found."""
    table = per_query_table(result)
    grid = np.zeros((DEPTH + 1, DEPTH + 1), dtype=int)
    for qid in table.query_ids:
        b, r = table.first_relevant[baseline].get(qid), table.first_relevant[ranker].get(qid)
        grid[(b or DEPTH + 1) - 1, (r or DEPTH + 1) - 1] += 1
    return grid


def outcomes(result: TaskResult, ranker: str, metric: str, baseline: str = "bm25") -> tuple[int, int, int]:
    """(wins, ties, losses) of ``ranker`` against ``baseline`` per query on ``metric`` (the dashboard's
    rule: ``compare.PerQueryTable.outcome``)."""
    table = replace(per_query_table(result), primary=metric)
    tags = [table.outcome(ranker, baseline, qid) for qid in table.query_ids]
    return tags.count("win"), tags.count("tie"), tags.count("loss")


def write_win_loss(runs: Sequence[tuple[str, TaskResult, Sequence[str], Sequence[str]]],
                   grid_run: tuple[TaskResult, str], path: Path, baseline: str = "bm25") -> Path:
    """Left: per query, wins/ties/losses of each model ranker against the baseline, as a share of the
    queries (Kibana's panel uses the task's primary metric: Acc@1 for retrieval, MAP for rerank; MRR@10
    also counts a duplicate moved up within the top 10). Right: where each retrieval query's duplicate
    was ranked by the baseline and by the transformer (below the diagonal: the transformer ranked it
    higher)."""
    plt = _pyplot()
    rows: list[tuple[str, int, int, int]] = []
    for label, result, rankers, metrics in runs:
        rows += [(f"{label}: {ranker}, {metric} ({result.n_queries} queries)",
                  *outcomes(result, ranker, metric, baseline))
                 for ranker in rankers if ranker in result.rankers for metric in metrics]
    result, ranker = grid_run
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.4), gridspec_kw={"width_ratios": [1.25, 1]})
    try:
        _draw_outcomes(left, rows, baseline)
        _draw_rank_grid(right, _rank_grid(result, ranker, baseline), ranker, baseline)
        save_figure(fig, path, dpi=110)
    finally:
        plt.close(fig)
    return Path(path)


def _draw_outcomes(ax: Any, rows: Sequence[tuple[str, int, int, int]], baseline: str) -> None:
    """Stacked bars, one per (label, wins, ties, losses) row, as shares of its queries."""
    y = np.arange(len(rows))
    start = np.zeros(len(rows))
    totals = np.array([max(1, sum(row[1:])) for row in rows], dtype=float)
    for column, (key, colour) in enumerate((("wins", GREEN), ("ties", GREY), ("losses", RED)), start=1):
        counts = np.array([row[column] for row in rows], dtype=float)
        shares = 100.0 * counts / totals
        bars = ax.barh(y, shares, left=start, color=colour, label=key)
        labels = [str(int(c)) if share >= 4 else "" for c, share in zip(counts, shares, strict=True)]
        ax.bar_label(bars, labels=labels, label_type="center", fontsize=8,
                     color="black" if key == "ties" else "white")
        start += shares
    ax.set_yticks(y, [row[0] for row in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of queries (labels: query counts)")
    ax.set_title(f"Per query against {baseline}: the transformer wins, ties, loses", fontsize=10)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=3)


def _draw_rank_grid(ax: Any, grid: np.ndarray, ranker: str, baseline: str) -> None:
    """The (baseline rank, ranker rank) counts as a heat map; below the diagonal the ranker did better."""
    shown = np.where(grid > 0, grid, np.nan)
    image = ax.imshow(np.log1p(shown), cmap="Blues", origin="upper")
    ticks = [str(k) for k in range(1, DEPTH + 1)] + [f">{DEPTH}"]
    ax.set_xticks(np.arange(DEPTH + 1), ticks, fontsize=7)
    ax.set_yticks(np.arange(DEPTH + 1), ticks, fontsize=7)
    ax.set_xlabel(f"rank of the duplicate by {ranker} (transformer)")
    ax.set_ylabel(f"rank of the duplicate by {baseline}")
    for (i, j), count in np.ndenumerate(grid):
        if count:
            colour = GREEN if j < i else (RED if j > i else "black")
            if count > 0.5 * grid.max():
                colour = "white"
            ax.text(j, i, str(count), ha="center", va="center", fontsize=7, color=colour, fontweight="bold")
    better, worse = int(np.tril(grid, -1).sum()), int(np.triu(grid, 1).sum())
    ax.set_title(f"AskUbuntu retrieval, per query: {ranker} ranks the duplicate higher for "
                 f"{better},\nlower for {worse} (green: {ranker} better, red: {baseline} better)", fontsize=9)
    image.set_clim(0, max(1.0, float(np.nanmax(np.log1p(shown))) if np.any(grid) else 1.0))
