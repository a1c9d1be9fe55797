"""The learned hybrid's dev queries: each dev duplicate pair's first question searched among a collection
by each clause on its own, as the engine's ``hybrid`` query runs them.

Which collection matters: how much BM25 adds to the vectors depends on how many near-misses there are
to tell apart. Among the dev pairs' own questions alone (a thousand or so) the vectors nearly always win
and the fit's guard keeps them alone; among the site's whole index (``esrerank fit-hybrid --corpus``,
what ``make demo`` does) the two clauses trade off as they will in production.
The first stage is the embedded engine (Lucene's formulas, the engine's scores); the vectors' clause
scores as the engine's ``knn`` on a cosine field does, ``(1 + cos) / 2`` (``core.hybrid_fusion``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence

import numpy as np

from es_plugin_bridge.core.hybrid_fusion import dense_clause_scores
from es_plugin_bridge.data.types import Dataset, Question
from es_plugin_bridge.engines import EmbeddedIndex
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.training.hybrid_fit import WINDOWS, DevQuery


def _top(scores: np.ndarray, ids: Sequence[str], k: int, skip: int) -> list[tuple[str, float]]:
    """The ``k`` best (ties: the lower position), position ``skip`` (the query itself) left out."""
    scores = scores.astype(np.float64).copy()
    scores[skip] = -np.inf
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return [(ids[i], float(scores[i])) for i in order if np.isfinite(scores[i])]


def hybrid_dev_queries(datasets: Sequence[Dataset], preprocessor: Preprocessor, scorer: object,
                       first_stage: str = "bm25", only: Collection[str] | None = None,
                       corpus: Sequence[Question] = ()) -> list[DevQuery]:
    """One :class:`DevQuery` per dev question with a duplicate (``only``: just these query ids), searched
    among the dev pairs' questions and ``corpus`` (more documents: the site's index, say; none of them is
    a known duplicate of a dev query unless a dev pair says so)."""
    collection: dict[str, Question] = {q.id: q for q in corpus}
    dupes: dict[str, set[str]] = defaultdict(set)
    for ds in datasets:
        for pair in ds.pairs:
            collection.setdefault(pair.q1.id, pair.q1)
            collection.setdefault(pair.q2.id, pair.q2)
            if pair.label > 0 and pair.q1.id != pair.q2.id:
                dupes[pair.q1.id].add(pair.q2.id)
                dupes[pair.q2.id].add(pair.q1.id)
    ids = list(collection)
    if not ids:
        return []
    position = {qid: i for i, qid in enumerate(ids)}
    questions = [collection[i] for i in ids]
    index = EmbeddedIndex.build([preprocessor.tokens(q) for q in questions], first_stage, ids=ids)
    vectors = np.asarray(scorer.vectors(questions), dtype=np.float32)  # type: ignore[attr-defined]
    similarity = scorer.similarity  # type: ignore[attr-defined]
    depth = max(WINDOWS)
    out = []
    seen: set[str] = set()
    for ds in datasets:
        for pair in ds.pairs:
            qid = pair.q1.id
            if pair.label <= 0 or qid in seen or not dupes[qid] or (only is not None and qid not in only):
                continue
            seen.add(qid)
            lexical = index.search(preprocessor.tokens(pair.q1), k=depth, exclude={qid})
            dense = dense_clause_scores(vectors[position[qid]], vectors, similarity, scorer)
            out.append(DevQuery({"first_stage": lexical, "dense": _top(dense, ids, depth, position[qid])},
                                frozenset(dupes[qid])))
    return out
