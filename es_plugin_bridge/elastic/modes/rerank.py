"""Mode ``rerank`` (OpenSearch): OpenSearch calls the sidecar itself, through the ml-commons connector,
remote model and ``rerank`` search pipeline that ``es setup`` registers (neural-search's ``rerank``
response processor, whose connector calls ``/v1/rerank``); one request. The processor replaces each
hit's score by the sidecar's, so the order is the model's own (``model``), not the β fusion of the
Elasticsearch modes.

The bodies are those of ``mappings/opensearch/`` (``apply.py`` sends the same; a test checks they stay
equal): the connector calls ``/v1/rerank`` with ml-commons' Cohere pre- and post-processing, read and
connect timeouts set (ml-commons 2.19's defaults are read as 30000 seconds), and the pipeline's
``rerank`` processor sends each hit's ``rerank_text`` and has ``ignore_failure``, so a sidecar that is
down or slow leaves the first stage's order. Mode ``rerank`` asks for ``verbose_pipeline``, whose
``processor_results`` say whether the processor ran, so such an answer is marked not reranked, with
OpenSearch's reason, as the bridge marks its own fallback. On several shards the processor sees the
merged top window (the coordinating node runs response processors), scored with global statistics
(``elastic/cluster/shards.py``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.elastic import queries
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo, call
from es_plugin_bridge.elastic.mappings import RERANK_FIELD
from es_plugin_bridge.elastic.modes import ModeSpec, register_mode
from es_plugin_bridge.elastic.modes.base import Ask, Mode, ModeOptions, ModeResult, hits_of
from es_plugin_bridge.elastic.opensearch_ml import (
    DEPLOY_SECONDS,
    register_remote_model,
    request,
    trust,
    url_regex,
)
from es_plugin_bridge.request_deadline import HEADER, header_value
from es_plugin_bridge.text.sidecar_text import model_part, rerank_text

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.opensearch_client import OpenSearchClient
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.run_cleanup import RunCleanup
    from es_plugin_bridge.elastic.setup import IndexMeta

#: ml-commons' connector client timeouts, in seconds (``HttpJsonConnectorExecutor``: Duration.ofSeconds).
CLIENT_CONFIG = {"connection_timeout": 2, "read_timeout": 5, "max_connection": 30}
#: ``all_unscored=refuse`` (``serving/schemas.py``): a window of only blank documents, which neural-search
#: sends for hits whose ``_source`` leaves out ``rerank_text``, fails the processor (first-stage order and
#: scores, the reason in ``verbose_pipeline``) instead of scoring every hit 0.0.
RERANK_PATH = "/v1/rerank?all_unscored=refuse"


def trusted_url_regex(sidecar_url: str) -> str:
    """A regex matching exactly the connector's URL (ml-commons matches the whole URL)."""
    return url_regex(sidecar_url, RERANK_PATH)


def connector_body(sidecar_url: str, token: str) -> dict[str, Any]:
    return {
        "name": "esrerank-sidecar",
        "description": "The esrerank sidecar's Cohere-shaped /v1/rerank (scores are P(relevant) in [0, 1])",
        "version": "1",
        "protocol": "http",
        "parameters": {},
        "credential": {"api_key": token},
        "client_config": dict(CLIENT_CONFIG),
        "actions": [{
            "action_type": "predict",
            "method": "POST",
            "url": f"{sidecar_url.rstrip('/')}{RERANK_PATH}",
            # The sidecar drops the work of a call ml-commons has stopped waiting for (serving.deadline).
            "headers": {"Authorization": "Bearer ${credential.api_key}", "Content-Type": "application/json",
                        HEADER: header_value(CLIENT_CONFIG["read_timeout"])},
            "request_body": '{ "documents": ${parameters.documents}, "query": "${parameters.query}", '
                            '"top_n": ${parameters.top_n} }',
            "pre_process_function": "connector.pre_process.cohere.rerank",
            "post_process_function": "connector.post_process.cohere.rerank",
        }],
    }


def pipeline_body(model_id: str) -> dict[str, Any]:
    return {
        "description": "Rerank the hits of a question search with the esrerank sidecar (title and body: "
                       "rerank_text); when the sidecar fails or is slow, the hits keep the first-stage order",
        "response_processors": [{"rerank": {"ml_opensearch": {"model_id": model_id},
                                            "context": {"document_fields": [RERANK_FIELD]},
                                            "ignore_failure": True}}],
    }


def register_rerank(client: OpenSearchClient, index: str, sidecar_url: str, token: str | None,
                    deploy_timeout: float = DEPLOY_SECONDS) -> dict[str, str]:
    """Trust the sidecar's URL (beside those already trusted), create the connector and the remote
    model, wait until it is deployed, and put the search pipeline ``<index>-rerank``; returns their ids."""
    trust(client, [trusted_url_regex(sidecar_url)])
    connector_id, model_id = register_remote_model(
        client, connector_body(sidecar_url, token or "no-token"), f"esrerank-{index}",
        "Question-similarity reranker served by the esrerank sidecar", deploy_timeout)
    pipeline = f"{index}-rerank"
    request(client, f"creating search pipeline {pipeline}", client.raw.search_pipeline.put, id=pipeline,
            body=pipeline_body(model_id))
    return {"connector_id": connector_id, "model_id": model_id, "search_pipeline": pipeline}


class RerankMode(Mode):
    """OpenSearch's ``rerank`` processor reorders the first stage's window by the sidecar's scores."""

    name = "rerank"

    def __init__(self, stage: ElasticsearchFirstStage, window: int, pipeline: str) -> None:
        super().__init__(stage, {}, window)
        self.pipeline = pipeline

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        query, k, only = ask.query, ask.k, ask.only
        tokens = self.stage.tokens(query)
        first = queries.first_stage_query(self.stage.similarity, tokens, only=only, exclude=ask.exclude)
        size = max(k, min(self.window, len(only))) if only is not None else ask.window
        ext = {"rerank": {"query_context": {"query_text": rerank_text(model_part(query))}}}
        body = {"query": first, "ext": ext}
        # Two rules of neural-search 2.19.1's RerankProcessor, found on a real node: it reads the
        # document fields from each hit's _source in the answer (so rerank_text must be in it), and it
        # reads the total hit count, which is null, failing the processor, under track_total_hits: false.
        start = time.perf_counter()
        answer = call(f"searching {self.index} (mode rerank)", self.client.search, index=self.index,
                      size=size, source={"includes": [*self.stage.fields, RERANK_FIELD]},
                      search_pipeline=self.pipeline, verbose_pipeline=True, **self.stage.search_type, **body)
        timings["search"] = 1000 * (time.perf_counter() - start)
        self.stage.remember(answer["hits"]["hits"])
        failed = [r for r in answer.get("processor_results", []) if r.get("status") == "fail"]
        reason = f"OpenSearch's rerank processor failed: {failed[0].get('error')}" if failed else None
        return ModeResult(hits_of(answer)[:k], not failed, fallback_reason=reason, request=body)


def build_rerank(stage: ElasticsearchFirstStage, meta: IndexMeta, options: ModeOptions) -> Mode:
    """Mode ``rerank``'s registry builder: the search pipeline ``es setup`` put for the index."""
    return RerankMode(stage, options.window, str(meta.search_pipeline))  # rerank_rule checked it


def rerank_rule(cluster: ClusterInfo, meta: IndexMeta) -> str | None:
    """The search pipeline ``es setup`` put for the index, which the mode names in every search."""
    if meta.search_pipeline:
        return None
    return "the index has no rerank search pipeline; run `esrerank es setup` against this OpenSearch cluster"


def prepare_rerank(client: OpenSearchClient, index: str, meta: IndexMeta, sidecar_url: str, token: str | None,
                   cluster: ClusterInfo, stack: RunCleanup) -> IndexMeta:
    """A throw-away run's connector, model and search pipeline, removed after it
    in this order (ml-commons refuses to delete a deployed model, and a connector a model uses)."""
    registered = register_rerank(client, index, sidecar_url, token)
    model, connector = registered["model_id"], registered["connector_id"]
    pipeline = registered["search_pipeline"]
    ml = client.raw.plugins.ml
    steps = [("DELETE", f"/_search/pipeline/{pipeline}", f"search pipeline {pipeline}",
              client.raw.search_pipeline.delete, {"id": pipeline}),
             ("POST", f"/_plugins/_ml/models/{model}/_undeploy", f"deployment of model {model}",
              ml.undeploy_model, {"model_id": model}),
             ("DELETE", f"/_plugins/_ml/models/{model}", f"model {model}",
              ml.delete_model, {"model_id": model}),
             ("DELETE", f"/_plugins/_ml/connectors/{connector}", f"connector {connector}",
              ml.delete_connector, {"connector_id": connector})]
    for method, path, what, fn, kwargs in reversed(steps):  # the stack removes the last registered first
        stack.remove(what, method, path, fn, **kwargs)
    return dataclasses.replace(meta, search_pipeline=registered["search_pipeline"])


register_mode(ModeSpec(
    "rerank", build_rerank,
    "OpenSearch calls the sidecar (search pipeline with a rerank processor)",
    engines=("opensearch",),
    # plugins.ml_commons.connector.private_ip_enabled (a sidecar on a private address): 2.15
    requires={"opensearch": {"version": {2: (2, 15)}, "version_text": "2.15+"}}, ranker="model", order=5,
    suggest=1, prepare=prepare_rerank, rule=rerank_rule,
    sidecar="OpenSearch, through the search pipeline's `rerank` processor and an ml-commons connector "
            "(`/v1/rerank`)"))
