"""β fusion: one linear combination of first-stage, BOW and neural scores, fit on dev queries.

``fused = β_fs·minmax(first stage) + β_bow·bow + β_neural·neural``. The first-stage score is
min-max normalised within each query's candidates (BM25 scores are unbounded and their scale
varies by query); BOW and neural scores are similarities already on a fixed scale. The β are
found by an exhaustive search on the simplex (step 0.05) maximising dev MAP — three weights are
few enough to search exactly, and MAP is what the product is judged on, so no surrogate loss.
Applying the β (``minmax``, ``fuse``) is the scoring core's (``es_plugin_bridge.core.fusion``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

from es_plugin_bridge.core.fusion import FEATURES, fuse, minmax
from es_plugin_bridge.measures import RERANK_MEASURES, Judged, aggregate, per_query, rank_order

__all__ = ["FEATURES", "fast_mean_ap", "fit_weights", "fuse", "mean_ap", "minmax"]


def mean_ap(per_query_scores: Sequence[np.ndarray], labels: Sequence[Sequence[int]]) -> float:
    """MAP (SemEval convention: every query counts) of scores against graded labels, via ir-measures."""
    judged = []
    for qi, (scores, labs) in enumerate(zip(per_query_scores, labels, strict=True)):
        order = rank_order(list(scores))
        judged.append(
            Judged(
                str(qi), [str(i) for i in order], frozenset(str(i) for i, lab in enumerate(labs) if lab > 0)
            )
        )
    values = per_query(judged, {"map": RERANK_MEASURES["map"]})
    return aggregate(values, ["map"])["map"]


def fast_mean_ap(per_query_scores: Sequence[np.ndarray], labels: Sequence[np.ndarray]) -> float:
    """The same MAP as :func:`mean_ap` (ties broken by candidate order), in numpy.

    The β search evaluates hundreds of weightings; calling the trec_eval backend each time would
    dominate training time. ``tests/core/test_fusion.py`` checks both agree.
    """
    if not len(per_query_scores):
        return 0.0
    width = max(len(s) for s in per_query_scores)
    scores = np.full((len(per_query_scores), width), -np.inf)
    rel = np.zeros((len(per_query_scores), width), dtype=bool)
    for i, (row, labs) in enumerate(zip(per_query_scores, labels, strict=True)):
        scores[i, : len(row)] = row
        rel[i, : len(row)] = np.asarray(labs) > 0
    # Stable sort on -score keeps the data's order among ties, like rank_order.
    order = np.argsort(-scores, axis=1, kind="stable")
    hits = np.take_along_axis(rel, order, axis=1)
    cum = np.cumsum(hits, axis=1)
    ranks = np.arange(1, width + 1)
    n_rel = hits.sum(1)
    ap = np.where(n_rel > 0, (hits * cum / ranks).sum(1) / np.maximum(n_rel, 1), 0.0)
    return float(ap.mean())


def fit_weights(
    features: Sequence[Mapping[str, np.ndarray]], labels: Sequence[Sequence[int]], step: float = 0.05
) -> tuple[dict[str, float], float]:
    """Weights (summing to 1) with the best dev MAP, and that MAP; ties keep the first found."""
    n = round(1 / step)
    labels = [np.asarray(lab) for lab in labels]
    best: tuple[dict[str, float], float] | None = None
    for i, j in itertools.product(range(n + 1), repeat=2):
        if i + j > n:
            continue
        weights = {"first_stage": i / n, "bow": j / n, "neural": (n - i - j) / n}
        value = fast_mean_ap([fuse(f, weights) for f in features], labels)
        if best is None or value > best[1] + 1e-12:
            best = (weights, value)
    assert best is not None
    return best
