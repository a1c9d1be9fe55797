"""Task ``retrieval``: find a question's duplicates in the whole collection (Acc@1/5/10, MRR@10).

As in "Learning Hybrid Representations" (dos Santos et al.): every distinct question of the corpus
files and of the queries file is a document; each duplicate pair (label 1) of the queries file is
one query. Two choices make the protocol (both recorded in the JSON under ``protocol``):

* ``queries_from``: ``q1`` (default) — the pair's first question searches; ``q2`` — its second.
* ``relevant``: ``pair`` (default) — the pair's other question is the one relevant document;
  ``cluster`` — every question linked to the query by any known duplicate pair of the given files
  (the transitive closure, ``evaluation.clusters``) is relevant. Acc@k then means *some* relevant
  question in the top k, MRR@10 the rank of the first one.

The query itself is excluded from its results. A pair whose two questions are the same text (one
document) cannot be answered under the pair protocol: it is skipped under both, so both protocols
score the same queries, and the count is reported. Ties within the returned top-k keep the
engine's order.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from es_plugin_bridge.data.types import Pair, Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.clusters import DuplicateClusters
from es_plugin_bridge.evaluation.progress import progress
from es_plugin_bridge.evaluation.results import RankerResult, TaskResult, percent
from es_plugin_bridge.evaluation.runner import run_rankers
from es_plugin_bridge.measures import (
    RETRIEVAL_MEASURES,
    Judged,
    aggregate,
    first_relevant_rank,
    per_query,
)
from es_plugin_bridge.rankers import Ranker, TokenCache, unique_questions

METRICS = list(RETRIEVAL_MEASURES)
DEPTH = 10
RELEVANT = ("pair", "cluster")
QUERIES_FROM = ("q1", "q2")


@dataclass(frozen=True)
class RetrievalQuery:
    """One query: its id in the results, the searching question and the pair's other question.

    ``also_relevant`` holds the other relevant ids under the cluster protocol; ``reversed`` is True
    when the pair's second question searches (so ``held_out`` picks the same pairs either way).
    """

    id: str
    query: Question
    relevant: Question
    also_relevant: frozenset[str] = frozenset()
    reversed: bool = False

    @property
    def relevant_ids(self) -> frozenset[str]:
        """Every id that counts as a hit for this query."""
        return self.also_relevant | {self.relevant.id}


@dataclass(frozen=True)
class RetrievalProtocol:
    """Which question searches and what counts as relevant (see the module docstring)."""

    relevant: str = "pair"
    queries_from: str = "q1"

    def __post_init__(self) -> None:
        if self.relevant not in RELEVANT:
            raise UserError(f"--relevant {self.relevant!r}: expected one of {', '.join(RELEVANT)}")
        if self.queries_from not in QUERIES_FROM:
            raise UserError(f"--queries-from {self.queries_from!r}: expected one of "
                            f"{', '.join(QUERIES_FROM)}")


@dataclass
class RetrievalResult(TaskResult):
    """A retrieval TaskResult whose JSON also says which protocol produced it."""

    protocol: RetrievalProtocol = field(default_factory=RetrievalProtocol)
    mean_relevant: float = 1.0

    def as_json(self) -> dict[str, Any]:
        """The contract's keys, then ``protocol``: ``{"relevant", "queries_from", "mean_relevant"}``."""
        data = super().as_json()
        data["protocol"] = {"relevant": self.protocol.relevant, "queries_from": self.protocol.queries_from,
                            "mean_relevant": round(self.mean_relevant, 2)}
        return data


def duplicate_queries(pairs: Sequence[Pair], queries_from: str = "q1") -> tuple[list[RetrievalQuery], int]:
    """Queries from the duplicate pairs (ids ``d1``, ``d2``, ... in file order) and the number skipped.

    ``queries_from="q2"``: the pair's second question searches and its first is the relevant one.
    """
    queries, skipped, n = [], 0, 0
    for pair in pairs:
        if pair.label != 1:
            continue
        n += 1
        if pair.q1.id == pair.q2.id:
            skipped += 1
            continue
        if queries_from == "q2":
            queries.append(RetrievalQuery(f"d{n}", pair.q2, pair.q1, reversed=True))
        else:
            queries.append(RetrievalQuery(f"d{n}", pair.q1, pair.q2))
    return queries, skipped


def with_clusters(queries: Sequence[RetrievalQuery], clusters: DuplicateClusters) -> list[RetrievalQuery]:
    """The same queries with every other question of the query's duplicate cluster relevant too."""
    return [replace(q, also_relevant=clusters.relevant(q.query.id) - {q.relevant.id}) for q in queries]


def held_out(queries: Sequence[RetrievalQuery], n: int) -> list[RetrievalQuery]:
    """A deterministic subset of ``n`` queries: those with the smallest hash of their pair's two ids.

    It does not depend on file order, on a random generator or on the direction (``queries_from``),
    so the same pairs are held out wherever the same data is read (training can exclude exactly these).
    """
    def key(q: RetrievalQuery) -> str:
        first, second = (q.relevant, q.query) if q.reversed else (q.query, q.relevant)
        return hashlib.sha1(f"{first.id}\t{second.id}".encode()).hexdigest()

    chosen = set(map(id, sorted(queries, key=key)[:n]))
    return [q for q in queries if id(q) in chosen]


def protocol_queries(pairs: Sequence[Pair], links: Sequence[Sequence[Pair]], protocol: RetrievalProtocol, *,
                     max_queries: int | None = None, source: str = "queries") -> tuple[list[RetrievalQuery],
                                                                                        list[str]]:
    """The queries of ``pairs`` under ``protocol`` and notes on what was skipped or kept.

    ``links``: the pairs of every given file (queries and corpus), whose duplicates make the clusters.
    """
    notes = []
    queries, skipped = duplicate_queries(pairs, protocol.queries_from)
    if skipped:
        notes.append(f"{source}: skipped {skipped} duplicate pairs whose two questions are the "
                     "same text (the query itself is excluded, so they cannot be found)")
    if max_queries is not None and max_queries < len(queries):
        notes.append(f"kept a deterministic subset of {max_queries} of {len(queries)} queries "
                     "(--max-queries)")
        queries = held_out(queries, max_queries)
    if protocol.relevant == "cluster":
        clusters = DuplicateClusters.from_pairs(*links)
        queries = with_clusters(queries, clusters)
        more = sum(1 for q in queries if q.also_relevant)
        notes.append(f"--relevant cluster: {len(clusters.sizes())} duplicate clusters in the given files; "
                     f"{more} of {len(queries)} queries have more than one relevant question")
    return queries, notes


def evaluate_retrieval(documents: Sequence[Question], queries: Sequence[RetrievalQuery],
                       ranker_names: Sequence[str], tokens: TokenCache, *, model_dir: Path | None = None,
                       params: Mapping[str, Mapping[str, float]] | None = None,
                       context_options: Mapping[str, Any] | None = None,
                       show_progress: bool = True,
                       protocol: RetrievalProtocol | None = None) -> RetrievalResult:
    """Search the collection for every query with every ranker; Acc@k is Success@k, MRR is cut at 10.

    ``protocol`` is only recorded (the queries already carry their relevant ids): see protocol_queries.
    """
    if not queries:
        raise UserError("--task retrieval: the queries file holds no duplicate pair (label 1)")
    collection = unique_questions([documents, [q.query for q in queries], [q.relevant for q in queries]])
    known = {q.id for q in collection}
    missing = {doc for q in queries for doc in q.also_relevant} - known
    if missing:
        raise UserError(f"{len(missing)} relevant questions are not in the collection (e.g. {min(missing)})")
    task = RetrievalResult("retrieval", len(queries), METRICS, protocol=protocol or RetrievalProtocol(),
                           mean_relevant=sum(len(q.relevant_ids) for q in queries) / len(queries))
    task.notes.append(f"{len(queries)} queries searched {len(collection)} distinct questions")

    def evaluate_one(name: str, ranker: Ranker) -> RankerResult:
        judged, latencies = [], []
        for q in progress(queries, desc=f"retrieval {name}", total=len(queries), enabled=show_progress):
            start = time.perf_counter()
            hits = ranker.search(q.query, k=DEPTH, exclude={q.query.id})
            latencies.append(time.perf_counter() - start)
            judged.append(Judged(q.id, [doc for doc, _ in hits], q.relevant_ids))
        values = per_query(judged, RETRIEVAL_MEASURES)
        records = [{"query_id": j.query_id, "ranker": name,
                    "metrics": {m: percent(values[j.query_id][m]) for m in METRICS},
                    "rank_first_relevant": first_relevant_rank(j.ranked_ids, j.relevant),
                    "query_question_id": q.query.id, "relevant_id": q.relevant.id,
                    "n_relevant": len(q.relevant_ids), "top_ids": list(j.ranked_ids)}
                   | ({"relevant_ids": sorted(q.relevant_ids)} if q.also_relevant else {})
                   for j, q in zip(judged, queries, strict=True)]
        return RankerResult(aggregate(values, METRICS), records, latencies=latencies)

    run_rankers(task, ranker_names, collection, tokens, evaluate_one, model_dir=model_dir,
                params=params, context_options=context_options)
    titles = {doc.id: doc.title for doc in collection}
    shown = {i for r in task.rankers.values() for record in r.per_query for i in record["top_ids"]}
    for q in queries:
        task.texts[q.id] = q.query.title
        shown.update(q.relevant_ids)
        task.judgments[q.id] = {"relevant": sorted(q.relevant_ids), "judged": sorted(q.relevant_ids)}
    task.texts.update((i, titles[i]) for i in shown if i in titles)
    return task
