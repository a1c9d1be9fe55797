"""Elasticsearch's ``linear`` retriever for the learned hybrid
(``es_plugin_bridge/elastic/linear_retriever.py``), without a cluster: the body's shape against the
specification, the version and licence rule, the scores on hand-built lists (one test per rule found in
the Java source), and the comparison with the OpenSearch rule (``core/hybrid_fusion.fuse_lists``) on real
AskUbuntu titles.

Sources restated (elastic/elasticsearch): ``x-pack/plugin/rank-rrf/src/main/java/org/elasticsearch/xpack/
rank/linear/{LinearRetrieverBuilder,LinearRetrieverComponent,ScoreNormalizer,MinMaxScoreNormalizer,
L2ScoreNormalizer,IdentityScoreNormalizer}.java``, ``server/src/main/java/org/elasticsearch/search/
retriever/CompoundRetrieverBuilder.java``, ``server/src/main/java/org/elasticsearch/search/rank/
RankDoc.java``.
"""

from __future__ import annotations

import json
import math
import zlib
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from es_plugin_bridge.core.hybrid_fusion import CLAUSES, MIN_SCORE, HybridFusion, fuse_lists
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.linear_retriever import (
    L2_NORM_SINCE,
    L2_NORM_SINCE_9,
    LINEAR_SINCE,
    linear_retriever,
    linear_scores,
    linear_supported,
    normalize,
)
from es_plugin_bridge.elastic.mappings import VECTOR_FIELD
from es_plugin_bridge.engines import EmbeddedIndex
from es_plugin_bridge.text import Preprocessor, TextOptions

ROOT = Path(__file__).resolve().parents[2]
# The specification's classes, read by tests/tools/es_spec_shapes.py from elastic/elasticsearch-specification
# ``specification/_types/Retriever.ts`` (commit 9d9b9a52): ``RetrieverContainer`` (one of standard, knn,
# linear, ...), ``LinearRetriever extends RetrieverBase`` {retrievers?: InnerRetriever[], rank_window_size?,
# query?, fields?, normalizer?}, ``InnerRetriever`` {retriever, weight, normalizer} (all three required),
# ``KnnRetriever`` {field, k required; query_vector?, num_candidates?, ...},
# ``StandardRetriever`` {query?, ...}.
SPEC = json.loads((ROOT / "tests" / "tools" / "es_spec_shapes.json").read_text(encoding="utf-8"))["classes"]
# Retriever.ts: ``export enum ScoreNormalizer { none, minmax, l2_norm }``.
SCORE_NORMALIZERS = {"none", "minmax", "l2_norm"}
VECTOR = [0.25, -0.5, 1.0]
FIRST_STAGE = {"match": {"title": {"query": "install ubuntu"}}}
EXACT = {"script_score": {"query": {"exists": {"field": VECTOR_FIELD}},
                          "script": {"source": "cosineSimilarity(params.q, 'vector') + 1.0",
                                     "params": {"q": VECTOR}}}}


def fusion(first_stage: float = 0.5, window: int = 10, **kw: Any) -> HybridFusion:
    return HybridFusion(weights={"first_stage": first_stage, "dense": round(1.0 - first_stage, 12)},
                        window=window, **kw)


def f32(x: float) -> float:
    return float(np.float32(x))


def conforms(body: dict[str, Any], cls: str) -> None:
    fields, required = set(SPEC[cls]["fields"]), set(SPEC[cls]["required"])
    assert set(body) <= fields, f"{cls}: unknown {sorted(set(body) - fields)}"
    assert required <= set(body), f"{cls}: missing {sorted(required - set(body))}"


def container(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    conforms(body, "RetrieverContainer")
    assert len(body) == 1
    return next(iter(body.items()))


# --- the body -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("normalization, normalizer", [("min_max", "minmax"), ("l2", "l2_norm")])
def test_hnsw_body_matches_the_specification(normalization: str, normalizer: str) -> None:
    fu = fusion(0.3, window=40, normalization=normalization)
    body = linear_retriever(FIRST_STAGE, VECTOR, fu, knn="hnsw", num_candidates=400)
    json.dumps(body)  # plain JSON
    kind, linear = container(body)
    assert kind == "linear"
    conforms(linear, "LinearRetriever")
    # rank_window_size = the window: each child's search has size = rank_window_size and the combined list
    # is cut to it (CompoundRetrieverBuilder.createSearchSourceBuilder, LinearRetrieverBuilder).
    assert linear["rank_window_size"] == 40
    assert "normalizer" not in linear  # top-level normalizer: 9.1+ (query) / 9.2+ (default); refused before
    first, dense = linear["retrievers"]
    for inner, clause in zip((first, dense), CLAUSES, strict=True):
        conforms(inner, "InnerRetriever")
        assert inner["normalizer"] == normalizer and inner["normalizer"] in SCORE_NORMALIZERS
        assert inner["weight"] == fu.weights[clause] and inner["weight"] >= 0  # weight must be ≥ 0
    kind, standard = container(first["retriever"])
    assert kind == "standard"
    conforms(standard, "StandardRetriever")
    assert standard == {"query": FIRST_STAGE}
    kind, knn = container(dense["retriever"])
    assert kind == "knn"
    conforms(knn, "KnnRetriever")
    # the knn child keeps its own k (nothing sets it from rank_window_size): k = the window fills it.
    assert knn == {"field": VECTOR_FIELD, "query_vector": VECTOR, "k": 40, "num_candidates": 400}


def test_exact_body_is_a_standard_child() -> None:
    body = linear_retriever(FIRST_STAGE, VECTOR, fusion(0.7, window=25), knn="exact", exact_query=EXACT,
                            num_candidates=0)
    _, linear = container(body)
    conforms(linear, "LinearRetriever")
    kind, standard = container(linear["retrievers"][1]["retriever"])
    assert kind == "standard" and standard == {"query": EXACT}
    conforms(standard, "StandardRetriever")
    assert [r["weight"] for r in linear["retrievers"]] == [0.7, pytest.approx(0.3)]
    assert linear["rank_window_size"] == 25


@pytest.mark.parametrize("combination", ["harmonic_mean", "geometric_mean"])
def test_only_arithmetic_mean(combination: str) -> None:
    """The linear retriever only sums weighted normalised scores; it has no harmonic or geometric mean."""
    fu = fusion(combination=combination)
    with pytest.raises(ValueError, match="arithmetic_mean"):
        linear_retriever(FIRST_STAGE, VECTOR, fu, knn="hnsw", num_candidates=100)
    with pytest.raises(ValueError, match="arithmetic_mean"):
        linear_scores({"first_stage": [("a", 1.0)]}, fu, 1)


def test_bad_arguments() -> None:
    fu = fusion(window=50)
    with pytest.raises(ValueError, match="knn"):
        linear_retriever(FIRST_STAGE, VECTOR, fu, knn="ivf", num_candidates=100)
    with pytest.raises(ValueError, match="exact_query"):
        linear_retriever(FIRST_STAGE, VECTOR, fu, knn="exact", num_candidates=100)
    with pytest.raises(ValueError, match="exact_query"):
        linear_retriever(FIRST_STAGE, VECTOR, fu, knn="hnsw", exact_query=EXACT, num_candidates=100)
    # KnnSearchBuilder: "[num_candidates] cannot be less than [k]", "[num_candidates] cannot exceed [10000]"
    for bad in (49, 10_001):
        with pytest.raises(ValueError, match="num_candidates"):
            linear_retriever(FIRST_STAGE, VECTOR, fu, knn="hnsw", num_candidates=bad)


# --- version and licence ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version, paid, normalization, expected", [
    # linear: 8.18.0 and 9.0.0 (TransportVersions.LINEAR_RETRIEVER_SUPPORT 8_837_0_00 < V_8_18_0)
    ((8, 17, 9), True, "min_max", False),
    ((8, 18, 0), True, "min_max", True),
    ((8, 18), True, "min_max", True),
    ((9, 0, 0), True, "min_max", True),
    ((9, 2, 1), True, "min_max", True),
    # licence: LinearRetrieverBuilder.fromXContent checks RRFRankPlugin.LINEAR_RETRIEVER_FEATURE, an
    # ENTERPRISE feature (enterprise or trial; not basic, not platinum): `paid` is False otherwise.
    ((9, 1, 0), False, "min_max", False),
    ((9, 1, 0), False, "l2", False),
    # l2_norm: 8.19.0 and 9.1.0 (elastic/elasticsearch#128504, backport #128972); not in 8.18 nor 9.0.x
    ((8, 18, 5), True, "l2", False),
    ((8, 19, 0), True, "l2", True),
    ((9, 0, 7), True, "l2", False),
    ((9, 1, 0), True, "l2", True),
    ((10, 0, 0), True, "l2", True),
])
def test_linear_supported(version: tuple[int, ...], paid: bool, normalization: str, expected: bool) -> None:
    assert linear_supported(version, paid, normalization) is expected


def test_versions_and_unknown_normalization() -> None:
    assert (LINEAR_SINCE, L2_NORM_SINCE, L2_NORM_SINCE_9) == ((8, 18, 0), (8, 19, 0), (9, 1, 0))
    with pytest.raises(ValueError, match="normalization"):
        linear_supported((9, 1, 0), True, "z_score")


# --- the scores: one rule of the source per test --------------------------------------------------------


def test_weighted_sum_of_minmax_with_missing_as_zero() -> None:
    """score = Σ_c w_c · minmax_c, minmax = (s − min) / (max − min) over the child's own hits; a document a
    child did not return gets nothing from it (0); the sum is not divided by Σ w (here Σ w = 1)."""
    lists = {"first_stage": [("a", 9.0), ("b", 5.0), ("c", 1.0)],
             "dense": [("d", 0.9), ("a", 0.7), ("e", 0.5)]}
    got = dict(linear_scores(lists, fusion(0.25), 10))
    assert got == {
        "a": f32(f32(0.25 * 1.0) + f32(0.75 * 0.5)),
        "b": f32(0.25 * 0.5),
        "c": 0.0,  # the first stage's minimum: exactly 0 (no floor)
        "d": f32(0.75 * 1.0),
        "e": 0.0,  # the vectors' minimum
    }
    assert [doc for doc, _ in linear_scores(lists, fusion(0.25), 10)] == ["d", "a", "b", "c", "e"]


def test_minimum_gets_zero_where_opensearch_gives_0_001() -> None:
    """MinMaxScoreNormalizer has no floor; OpenSearch's min_max gives the minimum MIN_SCORE = 0.001."""
    lists = {"first_stage": [("a", 4.0), ("b", 2.0)], "dense": [("b", 0.8), ("a", 0.6)]}
    fu = fusion(0.5)
    es, os_ = dict(linear_scores(lists, fu, 2)), dict(fuse_lists(lists, fu, 2))
    assert es == {"a": 0.5, "b": 0.5}
    assert os_["a"] == pytest.approx(0.5 + 0.5 * float(MIN_SCORE), abs=1e-7)
    assert os_["b"] == pytest.approx(0.5 + 0.5 * float(MIN_SCORE), abs=1e-7)


def test_single_result_is_one_after_the_fix_and_its_raw_score_before() -> None:
    """|max − min| < 1e-6 (one hit): every hit 1.0 since elastic/elasticsearch#128689 (8.19.0, 9.1.0, and
    8.18 / 9.0 patches); before it the raw min (``score = min``)."""
    lists = {"first_stage": [("a", 7.5)], "dense": [("b", 0.9), ("a", 0.3)]}
    assert dict(linear_scores(lists, fusion(0.5), 2)) == {"a": 0.5, "b": 0.5}
    old = dict(linear_scores(lists, fusion(0.5), 2, single_doc_fix=False))
    assert old == {"a": f32(0.5 * 7.5), "b": 0.5}
    assert normalize([7.5], "minmax").tolist() == [1.0]


def test_all_equal_and_nearly_equal_scores_are_one() -> None:
    """All equal, or within EPSILON = 1e-6 of each other: every hit 1.0. OpenSearch only treats exactly
    equal scores so; 1e-7 apart it min-maxes them (0.001 for the lower, 1.0 for the higher)."""
    assert normalize([3.0, 3.0, 3.0], "minmax").tolist() == [1.0, 1.0, 1.0]
    near = [1.0, f32(1.0 - 1.2e-7)]
    assert near[0] != near[1]
    assert normalize(near, "minmax").tolist() == [1.0, 1.0]
    lists = {"first_stage": [("a", near[0]), ("b", near[1])]}
    assert dict(linear_scores(lists, fusion(1.0), 2)) == {"a": 1.0, "b": 1.0}
    assert dict(fuse_lists(lists, fusion(1.0), 2)) == {"a": 1.0, "b": pytest.approx(float(MIN_SCORE))}


def test_all_zero_scores_count_as_equal() -> None:
    """``max`` starts at Float.MIN_VALUE (1.4e-45), ``min`` at Float.MAX_VALUE: all-zero scores give
    |min − max| < 1e-6, so 1.0 each."""
    assert normalize([0.0, 0.0], "minmax").tolist() == [1.0, 1.0]


def test_l2_norm() -> None:
    """l2_norm: s / sqrt(Σ s²), the squares in float, the sum in double, the quotient cast to float."""
    assert normalize([3.0, 4.0], "l2_norm").tolist() == [f32(0.6), f32(0.8)]
    lists = {"first_stage": [("a", 3.0), ("b", 4.0)], "dense": [("b", 1.0)]}
    got = dict(linear_scores(lists, fusion(0.5, normalization="l2"), 2))
    assert got == {"b": f32(f32(0.5 * f32(0.8)) + 0.5), "a": f32(0.5 * f32(0.6))}


def test_l2_norm_under_epsilon_keeps_the_raw_scores() -> None:
    """A norm < 1e-6 returns the scores unchanged (all zero stays zero). OpenSearch's l2 only special-cases
    a norm of exactly 0, so 1e-7 becomes 1.0 there."""
    assert normalize([0.0, 0.0], "l2_norm").tolist() == [0.0, 0.0]
    assert normalize([1e-7, 0.0], "l2_norm").tolist() == [f32(1e-7), 0.0]
    lists = {"first_stage": [("a", 1e-7), ("b", 0.0)]}
    assert dict(linear_scores(lists, fusion(1.0, normalization="l2"), 2)) == {"a": f32(1e-7), "b": 0.0}
    assert dict(fuse_lists(lists, fusion(1.0, normalization="l2"), 2))["a"] == 1.0


def test_nan_and_none() -> None:
    """NaN scores (none in practice): ignored by min/max, normalised to NaN, and a NaN adds DEFAULT_SCORE
    = 0; ``none`` (IdentityScoreNormalizer) is the raw score with NaN → 0."""
    assert normalize([2.0, math.nan, 1.0], "none").tolist() == [2.0, 0.0, 1.0]
    lists = {"first_stage": [("a", 2.0), ("n", math.nan), ("b", 1.0)]}
    assert dict(linear_scores(lists, fusion(1.0), 3)) == {"a": 1.0, "n": 0.0, "b": 0.0}
    with pytest.raises(ValueError, match="normalizer"):
        normalize([1.0], "zscore")


def test_ties_by_shard_then_lucene_doc() -> None:
    """RankDoc.compareTo: score descending, then shard index, then Lucene doc id, both ascending. Without
    doc keys, the order of first appearance (as fuse_lists)."""
    lists = {"first_stage": [("x", 2.0), ("y", 1.0)], "dense": [("y", 0.9), ("x", 0.1)]}
    fu = fusion(0.5)
    assert linear_scores(lists, fu, 2) == [("x", 0.5), ("y", 0.5)]
    keys = {"x": (1, 0), "y": (0, 7)}
    assert linear_scores(lists, fu, 2, doc_keys=keys) == [("y", 0.5), ("x", 0.5)]
    keys = {"x": (0, 9), "y": (0, 3)}
    assert linear_scores(lists, fu, 2, doc_keys=keys) == [("y", 0.5), ("x", 0.5)]


def test_each_child_is_cut_to_the_window() -> None:
    """Each child returns its own top rank_window_size (its search's size), min-maxed over those; the
    combined list is cut to rank_window_size and ``k`` may not exceed it."""
    hits = [("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)]
    got = dict(linear_scores({"first_stage": hits}, fusion(1.0, window=3), 3))
    assert got == {"a": 1.0, "b": 0.5, "c": 0.0}  # min of the cut list is c's 2.0; d was never returned
    with pytest.raises(ValueError, match="window"):
        linear_scores({"first_stage": hits}, fusion(1.0, window=3), 4)


def test_empty_and_absent_children() -> None:
    assert linear_scores({}, fusion(), 5) == []
    assert linear_scores({"first_stage": [], "dense": [("a", 0.4)]}, fusion(0.4), 5) == [("a", f32(0.6))]


# --- real data: 300 AskUbuntu titles -----------------------------------------------------------------------

WINDOW = 50


def grams(text: str) -> np.ndarray:
    """A deterministic unit vector: hashed character trigrams (512 buckets, CRC32)."""
    v = np.zeros(512, dtype=np.float32)
    s = f"  {text.lower()} "
    for i in range(len(s) - 2):
        v[zlib.crc32(s[i:i + 3].encode()) % 512] += 1
    return v / max(float(np.linalg.norm(v)), 1e-8)


@pytest.fixture(scope="module")
def askubuntu() -> tuple[list[str], EmbeddedIndex, np.ndarray, list[str], Preprocessor]:
    """300 distinct q2 titles of ``samples/askubuntu-pairs/train_titles.tsv`` (label<TAB>q1<TAB>q2) as the
    documents; the q1 of each duplicate pair among them as a query (its duplicate is indexed)."""
    path = files("es_plugin_bridge") / "samples" / "askubuntu-pairs" / "train_titles.tsv"
    titles: list[str] = []
    queries: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            label, q1, q2 = line.rstrip("\n").split("\t")
            if q2 in titles:
                continue
            titles.append(q2)
            if label == "duplicate":
                queries.append(q1)
            if len(titles) == 300:
                break
    pre = Preprocessor(TextOptions())
    ids = [f"t{i}" for i in range(len(titles))]
    tokens = [pre.tokens(Question(i, t)) for i, t in zip(ids, titles, strict=True)]
    index = EmbeddedIndex.build(tokens, "bm25", ids=ids)
    vectors = np.stack([grams(t) for t in titles])
    return ids, index, vectors, queries, pre


@pytest.mark.parametrize("first_stage", [0.3, 0.5, 0.8])
def test_askubuntu_top10_equals_opensearch_but_for_the_floor(askubuntu: Any, first_stage: float) -> None:
    """Weights summing to 1: OpenSearch's arithmetic_mean divides by Σ w = 1 (float32(w) + float32(1 − w)
    is exactly 1 here), so the two engines' scores are the same float32 sum except that OpenSearch gives a
    document at a clause's minimum 0.001 for it where Elasticsearch gives 0. So: every top-10 score is
    bit-identical but those, which are higher by 0.001·w_clause; and the top 10 is the Elasticsearch
    order re-sorted with that floor (here: the same ids)."""
    ids, index, vectors, queries, pre = askubuntu
    fu = fusion(first_stage, window=WINDOW)
    assert np.float32(fu.weights["first_stage"]) + np.float32(fu.weights["dense"]) == np.float32(1.0)
    floored_in_top10 = 0
    for text in queries:
        bm25 = index.search(pre.tokens(Question("q", text)), k=WINDOW)
        cosine = ((1.0 + vectors @ grams(text)) / 2.0).astype(np.float32)  # Lucene's cosine knn score
        best = np.lexsort((np.arange(len(ids)), -cosine))[:WINDOW]
        lists = {"first_stage": bm25, "dense": [(ids[i], float(cosine[i])) for i in best]}

        es_window = linear_scores(lists, fu, WINDOW)
        opensearch = fuse_lists(lists, fu, 10)

        floor: dict[str, float] = {}
        for clause in CLAUSES:
            scores = dict(lists[clause])
            low, high = min(scores.values()), max(scores.values())
            if high - low >= 1e-6:  # both engines give all-equal clauses 1.0
                for doc, s in scores.items():
                    if s == low:
                        floor[doc] = floor.get(doc, 0.0) + float(MIN_SCORE) * fu.weights[clause]
        first_seen = {doc: i for i, doc in enumerate(dict.fromkeys(d for c in CLAUSES for d, _ in lists[c]))}
        predicted = sorted(es_window, key=lambda h: (-(h[1] + floor.get(h[0], 0.0)), first_seen[h[0]]))[:10]
        assert [d for d, _ in opensearch] == [d for d, _ in predicted], text

        es = dict(es_window)
        for doc, score in opensearch:
            if doc in floor:
                floored_in_top10 += 1
                assert score - es[doc] == pytest.approx(floor[doc], abs=1e-7), (text, doc)
            else:
                assert score == es[doc], (text, doc)
        assert [d for d, _ in linear_scores(lists, fu, 10)] == [d for d, _ in opensearch], text
    assert floored_in_top10 > 0  # the difference does occur in these top 10s
