"""OpenSearch's own Cohere embed blueprint, registered on a real OpenSearch 2.19.1 node against a live
sidecar with only the URL (and the key) changed, embeds through ``/v1/embed``: ``_predict`` and the
blueprint's ``text_embedding`` ingest pipeline get, for each real AskUbuntu title, the vector the sidecar's
own ``/v1/encode`` answers.

The connector is ml-commons' ``docs/remote_inference_blueprints/cohere_connector_embedding_blueprint.md``
(step 1b) as published: its ``request_body`` (``texts``, ``truncate``, ``model``, ``input_type``),
``connector.pre_process.cohere.embedding`` and ``connector.post_process.cohere.embedding``, which reads
``$.embeddings`` as a list of float lists (ml-commons 2.19.1.0 ``MLPostProcessFunction``:
``JSON_PATH_EXPRESSION.put(COHERE_EMBEDDING, "$.embeddings")`` with ``EmbeddingPostProcessFunction``). The
blueprint's v2 variant (``connector.post_process.cohere_v2.embedding.float``) exists from ml-commons 3.0.0
on, not on this node. ml-commons carries each number as a float32 (``EmbeddingPostProcessFunction`` makes
FLOAT32 tensors) and the sidecar's vectors are float32 values, so they compare equal as float32.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from es_commands import TOKEN
from live_sidecar import post

pytestmark = [pytest.mark.engine, pytest.mark.slow]

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TRUSTED = "plugins.ml_commons.trusted_connector_endpoints_regex"
#: The blueprint's request body, character for character.
REQUEST_BODY = ("{ \"texts\": ${parameters.texts}, \"truncate\": \"${parameters.truncate}\", \"model\": "
                "\"${parameters.model}\", \"input_type\": \"${parameters.input_type}\" }")


def _blueprint_connector(url: str, key: str) -> dict:
    """Step 1b of the blueprint, verbatim but for ``url`` and the key (and a model name to fill in)."""
    return {
        "name": "Cohere Embed Model",
        "description": "The connector to Cohere's public embed API",
        "version": "1",
        "protocol": "http",
        "credential": {"cohere_key": key},
        "parameters": {"model": "embed-english-v3.0", "input_type": "search_document", "truncate": "END"},
        "actions": [{
            "action_type": "predict",
            "method": "POST",
            "url": url,
            "headers": {"Authorization": "Bearer ${credential.cohere_key}",
                        "Request-Source": "unspecified:opensearch"},
            "request_body": REQUEST_BODY,
            "pre_process_function": "connector.pre_process.cohere.embedding",
            "post_process_function": "connector.post_process.cohere.embedding",
        }],
    }


@pytest.fixture(scope="module")
def titles() -> list[str]:
    """20 real titles, those with shell or code in them ($PATH, quotes, backquotes) first."""
    lines = TITLES.read_text(encoding="utf-8").splitlines()
    found = sorted({t.strip() for line in lines for t in line.split("\t")[1:] if t.strip()})
    shell = [t for t in found if any(c in t for c in "$`\"'|\\")]
    return (shell + [t for t in found if t not in shell])[:20]


@pytest.fixture(scope="module")
def blueprint_model(opensearch, sidecar) -> str:
    """The blueprint's steps 1a-1d on the node: model group, connector, register, deploy; the model id."""
    url, _ = sidecar
    settings = opensearch.ok("GET", "/_cluster/settings?include_defaults=true&flat_settings=true")
    trusted = next((settings[s][TRUSTED] for s in ("persistent", "transient", "defaults")
                    if TRUSTED in settings.get(s, {})), [])
    trusted = [trusted] if isinstance(trusted, str) else list(trusted)
    opensearch.ok("PUT", "/_cluster/settings", {"persistent": {
        TRUSTED: [*trusted, f"^{url}/v1/embed$".replace(".", "\\.")],
        "plugins.ml_commons.connector.private_ip_enabled": True,
        "plugins.ml_commons.only_run_on_ml_node": False}})
    group = opensearch.ok("POST", "/_plugins/_ml/model_groups/_register",
                          {"name": "cohere_model_group", "description": "Your Cohere model group"})
    connector = opensearch.ok("POST", "/_plugins/_ml/connectors/_create",
                              _blueprint_connector(f"{url}/v1/embed", TOKEN))
    registered = opensearch.ok("POST", "/_plugins/_ml/models/_register", {
        "name": "Cohere Embed Model", "function_name": "remote", "model_group_id": group["model_group_id"],
        "description": "Your Cohere Embedding Model", "connector_id": connector["connector_id"]})
    model_id = registered["model_id"]
    opensearch.ok("POST", f"/_plugins/_ml/models/{model_id}/_deploy")
    deadline = time.monotonic() + 60
    while opensearch.ok("GET", f"/_plugins/_ml/models/{model_id}").get("model_state") != "DEPLOYED":
        assert time.monotonic() < deadline, "the blueprint's model was not deployed in 60 s"
        time.sleep(0.5)
    return model_id


def _encode(url: str, texts: list[str]) -> np.ndarray:
    status, answer = post(f"{url}/v1/encode", {"texts": texts}, TOKEN)
    assert status == 200, answer
    return np.asarray([e["vector"] for e in answer["embeddings"]], dtype=np.float32)


def _predict_equals_encode(opensearch, url: str, model_id: str, titles: list[str]) -> None:
    """ml-commons' ``_predict`` through the model gives one ``sentence_embedding`` per title, equal bit
    for bit to the sidecar's own ``/v1/encode``."""
    answer = opensearch.ok("POST", f"/_plugins/_ml/models/{model_id}/_predict",
                           {"parameters": {"texts": titles}})
    outputs = [o for result in answer["inference_results"] for o in result["output"]]
    assert [o["name"] for o in outputs] == ["sentence_embedding"] * len(titles), json.dumps(answer)[:500]
    got = np.asarray([o["data"] for o in outputs], dtype=np.float32)
    np.testing.assert_array_equal(got, _encode(url, titles))


def test_blueprint_predict_gives_the_encode_vectors(opensearch, sidecar, blueprint_model, titles):
    url, _ = sidecar
    _predict_equals_encode(opensearch, url, blueprint_model, titles)


def test_blueprint_ingest_pipeline_stores_the_encode_vectors(opensearch, sidecar, blueprint_model, titles):
    """Step 2a's ``text_embedding`` processor (``passage_text`` → ``passage_embedding``), simulated on
    the titles: each document gets /v1/encode's vector."""
    url, _ = sidecar
    pipeline = {"description": "Test Cohere Embedding pipeline", "processors": [{"text_embedding": {
        "model_id": blueprint_model, "field_map": {"passage_text": "passage_embedding"}}}]}
    docs = [{"_source": {"passage_text": t}} for t in titles[:8]]
    answer = opensearch.ok("POST", "/_ingest/pipeline/_simulate", {"pipeline": pipeline, "docs": docs})
    stored = np.asarray([d["doc"]["_source"]["passage_embedding"] for d in answer["docs"]], dtype=np.float32)
    np.testing.assert_array_equal(stored, _encode(url, titles[:8]))


#: Cohere v2 on ml-commons 2.19 (issue 48, finding 12): 2.19 has no ``cohere_v2`` post-process, but a
#: built-in post-process reads the answer through the connector's ``response_filter`` when one is given
#: (``ConnectorUtils.processOutput``: it replaces the function's own JSONPath), so ``$.embeddings.float``
#: of /v2/embed's ``embeddings_by_type`` answer feeds either of the two float-list post-processes.
V2_REQUEST_BODY = ("{ \"texts\": ${parameters.texts}, \"truncate\": \"${parameters.truncate}\", \"model\": "
                   "\"${parameters.model}\", \"input_type\": \"${parameters.input_type}\", "
                   "\"embedding_types\": [\"float\"] }")


@pytest.mark.parametrize("post_process", ["connector.post_process.cohere.embedding",
                                          "connector.post_process.default.embedding"])
def test_cohere_v2_embed_on_2_19_through_a_response_filter(opensearch, sidecar, blueprint_model, titles,
                                                           post_process):
    url, _ = sidecar
    opensearch.ok("PUT", "/_cluster/settings", {"persistent": {TRUSTED: [
        *_trusted(opensearch), f"^{url}/v2/embed$".replace(".", "\\.")]}})
    connector = _blueprint_connector(f"{url}/v2/embed", TOKEN)
    connector["parameters"]["response_filter"] = "$.embeddings.float"
    connector["actions"][0].update(request_body=V2_REQUEST_BODY, post_process_function=post_process)
    created = opensearch.ok("POST", "/_plugins/_ml/connectors/_create", connector)
    registered = opensearch.ok("POST", "/_plugins/_ml/models/_register?deploy=true", {
        "name": f"Cohere v2 Embed Model ({post_process})", "function_name": "remote",
        "description": "Cohere v2 embed on 2.19", "connector_id": created["connector_id"]})
    model_id = registered.get("model_id") or opensearch.ok(
        "GET", f"/_plugins/_ml/tasks/{registered['task_id']}")["model_id"]
    deadline = time.monotonic() + 60
    while opensearch.ok("GET", f"/_plugins/_ml/models/{model_id}").get("model_state") != "DEPLOYED":
        assert time.monotonic() < deadline, "the v2 model was not deployed in 60 s"
        time.sleep(0.5)
    _predict_equals_encode(opensearch, url, model_id, titles)


def _trusted(opensearch) -> list[str]:
    settings = opensearch.ok("GET", "/_cluster/settings?include_defaults=true&flat_settings=true")
    trusted = next((settings[s][TRUSTED] for s in ("persistent", "transient", "defaults")
                    if TRUSTED in settings.get(s, {})), [])
    return [trusted] if isinstance(trusted, str) else list(trusted)


def _embed_calls(url: str) -> float:
    """How many ``/v1/embed`` requests the sidecar answered 200 (its /metrics)."""
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        text = resp.read().decode()
    line = next((x for x in text.splitlines()
                 if x.startswith('esrerank_requests_total{endpoint="/v1/embed",status="200"}')), None)
    return float(line.split()[-1]) if line else 0.0


@pytest.mark.parametrize(("batch_size", "calls"), [(None, 200), (96, 3)])
def test_text_embedding_batch_size_sets_the_calls_per_bulk(opensearch, sidecar, blueprint_model, batch_size,
                                                           calls):
    """docs/opensearch.md's advice: as the blueprint writes it, the ``text_embedding`` processor calls
    the sidecar once per document of a ``_bulk``; with ``"batch_size": 96`` (2.16+) 200 real titles are
    3 calls, and every document still gets /v1/encode's vector."""
    url, _ = sidecar
    lines = TITLES.read_text(encoding="utf-8").splitlines()
    found = list(dict.fromkeys(t.strip() for line in lines for t in line.split("\t")[1:] if t.strip()))[:200]
    processor = {"model_id": blueprint_model, "field_map": {"passage_text": "passage_embedding"}}
    if batch_size is not None:
        processor["batch_size"] = batch_size
    name = f"batch-{batch_size or 'none'}"
    opensearch.ok("PUT", f"/_ingest/pipeline/{name}", {"processors": [{"text_embedding": processor}]})
    dimension = len(_encode(url, found[:1])[0])
    opensearch.ok("PUT", f"/{name}", {"settings": {"index.knn": True, "default_pipeline": name}, "mappings": {
        "properties": {"passage_text": {"type": "text"}, "passage_embedding": {
            "type": "knn_vector", "dimension": dimension,
            "method": {"name": "hnsw", "engine": "lucene", "space_type": "l2"}}}}})
    before = _embed_calls(url)
    body = "".join(json.dumps({"index": {"_id": str(i)}}) + "\n" + json.dumps({"passage_text": t}) + "\n"
                   for i, t in enumerate(found))
    assert opensearch.ok("POST", f"/{name}/_bulk?refresh=true", body.encode())["errors"] is False
    assert _embed_calls(url) - before == calls
    everything = {"size": 200, "query": {"match_all": {}}}
    stored = opensearch.ok("POST", f"/{name}/_search", everything)["hits"]["hits"]
    vectors = {h["_source"]["passage_text"]: h["_source"]["passage_embedding"] for h in stored}
    np.testing.assert_array_equal(np.asarray([vectors[t] for t in found[:20]], dtype=np.float32),
                                  _encode(url, found[:20]))
