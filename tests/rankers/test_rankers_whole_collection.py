"""``dense``, ``hybrid``, ``hybrid-rrf`` on the tiny real models of conftest, over real AskUbuntu titles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge import rankers as registry
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Dataset, Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.retrieval import (
    RetrievalProtocol,
    duplicate_queries,
    evaluate_retrieval,
    protocol_queries,
)
from es_plugin_bridge.rankers import RankerContext, TokenCache
from es_plugin_bridge.rankers.whole_collection import RRF_K, top_k
from es_plugin_bridge.text import Preprocessor, TextOptions

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"


@pytest.fixture(scope="module")
def titles(tmp_path_factory) -> Dataset:
    """Lines 3,001–4,200 of the real title pairs (not the tiny models' training lines' neighbourhood)."""
    path = tmp_path_factory.mktemp("titles") / "titles.tsv"
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[3000:4200]
    path.write_text("".join(lines), encoding="utf-8")
    return read_spec(f"pairs:{path}")


def context(dataset: Dataset, model_dir: Path, **params) -> RankerContext:
    return RankerContext(collection=list(dataset.questions.values()),
                         tokens=TokenCache(Preprocessor(TextOptions())), model_dir=model_dir, params=params)


def queries(dataset: Dataset, n: int) -> list[Question]:
    found, _ = duplicate_queries(dataset.pairs)
    return [q.query for q in found[:n]]


@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_dense_is_the_exact_nearest_neighbours_of_the_model_vectors(checkpoints, titles, model_type):
    ctx = context(titles, checkpoints[model_type])
    dense = registry.build("dense", ctx)
    model = registry.build("model", ctx)
    collection = list(titles.questions.values())
    for query in queries(titles, 5):
        # Independently: the neural similarity of every (query, document) pair, then a stable sort.
        neural = model.scorer.pair_components([(query, doc) for doc in collection])["neural"]
        neural[[i for i, doc in enumerate(collection) if doc.id == query.id]] = -np.inf
        expected = [collection[i].id for i in np.argsort(-neural, kind="stable")[:10]]
        hits = dense.search(query, 10, exclude={query.id})
        assert [doc for doc, _ in hits] == expected
        assert np.allclose([score for _, score in hits], np.sort(neural)[::-1][:10], atol=1e-5)
        assert query.id not in {doc for doc, _ in hits}


def test_dense_scores_candidates_and_pairs_with_the_neural_similarity(checkpoints, titles):
    ctx = context(titles, checkpoints["bow-cnn"])
    dense, model = registry.build("dense", ctx), registry.build("model", ctx)
    query, *candidates = list(titles.questions.values())[:8]
    parts = model.scorer.components(query, candidates)
    assert np.allclose(dense.score(query, candidates), parts["neural"])
    # bow-cnn's own score mixes in its BOW path; dense is the vectors alone.
    assert not np.allclose(parts["model"], parts["neural"])
    assert np.allclose(dense.score_pairs(titles.pairs[:20]),
                       model.scorer.pair_components([(p.q1, p.q2) for p in titles.pairs[:20]])["neural"])


def test_hybrid_takes_candidates_from_both_windows_and_fuses_with_beta(checkpoints, titles):
    from es_plugin_bridge.core.fusion import fuse

    ctx = context(titles, checkpoints["bow-cnn"], hybrid={"window": 8})
    hybrid, bm25, dense = (registry.build(name, ctx) for name in ("hybrid", "bm25", "dense"))
    by_id = {q.id: q for q in ctx.collection}
    dense_only = 0
    for query in queries(titles, 20):
        lexical = [doc for doc, _ in bm25.search(query, 8, {query.id})]
        semantic = [doc for doc, _ in dense.search(query, 8, {query.id})]
        union = list(dict.fromkeys(lexical + semantic))
        hits = hybrid.search(query, 5, {query.id})
        assert {doc for doc, _ in hits} <= set(union) and len(hits) == min(5, len(union))
        dense_only += len(union) - len(lexical)
        # The score is fused's: β over the first stage's score of every candidate, BOW and neural.
        candidates = [by_id[doc] for doc in union]
        parts = hybrid.scorer.components(query, candidates)
        fused = fuse({"first_stage": bm25.score(query, candidates), "bow": parts["bow"],
                      "neural": parts["neural"]}, hybrid.stages["bm25"])
        expected = dict(zip(union, fused, strict=True))
        assert all(score == pytest.approx(expected[doc]) for doc, score in hits)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert dense_only > 20  # the vectors bring in candidates BM25's window does not hold


def test_hybrid_rrf_sums_reciprocal_ranks(checkpoints, titles):
    ctx = context(titles, checkpoints["gru"], **{"hybrid-rrf": {"window": 10}})
    rrf, bm25, dense = (registry.build(name, ctx) for name in ("hybrid-rrf", "bm25", "dense"))
    for query in queries(titles, 10):
        ranks = [{doc: r for r, (doc, _) in enumerate(ranker.search(query, 10, {query.id}), start=1)}
                 for ranker in (bm25, dense)]
        for doc, score in rrf.search(query, 10, {query.id}):
            assert score == pytest.approx(sum(1 / (RRF_K + r[doc]) for r in ranks if doc in r))


def test_every_candidate_source_evaluates_under_both_protocols(exported, titles):
    """Through the evaluator, with the exported (onnxruntime) model directory."""
    tokens = TokenCache(Preprocessor(TextOptions()))
    names = ["bm25", "model", "fused", "dense", "hybrid", "hybrid-rrf"]
    for relevant in ("pair", "cluster"):
        protocol = RetrievalProtocol(relevant, "q1")
        found, _ = protocol_queries(titles.pairs, [titles.pairs], protocol, max_queries=60)
        result = evaluate_retrieval(list(titles.questions.values()), found, names, tokens,
                                    model_dir=exported["bow-cnn"], show_progress=False, protocol=protocol)
        assert list(result.rankers) == names
        for name in names:
            metrics = result.rankers[name].metrics
            assert 0.0 <= metrics["acc@1"] <= metrics["acc@5"] <= metrics["acc@10"] <= 1.0
            assert all(len(r["top_ids"]) == 10 for r in result.rankers[name].per_query)


def test_the_new_rankers_need_a_model_and_hybrid_is_retrieval_only():
    with pytest.raises(UserError, match="'dense' needs --model DIR"):
        registry.check(["dense"], "retrieval", has_model=False)
    with pytest.raises(UserError, match="'hybrid' does not support --task rerank"):
        registry.check(["hybrid"], "rerank", has_model=True)
    registry.check(["dense", "hybrid", "hybrid-rrf"], "retrieval", has_model=True)


def test_top_k_keeps_the_lower_positions_of_a_tie_at_the_cut():
    """``argpartition`` alone takes any of the documents tied with the k-th score; ``hybrid-rrf``'s
    scores tie often (1/61, 1/62, ...), and its top 10 must be its top 100's first 10, which the OpenSearch
    and Elasticsearch modes (ties to the smaller doc id: the collection's order) reproduce."""
    rng = np.random.default_rng(7)
    for _ in range(2000):
        scores = rng.integers(0, 4, int(rng.integers(1, 40))).astype(float)
        for _ in range(int(rng.integers(0, 3))):
            scores[rng.integers(0, len(scores))] = (-np.inf, np.nan)[int(rng.integers(0, 2))]
        k = int(rng.integers(1, len(scores) + 2))
        order = np.lexsort((np.arange(len(scores)), -np.nan_to_num(scores, nan=-np.inf)))
        assert list(top_k(scores, k)) == [i for i in order[:k] if np.isfinite(scores[i])]
    # RRF shares: 1/61, then 1/62, 1/63, 1/64 repeating (argpartition took position 14 before 11 here)
    rrf = np.array([1 / 61] + [1 / (62 + i % 3) for i in range(14)])
    assert list(top_k(rrf, 10)) == [0, 1, 4, 7, 10, 13, 2, 5, 8, 11]
