"""OpenSearch's tutorial "Reranking by a field using an externally hosted cross-encoder model" (2.18+:
``_search-plugins/search-relevance/rerank-by-field-cross-encoder.md`` of documentation-website) on a real
OpenSearch 2.19.1 node, against a live sidecar, for the bi-encoder (bow-cnn) and the cross-encoder export
(issue 48, finding 12).

Every body is the tutorial's as published but for what points at SageMaker: the connector's ``url`` (the
sidecar's ``/v1/text-pair``), and its SigV4 credential (``protocol: aws_sigv4`` and the AWS keys) replaced
by the sidecar's bearer token (``protocol: http``, ``credential.api_key`` and an ``Authorization``
header). The model is registered without a deploy, as published (ml-commons deploys a remote model on
its first predict), the six NYC documents are bulk-indexed, the pipeline (``ml_inference`` with
``one_to_one``, ``text`` ← ``facts``, ``text_pair`` ← ``$._request.query.multi_match.query``, ``rank_score``
← ``$.score``, then ``rerank.by_field``) is put as published, and the search is the tutorial's. The rule
on every search: the hits are the first stage's, each ``_score`` is what the sidecar's ``/v1/text-pair``
answers for (``facts``, query) asked directly, ``previous_score`` is the BM25 score, and the order is by
those scores. The same pipeline is then run over real SemEval-2016 dev questions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from es_commands import TOKEN
from live_sidecar import post, serve

from es_plugin_bridge.data.spec import read_spec

pytestmark = [pytest.mark.engine, pytest.mark.slow]

SEMEVAL_DEV = (Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "semeval2016-task3"
               / "SemEval2016-Task3-CQA-QL-dev.xml")
TRUSTED = "plugins.ml_commons.trusted_connector_endpoints_regex"
#: Step 1's request body, character for character.
REQUEST_BODY = ("{ \"inputs\": { \"text\": \"${parameters.text}\", "
                "\"text_pair\": \"${parameters.text_pair}\" }}")
NYC = [
    {"borough": "Queens", "area_name": "Astoria", "description": "Astoria is a neighborhood in the western part of Queens, New York City, known for its diverse community and vibrant cultural scene.", "population": 93000, "facts": "Astoria is home to many artists and has a large Greek-American community. The area also boasts some of the best Mediterranean food in NYC."},  # noqa: E501
    {"borough": "Queens", "area_name": "Flushing", "description": "Flushing is a neighborhood in the northern part of Queens, famous for its Asian-American population and bustling business district.", "population": 227000, "facts": "Flushing is one of the most ethnically diverse neighborhoods in NYC, with a large Chinese and Korean population. It is also home to the USTA Billie Jean King National Tennis Center."},  # noqa: E501
    {"borough": "Brooklyn", "area_name": "Williamsburg", "description": "Williamsburg is a trendy neighborhood in Brooklyn known for its hipster culture, vibrant art scene, and excellent restaurants.", "population": 150000, "facts": "Williamsburg is a hotspot for young professionals and artists. The neighborhood has seen rapid gentrification over the past two decades."},  # noqa: E501
    {"borough": "Manhattan", "area_name": "Harlem", "description": "Harlem is a historic neighborhood in Upper Manhattan, known for its significant African-American cultural heritage.", "population": 116000, "facts": "Harlem was the birthplace of the Harlem Renaissance, a cultural movement that celebrated Black culture through art, music, and literature."},  # noqa: E501
    {"borough": "The Bronx", "area_name": "Riverdale", "description": "Riverdale is a suburban-like neighborhood in the Bronx, known for its leafy streets and affluent residential areas.", "population": 48000, "facts": "Riverdale is one of the most affluent areas in the Bronx, with beautiful parks, historic homes, and excellent schools."},  # noqa: E501
    {"borough": "Staten Island", "area_name": "St. George", "description": "St. George is the main commercial and cultural center of Staten Island, offering stunning views of Lower Manhattan.", "population": 15000, "facts": "St. George is home to the Staten Island Ferry terminal and is a gateway to Staten Island, offering stunning views of the Statue of Liberty and Ellis Island."},  # noqa: E501
]


def tutorial_connector(url: str, key: str) -> dict:
    """Step 1 as published but for ``url`` and the credential (SigV4's keys → the sidecar's token)."""
    return {
        "name": "SageMaker cross-encoder model",
        "description": "Test connector for SageMaker cross-encoder hosted model",
        "version": 1,
        "protocol": "http",  # published: aws_sigv4 (signs with the AWS keys)
        "credential": {"api_key": key},  # published: access_key, secret_key, session_token
        "parameters": {"region": "<REGION>", "service_name": "sagemaker"},
        "actions": [{
            "action_type": "predict",
            "method": "POST",
            "url": url,
            "headers": {"content-type": "application/json",
                        "Authorization": "Bearer ${credential.api_key}"},  # added: the sidecar's token
            "request_body": REQUEST_BODY,
        }],
    }


def tutorial_pipeline(model_id: str) -> dict:
    """Step 4 as published (one processor object holding ml_inference and rerank)."""
    return {"response_processors": [{
        "ml_inference": {
            "tag": "ml_inference",
            "description": "This processor runs ml inference during search response",
            "model_id": model_id,
            "function_name": "REMOTE",
            "input_map": [{"text": "facts", "text_pair": "$._request.query.multi_match.query"}],
            "output_map": [{"rank_score": "$.score"}],
            "full_response_path": False,
            "model_config": {},
            "ignore_missing": False,
            "ignore_failure": False,
            "one_to_one": True,
        },
        "rerank": {"by_field": {"target_field": "rank_score", "remove_target_field": True,
                                "keep_previous_score": True}},
    }]}


@pytest.fixture(scope="module", params=["bow-cnn", "cross-encoder"])
def served(request, exported, tmp_path_factory):
    cross = request.param == "cross-encoder"
    model = request.getfixturevalue("pair_model")[1] if cross else exported["bow-cnn"]
    with serve(model, TOKEN, tmp_path_factory.mktemp("token")) as url:
        yield request.param, url


@pytest.fixture(scope="module")
def tutorial(opensearch, served):
    """Steps 1-4 on the node: connector, model (registered, not deployed), the NYC index, the pipeline."""
    name, url = served
    settings = opensearch.ok("GET", "/_cluster/settings?include_defaults=true&flat_settings=true")
    trusted = next((settings[s][TRUSTED] for s in ("persistent", "transient", "defaults")
                    if TRUSTED in settings.get(s, {})), [])
    trusted = [trusted] if isinstance(trusted, str) else list(trusted)
    opensearch.ok("PUT", "/_cluster/settings", {"persistent": {
        TRUSTED: [*trusted, f"^{url}/v1/text-pair$".replace(".", "\\.")],
        "plugins.ml_commons.connector.private_ip_enabled": True,
        "plugins.ml_commons.only_run_on_ml_node": False}})
    connector = opensearch.ok("POST", "/_plugins/_ml/connectors/_create",
                              tutorial_connector(f"{url}/v1/text-pair", TOKEN))
    model = opensearch.ok("POST", "/_plugins/_ml/models/_register", {
        "name": "Cross encoder model", "version": "1.0.1", "function_name": "remote",
        "description": "Using a SageMaker endpoint to apply a cross encoder model",
        "connector_id": connector["connector_id"]})
    model_id = model.get("model_id") or _task_model(opensearch, model["task_id"])
    index, pipeline = f"nyc_areas_{name.replace('-', '_')}", f"my_pipeline_{name.replace('-', '_')}"
    lines = "".join(f'{{"index": {{"_id": {i}}}}}\n' + json.dumps(doc) + "\n"
                    for i, doc in enumerate(NYC, start=1))
    assert opensearch.ok("POST", f"/{index}/_bulk?refresh=true", lines.encode())["errors"] is False
    opensearch.ok("PUT", f"/_search/pipeline/{pipeline}", tutorial_pipeline(model_id))
    return url, index, pipeline


def _task_model(opensearch, task_id: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        task = opensearch.ok("GET", f"/_plugins/_ml/tasks/{task_id}")
        if task.get("model_id"):
            return task["model_id"]
        assert time.monotonic() < deadline, task
        time.sleep(0.5)


def _reranked_as_the_sidecar_scores_each_hit(opensearch, url: str, index: str, pipeline: str, query: str,
                                             fields: list[str]) -> list[dict]:
    body = {"query": {"multi_match": {"query": query, "fields": fields}}}
    first = opensearch.ok("POST", f"/{index}/_search", body)["hits"]["hits"]
    hits = opensearch.ok("POST", f"/{index}/_search?search_pipeline={pipeline}", body)["hits"]["hits"]
    assert first, query
    assert sorted(h["_id"] for h in hits) == sorted(h["_id"] for h in first)
    bm25 = {h["_id"]: h["_score"] for h in first}
    for hit in hits:
        status, answer = post(f"{url}/v1/text-pair", {"inputs": {"text": hit["_source"]["facts"],
                                                                 "text_pair": query}}, TOKEN)
        assert status == 200 and answer["label"] == "LABEL_0", answer
        assert hit["_score"] == pytest.approx(answer["score"], abs=1e-6), (query, hit["_id"])
        assert hit["_source"]["previous_score"] == pytest.approx(bm25[hit["_id"]], rel=1e-6)
        assert "rank_score" not in hit["_source"]  # remove_target_field
    scores = [h["_score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    return hits


def test_the_tutorials_search_is_reranked_by_the_sidecar(opensearch, tutorial):
    url, index, pipeline = tutorial
    query = "artists art creative community"
    hits = _reranked_as_the_sidecar_scores_each_hit(opensearch, url, index, pipeline, query,
                                                    ["description", "facts"])
    assert {h["_source"]["area_name"] for h in hits} == {"Astoria", "Williamsburg", "Harlem"}  # as published
    assert all(0.0 <= h["_score"] <= 1.0 for h in hits)


def test_the_tutorials_pipeline_reranks_real_semeval_questions(opensearch, tutorial):
    url, _, pipeline = tutorial
    data = read_spec(f"semeval:{SEMEVAL_DEV}").queries[:4]
    index = f"{tutorial[1]}_semeval"
    docs = {c.id: c for rq in data for c in rq.candidates}
    lines = "".join(json.dumps({"index": {"_id": i}}) + "\n"
                    + json.dumps({"title": c.title, "facts": f"{c.title} {c.body}"}) + "\n"
                    for i, c in docs.items())
    assert opensearch.ok("POST", f"/{index}/_bulk?refresh=true", lines.encode())["errors"] is False
    moved = 0
    for rq in data:
        hits = _reranked_as_the_sidecar_scores_each_hit(opensearch, url, index, pipeline, rq.query.title,
                                                        ["title", "facts"])
        previous = sorted(hits, key=lambda h: -h["_source"]["previous_score"])
        moved += [h["_id"] for h in hits] != [h["_id"] for h in previous]
    assert moved >= 1  # the sidecar reorders the first stage
