"""``model`` (the trained model's own score) and ``fused`` (β fusion with a first stage).

Both load ``--model DIR``: a checkpoint directory written by ``esrerank train`` (scored with torch)
or a model directory written by ``export-onnx`` (it has a manifest.json; scored with onnxruntime
through ``serving.scorer.ExportedScorer``; ``rankers.scorers.open_scorer`` picks). Either format stores
the fusion β in its config.json.
``fused`` = β_fs·minmax(first stage) + β_bow·bow + β_neural·neural, with the β fitted on dev data
at training time for each first stage (see ``training/fusion_fit.py``). Its first stage is the data's
own order (``given``) when the model has β for it and the query carries first-stage scores, else
BM25 over the run's collection. For retrieval it rescoring the first stage's top ``window``
documents, as Elasticsearch's rescore step does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.core.fusion import FIRST_STAGES
from es_plugin_bridge.data.types import Pair, Question, RankingQuery
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.rankers import build, register
from es_plugin_bridge.rankers.base import Ranker, RankerContext
from es_plugin_bridge.rankers.scorers import open_scorer
from es_plugin_bridge.serving.scorer import CollectionSearcher, Scorer
from es_plugin_bridge.training.devdata import WINDOW

_SCORER = "neural.scorer"
_SEARCHER = "neural.searcher"


def _scorer(context: RankerContext) -> Scorer:
    """The run's scorer (``open_scorer``: by the directory's format), built once."""
    scorer = context.shared.get(_SCORER)
    if scorer is None:
        assert context.model_dir is not None
        scorer = open_scorer(context.model_dir)
        scorer.prepare(list(context.collection))  # one batched pass over the collection
        context.shared[_SCORER] = scorer
    return scorer  # type: ignore[return-value]


def preloaded(scorer: Scorer) -> dict[str, object]:
    """A ``RankerContext.shared`` holding a scorer built (and its collection encoded) beforehand, so a run
    reuses those encodings instead of encoding the collection again."""
    return {_SCORER: scorer}


def _fusion_weights(context: RankerContext, scorer: Scorer) -> dict[str, dict[str, float]]:
    """β per first stage, as the model directory stores them (either format)."""
    return dict(scorer.fusion)


def _searcher(context: RankerContext) -> CollectionSearcher:
    searcher = context.shared.get(_SEARCHER)
    if searcher is None:
        searcher = CollectionSearcher(_scorer(context), context.collection)
        context.shared[_SEARCHER] = searcher
    return searcher  # type: ignore[return-value]


@register("model", needs_model=True, description="the trained model's score alone")
class ModelRanker(Ranker):
    """The neural model's own similarity (bow-cnn: its learned β₁·bow + β₂·cnn)."""

    name = "model"

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        self.scorer = _scorer(context)

    def score(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        return self.scorer.components(query, candidates)["model"]

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        return _searcher(self.context).search(query, k, exclude)

    def score_pairs(self, pairs: Sequence[Pair]) -> np.ndarray:
        return self.scorer.pair_components([(p.q1, p.q2) for p in pairs])["model"]


@register(
    "fused",
    tasks=("rerank", "retrieval"),
    needs_model=True,
    description="beta fusion of first-stage, BOW and neural scores",
)
class FusedRanker(Ranker):
    """First stage + BOW + neural, weighted by the β stored with the model."""

    name = "fused"
    window = WINDOW

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        self.scorer = _scorer(context)
        self.stages = _fusion_weights(context, self.scorer)
        if not self.stages:
            raise UserError(f"{context.model_dir}: no fusion weights (β) in config.json; retrain it")
        self._first_stage: dict[str, Ranker] = {}
        self._by_id: dict[str, Question] | None = None
        self.window = int(context.params.get("fused", {}).get("window", self.window))

    def _stage(self, name: str) -> Ranker:
        if name not in self._first_stage:
            self._first_stage[name] = build(name, self.context)
        return self._first_stage[name]

    def _stage_for(self, query: RankingQuery | None) -> str:
        forced = self.context.fused_first_stage
        if forced is not None:
            if forced not in self.stages:
                raise UserError(f"the model has no β for first stage {forced!r} (it has: "
                                f"{', '.join(sorted(self.stages))})")
            if forced == "given" and (query is None or query.first_stage_scores is None):
                raise UserError("first stage 'given' needs data that carries its own order (rerank)")
            return forced
        if query is not None and query.first_stage_scores is not None and "given" in self.stages:
            return "given"
        for name in FIRST_STAGES:
            if name in self.stages:
                return name
        raise UserError(f"the model's β need the data's own first stage ({', '.join(self.stages)})")

    def components(self, query: RankingQuery) -> dict[str, np.ndarray]:
        """Every input of the fused score and the score itself, per candidate (for --explain)."""
        from es_plugin_bridge.training.fusion_fit import fuse, minmax

        stage = self._stage_for(query)
        first = np.asarray(self._stage(stage).rerank(query), dtype=np.float64)
        parts = self.scorer.components(query.query, query.candidates)
        features = {"first_stage": first, "bow": parts["bow"], "neural": parts["neural"]}
        return {
            "first_stage": first,
            "first_stage_norm": minmax(first),
            "bow": parts["bow"],
            "neural": parts["neural"],
            "fused": fuse(features, self.stages[stage]),
        }

    def weights(self, query: RankingQuery) -> dict[str, float]:
        """The β this query's fused score uses (its first stage's), for --explain's weighted sum."""
        return {k: float(v) for k, v in self.stages[self._stage_for(query)].items()}

    def rerank(self, query: RankingQuery) -> np.ndarray:
        return self.components(query)["fused"]

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        from es_plugin_bridge.training.fusion_fit import fuse

        stage = self._stage_for(None)
        hits = self._stage(stage).search(query, max(k, self.window), exclude)
        if not hits:
            return []
        if self._by_id is None:
            self._by_id = {q.id: q for q in self.context.collection}
        candidates = [self._by_id[doc] for doc, _ in hits]
        parts = self.scorer.components(query, candidates)
        first = np.array([score for _, score in hits], dtype=np.float64)
        features = {"first_stage": first, "bow": parts["bow"], "neural": parts["neural"]}
        fused = fuse(features, self.stages[stage])
        order = np.lexsort((np.arange(len(fused)), -fused))[:k]
        return [(hits[i][0], float(fused[i])) for i in order]
