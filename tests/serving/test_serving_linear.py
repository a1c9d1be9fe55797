"""``/v1/rerank?score=linear``: the score Elasticsearch's ``linear`` retriever adds to β_fs·minmax(BM25).

Elasticsearch never sends the first-stage scores, so the sidecar answers the linear rest of the fused
score, shifted to be ≥ 0. On real SemEval dev queries and the tiny exported models, β_fs·minmax(first
stage) + that score must order candidates exactly as ``ModelDirectory.rerank``'s ``fused`` and differ
from it by one constant (``Service.linear_shift``).
"""

from __future__ import annotations

import numpy as np
import pytest
from bodies import doc_json
from sidecar_apps import in_process_apps

from es_plugin_bridge.serving.jsonbody import connector_float
from es_plugin_bridge.serving.relevance import component_ranges, linear_shift
from es_plugin_bridge.training.fusion_fit import minmax


@pytest.fixture(scope="module")
def semeval(semeval_dev):
    return semeval_dev


@pytest.fixture(scope="module")
def apps(exported):
    return in_process_apps(exported)


@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
@pytest.mark.parametrize("stage", ["bm25", "lmdirichlet", None])
def test_linear_score_plus_minmaxed_first_stage_is_fused_plus_a_constant(model_type, stage, apps, semeval):
    client, service = apps[model_type]
    model = service.model
    weights = model.fusion[model.fusion_stage(stage)]
    shift = service.linear_shift(stage)
    url = "/v1/rerank?score=linear" + (f"&first_stage={stage}" if stage else "")
    for rq in semeval:
        resp = client.post(url, json={"query": doc_json(rq.query),
                                      "documents": [doc_json(c) for c in rq.candidates], "explain": True})
        assert resp.status_code == 200, resp.json
        results = resp.json["results"]
        assert sorted(r["index"] for r in results) == list(range(len(rq.candidates)))  # one per document
        got = np.zeros(len(rq.candidates))
        for r in results:
            got[r["index"]] = r["explain"]["linear"]
            # Written with 12 significant digits (issue 20: OpenSearch's json-smart); explain keeps all.
            assert r["relevance_score"] == connector_float(r["explain"]["linear"])
        assert (got >= 0).all()
        scores = [r["relevance_score"] for r in results]
        assert scores == sorted(scores, reverse=True)  # best first
        np.testing.assert_array_equal(got, service.linear_scores(rq.query, rq.candidates, stage))

        fused = model.rerank(rq.query, rq.candidates, rq.first_stage_scores, stage)["fused"]
        elastic = weights["first_stage"] * minmax(rq.first_stage_scores) + (got + 1)  # what ES computes
        assert list(np.argsort(-elastic, kind="stable")) == list(np.argsort(-fused, kind="stable"))
        np.testing.assert_allclose(elastic - fused, 1 - shift, atol=1e-12)  # one constant per query


def test_the_shift_is_the_lowest_linear_rest():
    cosine_idf = component_ranges("cosine", "idf")  # neural in [−1, 1], bow in [0, 1]
    assert linear_shift({"first_stage": 0.5, "bow": 0.2, "neural": 0.3}, cosine_idf) == pytest.approx(-0.3)
    learned = component_ranges("cosine", "learned")  # bow in [−1, 1] too
    assert linear_shift({"first_stage": 0.5, "bow": 0.2, "neural": 0.3}, learned) == pytest.approx(-0.5)
    manhattan = component_ranges("manhattan", "idf")
    assert linear_shift({"first_stage": 0.1, "bow": 0.4, "neural": 0.5}, manhattan) == 0.0


def test_linear_honours_top_n_and_return_documents(apps, semeval):
    client, service = apps["bow-cnn"]
    rq = semeval[3]
    body = {"query": rq.query.title, "documents": [c.title for c in rq.candidates], "top_n": 4,
            "return_documents": True}
    resp = client.post("/v1/rerank?score=linear&first_stage=lmdirichlet", json=body)
    results = resp.json["results"]
    expected = service.linear_scores(rq.query.title, [c.title for c in rq.candidates], "lmdirichlet")
    assert [r["index"] for r in results] == list(np.argsort(-expected, kind="stable")[:4])
    assert [r["document"]["text"] for r in results] == [rq.candidates[r["index"]].title for r in results]


BAD = [
    ("?score=linear", {"first_stage_scores": [1.0, 2.0]}, "first_stage_scores"),
    ("?score=linear&first_stage=dfr", {}, "first_stage"),
    ("?score=linear&first_stage=bm25", {"first_stage": "lmdirichlet"}, "first_stage"),
    ("?score=line", {}, "score"),
    ("?scores=linear", {}, "scores"),
    ("?score=linear&score=probability", {}, "score"),
]


@pytest.mark.parametrize(("query", "extra", "field"), BAD)
def test_bad_linear_requests_answer_400_naming_the_field(query, extra, field, apps):
    client, _ = apps["gru"]
    resp = client.post("/v1/rerank" + query, json={"query": "q", "documents": ["a", "b"], **extra})
    assert resp.status_code == 400 and resp.json["field"] == field, resp.json


def test_openapi_documents_the_query_parameters(apps):
    client, model = apps["gru"]
    op = client.get("/openapi.json").json["paths"]["/v1/rerank"]["post"]
    params = {p["name"]: p for p in op["parameters"]}
    assert params["score"]["in"] == "query" and params["score"]["schema"]["enum"] == ["probability", "linear"]
    # The served model's first stages: a name it has no β for is invalid in the document too.
    assert params["first_stage"]["schema"] == {"title": "First Stage", "type": "string", "minLength": 1,
                                               "enum": sorted(model.model.fusion)}
    assert "score=linear" in op["description"]
