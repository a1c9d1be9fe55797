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

SAMPLES = Path(__file__).resolve().parents[1] / "es_plugin_bridge" / "samples"
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
