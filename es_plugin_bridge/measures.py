"""Ranking metrics for the rerank and retrieval tasks, computed with ir-measures (pytrec_eval).

Two conventions are made explicit here instead of being left to the backend:

* **Every query counts.** pytrec_eval (ir-measures' backend) does give AP = 0 to a query whose
  judgements are all zero, but per-query output only covers queries present in the run (a ranker
  that returned nothing for a query leaves it out), and how the aggregate treats such gaps is a
  backend detail. We rely on neither: we take per-query values from ``ir_measures.iter_calc``, give
  every query the backend did not report a 0 for every measure, and average over *all* queries
  ourselves. This is the SemEval-2016 Task 3
  convention (MAP over all original questions, AP = 0 without a relevant candidate). With
  ``drop_no_relevant=True`` such queries are removed before averaging, as Lei et al. did.
* **Ties are broken by candidate order.** trec_eval breaks score ties by document id, which would make
  results depend on how ids happen to sort. We rank candidates by (score descending, position in the
  data ascending) and hand the backend strictly decreasing rank-based scores, so the order we report
  (and the rank of the first relevant item) is exactly the one that is scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import ir_measures
from ir_measures import AP, RR, P, Success

from es_plugin_bridge.errors import UserError

#: Metric name (as written to JSON) → ir-measures measure. Relevance is binary: label >= 1.
RERANK_MEASURES = {"map": AP(rel=1), "mrr": RR(rel=1), "p@1": P(rel=1) @ 1, "p@5": P(rel=1) @ 5,
                   "p@10": P(rel=1) @ 10}
RETRIEVAL_MEASURES = {"acc@1": Success(rel=1) @ 1, "acc@5": Success(rel=1) @ 5,
                      "acc@10": Success(rel=1) @ 10, "mrr@10": RR(rel=1) @ 10}


@dataclass(frozen=True)
class Judged:
    """One query to score: its candidate ids in ranked order and which of them are relevant."""

    query_id: str
    ranked_ids: Sequence[str]
    relevant: frozenset[str]
    #: ids that were judged (relevant or not); defaults to ranked_ids ∪ relevant.
    judged: frozenset[str] | None = None


def rank_order(scores: Sequence[float]) -> list[int]:
    """Indices of ``scores`` best first; ties keep the data's order (lower index first).

    A NaN score is a bug in a ranker, not something to sort silently: it raises.
    """
    for i, s in enumerate(scores):
        if math.isnan(float(s)):
            raise UserError(f"ranker produced a NaN score for candidate {i}")
    return sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))


def first_relevant_rank(ranked_ids: Sequence[str], relevant: frozenset[str]) -> int | None:
    """1-based rank of the first relevant id, or None when no relevant id was ranked."""
    for rank, doc in enumerate(ranked_ids, start=1):
        if doc in relevant:
            return rank
    return None


def per_query(queries: Sequence[Judged], measures: Mapping[str, object]) -> dict[str, dict[str, float]]:
    """Per-query values {query_id: {metric: value in [0, 1]}} for every query given (see module doc)."""
    ids = [q.query_id for q in queries]
    if len(set(ids)) != len(ids):
        raise ValueError("query ids must be unique")
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in queries:
        judged = q.judged if q.judged is not None else frozenset(q.ranked_ids) | q.relevant
        qrels[q.query_id] = {doc: int(doc in q.relevant) for doc in judged | q.relevant}
        n = len(q.ranked_ids)
        # Strictly decreasing scores encode our order, so the backend cannot re-break ties.
        run[q.query_id] = {doc: float(n - i) for i, doc in enumerate(q.ranked_ids)}
    by_measure = {m: name for name, m in measures.items()}
    values = {qid: dict.fromkeys(measures, 0.0) for qid in ids}
    nonempty_run = {qid: docs for qid, docs in run.items() if docs}
    if nonempty_run:
        for metric in ir_measures.iter_calc(list(measures.values()), qrels, nonempty_run):
            if metric.query_id in values:
                values[metric.query_id][by_measure[metric.measure]] = float(metric.value)
    return values


def aggregate(values: Mapping[str, Mapping[str, float]], names: Sequence[str]) -> dict[str, float]:
    """Mean of each metric over the queries given (0 for every metric when there are none)."""
    n = len(values)
    return {name: (sum(v[name] for v in values.values()) / n if n else 0.0) for name in names}
