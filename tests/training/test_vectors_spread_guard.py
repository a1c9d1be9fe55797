"""The vectors mode's first-stage weight on real windows whose scores span less than 1.

On the basic licence the vectors mode cannot min-max the first stage inside Elasticsearch, so it
scales the query by ``β_fs / (max − min)`` of the window (``vectors_mode.basic_query_weight``). Only a
window whose scores are all equal has no spread; LM-Dirichlet scores of AskUbuntu titles span far less
than 1, and their weight must still make ``weight·s`` the min-max of the window up to one constant.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.core.fusion import minmax
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic.modes import vectors as vectors_mode
from es_plugin_bridge.engines import EmbeddedIndex
from es_plugin_bridge.text import Preprocessor

TITLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / \
    "train_titles.tsv"
BETA = 0.35


@pytest.fixture(scope="module")
def windows() -> list[np.ndarray]:
    """The first-stage scores of 20-question LM-Dirichlet windows for 60 real title queries."""
    spec = read_spec(f"pairs:{TITLES}")
    prep = Preprocessor()
    docs = list(spec.questions.values())[:2000]
    index = EmbeddedIndex.build([prep.tokens(q) for q in docs], "lmdirichlet", ids=[q.id for q in docs])
    found = []
    for pair in spec.pairs[:60]:
        hits = index.search(prep.tokens(pair.q1), k=20)
        if len(hits) > 2:
            found.append(np.array([s for _, s in hits]))
    return found


def test_windows_spanning_less_than_one_are_min_maxed_up_to_a_constant(windows):
    narrow = [s for s in windows if 0 < np.ptp(s) < 1]
    assert len(narrow) >= 5, [float(np.ptp(s)) for s in windows]  # LM-Dirichlet windows are narrow
    for scores in narrow:
        weight = vectors_mode.basic_query_weight(BETA, list(scores))
        assert weight == pytest.approx(BETA / np.ptp(scores))
        shifted = weight * scores - weight * scores.min()
        np.testing.assert_allclose(shifted, BETA * minmax(scores), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("spread", [1e-9, 0.01, 0.5, 1.0, 3.0])
def test_any_positive_spread_gives_beta_over_the_spread(spread):
    scores = [2.0, 2.0 + spread, 2.0 + spread / 2]
    weight = vectors_mode.basic_query_weight(BETA, scores)
    assert weight == pytest.approx(BETA / spread)
    assert weight * scores[1] - weight * scores[0] == pytest.approx(BETA)  # the top gains exactly β_fs


def test_one_or_equal_scores_have_no_spread_and_weight_zero():
    assert vectors_mode.basic_query_weight(BETA, [0.42]) == 0.0
    assert vectors_mode.basic_query_weight(BETA, [0.42, 0.42, 0.42]) == 0.0
    assert vectors_mode.basic_query_weight(0.0, [1.0, 2.0]) == 0.0
