"""The paired tests behind every comparison ``evaluate`` prints (``evaluation/significance.py``).

Fisher's randomization test is checked against its definition: on a handful of queries every one of
the 2^n sign patterns of the per-query differences is enumerated here by hand, and the p-value is the
share of patterns whose mean difference is at least as far from 0 as the observed one. The t-test p is
scipy's ``ttest_rel``. On a real run (SemEval-2016 dev), ``--json`` holds both tests for every ranker,
against the data's own first stage and the best other ranker, and the table shows them.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from es_plugin_bridge.evaluation.significance import paired_test

SEMEVAL_DEV = (Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "semeval2016-task3"
               / "SemEval2016-Task3-CQA-QL-dev.xml")


def _exact_randomization_p(a: list[float], b: list[float]) -> float:
    diff = np.subtract(a, b)
    observed = abs(diff.mean())
    means = [abs(np.mean(diff * np.array(signs))) for signs in itertools.product((1, -1), repeat=len(diff))]
    return float(np.mean([m >= observed - 1e-12 for m in means]))


@pytest.mark.parametrize(("a", "b"), [
    ([70.0, 55.5, 100.0, 33.3, 80.0, 91.7, 50.0, 66.7, 100.0, 25.0],
     [60.0, 50.0, 100.0, 20.0, 75.0, 80.0, 50.0, 50.0, 90.0, 30.0]),
    ([1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]),
])
def test_the_randomization_p_is_the_share_of_sign_patterns_as_extreme(a, b):
    test = paired_test(a, b)
    assert test["test"] == "fisher-randomization" and test["n"] == len(a)
    assert test["p_value"] == pytest.approx(_exact_randomization_p(a, b), abs=1e-3)
    assert test["t_test_p"] == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-3)
    assert test["mean_diff"] == pytest.approx(np.mean(np.subtract(a, b)), abs=1e-4)


def test_no_difference_is_p_one_and_unequal_lengths_are_refused():
    assert paired_test([50.0, 60.0], [50.0, 60.0])["p_value"] == 1.0
    with pytest.raises(ValueError, match="differ in length"):
        paired_test([1.0, 2.0], [1.0])


def test_evaluate_json_holds_both_tests_for_every_ranker(cli, tmp_path):
    out = tmp_path / "run.json"
    code, printed, err = cli(["evaluate", "--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}",
                              "--rankers", "given,bm25,lmdirichlet", "--json", str(out)])
    assert code == 0, err
    body = json.loads(out.read_text())
    tests = body["significance"]
    assert tests["metric"] == "map" and tests["first_stage"] == "given"
    maps = {name: v["map"] for name, v in body["rankers"].items()}
    for name in ("given", "bm25", "lmdirichlet"):
        mine = tests["rankers"][name]
        best_other = max((o for o in maps if o != name), key=maps.get)
        assert mine["vs_best_other"]["ranker"] == best_other
        assert 0.0 < mine["vs_best_other"]["p_value"] <= 1.0 and mine["vs_best_other"]["n"] == 50
        assert mine["vs_best_other"]["mean_diff"] == pytest.approx(maps[name] - maps[best_other], abs=0.01)
        if name == "given":
            assert mine["vs_first_stage"] is None
        else:
            assert mine["vs_first_stage"]["ranker"] == "given"
    # 70.19 against 71.35 on 50 queries: not a difference anyone may call a win
    assert tests["rankers"]["bm25"]["vs_first_stage"]["p_value"] > 0.05
    shown = f"{tests['rankers']['lmdirichlet']['vs_first_stage']['p_value']:.3g}"
    assert shown in printed and "randomization" in printed
