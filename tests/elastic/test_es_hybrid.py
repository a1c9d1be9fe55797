"""Modes ``hybrid`` and ``hybrid-rrf`` (es_plugin_bridge/elastic/modes/hybrid.py), checked without a cluster.

- Shapes: every body against the Elasticsearch specification's classes (``tests/tools/
  es_spec_shapes.json``, written by ``tests/tools/es_spec_shapes.py`` from
  elastic/elasticsearch-specification at the commit it names), and every field a query names is mapped.
- Equivalence on real data: the mode classes run against :class:`FakeElasticsearch`, which computes
  Elasticsearch's arithmetic on exactly the bodies the modes send — ``bool``/``ids``/``exists``/
  ``match_all`` matching, the first stage's score (the embedded engine's, equal to Lucene's:
  tests/engines/test_lucene_parity.py), ``rank_feature`` with Lucene's 9-bit truncation, the ``script_score``
  Painless of the bodies, ``knn`` (cosine → (1 + cos)/2), a ``query`` rescore, named-query scores
  (``include_named_queries_score``), ``rrf`` in float32 with ties to the smaller doc id, float32
  ``_score`` — with vectors and BOW terms from the sidecar app's own ``/v1/encode``. On SemEval-2016 dev
  and on AskUbuntu titles, hybrid gives the in-process ``hybrid`` ranker's order (scores: fused + one
  constant) and hybrid-rrf gives ``hybrid-rrf``'s, up to ties.
Whether a real Elasticsearch answers the same is for ``tests/elastic/test_es_cluster.py`` (Docker).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from painless_as_python import painless_as_python

from es_plugin_bridge.bridge.sidecar_client import EmbedError
from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question, RankingQuery
from es_plugin_bridge.elastic import mappings, queries
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo
from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
from es_plugin_bridge.elastic.modes import hybrid, mode_names, require
from es_plugin_bridge.elastic.modes import hybrid as hybrid_mode
from es_plugin_bridge.elastic.modes.factory import make_mode
from es_plugin_bridge.elastic.setup import IndexMeta
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.retrieval import duplicate_queries
from es_plugin_bridge.rankers import RankerContext, TokenCache, build, unique_questions
from es_plugin_bridge.rankers.whole_collection import RRF_K
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text

ROOT = Path(__file__).resolve().parents[2]
SHAPES = json.loads((ROOT / "tests" / "tools" / "es_spec_shapes.json").read_text(encoding="utf-8"))
SPEC = SHAPES["classes"]
SAMPLES = ROOT / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TOKENS = ["how", "do", "i", "upgrade", "to", "12.04"]
BETA = {"first_stage": 0.35, "bow": 0.15, "neural": 0.5}
VECTOR = [0.1, -0.2, 0.3]
WINDOW = 30  # the modes' and the in-process rankers' window (small: the fake is plain Python)


def conforms(body: Mapping[str, Any], cls: str) -> None:
    """``body``'s keys are fields of spec class ``cls`` and its required fields are present."""
    fields, required = set(SPEC[cls]["fields"]), set(SPEC[cls]["required"])
    assert set(body) <= fields, f"{cls}: unknown {sorted(set(body) - fields)}"
    assert required <= set(body), f"{cls}: missing {sorted(required - set(body))}"


def check_query(body: Mapping[str, Any]) -> None:
    """The query kinds these modes build, against their classes (the rest come from elasticsearch.dsl)."""
    assert len(body) == 1
    kind, inner = next(iter(body.items()))
    if kind == "bool":
        for key in ("should", "filter", "must_not"):
            for clause in inner.get(key, []):
                check_query(clause)
    elif kind == "match":
        (params,) = inner.values()
        conforms(params, "MatchQuery")
    elif kind == "script_score":
        conforms(inner, "ScriptScoreQuery")
        assert set(inner["script"]) <= {"source", "params"}
        check_query(inner["query"])
    elif kind == "exists":
        conforms(inner, "ExistsQuery")
    elif kind == "ids":
        conforms(inner, "IdsQuery")
    elif kind not in ("match_all", "rank_feature"):
        raise AssertionError(f"unexpected query {kind}")


def check_search_body(body: Mapping[str, Any]) -> None:
    conforms(body, "SearchRequestBody")
    conforms(body, "SearchRequest.body")
    if "query" in body:
        check_query(body["query"])
    if "knn" in body:
        check_knn(body["knn"], "KnnSearch")
        assert body["size"] <= body["knn"]["k"]
    if "rescore" in body:
        conforms(body["rescore"], "Rescore")
        conforms(body["rescore"]["query"], "RescoreQuery")
        check_query(body["rescore"]["query"]["rescore_query"])
    if "retriever" in body:
        check_retriever(body["retriever"])


def check_knn(body: Mapping[str, Any], cls: str) -> None:
    conforms(body, cls)
    assert body["field"] == mappings.VECTOR_FIELD
    assert body["k"] <= body["num_candidates"] <= queries.MAX_NUM_CANDIDATES
    if "filter" in body:
        check_query(body["filter"])


def check_retriever(container: Mapping[str, Any]) -> None:
    conforms(container, "RetrieverContainer")
    (kind, body), = container.items()
    if kind == "standard":
        conforms(body, "StandardRetriever")
        check_query(body["query"])
    elif kind == "knn":
        check_knn(body, "KnnRetriever")
    elif kind == "rrf":
        conforms(body, "RRFRetriever")
        for child in body["retrievers"]:
            check_retriever(child)
    else:
        raise AssertionError(f"unexpected retriever {kind}")


def named_fields(body: Any) -> set[str]:
    """Every field a body names: match keys, ``field`` values, script doc fields."""
    found: set[str] = set()
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "match":
                found.update(value)
            elif key == "field" and isinstance(value, str):
                found.add(value)
            elif key == "source" and isinstance(value, str):
                found.update(re.findall(r"'(\w+)'", value))
            found |= named_fields(value)
    elif isinstance(body, list):
        for item in body:
            found |= named_fields(item)
    return found


# --- shapes -------------------------------------------------------------------------------------


def test_the_specification_states_what_the_exact_design_rests_on():
    # the two facts the exact design rests on, as the specification states them
    assert SPEC["Hit"]["types"]["matched_queries"] == "string[] | Dictionary<string, double>"
    for request in ("SearchRequest.query_parameters", "MultiSearchRequest.query_parameters"):
        assert SPEC[request]["types"]["include_named_queries_score"] == "boolean"
    assert "include_named_queries_score" not in SPEC["SearchRequest.body"]["fields"]  # a URL parameter
    parameters = set(SPEC["SearchRequest.query_parameters"]["fields"])
    assert {"preference", "include_named_queries_score"} <= parameters
    assert {"rank_constant", "rank_window_size", "retrievers"} <= set(SPEC["RRFRetriever"]["fields"])


@pytest.mark.parametrize("knn", ["exact", "hnsw"])
def test_window_bodies_conform(knn):
    first = hybrid_mode.first_stage_search("bm25", TOKENS, 100, exclude={"q"})
    dense = hybrid_mode.dense_search(VECTOR, 100, "cosine", knn, exclude={"q"})
    lines = hybrid_mode.msearch_lines([first, dense], "esrerank-x")
    assert lines[0] == lines[2] == {"preference": "esrerank-x"}
    for header in lines[0::2]:
        conforms(header, "MultisearchHeader")
    for body in lines[1::2]:
        check_search_body(body)
        assert body["size"] == 100 and body["_source"] is False
    if knn == "hnsw":
        assert dense["knn"]["num_candidates"] == 1000 and dense["knn"]["k"] == 100
        assert dense["knn"]["filter"] == {"bool": {"must_not": [{"ids": {"values": ["q"]}}]}}
    else:
        script = dense["query"]["script_score"]
        assert script["query"]["bool"]["filter"] == [{"exists": {"field": "vector"}}]
        assert script["script"]["source"] == queries.neural_script("cosine")
        assert script["script"]["params"] == {"q": VECTOR}
    manhattan = queries.exact_dense_query(VECTOR, "manhattan")
    assert "l1norm(params.q, 'vector')" in manhattan["script_score"]["script"]["source"]


def test_union_search_names_the_first_stage_and_rescores_with_query_weight_zero():
    rest = queries.rest_of_fused(VECTOR, {"12.04": 0.7, "upgrade": -0.3}, BETA, "cosine")
    union = ["a", "b", "c"]
    body = hybrid_mode.union_search("bm25", TOKENS, union, rest)
    check_search_body(body)
    assert body["size"] == body["rescore"]["window_size"] == 3
    assert body["rescore"]["query"]["query_weight"] == 0.0
    assert body["rescore"]["query"]["rescore_query"] == rest
    boolean = body["query"]["bool"]
    assert boolean["filter"] == [{"ids": {"values": union}}]
    (clause,) = boolean["should"]
    match = {"query": "how do i upgrade to 12.04", "_name": queries.FIRST_STAGE_NAME}
    assert clause == {"match": {"text": match}}
    # the name sits on the match alone: its score is the first stage's, not the bool's
    assert json.dumps(body).count('"_name"') == 1
    assert "_name" in SPEC["QueryBase"]["fields"]
    with pytest.raises(AssertionError, match="2 match clauses"):
        queries.named({"bool": {"should": [{"match": {"a": {}}}, {"match": {"b": {}}}]}})


@pytest.mark.parametrize("knn", ["exact", "hnsw"])
def test_rrf_retriever_conforms(knn):
    body = hybrid_mode.rrf_retriever(similarity="lmdirichlet", tokens=TOKENS, vector=VECTOR,
                                neural_similarity="cosine", knn=knn, window=50, exclude={"q"})
    check_retriever(body)
    rrf = body["rrf"]
    assert rrf["rank_constant"] == RRF_K == hybrid_mode.RANK_CONSTANT == 60  # Elasticsearch's default too
    assert rrf["rank_window_size"] == 50
    first, dense = rrf["retrievers"]
    assert first == {"standard": {"query": queries.first_stage_query("lmdirichlet", TOKENS, exclude={"q"})}}
    assert ("knn" if knn == "hnsw" else "standard") in dense


def test_every_field_the_bodies_name_is_mapped():
    index = mappings.index_body(dimension=3)
    mapped = {f"{name}.{sub}" for name, prop in index["mappings"]["properties"].items()
              for sub in prop.get("fields", {})} | set(index["mappings"]["properties"])
    rest = queries.rest_of_fused(VECTOR, {"upgrade": 0.5}, BETA, "cosine")
    bodies = [
        hybrid_mode.first_stage_search("ib", TOKENS, 10),
        hybrid_mode.dense_search(VECTOR, 10, "cosine", "exact"),
        hybrid_mode.dense_search(VECTOR, 10, "cosine", "hnsw"),
        hybrid_mode.union_search("bm25", TOKENS, ["a"], rest),
        hybrid_mode.rrf_retriever(similarity="bm25", tokens=TOKENS, vector=VECTOR, neural_similarity="cosine",
                             knn="hnsw", window=10),
    ]
    for body in bodies:
        fields = named_fields(body)
        assert {f for f in fields if not f.startswith("bow.")} <= mapped, fields
    assert index["mappings"]["properties"]["vector"]["index"] is True  # knn needs an indexed vector
    assert index["mappings"]["properties"]["vector"]["similarity"] == "cosine"


def test_the_mapping_example_is_current_and_conforms():
    from es_plugin_bridge.elastic.write_mappings import bodies, render

    example = bodies()["search-hybrid.json"]
    path = ROOT / "mappings" / "elasticsearch" / "search-hybrid.json"
    assert path.read_text(encoding="utf-8") == render(example)
    steps = example["hybrid"]
    lines = steps["1 POST /INDEX/_msearch"]
    for header, body in zip(lines[0::2], lines[1::2], strict=True):
        conforms(header, "MultisearchHeader")
        check_search_body(body)
    (step2,) = [key for key in steps if key.startswith("2 ")]
    assert "include_named_queries_score=true" in step2 and "preference=" in step2
    check_search_body(steps[step2])
    check_search_body(steps["--knn hnsw: the second body of step 1"])
    (rrf,) = example["hybrid-rrf"].values()
    check_search_body(rrf)


def test_matched_queries_must_carry_scores():
    assert hybrid.first_stage_score({"_id": "a"}) == 0.0  # the first stage does not match it
    assert hybrid.first_stage_score({"matched_queries": {queries.FIRST_STAGE_NAME: 2.5}}) == 2.5
    with pytest.raises(UserError, match="include_named_queries_score"):
        hybrid.first_stage_score({"matched_queries": [queries.FIRST_STAGE_NAME]})


def test_fuse_union_minmaxes_over_the_union_with_zero_for_unmatched_members():
    hits = [{"_id": "a", "_score": 1.0, "matched_queries": {queries.FIRST_STAGE_NAME: 4.0}},
            {"_id": "b", "_score": 1.5, "matched_queries": {queries.FIRST_STAGE_NAME: 2.0}},
            {"_id": "c", "_score": 1.2}]  # from the vectors only: first stage 0, the union's min
    fused = dict(hybrid.fuse_union(["a", "b", "c", "gone"], hits, 0.5, 10))
    assert fused == pytest.approx({"a": 1.5, "b": 1.75, "c": 1.2})
    assert [doc for doc, _ in hybrid.fuse_union(["c", "b"], hits, 0.0, 1)] == ["b"]


def test_rrf_fuse_is_the_in_process_formula_with_its_tie_order():
    fused = hybrid.rrf_fuse([[("a", 9.0), ("b", 8.0)], [("c", 0.9), ("d", 0.8), ("b", 0.7)]], 3)
    # a and c tie at 1/61: first seen first (Elasticsearch: the smaller doc id)
    assert [doc for doc, _ in fused] == ["b", "a", "c"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 63)


def cluster(licence: str = "trial", version: tuple[int, int, int] = (9, 5, 0)) -> ClusterInfo:
    return ClusterInfo(version, licence, True)


def test_licences_and_versions():
    assert {"hybrid", "hybrid-rrf"} <= set(mode_names())
    assert hybrid.rrf_in_elasticsearch(cluster("trial"))
    assert hybrid.rrf_in_elasticsearch(cluster("enterprise", (8, 16, 0)))
    assert not hybrid.rrf_in_elasticsearch(cluster("platinum"))  # RANK_RRF_FEATURE is ENTERPRISE
    assert not hybrid.rrf_in_elasticsearch(cluster("basic"))
    assert not hybrid.rrf_in_elasticsearch(cluster("enterprise", (8, 15, 3)))
    assert not hybrid.rrf_in_elasticsearch(ClusterInfo((9, 5, 0), "trial", False))
    for licence in ("basic", "platinum", "trial"):  # hybrid is exact on any licence
        require(cluster(licence, (8, 8, 0)), "hybrid")
        require(cluster(licence, (8, 0, 0)), "hybrid-rrf")
    with pytest.raises(UserError, match="8.8"):
        require(cluster("trial", (8, 7, 1)), "hybrid")


def meta(dimension: int | None = 3, similarity: str = "cosine") -> IndexMeta:
    return IndexMeta(model="m", model_type="gru", dimension=dimension, neural_similarity=similarity,
                     fusion={"bm25": dict(BETA)}, text={})


def open_mode(mode: str, index_meta: IndexMeta, **options: Any) -> Any:
    stage = ElasticsearchFirstStage(None, "idx", "bm25", lambda q: q.title.split())
    return make_mode(mode, stage, index_meta, window=options.pop("window", 100),
                     sidecar=SidecarTarget("http://s:1", None, 1.0),
                     cluster=options.pop("cluster", cluster()), **options)


def test_make_mode_builds_and_refuses_with_one_line():
    assert isinstance(open_mode("hybrid", meta()), hybrid.HybridMode)
    rrf = open_mode("hybrid-rrf", meta(), cluster=cluster("basic"))
    assert isinstance(rrf, hybrid.HybridRrfMode) and not rrf.in_elasticsearch
    assert open_mode("hybrid-rrf", meta(), knn="hnsw").in_elasticsearch
    assert open_mode("hybrid", meta(similarity="manhattan")).knn == "exact"
    with pytest.raises(UserError, match="holds none"):
        open_mode("hybrid", meta(dimension=None))
    with pytest.raises(UserError, match="--knn hnsw cannot search index idx: m compares vectors by manhattan "
                                        "distance.*use --knn exact"):
        open_mode("hybrid", meta(similarity="manhattan"), knn="hnsw")
    in_place = replace(meta(), source={"index": "theirs", "in_place": True, "hnsw": False})
    with pytest.raises(UserError, match="in place to theirs, which is not a k-NN index.*use --knn exact"):
        open_mode("hybrid-rrf", in_place, knn="hnsw")
    assert open_mode("hybrid-rrf", in_place).knn == "exact"
    with pytest.raises(UserError, match="at most 10000"):
        open_mode("hybrid-rrf", meta(), knn="hnsw", window=20_000)
    with pytest.raises(UserError, match="unknown --knn"):
        open_mode("hybrid", meta(), knn="ivf")


# --- Elasticsearch's arithmetic on the bodies -------------------------------------------------------


def lucene_feature(value: float) -> float:
    """A ``rank_features`` value as Lucene reads it back: 9 significant bits, truncated."""
    bits = np.array([value], dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF8000)
    return float(bits.view(np.float32)[0])


def f32(x: float) -> float:
    return float(np.float32(x))




def painless(source: str) -> Any:
    """The Painless expressions of these bodies, compiled as Python (``cond ? a : b`` included)."""
    return compile(painless_as_python(source), "<painless>", "eval")


class FakeElasticsearch:
    """One single-shard index, evaluated as Elasticsearch evaluates these bodies (see the module doc).

    Documents are in indexing order (Lucene's doc ids: ties go to the smaller). The first stage's
    score of a ``match`` comes from ``first_stage(question, ids)`` for the query whose tokens the
    match carries (registered with :meth:`expect`).
    """

    def __init__(self, ids: Sequence[str], tokens: Mapping[str, set[str]], vectors: Mapping[str, np.ndarray],
                 bow: Mapping[str, Mapping[str, float]],
                 first_stage: Callable[[Question, list[str]], np.ndarray],
                 similarity_field: str) -> None:
        self.ids = list(ids)
        self.position = {doc: i for i, doc in enumerate(self.ids)}
        self.tokens, self.vectors, self.bow = tokens, vectors, bow
        self.first_stage = first_stage
        self.field = similarity_field
        self.queries: dict[str, Question] = {}
        self._first: dict[str, dict[str, float]] = {}
        self._code: dict[str, Any] = {}
        self.calls: list[str] = []
        self.preferences: set[str | None] = set()
        self.truncate = True  # Lucene's 9-bit rank_features; off: the exact arithmetic

    def expect(self, query: Question, tokens: Sequence[str]) -> None:
        self.queries[" ".join(tokens)] = query

    def run(self, q: Mapping[str, Any], doc: str) -> tuple[bool, float, dict[str, float]]:
        """(matches, score, {name: score of a named clause that matched}) of one document."""
        (kind, body), = q.items()
        if kind == "bool":
            names: dict[str, float] = {}
            for clause in body.get("filter", []):
                ok, _, n = self.run(clause, doc)
                if not ok:
                    return False, 0.0, {}
                names.update(n)
            for clause in body.get("must_not", []):
                if self.run(clause, doc)[0]:
                    return False, 0.0, {}
            score, any_should = 0.0, False
            for clause in body.get("should", []):
                ok, s, n = self.run(clause, doc)
                if ok:
                    any_should, score = True, score + s
                    names.update(n)
            if body.get("should") and not body.get("filter") and not any_should:
                return False, 0.0, {}  # only should clauses: one must match
            return True, score, names
        if kind == "match":
            (field, params), = body.items()
            assert field == self.field
            text = params["query"]
            if not set(text.split()) & self.tokens[doc]:
                return False, 0.0, {}
            score = f32(self._first_stage_scores(text)[doc])
            return True, score, ({params["_name"]: score} if "_name" in params else {})
        if kind == "ids":
            return doc in body["values"], 0.0, {}
        if kind == "exists":
            assert body["field"] == mappings.VECTOR_FIELD
            return doc in self.vectors, 0.0, {}
        if kind == "match_all":
            return True, 1.0, {}
        if kind == "rank_feature":
            key = body["field"].split(".", 1)[1]
            value = self.bow[doc].get(key)
            if value is None:
                return False, 0.0, {}
            return True, body["boost"] * (lucene_feature(value) if self.truncate else value), {}
        if kind == "script_score":
            ok, inner, names = self.run(body["query"], doc)
            if not ok:
                return False, 0.0, {}
            score = self.script(body["script"], doc, inner)
            return True, score, names
        raise AssertionError(f"the fake does not know {kind}")

    def _first_stage_scores(self, text: str) -> dict[str, float]:
        if text not in self._first:
            scores = self.first_stage(self.queries[text], self.ids)
            self._first[text] = dict(zip(self.ids, map(float, scores), strict=True))
        return self._first[text]

    def script(self, script: Mapping[str, Any], doc: str, score: float) -> float:
        source, params = script["source"], script.get("params", {})
        code = self._code.setdefault(source, painless(source))
        vec = self.vectors.get(doc)
        cos = l1 = math.nan
        if vec is not None and "q" in params:
            q = np.asarray(params["q"], dtype=np.float32).astype(np.float64)
            cos = float(np.dot(q, vec) / (np.linalg.norm(q) * np.linalg.norm(vec)))
            l1 = float(np.abs(q - vec).sum())
        value = eval(code, {"exp": math.exp}, {"params": params, "_score": score, "NOVEC": vec is None,  # noqa: S307
                                                 "COS": cos, "L1": l1})
        if not value >= 0:  # NaN or negative: script_score refuses it
            raise AssertionError(f"script_score refuses {value} for {doc}")
        return f32(value)

    def top(self, query: Mapping[str, Any], size: int) -> list[dict[str, Any]]:
        found = []
        for doc in self.ids:
            ok, score, names = self.run(query, doc)
            if ok:
                found.append({"_id": doc, "_score": f32(score), "_names": names})
        found.sort(key=lambda h: (-h["_score"], self.position[h["_id"]]))
        return found[:size]

    def knn(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Top ``k`` by Elasticsearch's cosine knn score (1 + cos)/2: an HNSW with perfect recall."""
        assert body["field"] == mappings.VECTOR_FIELD and body["k"] <= body["num_candidates"]
        q = np.asarray(body["query_vector"], dtype=np.float64)
        assert np.linalg.norm(q) > 0, "knn refuses a zero query vector under cosine"
        out = []
        for doc in self.ids:
            vec = self.vectors.get(doc)
            if vec is None or ("filter" in body and not self.run(body["filter"], doc)[0]):
                continue
            cos = np.dot(q, vec) / (np.linalg.norm(q) * np.linalg.norm(vec))
            out.append({"_id": doc, "_score": f32((1 + cos) / 2), "_names": {}})
        out.sort(key=lambda h: (-h["_score"], self.position[h["_id"]]))
        return out[: body["k"]]

    def retrieve(self, container: Mapping[str, Any], size: int) -> list[dict[str, Any]]:
        (kind, body), = container.items()
        if kind == "standard":
            return self.top(body["query"], size)
        if kind == "knn":
            return self.knn(body)[:size]
        assert kind == "rrf"
        window, constant = body["rank_window_size"], body["rank_constant"]
        scores: dict[str, np.float32] = {}
        for child in body["retrievers"]:
            for rank, hit in enumerate(self.retrieve(child, window), start=1):
                share = np.float32(1.0) / np.float32(constant + rank)  # RRFRetrieverBuilder: float
                scores[hit["_id"]] = scores.get(hit["_id"], np.float32(0)) + share
        ranked = sorted(scores, key=lambda doc: (-scores[doc], self.position[doc]))[:window]
        return [{"_id": doc, "_score": float(scores[doc]), "_names": {}} for doc in ranked[:size]]

    def execute(self, body: Mapping[str, Any], named_scores: bool = False) -> dict[str, Any]:
        assert set(body) <= set(SPEC["SearchRequest.body"]["fields"]) | {"source"}
        size = body.get("size", 10)
        if "retriever" in body:
            hits = self.retrieve(body["retriever"], size)
        elif "knn" in body:
            hits = self.knn(body["knn"])[:size]
        else:
            hits = self.top(body["query"], max(size, body.get("rescore", {}).get("window_size", 0)))
            if "rescore" in body:
                rescore = body["rescore"]
                spec = rescore["query"]
                assert spec.get("score_mode", "total") == "total"
                head, tail = hits[: rescore["window_size"]], hits[rescore["window_size"]:]
                for hit in head:
                    ok, extra, _ = self.run(spec["rescore_query"], hit["_id"])
                    hit["_score"] = f32(spec.get("query_weight", 1.0) * hit["_score"]
                                        + (spec.get("rescore_query_weight", 1.0) * extra if ok else 0.0))
                head.sort(key=lambda h: (-h["_score"], self.position[h["_id"]]))
                hits = head + tail
            hits = hits[:size]
        out = []
        for hit in hits:
            names = hit.pop("_names")
            if named_scores and names:
                hit["matched_queries"] = names
            elif names:
                hit["matched_queries"] = list(names)
            out.append(hit)
        return {"hits": {"hits": out}}

    # the two client methods the modes call
    def search(self, *, index: str, include_named_queries_score: bool = False, preference: str | None = None,
               search_type: str | None = None, **body: Any) -> dict[str, Any]:
        # search_type (dfs_query_then_fetch): one shard has global statistics already
        self.calls.append("search")
        self.preferences.add(preference)
        body = {("_source" if k == "source" else k): v for k, v in body.items()}
        return self.execute(body, include_named_queries_score)

    def msearch(self, *, index: str, searches: Sequence[Mapping[str, Any]],
                search_type: str | None = None) -> dict[str, Any]:
        self.calls.append("msearch")
        responses = []
        for header, body in zip(searches[0::2], searches[1::2], strict=True):
            conforms(header, "MultisearchHeader")
            self.preferences.add(header.get("preference"))
            responses.append(self.execute(body))
        return {"responses": responses}


class AppEmbedder:
    """``SidecarClient.embed`` answered by the sidecar app in process (the same request body)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def embed(self, questions: Sequence[Question]) -> list[dict[str, Any]]:
        resp = self.client.post("/v1/encode", json={"texts": [rerank_text(q) for q in questions]})
        if resp.status_code != 200:  # as SidecarClient raises it
            raise EmbedError(f"sidecar answered {resp.status_code}: {resp.json}", resp.status_code)
        return resp.json["embeddings"]


def semeval_data() -> tuple[list[Question], list[tuple[Question, set[str]]]]:
    data = read_spec(f"semeval:{SEMEVAL_DEV}").queries
    collection = unique_questions([q.candidates for q in data])
    return collection, [(q.query, set()) for q in data]


def askubuntu_data(tmp: Path) -> tuple[list[Question], list[tuple[Question, set[str]]]]:
    """Lines 3,001–4,200 of the real AskUbuntu title pairs; 25 duplicate queries, themselves excluded."""
    path = tmp / "titles.tsv"
    path.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[3000:4200]),
                    encoding="utf-8")
    dataset = read_spec(f"pairs:{path}")
    found, _ = duplicate_queries(dataset.pairs)
    return list(dataset.questions.values()), [(q.query, {q.query.id}) for q in found[:25]]


@pytest.fixture(scope="module", params=[("gru", "bm25", "semeval"), ("gru", "bm25", "askubuntu"),
                                        ("bow-cnn", "lmdirichlet", "askubuntu")],
                ids=lambda p: "-".join(p))
def world(request, exported, tmp_path_factory):
    """A collection indexed in the fake (vectors and BOW from /v1/encode), the in-process rankers, and
    a mode factory over the fake."""
    model_type, similarity, data = request.param
    collection, searches = (semeval_data() if data == "semeval"
                            else askubuntu_data(tmp_path_factory.mktemp("titles")))
    path = exported[model_type]
    app = create_app(ModelDirectory.load(path, threads=1))
    service = app.extensions["esrerank"]
    embedder = AppEmbedder(app.test_client())
    tokens = TokenCache(Preprocessor())
    context = RankerContext(collection=collection, tokens=tokens, model_dir=path,
                            fused_first_stage=similarity,
                            params={"hybrid": {"window": WINDOW}, "hybrid-rrf": {"window": WINDOW}})
    stage = context.first_stage(similarity)
    by_id = {q.id: q for q in collection}
    vectors, bow = {}, {}
    for start in range(0, len(collection), 256):
        batch = collection[start:start + 256]
        for q, emb in zip(batch, embedder.embed(batch), strict=True):
            source = mappings.document(q, tokens(q), emb, service.model.similarity)
            if mappings.VECTOR_FIELD in source:
                vectors[q.id] = np.asarray(source[mappings.VECTOR_FIELD], dtype=np.float32).astype(np.float64)
            bow[q.id] = source.get(mappings.BOW_FIELD, {})
    fake = FakeElasticsearch([q.id for q in collection], {q.id: set(tokens(q)) for q in collection}, vectors,
                             bow, lambda query, ids: stage.score(query, ids), mappings.FIELDS[similarity])

    def mode(name: str, **options: Any) -> Any:
        es_stage = ElasticsearchFirstStage(fake, "idx", similarity, tokens, dict(by_id))
        beta = service.model.fusion[similarity]
        cls = hybrid.HybridMode if name == "hybrid" else hybrid.HybridRrfMode
        return cls(es_stage, beta, WINDOW, embedder, service.model.similarity, **options)

    rankers = {name: build(name, context) for name in ("hybrid", "hybrid-rrf", "fused")}
    beta = service.model.fusion[similarity]
    shift = beta["neural"] + queries.rest_shift(beta, service.model.similarity)
    return fake, mode, rankers, searches, tokens, shift, beta


def same_order_up_to_ties(got: list[tuple[str, float]], want: list[tuple[str, float]], tol: float) -> int:
    """Each position of ``got`` holds ``want``'s document, or one whose in-process score ties with it
    within ``tol`` (``want`` may run longer than ``got``: the scores of the documents just below);
    returns how many positions differ (ties)."""
    assert len(got) <= len(want)
    wanted = dict(want)
    ties = 0
    for (g, _), (w, score) in zip(got, want[: len(got)], strict=True):
        if g != w:
            ties += 1
            assert g in wanted and abs(wanted[g] - score) <= tol, (g, w, wanted.get(g), score)
    return ties


@pytest.mark.parametrize(("knn", "truncate"), [("exact", False), ("hnsw", False), ("exact", True)])
def test_hybrid_gives_the_in_process_hybrid_order(world, knn, truncate):
    """Exact arithmetic: the same order up to float32 ties. With Lucene's rank_features truncation
    (each BOW term's stored value loses < 2^-8 of itself): up to ties within β_bow·2^-8."""
    fake, mode, rankers, searches, tokens, shift, beta = world
    fake.truncate = truncate
    tol = 1e-5 + (beta["bow"] * 2**-8 if truncate else 0.0)
    searcher = mode("hybrid", knn=knn)
    ties = gaps = from_vectors = 0
    calls = len(fake.calls)
    for query, exclude in searches:
        fake.expect(query, tokens(query))
        # k = WINDOW: the same union as k = 10 (the window is max(k, window)), every member's score
        want = rankers["hybrid"].search(query, WINDOW, set(exclude))
        result = searcher.search(query, 10, exclude=exclude)
        assert result.reranked and len(result.hits) == min(10, len(want))
        ties += same_order_up_to_ties(result.hits, want, tol)
        if "msearch" in result.request:  # union members the first stage's window lacks
            lines = result.request["msearch"]
            from_vectors += result.request["search"]["size"] - len(fake.execute(lines[1])["hits"]["hits"])
        # the score is fused plus one constant: β_nn·1 (the +1 that keeps script scores >= 0) and the
        # shift for a negative β; Lucene's 9-bit BOW truncation moves it by < 2^-8 of the BOW term
        gap = np.array([score - dict(want).get(doc, np.nan) for doc, score in result.hits])
        gap = gap[np.isfinite(gap)]
        assert float(gap.max() - gap.min()) <= 1e-5 + tol
        gaps += int(abs(float(np.median(gap)) - shift) > tol)
        if tokens(query) and knn == "exact":
            assert set(result.request) == {"msearch", "search"}
    assert gaps == 0 and ties <= len(searches)  # a few exact ties at most
    assert from_vectors >= 5 * len(searches)  # the vectors bring in candidates BM25's window lacks
    assert fake.calls[calls:] == ["msearch", "search"] * len(searches)
    assert searcher.preference in fake.preferences  # both calls of a query read the same shard copies


def test_hybrid_reranks_a_candidate_list_as_fused_does(world):
    """``only`` (es evaluate's rerank task): the union is the candidates, so the order is fused's."""
    fake, mode, rankers, searches, tokens, _, _ = world
    fake.truncate = False
    searcher = mode("hybrid")
    by_id = {doc: None for doc in fake.ids}
    for query, exclude in searches[:10]:
        fake.expect(query, tokens(query))
        candidates = rankers["hybrid"].search(query, 20, set(exclude))
        ids = [doc for doc, _ in candidates]
        assert all(doc in by_id for doc in ids)
        result = searcher.search(query, len(ids), only=ids)
        # fused over exactly these candidates: min-max over them, not over a window
        lookup = {q.id: q for q in rankers["fused"].context.collection}
        want_scores = rankers["fused"].rerank(RankingQuery(query, [lookup[d] for d in ids], [0] * len(ids)))
        want = sorted(zip(ids, want_scores, strict=True), key=lambda h: -h[1])
        same_order_up_to_ties(result.hits, [(d, float(s)) for d, s in want], 1e-5)


@pytest.mark.parametrize("where", ["retriever", "client"])
def test_hybrid_rrf_gives_the_in_process_hybrid_rrf_order(world, where):
    fake, mode, rankers, searches, tokens, _, _ = world
    if fake.field != "text":
        pytest.skip("the in-process hybrid-rrf fuses BM25")
    searcher = mode("hybrid-rrf", in_elasticsearch=where == "retriever")
    exact_ties = 0
    for query, exclude in searches:
        fake.expect(query, tokens(query))
        want = rankers["hybrid-rrf"].search(query, WINDOW, set(exclude))
        result = searcher.search(query, 10, exclude=exclude)
        # RRF scores take few values: Elasticsearch breaks ties by doc id (and sums in float32), the
        # product by first appearance; the client path repeats the product exactly.
        assert np.allclose([s for _, s in result.hits], [s for _, s in want[:10]], atol=1e-6)
        if where == "client":
            assert [d for d, _ in result.hits] == [d for d, _ in want[:10]]
            assert "msearch" in result.request
        else:
            exact_ties += same_order_up_to_ties(result.hits, want, 1e-6)
            assert "retriever" in result.request
    if where == "retriever":
        assert exact_ties > 0  # RRF ties are common: the reason "up to ties" is needed


def test_a_query_without_tokens_or_direction_skips_that_search(world):
    """No tokens (``??? !!!``): the sidecar refuses to embed a text its model reads as no word (issue 48)
    and no search is made at all (a zero vector neither: the fake refuses a zero ``knn`` vector and a NaN
    script score, as Elasticsearch does). Tokens no document has (``zzzqqq``): the vectors' window alone,
    fused."""
    fake, mode, rankers, _, tokens, _, _ = world
    fake.truncate = False
    for knn in ("exact", "hnsw"):
        searcher = mode("hybrid", knn=knn)
        for query in (Question("symbols", "??? !!! ...", ""), Question("unknown", "zzzqqq", "")):
            fake.expect(query, tokens(query))
            result = searcher.search(query, 10)
            if not tokens(query):
                with pytest.raises(EmbedError, match="400"):
                    searcher.embedder.embed([query])
                calls = len(fake.calls)
                assert searcher.search(query, 10).hits == [] and result.fallback_reason == "no match"
                assert len(fake.calls) == calls  # no search sent
                continue
            assert hybrid.has_direction(searcher.embedder.embed([query])[0]["vector"])
            assert result.hits
            parts = result.request["msearch"][1::2]
            assert len(parts) == (2 if tokens(query) else 1)
            want = rankers["hybrid"].search(query, WINDOW)
            same_order_up_to_ties(result.hits, want, 1e-5)
    rrf = mode("hybrid-rrf", in_elasticsearch=True)
    symbols = Question("symbols", "??? !!! ...", "")
    assert rrf.search(symbols, 10).hits == []  # no list at all: no rrf retriever
