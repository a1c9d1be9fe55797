"""Retrieval over real AskUbuntu titles: the protocol (query excluded, one relevant) and sane figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Pair, Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation import duplicate_queries, evaluate_retrieval, held_out
from es_plugin_bridge.rankers import TokenCache
from es_plugin_bridge.text import Preprocessor, TextOptions

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The first 3,000 real pairs: about 5,800 distinct titles, about 1,500 duplicate pairs."""
    path = tmp_path_factory.mktemp("titles") / "titles.tsv"
    path.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[:3000]),
                    encoding="utf-8")
    return read_spec(f"pairs:{path}")


def test_bm25_finds_duplicates_and_never_the_query_itself(small):
    queries, skipped = duplicate_queries(small.pairs)
    assert len(queries) + skipped == sum(p.label for p in small.pairs)
    tokens = TokenCache(Preprocessor(TextOptions()))
    result = evaluate_retrieval(list(small.questions.values()), queries, ["bm25", "lmdirichlet"], tokens,
                                show_progress=False)
    assert result.n_queries == len(queries)
    for name in ("bm25", "lmdirichlet"):
        m = result.rankers[name].metrics
        assert m["acc@1"] <= m["acc@5"] <= m["acc@10"]
        assert m["acc@1"] <= m["mrr@10"] <= m["acc@10"]
        # Titles share words with their duplicates far more often than chance (10 / 5,800).
        assert m["acc@10"] > 0.15
        records = result.rankers[name].per_query
        assert len(records) == len(queries)
        for record in records:
            assert record["query_question_id"] not in record["top_ids"]
            assert len(record["top_ids"]) <= 10
            rank = record["rank_first_relevant"]
            if rank is None:
                assert record["relevant_id"] not in record["top_ids"]
                assert record["metrics"]["mrr@10"] == 0.0
            else:
                assert record["top_ids"][rank - 1] == record["relevant_id"]
                assert record["metrics"]["mrr@10"] == round(100 / rank, 2)


def test_identical_pair_is_skipped_and_counted():
    a, b = Question("a", "how to mount a usb disk"), Question("b", "mount usb drive")
    pairs = [Pair(a, a, 1), Pair(a, b, 1), Pair(b, a, 0)]
    queries, skipped = duplicate_queries(pairs)
    assert skipped == 1
    assert [(q.query.id, q.relevant.id) for q in queries] == [("a", "b")]


def test_held_out_subset_is_deterministic_and_order_free(small):
    queries, _ = duplicate_queries(small.pairs)
    chosen = held_out(queries, 100)
    assert len(chosen) == 100
    assert {q.id for q in held_out(list(reversed(queries)), 100)} == {q.id for q in chosen}


def test_no_duplicate_pairs_is_an_error():
    tokens = TokenCache(Preprocessor(TextOptions()))
    with pytest.raises(UserError, match="no duplicate pair"):
        evaluate_retrieval([Question("a", "x")], [], ["bm25"], tokens, show_progress=False)


def test_cluster_counts_more_hits_than_pair_on_the_same_queries(small):
    """Real titles: the canonical q1 of many pairs is a known duplicate the pair protocol calls a miss."""
    from es_plugin_bridge.evaluation.retrieval import RetrievalProtocol, protocol_queries

    tokens = TokenCache(Preprocessor(TextOptions()))
    documents = list(small.questions.values())
    results = {}
    for relevant in ("pair", "cluster"):
        protocol = RetrievalProtocol(relevant, "q2")
        queries, _ = protocol_queries(small.pairs, [small.pairs], protocol, max_queries=400)
        results[relevant] = evaluate_retrieval(documents, queries, ["bm25"], tokens, show_progress=False,
                                               protocol=protocol)
        assert results[relevant].as_json()["protocol"]["relevant"] == relevant
    pair, cluster = (results[r].rankers["bm25"] for r in ("pair", "cluster"))
    assert [r["query_id"] for r in pair.per_query] == [r["query_id"] for r in cluster.per_query]
    assert [r["top_ids"] for r in pair.per_query] == [r["top_ids"] for r in cluster.per_query]
    for p, c in zip(pair.per_query, cluster.per_query, strict=True):
        assert c["n_relevant"] >= p["n_relevant"] == 1
        assert p["relevant_id"] in (c.get("relevant_ids") or [c["relevant_id"]])
        if p["rank_first_relevant"] is not None:
            assert c["rank_first_relevant"] <= p["rank_first_relevant"]
    for metric in ("acc@1", "acc@10", "mrr@10"):
        assert cluster.metrics[metric] >= pair.metrics[metric]
    assert cluster.metrics["acc@1"] > pair.metrics["acc@1"] + 0.02
    assert results["cluster"].as_json()["protocol"]["mean_relevant"] > 1.5


def test_q2_direction_searches_with_the_second_question_and_holds_out_the_same_pairs(small):
    forward, skipped = duplicate_queries(small.pairs)
    backward, skipped_too = duplicate_queries(small.pairs, "q2")
    assert skipped == skipped_too and len(forward) == len(backward)
    for f, b in zip(forward, backward, strict=True):
        assert (f.id, f.query, f.relevant) == (b.id, b.relevant, b.query)
    assert {q.id for q in held_out(forward, 50)} == {q.id for q in held_out(backward, 50)}
    # The papers' AskUbuntu pairs put the canonical question first: fewer distinct q1 than q2.
    assert len({q.query.id for q in forward}) < 0.8 * len({q.query.id for q in backward})
