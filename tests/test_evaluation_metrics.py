"""Rerank metrics on the real SemEval-2016 dev sample: the official figures, the AP = 0 convention, ties."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation import evaluate_rerank
from es_plugin_bridge.evaluation.metrics import RERANK_MEASURES, Judged, aggregate, per_query, rank_order
from es_plugin_bridge.rankers import Ranker, TokenCache, register
from es_plugin_bridge.text import Preprocessor, TextOptions

SEMEVAL_DEV = (Path(__file__).resolve().parents[1] / "es_plugin_bridge" / "samples" / "semeval2016-task3"
               / "SemEval2016-Task3-CQA-QL-dev.xml")


@pytest.fixture(scope="module")
def dev_queries():
    return read_spec(f"semeval:{SEMEVAL_DEV}").queries


@pytest.fixture(scope="module")
def tokens():
    return TokenCache(Preprocessor(TextOptions()))


@register("test-constant", tasks=("rerank",))
class ConstantRanker(Ranker):
    """Scores every candidate alike: only the tie-breaking rule decides the order."""

    name = "test-constant"

    def rerank(self, query):
        return np.zeros(len(query.candidates))


def test_given_order_reproduces_official_semeval_dev_figures(dev_queries, tokens):
    result = evaluate_rerank(dev_queries, ["given"], tokens, show_progress=False)
    figures = result.as_json()
    assert figures["n_queries"] == 50
    assert figures["rankers"]["given"]["map"] == 71.35
    assert figures["rankers"]["given"]["mrr"] == 76.67


def test_no_relevant_queries_count_zero_and_dropping_them_raises_map(dev_queries, tokens):
    n_empty = sum(1 for q in dev_queries if not any(label > 0 for label in q.labels))
    assert n_empty > 0, "the dev sample has queries without a relevant candidate"
    kept = evaluate_rerank(dev_queries, ["given", "bm25"], tokens, show_progress=False)
    dropped = evaluate_rerank(dev_queries, ["given", "bm25"], tokens, drop_no_relevant=True,
                              show_progress=False)
    assert dropped.n_queries == len(dev_queries) - n_empty
    for name in ("given", "bm25"):
        all_q, some_q = kept.rankers[name], dropped.rankers[name]
        # A dropped query contributed exactly 0 to every mean, so the sums are equal.
        for metric in ("map", "mrr", "p@1"):
            assert math.isclose(all_q.metrics[metric] * len(dev_queries),
                                some_q.metrics[metric] * dropped.n_queries, rel_tol=1e-9)
            assert some_q.metrics[metric] > all_q.metrics[metric]
        zero = [r for r in all_q.per_query if r["n_relevant"] == 0]
        assert len(zero) == n_empty
        assert all(r["metrics"]["map"] == 0.0 and r["rank_first_relevant"] is None for r in zero)


def test_ties_keep_the_data_order(dev_queries, tokens):
    # SemEval candidates come in the engine's order, so all-equal scores must score exactly as `given`.
    result = evaluate_rerank(dev_queries, ["given", "test-constant"], tokens, show_progress=False)
    assert result.as_json()["rankers"]["test-constant"] == result.as_json()["rankers"]["given"]
    ranking = result.rankers["test-constant"].per_query[0]["ranking"]
    assert ranking == [c.id for c in dev_queries[0].candidates]


def test_tie_break_does_not_depend_on_document_ids():
    # trec_eval alone would break this tie by id ("z" > "a"); our order is the data's.
    assert rank_order([1.0, 1.0, 2.0]) == [2, 0, 1]
    first = Judged("q", ["a", "z"], frozenset({"a"}))
    second = Judged("r", ["z", "a"], frozenset({"a"}))
    values = per_query([first, second], RERANK_MEASURES)
    assert values["q"]["mrr"] == 1.0
    assert values["r"]["mrr"] == 0.5


def test_query_missing_from_backend_output_counts_zero():
    values = per_query([Judged("empty", [], frozenset({"a"})), Judged("hit", ["a"], frozenset({"a"}))],
                       RERANK_MEASURES)
    assert values["empty"] == dict.fromkeys(RERANK_MEASURES, 0.0)
    assert aggregate(values, ["map"])["map"] == 0.5


def test_nan_score_is_an_error():
    with pytest.raises(UserError, match="NaN"):
        rank_order([0.3, float("nan")])


def test_first_stage_rankers_use_statistics_of_every_candidate(dev_queries, tokens):
    # bm25's idf over all 500 candidates differs from an index over one query's ten candidates;
    # the per-query ranking must come from the file-wide index.
    from es_plugin_bridge.engines import EmbeddedIndex

    result = evaluate_rerank(dev_queries, ["bm25"], tokens, show_progress=False)
    every = [c for q in dev_queries for c in q.candidates]
    index = EmbeddedIndex.build([tokens(c) for c in every], "bm25", ids=[c.id for c in every])
    for query, record in zip(dev_queries, result.rankers["bm25"].per_query, strict=True):
        scores = index.score(tokens(query.query), [c.id for c in query.candidates])
        assert record["ranking"] == [query.candidates[i].id for i in rank_order(list(scores))]
