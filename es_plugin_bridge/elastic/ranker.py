"""A rerank mode as the ``fused`` ranker of ``es evaluate``: the evaluator never knows it is Elasticsearch.

Scores are derived from the mode's order (the first hit scores highest), since each mode's scores
are on its own scale (fused + a constant, or a probability in bridge mode). A bridge fallback is
counted, so a run that silently lost its reranker says so in the results' notes. Each search is kept
(``asked``: what was asked, in the evaluator's order) so the run can ask the in-process ranker the same
afterwards (``elastic/parity.py``), and, given a request counter (``elastic/request_count.py``), the
requests each search sent (``sent``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.data.types import Question, RankingQuery
from es_plugin_bridge.elastic.parity import Asked
from es_plugin_bridge.rankers.base import Ranker, RankerContext


class ModeRanker(Ranker):
    name = "fused"
    tasks = frozenset({"rerank", "retrieval"})

    def __init__(self, context: RankerContext, mode: object, requests: Counter[str] | None = None) -> None:
        super().__init__(context)
        self.mode = mode
        self.fallbacks: list[str] = []
        self.asked: list[Asked] = []
        self.requests = requests
        #: Per search, the requests it sent by ``host:port`` (empty without a counter).
        self.sent: list[Counter[str]] = []

    def _run(self, query: Question, k: int, **where: object) -> list[tuple[str, float]]:
        before = Counter(self.requests) if self.requests is not None else None
        result = self.mode.search(query, k, **where)  # type: ignore[attr-defined]
        if self.requests is not None and before is not None:
            self.sent.append(self.requests - before)
        if not result.reranked and result.fallback_reason not in (None, "no match"):
            self.fallbacks.append(f"{query.id}: {result.fallback_reason}")
        return result.hits

    def score(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        ids = [c.id for c in candidates]
        hits = self._run(query, len(set(ids)), only=ids)
        rank = {doc: len(hits) - i for i, (doc, _) in enumerate(hits)}
        return np.array([float(rank.get(i, -1)) for i in ids], dtype=np.float64)

    def rerank(self, query: RankingQuery) -> np.ndarray:
        self.asked.append(Asked(query))
        return self.score(query.query, query.candidates)

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        self.asked.append(Asked(query, k, exclude))
        hits = self._run(query, k, exclude=exclude)
        return [(doc, float(len(hits) - i)) for i, (doc, _) in enumerate(hits)]
