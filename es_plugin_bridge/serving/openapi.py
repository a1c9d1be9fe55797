"""``GET /openapi.json``: the API described from the same pydantic models that validate it.

Each server describes itself: the first stages its model has β for (``first_stage``'s enum) and its
``--max-documents`` (``maxItems``) are in the document, so a request valid against it is accepted.
What JSON Schema cannot say (rules across fields: :data:`CROSS_FIELD_RULES`) the document states.

Served with a token, every operation requires it (``security``) but ``/healthz`` and ``/readyz``, which
override it with ``security: []``: a generated client then sends the token where the server asks it.
Served without one, the document says so by declaring no requirement (and no 401s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic.json_schema import models_json_schema

from es_plugin_bridge import __version__
from es_plugin_bridge.serving.cohere_embed import (
    CohereEmbedByTypeResponse,
    CohereEmbedFloatsResponse,
    CohereEmbedV1Request,
    CohereEmbedV2Request,
)
from es_plugin_bridge.serving.routes_pair import MAX_PAIRS, PairScore, TextPairRequest
from es_plugin_bridge.serving.schemas import (
    EncodeRequest,
    EncodeResponse,
    ErrorResponse,
    RerankParams,
    RerankRequest,
    RerankResponse,
    RerankV2Request,
    RerankV2Response,
)

_REF = "#/components/schemas/{model}"
LINEAR_DESCRIPTION = (
    "Results are best first, one per document (cut to top_n when sent). By default relevance_score is "
    "P(relevant) in [0, 1]. `?score=linear[&first_stage=bm25|lmdirichlet]` is for Elasticsearch's "
    "`linear` retriever (first stage with weight β_first_stage and normalizer minmax, this reranker "
    "with weight 1 and no normalizer): relevance_score is Σ β_c·(x_c − low_c) over the bow and "
    "neural similarities (low_c: −1 for cosine and learned-weight BOW, 0 for Manhattan and IDF BOW), "
    "≥ 0, so Elasticsearch's β_first_stage·minmax(first stage) + score + 1 is the model's fused score "
    "plus one constant and orders documents exactly as the fused score. It refuses first_stage_scores. "
    "A document that is null, blank (empty or whitespace only) or over 100,000 characters is not scored: "
    "it gets relevance_score 0.0 (the lowest of either scale), comes after every scored document, "
    "`explain.unscored` names why and /metrics counts it (esrerank_documents_unscored_total by reason); "
    "the others are scored as if it were not there. A document of another JSON type is a 400. "
    "relevance_score has at most 12 significant digits (at most 18 characters: the longest float literal "
    "OpenSearch's ml-commons reads as a Double); the order comes from the unrounded scores."
)


COHERE_EMBED_DESCRIPTION = (
    "Cohere's embed request and answer. input_type is accepted and gives the same vector for every value. "
    "truncate: END (default) is the model's own cut, as /v1/encode; START drops whole words from the "
    "start until the text fits; NONE answers 400 naming a text the model would cut. embedding_types: "
    "float only (the others are a 400). The vectors are /v1/encode's for the same texts."
)

TEXT_PAIR_DESCRIPTION = (
    "Hugging Face's text-classification request for a sentence pair, as OpenSearch's ml_inference "
    "connector of the tutorial \"Reranking by a field using an externally hosted cross-encoder model\" "
    "sends it: inputs {text: the candidate, text_pair: the query} is answered {label: LABEL_0, score}, a "
    f"list of 1 to {MAX_PAIRS} such pairs with a list. score is /v1/rerank's relevance_score of text for "
    "the query text_pair (no first-stage score): P(relevant) in [0, 1]; a text that is null, blank, read "
    "as no token or over 100,000 characters scores 0.0. parameters is accepted and unused."
)


#: What JSON Schema cannot say of a required text (a query, a text to embed): the served model must read
#: some word of it (``text.sidecar_text.sidecar_refusal``).
TEXT_RULE = ("A text the server requires (a query, a text to embed) must hold a word the served model "
             "reads: one of only punctuation, markup or invisible characters (\"!!!\", \"<p></p>\", "
             "U+200B) is refused 400 naming the field, as a blank one is; as a rerank document it is "
             "unscored (blank).")


#: Where the document carries the served model's text options (an OpenAPI specification extension).
TEXT_OPTIONS_KEY = "x-text-options"


#: The rules that tie /v1/rerank's fields together (the server answers 400 naming the field): stated in
#: the operation's description, as JSON Schema cannot tie a body field to another's length or to the URL.
CROSS_FIELD_RULES = (
    "first_stage_scores, when sent, has one score per document.",
    "first_stage (in the body or the URL) needs first_stage_scores, except with score=linear.",
    "score=linear takes no first_stage_scores.",
    "first_stage in the body and in the URL, when both are sent, are the same.",
    "all_unscored=refuse needs one document that is scored (not null, blank, read as no token or over "
    "100,000 characters).",
)


def _body(name: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": {"$ref": _REF.format(model=name)}}}}


def _errors() -> dict[str, Any]:
    return {
        code: {"description": text, **_body("ErrorResponse")}
        for code, text in (("400", "invalid request; `field` names the culprit"),
                           ("401", "missing or wrong bearer token"),
                           ("413", "request body over --max-body-mb, or more documents (texts) than "
                                   "--max-documents"),
                           ("415", "body is not JSON, or has a Content-Encoding (compressed bodies are not "
                                   "taken)"),
                           ("431", "request headers too large"),
                           ("503", "the sidecar is busy (its --max-queue is full, or its encoder's backlog "
                                   "would finish the request past its deadline): retry after the "
                                   "Retry-After header's seconds"),
                           ("504", "the request's deadline passed (its X-Request-Timeout-Ms header, "
                                   "milliseconds from its first byte, else --deadline-ms) or its client "
                                   "left: the work was dropped"))
    }


def _query_parameters(model: type[RerankParams]) -> list[dict[str, Any]]:
    """OpenAPI ``parameters`` (in: query) from a pydantic model of query parameters."""
    params = []
    for name, prop in model.model_json_schema()["properties"].items():
        description = prop.pop("description", "")
        variants = [v for v in prop.pop("anyOf", []) if v.get("type") != "null"]  # absent, not null
        if variants:
            prop.update(variants[0])
        if prop.get("default") is None:
            prop.pop("default", None)
        params.append({"name": name, "in": "query", "required": False, "description": description,
                       "schema": prop})
    return params


def _served(schemas: dict[str, Any], first_stages: Sequence[str] | None, max_documents: int | None) -> None:
    """Narrow the request schemas to what this server takes: its model's first stages, its size limit."""
    if first_stages is not None:
        schemas["RerankRequest"]["properties"]["first_stage"]["anyOf"][0]["enum"] = sorted(first_stages)
    if max_documents is not None:
        for model, field in (("RerankRequest", "documents"), ("RerankV2Request", "documents"),
                             ("EncodeRequest", "texts"), ("CohereEmbedV1Request", "texts"),
                             ("CohereEmbedV2Request", "texts"), ("CohereEmbedV2Request", "inputs")):
            schemas[model]["properties"][field]["maxItems"] = max_documents
        pairs = schemas["TextPairRequest"]["properties"]["inputs"]["anyOf"]
        next(v for v in pairs if v.get("type") == "array")["maxItems"] = min(max_documents, MAX_PAIRS)


def openapi_document(secured: bool = True, first_stages: Sequence[str] | None = None,
                     max_documents: int | None = None, dimension: int | None = None,
                     text_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """OpenAPI 3.1 document of the sidecar; ``secured``: the server requires a bearer token;
    ``first_stages``, ``max_documents`` and ``dimension``: what the serving model and ``--max-documents``
    allow (``dimension``: the one ``output_dimension`` /v2/embed takes); ``text_options``: the served
    model's preprocessing (``info.x-text-options``), so that a client or a fuzzer can apply
    :data:`TEXT_RULE` as the server does (``Preprocessor(TextOptions(**options))``)."""
    models = [(m, "validation") for m in (RerankRequest, RerankV2Request, EncodeRequest,
                                          CohereEmbedV1Request, CohereEmbedV2Request, TextPairRequest)]
    models += [(m, "serialization") for m in (RerankResponse, RerankV2Response, EncodeResponse, ErrorResponse,
                                              CohereEmbedFloatsResponse, CohereEmbedByTypeResponse,
                                              PairScore)]
    _, schemas = models_json_schema(models, ref_template=_REF)
    _served(schemas["$defs"], first_stages, max_documents)
    if dimension is not None:
        output = schemas["$defs"]["CohereEmbedV2Request"]["properties"]["output_dimension"]
        output["anyOf"][0]["enum"] = [dimension]
    parameters = _query_parameters(RerankParams)
    if first_stages is not None:
        next(p for p in parameters if p["name"] == "first_stage")["schema"]["enum"] = sorted(first_stages)

    def post(summary: str, request: str, response: str, **extra: Any) -> dict[str, Any]:
        return {"post": {"summary": summary, **extra, "requestBody": {"required": True, **_body(request)},
                         "responses": {"200": {"description": "OK", **_body(response)}, **_errors()}}}

    def cohere_embed(summary: str, version: str, answers: list[str]) -> dict[str, Any]:
        op = post(summary, f"CohereEmbed{version}Request", answers[0], description=COHERE_EMBED_DESCRIPTION)
        if len(answers) > 1:  # v1: a list of vectors, or {float: [...]} when embedding_types is sent
            schema = {"oneOf": [{"$ref": _REF.format(model=name)} for name in answers]}
            op["post"]["responses"]["200"]["content"]["application/json"]["schema"] = schema
        return op

    def text_pair() -> dict[str, Any]:
        op = post("One (text, text_pair) scored as a Hugging Face text-classification cross-encoder answers "
                  "(OpenSearch's tutorial: ml_inference response processor, then rerank by_field)",
                  "TextPairRequest", "PairScore", description=TEXT_PAIR_DESCRIPTION)
        one = {"$ref": _REF.format(model="PairScore")}
        op["post"]["responses"]["200"]["content"]["application/json"]["schema"] = {
            "oneOf": [one, {"type": "array", "items": one}]}
        return op

    def get(summary: str, guarded: bool = True) -> dict[str, Any]:
        responses: dict[str, Any] = {"200": {"description": "OK"}}
        if guarded and secured:
            responses["401"] = {"description": "missing or wrong bearer token", **_body("ErrorResponse")}
            return {"get": {"summary": summary, "responses": responses}}
        if not secured:
            return {"get": {"summary": summary, "responses": responses}}
        return {"get": {"summary": summary, "security": [], "responses": responses}}

    document = {
        "openapi": "3.1.0",
        "info": {"title": "esrerank sidecar", "version": __version__, "description": TEXT_RULE,
                 **({} if text_options is None else {TEXT_OPTIONS_KEY: text_options})},
        "paths": {
            "/v1/rerank": post("Rerank documents for a query (Cohere rerank shape)",
                               "RerankRequest", "RerankResponse",
                               description=LINEAR_DESCRIPTION + " Rules across fields: "
                               + " ".join(CROSS_FIELD_RULES),
                               parameters=parameters),
            "/v2/rerank": post("Rerank strings for a query (Cohere v2 rerank: cohere.ClientV2, LangChain, "
                               "LlamaIndex)", "RerankV2Request", "RerankV2Response",
                               description="The scores of /v1/rerank without first-stage scores (the "
                                           "model's own P(relevant)), in Cohere v2's answer; model, "
                                           "max_tokens_per_doc and priority are accepted and unused."),
            "/v1/encode": post("Neural vector and weighted-BOW terms of each text (the product's own "
                               "pipelines: es index, the ingest connectors)", "EncodeRequest",
                               "EncodeResponse"),
            "/v1/embed": cohere_embed("Cohere v1 embed: each text's vector (cohere.Client, LangChain's "
                                      "CohereEmbeddings, OpenSearch's Cohere embed blueprint)", "V1",
                                      ["CohereEmbedFloatsResponse", "CohereEmbedByTypeResponse"]),
            "/v2/embed": cohere_embed("Cohere v2 embed: each text's vector as {float: [...]} "
                                      "(cohere.ClientV2, LlamaIndex's CohereEmbedding)", "V2",
                                      ["CohereEmbedByTypeResponse"]),
            "/v1/text-pair": text_pair(),
            "/healthz": get("Liveness", guarded=False),
            "/readyz": get("Readiness: the model is loaded and has answered a test input", guarded=False),
            "/metrics": get("Prometheus metrics"),
            "/openapi.json": get("This document"),
        },
        "components": {"schemas": schemas["$defs"]},
    }
    if secured:
        document["security"] = [{"bearer": []}]
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    else:
        for item in document["paths"].values():
            for op in item.values():
                op["responses"].pop("401", None)
    return document
