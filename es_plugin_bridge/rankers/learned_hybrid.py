"""``learned-hybrid``: the engine's own hybrid (each clause's top window normalised, then combined) with
the normalisation, combination, weights and window the model's fit chose (``training/hybrid_fit.py``).

Why in process too: the engine mode of the same name (``elastic/modes/learned_hybrid.py``) sends the
same computation to OpenSearch as one ``hybrid`` query and a ``normalization-processor`` pipeline, so
this ranker's figures are what a site gets from its engine, and the node tests hold the two to the same
top 10. The clauses: the first stage's top ``window`` (Lucene's formulas, the embedded engine) and the
vectors' exact top ``window`` scored as the engine's vector query scores (``core.hybrid_fusion``).

The fusion is read from the model directory (``config.json``'s ``hybrid``; a checkpoint's
``fusion.hybrid``); ``--param learned-hybrid.window=N`` and ``--param learned-hybrid.dense=W`` (the
vectors' weight, the first stage's is 1 − W) override it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from es_plugin_bridge.core.hybrid_fusion import HybridFusion, dense_clause_scores, fuse_lists
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.rankers import register
from es_plugin_bridge.rankers.base import Ranker, RankerContext
from es_plugin_bridge.rankers.neural import _scorer
from es_plugin_bridge.rankers.whole_collection import dense_index, top_k


def model_hybrid(model_dir: Path) -> HybridFusion:
    """The learned hybrid a model directory records (exported or checkpoint); UserError when none."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{model_dir}: cannot read config.json ({exc})") from None
    found = config.get("hybrid") or (config.get("fusion") or {}).get("hybrid", {}).get("fusion")
    if not found:
        raise UserError(f"{model_dir}: no learned hybrid in config.json (a model trained before the fit "
                        "existed, or one without vectors): retrain it, or export it again from a checkpoint "
                        "that has one")
    try:
        return HybridFusion(**found)
    except ValidationError as exc:
        raise UserError(f"{model_dir}/config.json: hybrid: {exc.errors()[0]['msg']}") from None


def with_params(fusion: HybridFusion, params: dict[str, float]) -> HybridFusion:
    """``fusion`` with ``--param`` overrides (``window``, ``dense``); UserError naming a bad one."""
    unknown = set(params) - {"window", "dense"}
    if unknown:
        raise UserError(f"--param learned-hybrid.{sorted(unknown)[0]}: not a parameter (window, dense)")
    update: dict[str, object] = {}
    if "window" in params:
        update["window"] = int(params["window"])
    if "dense" in params:
        update["weights"] = {"first_stage": round(1 - params["dense"], 10), "dense": float(params["dense"])}
    try:
        return HybridFusion(**{**fusion.model_dump(), **update})
    except ValueError as exc:
        raise UserError(f"--param learned-hybrid: {exc}") from None


@register("learned-hybrid", tasks=("retrieval",), needs_model=True,
          description="the engine's hybrid (normalised clauses combined) with the model's fitted fusion")
class LearnedHybridRanker(Ranker):
    """The first stage's and the vectors' own top windows, fused as the engine's ``hybrid`` query does."""

    name = "learned-hybrid"

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        assert context.model_dir is not None
        self.fusion = with_params(model_hybrid(context.model_dir),
                                  dict(context.params.get("learned-hybrid", {})))
        self.scorer = _scorer(context)
        self.stage = context.first_stage(self.fusion.first_stage)
        self.dense = dense_index(context)

    def clause_lists(self, query: Question, window: int, exclude: set[str] | None = None
                     ) -> dict[str, list[tuple[str, float]]]:
        """Each clause's own top ``window``, ``(id, raw score)`` as the engine scores it."""
        lists = {"first_stage": self.stage.search(query, window, exclude)}
        vector = np.asarray(self.scorer.vectors([query]), dtype=np.float32)[0]  # type: ignore[attr-defined]
        if self.dense.cosine and not np.any(vector):
            return lists  # a zero vector has no direction: the engine cannot search it (knn refuses it)
        scores = dense_clause_scores(vector, self.dense.vectors, self.scorer.similarity, self.scorer,
                                     docs_normalised=True)
        for qid in exclude or ():
            pos = self.dense.position.get(qid)
            if pos is not None:
                scores[pos] = -np.inf
        lists["dense"] = [(self.dense.ids[i], float(scores[i])) for i in top_k(scores, window)]
        return lists

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        return fuse_lists(self.clause_lists(query, max(k, self.fusion.window), exclude), self.fusion, k)
