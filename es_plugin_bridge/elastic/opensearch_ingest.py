"""OpenSearch embeds at ingest (``es setup --embed-at-ingest``): two ml-commons remote models on the
sidecar's ``/v1/encode`` and an ingest pipeline, the index's ``default_pipeline``, that fills a question's
``rerank_text``, ``vector`` and ``bow`` — the twin of Elasticsearch's (``elastic/ingest_pipeline.py``).

Read from the source of ml-commons 2.19.1.0 and neural-search 2.19.1.0 (the plugins of the test node):

- *Request.* neural-search's processors call the model with a ``TextDocsInputDataSet``
  (``MLCommonsClientAccessor.inferenceSentences``); ``connector.pre_process.default.embedding``
  (``MLPreProcessFunction`` → ``OpenAIEmbeddingPreProcessFunction``) turns the texts into
  ``parameters.input``, a JSON array written by Gson, so the body ``{"texts": ${parameters.input}}`` is
  the sidecar's ``EncodeRequest``. ``RemoteConnectorExecutor.calculateChunkSize`` sends all the texts of
  a processor batch in one call for a known pre-process function. ``HttpConnector.createPayload`` fills
  the body with commons-text, which substitutes inside inserted values too, and ``Connector.
  validatePayload`` refuses any ``${parameters`` left: ``rerank_text`` already writes ``${`` as
  ``&#36;{`` (``template_safe``), so no text can hold one.
- *Vector.* ``connector.post_process.default.embedding`` (``EmbeddingPostProcessFunction``) reads
  the response at the connector parameter ``response_filter`` (``ConnectorUtils.processOutput``
  prefers it to the function's default ``$[*]``): ``$.embeddings[*].vector``, one FLOAT32 tensor per
  text, which ``text_embedding`` (``TextEmbeddingProcessor``) writes to ``vector`` (its ``field_map``
  ``rerank_text`` → ``vector``; ``InferenceProcessor.buildNLPResult``).
- *BOW terms.* ``text_embedding`` writes only the dense vector, and modes ``vectors`` and ``hybrid``
  score ``bow`` too, so a second model feeds neural-search's ``sparse_encoding`` processor
  (``SparseEncodingProcessor``), which writes a token → weight map into ``bow`` (``rank_features``).
  It reads ``dataAsMap.response``, a list of one map per text (``TokenWeightUtil``); the map must be
  the sidecar's ``bow_tokens`` → ``bow_weights`` (feature keys, positive values), which no JSON path
  can pair, so a Painless ``post_process_function`` writes that model tensor as JSON
  (``ScriptUtils.executePostProcessFunction``: the response's fields are the script's ``params``; a
  JSON answer is parsed by ``ModelTensor.parser``). No pruning (``prune_type`` absent: ``NONE``).
- *Zero vector.* The k-NN plugin refuses one under ``cosinesimil``; the last processor, Elasticsearch's
  clean-up script (``ingest_pipeline.CLEAN_SCRIPT``), drops it and an empty bag, as the client does.
  The ``script`` processor is ingest-common's, a module of every OpenSearch distribution.
- *Batches.* Both processors take ``batch_size`` (``AbstractBatchingProcessor``): a bulk request's
  documents go to the sidecar :data:`BATCH_SIZE` at a time, one ``/v1/encode`` call per processor;
  neural-search sorts a batch's texts by length before the call (``InferenceProcessor.subBatchExecute``).
- *Failure.* No processor ignores failures: a document whose embedding fails is not indexed, and its
  bulk item carries ml-commons' reason (``MLSdkAsyncHttpResponseHandler``: "Error communicating with
  remote model: …" when the sidecar cannot be reached or times out, status 500; "Error from remote
  service: …" with the sidecar's own status when it refuses).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from es_plugin_bridge.elastic.ingest_pipeline import CLEAN_SCRIPT, text_processors
from es_plugin_bridge.elastic.mappings import BOW_FIELD, RERANK_FIELD, VECTOR_FIELD
from es_plugin_bridge.elastic.opensearch_ml import register_remote_model, request, trust, url_regex
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.request_deadline import HEADER, header_value

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.opensearch_client import OpenSearchClient
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient

EMBED_PATH = "/v1/encode"
#: Texts per sidecar call (each processor's ``batch_size``): ``es index``'s own default batch.
BATCH_SIZE = 200
#: Seconds, as ml-commons reads them (``Duration.ofSeconds``). A batch of 200 long questions takes
#: seconds to encode uncached on two cores; the rerank connector's 5 s is for a search's window.
CLIENT_CONFIG = {"connection_timeout": 2, "read_timeout": 60, "max_connection": 30}
EMBED_REQUEST = '{"texts": ${parameters.input}}'
VECTOR_FILTER = "$.embeddings[*].vector"
DEFAULT_POST_PROCESS = "connector.post_process.default.embedding"
#: ml-commons' reasons when the remote model could not be called (MLSdkAsyncHttpResponseHandler).
UNREACHABLE = "Error communicating with remote model"
REFUSED = "Error from remote service"

#: Painless: the sidecar's answer (``params``) as one ModelTensor JSON, ``dataAsMap.response`` a list
#: of ``{feature key: weight}`` per text. Keys are JSON-quoted here (``"``, ``\\`` and the control
#: characters escaped); ``Double.toString`` writes each weight as a JSON number with every digit.
BOW_POST_PROCESS = (
    "String quoted(String s) { StringBuilder b = new StringBuilder(); b.append((char) 34); "
    "for (int i = 0; i < s.length(); i++) { char c = s.charAt(i); "
    "if (c == (char) 34 || c == (char) 92) { b.append((char) 92).append(c); } "
    "else if (c < (char) 32) { String h = Integer.toHexString((int) c); b.append((char) 92).append('u'); "
    "for (int k = h.length(); k < 4; k++) { b.append('0'); } b.append(h); } "
    "else { b.append(c); } } "
    "return b.append((char) 34).toString(); } "
    "StringBuilder out = new StringBuilder('{\"name\":\"response\",\"dataAsMap\":{\"response\":['); "
    "for (int n = 0; n < params.embeddings.size(); n++) { def e = params.embeddings[n]; "
    "if (n > 0) { out.append(','); } out.append('{'); "
    "for (int i = 0; i < e.bow_tokens.size(); i++) { if (i > 0) { out.append(','); } "
    "out.append(quoted(e.bow_tokens[i])).append(':').append(e.bow_weights[i].toString()); } "
    "out.append('}'); } "
    "return out.append(']}}').toString();"
)


def embed_url_regex(sidecar_url: str) -> str:
    """The pattern that trusts exactly the sidecar's ``/v1/encode``."""
    return url_regex(sidecar_url, EMBED_PATH)


def connector_body(sidecar_url: str, token: str, output: str) -> dict[str, Any]:
    """The HTTP connector of one embedding model: ``output`` ``vector`` (the neural vector, ml-commons'
    default embedding functions) or ``bow`` (the weighted bag of words, :data:`BOW_POST_PROCESS`)."""
    if output not in (VECTOR_FIELD, BOW_FIELD):
        raise ValueError(f"no embedding connector for {output!r}")
    vector = output == VECTOR_FIELD
    return {
        "name": f"esrerank-sidecar-embed-{output}",
        "description": f"The esrerank sidecar's /v1/encode: each text's {output} "
                       + ("(neural vector)" if vector else "(weighted bag of words, rank_features keys)"),
        "version": "1",
        "protocol": "http",
        "parameters": {"response_filter": VECTOR_FILTER} if vector else {},
        "credential": {"api_key": token},
        "client_config": dict(CLIENT_CONFIG),
        "actions": [{
            "action_type": "predict",
            "method": "POST",
            "url": f"{sidecar_url.rstrip('/')}{EMBED_PATH}",
            # The sidecar drops the work of a call ml-commons has stopped waiting for (serving.deadline).
            "headers": {"Authorization": "Bearer ${credential.api_key}", "Content-Type": "application/json",
                        HEADER: header_value(CLIENT_CONFIG["read_timeout"])},
            "request_body": EMBED_REQUEST,
            "pre_process_function": "connector.pre_process.default.embedding",
            "post_process_function": DEFAULT_POST_PROCESS if vector else BOW_POST_PROCESS,
        }],
    }


def pipeline_body(*, vector_model: str, bow_model: str, neural_similarity: str, title_field: str = "title",
                  body_field: str = "body", user_text: bool = False) -> dict[str, Any]:
    """``PUT _ingest/pipeline/<id>``: ``rerank_text`` from title and body (Elasticsearch's Painless, so a
    plain ``_bulk`` of ``title``, ``body`` and ``text`` suffices), then ``vector``, ``bow``, clean-up.
    ``user_text`` (a user's index, ``es setup --from-index``) also fills ``text`` from their title and
    body fields, as on Elasticsearch (``ingest_pipeline.text_processors``)."""
    return {
        "description": "esrerank: rerank_text, vector and bow of a question, embedded by the sidecar "
                       "through ml-commons (neural-search text_embedding and sparse_encoding)",
        "processors": [
            *text_processors(title_field, body_field, user_text),
            {"text_embedding": {"tag": "esrerank-vector", "model_id": vector_model,
                                "field_map": {RERANK_FIELD: VECTOR_FIELD}, "batch_size": BATCH_SIZE,
                                "ignore_failure": False}},
            {"sparse_encoding": {"tag": "esrerank-bow", "model_id": bow_model,
                                 "field_map": {RERANK_FIELD: BOW_FIELD}, "batch_size": BATCH_SIZE,
                                 "ignore_failure": False}},
            {"script": {"tag": "esrerank-clean", "lang": "painless", "source": CLEAN_SCRIPT,
                        "params": {"cosine": neural_similarity == "cosine", "vector": VECTOR_FIELD,
                                   "bow": BOW_FIELD}}},
        ],
    }


def pipeline_id(index: str) -> str:
    return f"{index}-embed"


def register_ingest_embedding(client: OpenSearchClient, index: str, sidecar_url: str, token: str | None,
                              neural_similarity: str, *, title_field: str = "title", body_field: str = "body",
                              user_text: bool = False) -> dict[str, str]:
    """Trust ``/v1/encode``, register and deploy the ``vector`` and ``bow`` models, put the ingest
    pipeline and try it on one question (so a sidecar OpenSearch cannot reach fails ``es setup``, not
    every batch of ``es index``); the ids, as ``_meta.esrerank.embedding`` keeps them."""
    trust(client, [embed_url_regex(sidecar_url)])
    ids: dict[str, str] = {}
    for output in (VECTOR_FIELD, BOW_FIELD):
        connector, model = register_remote_model(
            client, connector_body(sidecar_url, token or "no-token", output), f"esrerank-{index}-{output}",
            f"The {output} of a question, embedded by the esrerank sidecar")
        ids[f"{output}_connector"], ids[f"{output}_model"] = connector, model
    pipeline = pipeline_id(index)
    request(client, f"creating ingest pipeline {pipeline}", client.raw.ingest.put_pipeline, id=pipeline,
            body=pipeline_body(vector_model=ids["vector_model"], bow_model=ids["bow_model"],
                          neural_similarity=neural_similarity, title_field=title_field, body_field=body_field,
                          user_text=user_text))
    _try_pipeline(client, pipeline, index, sidecar_url, title_field, body_field)
    return {"pipeline": pipeline, "sidecar": sidecar_url.rstrip("/"), **ids}


def _try_pipeline(client: OpenSearchClient, pipeline: str, index: str, sidecar_url: str,
                  title_field: str = "title",
                  body_field: str = "body") -> None:
    """``_simulate`` the pipeline on one question (in the title and body fields it reads, dotted paths
    nested); UserError naming the sidecar when it embeds nothing."""
    source: dict[str, Any] = {}
    for path, text in ((title_field, "How do I install Ubuntu?"), (body_field, "<p>From a USB stick.</p>")):
        *parents, leaf = path.split(".")
        node = source
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = text
    doc = {"_index": index, "_id": "esrerank-check", "_source": source}
    answer = request(client, f"trying ingest pipeline {pipeline}", client.raw.ingest.simulate, id=pipeline,
                     body={"docs": [doc]})
    result = (answer.get("docs") or [{}])[0]
    source = (result.get("doc") or {}).get("_source") or {}
    if VECTOR_FIELD not in source or BOW_FIELD not in source:
        error = result.get("error") or {}
        reason = error.get("reason") or f"no {VECTOR_FIELD} or {BOW_FIELD} in {sorted(source)}"
        raise UserError(f"OpenSearch could not embed through the sidecar at {sidecar_url.rstrip('/')}"
                        f"{EMBED_PATH} (ingest pipeline {pipeline}): {reason}")


def ingest_stop_rule(client: SearchClient) -> tuple[Any, Any]:
    """``(stop_on, explain)`` for ``index_questions`` when the index embeds at ingest: OpenSearch's rule
    (stop at the first batch its remote model could not embed, and say so in one line); Elasticsearch
    keeps the general retry rule (None, None)."""
    from es_plugin_bridge.elastic.cluster.dialect import for_client

    return for_client(client, elasticsearch=(None, None), opensearch=(sidecar_unreachable, failure_line))


def sidecar_unreachable(status: int | None, reason: str) -> str | None:
    """For ``index_questions``' ``stop_on``: a bulk item OpenSearch failed because ml-commons could not
    reach the sidecar (down, or slower than ``read_timeout``) stops the run at once — every further
    batch would fail the same way after the same wait — with that reason; anything else is None."""
    return reason if UNREACHABLE in reason else None


def refused_by_sidecar(status: int | None, reason: str) -> bool:
    """For ``index_questions``' ``item_refused``: the sidecar refused the text of a processor batch (400,
    413, 422: e.g. one over its length limit). neural-search embeds a bulk's documents in one call and
    fails every one of them with that reason (``InferenceProcessor.subBatchExecute``), so they are
    resent in halves until the one the sidecar refuses fails alone."""
    return REFUSED in reason and status in (400, 413, 422)


def failure_line(embedding: dict[str, str], reasons: list[str], failed: int) -> str | None:
    """The one-line error of an ``es index`` run whose items OpenSearch could not send to the sidecar,
    naming it; None otherwise (a question the sidecar refused is listed in the report with the
    sidecar's reason: the sidecar is running, and the run's generic line applies)."""
    reason = next((r for r in reasons if UNREACHABLE in r), None)
    if reason is None:
        return None
    url = f"{embedding.get('sidecar', 'the sidecar')}{EMBED_PATH}"
    return (f"OpenSearch's ingest pipeline {embedding.get('pipeline')} could not embed through the sidecar "
            f"at {url} ({reason}): {failed} questions were not indexed (none is stored without its "
            "vector); start the sidecar and re-run with --resume")
