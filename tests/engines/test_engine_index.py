"""EmbeddedIndex search semantics on real AskUbuntu titles: top-k, ties, exclusion, repeats, errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.engines import SIMILARITIES, EmbeddedIndex
from es_plugin_bridge.errors import UserError

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", re.sub(r"<[^>]+>", " ", text).lower())


@pytest.fixture(scope="module")
def titles() -> list[list[str]]:
    rows = (SAMPLES / "train_titles.tsv").read_text(encoding="utf-8").splitlines()[:3000]
    return [_words(row.split("\t")[1]) for row in rows] + [_words(row.split("\t")[2]) for row in rows]


@pytest.fixture(scope="module")
def queries() -> list[list[str]]:
    rows = (SAMPLES / "train_titles.tsv").read_text(encoding="utf-8").splitlines()[5000:5060]
    return [_words(row.split("\t")[1]) for row in rows]


def _full_ranking(index: EmbeddedIndex, docs: list[list[str]], query: list[str]) -> list[tuple[str, float]]:
    """Every document sharing a token with the query, by brute force: score descending, then doc order."""
    scores = index.score(query, index.ids)
    matched = [i for i, doc in enumerate(docs) if set(query) & set(doc)]
    return [(index.ids[i], float(scores[i])) for i in sorted(matched, key=lambda i: (-scores[i], i))]


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_top_k_equals_brute_force_ranking(titles, queries, similarity: str) -> None:
    index = EmbeddedIndex.build(titles, similarity)
    for query in queries[:15]:
        expected = _full_ranking(index, titles, query)
        for k in (1, 10, 50):
            assert index.search(query, k) == expected[:k]


def test_equal_scores_rank_earlier_documents_first(titles, queries) -> None:
    index = EmbeddedIndex.build(titles, "bm25")
    ties = 0
    for query in queries:
        hits = index.search(query, 200)
        for (doc_a, score_a), (doc_b, score_b) in zip(hits, hits[1:], strict=False):
            assert score_a >= score_b
            if score_a == score_b:
                ties += 1
                assert int(doc_a) < int(doc_b)
    assert ties > 50  # identical titles and one-word matches tie often in real data


def test_exclude_and_custom_ids(titles, queries) -> None:
    ids = [f"q{i}" for i in range(len(titles))]
    index = EmbeddedIndex.build(titles, "lmdirichlet", ids=ids, mu=500)
    query = titles[42]
    first = index.search(query, 5)
    assert first[0][0] == "q42"
    rest = index.search(query, 4, exclude={"q42", "not-in-the-index"})
    assert rest == first[1:]


def test_repeated_query_token_counts_twice(titles) -> None:
    index = EmbeddedIndex.build(titles, "bm25")
    once = index.score(["install", "ubuntu"], index.ids[:500])
    twice = index.score(["install", "install", "ubuntu"], index.ids[:500])
    install = index.score(["install"], index.ids[:500])
    np.testing.assert_allclose(twice, once + install, rtol=1e-6)
    assert (twice > once).any()


def test_lmdirichlet_matches_with_zero_score_are_still_hits() -> None:
    rows = (SAMPLES / "val.tsv").read_text(encoding="utf-8").splitlines()
    docs = [_words(row.split("\t")[1]) for row in rows]
    index = EmbeddedIndex.build(docs, "lmdirichlet")
    hits = index.search(["the"], k=len(docs))
    with_the = [str(i) for i, d in enumerate(docs) if "the" in d]
    assert sorted(d for d, _ in hits) == sorted(with_the)
    zero = [d for d, s in hits if s == 0.0]
    assert zero and [d for d, _ in hits[-len(zero) :]] == sorted(zero, key=int)  # clamped, then doc order


def test_score_and_search_agree_and_non_matches_score_zero(titles, queries) -> None:
    index = EmbeddedIndex.build(titles, "dfr")
    query = queries[0]
    hits = index.search(query, 10)
    assert index.score(query, [d for d, _ in hits]).tolist() == [s for _, s in hits]
    loner = next(i for i, doc in enumerate(titles) if doc and not set(doc) & set(query))
    assert index.score(query, [str(loner)]).tolist() == [0.0]
    assert index.search(["zzzunknownzzz"], 10) == [] and index.search(query, 0) == []


def test_with_similarity_reuses_postings_and_empty_documents_are_not_counted(titles) -> None:
    docs = [*titles[:100], [], titles[100]]
    index = EmbeddedIndex.build(docs, "bm25")
    other = index.with_similarity("tfidf")
    assert other.postings is index.postings and len(other) == len(index) == 102
    stats = index.postings.stats()
    assert stats.doc_count == 101 and stats.sum_total_term_freq == sum(map(len, docs))
    assert index.score(titles[100], ["100"]).tolist() == [0.0]


def test_bad_input_is_a_user_error(titles) -> None:
    with pytest.raises(UserError, match="document 1 is a string"):
        EmbeddedIndex.build([["a"], "b c"], "bm25")
    with pytest.raises(UserError, match="2 ids given for 3 documents"):
        EmbeddedIndex.build(titles[:3], "bm25", ids=["a", "b"])
    with pytest.raises(UserError, match="duplicate document id 'a'"):
        EmbeddedIndex.build(titles[:2], "bm25", ids=["a", "a"])
    with pytest.raises(UserError, match="'classic'"):
        EmbeddedIndex.build(titles[:2], "classic")
    index = EmbeddedIndex.build(titles[:2], "bm25")
    with pytest.raises(UserError, match="string"):
        index.search("how to install", 10)
    with pytest.raises(UserError, match="unknown document id '7'"):
        index.score(["install"], ["0", "7"])
