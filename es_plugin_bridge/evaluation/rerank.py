"""Task ``rerank``: reorder each query's given candidates (SemEval-2016 Task 3 subtask B).

Every ranker scores the candidates of every query; the metrics (MAP, MRR, P@1/5/10) follow the
SemEval convention described in ``metrics``: all queries count, AP = 0 without a relevant
candidate, unless ``drop_no_relevant`` removes those queries (Lei et al.). Ties keep the data's
candidate order. The first-stage rankers index every candidate of the data file, so their
collection statistics are those of the whole file.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from es_plugin_bridge.data.types import RankingQuery
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.progress import progress
from es_plugin_bridge.evaluation.results import RankerResult, TaskResult, percent
from es_plugin_bridge.evaluation.runner import run_rankers
from es_plugin_bridge.measures import (
    RERANK_MEASURES,
    Judged,
    aggregate,
    first_relevant_rank,
    per_query,
    rank_order,
)
from es_plugin_bridge.rankers import Ranker, TokenCache, unique_questions

METRICS = list(RERANK_MEASURES)


def _judge(query: RankingQuery, ranker: Ranker, name: str) -> tuple[Judged, list[int]]:
    scores = ranker.rerank(query)
    if len(scores) != len(query.candidates):
        raise UserError(f"ranker {name!r} gave {len(scores)} scores for the "
                        f"{len(query.candidates)} candidates of query {query.query.id!r}")
    order = rank_order(list(scores))
    # Positional ids: candidates are judged by position, whatever their ids look like.
    ranked = [f"c{i}" for i in order]
    relevant = frozenset(f"c{i}" for i, label in enumerate(query.labels) if label > 0)
    return Judged(query.query.id, ranked, relevant, frozenset(f"c{i}" for i in range(len(order)))), order


def evaluate_rerank(queries: Sequence[RankingQuery], ranker_names: Sequence[str], tokens: TokenCache, *,
                    drop_no_relevant: bool = False, model_dir: Path | None = None,
                    params: Mapping[str, Mapping[str, float]] | None = None,
                    context_options: Mapping[str, Any] | None = None,
                    show_progress: bool = True, explain: bool = False) -> TaskResult:
    """MAP/MRR/P@k of each ranker over ``queries``; per-query records keep the order that was scored.

    With ``explain``, the ``fused`` ranker (which must be among ``ranker_names``) also fills
    ``TaskResult.explain`` with every input of its score for the evaluated queries.
    """
    if explain and "fused" not in ranker_names:
        raise UserError("--explain explains the fused ranker: add fused to --rankers")
    if not queries:
        raise UserError("--task rerank: the data holds no ranking queries (use a semeval: file)")
    ids = [q.query.id for q in queries]
    if len(set(ids)) != len(ids):
        raise UserError("--task rerank: query ids repeat in the data; each query must appear once")
    for q in queries:
        if len(q.labels) != len(q.candidates):
            raise UserError(f"query {q.query.id!r}: {len(q.labels)} labels for "
                            f"{len(q.candidates)} candidates")
    kept = [q for q in queries if any(label > 0 for label in q.labels)] if drop_no_relevant else list(queries)
    if not kept:  # a mean over no query is no figure: 0.00 (or 100.00) would read as a result
        raise UserError(f"--drop-no-relevant dropped all {len(queries)} queries: none has a relevant "
                        "candidate, so there is nothing to evaluate")
    task = TaskResult("rerank", len(kept), METRICS)
    if drop_no_relevant:
        task.notes.append(f"dropped {len(queries) - len(kept)} of {len(queries)} queries without a "
                          "relevant candidate (--drop-no-relevant)")
    else:
        n_empty = sum(1 for q in queries if not any(label > 0 for label in q.labels))
        task.notes.append(f"{n_empty} of {len(queries)} queries have no relevant candidate and count "
                          "AP = 0 (SemEval convention)")
    collection = unique_questions([q.candidates for q in queries])
    fused: list[Ranker] = []  # the run's fused ranker, kept for --explain (outside its timing)

    def evaluate_one(name: str, ranker: Ranker) -> RankerResult:
        judged, orders, latencies = [], [], []
        for query in progress(kept, desc=f"rerank {name}", total=len(kept), enabled=show_progress):
            start = time.perf_counter()
            j, order = _judge(query, ranker, name)
            latencies.append(time.perf_counter() - start)
            judged.append(j)
            orders.append(order)
        if name == "fused":
            fused.append(ranker)
        values = per_query(judged, RERANK_MEASURES)
        records = [{"query_id": j.query_id, "ranker": name,
                    "metrics": {m: percent(values[j.query_id][m]) for m in METRICS},
                    "rank_first_relevant": first_relevant_rank(j.ranked_ids, j.relevant),
                    "n_relevant": len(j.relevant),
                    "ranking": [q.candidates[i].id for i in order]}
                   for j, q, order in zip(judged, kept, orders, strict=True)]
        return RankerResult(aggregate(values, METRICS), records, latencies=latencies)

    run_rankers(task, ranker_names, collection, tokens, evaluate_one, model_dir=model_dir, params=params,
                context_options=context_options)
    for q in kept:
        task.texts[q.query.id] = q.query.title
        task.texts.update((c.id, c.title) for c in q.candidates)
        task.judgments[q.query.id] = {"relevant": [c.id for c, label in zip(q.candidates, q.labels,
                                                                            strict=True) if label > 0],
                                      "judged": [c.id for c in q.candidates]}
    if explain:
        from es_plugin_bridge.evaluation.explain import explain_rerank

        task.explain = explain_rerank(kept, fused[0])
    return task
