"""Jaccard coefficient over word shingles, the first baseline of Bogdanova et al. (2015).

A document is the set of its word n-grams ("shingles") of one size n; two questions are
equivalent when ``|S1 ∩ S2| / |S1 ∪ S2|`` exceeds a threshold chosen on training pairs. The paper
reports size 1 as best (72.65% on AskUbuntu validation, code removed) and uses sizes 1-4 as extra
SVM features.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.baselines.base import TokenPair, best_threshold, check_labels

SIZES = (1, 2, 3, 4)


def shingles(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The set of word n-grams of ``tokens`` (empty when there are fewer than n tokens)."""
    if n < 1:
        raise ValueError(f"shingle size must be >= 1, got {n}")
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def jaccard(tokens_a: Sequence[str], tokens_b: Sequence[str], n: int = 1) -> float:
    """Jaccard coefficient of the size-n shingle sets; 0.0 when both sets are empty (nothing in common)."""
    a, b = shingles(tokens_a, n), shingles(tokens_b, n)
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def jaccard_features(
    tokens_a: Sequence[str], tokens_b: Sequence[str], sizes: Sequence[int] = SIZES
) -> np.ndarray:
    """The Jaccard coefficient for each shingle size (default 1..4), float32."""
    return np.array([jaccard(tokens_a, tokens_b, n) for n in sizes], dtype=np.float32)


class JaccardScorer:
    """Pair scorer and ranker score: Jaccard of size-``n`` shingles; ``fit`` only picks the threshold."""

    def __init__(self, n: int = 1) -> None:
        if n < 1:
            raise ValueError(f"shingle size must be >= 1, got {n}")
        self.n = n
        self.threshold: float | None = None
        self.train_accuracy: float | None = None

    def fit(self, pairs_tokens: Sequence[TokenPair], labels: Sequence[int]) -> None:
        y = check_labels(pairs_tokens, labels)
        self.threshold, self.train_accuracy = best_threshold(self.score(pairs_tokens), y)

    def score(self, pairs_tokens: Sequence[TokenPair]) -> np.ndarray:
        return np.array([jaccard(a, b, self.n) for a, b in pairs_tokens], dtype=np.float64)

    def predict(self, pairs_tokens: Sequence[TokenPair]) -> np.ndarray:
        """1 where the score reaches the fitted threshold."""
        if self.threshold is None:
            raise RuntimeError("JaccardScorer.predict before fit")
        return (self.score(pairs_tokens) >= self.threshold).astype(np.int64)

    def rank_scores(self, query: Sequence[str], candidates: Sequence[Sequence[str]]) -> np.ndarray:
        """Scores of candidates for reranking against one query (no threshold needed)."""
        return self.score([(query, c) for c in candidates])
