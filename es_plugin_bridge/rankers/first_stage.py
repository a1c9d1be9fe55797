"""First-stage rankers: one per similarity (bm25, lmdirichlet, ...) of the run's engine.

The engine (embedded by default, Elasticsearch with ``--engine elasticsearch``) holds the run's whole
collection (see ``RankerContext``), so collection statistics (document frequencies, average length,
collection language model) are those of all the candidates or documents of the data, not of one
query's ten candidates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.data.types import Pair, Question
from es_plugin_bridge.engines import SIMILARITIES
from es_plugin_bridge.rankers import register
from es_plugin_bridge.rankers.base import Ranker, RankerContext


class SimilarityRanker(Ranker):
    """Scores with one similarity of the run's engine (embedded or Elasticsearch) over its collection."""

    similarity = ""

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        self.stage = context.first_stage(self.similarity)

    def score(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        return np.asarray(self.stage.score(query, [c.id for c in candidates]), dtype=np.float64)

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        return self.stage.search(query, k, exclude)

    def score_pairs(self, pairs: Sequence[Pair]) -> np.ndarray:
        return np.array([float(self.stage.score(p.q1, [p.q2.id])[0]) for p in pairs], dtype=np.float64)


def _make(similarity: str) -> type[SimilarityRanker]:
    cls = type(f"{similarity.title()}Ranker", (SimilarityRanker,),
               {"name": similarity, "similarity": similarity, "__doc__": f"Embedded {similarity} ranker."})
    return register(similarity, description=f"embedded engine, {similarity} similarity")(cls)


RANKERS = {name: _make(name) for name in SIMILARITIES}
