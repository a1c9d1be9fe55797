"""What the sidecar computes, apart from HTTP: rerank and embed requests against a model directory.

Kept out of the Flask app so the bridge (and tests) can call it in process with the same results.
"""

from __future__ import annotations

import numpy as np

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.model_dir import ModelDirectory
from es_plugin_bridge.serving.relevance import combination_range, component_ranges, to_unit
from es_plugin_bridge.serving.schemas import (
    DocumentIn,
    Embedding,
    EmbedRequest,
    EmbedResponse,
    RerankRequest,
    RerankResponse,
    RerankResult,
    to_question,
)
from es_plugin_bridge.training.calibration import apply_platt
from es_plugin_bridge.training.fusion import minmax


class RequestError(UserError):
    """A request that is well-formed JSON but asks for something impossible; names the field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


class Service:
    """Scores requests with one loaded model; ``name`` is what responses report as ``model``."""

    def __init__(self, model: ModelDirectory, name: str | None = None, max_documents: int = 1000) -> None:
        self.model = model
        self.name = name or f"{model.model_type}:{model.path.name}"
        self.max_documents = max_documents
        ranges = component_ranges(model.similarity, model.config.bow_weights)
        beta = model.config.beta.model
        own = {"bow": beta[0], "neural": beta[1]} if beta is not None else {"neural": 1.0}
        # Range of each score the sidecar can answer with ("model", or a first stage's fusion).
        self.bounds = {"model": combination_range(own, ranges)}
        self.bounds.update({stage: combination_range(w, ranges) for stage, w in model.fusion.items()})

    def relevance(self, key: str, raw: np.ndarray) -> np.ndarray:
        """P(relevant) by the score's Platt curve, else the score mapped onto [0, 1] by its bounds."""
        platt = self.model.config.beta.calibration.get(key)
        return apply_platt(raw, platt) if platt is not None else to_unit(raw, self.bounds[key])

    def _stage(self, req: RerankRequest) -> str | None:
        """The first stage whose β fuse the scores, or None for the model's own score."""
        scores = req.first_stage_scores
        if scores is None:
            if req.first_stage is not None:
                raise RequestError("first_stage", "first_stage needs first_stage_scores")
            return None
        if len(scores) != len(req.documents):
            message = f"{len(scores)} scores for {len(req.documents)} documents"
            raise RequestError("first_stage_scores", message)
        try:
            return self.model.fusion_stage(req.first_stage)
        except UserError as exc:
            raise RequestError("first_stage", str(exc)) from None

    def _check_size(self, field: str, n: int) -> None:
        if n > self.max_documents:
            raise RequestError(field, f"{n} items; this server takes at most {self.max_documents} a request")

    def rerank(self, req: RerankRequest) -> RerankResponse:
        """Score every document for the query; results best first, cut to ``top_n``.

        With ``first_stage_scores`` the score is the β fusion learned for ``first_stage`` (default:
        the model's); without, the model's own score. Either becomes P(relevant) by the Platt curve
        fit on dev at training time, or, for a model without one, is mapped onto [0, 1] by its
        bounds; both keep the order.
        """
        self._check_size("documents", len(req.documents))
        stage = self._stage(req)
        scores_in = req.first_stage_scores
        parts = self.model.rerank(to_question(req.query), [to_question(d) for d in req.documents],
                                  scores_in, stage)
        raw = parts["fused"] if stage is not None else parts["model"]
        relevance = self.relevance(stage or "model", raw)
        # Sorted by the raw score: a saturated probability (0 or 1) must not reorder documents.
        order = np.argsort(-raw, kind="stable")[: req.top_n]
        normalised = minmax(np.asarray(scores_in)) if req.explain and scores_in is not None else None
        results = []
        for i in order:
            result = RerankResult(index=int(i), relevance_score=float(relevance[i]))
            if req.return_documents:
                doc = req.documents[i]
                result.document = doc.model_dump() if isinstance(doc, DocumentIn) else {"text": doc}
            if req.explain:
                result.explain = {name: float(parts[name][i]) for name in ("neural", "bow", "model")}
                if scores_in is not None and normalised is not None:
                    result.explain.update(first_stage=float(scores_in[i]),
                                          first_stage_normalised=float(normalised[i]),
                                          fused=float(parts["fused"][i]))
            results.append(result)
        return RerankResponse(results=results, model=self.name)

    def embed(self, req: EmbedRequest) -> EmbedResponse:
        """The neural vector and weighted-BOW terms of each text, for storing in an index."""
        self._check_size("texts", len(req.texts))
        questions = [to_question(t) for t in req.texts]
        encoded = self.model.encode(questions)
        embeddings = [
            Embedding(vector=vec.astype(float).tolist(),
                      terms=dict(zip(self.model.terms(ids), map(float, weights), strict=True)))
            for vec, (ids, weights) in zip(encoded["neural"], encoded["bow"], strict=True)
        ]
        return EmbedResponse(embeddings=embeddings, model=self.name, dimension=self.model.dimension)
