"""The sidecar serving a cross-encoder (the ``pair`` family) on real SemEval questions: ``/v1/rerank``
and ``/v2/rerank`` answer the pair scores torch computes for the checkpoint (σ(logit) as ``neural``,
β fusion and calibration as for every type, Elasticsearch's ``linear`` score), candidates seen before
come from the cache (their bags of words and sub-word sides), and ``/v1/encode`` is refused naming why."""

from __future__ import annotations

import numpy as np
import pytest
from bodies import doc_json

from es_plugin_bridge.core.calibration import apply_platt
from es_plugin_bridge.core.fusion import fuse
from es_plugin_bridge.rankers.scorers import open_scorer
from es_plugin_bridge.serving import web
from es_plugin_bridge.serving.app import create_app


@pytest.fixture(scope="module")
def semeval(semeval_dev):
    return semeval_dev[:2]


@pytest.fixture(scope="module")
def client(pair_model):
    return create_app(pair_model[1], max_documents=50, onnx_threads=1).test_client()


def test_rerank_answers_torchs_pair_scores_fused_and_calibrated(pair_model, client, semeval):
    torch_scorer = open_scorer(pair_model[0])  # the checkpoint, scored by torch
    fusion = torch_scorer.fusion["bm25"]
    for rq in semeval:
        first_stage = [float(s) for s in rq.first_stage_scores]
        body = {"query": doc_json(rq.query), "documents": [doc_json(c) for c in rq.candidates],
                "first_stage": "bm25", "first_stage_scores": first_stage, "explain": True}
        resp = client.post("/v1/rerank", json=body)
        assert resp.status_code == 200, resp.json
        results = resp.json["results"]
        assert resp.json["model"].startswith("cross-encoder:")
        expected = torch_scorer.components(rq.query, rq.candidates)
        order = [r["index"] for r in results]
        assert sorted(order) == list(range(len(rq.candidates)))
        for name in ("neural", "bow", "model"):
            np.testing.assert_allclose([r["explain"][name] for r in results], expected[name][order],
                                       atol=1e-5, rtol=0)
        features = {"first_stage": np.asarray(first_stage), "bow": expected["bow"],
                    "neural": expected["neural"]}
        fused = fuse(features, fusion)[order]
        got_fused = np.array([r["explain"]["fused"] for r in results])
        np.testing.assert_allclose(got_fused, fused, atol=1e-5, rtol=0)
        assert list(got_fused) == sorted(got_fused, reverse=True)  # best first
        relevance = [r["relevance_score"] for r in results]
        assert all(0 <= p <= 1 for p in relevance) and relevance == sorted(relevance, reverse=True)
        platt = client.application.extensions[web.SERVICE].model.config.beta.calibration.get("bm25")
        if platt is not None:  # the Platt curve fit on dev at training time
            np.testing.assert_allclose(relevance, apply_platt(got_fused, platt), atol=1e-12)


def test_the_model_score_v2_and_linear_forms_rank_alike(client, semeval):
    rq = semeval[0]
    texts = [f"{c.title}<p>{c.body}</p>" for c in rq.candidates]  # a title, then its HTML body
    query = f"{rq.query.title}<p>{rq.query.body}</p>"
    v1 = client.post("/v1/rerank", json={"query": query, "documents": texts, "explain": True}).json
    v2 = client.post("/v2/rerank", json={"model": "any", "query": query, "documents": texts})
    assert v2.status_code == 200, v2.json
    assert [(r["index"], r["relevance_score"]) for r in v2.json["results"]] == \
        [(r["index"], r["relevance_score"]) for r in v1["results"]]
    scores = [r["explain"]["model"] for r in v1["results"]]
    assert all(0 < s < 1 for s in scores) and scores == sorted(scores, reverse=True)
    linear = client.post("/v1/rerank?score=linear", json={"query": query, "documents": texts}).json
    assert all(r["relevance_score"] >= 0 for r in linear["results"])
    fused_order = client.post("/v1/rerank", json={"query": query, "documents": texts, "first_stage": "bm25",
                                                  "first_stage_scores": [0.0] * len(texts)}).json
    assert [r["index"] for r in linear["results"]] == [r["index"] for r in fused_order["results"]]


def test_candidates_seen_before_come_from_the_cache_with_the_same_scores(client, semeval):
    rq = semeval[1]
    body = {"query": doc_json(rq.query), "documents": [doc_json(c) for c in rq.candidates], "explain": True}
    first = client.post("/v1/rerank", json=body).json["results"]
    again = client.post("/v1/rerank", json=body).json["results"]
    assert all(r["explain"]["cached"] for r in again)
    assert [(r["index"], r["explain"]["neural"]) for r in again] == \
        [(r["index"], r["explain"]["neural"]) for r in first]


def test_embed_is_refused_naming_why(client):
    resp = client.post("/v1/encode", json={"texts": ["How do I install java on ubuntu?"]})
    assert resp.status_code == 400
    message = resp.json["error"]
    assert "cross-encoder" in message and "no vector per text" in message and "/v1/rerank" in message
    assert client.get("/readyz").status_code == 200
