"""A first-stage query of any length stays under the engines' clause limit (issue 34, item 3).

A ``match`` makes one Lucene clause per token, repeats included, and OpenSearch and Elasticsearch refuse
a query of more than 1,024 (``indices.query.bool.max_clause_count``; Lucene 9 counts every leaf of the
query, ``IndexSearcher.getNumClausesCheckVisitor``). The query of a ~100 KB pasted log (an AskUbuntu
title and the shell and log lines of AskUbuntu bodies: 12,646 tokens, 2,978 distinct) is built for every
mode here and its clauses counted; the embedded engine keeps the same terms, so both still rank alike
(the node's side: ``tests/opensearch/test_opensearch_long_query.py``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from pasted_log import VAL, pasted_log

from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic import queries
from es_plugin_bridge.elastic.cluster import opensearch_dsl
from es_plugin_bridge.elastic.modes import hybrid as hybrid_mode
from es_plugin_bridge.elastic.modes import native as native_mode
from es_plugin_bridge.elastic.modes import vectors as vectors_mode
from es_plugin_bridge.engines.embedded import EmbeddedEngine
from es_plugin_bridge.engines.query_terms import MAX_QUERY_TERMS, bounded_tokens, query_terms
from es_plugin_bridge.text import Preprocessor

#: OpenSearch 2.19's and Lucene's default ``max_clause_count``.
ENGINE_LIMIT = 1024
TITLES = VAL.parent / "train_titles.tsv"


@pytest.fixture(scope="module")
def log_tokens() -> list[str]:
    return Preprocessor().tokens(question_from_text(pasted_log()))


def clauses(node: Any) -> int:
    """The leaf clauses Lucene makes of a body: one per token of each ``match`` (the field's whitespace
    analyzer), one per ``rank_feature``, ``ids``, ``exists``, ``match_all``, ``knn``, ``script_score``."""
    if isinstance(node, list):
        return sum(clauses(item) for item in node)
    if not isinstance(node, dict):
        return 0
    total = 0
    for key, value in node.items():
        if key == "match":
            total += sum(len(str(v["query"]).split()) for v in value.values())
        elif key in ("rank_feature", "ids", "exists", "match_all", "knn"):
            total += 1
        else:
            total += clauses(value)
    return total


def test_the_log_has_far_more_tokens_than_the_limit(log_tokens):
    assert len(log_tokens) > 10 * ENGINE_LIMIT and len(set(log_tokens)) > 2 * ENGINE_LIMIT


def test_query_terms_keep_the_most_repeated_terms_in_order(log_tokens):
    kept = query_terms(log_tokens)
    counts = Counter(log_tokens)
    assert len(kept) == MAX_QUERY_TERMS and dict(kept) == {t: counts[t] for t, _ in kept}
    least_kept = min(n for _, n in kept)
    assert all(n <= least_kept for t, n in counts.items() if t not in dict(kept))
    order = list(counts)  # first occurrence
    assert [t for t, _ in kept] == sorted(dict(kept), key=order.index)
    # ties at the boundary go to the earliest terms
    tied = [t for t in order if counts[t] == least_kept]
    assert [t for t in tied if t in dict(kept)] == tied[: len([t for t in tied if t in dict(kept)])]
    short = ["sudo", "apt", "install", "apt"]
    assert query_terms(short) == [("sudo", 1), ("apt", 2), ("install", 1)]


def test_an_ordinary_query_keeps_its_one_match():
    tokens = Preprocessor().tokens(question_from_text("sudo apt-get install exfat-fuse exfat-utils apt-get"))
    body = queries.first_stage_query("bm25", tokens)
    assert body["bool"]["should"] == [{"match": {"text": {"query": " ".join(tokens)}}}]


def test_the_logs_first_stage_is_one_boosted_match_per_kept_term(log_tokens):
    body = queries.first_stage_query("lmdirichlet", log_tokens, exclude=["q1"])
    matches = body["bool"]["should"][0]["bool"]["should"]
    got = [(next(iter(m["match"].values()))["query"], next(iter(m["match"].values())).get("boost", 1.0))
           for m in matches]
    assert got == [(t, float(n)) for t, n in query_terms(log_tokens)]
    assert all(set(m["match"]) == {"text.lmdirichlet"} for m in matches)
    assert clauses(body) == MAX_QUERY_TERMS + 1  # the terms and the ids of must_not


def test_every_modes_body_stays_under_the_limit(log_tokens):
    terms = {t: 0.05 for t in list(dict.fromkeys(log_tokens))[:200]}  # a generous BOW (models cap theirs)
    vector = [0.1] * 24
    beta = {"first_stage": 0.4, "bow": 0.3, "neural": 0.3}
    rest = queries.rest_of_fused(vector, terms, beta, "cosine")
    union = [str(i) for i in range(100)]
    bodies = {
        "first stage / bridge": hybrid_mode.first_stage_search("bm25", log_tokens, 50, exclude=["q"]),
        "native": {"retriever": native_mode.native_retriever(
            similarity="bm25", tokens=log_tokens, query_text="x", inference_id="e",
            beta_first_stage=0.4, window=50)},
        "vectors (one call)": {"retriever": vectors_mode.vectors_retriever(
            similarity="bm25", tokens=log_tokens, rest=rest, beta_first_stage=0.4, window=50)},
        "vectors (two calls)": opensearch_dsl.translate({
            "query": queries.first_stage_query("bm25", log_tokens),
            "rescore": queries.rescore(rest, 50, 1.0)}),
        "hybrid step 2": opensearch_dsl.translate(hybrid_mode.union_search("bm25", log_tokens, union, rest)),
        "hybrid-rrf": {"retriever": hybrid_mode.rrf_retriever(
            similarity="bm25", tokens=log_tokens, vector=vector, neural_similarity="cosine", knn="hnsw",
            window=50)},
    }
    for name, body in bodies.items():  # the whole body, though Lucene counts each search's query alone
        assert clauses(body) < ENGINE_LIMIT, name


def test_the_hybrid_name_marks_the_whole_first_stage(log_tokens):
    named = queries.named(queries.first_stage_query("bm25", log_tokens, only=["a"]))
    assert named["bool"]["should"][0]["bool"]["_name"] == queries.FIRST_STAGE_NAME
    short = queries.named(queries.first_stage_query("bm25", ["apt", "exfat"], only=["a"]))
    assert short["bool"]["should"][0]["match"]["text"]["_name"] == queries.FIRST_STAGE_NAME


@pytest.fixture(scope="module")
def embedded():
    """The embedded engine over 3,000 AskUbuntu titles of the shipped sample."""
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[:3000]
    questions = list(read_spec_lines(lines).questions.values())
    engine = EmbeddedEngine(Preprocessor().tokens)
    engine.index(questions)
    return engine, questions


def read_spec_lines(lines: list[str]):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "titles.tsv"
    path.write_text("".join(lines), encoding="utf-8")
    return read_spec(f"pairs:{path}")


@pytest.mark.parametrize("similarity", ["bm25", "lmdirichlet", "dfr"])
def test_the_embedded_engine_scores_the_same_bounded_terms(embedded, log_tokens, similarity):
    engine, questions = embedded
    index = engine.first_stage(similarity).index
    kept = bounded_tokens(log_tokens)
    assert index.search(log_tokens, 50) == index.search(kept, 50)
    ids = [q.id for q in questions[:200]]
    assert index.score(log_tokens, ids).tolist() == index.score(kept, ids).tolist()
