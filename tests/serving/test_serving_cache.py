"""The encoding cache and concurrency of the sidecar, on the tiny real exported models and real questions:
scores with and without the cache are identical, a candidate seen before costs no encoder call, hits and
misses reach /metrics and ``explain``, the LRU stays bounded, and concurrent requests answer exactly as
the same requests sent alone."""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from bodies import doc_json

from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.cache import EncodingCache, encoding_key


@pytest.fixture(scope="module")
def semeval(semeval_dev):
    return semeval_dev


@pytest.fixture(scope="module")
def models(exported):
    return {name: ModelDirectory.load(path, threads=1) for name, path in exported.items()}


def _body(rq, explain: bool = True) -> dict:
    return {"query": doc_json(rq.query), "documents": [doc_json(c) for c in rq.candidates],
            "first_stage_scores": list(rq.first_stage_scores), "explain": explain}


class _CountingSession:
    """The model's onnxruntime session, counting the rows it is asked to encode."""

    def __init__(self, session) -> None:
        self.session, self.calls, self.rows = session, 0, 0

    def run(self, outputs, feed):
        self.calls += 1
        self.rows += len(next(iter(feed.values())))
        return self.session.run(outputs, feed)

    def __getattr__(self, name):
        return getattr(self.session, name)


@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_scores_with_and_without_the_cache_are_identical(model_type, exported, semeval):
    cached = create_app(ModelDirectory.load(exported[model_type], threads=1)).test_client()
    uncached = create_app(ModelDirectory.load(exported[model_type], threads=1), cache_size=0).test_client()
    for rq in semeval[:20] + semeval[:20]:  # the second pass is served from the cache
        got = cached.post("/v1/rerank", json=_body(rq)).json
        want = uncached.post("/v1/rerank", json=_body(rq)).json
        for a, b in zip(got["results"], want["results"], strict=True):
            assert a["index"] == b["index"] and a["relevance_score"] == b["relevance_score"]
            assert {k: v for k, v in a["explain"].items() if k != "cached"} == {
                k: v for k, v in b["explain"].items() if k != "cached"}
        assert not any(r["explain"]["cached"] for r in want["results"])
    embed = {"texts": [doc_json(c) for c in semeval[0].candidates]}
    assert cached.post("/v1/encode", json=embed).json == uncached.post("/v1/encode", json=embed).json


def test_a_candidate_seen_before_costs_no_encoder_call(exported, semeval):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, batch_size=128)
    counting = model.session = _CountingSession(model.session)
    client = create_app(model).test_client()
    rq = semeval[5]
    first = client.post("/v1/rerank", json=_body(rq)).json["results"]
    assert counting.calls == 1 and counting.rows == 1 + len(rq.candidates)  # one batched call
    assert not any(r["explain"]["cached"] for r in first)
    second = client.post("/v1/rerank", json=_body(rq)).json["results"]
    assert counting.calls == 1  # the query and every candidate came from the cache
    assert all(r["explain"]["cached"] for r in second) and first == [
        {**r, "explain": {**r["explain"], "cached": False}} for r in second]
    mixed = {"query": doc_json(rq.query), "documents": [doc_json(rq.candidates[0]), "a question never seen"],
             "explain": True}
    results = client.post("/v1/rerank", json=mixed).json["results"]
    assert counting.calls == 2 and counting.rows == 1 + len(rq.candidates) + 1  # only the new one
    assert {r["index"]: r["explain"]["cached"] for r in results} == {0: True, 1: False}
    metrics = client.get("/metrics").get_data(as_text=True)
    n = len(rq.candidates)
    assert f"esrerank_encoding_cache_hits_total {float(n + 1 + 2)}" in metrics
    assert f"esrerank_encoding_cache_misses_total {float(n + 1 + 1)}" in metrics
    assert f"esrerank_encoding_cache_entries {float(n + 2)}" in metrics


def test_the_key_is_the_model_and_the_preprocessed_text(exported, models):
    client = create_app(models["gru"]).test_client()
    # Same tokens after preprocessing (case, markup): one entry, the second is a hit.
    client.post("/v1/rerank", json={"query": "q", "documents": ["How do I install Ubuntu?"]})
    resp = client.post("/v1/rerank", json={"query": "q", "documents": ["how do i INSTALL ubuntu ?"],
                                           "explain": True})
    assert resp.json["results"][0]["explain"]["cached"] is True
    ids = models["gru"].token_ids(_question("How do I install Ubuntu?"))
    assert encoding_key(b"model-a", ids) != encoding_key(b"model-b", ids)
    assert encoding_key(b"m", ([1, 2], [3])) != encoding_key(b"m", ([1], [2, 3]))  # parts are delimited


def _question(text):
    from es_plugin_bridge.data.questions import question_from_text

    return question_from_text(text)


def test_the_lru_is_bounded_and_evicts_the_least_recently_used():
    cache = EncodingCache(2)
    entry = (np.ones(3, dtype=np.float32), (np.array([1]), np.array([1.0])))
    cache.put_many([("a", entry), ("b", entry)])
    cache.get_many(["a"])  # a is now the most recent
    cache.put_many([("c", entry)])
    assert [e is not None for e in cache.get_many(["a", "b", "c"])] == [True, False, True]
    assert len(cache) == 2
    cache.put_many([], [("raw-c", "c"), ("raw-b", "b")])  # a raw text's alias leads to its encoding...
    assert cache.get_raw(["raw-c"])[0] == ("c", cache.get_many(["c"])[0])
    assert cache.get_raw(["raw-b", "raw-x"]) == [None, None]  # ...only while that encoding is kept
    stored = cache.get_many(["a"])[0]
    with pytest.raises(ValueError):
        stored[0][0] = 5.0  # read-only: no caller can change what another reads
    disabled = EncodingCache(0)
    disabled.put_many([("a", entry)])
    assert disabled.get_many(["a"]) == [None] and len(disabled) == 0


@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_concurrent_requests_answer_as_the_same_requests_sent_alone(model_type, exported, semeval):
    """16 threads on one app (one session, one cache, small enough to evict) against a fresh app each."""
    rng = random.Random(3)
    bodies = []
    for i in range(200):
        rq = semeval[rng.randrange(len(semeval))]
        docs = rng.sample(rq.candidates, rng.randint(3, len(rq.candidates)))
        body = {"query": doc_json(rq.query), "documents": [doc_json(c) for c in docs],
                "top_n": 5 if i % 3 else None}
        if i % 2:
            body["first_stage_scores"] = [rng.uniform(0, 10) for _ in docs]
        bodies.append({k: v for k, v in body.items() if v is not None})
    paths = ["/v1/rerank?score=linear" if i % 5 == 4 and "first_stage_scores" not in b else "/v1/rerank"
             for i, b in enumerate(bodies)]
    shared = create_app(ModelDirectory.load(exported[model_type], threads=1), cache_size=150)
    client = shared.test_client()

    def send(i: int) -> str:
        return client.post(paths[i], json=bodies[i]).get_data(as_text=True)

    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(send, range(len(bodies))))
    alone = create_app(ModelDirectory.load(exported[model_type], threads=1), cache_size=0).test_client()
    for i, body in enumerate(bodies):
        assert json.loads(together[i]) == alone.post(paths[i], json=body).json, i
    assert shared.extensions["esrerank"].cache.hits > 0 and len(shared.extensions["esrerank"].cache) <= 150


def test_serve_and_the_service_agree_on_the_default_cache_size():
    from es_plugin_bridge.cli import serve
    from es_plugin_bridge.serving import service

    assert serve.DEFAULT_CACHE_SIZE == service.DEFAULT_CACHE_SIZE
