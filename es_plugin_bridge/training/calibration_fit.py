"""Platt scaling: turn a ranking score into P(relevant) with one logistic curve fit on dev candidates.

The sidecar answers probabilities (docs/architecture.md, docs/sidecar-api.md: Elasticsearch adds and
compares them, and rewrites negative scores). ``σ(a·s + b)`` with ``a > 0`` is strictly increasing in
``s``, so calibrating never changes a ranking; it only gives the score a meaning ("how likely is this
candidate a duplicate of the query") that holds across queries. Needs both relevant and irrelevant
candidates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.core.calibration import Platt, apply_platt

__all__ = ["Platt", "apply_platt", "fit_platt"]


def fit_platt(scores: Sequence[np.ndarray], labels: Sequence[Sequence[int]]) -> Platt | None:
    """(a, b) of ``P = σ(a·score + b)`` over every candidate (label > 0 = relevant), or None when the
    dev data cannot support it (one class only, or a curve that does not increase with the score)."""
    x = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores]) if scores else np.zeros(0)
    y = np.concatenate([np.asarray(lab) > 0 for lab in labels]) if labels else np.zeros(0, dtype=bool)
    if x.size == 0 or y.all() or not y.any() or np.ptp(x) == 0:
        return None
    from sklearn.linear_model import LogisticRegression  # training only: the sidecar just applies

    fit = LogisticRegression(C=1e4, max_iter=1000).fit(x.reshape(-1, 1), y)
    a, b = float(fit.coef_[0, 0]), float(fit.intercept_[0])
    return (a, b) if a > 0 else None
