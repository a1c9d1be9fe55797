"""The interface every pair baseline offers, and the accuracy-maximising threshold tuned on held-out pairs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

TokenPair = tuple[Sequence[str], Sequence[str]]


@runtime_checkable
class PairScorer(Protocol):
    """Scores question pairs (already tokenised); higher means more likely equivalent.

    ``fit`` learns from labelled pairs (1 duplicate, 0 not); ``score`` returns one float per pair.
    Turning scores into decisions is :func:`best_threshold`'s job, on held-out pairs.
    """

    def fit(self, pairs_tokens: Sequence[TokenPair], labels: Sequence[int]) -> None: ...

    def score(self, pairs_tokens: Sequence[TokenPair]) -> np.ndarray: ...


def check_labels(pairs_tokens: Sequence[TokenPair], labels: Sequence[int]) -> np.ndarray:
    """Labels as an int array; refuses a length mismatch, labels other than 0/1, or a single class."""
    y = np.asarray(labels, dtype=np.int64)
    if len(y) != len(pairs_tokens):
        raise ValueError(f"{len(pairs_tokens)} pairs but {len(y)} labels")
    if len(y) and not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    return y


def best_threshold(scores: Sequence[float] | np.ndarray, labels: Sequence[int]) -> tuple[float, float]:
    """(threshold, accuracy) maximising accuracy of ``score >= threshold`` ⇒ duplicate.

    Every cut between two consecutive distinct scores is tried (the threshold is their midpoint, so
    it does not sit on a training score), plus "all positive" and "all negative"; ties go to the
    lowest threshold.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    if len(s) != len(y) or len(s) == 0:
        raise ValueError("best_threshold needs as many scores as labels, at least one")
    values, inverse = np.unique(s, return_inverse=True)
    pos = np.bincount(inverse, weights=(y == 1), minlength=len(values))
    neg = np.bincount(inverse, weights=(y == 0), minlength=len(values))
    # Cut i predicts positive for values[i:]; cut len(values) predicts nothing positive.
    pos_at_or_above = np.concatenate([np.cumsum(pos[::-1])[::-1], [0.0]])
    neg_below = np.concatenate([[0.0], np.cumsum(neg)])
    correct = pos_at_or_above + neg_below
    best = int(np.argmax(correct))
    if best == 0:
        threshold = float(values[0])
    elif best == len(values):
        threshold = float(np.nextafter(values[-1], np.inf))
    else:
        threshold = float((values[best - 1] + values[best]) / 2)
    return threshold, float(correct[best] / len(s))


def accuracy(scores: Sequence[float] | np.ndarray, labels: Sequence[int], threshold: float) -> float:
    """Share of pairs where ``score >= threshold`` agrees with the label."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    return float(np.mean((s >= threshold).astype(np.int64) == y)) if len(y) else 0.0
