"""Scores into [0, 1] without changing their order, for models that carry no Platt calibration.

The sidecar answers ``relevance_score`` as P(relevant) from the calibration fit at training time
(``training.calibration_fit``); a model directory exported without one falls back to this mapping.

Elasticsearch rewrites negative scores and its ``linear`` retriever adds scores, so the sidecar must
answer bounded, non-negative numbers. Every score the model makes is a fixed linear combination of
components with known ranges (cosine in [−1, 1], Manhattan similarity in (0, 1], a cross-encoder's
σ(logit) in [0, 1], a min-maxed first stage in [0, 1]), so the combination's own range follows by
interval arithmetic and an affine map sends it onto [0, 1]. The map is strictly increasing: the
ranking is exactly the model's. It is a bounded score, not a probability.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

Range = tuple[float, float]


def component_ranges(similarity: str, bow_weights: str) -> dict[str, Range]:
    """Range of each component: ``neural`` by similarity, ``bow`` by whether its weights can be < 0."""
    return {
        "neural": (0.0, 1.0) if similarity in ("manhattan", "sigmoid") else (-1.0, 1.0),
        "bow": (0.0, 1.0) if bow_weights == "idf" else (-1.0, 1.0),
        "first_stage": (0.0, 1.0),
    }


def combination_range(weights: Mapping[str, float], ranges: Mapping[str, Range]) -> Range:
    """Range of ``Σ wᵢ·xᵢ`` for ``xᵢ`` in ``ranges[i]`` (weights of either sign)."""
    low = sum(min(w * ranges[name][0], w * ranges[name][1]) for name, w in weights.items())
    high = sum(max(w * ranges[name][0], w * ranges[name][1]) for name, w in weights.items())
    return float(low), float(high)


LINEAR_COMPONENTS = ("bow", "neural")


def linear_shift(weights: Mapping[str, float], ranges: Mapping[str, Range]) -> float:
    """The constant that makes the linear score non-negative: ``fused = β_fs·minmax(fs) + linear + shift``.

    ``linear = Σ_c β_c·x_c − shift`` over c in {bow, neural}, and ``shift`` is the lowest value that sum
    can take (``Σ β_c·low_c`` for β ≥ 0, e.g. −β_neural for a cosine model with IDF bags of words).
    Elasticsearch's ``linear`` retriever then scores ``β_fs·minmax(fs) + (linear + 1)``, which is
    ``fused + 1 − shift``: one constant per model and first stage, so the order is exactly ``fused``.
    """
    return combination_range({c: weights[c] for c in LINEAR_COMPONENTS}, ranges)[0]


def to_unit(scores: np.ndarray, bounds: Range) -> np.ndarray:
    """Affine map of ``bounds`` onto [0, 1] (clipped against float rounding at the ends)."""
    low, high = bounds
    if high <= low:
        return np.full(np.shape(scores), 0.5)
    return np.clip((np.asarray(scores, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
