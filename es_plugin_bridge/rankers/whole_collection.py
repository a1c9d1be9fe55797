"""``dense``, ``hybrid``, ``hybrid-rrf``: retrieval candidates from the model's vectors, not only BM25.

A reranker over BM25's top window cannot find a duplicate BM25 missed (on AskUbuntu titles most of
them: only about a third of the queries have their duplicate in BM25's top 100), so these rankers
take candidates from the whole collection through the model's neural vectors:

* ``dense``: exact nearest neighbours of the query's vector among every document's (one numpy
  product with the L2-normalised document matrix for cosine models, ``exp(-L1)`` for the Manhattan
  ones), scored by the neural similarity alone. Elasticsearch's ``knn`` retriever over the stored
  ``dense_vector`` is the same search (exact with a ``script_score``, approximate with HNSW).
* ``hybrid``: the union of the first stage's top ``window`` (BM25 unless ``--first-stage``) and
  dense's top ``window``, rescored with the model's fusion β (``fused``'s score: the first stage's
  score of every candidate of the union, min-max normalised over it, plus BOW and neural).
* ``hybrid-rrf``: the same two lists merged by reciprocal-rank fusion, ``Σ 1/(k + rank)``
  (k = 60), as Elasticsearch's ``rrf`` retriever over a ``knn`` and a ``standard`` retriever does;
  no β needed.

Parameters: ``--param hybrid.window=100``, ``--param hybrid-rrf.window=100``, ``--param
hybrid-rrf.k=60``. For rerank and classify, ``dense`` scores the given candidates or pairs with the
neural similarity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.core.fusion import fuse
from es_plugin_bridge.data.types import Pair, Question
from es_plugin_bridge.rankers import register
from es_plugin_bridge.rankers.base import Ranker, RankerContext
from es_plugin_bridge.rankers.neural import FusedRanker, _scorer
from es_plugin_bridge.training.devdata import WINDOW

_INDEX = "dense.index"
RRF_K = 60


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest finite scores, best first; ties keep the lower position first,
    also at the cut: of documents tied with the ``k``-th score, the lower positions are taken
    (``argpartition`` alone takes any of them), so the top ``k`` is the top ``n``'s first ``k``."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < len(scores):
        ranked = np.where(np.isnan(scores), -np.inf, scores)  # NaN is never kept: rank it last
        kth = ranked[np.argpartition(-ranked, k - 1)[k - 1]]
        above = np.flatnonzero(ranked > kth)
        top = np.concatenate([above, np.flatnonzero(ranked == kth)[: k - len(above)]])
    else:
        top = np.arange(len(scores))
    top = top[np.lexsort((top, -scores[top]))]
    return top[np.isfinite(scores[top])]


class DenseIndex:
    """Every collection vector in one matrix; a query is one matrix-vector product (exact search)."""

    def __init__(self, scorer: object, collection: Sequence[Question]) -> None:
        self.scorer = scorer
        self.ids = [q.id for q in collection]
        self.position = {qid: i for i, qid in enumerate(self.ids)}
        vectors = np.asarray(scorer.vectors(list(collection)), dtype=np.float32)  # type: ignore[attr-defined]
        self.cosine = scorer.similarity != "manhattan"  # type: ignore[attr-defined]
        if self.cosine:  # normalised once, so a query costs one product
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-8)
        self.vectors = vectors

    def scores(self, query: Question) -> np.ndarray:
        """The neural similarity of ``query`` to every document, in collection order."""
        vector = np.asarray(self.scorer.vectors([query]), dtype=np.float32)  # type: ignore[attr-defined]
        if self.cosine:
            vector = vector / max(float(np.linalg.norm(vector)), 1e-8)
            return (self.vectors @ vector[0]).astype(np.float64)
        return np.asarray(self.scorer.neural_similarity(vector, self.vectors, True)[0],  # type: ignore[attr-defined]
                          dtype=np.float64)

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` nearest documents (id, similarity), best first; ids in ``exclude`` skipped."""
        scores = self.scores(query)
        for qid in exclude or ():
            pos = self.position.get(qid)
            if pos is not None:
                scores[pos] = -np.inf
        return [(self.ids[i], float(scores[i])) for i in top_k(scores, k)]


def dense_index(context: RankerContext) -> DenseIndex:
    """The run's dense index over its collection, built once and shared by the rankers of the run."""
    index = context.shared.get(_INDEX)
    if index is None:
        index = context.shared[_INDEX] = DenseIndex(_scorer(context), context.collection)
    return index  # type: ignore[return-value]


@register("dense", needs_model=True, description="exact nearest neighbours of the model's vectors")
class DenseRanker(Ranker):
    """The neural similarity alone; retrieval searches every document's vector."""

    name = "dense"

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        self.scorer = _scorer(context)

    def score(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        return np.asarray(self.scorer.components(query, candidates)["neural"], dtype=np.float64)

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        return dense_index(self.context).search(query, k, exclude)

    def score_pairs(self, pairs: Sequence[Pair]) -> np.ndarray:
        return np.asarray(self.scorer.pair_components([(p.q1, p.q2) for p in pairs])["neural"],
                          dtype=np.float64)


def _union(*lists: Sequence[tuple[str, float]]) -> list[str]:
    """Ids of every list, first occurrence kept, in list order."""
    return list(dict.fromkeys(doc for hits in lists for doc, _ in hits))


@register("hybrid", tasks=("retrieval",), needs_model=True,
          description="fused β over the union of the first stage's and the vectors' top windows")
class HybridRanker(FusedRanker):
    """``fused`` over a candidate window that also holds the dense nearest neighbours."""

    name = "hybrid"

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        self.window = int(context.params.get("hybrid", {}).get("window", WINDOW))
        self.dense = dense_index(context)

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        stage_name = self._stage_for(None)
        stage = self._stage(stage_name)
        window = max(k, self.window)
        ids = _union(stage.search(query, window, exclude), self.dense.search(query, window, exclude))
        if not ids:
            return []
        if self._by_id is None:
            self._by_id = {q.id: q for q in self.context.collection}
        candidates = [self._by_id[doc] for doc in ids]
        first = np.asarray(stage.score(query, candidates), dtype=np.float64)
        parts = self.scorer.components(query, candidates)
        features = {"first_stage": first, "bow": parts["bow"], "neural": parts["neural"]}
        fused = fuse(features, self.stages[stage_name])
        return [(ids[i], float(fused[i])) for i in top_k(fused, k)]


@register("hybrid-rrf", tasks=("retrieval",), needs_model=True,
          description="reciprocal-rank fusion of BM25's and the vectors' top windows")
class HybridRrfRanker(Ranker):
    """Reciprocal-rank fusion of BM25 and dense, as Elasticsearch's ``rrf`` retriever computes it."""

    name = "hybrid-rrf"

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        params = context.params.get("hybrid-rrf", {})
        self.window = int(params.get("window", WINDOW))
        self.k = float(params.get("k", RRF_K))
        self.stage = context.first_stage("bm25")
        self.dense = dense_index(context)

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        window = max(k, self.window)
        fused: dict[str, float] = {}
        for hits in (self.stage.search(query, window, exclude), self.dense.search(query, window, exclude)):
            for rank, (doc, _) in enumerate(hits, start=1):
                fused[doc] = fused.get(doc, 0.0) + 1.0 / (self.k + rank)
        ids = list(fused)
        scores = np.array([fused[doc] for doc in ids], dtype=np.float64)
        return [(ids[i], float(scores[i])) for i in top_k(scores, k)]
