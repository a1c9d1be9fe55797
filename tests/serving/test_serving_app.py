"""The sidecar (``create_app`` and ``esrerank serve``) on tiny real exported models and real questions.

Scores must be the model directory's own (so the ranking equals the evaluator's ``model``/``fused``
rankers), bounded to [0, 1] without reordering; bad input must answer 4xx naming the field.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from bodies import doc_json

from es_plugin_bridge.core.manifest import write_manifest
from es_plugin_bridge.local_http import free_port
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.relevance import combination_range, component_ranges, to_unit
from es_plugin_bridge.training.calibration_fit import apply_platt

TOKEN = "t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def semeval(semeval_dev):
    return semeval_dev[:10]


@pytest.fixture(scope="module")
def models(exported) -> dict[str, ModelDirectory]:
    return {name: ModelDirectory.load(path, threads=1) for name, path in exported.items()}


@pytest.fixture(scope="module")
def clients(models):
    return {name: create_app(model, token=TOKEN, max_documents=50).test_client()
            for name, model in models.items()}


@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_rerank_ranks_as_the_fused_scores_with_bounded_relevance(model_type, clients, models, semeval):
    client, model = clients[model_type], models[model_type]
    for rq in semeval:
        body = {"query": doc_json(rq.query), "documents": [doc_json(c) for c in rq.candidates],
                "first_stage_scores": list(rq.first_stage_scores), "explain": True}
        resp = client.post("/v1/rerank", json=body, headers=AUTH)
        assert resp.status_code == 200, resp.json
        results = resp.json["results"]
        expected = model.rerank(rq.query, rq.candidates, rq.first_stage_scores)
        fused = expected["fused"]
        assert sorted(r["index"] for r in results) == list(range(len(rq.candidates)))
        got_fused = np.array([r["explain"]["fused"] for r in results])
        np.testing.assert_allclose(got_fused, fused[[r["index"] for r in results]], atol=1e-12)
        assert list(got_fused) == sorted(got_fused, reverse=True)  # best first, by the fused score
        relevance = [r["relevance_score"] for r in results]
        assert all(0.0 <= s <= 1.0 for s in relevance) and relevance == sorted(relevance, reverse=True)
        platt = model.config.beta.calibration[model.fusion_stage()]  # fit on dev at training time
        np.testing.assert_allclose(relevance, apply_platt(got_fused, platt), atol=1e-12)
        for r in results:
            i = r["index"]
            for name in ("neural", "bow", "model"):
                assert r["explain"][name] == pytest.approx(expected[name][i], abs=1e-12)
            assert r["explain"]["first_stage"] == rq.first_stage_scores[i]


def test_rerank_without_first_stage_uses_the_model_score(clients, models, semeval):
    rq = semeval[0]
    docs = [c.title + c.body for c in rq.candidates]  # plain strings: title then HTML body
    resp = clients["bow-cnn"].post("/v1/rerank", json={"query": rq.query.title, "documents": docs,
                                                       "top_n": 3, "return_documents": True},
                                   headers=AUTH)
    results = resp.json["results"]
    assert len(results) == 3 and resp.json["model"].startswith("bow-cnn:")
    model = models["bow-cnn"]
    from es_plugin_bridge.serving.schemas import to_question

    expected = model.rerank(to_question(rq.query.title), [to_question(d) for d in docs])["model"]
    assert [r["index"] for r in results] == list(np.argsort(-expected, kind="stable")[:3])
    assert [r["document"] for r in results] == [{"text": docs[r["index"]]} for r in results]
    assert "explain" not in results[0]


def test_a_model_without_calibration_falls_back_to_its_score_bounds(exported, semeval, tmp_path):
    directory = tmp_path / "uncalibrated"
    shutil.copytree(exported["bow-cnn"], directory)
    config = json.loads((directory / "config.json").read_text())
    assert config["beta"]["calibration"]  # the exporter carried the training-time fit
    config["beta"]["calibration"] = {}
    (directory / "config.json").write_text(json.dumps(config))
    write_manifest(directory)
    model = ModelDirectory.load(directory, threads=1)
    client = create_app(model).test_client()
    rq = semeval[2]
    body = {"query": doc_json(rq.query), "documents": [doc_json(c) for c in rq.candidates]}
    resp = client.post("/v1/rerank", json=body)
    scores = model.rerank(rq.query, rq.candidates)["model"]
    beta = model.config.beta.model
    bounds = combination_range({"bow": beta[0], "neural": beta[1]}, component_ranges("cosine", "learned"))
    got = {r["index"]: r["relevance_score"] for r in resp.json["results"]}
    np.testing.assert_allclose([got[i] for i in range(len(scores))], to_unit(scores, bounds), atol=1e-12)
    assert client.get("/readyz").json["calibrated"] == []


def test_relevance_mapping_keeps_order_and_bounds():
    ranges = component_ranges("cosine", "learned")
    low, high = combination_range({"bow": -0.5, "neural": 2.0}, ranges)
    assert (low, high) == (-2.5, 2.5)
    rng = np.random.default_rng(0)
    bow, neural = rng.uniform(-1, 1, 500), rng.uniform(-1, 1, 500)
    raw = -0.5 * bow + 2.0 * neural
    unit = to_unit(raw, (low, high))
    assert unit.min() >= 0 and unit.max() <= 1
    assert (np.argsort(unit, kind="stable") == np.argsort(raw, kind="stable")).all()
    assert component_ranges("manhattan", "idf")["neural"] == (0.0, 1.0)


def test_embed_returns_the_model_vectors_and_terms(clients, models, semeval):
    questions = [semeval[0].query, *semeval[0].candidates[:3]]
    resp = clients["gru"].post("/v1/encode", json={"texts": [doc_json(q) for q in questions]}, headers=AUTH)
    assert resp.status_code == 200
    model = models["gru"]
    got = resp.json["embeddings"]
    assert resp.json["dimension"] == model.dimension == len(got[0]["vector"])
    np.testing.assert_allclose([e["vector"] for e in got], model.vectors(questions), atol=1e-6)
    ids, weights = model.bag_of_words(questions[0])
    assert got[0]["terms"] == pytest.approx(dict(zip(model.terms(ids), weights, strict=True)))


BAD = [
    ({"documents": ["a"]}, "query"),
    ({"query": "q"}, "documents"),
    ({"query": "q", "documents": []}, "documents"),
    ({"query": " ", "documents": ["a"]}, "query"),
    # A blank title is no longer a 400 but the lowest score (issue 14,
    # tests/serving/test_serving_unscored.py); an object without one is still a malformed document.
    ({"query": "q", "documents": ["a", {"body": "<p>b</p>"}]}, "documents.1.title"),
    ({"query": "q", "documents": ["a", {"title": "t", "tags": []}]}, "documents.1.tags"),
    ({"query": "q", "documents": ["a", 7]}, "documents.1"),
    ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
    ({"query": "q", "documents": ["a"], "top_n": "3"}, "top_n"),
    ({"query": "q", "documents": ["a"], "explain": "yes"}, "explain"),
    ({"query": "q", "documents": ["a"], "first_stage_scores": [True]}, "first_stage_scores.0"),
    ({"query": "q", "documents": ["a"], "first_stage_scores": ["1.5"]}, "first_stage_scores.0"),
    ({"query": "q", "documents": ["a"], "topn": 3}, "topn"),
    ({"query": "q", "documents": ["a"], "first_stage_scores": [1.0, 2.0]}, "first_stage_scores"),
    ({"query": "q", "documents": ["a"], "first_stage_scores": ["x"]}, "first_stage_scores.0"),
    ({"query": "q", "documents": ["a"], "first_stage_scores": [1], "first_stage": "dfr"}, "first_stage"),
    ({"query": "q", "documents": ["a"], "first_stage": "bm25"}, "first_stage"),
]


@pytest.mark.parametrize(("body", "field"), BAD)
def test_bad_rerank_requests_answer_400_naming_the_field(body, field, clients):
    resp = clients["bow-cnn"].post("/v1/rerank", json=body, headers=AUTH)
    assert resp.status_code == 400 and resp.json["field"] == field, resp.json
    assert resp.json["error"].startswith(field)


def test_more_documents_than_max_documents_is_413_as_the_readme_says(clients):
    """413 like a body over --max-body-mb: the request is too large for this server (split it), not
    malformed; ``field`` still names what to shrink."""
    client = clients["bow-cnn"]
    for path, body in (("/v1/rerank", {"query": "q", "documents": ["d"] * 51}),
                       ("/v2/rerank", {"query": "q", "documents": ["d"] * 51}),
                       ("/v1/encode", {"texts": ["d"] * 51})):
        resp = client.post(path, json=body, headers=AUTH)
        field = "texts" if path == "/v1/encode" else "documents"
        assert resp.status_code == 413 and resp.json["field"] == field, (path, resp.json)
        assert "at most 50" in resp.json["error"]
    assert client.post("/v1/rerank", json={"query": "q", "documents": ["d"] * 50},
                       headers=AUTH).status_code == 200


def test_transport_errors_are_json(clients):
    client = clients["bow-cnn"]
    broken = client.post("/v1/rerank", data="{", headers=AUTH, content_type="application/json")
    assert broken.status_code == 400 and "not valid JSON" in broken.json["error"]
    resp = client.post("/v1/rerank", data="query=x", headers=AUTH)
    assert resp.status_code == 415 and "JSON" in resp.json["error"]
    assert client.post("/v1/rerank", json=[1], headers=AUTH).json["field"] == "(body)"
    assert client.post("/v1/encode", json={"texts": []}, headers=AUTH).json["field"] == "texts"
    assert client.get("/v1/rerank", headers=AUTH).status_code == 405
    missing = client.get("/nowhere", headers=AUTH)
    assert missing.status_code == 404 and "error" in missing.json
    big = client.post("/v1/rerank", data=b"x" * (33 * 1024 * 1024), headers=AUTH,
                      content_type="application/json")
    assert big.status_code == 413 and "error" in big.json


def test_bearer_token_guards_all_but_health(clients):
    client = clients["gru"]
    body = {"query": "q", "documents": ["a"]}
    assert client.post("/v1/rerank", json=body).status_code == 401
    wrong = client.post("/v1/rerank", json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["WWW-Authenticate"] == "Bearer"
    assert client.get("/metrics").status_code == 401
    assert client.get("/healthz").json == {"status": "ok"}
    ready = client.get("/readyz").json
    assert ready["status"] == "ready" and ready["model_type"] == "gru"


def test_metrics_count_requests_and_documents(exported):
    client = create_app(exported["bow-cnn"]).test_client()  # no token
    client.post("/v1/rerank", json={"query": "q", "documents": ["a", "b", "c"]})
    client.post("/v1/rerank", json={"query": "q"})
    text = client.get("/metrics").get_data(as_text=True)
    assert 'esrerank_requests_total{endpoint="/v1/rerank",status="200"} 1.0' in text
    assert 'esrerank_requests_total{endpoint="/v1/rerank",status="400"} 1.0' in text
    assert 'esrerank_documents_scored_total{endpoint="/v1/rerank"} 3.0' in text


def test_openapi_references_resolve(clients):
    doc = clients["bow-cnn"].get("/openapi.json", headers=AUTH).json
    assert {"/v1/rerank", "/v2/rerank", "/v1/encode", "/v1/embed", "/v2/embed", "/healthz", "/readyz",
            "/metrics"} <= set(doc["paths"])
    refs = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            refs.update(v for k, v in node.items() if k == "$ref")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    schemas = doc["components"]["schemas"]
    assert refs and all(ref.rsplit("/", 1)[1] in schemas for ref in refs)
    assert "top_n" in schemas["RerankRequest"]["properties"]


def _post(url: str, body: dict, token: str) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_esrerank_serve_answers_over_http(exported, models, semeval):
    port = free_port()
    exe = Path(sys.executable).with_name("esrerank")
    env = {**os.environ, "ESRERANK_TOKEN": "from-env"}
    proc = subprocess.Popen([str(exe), "serve", str(exported["bow-cnn"]), "--port", str(port),
                             "--onnx-threads", "1"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("esrerank serve did not come up")
        rq = semeval[1]
        body = {"query": doc_json(rq.query), "documents": [doc_json(c) for c in rq.candidates],
                "first_stage_scores": list(rq.first_stage_scores)}
        status, got = _post(base + "/v1/rerank", body, "from-env")
        assert status == 200
        fused = models["bow-cnn"].rerank(rq.query, rq.candidates, rq.first_stage_scores)["fused"]
        assert [r["index"] for r in got["results"]] == list(np.argsort(-fused, kind="stable"))
        assert _post(base + "/v1/rerank", body, "wrong")[0] == 401
        status, err = _post(base + "/v1/rerank", {"query": "q", "documents": "a"}, "from-env")
        assert status == 400 and err["field"] == "documents"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "serving bow-cnn:" in proc.stderr.read()


def test_serve_refuses_a_bad_model_dir_in_one_line(tmp_path, cli):
    code, _, err = cli(["serve", str(tmp_path)])
    assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1
