"""Task ``retrieval``: find a question's duplicate in the whole collection (Acc@1/5/10, MRR@10).

As in "Learning Hybrid Representations" (dos Santos et al.): every distinct question of the corpus
files and of the queries file is a document; each duplicate pair (label 1) of the queries file is
one query, its first question searching the collection and its second the one relevant document.
The query itself is excluded from its results. A pair whose two questions are the same text (one
document) cannot be answered under this protocol: it is skipped and the count is reported.
Ties within the returned top-k keep the engine's order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from es_plugin_bridge.data.types import Pair, Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.metrics import (
    RETRIEVAL_MEASURES,
    Judged,
    aggregate,
    first_relevant_rank,
    per_query,
)
from es_plugin_bridge.evaluation.progress import progress
from es_plugin_bridge.evaluation.results import RankerResult, TaskResult, percent
from es_plugin_bridge.evaluation.runner import run_rankers
from es_plugin_bridge.rankers import Ranker, TokenCache, unique_questions

METRICS = list(RETRIEVAL_MEASURES)
DEPTH = 10


@dataclass(frozen=True)
class RetrievalQuery:
    """One query: its id in the results, the searching question and the one relevant question."""

    id: str
    query: Question
    relevant: Question


def duplicate_queries(pairs: Sequence[Pair]) -> tuple[list[RetrievalQuery], int]:
    """Queries from the duplicate pairs (ids ``d1``, ``d2``, ... in file order) and the number skipped."""
    queries, skipped, n = [], 0, 0
    for pair in pairs:
        if pair.label != 1:
            continue
        n += 1
        if pair.q1.id == pair.q2.id:
            skipped += 1
            continue
        queries.append(RetrievalQuery(f"d{n}", pair.q1, pair.q2))
    return queries, skipped


def held_out(queries: Sequence[RetrievalQuery], n: int) -> list[RetrievalQuery]:
    """A deterministic subset of ``n`` queries: those with the smallest hash of their two question ids.

    It does not depend on file order or on a random generator, so the same pairs are held out
    wherever the same data is read (training can exclude exactly these).
    """
    def key(q: RetrievalQuery) -> str:
        return hashlib.sha1(f"{q.query.id}\t{q.relevant.id}".encode()).hexdigest()

    chosen = set(map(id, sorted(queries, key=key)[:n]))
    return [q for q in queries if id(q) in chosen]


def evaluate_retrieval(documents: Sequence[Question], queries: Sequence[RetrievalQuery],
                       ranker_names: Sequence[str], tokens: TokenCache, *, model_dir: Path | None = None,
                       params: Mapping[str, Mapping[str, float]] | None = None,
                       context_options: Mapping[str, Any] | None = None,
                       show_progress: bool = True) -> TaskResult:
    """Search the collection for every query with every ranker; Acc@k is Success@k, MRR is cut at 10."""
    if not queries:
        raise UserError("--task retrieval: the queries file holds no duplicate pair (label 1)")
    collection = unique_questions([documents, [q.query for q in queries], [q.relevant for q in queries]])
    task = TaskResult("retrieval", len(queries), METRICS)
    task.notes.append(f"{len(queries)} queries searched {len(collection)} distinct questions")

    def evaluate_one(name: str, ranker: Ranker) -> RankerResult:
        judged = []
        for q in progress(queries, desc=f"retrieval {name}", total=len(queries), enabled=show_progress):
            hits = ranker.search(q.query, k=DEPTH, exclude={q.query.id})
            judged.append(Judged(q.id, [doc for doc, _ in hits], frozenset({q.relevant.id})))
        values = per_query(judged, RETRIEVAL_MEASURES)
        records = [{"query_id": j.query_id, "ranker": name,
                    "metrics": {m: percent(values[j.query_id][m]) for m in METRICS},
                    "rank_first_relevant": first_relevant_rank(j.ranked_ids, j.relevant),
                    "query_question_id": q.query.id, "relevant_id": q.relevant.id,
                    "top_ids": list(j.ranked_ids)}
                   for j, q in zip(judged, queries, strict=True)]
        return RankerResult(aggregate(values, METRICS), records)

    return run_rankers(task, ranker_names, collection, tokens, evaluate_one, model_dir=model_dir,
                       params=params, context_options=context_options)
