"""The review page's data without a browser: the bundle of a run, the refusal to pair runs whose queries
or judgments differ, the bootstrap interval, one-line errors on what is not a bundle, and a page that
names no external resource."""

from __future__ import annotations

import json
import re

import pytest

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.results import RankerResult, TaskResult
from es_plugin_bridge.evaluation.review_data import bootstrap_ci, bundle, join, read_bundle
from es_plugin_bridge.evaluation.review_page import render


def _result(relevant: str = "b", values: tuple[float, float] = (100.0, 50.0)) -> TaskResult:
    result = TaskResult("retrieval", 2, ["acc@1", "mrr@10"])
    for name, shift in (("bm25", 0.0), ("dense", 1.0)):
        records = [{"query_id": q, "ranker": name, "metrics": {"acc@1": v, "mrr@10": min(100.0, v + shift)},
                    "rank_first_relevant": 1, "top_ids": ["b", "c"]} for q, v in zip(("q1", "q2"), values,
                                                                                       strict=True)]
        result.rankers[name] = RankerResult({"acc@1": 0.75, "mrr@10": 0.76}, records, seconds=0.5)
    result.texts = {"q1": "how do I </script> install", "q2": "second", "b": "B", "c": "C"}
    result.judgments = {"q1": {"relevant": [relevant], "judged": [relevant]},
                        "q2": {"relevant": ["c"], "judged": ["c"]}}
    return result


def test_bundle_holds_text_lists_intervals_and_signature():
    data = bundle(_result(), "a")
    assert data["baseline"] == "bm25" and data["metric"] == "mrr@10"
    assert data["queries"][0]["text"].startswith("how do I") and data["queries"][0]["by"]["bm25"]["ranking"]
    assert data["rankers"]["bm25"]["ci"]["acc@1"] == [50.0, 100.0]
    assert set(data["signature"]) >= {"queries", "judgments"}


def test_runs_with_other_judgments_are_refused_not_paired():
    a, same, other = bundle(_result(), "a"), bundle(_result(), "b"), bundle(_result(relevant="c"), "c")
    joined = join([a, same, other])
    assert joined["refusals"] == ["c is not paired with a: its judgments differ"]
    assert set(joined["rankers"]) == {"bm25 [a]", "dense [a]", "bm25 [b]", "dense [b]"}
    assert joined["baseline"] == "bm25 [a]"


def test_bootstrap_interval_brackets_the_mean():
    lo, hi = bootstrap_ci([0.0, 100.0] * 20)
    assert lo < 50.0 < hi and bootstrap_ci([7.0, 7.0]) == [7.0, 7.0]


def test_not_a_bundle_is_a_one_line_error(tmp_path):
    with pytest.raises(UserError, match="no review.json"):
        read_bundle(tmp_path)
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(UserError, match="not a review bundle"):
        read_bundle(tmp_path / "x.json")


def test_page_is_self_contained_and_text_cannot_close_the_script():
    page = render(join([bundle(_result(), "a")]))
    assert not re.search(r"""(src|href)=['"]""", page)
    assert page.count("</script>") == 2  # the data block's and the code's, never the query's
    data = page.split("id='review-data'>", 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["queries"][0]["text"] == "how do I </script> install"


def test_runs_of_different_models_are_paired_and_the_page_says_so():
    """Allowed, not refused: two models on the same queries and judgments is the comparison a team makes
    to choose between them; the models' differing manifests are named in one line so no reader takes the
    difference for anything else's."""
    first, second = _result(), _result()
    first.inputs["model"], second.inputs["model"] = "a" * 64, "b" * 64
    joined = join([bundle(first, "minilm"), bundle(second, "bow-cnn"), bundle(_result(), "none")])
    assert joined["refusals"] == []
    assert joined["notices"] == [
        f"bow-cnn and minilm ran different models (manifest {'b' * 12} against {'a' * 12}): their "
        "differences include the model's",
        f"none and minilm ran different models (manifest none against {'a' * 12}): their differences "
        "include the model's"]
    assert "dense [bow-cnn]" in joined["rankers"]
    assert join([bundle(first, "x"), bundle(first, "y")])["notices"] == []


def test_an_es_evaluate_runs_parity_and_requests_follow_its_ranker():
    result = _result()
    result.computed_by = {"bm25": "engine", "dense": "engine"}
    result.parity = {"dense": {"mode": "vectors", "queries": 2, "equal": 2, "differ": [], "examples": [],
                               "badge": "parity 2/2 queries"}}
    result.cost = {"dense": {"p50_ms": 1.0, "requests_per_search": {"engine": 2.0, "sidecar": 1.0}}}
    joined = join([bundle(result, "a"), bundle(result, "b")])
    assert joined["rankers"]["dense [b]"]["parity"]["badge"] == "parity 2/2 queries"
    assert joined["rankers"]["dense [a]"]["requests_per_search"] == {"engine": 2.0, "sidecar": 1.0}
    assert "parity" not in joined["rankers"]["bm25 [a]"]
    assert joined["rankers"]["bm25 [a]"]["computed_by"] == "engine"
