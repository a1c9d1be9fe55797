"""Every Elasticsearch request body the product sends, checked without a cluster.

- Shapes: retrievers, rescore, the custom inference endpoint, similarities and field mappings against
  the fields of the Elasticsearch specification's classes (``tests/tools/es_spec_shapes.json``, read
  from elastic/elasticsearch-specification by ``tests/tools/es_spec_shapes.py``); queries are built
  with the client's typed ``elasticsearch.dsl`` classes.
- References: every field a query names exists in the index mapping.
- One source of truth: the index's similarities carry the embedded engine's parameters; the files in
  ``mappings/elasticsearch`` are what the code writes.
Whether Elasticsearch accepts and scores them as intended is for ``tests/elastic/test_es_cluster.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from es_plugin_bridge.elastic import mappings, queries
from es_plugin_bridge.elastic.modes import native as native_mode
from es_plugin_bridge.elastic.modes import vectors as vectors_mode
from es_plugin_bridge.elastic.setup import RERANK_REQUEST, inference_endpoint
from es_plugin_bridge.elastic.write_mappings import bodies, render
from es_plugin_bridge.engines.similarities import SIMILARITIES, make_similarity

ROOT = Path(__file__).resolve().parents[2]
SPEC = json.loads((ROOT / "tests" / "tools" / "es_spec_shapes.json").read_text(encoding="utf-8"))["classes"]
TOKENS = ["how", "do", "i", "upgrade", "to", "12.04"]
BETA = {"first_stage": 0.35, "bow": 0.15, "neural": 0.5}


def conforms(body: dict[str, Any], cls: str) -> None:
    """``body``'s keys are fields of spec class ``cls`` and its required fields are present."""
    fields, required = set(SPEC[cls]["fields"]), set(SPEC[cls]["required"])
    assert set(body) <= fields, f"{cls}: unknown {sorted(set(body) - fields)}"
    assert required <= set(body), f"{cls}: missing {sorted(required - set(body))}"


def retriever(container: dict[str, Any]) -> None:
    """Walk a RetrieverContainer, checking each retriever kind this product uses."""
    conforms(container, "RetrieverContainer")
    assert len(container) == 1
    kind, body = next(iter(container.items()))
    if kind == "standard":
        conforms(body, "StandardRetriever")
    elif kind == "linear":
        conforms(body, "LinearRetriever")
        for inner in body["retrievers"]:
            conforms(inner, "InnerRetriever")
            assert inner["normalizer"] in ("none", "minmax") and inner["weight"] >= 0
            assert body["rank_window_size"] >= 1
            retriever(inner["retriever"])
    elif kind == "text_similarity_reranker":
        conforms(body, "TextSimilarityReranker")
        assert body["field"] == mappings.RERANK_FIELD
        retriever(body["retriever"])
    elif kind == "rescorer":
        conforms(body, "RescorerRetriever")
        rescore(body["rescore"])
        retriever(body["retriever"])
    else:
        raise AssertionError(f"unexpected retriever {kind}")


def rescore(body: dict[str, Any]) -> None:
    conforms(body, "Rescore")
    conforms(body["query"], "RescoreQuery")
    assert body["query"]["score_mode"] == "total" and body["window_size"] >= 1


def query_fields(body: Any) -> set[str]:
    """Every field a query body names (match keys, rank_feature/ids fields, script doc fields)."""
    found: set[str] = set()
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "match":
                found.update(value)
            elif key == "rank_feature":
                found.add(value["field"])
            elif key == "source" and isinstance(value, str):
                found.update(re.findall(r"'(\w+)'\)", value))
            found |= query_fields(value)
    elif isinstance(body, list):
        for item in body:
            found |= query_fields(item)
    return found


def mapped_fields(index: dict[str, Any]) -> set[str]:
    out = set()
    for name, prop in index["mappings"]["properties"].items():
        out.add(name)
        out.update(f"{name}.{sub}" for sub in prop.get("fields", {}))
    return out


def test_first_stage_query_is_a_bool_of_one_match_with_optional_id_filters():
    body = queries.first_stage_query("lmdirichlet", TOKENS, only=["a", "b"], exclude={"q"})
    assert body == {
        "bool": {
            "should": [{"match": {"text.lmdirichlet": {"query": "how do i upgrade to 12.04"}}}],
            "filter": [{"ids": {"values": ["a", "b"]}}],
            "must_not": [{"ids": {"values": ["q"]}}],
        }
    }
    # Without filters the match is required (bool with should only): no zero-score hits.
    assert queries.first_stage_query("bm25", TOKENS) == {
        "bool": {"should": [{"match": {"text": {"query": "how do i upgrade to 12.04"}}}]}
    }


def test_native_retriever_shape_and_window():
    body = native_mode.native_retriever(
        similarity="bm25",
        tokens=TOKENS,
        query_text="How do I upgrade?",
        inference_id="esrerank-x-bm25",
        beta_first_stage=0.35,
        window=50,
    )
    retriever(body)
    first, rerank = body["linear"]["retrievers"]
    assert (first["weight"], first["normalizer"]) == (0.35, "minmax")
    assert (rerank["weight"], rerank["normalizer"]) == (1.0, "none")
    reranker = rerank["retriever"]["text_similarity_reranker"]
    # children's window >= the parent's (ELASTICSEARCH.md): equal here, over the same first stage
    assert reranker["rank_window_size"] == body["linear"]["rank_window_size"] == 50
    assert reranker["retriever"]["standard"]["query"] == first["retriever"]["standard"]["query"]


def test_vectors_bodies_shape():
    rest = queries.rest_of_fused([0.1, 0.2, 0.3], {"12.04": 0.7, "upgrade": -0.3}, BETA, "cosine")
    one_call = vectors_mode.vectors_retriever(
        similarity="bm25", tokens=TOKENS, rest=rest, beta_first_stage=0.35, window=100
    )
    retriever(one_call)
    rescore(queries.rescore(rest, 100, 0.1))
    script = rest["script_score"]["script"]
    assert script["params"] == {"b_bow": 0.15, "b_nn": 0.5, "q": [0.1, 0.2, 0.3]}
    assert "cosineSimilarity(params.q, 'vector') + 1.0" in script["source"]  # >= 0, as ES requires
    clauses = rest["script_score"]["query"]["bool"]["should"]
    # rank_feature boosts are |w| (the sign cancels in w·w), keys percent-encode the dot
    assert {c["rank_feature"]["field"]: c["rank_feature"]["boost"] for c in clauses} == {
        "bow.12%2E04": 0.7,
        "bow.upgrade": 0.3,
    }
    manhattan = queries.rest_of_fused([0.1], {}, BETA, "manhattan")
    assert "Math.exp(-l1norm(params.q, 'vector'))" in manhattan["script_score"]["script"]["source"]


def test_basic_query_weight_makes_the_first_pass_a_minmax_up_to_a_constant():
    scores = [7.5, 3.0, 4.2, 3.0]
    w = vectors_mode.basic_query_weight(0.35, scores)
    low, high = min(scores), max(scores)
    for s in scores:
        assert w * s == pytest.approx(0.35 * (s - low) / (high - low) + w * low)
    assert vectors_mode.basic_query_weight(0.35, [2.0, 2.0]) == 0.0  # embedded min-max of a constant: zeros
    assert vectors_mode.basic_query_weight(0.35, []) == 0.0


def test_inference_endpoint_is_a_custom_rerank_service_without_top_n():
    body = inference_endpoint("http://reranker:8080/", "lmdirichlet", "s3cret")
    assert body["service"] == "custom"
    settings = body["service_settings"]
    conforms(settings, "CustomServiceSettings")
    assert settings["url"] == "http://reranker:8080/v1/rerank?score=linear&first_stage=lmdirichlet"
    assert settings["secret_parameters"] == {"api_key": "s3cret"}
    assert settings["headers"]["Authorization"] == "Bearer ${api_key}"
    assert "${top_n}" not in settings["request"] and "${return_documents}" not in settings["request"]
    # The template, filled as Elasticsearch fills it (${query} arrives JSON-quoted), is a rerank request.
    filled = RERANK_REQUEST.replace("${query}", json.dumps('say "hi"')).replace(
        "${input}", json.dumps(["a", "b"])
    )
    assert json.loads(filled) == {"query": 'say "hi"', "documents": ["a", "b"]}
    assert settings["response"]["json_parser"] == {
        "relevance_score": "$.results[*].relevance_score",
        "reranked_index": "$.results[*].index",
    }
    # a secret parameter is sent even without a token
    assert inference_endpoint("http://x:1", "bm25", None)["service_settings"]["secret_parameters"]["api_key"]


def test_index_body_shapes_and_similarities_follow_the_embedded_engine():
    body = mappings.index_body(dimension=64, params={"bm25": {"k1": 0.9}, "dfr": {"normalization": "h3"}})
    sims = body["settings"]["similarity"]
    classes = {
        "bm25": "SettingsSimilarityBm25",
        "lmdirichlet": "SettingsSimilarityLmd",
        "lmjelinekmercer": "SettingsSimilarityLmj",
        "dfr": "SettingsSimilarityDfr",
        "ib": "SettingsSimilarityIb",
        "tfidf": "SettingsSimilarityScripted",
    }
    for name in SIMILARITIES:
        setting = sims[mappings.similarity_name(name)]
        # normalization parameters (normalization.h2.c, ...) are Elasticsearch's, beyond the spec's class
        conforms({k: v for k, v in setting.items() if not k.startswith("normalization.")}, classes[name])
    assert sims["esrerank_bm25"] == {"type": "BM25", "k1": 0.9, "b": 0.75}
    assert sims["esrerank_lmdirichlet"] == {"type": "LMDirichlet", "mu": 2000.0}
    assert sims["esrerank_lmjelinekmercer"] == {"type": "LMJelinekMercer", "lambda": 0.1}
    assert sims["esrerank_dfr"] == {
        "type": "DFR",
        "basic_model": "g",
        "after_effect": "l",
        "normalization": "h3",
        "normalization.h3.c": 800.0,
    }
    assert sims["esrerank_ib"] == {
        "type": "IB",
        "distribution": "ll",
        "lambda": "df",
        "normalization": "h2",
        "normalization.h2.c": 1.0,
    }
    assert make_similarity("dfr", normalization="h3").params["normalization.h3.c"] == 800.0
    props = body["mappings"]["properties"]
    conforms(props["text"], "TextProperty")
    for sub in props["text"]["fields"].values():
        conforms(sub, "TextProperty")
    conforms(props["vector"], "DenseVectorProperty")
    conforms(props["vector"]["index_options"], "DenseVectorIndexOptions")
    conforms(props["bow"], "RankFeaturesProperty")
    assert props["vector"]["dims"] == 64
    assert body["settings"]["number_of_shards"] == 1  # a rescore window is then the global top
    analysis = body["settings"]["analysis"]
    tokenizer = analysis["tokenizer"][analysis["analyzer"][mappings.ANALYZER]["tokenizer"]]
    # whitespace only, and long tokens are not split (the default would split them at 255 characters)
    assert tokenizer == {"type": "whitespace", "max_token_length": 8191}
    assert 8191 * 4 <= 32766  # any 8,191-character token fits Lucene's term limit in UTF-8
    assert "vector" not in mappings.index_body()["mappings"]["properties"]
    with pytest.raises(Exception, match="no parameter|unknown"):
        mappings.index_body(params={"tfidf": {"k1": 1.0}})


def test_every_field_a_query_names_is_mapped():
    index = mappings.index_body(dimension=3)
    mapped = mapped_fields(index)
    rest = queries.rest_of_fused([0.1, 0.2, 0.3], {"a": 0.5}, BETA, "cosine")
    for name in SIMILARITIES:
        body = queries.first_stage_query(name, TOKENS)
        assert query_fields(body) <= mapped, name
    named = query_fields(rest)
    assert "vector" in named and {f for f in named if not f.startswith("bow.")} <= mapped
    assert all(
        f.split(".", 1)[0] == "bow" and index["mappings"]["properties"]["bow"]["type"] == "rank_features"
        for f in named
        if f.startswith("bow.")
    )
    native = native_mode.native_retriever(
        similarity="ib", tokens=TOKENS, query_text="q", inference_id="x", beta_first_stage=0.2, window=10
    )
    assert query_fields(native) <= mapped
    assert native["linear"]["retrievers"][1]["retriever"]["text_similarity_reranker"]["field"] in mapped


def test_mapping_files_are_what_the_code_writes():
    folder = ROOT / "mappings" / "elasticsearch"
    expected = bodies()
    assert sorted(p.name for p in folder.glob("*.json")) == sorted(expected)
    for name, body in expected.items():
        assert (folder / name).read_text(encoding="utf-8") == render(body), (
            f"{name} is stale: run python -m es_plugin_bridge.elastic.write_mappings"
        )
        if name.startswith("search-"):
            if "retriever" in body:
                retriever(body["retriever"])
            if "rescore" in body:
                rescore(body["rescore"])
