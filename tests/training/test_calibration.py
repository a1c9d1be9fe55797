"""Platt calibration on real SemEval candidates: probabilities that keep the order and match the
rate of relevant candidates, and a refusal when the data cannot support a curve."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.training.calibration_fit import apply_platt, fit_platt

SEMEVAL_DEV = (Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "semeval2016-task3"
               / "SemEval2016-Task3-CQA-QL-dev.xml")


@pytest.mark.torch  # fit_platt is training's: scikit-learn comes with the train extra
def test_platt_on_the_search_engine_order_of_semeval_dev():
    pytest.importorskip("sklearn")
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries
    scores = [np.arange(len(rq.candidates), 0, -1, dtype=np.float64) for rq in queries]
    labels = [rq.labels for rq in queries]
    platt = fit_platt(scores, labels)
    assert platt is not None and platt[0] > 0  # higher in the engine's order: more often relevant
    p = apply_platt(np.concatenate(scores), platt)
    relevant = np.concatenate([np.asarray(lab) > 0 for lab in labels])
    assert 0 < p.min() < p.max() < 1
    assert abs(p.mean() - relevant.mean()) < 0.01  # a logistic fit reproduces the base rate
    top, bottom = p[np.concatenate(scores) == 10].mean(), p[np.concatenate(scores) == 1].mean()
    assert top > relevant.mean() > bottom
    order = np.argsort(np.concatenate(scores), kind="stable")
    assert (np.diff(p[order]) >= 0).all()


@pytest.mark.torch
def test_platt_refuses_data_without_both_classes_or_spread():
    pytest.importorskip("sklearn")
    assert fit_platt([np.array([0.1, 0.9])], [[0, 0]]) is None
    assert fit_platt([np.array([0.1, 0.9])], [[1, 2]]) is None
    assert fit_platt([np.array([0.5, 0.5])], [[0, 1]]) is None
    assert fit_platt([np.array([0.9, 0.1, 0.8, 0.2])], [[0, 1, 0, 1]]) is None  # would decrease


def test_apply_platt_does_not_overflow():
    p = apply_platt(np.array([-1e6, 0.0, 1e6]), (1.0, 0.0))
    np.testing.assert_array_equal(p, [0.0, 0.5, 1.0])
