"""Pair classification: threshold chosen on dev pairs, accuracy on test pairs, any pair scorer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation import accuracy_at, best_threshold, classify, evaluate_classify
from es_plugin_bridge.rankers import TokenCache
from es_plugin_bridge.text import Preprocessor, TextOptions

VAL = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"


def test_threshold_maximises_accuracy_and_prefers_the_lowest():
    threshold, accuracy = best_threshold([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    assert accuracy == 0.75
    assert threshold == pytest.approx(0.225)  # 0.6 is as accurate; the lowest wins
    assert accuracy_at([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], threshold) == 0.75


def test_threshold_matches_brute_force_with_ties():
    rng = np.random.default_rng(7)
    for _ in range(20):
        scores = rng.integers(0, 12, size=60).astype(float)  # many ties
        labels = rng.integers(0, 2, size=60)
        threshold, accuracy = best_threshold(scores, labels)
        brute = max(accuracy_at(scores, labels, t) for t in [*np.unique(scores), np.inf])
        assert accuracy == pytest.approx(brute)
        assert accuracy_at(scores, labels, threshold) == pytest.approx(accuracy)


def test_all_one_class_and_bad_input():
    assert best_threshold([3.0, 5.0], [1, 1])[1] == 1.0
    assert best_threshold([3.0, 5.0], [0, 0])[1] == 1.0
    with pytest.raises(UserError):
        best_threshold([], [])
    with pytest.raises(UserError, match="NaN"):
        best_threshold([0.1, float("nan")], [0, 1])


def test_bm25_pair_scores_on_real_askubuntu_pairs():
    pairs = read_spec(f"pairs:{VAL}").pairs
    dev, test = pairs[:500], pairs[500:]
    tokens = TokenCache(Preprocessor(TextOptions()))
    result = evaluate_classify(test, dev, ["bm25"], tokens, show_progress=False)
    metrics = result.rankers["bm25"].metrics
    records = result.rankers["bm25"].per_query
    scores = np.array([r["score"] for r in records])
    # Reported accuracy is the test accuracy at the dev threshold, and dev accuracy is the dev optimum.
    expected = accuracy_at(scores, [p.label for p in test], metrics["threshold"])
    assert metrics["accuracy"] == pytest.approx(expected)
    assert metrics["accuracy"] > 0.65  # balanced pairs: word overlap separates them well above chance
    assert result.as_json()["rankers"]["bm25"] == {"accuracy": round(100 * metrics["accuracy"], 2),
                                                   "threshold": round(100 * metrics["threshold"], 2)}


def test_any_pair_scorer_fits_the_harness():
    pairs = read_spec(f"pairs:{VAL}").pairs[:200]

    def length_difference(batch):
        return np.array([-abs(len(p.q1.title) - len(p.q2.title)) for p in batch], dtype=float)

    metrics, scores = classify(length_difference, pairs[100:], pairs[:100])
    assert len(scores) == 100
    assert metrics["dev_accuracy"] >= 0.5
    assert 0.0 <= metrics["accuracy"] <= 1.0
