"""Platt calibration applied: ``P(relevant) = σ(a·score + b)`` with ``a > 0``, so it never reorders.

The curve is fit on dev candidates at training time (``training.calibration_fit.fit_platt``, scikit-learn)
and stored in the model directory's ``config.json``; serving only applies it.
"""

from __future__ import annotations

import numpy as np

Platt = tuple[float, float]


def apply_platt(scores: np.ndarray, platt: Platt) -> np.ndarray:
    """σ(a·score + b), computed without overflow."""
    a, b = platt
    z = a * np.asarray(scores, dtype=np.float64) + b
    return np.exp(-np.logaddexp(0.0, -z))
