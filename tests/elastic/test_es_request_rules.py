"""What the product sends Elasticsearch follows Elasticsearch's own rules: licences, client majors, the
version header, rerank-failure flags, zero vectors, endpoint ids, timeouts, non-negative scripts and
shard copies; each test restates the rule it relies on and where that rule lives.

Where a test needs HTTP, the server is ``es_recorder``'s (it records what the real client sends; it is
never evidence that Elasticsearch accepts a request).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import numpy as np
import pytest
import yaml
from es_recorder import es_client

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic import mappings, queries
from es_plugin_bridge.elastic.cluster.connection import (
    ClusterInfo,
    check_client_version,
    cluster_info,
    install_command,
)
from es_plugin_bridge.elastic.modes import native as native_mode
from es_plugin_bridge.elastic.modes import require
from es_plugin_bridge.elastic.setup import VALID_ID, inference_id, register_endpoints
from es_plugin_bridge.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
SPEC = json.loads((ROOT / "tests" / "tools" / "es_spec_shapes.json").read_text(encoding="utf-8"))["classes"]


# --- licences ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("licence", "enterprise"), [
    ("basic", False), ("gold", False), ("platinum", False), ("enterprise", True), ("trial", True),
])
def test_enterprise_features_need_enterprise_or_trial_not_platinum(licence, enterprise):
    """``XPackLicenseState.isAllowedByOperationMode``: TRIAL, or a mode at or after ENTERPRISE in
    ``License.OperationMode``'s order (… GOLD, PLATINUM, ENTERPRISE); the inference API, the
    text_similarity_reranker, linear and rrf are all ``License.OperationMode.ENTERPRISE`` features."""
    cluster = ClusterInfo((9, 1, 0), licence, True)
    assert cluster.paid is enterprise
    if enterprise:
        require(cluster, "native")
        require(cluster, "vectors-retriever")
    else:
        with pytest.raises(UserError, match="enterprise or trial licence"):
            require(cluster, "native")
    assert not ClusterInfo((9, 1, 0), licence, False).paid  # an expired licence enables nothing


def test_platinum_setup_keeps_the_index_and_says_native_is_off():
    """On platinum ``es setup`` creates the index (register_endpoints returns why native is off before
    it touches the cluster) and mode vectors takes the two-call path."""
    meta = type("Meta", (), {"fusion": {"bm25": {}}})()
    ids, why = register_endpoints(None, "questions", meta, "http://sidecar:8080", None,
                                  ClusterInfo((9, 1, 0), "platinum", True))
    assert ids == {} and "enterprise or trial" in str(why) and "'platinum'" in str(why)


# --- client and cluster majors ------------------------------------------------------------------------


def test_client_of_the_wrong_major_is_named_with_the_install_command():
    """elasticsearch-py N sends ``compatible-with=N``; an (N-1).x cluster refuses it, an (N+1).x accepts
    it (REST API compatibility covers one major back). Before 8.18 the client has no ``elasticsearch.dsl``."""
    with pytest.raises(UserError, match=r"pip install 'elasticsearch>=8.18,<9'") as err:
        check_client_version(8, client=(9, 5, 1))
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match=r"too old.*pip install 'elasticsearch>=9,<10'"):
        check_client_version(9, client=(8, 17, 2))
    check_client_version(8, client=(8, 19, 0))
    check_client_version(9, client=(9, 1, 0))
    check_client_version(9, client=(8, 19, 0))  # a 9.x cluster accepts compatible-with=8
    assert install_command(10) == "pip install 'elasticsearch>=10,<11'"


def test_cluster_info_reads_the_version_with_a_plain_accept_header(recorder):
    """An 8.x node answers ``GET /`` to ``Accept: application/json`` but refuses the 9.x client's
    ``compatible-with=9`` header; reading the version the plain way lets the product say which client
    to install instead of failing on the first API call."""
    rec, url = recorder
    rec.answers[("GET", "/_license")] = {"license": {"type": "trial", "status": "active"}}
    rec.answers[("GET", "/")] = {"version": {"number": "8.19.3"}, "tagline": "You Know, for Search"}
    client = es_client(url)
    with pytest.raises(UserError, match=r"Elasticsearch 8.x cluster.*'elasticsearch>=8.18,<9'"):
        cluster_info(client)
    root = rec.requests[0]
    assert root["path"] == "/" and root["headers"]["accept"] == "application/json"
    rec.answers[("GET", "/")] = {"version": {"number": "9.1.4"}}
    info = cluster_info(client)
    assert info.version == (9, 1, 4) and info.paid


# --- allow_rerank_failures ---------------------------------------------------------------------------------


def test_allow_rerank_failures_is_sent_only_when_asked_and_needs_8_19_or_9_1():
    """``TextSimilarityRankRetrieverBuilder.FAILURES_ALLOWED_FIELD`` (8.19/9.1): with it, a failed
    inference call keeps the window's first-stage scores (``RankFeaturePhase``), so ``linear`` returns
    β_fs·minmax(s) + s — the first-stage order — instead of failing the search."""
    kwargs = dict(similarity="bm25", tokens=["grub"], query_text="grub", inference_id="e",
                  beta_first_stage=0.3, window=20)
    plain = native_mode.native_retriever(**kwargs)
    allowed = native_mode.native_retriever(**kwargs, allow_failures=True)
    reranker = allowed["linear"]["retrievers"][1]["retriever"]["text_similarity_reranker"]
    assert reranker["allow_rerank_failures"] is True
    assert "allow_rerank_failures" not in json.dumps(plain)
    assert set(reranker) <= set(SPEC["TextSimilarityReranker"]["fields"])
    require(ClusterInfo((8, 19, 0), "trial", True), "native-allow-failures")
    for old in ((8, 18, 2), (9, 0, 5)):
        with pytest.raises(UserError, match="8.19"):
            require(ClusterInfo(old, "trial", True), "native-allow-failures")
    # what the user gets on failure: the linear sum of a strictly increasing function of s
    s = np.array([7.1, 3.2, 5.5, 0.4])
    on_failure = 0.3 * (s - s.min()) / (s.max() - s.min()) + s
    assert list(np.argsort(-on_failure)) == list(np.argsort(-s))


# --- zero vectors ----------------------------------------------------------------------------------------


def test_a_zero_vector_is_left_out_of_a_cosine_document_and_kept_for_manhattan():
    """``DenseVectorFieldMapper``: cosine "does not support vectors with zero magnitude"."""
    q = Question("z", "???", "")
    emb = {"vector": [0.0, 0.0, 0.0], "terms": {}}
    assert mappings.VECTOR_FIELD not in mappings.document(q, [], emb, "cosine")
    assert mappings.document(q, [], emb, "manhattan")[mappings.VECTOR_FIELD] == [0.0, 0.0, 0.0]
    assert mappings.VECTOR_FIELD in mappings.document(q, ["x"], {"vector": [0.0, 1e-9], "terms": {}})


def test_scripts_never_take_the_cosine_of_a_zero_vector():
    """``cosineSimilarity`` of a zero query vector is NaN, which ``script_score`` refuses; a document
    with no vector would fail ``cosineSimilarity`` too. The product's cosine with a zero vector is 0."""
    rest = queries.rest_of_fused([0.0, 0.0], {"grub": 0.5}, {"bow": 0.2, "neural": 0.5}, "cosine")
    script = rest["script_score"]["script"]
    assert "cosineSimilarity" not in script["source"] and "q" not in script["params"]
    assert script["source"].endswith("params.b_nn * 1.0")  # cosine 0, shifted by +1: a constant
    rest = queries.rest_of_fused([0.0, 1.0], {}, {"bow": 0.2, "neural": 0.5}, "cosine")
    assert "doc['vector'].size() == 0 ? 1.0 :" in rest["script_score"]["script"]["source"]


def test_texts_without_tokens_are_refused_and_the_rest_embed_to_what_the_index_can_store(exported):
    """Real exported models: a question of punctuation only has no tokens, and the sidecar refuses it as
    it refuses a blank one (issue 48: it got one vector shared by every such text); whatever vector it
    gives a text with tokens, the document built from it is one Elasticsearch accepts."""
    from es_plugin_bridge.serving import ModelDirectory
    from es_plugin_bridge.serving.app import create_app

    for kind in ("bow-cnn", "gru"):
        client = create_app(ModelDirectory.load(exported[kind], threads=1)).test_client()
        for i, text in enumerate(["???", "<p></p>"]):
            resp = client.post("/v1/encode", json={"texts": ["grub fails to boot", text]})
            assert resp.status_code == 400 and resp.json["field"] == "texts.1", (kind, i, resp.json)
        texts = ["grub fails to boot", "?? grub"]
        resp = client.post("/v1/encode", json={"texts": texts})
        assert resp.status_code == 200, resp.json
        for text, emb in zip(texts, resp.json["embeddings"], strict=True):
            doc = mappings.document(Question("t", text, ""), [], emb, "cosine")
            vector = doc.get(mappings.VECTOR_FIELD)
            assert vector is None or math.sqrt(sum(x * x for x in vector)) > 0, (kind, text)


# --- endpoint ids, timeouts, β, preference, compose ------------------------------------------------------


@pytest.mark.parametrize("index", ["questions", "my+questions", "my-questions", "q!@&^", "x.y", "my_q"])
def test_endpoint_ids_are_legal_for_every_legal_index_name(index):
    """``MlStrings.isValidId``: ``[a-z0-9](?:[a-z0-9_\\-.]*[a-z0-9])?``; index names also allow
    ``+ ! @ & ^`` and more (``MetadataCreateIndexService.validateIndexOrAliasName``)."""
    for purpose in ("bm25", "lmdirichlet", "embed", "bow"):
        assert VALID_ID.fullmatch(inference_id(index, purpose)), inference_id(index, purpose)
    assert inference_id("questions", "bm25") == "esrerank-questions-bm25"  # legal ids keep their name


def test_two_index_names_that_clean_alike_get_different_endpoints():
    assert inference_id("my+questions", "bm25") != inference_id("my-questions", "bm25")
    assert inference_id("my+questions", "bm25") != inference_id("my!questions", "bm25")


def test_endpoint_put_outlives_the_client_default_timeout(recorder):
    """``PUT _inference`` waits (``?timeout=60s``) while Elasticsearch test-calls the sidecar; the client
    must wait at least that long, whatever its usual request timeout (here 0.5 s, the PUT takes 1 s)."""
    rec, url = recorder
    endpoint = inference_id("questions", "bm25")
    rec.answers[("GET", f"/_inference/{endpoint}")] = (404, {"error": "missing"})
    rec.answers[("PUT", "/_inference/rerank/")] = {"inference_id": endpoint, "task_type": "rerank"}
    rec.delay[("PUT", "/_inference/rerank/")] = 1.0
    meta = type("Meta", (), {"fusion": {"bm25": {}}})()
    ids, why = register_endpoints(es_client(url, timeout=0.5), "questions", meta, "http://sidecar:8080", None,
                                  ClusterInfo((9, 1, 0), "trial", True))
    assert why is None and ids == {"bm25": endpoint}
    put = [r for r in rec.requests if r["method"] == "PUT"][0]
    assert "timeout=60s" in put["query"]


@pytest.mark.parametrize("similarity", ["cosine", "manhattan"])
@pytest.mark.parametrize(("b_bow", "b_nn"), [(0.2, 0.5), (-0.4, 0.5), (0.2, -0.7), (-1.5, -2.0), (0.0, 0.0)])
def test_the_rescore_script_is_non_negative_for_any_beta(similarity, b_bow, b_nn):
    """``script_score`` refuses negative scores; a hand-edited or learned negative β must not make the
    rest of fused negative. The shift is one constant per query, so the order is the product's."""
    beta = {"bow": b_bow, "neural": b_nn}
    shift = queries.rest_shift(beta, similarity)
    low, high = queries.neural_range(similarity)
    corners = [b_bow * bow + b_nn * nn + shift for bow in (0.0, 1.0) for nn in (low, high)]
    assert min(corners) >= 0.0 and min(corners) == pytest.approx(0.0, abs=1e-12)
    rest = queries.rest_of_fused([0.1, 0.2], {"a": 0.5}, beta, similarity)["script_score"]["script"]
    assert ("params.shift" in rest["source"]) == (shift > 0)


def test_the_two_basic_licence_calls_read_the_same_shard_copies(recorder):
    """Mode vectors on a basic licence reads the window's max and min in one call and rescores in a
    second: both carry one ``preference`` string, so both read the same copies (``preference`` routes a
    search to the same shard copies for the same string: ``OperationRouting``)."""
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.modes.vectors import VectorsMode

    rec, url = recorder
    hits = {"hits": {"hits": [{"_id": "a", "_score": 3.0}, {"_id": "b", "_score": 1.0}]}}
    rec.answers[("POST", "/questions/_search")] = hits

    class Embedder:
        def embed(self, questions: list[Question]) -> list[dict[str, Any]]:
            return [{"vector": [0.6, 0.8], "terms": {"grub": 0.5}} for _ in questions]

    stage = ElasticsearchFirstStage(es_client(url), "questions", "bm25", lambda q: ["grub"])
    mode = VectorsMode(stage, {"first_stage": 0.3, "bow": 0.2, "neural": 0.5}, 10, Embedder(), "cosine",
                       one_call=False)
    mode.search(Question("q", "grub", ""), 5)
    searches = [r for r in rec.requests if r["path"] == "/questions/_search"]
    assert len(searches) == 2
    prefs = [parse_qs(r["query"]).get("preference", [None])[0] for r in searches]
    assert prefs[0] and prefs[0] == prefs[1]
    mode.search(Question("q", "grub", ""), 5)
    again = [r for r in rec.requests if r["path"] == "/questions/_search"][2]
    assert prefs[0] not in again["query"]  # one string per search, not one for all


def test_the_shipped_endpoint_names_the_compose_sidecar():
    """``mappings/elasticsearch/inference-endpoint-bm25.json`` must reach the sidecar service of
    ``docker/docker-compose.yml`` by its service name (Docker's DNS on the compose network)."""
    compose = yaml.safe_load((ROOT / "docker" / "docker-compose.yml").read_text(encoding="utf-8"))
    endpoint = json.loads((ROOT / "mappings" / "elasticsearch" / "inference-endpoint-bm25.json").read_text())
    host = endpoint["service_settings"]["url"].split("//", 1)[1].split(":", 1)[0]
    assert host in compose["services"], (host, sorted(compose["services"]))
    port = endpoint["service_settings"]["url"].split(":")[2].split("/")[0]
    assert port == "8080"  # the sidecar image listens on 8080 (sidecar.Dockerfile, compose healthcheck)


def test_a_stored_vector_is_the_same_float32_in_fewer_digits():
    """``document`` writes each component with the fewest digits that parse back to its float32 (the
    engine stores float32): the same vector to the bit, in some 40 % fewer characters of ``_source``."""
    rng = np.random.default_rng(7)
    vector = np.concatenate([rng.standard_normal(2000) / 20, [0.0, -0.0, 1e-38, 3.4e38, -1.5e-45, 1.0]])
    vector = vector.astype(np.float32).astype(np.float64).tolist()  # as /v1/encode answers: float32 values
    stored = mappings.document(Question("q", "t", ""), ["t"], {"vector": vector, "terms": {}})
    written = stored[mappings.VECTOR_FIELD]
    np.testing.assert_array_equal(np.float32(json.loads(json.dumps(written))), np.float32(vector))
    assert len(json.dumps(written)) < 0.65 * len(json.dumps(vector))
