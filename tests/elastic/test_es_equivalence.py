"""Why each Elasticsearch mode ends in the product's ``fused`` order, proved on real data without a cluster.

Elasticsearch's part of each mode is arithmetic on stored values; this computes exactly that arithmetic
(from the same request bodies and the sidecar's own answers) on SemEval-2016 dev with the tiny exported
models, and compares with the ``fused`` ranker fusing BM25 in process (the embedded BM25 equals
Lucene's: tests/engines/test_lucene_parity.py):

- vectors: β_fs·minmax(BM25) + β_bow·Σ u·v (``rank_features``, with Lucene's 9-bit truncation of v)
  + β_nn·(cosine + 1) — one call; and ``query_weight``·BM25 + the same rest — two calls (basic licence);
- native: the custom endpoint's request template, filled as Elasticsearch fills it, sent to the sidecar
  app; its answer parsed with the endpoint's JSON paths; rewritten as Elasticsearch rewrites reranker
  scores (s ↦ max(s, 0) + min(eˢ, 1)); summed by ``linear`` with β_fs·minmax(BM25).
Each must equal fused plus one constant per query.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.modes import vectors as vectors_mode
from es_plugin_bridge.elastic.setup import RERANK_REQUEST, inference_endpoint
from es_plugin_bridge.rankers import RankerContext, TokenCache, build, unique_questions
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text
from es_plugin_bridge.training.fusion_fit import minmax

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"


def lucene_feature(value: float) -> float:
    """What a ``rank_features`` value reads back as: Lucene's FeatureField keeps the float's top 17 bits
    (``floatToIntBits(v) >>> 15`` as a term frequency), i.e. 9 significant bits, truncated."""
    bits = np.array([value], dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF8000)
    return float(bits.view(np.float32)[0])


@pytest.fixture(scope="module")
def semeval():
    return read_spec(f"semeval:{SEMEVAL_DEV}").queries


@pytest.fixture(scope="module", params=["bow-cnn", "gru"])
def setup(request, exported, semeval):
    path = exported[request.param]
    app = create_app(ModelDirectory.load(path, threads=1))
    service = app.extensions["esrerank"]
    tokens = TokenCache(Preprocessor())
    context = RankerContext(
        collection=unique_questions([q.candidates for q in semeval]),
        tokens=tokens,
        model_dir=path,
        fused_first_stage="bm25",
    )
    fused, bm25 = build("fused", context), build("bm25", context)
    return app.test_client(), service, fused, bm25


def embed(client, questions) -> list[dict]:
    resp = client.post("/v1/encode", json={"texts": [rerank_text(q) for q in questions]})
    assert resp.status_code == 200, resp.json
    return resp.json["embeddings"]


def constant_gap(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    gap = got - want
    assert float(gap.max() - gap.min()) <= tol, (gap.max() - gap.min(), tol)


def test_vectors_mode_is_fused_plus_a_constant(setup, semeval):
    client, service, fused, bm25 = setup
    beta = service.model.fusion["bm25"]
    for rq in semeval:
        want = fused.rerank(rq)
        first = bm25.rerank(rq)
        q, docs = embed(client, [rq.query]), embed(client, rq.candidates)
        u = {mappings.feature_key(t): abs(w) for t, w in q[0]["terms"].items()}
        stored = [mappings.bow_features(d["terms"]) for d in docs]
        bow_exact = np.array([sum(u.get(k, 0.0) * v for k, v in s.items()) for s in stored])
        bow_lucene = np.array([sum(u.get(k, 0.0) * lucene_feature(v) for k, v in s.items()) for s in stored])
        qv = np.asarray(q[0]["vector"], dtype=np.float32).astype(np.float64)
        cos = np.array(
            [
                float(np.dot(qv, dv) / (np.linalg.norm(qv) * np.linalg.norm(dv)))
                for dv in (np.asarray(d["vector"], dtype=np.float32).astype(np.float64) for d in docs)
            ]
        )
        rest_exact = beta["bow"] * bow_exact + beta["neural"] * (cos + 1.0)
        rest_lucene = beta["bow"] * bow_lucene + beta["neural"] * (cos + 1.0)
        one_call = beta["first_stage"] * minmax(first) + rest_exact
        constant_gap(one_call, want, 1e-6)
        assert list(np.argsort(-one_call, kind="stable")) == list(np.argsort(-want, kind="stable"))
        # Lucene's truncation moves each BOW score by < 2^-8 of itself (the documented ≈ 0.4 %)
        constant_gap(beta["first_stage"] * minmax(first) + rest_lucene, want, beta["bow"] * 2**-8 + 1e-6)
        assert np.all(bow_lucene <= bow_exact + 1e-12) and np.all(
            bow_lucene >= bow_exact * (1 - 2**-8) - 1e-12
        )
        two_calls = vectors_mode.basic_query_weight(beta["first_stage"], list(first)) * first + rest_exact
        constant_gap(two_calls, want, 1e-6)


def es_rewrite(score: float) -> float:
    """Elasticsearch's rewrite of a reranker score (ELASTICSEARCH.md): max(s, 0) + min(exp(s), 1)."""
    return max(score, 0.0) + min(math.exp(score), 1.0)


def test_native_mode_is_fused_plus_a_constant(setup, semeval):
    client, service, fused, bm25 = setup
    settings = inference_endpoint("http://sidecar", "bm25", None)["service_settings"]
    path = settings["url"].removeprefix("http://sidecar")
    beta_fs = service.model.fusion["bm25"]["first_stage"]
    for rq in semeval:
        want = fused.rerank(rq)
        body = RERANK_REQUEST.replace("${query}", json.dumps(rerank_text(rq.query))).replace(
            "${input}", json.dumps([rerank_text(c) for c in rq.candidates])
        )
        resp = client.post(path, data=body, headers={"Content-Type": "application/json"})
        assert resp.status_code == 200, resp.json
        results = resp.json["results"]  # the endpoint's json_parser: $.results[*].index / relevance_score
        scores = np.zeros(len(rq.candidates))
        for r in results:
            assert r["relevance_score"] >= 0  # non-negative, so the rewrite is +1 for every document
            scores[r["index"]] = es_rewrite(r["relevance_score"])
        total = beta_fs * minmax(bm25.rerank(rq)) + 1.0 * scores
        constant_gap(total, want, 1e-6)
        assert list(np.argsort(-total, kind="stable")) == list(np.argsort(-want, kind="stable"))


def test_rank_feature_keys_and_values(setup, semeval):
    client, *_ = setup
    for emb in embed(client, semeval[0].candidates[:5]):
        features = mappings.bow_features(emb["terms"])
        assert all(v >= mappings.MIN_FEATURE for v in features.values())
        assert all("." not in k for k in features)
        assert {k.replace("%2E", ".").replace("%25", "%") for k in features} <= set(emb["terms"])
