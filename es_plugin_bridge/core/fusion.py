"""β fusion of one query's candidates: ``β_fs·minmax(first stage) + β_bow·bow + β_neural·neural``.

The first-stage score is min-max normalised within each query's candidates (BM25 scores are unbounded
and their scale varies by query); BOW and neural scores are similarities already on a fixed scale.
Fitting the β (a dev-MAP search) is training's business (``training.fusion_fit``); applying them is here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

FEATURES = ("first_stage", "bow", "neural")
#: The computed first stages a model's β are fitted for and every engine can run: the trainer fits β for
#: each, the rankers and ``es setup`` use them, and every ``--first-stage`` offers them (``given``, the
#: data's own order, is added where the data carries one).
FIRST_STAGES: tuple[str, ...] = ("bm25", "lmdirichlet")


def minmax(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] within one query; a constant vector maps to zeros.

    Finite scores whose range overflows a double (``[1e308, -1e308]``: ``high − low`` is inf) are
    halved first, which is exact in binary floating point and cannot overflow, so the answer stays
    finite instead of NaN.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    low, high = float(scores.min()), float(scores.max())
    if not high > low:
        return np.zeros_like(scores)
    if np.isfinite(high - low):
        return (scores - low) / (high - low)
    half = scores / 2
    return np.clip((half - low / 2) / (high / 2 - low / 2), 0.0, 1.0)


def fuse(features: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """The fused score of one query's candidates; ``features`` holds raw first-stage scores."""
    total = weights["first_stage"] * minmax(features["first_stage"])
    return total + weights["bow"] * features["bow"] + weights["neural"] * features["neural"]
