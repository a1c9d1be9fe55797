"""First-stage rankers: one per similarity of the embedded engine (bm25, lmdirichlet, ...).

The index is built over the run's whole collection (see ``RankerContext``), so collection
statistics (document frequencies, average length, collection language model) are those of all the
candidates or documents of the data, not of one query's ten candidates. The postings are built once
per run and shared by every similarity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.data.types import Pair, Question
from es_plugin_bridge.engines import SIMILARITIES, EmbeddedIndex
from es_plugin_bridge.rankers import register
from es_plugin_bridge.rankers.base import Ranker, RankerContext

_SHARED = "first_stage.postings"


class SimilarityRanker(Ranker):
    """Scores with one similarity of ``EmbeddedIndex`` over the context's collection."""

    similarity = ""

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        params = dict(context.params.get(self.similarity, {}))
        base = context.shared.get(_SHARED)
        if base is None:
            docs = [context.tokens(q) for q in context.collection]
            ids = [q.id for q in context.collection]
            # Built with this ranker's similarity, so the first ranker of a run scores only once.
            self.index = EmbeddedIndex.build(docs, self.similarity, ids=ids, **params)
            context.shared[_SHARED] = self.index
        else:
            self.index = base.with_similarity(self.similarity, **params)  # type: ignore[attr-defined]

    def score(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        return np.asarray(self.index.score(self.context.tokens(query), [c.id for c in candidates]),
                          dtype=np.float64)

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        return self.index.search(self.context.tokens(query), k=k, exclude=exclude)

    def score_pairs(self, pairs: Sequence[Pair]) -> np.ndarray:
        return np.array([float(self.index.score(self.context.tokens(p.q1), [p.q2.id])[0]) for p in pairs],
                        dtype=np.float64)


def _make(similarity: str) -> type[SimilarityRanker]:
    cls = type(f"{similarity.title()}Ranker", (SimilarityRanker,),
               {"name": similarity, "similarity": similarity, "__doc__": f"Embedded {similarity} ranker."})
    return register(similarity, description=f"embedded engine, {similarity} similarity")(cls)


RANKERS = {name: _make(name) for name in SIMILARITIES}
