"""``given``: the data's own first-stage order (SemEval: the search engine's RELQ_RANKING_ORDER)."""

from __future__ import annotations

import numpy as np

from es_plugin_bridge.data.types import RankingQuery
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.rankers import register
from es_plugin_bridge.rankers.base import Ranker


@register("given", tasks=("rerank",), description="the data's first-stage scores")
class GivenRanker(Ranker):
    """Replays ``RankingQuery.first_stage_scores``; the reference every reranker must beat."""

    name = "given"

    def rerank(self, query: RankingQuery) -> np.ndarray:
        scores = query.first_stage_scores
        if scores is None or len(scores) != len(query.candidates):
            raise UserError(f"ranker 'given': query {query.query.id!r} has no first-stage scores "
                            "for its candidates in this data")
        return np.asarray(scores, dtype=np.float64)
