"""Task ``classify``: duplicate or not, by thresholding a pair score (Bogdanova et al.).

The threshold is the one that maximises accuracy on the ``--dev`` pairs; test accuracy is then
measured at that threshold. Any pair scorer fits (``Callable[[pairs], scores]``): a ranker's
``score_pairs`` (first-stage similarity of q2 for the query q1, or later a model's probability).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from es_plugin_bridge.data.types import Pair
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.progress import progress
from es_plugin_bridge.evaluation.results import RankerResult, TaskResult, percent
from es_plugin_bridge.evaluation.runner import run_rankers
from es_plugin_bridge.rankers import Ranker, TokenCache, unique_questions

METRICS = ["accuracy", "threshold"]
PairScorer = Callable[[Sequence[Pair]], np.ndarray]


def best_threshold(scores: Sequence[float], labels: Sequence[int]) -> tuple[float, float]:
    """(threshold, accuracy) maximising accuracy of ``score >= threshold`` ⇒ duplicate.

    Candidate thresholds are the midpoints between consecutive distinct scores, plus one below the
    smallest (all duplicates) and one above the largest (none). Among equally accurate thresholds the
    lowest is chosen, so the choice is deterministic.
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    if len(s) == 0 or len(s) != len(y):
        raise UserError("threshold selection needs as many scores as labels, and at least one")
    if np.isnan(s).any():
        raise UserError("a pair scorer produced NaN scores")
    values = np.unique(s)
    thresholds = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2.0, [values[-1] + 1.0]])
    # For threshold j, items with score >= thresholds[j] are predicted duplicates.
    order = np.argsort(s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    n_below = np.searchsorted(s_sorted, thresholds, side="left")
    neg_below = np.concatenate([[0], np.cumsum(y_sorted == 0)])[n_below]
    pos_above = int((y_sorted == 1).sum()) - np.concatenate([[0], np.cumsum(y_sorted == 1)])[n_below]
    correct = neg_below + pos_above
    best = int(np.argmax(correct))
    return float(thresholds[best]), float(correct[best]) / len(s)


def accuracy_at(scores: Sequence[float], labels: Sequence[int], threshold: float) -> float:
    """Fraction of pairs whose prediction ``score >= threshold`` equals the label."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    return float(((s >= threshold).astype(np.int64) == y).mean())


def classify(scorer: PairScorer, test: Sequence[Pair],
             dev: Sequence[Pair]) -> tuple[dict[str, float], np.ndarray]:
    """Metrics ``{"accuracy", "threshold", "dev_accuracy"}`` of any pair scorer, and its test scores."""
    dev_threshold, dev_accuracy = best_threshold(scorer(dev), [p.label for p in dev])
    test_scores = np.asarray(scorer(test), dtype=np.float64)
    accuracy = accuracy_at(test_scores, [p.label for p in test], dev_threshold)
    return {"accuracy": accuracy, "threshold": dev_threshold, "dev_accuracy": dev_accuracy}, test_scores


def evaluate_classify(test: Sequence[Pair], dev: Sequence[Pair], ranker_names: Sequence[str],
                      tokens: TokenCache, *, model_dir: Path | None = None,
                      params: Mapping[str, Mapping[str, float]] | None = None,
                      context_options: Mapping[str, Any] | None = None,
                      show_progress: bool = True) -> TaskResult:
    """Accuracy of each ranker's pair scores; first-stage indexes cover every question of test + dev.

    ``threshold`` is reported like every metric, multiplied by 100: a percentage for a model's
    probabilities, the raw score × 100 for a first-stage similarity.
    """
    if not test:
        raise UserError("--task classify: --data holds no pairs")
    if not dev:
        raise UserError("--task classify: --dev holds no pairs")
    collection = unique_questions([[q for p in [*test, *dev] for q in (p.q1, p.q2)]])
    task = TaskResult("classify", len(test), METRICS)

    def evaluate_one(name: str, ranker: Ranker) -> RankerResult:
        def scorer(pairs: Sequence[Pair]) -> np.ndarray:
            chunks = [pairs[i:i + 256] for i in range(0, len(pairs), 256)]
            scored = [ranker.score_pairs(c) for c in progress(chunks, desc=f"classify {name}",
                                                             total=len(chunks), enabled=show_progress)]
            return np.concatenate(scored)

        metrics, scores = classify(scorer, test, dev)
        task.notes.append(f"{name}: threshold {metrics['threshold']:.4g} chosen on --dev "
                          f"(dev accuracy {percent(metrics['dev_accuracy'])})")
        records = [{"query_id": f"p{i + 1}", "ranker": name, "q1_id": p.q1.id, "q2_id": p.q2.id,
                    "label": p.label, "score": float(s), "predicted": int(s >= metrics["threshold"]),
                    "metrics": {"accuracy": percent(int(s >= metrics["threshold"]) == p.label)},
                    "rank_first_relevant": None}
                   for i, (p, s) in enumerate(zip(test, scores, strict=True))]
        return RankerResult(metrics, records)

    run_rankers(task, ranker_names, collection, tokens, evaluate_one, model_dir=model_dir, params=params,
                context_options=context_options)
    for i, p in enumerate(test):  # the review page: each pair is a query whose one candidate is its q2
        task.texts.update({f"p{i + 1}": p.q1.title, p.q2.id: p.q2.title})
        task.judgments[f"p{i + 1}"] = {"relevant": [p.q2.id] if p.label > 0 else [], "judged": [p.q2.id]}
    return task
