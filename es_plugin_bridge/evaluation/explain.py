"""``--explain``: every input of the ``fused`` score, per candidate, for the rerank task.

Shows why a candidate moved: its first-stage score (raw and min-max normalised within the query),
its BOW and neural similarities, the β that weigh them (fused = β_fs·norm + β_bow·bow + β_neural·neural),
the fused score, its label, and its rank before and after.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.table import Table

from es_plugin_bridge.data.types import RankingQuery
from es_plugin_bridge.evaluation.report import write_atomic
from es_plugin_bridge.measures import rank_order
from es_plugin_bridge.rankers import Ranker


def explain_rerank(queries: Sequence[RankingQuery], fused: Ranker) -> list[dict[str, Any]]:
    """One record per candidate of every query, in the data's candidate order.

    ``fused`` is the run's own ``fused`` ranker (its model and first stage are already built).
    """
    records = []
    for query in queries:
        parts = fused.components(query)  # type: ignore[attr-defined]
        beta = fused.weights(query)  # type: ignore[attr-defined]
        before = {c: r for r, c in enumerate(rank_order(list(parts["first_stage"])), start=1)}
        after = {c: r for r, c in enumerate(rank_order(list(parts["fused"])), start=1)}
        for i, cand in enumerate(query.candidates):
            records.append({
                "query_id": query.query.id, "candidate_id": cand.id, "label": query.labels[i],
                "first_stage": float(parts["first_stage"][i]),
                "first_stage_norm": float(parts["first_stage_norm"][i]),
                "bow": float(parts["bow"][i]), "neural": float(parts["neural"][i]),
                "fused": float(parts["fused"][i]), "rank_before": before[i], "rank_after": after[i],
                **{f"beta_{k}": beta[k] for k in ("first_stage", "bow", "neural") if k in beta},
            })
    return records


def write_explain(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    def write(fh: IO[str]) -> None:
        for record in records:
            fh.write(json.dumps(record, sort_keys=True) + "\n")

    return write_atomic(path, write)


def print_explain(records: Sequence[Mapping[str, Any]], console: Console, max_queries: int = 3) -> None:
    """A table per query for the first ``max_queries`` queries (the file holds them all)."""
    shown: list[str] = []
    for record in records:
        if record["query_id"] not in shown:
            shown.append(record["query_id"])
    for qid in shown[:max_queries]:
        table = Table(title=f"fused score of query {qid}")
        for col in ("candidate", "label", "first stage", "norm", "bow", "neural", "fused", "rank"):
            table.add_column(col, justify="right")
        rows = sorted((r for r in records if r["query_id"] == qid), key=lambda r: r["rank_after"])
        for r in rows:
            table.add_row(r["candidate_id"], str(r["label"]), f"{r['first_stage']:.3f}",
                          f"{r['first_stage_norm']:.3f}", f"{r['bow']:.3f}", f"{r['neural']:.3f}",
                          f"{r['fused']:.3f}", f"{r['rank_before']}→{r['rank_after']}")
        console.print(table)
