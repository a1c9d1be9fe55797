"""The learned hybrid's rule (``core/hybrid_fusion.py``), restated from neural-search 2.19.1 and checked
case by case: ``MinMaxScoreNormalizationTechnique`` (0.001 for a clause's minimum, 1.0 when min = max = s),
``L2ScoreNormalizationTechnique`` (s / sqrt(Σ s²), 0 for a zero norm), ``ScoreCombiner`` (a clause that
missed a document gives it 0.0), ``ArithmeticMean…`` (every score ≥ 0 counts, so a missing clause's weight
still divides), ``HarmonicMean…`` / ``GeometricMean…`` (only scores > 0 count), ``ScoreCombinationUtil``
(weights in [0, 1] summing to 1)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from es_plugin_bridge.core.hybrid_fusion import HybridFusion, combine, fuse_lists, normalize, pipeline_body
from es_plugin_bridge.core.model_config import parse_config
from es_plugin_bridge.errors import UserError


def test_min_max_floors_the_minimum_and_scores_a_lone_result_one():
    assert normalize([3.0, 2.0, 1.0], "min_max").tolist() == pytest.approx([1.0, 0.5, 0.001])
    assert normalize([2.0, 2.0], "min_max").tolist() == [1.0, 1.0]  # min = max = s: SINGLE_RESULT_SCORE
    assert normalize([7.5], "min_max").tolist() == [1.0]
    assert normalize([], "min_max").size == 0


def test_l2_divides_by_the_clauses_norm():
    assert normalize([3.0, 4.0], "l2").tolist() == pytest.approx([0.6, 0.8])
    assert normalize([0.0, 0.0], "l2").tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="unknown normalization 'z_score'"):
        normalize([1.0], "z_score")


def test_arithmetic_mean_counts_a_missing_clause_at_zero():
    """(0.3·1 + 0.7·0) / (0.3 + 0.7): the clause that missed the document still divides."""
    out = combine(np.array([[1.0, 0.0], [0.5, 0.5]]), [0.3, 0.7], "arithmetic_mean")
    assert out.tolist() == pytest.approx([0.3, 0.5])
    assert out.dtype == np.float32


def test_harmonic_and_geometric_means_skip_a_missing_clause():
    """A document only one clause returned keeps that clause's score (its weight alone divides)."""
    m = np.array([[0.8, 0.0], [0.5, 0.2], [0.0, 0.0]])
    assert combine(m, [0.3, 0.7], "harmonic_mean").tolist() == pytest.approx(
        [0.8, 1 / (0.3 / 0.5 + 0.7 / 0.2), 0.0])
    assert combine(m, [0.3, 0.7], "geometric_mean").tolist() == pytest.approx(
        [0.8, float(np.exp(0.3 * np.log(0.5) + 0.7 * np.log(0.2))), 0.0], rel=1e-6)


def test_fuse_lists_normalises_each_clause_over_its_own_results():
    """BM25 [a 5, b 3, c 1] and vectors [c .9, d .8, a .5], min_max, 0.3 / 0.7: c = 0.3·0.001 + 0.7·1."""
    fusion = HybridFusion(weights={"first_stage": 0.3, "dense": 0.7}, window=3)
    hits = fuse_lists({"first_stage": [("a", 5.0), ("b", 3.0), ("c", 1.0)],
                       "dense": [("c", 0.9), ("d", 0.8), ("a", 0.5)]}, fusion, 10)
    assert [d for d, _ in hits] == ["c", "d", "a", "b"]
    assert [s for _, s in hits] == pytest.approx([0.7003, 0.7 * 0.75, 0.3 + 0.7 * 0.001, 0.3 * 0.5], abs=1e-6)
    assert fuse_lists({"first_stage": [("a", 2.0)]}, fusion, 10) == [("a", pytest.approx(0.3))]
    assert fuse_lists({}, fusion, 10) == []


def test_the_weights_follow_the_engines_rule():
    with pytest.raises(ValidationError, match="sum to 1"):
        HybridFusion(weights={"first_stage": 0.5, "dense": 0.6})
    with pytest.raises(ValidationError, match=r"in \[0, 1\]"):
        HybridFusion(weights={"first_stage": 1.5, "dense": -0.5})
    with pytest.raises(ValidationError, match="exactly"):
        HybridFusion(weights={"first_stage": 1.0})


def test_pipeline_body_is_the_normalization_processor():
    fusion = HybridFusion(normalization="l2", combination="harmonic_mean",
                          weights={"first_stage": 0.2, "dense": 0.8}, window=50)
    (processor,) = pipeline_body(fusion)["phase_results_processors"]
    assert processor == {"normalization-processor": {
        "normalization": {"technique": "l2"},
        "combination": {"technique": "harmonic_mean", "parameters": {"weights": [0.2, 0.8]}}}}


def test_a_config_with_a_bad_hybrid_is_refused_naming_it(exported):
    """config.json's ``hybrid`` is parsed like the rest: a hand-edited weight is one line naming it."""
    import json

    data = json.loads((exported["bow-cnn"] / "config.json").read_text())
    assert data["hybrid"] is not None  # the trainer fits one for a model with vectors and dev pairs
    data["hybrid"]["weights"] = {"first_stage": 0.9, "dense": 0.9}
    with pytest.raises(UserError, match="hybrid"):
        parse_config(data, "config.json")


def test_a_hand_edited_hybrid_is_one_line_for_the_ranker(exported, tmp_path):
    """The in-process ranker reads config.json's ``hybrid`` too: a bad weight is a UserError naming it."""
    import json
    import shutil

    from es_plugin_bridge.rankers.learned_hybrid import model_hybrid

    model = tmp_path / "model"
    shutil.copytree(exported["bow-cnn"], model)
    assert model_hybrid(model).window in (10, 20, 50, 100)
    data = json.loads((model / "config.json").read_text())
    data["hybrid"]["weights"] = {"first_stage": 0.9, "dense": 0.9}
    (model / "config.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"config.json: hybrid: .*sum to 1"):
        model_hybrid(model)
