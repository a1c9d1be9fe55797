"""Paired significance tests behind every comparison ``evaluate`` prints.

Two rankers of one run are compared query by query on the task's main metric (rerank: MAP, that is
each query's AP; retrieval: MRR@10; classify: accuracy, 0 or 100 per pair). The test is Fisher's
randomization test on the paired differences (two-sided; each query's difference flips sign at random;
Smucker, Allan and Carterette, CIKM 2007, recommend it for IR), run by ``scipy.stats.permutation_test``
with ``permutation_type="samples"``: exact when the 2^n sign patterns are fewer than the resamples,
else 10,000 seeded resamples. Student's paired t-test (``scipy.stats.ttest_rel``) is reported beside it.

Each ranker is tested against the first stage (``given`` when the run has it, else ``bm25``) and
against the best other ranker of the run (by the main metric). A difference of means with p ≥ 0.05
is not evidence that one ranker beats the other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from es_plugin_bridge.core.fusion import FIRST_STAGES
from es_plugin_bridge.evaluation.results import TaskResult

#: The metric each task's comparisons test (its per-query records carry it, in percent).
MAIN_METRIC = {"rerank": "map", "retrieval": "mrr@10", "classify": "accuracy"}
#: The first stage a run's rankers are tested against: the first of these the run has (``given``: the
#: data's own first stage, SemEval's search engine order, which ``fused`` reranks when it can).
BASELINES = ("given", FIRST_STAGES[0])
TEST = "fisher-randomization"
RESAMPLES = 10_000
ALPHA = 0.05


def paired_test(a: Sequence[float], b: Sequence[float], *, seed: int = 0) -> dict[str, Any]:
    """Two-sided paired tests of mean(a) vs mean(b): ``{"test", "p_value", "t_test_p", "mean_diff", "n"}``.

    Identical samples give p = 1 (no difference to test); fewer than two pairs give p = 1 too.
    """
    from scipy import stats

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} and {y.size}")
    diff = x - y
    out: dict[str, Any] = {"test": TEST, "mean_diff": round(float(diff.mean()) if diff.size else 0.0, 4),
                           "n": int(diff.size)}
    if diff.size < 2 or not np.any(diff):
        return {**out, "p_value": 1.0, "t_test_p": 1.0}
    randomization = stats.permutation_test(
        (x, y), lambda u, v, axis: np.mean(u - v, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=RESAMPLES, alternative="two-sided", random_state=seed)
    t_p = stats.ttest_rel(x, y).pvalue
    return {**out, "p_value": _p(randomization.pvalue), "t_test_p": _p(t_p if np.isfinite(t_p) else 1.0)}


def _p(value: float) -> float:
    return float(f"{min(1.0, float(value)):.4g}")


def _per_query(result: TaskResult, ranker: str, metric: str) -> dict[str, float]:
    return {str(r["query_id"]): float(r["metrics"][metric]) for r in result.rankers[ranker].per_query}


def first_stage_of(result: TaskResult) -> str | None:
    return next((name for name in BASELINES if name in result.rankers), None)


def significance(result: TaskResult, *, seed: int = 0) -> dict[str, Any]:
    """``{"metric", "first_stage", "rankers": {name: {"vs_first_stage": test | None, "vs_best_other":
    test | None}}}``, each test with the ``ranker`` it compares against. A ranker without per-query
    records (none kept) is left out."""
    metric = MAIN_METRIC[result.task]
    means = {name: r.metrics.get(metric) for name, r in result.rankers.items() if r.per_query}
    first = first_stage_of(result)
    out: dict[str, Any] = {"metric": metric, "first_stage": first, "alpha": ALPHA, "rankers": {}}
    for name in means:
        others = {o: m for o, m in means.items() if o != name and m is not None}
        best = max(others, key=lambda o: others[o]) if others else None
        tests = {"vs_first_stage": paired(result, name, first, seed=seed) if first != name else None,
                 "vs_best_other": paired(result, name, best, seed=seed) if best else None}
        out["rankers"][name] = tests
    return out


def paired(result: TaskResult, name: str, other: str | None, *, seed: int = 0) -> dict[str, Any] | None:
    """Ranker ``name`` against ``other`` on the run's main metric, query by query: :func:`paired_test`
    with the ``ranker`` compared against; None when there is no other ranker or it kept no records."""
    if other is None or not result.rankers[other].per_query:
        return None
    metric = MAIN_METRIC[result.task]
    mine, theirs = _per_query(result, name, metric), _per_query(result, other, metric)
    queries = [q for q in mine if q in theirs]
    test = paired_test([mine[q] for q in queries], [theirs[q] for q in queries], seed=seed)
    return {"ranker": other, **test}


def verdict(test: Mapping[str, Any] | None) -> str:
    """How a table cell says one test: the p-value, and ``*`` when below :data:`ALPHA`."""
    if test is None:
        return "—"
    star = "*" if test["p_value"] < ALPHA else ""
    return f"{test['p_value']:.3g}{star}"
