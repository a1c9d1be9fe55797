"""β fusion: the fast MAP used in the β search equals the evaluator's (ir-measures) MAP."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.training.fusion_fit import fast_mean_ap, fit_weights, fuse, mean_ap, minmax

SEMEVAL_DEV = Path(__file__).resolve().parents[2] / "es_plugin_bridge/samples/semeval2016-task3" / \
    "SemEval2016-Task3-CQA-QL-dev.xml"


def test_fast_map_matches_ir_measures_on_semeval_with_ties():
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries
    rng = np.random.default_rng(0)
    labels = [q.labels for q in queries]
    given = [np.asarray(q.first_stage_scores) for q in queries]
    assert round(100 * fast_mean_ap(given, labels), 2) == 71.35
    for _ in range(5):
        scores = [rng.integers(0, 3, size=len(q.candidates)).astype(float) for q in queries]  # many ties
        assert fast_mean_ap(scores, labels) == pytest.approx(mean_ap(scores, labels), rel=1e-12)


def test_fit_weights_recovers_the_informative_feature():
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries
    rng = np.random.default_rng(1)
    labels = [q.labels for q in queries]
    features = [{"first_stage": rng.normal(size=10), "bow": rng.normal(size=10),
                 "neural": np.asarray(q.labels, dtype=float)} for q in queries]
    weights, value = fit_weights(features, labels)
    assert weights["neural"] > 0.5
    assert value == max(fast_mean_ap([f["neural"] for f in features], labels), value)


def test_minmax_and_fuse():
    np.testing.assert_allclose(minmax(np.array([2.0, 4.0, 3.0])), [0.0, 1.0, 0.5])
    np.testing.assert_array_equal(minmax(np.array([5.0, 5.0])), [0.0, 0.0])
    fused = fuse({"first_stage": np.array([0.0, 10.0]), "bow": np.array([0.5, 0.0]),
                  "neural": np.array([1.0, 0.0])}, {"first_stage": 0.5, "bow": 0.25, "neural": 0.25})
    np.testing.assert_allclose(fused, [0.375, 0.5])
