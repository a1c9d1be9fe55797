"""The learned hybrid's fit: which normalisation, combination, weights and window, chosen on dev queries
by cross-validation, with a guard that never keeps a fusion that loses to its own best single clause.

Why a guard: fusing BM25 into a strong dense model hurts when done naively (Anserini's BEIR runs: RRF
0.868 against dense 0.888 nDCG@10 on Quora), and a grid's best on the same queries it is scored on
overstates what it gains. So the grid (OpenSearch's Search Relevance Workbench's: each normalisation ×
each combination × weights 0.0–1.0 in 0.1 steps, and here also the window) is searched on k − 1 folds
and scored on the held-out fold; the fusion is kept only when its held-out MRR@10 beats both single
clauses' (the first stage alone, the vectors alone), else the better single clause is the fusion
(weight 1 on it). The configuration finally recorded is the grid's best on every dev query.

The metric is MRR@10, the rank of the first duplicate within the top 10, the figure the head-to-head
benchmark reports. Scores here are float64 (a fit needs the order, not Java's last bit); the ranking
itself is :func:`es_plugin_bridge.core.hybrid_fusion.fuse_lists`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from es_plugin_bridge.core.hybrid_fusion import CLAUSES, COMBINATIONS, NORMALIZATIONS, HybridFusion, normalize

WEIGHT_STEPS = 10  # 0.0, 0.1, …, 1.0 on the vectors' clause
WINDOWS: tuple[int, ...] = (10, 20, 50, 100)
FOLDS = 5
CUTOFF = 10


@dataclass(frozen=True)
class DevQuery:
    """One dev query: each clause's own results (``(id, raw score)``, best first, at least the widest
    window deep) and the ids of its known duplicates."""

    lists: Mapping[str, Sequence[tuple[str, float]]]
    relevant: frozenset[str]


def _weights() -> np.ndarray:
    """[n, 2] weights (first stage, dense), the vectors' weight from 0 to 1 in tenths."""
    dense = np.arange(WEIGHT_STEPS + 1) / WEIGHT_STEPS
    return np.stack([1 - dense, dense], axis=1)


def _matrix(query: DevQuery, normalization: str, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The query's [docs, clauses] normalised scores over each clause's top ``window``, and which docs are
    duplicates (docs in first-seen order, first clause first, as the engine's union)."""
    ids: dict[str, int] = {}
    for clause in CLAUSES:
        for doc, _ in query.lists.get(clause, ())[:window]:
            ids.setdefault(doc, len(ids))
    matrix = np.zeros((len(ids), len(CLAUSES)))
    for j, clause in enumerate(CLAUSES):
        hits = list(query.lists.get(clause, ()))[:window]
        if hits:
            matrix[[ids[d] for d, _ in hits], j] = normalize([s for _, s in hits], normalization)
    relevant = np.array([doc in query.relevant for doc in ids], dtype=bool)
    return matrix, relevant


def _combined(matrix: np.ndarray, weights: np.ndarray, combination: str) -> np.ndarray:
    """[docs, n weights] combined scores, every weighting at once (the rules of ``core.hybrid_fusion``)."""
    if combination == "arithmetic_mean":
        return matrix @ weights.T / weights.sum(axis=1)
    positive = (matrix > 0).astype(np.float64)
    wsum = positive @ weights.T
    with np.errstate(divide="ignore", invalid="ignore"):
        if combination == "harmonic_mean":
            acc = np.where(matrix > 0, 1.0 / np.where(matrix > 0, matrix, 1.0), 0.0) @ weights.T
            return np.where(acc > 0, wsum / np.where(acc > 0, acc, 1.0), 0.0)
        logs = np.where(matrix > 0, np.log(np.where(matrix > 0, matrix, 1.0)), 0.0) @ weights.T
        return np.where(wsum > 0, np.exp(logs / np.where(wsum > 0, wsum, 1.0)), 0.0)


def _reciprocal_ranks(scores: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """Per column, 1/rank of the best-ranked duplicate within the top ``CUTOFF`` (ties: earlier doc
    first), else 0."""
    if not relevant.any():
        return np.zeros(scores.shape[1])
    out = np.zeros(scores.shape[1])
    positions = np.arange(len(scores))
    for col in range(scores.shape[1]):
        s = scores[:, col]
        order = np.lexsort((positions, -s))[:CUTOFF]
        hit = np.flatnonzero(relevant[order])
        if hit.size:
            out[col] = 1.0 / (hit[0] + 1)
    return out


def _grid() -> list[tuple[str, str, int]]:
    return list(itertools.product(NORMALIZATIONS, COMBINATIONS, WINDOWS))


def per_query_table(queries: Sequence[DevQuery]) -> tuple[np.ndarray, list[HybridFusion]]:
    """[queries, configurations] reciprocal ranks of every configuration of the grid."""
    weights = _weights()
    configs: list[HybridFusion] = []
    for normalization, combination, window in _grid():
        for w_fs, w_dense in weights:
            configs.append(HybridFusion(normalization=normalization, combination=combination, window=window,
                                        weights={"first_stage": round(float(w_fs), 10),
                                                 "dense": round(float(w_dense), 10)}))
    table = np.zeros((len(queries), len(configs)))
    for qi, query in enumerate(queries):
        column = 0
        cache: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
        for normalization, combination, window in _grid():
            key = (normalization, window)
            if key not in cache:
                cache[key] = _matrix(query, normalization, window)
            matrix, relevant = cache[key]
            n = len(weights)
            if len(matrix):
                table[qi, column:column + n] = _reciprocal_ranks(_combined(matrix, weights, combination),
                                                                 relevant)
            column += n
    return table, configs


def _single(queries: Sequence[DevQuery], clause: str) -> np.ndarray:
    """Reciprocal ranks of one clause alone (its own order)."""
    out = np.zeros(len(queries))
    for qi, query in enumerate(queries):
        for rank, (doc, _) in enumerate(list(query.lists.get(clause, ()))[:CUTOFF], start=1):
            if doc in query.relevant:
                out[qi] = 1.0 / rank
                break
    return out


def _folds(n: int, folds: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.permutation(np.arange(n) % folds)


def alone(clause: str, window: int, first_stage: str = "bm25") -> HybridFusion:
    """The fusion that is one clause alone (weight 1 on it)."""
    return HybridFusion(weights={c: 1.0 if c == clause else 0.0 for c in CLAUSES}, window=window,
                        first_stage=first_stage)  # type: ignore[arg-type]


def fit_hybrid(queries: Sequence[DevQuery], *, first_stage: str = "bm25", folds: int = FOLDS,
               seed: int = 0) -> tuple[HybridFusion, dict[str, Any]]:
    """The fusion to record and the fit's report (held-out MRR@10 of the fusion and of each clause alone,
    what was chosen and why). Fewer queries than folds: every query is its own fold."""
    if not queries:
        raise ValueError("the hybrid fit needs at least one dev query with a duplicate")
    table, configs = per_query_table(queries)
    folds = max(1, min(folds, len(queries)))
    assignment = _folds(len(queries), folds, seed)
    held_out = np.zeros(len(queries))
    picked: list[str] = []
    for fold in range(folds):
        train, test = assignment != fold, assignment == fold
        if not train.any():  # one fold: scored on itself
            train = test
        best = int(np.argmax(table[train].mean(axis=0)))  # ties: the first in grid order
        held_out[test] = table[test, best]
        picked.append(configs[best].describe())
    singles = {clause: _single(queries, clause) for clause in CLAUSES}
    best_single = max(CLAUSES, key=lambda c: (singles[c].mean(), c == "dense"))
    overall = int(np.argmax(table.mean(axis=0)))
    report: dict[str, Any] = {
        "queries": len(queries),
        "folds": folds,
        "grid": len(configs),
        "metric": f"MRR@{CUTOFF}",
        "held_out": {"fusion": round(100 * float(held_out.mean()), 2),
                     **{f"{c} alone": round(100 * float(singles[c].mean()), 2) for c in CLAUSES}},
        "fold_choices": picked,
        "dev_best": {"fusion": configs[overall].describe(),
                     "mrr@10": round(100 * float(table[:, overall].mean()), 2)},
    }
    if held_out.mean() > singles[best_single].mean():
        chosen = configs[overall].model_copy(update={"first_stage": first_stage})
        report["chosen"] = "fusion: its held-out MRR@10 beats both clauses alone"
    else:
        chosen = alone(best_single, max(WINDOWS), first_stage)
        report["chosen"] = (f"guard: {best_single} alone (the fusion's held-out MRR@10 "
                            f"{report['held_out']['fusion']} does not beat "
                            f"{report['held_out'][best_single + ' alone']})")
    report["fusion"] = chosen.describe()
    return chosen, report
