"""Dev data as reranking queries, the one shape early stopping and the β fit both score.

SemEval / AskUbuntu-release dev queries are used as they are (their candidates, labels and the
given first-stage scores); a query a reader tagged ``split="test"`` is never used. Duplicate pairs
become queries too: each first question q1 gets the BM25 top-``WINDOW`` of the dev collection (q1
excluded) as candidates — the window the ``fused`` ranker rescores. When BM25 missed every
duplicate, one is put in place of the last candidate (``split=FORCED``) so early stopping still
sees the model rank it; the β fit leaves those queries out, as evaluation would never see them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.data.types import Dataset, Question, RankingQuery
from es_plugin_bridge.engines import EmbeddedIndex
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text import Preprocessor

#: The first stage's window: what ``fused`` rescores at retrieval time and what β are fit on.
WINDOW = 100
PAIR_QUERIES = "dev-pairs"
FORCED = "dev-pairs-forced"


def dev_queries(
    datasets: Sequence[Dataset],
    preprocessor: Preprocessor,
    window: int = WINDOW,
    max_queries: int | None = None,
) -> list[RankingQuery]:
    """Reranking queries from dev datasets; UserError when none has a relevant candidate."""
    queries: list[RankingQuery] = []
    for ds in datasets:
        queries.extend(q for q in ds.queries if q.split != "test")
        if ds.pairs:
            queries.extend(_pair_queries(ds, preprocessor, window))
    if max_queries is not None and len(queries) > max_queries:
        rng = np.random.default_rng(0)
        keep = sorted(rng.choice(len(queries), size=max_queries, replace=False))
        queries = [queries[i] for i in keep]
    if not any(any(label > 0 for label in q.labels) for q in queries):
        names = ", ".join(ds.name for ds in datasets)
        raise UserError(f"the dev data ({names}) holds no duplicate pair or relevant candidate")
    return queries


def _pair_queries(ds: Dataset, preprocessor: Preprocessor, window: int) -> list[RankingQuery]:
    collection: dict[str, Question] = {}
    dupes: dict[str, set[str]] = defaultdict(set)
    for pair in ds.pairs:
        collection.setdefault(pair.q1.id, pair.q1)
        collection.setdefault(pair.q2.id, pair.q2)
        if pair.label > 0:
            dupes[pair.q1.id].add(pair.q2.id)
            dupes[pair.q2.id].add(pair.q1.id)
    ids = list(collection)
    index = EmbeddedIndex.build([preprocessor.tokens(collection[i]) for i in ids], "bm25", ids=ids)
    out = []
    seen: set[str] = set()
    for pair in ds.pairs:
        if pair.label <= 0 or pair.q1.id in seen or pair.q1.id == pair.q2.id:
            continue
        seen.add(pair.q1.id)
        query_tokens = preprocessor.tokens(pair.q1)
        hits = index.search(query_tokens, k=window, exclude={pair.q1.id})
        cand_ids = [doc for doc, _ in hits]
        forced = not dupes[pair.q1.id] & set(cand_ids)
        if forced:
            cand_ids = cand_ids[: window - 1] + [pair.q2.id]
        scores = np.asarray(index.score(query_tokens, cand_ids), dtype=np.float64)
        out.append(
            RankingQuery(
                query=pair.q1,
                candidates=[collection[c] for c in cand_ids],
                labels=[1 if c in dupes[pair.q1.id] else 0 for c in cand_ids],
                first_stage_scores=[float(s) for s in scores],
                split=FORCED if forced else PAIR_QUERIES,
            )
        )
    return out
