"""What ``es setup --embed-at-ingest`` sends OpenSearch (``elastic/opensearch_ingest.py``), checked
without a node: the connectors' bodies against the sidecar's own ``/v1/encode`` answer read the way
ml-commons 2.19.1.0 reads it, the pipeline's processors, and the one-line messages of ``es index``.

The node tests (``tests/opensearch/test_opensearch_ingest.py``) run all of it on OpenSearch 2.19.1; these
only pin the bodies where no node can start.
"""

from __future__ import annotations

import json

import pytest

from es_plugin_bridge.core.features import bow_features
from es_plugin_bridge.elastic.ingest_pipeline import CLEAN_SCRIPT, RERANK_TEXT_SCRIPT
from es_plugin_bridge.elastic.opensearch_ingest import (
    BATCH_SIZE,
    BOW_POST_PROCESS,
    EMBED_REQUEST,
    VECTOR_FILTER,
    connector_body,
    embed_url_regex,
    failure_line,
    pipeline_body,
    sidecar_unreachable,
)

URL = "http://sidecar:8080"


def test_the_vector_connector_reads_the_sidecars_vectors_with_ml_commons_default_functions():
    body = connector_body(URL, "t0ken", "vector")
    action = body["actions"][0]
    assert action["url"] == f"{URL}/v1/encode" and action["request_body"] == EMBED_REQUEST
    assert action["pre_process_function"] == "connector.pre_process.default.embedding"
    assert action["post_process_function"] == "connector.post_process.default.embedding"
    assert VECTOR_FILTER == "$.embeddings[*].vector"
    assert body["parameters"] == {"response_filter": VECTOR_FILTER}
    assert action["headers"]["Authorization"] == "Bearer ${credential.api_key}"
    assert body["credential"] == {"api_key": "t0ken"}
    # ml-commons reads client_config in seconds (Duration.ofSeconds): a batch of long texts needs more
    # than the rerank connector's 5 s
    assert body["client_config"]["read_timeout"] == 60


def test_the_body_template_filled_as_ml_commons_fills_it_is_the_sidecars_embed_request():
    """``OpenAIEmbeddingPreProcessFunction`` puts Gson's JSON array of the texts in ``parameters.input``;
    ``HttpConnector.createPayload`` substitutes it into the body."""
    texts = ['how to install "x" 12.04', "<p>back \\ slash &#36;{HOME}</p>"]
    payload = EMBED_REQUEST.replace("${parameters.input}", json.dumps(texts))
    assert json.loads(payload) == {"texts": texts}


def test_the_bow_connector_has_a_painless_post_process_and_no_response_filter():
    body = connector_body(URL, "t0ken", "bow")
    action = body["actions"][0]
    assert body["parameters"] == {}
    assert action["post_process_function"] == BOW_POST_PROCESS
    # the script writes ModelTensor JSON: the shape neural-search's TokenWeightUtil reads
    assert '{\\"name\\":\\"response\\",\\"dataAsMap\\":{\\"response\\":[' in json.dumps(BOW_POST_PROCESS)
    assert "params.embeddings" in BOW_POST_PROCESS and "bow_tokens" in BOW_POST_PROCESS
    # ml-commons prepends its own escape() when a script calls one (StringUtils.addDefaultMethod)
    assert "escape(" not in BOW_POST_PROCESS
    with pytest.raises(ValueError):
        connector_body(URL, "t0ken", "text")


def test_the_bow_map_the_script_builds_is_the_clients_rank_features():
    """The script pairs ``bow_tokens`` with ``bow_weights``: restated here in Python on the sidecar's
    shape, it gives what the client stores (``bow_features`` of the terms)."""
    terms = {"12.04": -0.5, "grub": 0.25, "100%": 0.75, "x": 1e-40}
    features = bow_features(terms)
    embedding = {"bow_tokens": list(features), "bow_weights": list(features.values())}
    assert dict(zip(embedding["bow_tokens"], embedding["bow_weights"], strict=True)) == features
    assert features == {"12%2E04": 0.5, "grub": 0.25, "100%25": 0.75}


def test_the_pipeline_fills_rerank_text_vector_and_bow_and_ignores_no_failure():
    body = pipeline_body(vector_model="v1", bow_model="b1", neural_similarity="cosine")
    kinds = [next(iter(p)) for p in body["processors"]]
    assert kinds == ["script", "text_embedding", "sparse_encoding", "script"]
    first, vector, bow, clean = (next(iter(p.values())) for p in body["processors"])
    assert first["source"] == RERANK_TEXT_SCRIPT and first["params"]["out"] == "rerank_text"
    assert vector == {"tag": "esrerank-vector", "model_id": "v1", "field_map": {"rerank_text": "vector"},
                      "batch_size": BATCH_SIZE, "ignore_failure": False}
    assert bow == {"tag": "esrerank-bow", "model_id": "b1", "field_map": {"rerank_text": "bow"},
                   "batch_size": BATCH_SIZE, "ignore_failure": False}
    assert "prune_type" not in bow
    assert clean["source"] == CLEAN_SCRIPT and clean["params"]["cosine"] is True
    manhattan = pipeline_body(vector_model="v1", bow_model="b1", neural_similarity="manhattan")
    assert next(iter(manhattan["processors"][-1].values()))["params"]["cosine"] is False


def test_the_trusted_pattern_matches_exactly_the_embed_url():
    import re

    pattern = embed_url_regex(URL + "/")
    assert re.fullmatch(pattern, f"{URL}/v1/encode")
    assert not re.fullmatch(pattern, f"{URL}/v1/rerank") and not re.fullmatch(pattern, f"{URL}/v1/encodex")


def test_only_an_unreachable_sidecar_stops_the_run():
    unreachable = "status_exception: Error communicating with remote model: Connection refused: /127.0.0.1:9"
    assert sidecar_unreachable(500, unreachable) == unreachable
    refused = 'status_exception: Error from remote service: {"error": "texts.0: text must not be empty"}'
    assert sidecar_unreachable(400, refused) is None
    assert sidecar_unreachable(429, "es_rejected_execution_exception: rejected execution") is None


def test_the_failure_line_names_the_sidecar_and_the_pipeline():
    embedding = {"pipeline": "questions-embed", "sidecar": "http://127.0.0.1:8080"}
    reason = "status_exception: Error communicating with remote model: Connection refused: /127.0.0.1:8080"
    line = failure_line(embedding, ["mapper_parsing_exception: x", reason], 50)
    assert line is not None and "\n" not in line
    assert line.startswith("OpenSearch's ingest pipeline questions-embed could not embed through the sidecar "
                           "at http://127.0.0.1:8080/v1/encode (status_exception: Error communicating")
    assert line.endswith("50 questions were not indexed (none is stored without its vector); start the "
                         "sidecar and re-run with --resume")
    assert failure_line(embedding, ["mapper_parsing_exception: x"], 1) is None
