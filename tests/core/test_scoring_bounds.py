"""The scoring core at its edges: min-max of no, one and equal candidates, fusion, Platt calibration,
and the relevance map that keeps ``relevance_score`` in [0, 1], on real first-stage windows
(BM25 over AskUbuntu titles) and at degenerate and extreme inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.core.calibration import apply_platt
from es_plugin_bridge.core.fusion import FEATURES, fuse, minmax
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.engines import EmbeddedIndex
from es_plugin_bridge.serving.relevance import (
    combination_range,
    component_ranges,
    linear_shift,
    to_unit,
)
from es_plugin_bridge.text import Preprocessor

TITLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / \
    "train_titles.tsv"


@pytest.fixture(scope="module")
def windows() -> list[np.ndarray]:
    """BM25 scores of 10-question windows for 20 real title queries."""
    spec = read_spec(f"pairs:{TITLES}")
    prep = Preprocessor()
    docs = list(spec.questions.values())[:1500]
    index = EmbeddedIndex.build([prep.tokens(q) for q in docs], "bm25", ids=[q.id for q in docs])
    return [np.array([s for _, s in index.search(prep.tokens(p.q1), k=10)]) for p in spec.pairs[:20]]


def test_minmax_of_real_windows_spans_zero_to_one_in_the_same_order(windows):
    for scores in windows:
        scaled = minmax(scores)
        if np.ptp(scores) == 0:
            assert (scaled == 0).all()
            continue
        assert scaled.min() == 0.0 and scaled.max() == 1.0
        assert list(np.argsort(-scaled, kind="stable")) == list(np.argsort(-scores, kind="stable"))
        np.testing.assert_allclose(scaled, (scores - scores.min()) / np.ptp(scores))


def test_minmax_of_no_one_or_equal_candidates():
    empty = minmax(np.array([]))
    assert empty.shape == (0,) and empty.dtype == np.float64
    np.testing.assert_array_equal(minmax(np.array([7.5])), [0.0])
    np.testing.assert_array_equal(minmax(np.array([-2.0, -2.0, -2.0])), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(minmax([3, 1, 2]), [1.0, 0.0, 0.5])  # a list of ints is accepted


def test_minmax_at_extreme_finite_scores_stays_finite_and_exact():
    np.testing.assert_array_equal(minmax(np.array([1e308, -1e308, 0.0])), [1.0, 0.0, 0.5])
    np.testing.assert_array_equal(minmax(np.array([-1e308, 1e308])), [0.0, 1.0])
    tiny = minmax(np.array([5e-324, 0.0, 1e-323]))
    assert tiny[1] == 0.0 and tiny[2] == 1.0 and 0.0 <= tiny[0] <= 1.0


def test_fuse_is_the_weighted_sum_with_the_first_stage_min_maxed(windows):
    rng = np.random.default_rng(3)
    weights = {"first_stage": 0.3, "bow": 0.2, "neural": 0.5}
    assert tuple(weights) == FEATURES
    for scores in windows:
        bow, neural = rng.uniform(0, 1, scores.size), rng.uniform(-1, 1, scores.size)
        fused = fuse({"first_stage": scores, "bow": bow, "neural": neural}, weights)
        np.testing.assert_allclose(fused, 0.3 * minmax(scores) + 0.2 * bow + 0.5 * neural, rtol=1e-12)
    one = fuse({"first_stage": np.array([12.0]), "bow": np.array([0.5]), "neural": np.array([-1.0])}, weights)
    np.testing.assert_allclose(one, [0.2 * 0.5 - 0.5])  # one candidate: its first stage counts 0
    only_bow = fuse({"first_stage": np.array([1.0, 9.0]), "bow": np.array([0.25, 0.75]),
                     "neural": np.array([1.0, -1.0])}, {"first_stage": 0.0, "bow": 1.0, "neural": 0.0})
    np.testing.assert_array_equal(only_bow, [0.25, 0.75])


def test_platt_is_a_strictly_increasing_probability_at_every_scale():
    scores = np.array([-1e6, -50.0, -1.0, 0.0, 1e-9, 1.0, 50.0, 1e6])
    p = apply_platt(scores, (2.0, -1.0))
    assert ((p >= 0) & (p <= 1)).all() and np.isfinite(p).all()
    assert (np.diff(p[1:-1]) > 0).all()
    np.testing.assert_allclose(p[2:6], 1 / (1 + np.exp(-(2.0 * scores[2:6] - 1.0))), rtol=1e-12)
    assert apply_platt(np.array([0.5]), (2.0, -1.0))[0] == 0.5  # σ(0)
    assert apply_platt(np.array([]), (1.0, 0.0)).shape == (0,)
    np.testing.assert_allclose(apply_platt([0.0, 1.0], (1.0, 3.0)), 1 / (1 + np.exp([-3.0, -4.0])))


@pytest.mark.parametrize(("similarity", "bow_weights", "neural", "bow"), [
    ("manhattan", "idf", (0.0, 1.0), (0.0, 1.0)),
    ("cosine", "idf", (-1.0, 1.0), (0.0, 1.0)),
    ("manhattan", "learned", (0.0, 1.0), (-1.0, 1.0)),
    ("cosine", "learned", (-1.0, 1.0), (-1.0, 1.0)),
])
def test_component_ranges(similarity, bow_weights, neural, bow):
    assert component_ranges(similarity, bow_weights) == {"neural": neural, "bow": bow,
                                                         "first_stage": (0.0, 1.0)}


def test_combination_range_with_weights_of_either_sign_and_none():
    ranges = component_ranges("cosine", "idf")
    assert combination_range({"first_stage": 0.5, "bow": 0.25, "neural": 0.25}, ranges) == (-0.25, 1.0)
    assert combination_range({"bow": -2.0, "neural": 0.5}, ranges) == (-2.5, 0.5)
    assert combination_range({"neural": 0.0}, ranges) == (0.0, 0.0)
    assert combination_range({}, ranges) == (0.0, 0.0)


def test_linear_shift_is_the_lowest_linear_score():
    assert linear_shift({"first_stage": 0.4, "bow": 0.3, "neural": 0.3}, component_ranges("cosine", "idf")) \
        == pytest.approx(-0.3)
    assert linear_shift({"first_stage": 0.9, "bow": 0.05, "neural": 0.05},
                        component_ranges("manhattan", "idf")) == 0.0
    assert linear_shift({"first_stage": 0.0, "bow": 0.5, "neural": 0.5},
                        component_ranges("cosine", "learned")) == pytest.approx(-1.0)


def test_to_unit_maps_the_bounds_onto_zero_and_one_in_order():
    np.testing.assert_allclose(to_unit(np.array([-0.25, 0.375, 1.0]), (-0.25, 1.0)), [0.0, 0.5, 1.0])
    below_above = to_unit(np.array([-0.2500001, 1.0000001]), (-0.25, 1.0))  # float rounding at the ends
    np.testing.assert_array_equal(below_above, [0.0, 1.0])


@pytest.mark.parametrize("bounds", [(0.5, 0.5), (0.0, 0.0), (1.0, -1.0), (3.0, 2.0)])
def test_degenerate_bounds_still_give_relevance_scores_in_the_unit_interval(bounds):
    scores = np.array([-5.0, 0.0, 0.5, 7.0])
    got = to_unit(scores, bounds)
    assert got.shape == scores.shape and np.isfinite(got).all()
    np.testing.assert_array_equal(got, [0.5, 0.5, 0.5, 0.5])
    assert to_unit(np.array([]), bounds).shape == (0,)


def test_minmax_always_answers_float64_of_the_input_shape():
    for scores in (np.array([], dtype=np.int64), np.array([4], dtype=np.int32), np.array([2, 2]),
                   np.array([1.0, 3.0], dtype=np.float32)):
        got = minmax(scores)
        assert got.dtype == np.float64 and got.shape == scores.shape, scores
    # float32 input is scaled in double: 1/3 is not float32's 0.33333334.
    assert minmax(np.array([0.0, 1.0, 3.0], dtype=np.float32))[1] == 1 / 3


def test_minmax_of_an_overflowing_range_keeps_the_middle_where_it_is():
    np.testing.assert_array_equal(minmax(np.array([1e308, -1e308, 5e307, -5e307])), [1.0, 0.0, 0.75, 0.25])


def test_platt_and_to_unit_compute_in_double_whatever_the_input():
    p = apply_platt(np.array([1e-4, 2e-4], dtype=np.float32), (1.0, 0.0))
    assert p.dtype == np.float64 and p[1] - p[0] == pytest.approx(float(np.float32(1e-4)) / 4, rel=1e-3)
    u = to_unit(np.array([0.1, 0.2], dtype=np.float32), (0.0, 3.0))
    assert u.dtype == np.float64 and u[0] == float(np.float32(0.1)) / 3


def test_combination_range_of_arbitrary_component_ranges():
    ranges = {"a": (-2.0, 3.0), "b": (0.5, 4.0)}
    assert combination_range({"a": 2.0, "b": 1.0}, ranges) == (-4.0 + 0.5, 6.0 + 4.0)
    assert combination_range({"a": -1.0, "b": -0.5}, ranges) == (-3.0 - 2.0, 2.0 - 0.25)
