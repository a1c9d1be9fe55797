"""The learned hybrid: each clause's own top window normalised, then combined with fitted weights, as the
engine computes it.

Why this shape: the engines already fuse a lexical and a vector clause in one request (OpenSearch's
``hybrid`` query with a ``normalization-processor``; Elasticsearch's ``linear`` retriever), so the
product's fusion *is* that computation with the normalisation, combination, weights and window chosen by
a fit on the site's own dev queries (``training.hybrid_fit``). The in-process ranker ``learned-hybrid``
and the engine mode of the same name compute the same thing, so evaluation figures are the engine's.

The rule, restated from neural-search 2.19.1 (``processor/normalization/MinMaxScoreNormalizationTechnique``,
``L2ScoreNormalizationTechnique``, ``processor/combination/ScoreCombiner``, ``ArithmeticMean…``,
``HarmonicMean…``, ``GeometricMeanScoreCombinationTechnique``), all in float32 as Java computes it:

* each clause (sub-query) returns its own top ``window`` (``pagination_depth``; the hybrid collector keeps a
  priority queue of that size per sub-query);
* ``min_max``: ``(s − min) / (max − min)`` over that clause's results; a result equal to the min gets
  0.001 (``MIN_SCORE``), and when min = max = s, 1.0; ``l2``: ``s / sqrt(Σ s²)`` (0 when the norm is 0);
* a document a clause did not return has 0.0 for it (``getNormalizedScoresPerDocument`` starts from
  ``new float[n]``);
* ``arithmetic_mean``: ``Σ w·s / Σ w`` over the scores ≥ 0 (so every clause, missing ones at 0);
  ``harmonic_mean``: ``Σ w / Σ (w / s)`` over the scores > 0; ``geometric_mean``:
  ``exp(Σ w·ln s / Σ w)`` over the scores > 0; 0 when nothing counts;
* hits sorted by the combined score, best first (ties: here, the first clause's order, then the next's).

Elasticsearch's ``linear`` retriever (``x-pack/plugin/rank-rrf/.../linear/LinearRetrieverBuilder.java``,
``MinMaxScoreNormalizer.java``) computes ``Σ w·minmax(s)`` with no 0.001 floor and no division by Σ w;
for weights summing to 1 the order is the same but for documents at a clause's minimum, which the
engine ranks as the rest of that clause does not: the mode sends Elasticsearch the ``linear``
retriever only for ``min_max`` + ``arithmetic_mean`` and fuses in the client otherwise
(``elastic/modes/learned_hybrid.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The clauses, in the order the engine's ``hybrid`` query lists them (the weights' order).
CLAUSES: tuple[str, ...] = ("first_stage", "dense")
NORMALIZATIONS: tuple[str, ...] = ("min_max", "l2")
COMBINATIONS: tuple[str, ...] = ("arithmetic_mean", "harmonic_mean", "geometric_mean")
MIN_SCORE = np.float32(0.001)
SINGLE_RESULT_SCORE = np.float32(1.0)
#: The engine refuses weights whose sum is off 1 by more than this (``ScoreCombinationUtil``).
WEIGHT_SUM_DELTA = 1e-6
MAX_WINDOW = 10_000

Hits = list[tuple[str, float]]


class HybridFusion(BaseModel):
    """One fusion: how each clause is normalised, how the clauses combine, with which weights, over how
    deep a window. Stored in an exported model's ``config.json`` (``hybrid``) and turned by ``es setup``
    into the engine's search pipeline or retriever."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    normalization: Literal["min_max", "l2"] = "min_max"
    combination: Literal["arithmetic_mean", "harmonic_mean", "geometric_mean"] = "arithmetic_mean"
    #: One weight per clause of :data:`CLAUSES`, each in [0, 1], summing to 1 (the engine's rule).
    weights: dict[str, float] = Field(default_factory=lambda: {"first_stage": 0.5, "dense": 0.5})
    #: Each clause's own top ``window`` (``pagination_depth``; the vectors' ``k``).
    window: int = Field(100, ge=1, le=MAX_WINDOW)
    #: The first stage the lexical clause runs (its similarity's field).
    first_stage: Literal["bm25", "lmdirichlet"] = "bm25"

    @model_validator(mode="after")
    def _weights(self) -> HybridFusion:
        if set(self.weights) != set(CLAUSES):
            raise ValueError(f"hybrid weights need exactly {list(CLAUSES)}, got {sorted(self.weights)}")
        for clause, weight in self.weights.items():
            if not 0.0 <= weight <= 1.0:
                raise ValueError(f"hybrid weight {clause} must be in [0, 1], got {weight!r}")
        if abs(sum(self.weights.values()) - 1.0) > WEIGHT_SUM_DELTA:
            raise ValueError(f"hybrid weights must sum to 1 (the engine's rule), got {self.weights}")
        return self

    def weight_list(self) -> list[float]:
        """The weights in clause order, as the pipeline's ``combination.parameters.weights``."""
        return [float(self.weights[c]) for c in CLAUSES]

    def single_clause(self) -> str | None:
        """The clause that alone decides the order (weight 1), if any."""
        for clause in CLAUSES:
            if self.weights[clause] == 1.0:
                return clause
        return None

    def describe(self) -> str:
        """One line for people: ``min_max / arithmetic_mean, first stage 0.3, dense 0.7, window 100``."""
        parts = ", ".join(f"{c.replace('_', ' ')} {self.weights[c]:g}" for c in CLAUSES)
        return f"{self.normalization} / {self.combination}, {parts}, window {self.window}"


def normalize(scores: Sequence[float], technique: str) -> np.ndarray:
    """One clause's scores (its own results) normalised as the engine does, in float32."""
    s = np.asarray(scores, dtype=np.float32)
    if s.size == 0:
        return s
    if technique == "min_max":
        low, high = np.float32(s.min()), np.float32(s.max())
        if high == low:
            return np.where(s == high, SINGLE_RESULT_SCORE, MIN_SCORE).astype(np.float32)
        out = ((s - low) / np.float32(high - low)).astype(np.float32)
        return np.where(out == 0.0, MIN_SCORE, out).astype(np.float32)
    if technique == "l2":
        total = np.float32(0.0)
        for x in s:  # Java's float sum, in the clause's order
            total = np.float32(total + np.float32(x * x))
        norm = np.float32(np.sqrt(np.float64(total)))
        if norm == 0:
            return np.zeros_like(s)
        return (s / norm).astype(np.float32)
    raise ValueError(f"unknown normalization {technique!r} (choose from {', '.join(NORMALIZATIONS)})")


def combine(matrix: np.ndarray, weights: Sequence[float], technique: str) -> np.ndarray:
    """Row-wise combination of normalised clause scores ``[docs, clauses]`` (0 = not returned)."""
    m = np.asarray(matrix, dtype=np.float32)
    w = np.asarray(weights, dtype=np.float32)
    if technique == "arithmetic_mean":
        counts = m >= 0.0
        total = np.zeros(len(m), dtype=np.float32)
        wsum = np.zeros(len(m), dtype=np.float32)
        for j in range(m.shape[1]):  # Java's order: one clause after the other, float each step
            total = np.where(counts[:, j], (total + m[:, j] * w[j]).astype(np.float32), total)
            wsum = np.where(counts[:, j], (wsum + w[j]).astype(np.float32), wsum)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(wsum == 0, np.float32(0), total / wsum).astype(np.float32)
    positive = m > 0
    wsum = np.zeros(len(m), dtype=np.float32)
    acc = np.zeros(len(m), dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(m.shape[1]):
            wsum = np.where(positive[:, j], (wsum + w[j]).astype(np.float32), wsum)
            if technique == "harmonic_mean":
                step = (w[j] / m[:, j]).astype(np.float32)
            elif technique == "geometric_mean":
                step = (np.float64(w[j]) * np.log(m[:, j].astype(np.float64)))  # float · double → double
            else:
                raise ValueError(f"unknown combination {technique!r} (choose from {', '.join(COMBINATIONS)})")
            acc = np.where(positive[:, j], (acc + step).astype(np.float32), acc)
        if technique == "harmonic_mean":
            return np.where(acc > 0, wsum / acc, np.float32(0)).astype(np.float32)
        out = np.exp(acc.astype(np.float64) / wsum.astype(np.float64)).astype(np.float32)
        return np.where(wsum == 0, np.float32(0), out).astype(np.float32)


def fuse_lists(lists: Mapping[str, Sequence[tuple[str, float]]], fusion: HybridFusion, k: int) -> Hits:
    """The engine's combined top ``k`` of each clause's own results (``lists[clause]``: ``(id, raw score)``
    best first, already cut to the window). A clause absent from ``lists`` returned nothing."""
    ids: list[str] = []
    position: dict[str, int] = {}
    for clause in CLAUSES:
        for doc, _ in lists.get(clause, ()):
            if doc not in position:
                position[doc] = len(ids)
                ids.append(doc)
    if not ids:
        return []
    matrix = np.zeros((len(ids), len(CLAUSES)), dtype=np.float32)
    for j, clause in enumerate(CLAUSES):
        hits = lists.get(clause, ())
        if not hits:
            continue
        normed = normalize([score for _, score in hits], fusion.normalization)
        for (doc, _), value in zip(hits, normed, strict=True):
            matrix[position[doc], j] = value
    combined = combine(matrix, fusion.weight_list(), fusion.combination)
    order = np.lexsort((np.arange(len(ids)), -combined.astype(np.float64)))[:k]
    return [(ids[i], float(combined[i])) for i in order]


def pipeline_body(fusion: HybridFusion, description: str = "") -> dict[str, object]:
    """The OpenSearch search pipeline (``normalization-processor``) that computes ``fusion``."""
    return {
        "description": description or f"esrerank learned hybrid: {fusion.describe()}",
        "phase_results_processors": [{
            "normalization-processor": {
                "normalization": {"technique": fusion.normalization},
                "combination": {"technique": fusion.combination,
                                "parameters": {"weights": fusion.weight_list()}},
            }
        }],
    }


def dense_clause_scores(query: np.ndarray, docs: np.ndarray, similarity: str, scorer: object,
                        docs_normalised: bool = False) -> np.ndarray:
    """The vectors' clause's raw score of every document, as the engine's vector query scores it:
    ``(1 + cos) / 2`` in float32 for a cosine model (Lucene's ``VectorSimilarityFunction.COSINE``, the
    k-NN plugin's lucene ``knn``; the exact ``script_score`` of ``elastic/queries.py`` computes the same);
    ``exp(−L1)`` for a Manhattan model (exact only), as ``scorer.neural_similarity`` computes it."""
    if similarity == "cosine":
        q = np.asarray(query, dtype=np.float32)
        d = np.asarray(docs, dtype=np.float32)
        qn = q / max(float(np.linalg.norm(q)), 1e-8)
        dn = d if docs_normalised else d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-8)
        cos = (dn @ qn).astype(np.float32)
        return ((np.float32(1.0) + cos) / np.float32(2.0)).astype(np.float32)
    return np.asarray(scorer.neural_similarity(np.asarray([query]), docs)[0],  # type: ignore[attr-defined]
                      dtype=np.float32)  # Manhattan docs are never normalised (DenseIndex keeps them raw)
