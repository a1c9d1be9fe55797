"""Rerank metrics on the real SemEval-2016 dev sample: the official figures, the AP = 0 convention, ties."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation import evaluate_rerank
from es_plugin_bridge.measures import (
    RERANK_MEASURES,
    RETRIEVAL_MEASURES,
    Judged,
    aggregate,
    first_relevant_rank,
    per_query,
    rank_order,
)
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


# -- every reported metric, against an independent count; empty, one-element and cut-off inputs -------


def _reference(ranked_relevance: list[bool]) -> dict[str, float]:
    """The textbook definitions (trec_eval's): P@k divides by k, AP by the number of relevant items."""
    hits = [i for i, rel in enumerate(ranked_relevance, start=1) if rel]
    if not hits:
        return dict.fromkeys(RERANK_MEASURES, 0.0)
    ap = sum(n / rank for n, rank in enumerate(hits, start=1)) / len(hits)
    return {"map": ap, "mrr": 1 / hits[0], "p@1": sum(r <= 1 for r in hits) / 1,
            "p@5": sum(r <= 5 for r in hits) / 5, "p@10": sum(r <= 10 for r in hits) / 10}


@pytest.mark.parametrize("ranker", ["given", "bm25"])
def test_every_rerank_metric_is_the_textbook_one_per_query_and_on_average(dev_queries, tokens, ranker):
    result = evaluate_rerank(dev_queries, [ranker], tokens, show_progress=False)
    records = result.rankers[ranker].per_query
    expected = []
    for query, record in zip(dev_queries, records, strict=True):
        labels = {c.id: label > 0 for c, label in zip(query.candidates, query.labels, strict=True)}
        ref = _reference([labels[cid] for cid in record["ranking"]])
        expected.append(ref)
        assert record["metrics"] == {m: round(100 * v, 2) for m, v in ref.items()}, query.query.id
    for metric in RERANK_MEASURES:
        mean = sum(ref[metric] for ref in expected) / len(expected)
        assert result.rankers[ranker].metrics[metric] == pytest.approx(mean, abs=1e-12), metric
    # The five figures differ on this data, so no metric can stand in for another (P@5 for P@6 ...).
    assert len(set(result.as_json()["rankers"][ranker].values())) == 5


def test_official_given_figures_pin_every_reported_metric(dev_queries, tokens):
    figures = evaluate_rerank(dev_queries, ["given"], tokens, show_progress=False).as_json()
    reference = [_reference([label > 0 for label in q.labels]) for q in dev_queries]
    assert figures["rankers"]["given"] == {
        m: round(100 * sum(r[m] for r in reference) / len(reference), 2) for m in RERANK_MEASURES}


def test_cut_offs_count_exactly_k_positions():
    # One relevant document at rank 5, 6, 10 or 11 of 12: each cut-off sees it or not, never one more.
    ids = [f"d{i}" for i in range(1, 13)]
    queries = [Judged(f"at{rank}", ids, frozenset({f"d{rank}"})) for rank in (1, 5, 6, 10, 11)]
    values = per_query(queries, RERANK_MEASURES)
    assert [values[f"at{r}"]["p@5"] for r in (1, 5, 6, 10, 11)] == [0.2, 0.2, 0.0, 0.0, 0.0]
    assert [values[f"at{r}"]["p@10"] for r in (1, 5, 6, 10, 11)] == [0.1, 0.1, 0.1, 0.1, 0.0]
    assert [values[f"at{r}"]["p@1"] for r in (1, 5, 6, 10, 11)] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert values["at11"]["mrr"] == pytest.approx(1 / 11) and values["at11"]["map"] == pytest.approx(1 / 11)
    retrieval = per_query(queries, RETRIEVAL_MEASURES)
    assert [retrieval[f"at{r}"]["acc@1"] for r in (1, 5, 6, 10, 11)] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [retrieval[f"at{r}"]["acc@5"] for r in (1, 5, 6, 10, 11)] == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert [retrieval[f"at{r}"]["acc@10"] for r in (1, 5, 6, 10, 11)] == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert [retrieval[f"at{r}"]["mrr@10"] for r in (1, 5, 6, 10, 11)] == pytest.approx(
        [1.0, 0.2, 1 / 6, 0.1, 0.0])


def test_precision_divides_by_k_even_with_fewer_candidates():
    values = per_query([Judged("short", ["a", "b", "c"], frozenset({"a", "c"}))], RERANK_MEASURES)
    assert values["short"] == pytest.approx({"map": (1 + 2 / 3) / 2, "mrr": 1.0, "p@1": 1.0, "p@5": 0.4,
                                             "p@10": 0.2})


def test_a_relevant_document_never_ranked_still_counts_in_average_precision():
    values = per_query([Judged("q", ["a", "b"], frozenset({"b", "unranked"}))], RERANK_MEASURES)
    assert values["q"]["map"] == pytest.approx(0.5 / 2) and values["q"]["mrr"] == 0.5


def test_aggregate_of_no_query_one_query_and_several():
    assert aggregate({}, ["map", "mrr"]) == {"map": 0.0, "mrr": 0.0}
    assert aggregate({"q": {"map": 0.25, "mrr": 1.0}}, ["map", "mrr"]) == {"map": 0.25, "mrr": 1.0}
    assert aggregate({"q": {"map": 0.25}, "r": {"map": 0.75}, "s": {"map": 0.5}}, ["map"]) == {"map": 0.5}


def test_per_query_of_no_query_and_repeated_ids():
    assert per_query([], RERANK_MEASURES) == {}
    with pytest.raises(ValueError, match="^query ids must be unique$"):
        per_query([Judged("q", ["a"], frozenset()), Judged("q", ["b"], frozenset())], RERANK_MEASURES)


def test_rank_order_and_first_relevant_rank_at_their_edges():
    assert rank_order([]) == [] and rank_order([-3.0]) == [0]
    assert rank_order([float("-inf"), -1.0, float("inf"), 0.0]) == [2, 3, 1, 0]
    assert first_relevant_rank([], frozenset({"a"})) is None
    assert first_relevant_rank(["a", "b"], frozenset()) is None
    assert first_relevant_rank(["a", "b", "c"], frozenset({"c", "b"})) == 2
    assert first_relevant_rank(["a"], frozenset({"a"})) == 1


def test_an_evaluation_whose_every_query_was_dropped_is_an_error_not_a_figure(dev_queries, tokens):
    empty = [q for q in dev_queries if not any(label > 0 for label in q.labels)]
    assert empty
    with pytest.raises(UserError, match=f"dropped all {len(empty)} queries"):
        evaluate_rerank(empty, ["given"], tokens, drop_no_relevant=True, show_progress=False)
    kept = evaluate_rerank(empty, ["given"], tokens, show_progress=False)  # without dropping: AP = 0 each
    assert kept.as_json()["rankers"]["given"] == dict.fromkeys(RERANK_MEASURES, 0.0)


def test_a_query_without_any_judgement_counts_zero_not_whatever_the_backend_says():
    # pytrec_eval reports nothing for a query without qrels; the module's own default (0) is what counts.
    values = per_query([Judged("unjudged", ["a"], frozenset(), judged=frozenset()),
                        Judged("empty", [], frozenset())], {**RERANK_MEASURES, **RETRIEVAL_MEASURES})
    assert values == {"unjudged": dict.fromkeys({**RERANK_MEASURES, **RETRIEVAL_MEASURES}, 0.0),
                      "empty": dict.fromkeys({**RERANK_MEASURES, **RETRIEVAL_MEASURES}, 0.0)}


def test_a_relevant_id_outside_the_judged_set_is_still_judged_relevant():
    values = per_query([Judged("q", ["a", "b"], frozenset({"b", "x"}), judged=frozenset({"a", "b"}))],
                       RERANK_MEASURES)
    assert values["q"]["map"] == pytest.approx(0.25)  # b at rank 2 (precision 1/2), x never: (0.5 + 0) / 2


#: docs/results.md's table "Rerank, SemEval-2016 Task 3 dev": every figure the project prints for it.
README_RERANK = {
    "given": (71.35, 76.67, 70.00, 54.40, 42.80), "bm25": (70.19, 80.17, 76.00, 54.80, 42.80),
    "lmdirichlet": (68.48, 76.00, 68.00, 56.00, 42.80),
    "lmjelinekmercer": (65.78, 75.00, 68.00, 52.00, 42.80),
    "dfr": (66.13, 73.83, 66.00, 52.00, 42.80), "ib": (67.45, 75.33, 68.00, 52.40, 42.80),
    "tfidf": (67.71, 74.00, 66.00, 54.00, 42.80),
}


def test_the_readme_rerank_table_is_what_the_evaluation_reports(dev_queries, tokens):
    figures = evaluate_rerank(dev_queries, list(README_RERANK), tokens, show_progress=False).as_json()
    assert {name: tuple(values.values()) for name, values in figures["rankers"].items()} == README_RERANK
    assert list(figures["rankers"]["given"]) == ["map", "mrr", "p@1", "p@5", "p@10"]
