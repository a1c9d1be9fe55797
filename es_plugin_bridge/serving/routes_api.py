"""The ``api`` blueprint: what clients call to score (``/v1/rerank``, ``/v2/rerank``) and to embed
(``/v1/encode``: the product's vector and terms; ``/v1/embed``, ``/v2/embed``: Cohere's embed).

Each view parses and validates its body (and query) here, before the model sees it: a refusal is a
:class:`Reject`, answered 4xx with the field it names. The scoring itself is ``Service``'s (no HTTP in it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from flask import Blueprint, Response, jsonify, request
from pydantic import BaseModel, ValidationError

from es_plugin_bridge.serving import web
from es_plugin_bridge.serving.cohere_embed import CohereEmbedV1Request, CohereEmbedV2Request, cohere_answer
from es_plugin_bridge.serving.jsonbody import BodyError, parse_body
from es_plugin_bridge.serving.metrics import printable
from es_plugin_bridge.serving.schemas import (
    ALL_UNSCORED,
    PREPROCESSOR,
    EncodeRequest,
    RerankParams,
    RerankRequest,
    RerankV2Request,
    first_error,
    unscored_reason,
)

bp = Blueprint("api", __name__)

Body = TypeVar("Body", bound=BaseModel)


class Reject(Exception):
    """A request refused before it reaches the model (not JSON, not an object, invalid fields)."""

    def __init__(self, status: int, message: str, field: str | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.reason = status, message, field, reason


@bp.errorhandler(Reject)
def _rejected(exc: Reject) -> tuple[Response, int]:
    return web.error(exc.status, exc.message, exc.field, exc.reason)


def _parse(model: type[Body]) -> Body:
    """The request's JSON body validated by ``model``; a Reject naming what is wrong."""
    encoding = request.headers.get("Content-Encoding", "identity").strip()
    if encoding.lower() != "identity":  # a compressed body would otherwise be "invalid JSON"
        raise Reject(415, f"Content-Encoding {printable(encoding, 40)!r} is not supported; send the "
                          "body uncompressed", reason="unsupported_content_encoding")
    if not request.is_json:
        raise Reject(415, "send a JSON body with Content-Type: application/json", reason="not_json")
    try:
        data = parse_body(request.get_data(cache=False))
    except BodyError as exc:
        raise Reject(400, str(exc), exc.field) from None
    if not isinstance(data, dict):
        raise Reject(400, "the body must be a JSON object", "(body)")
    try:
        return model.model_validate(data, context={PREPROCESSOR: web.service().model.preprocessor})
    except ValidationError as exc:
        field, message = first_error(exc)
        raise Reject(400, f"{field}: {message}", field) from None


def _query_params(model: type[Body]) -> Body:
    """The URL's query parameters validated by ``model`` (unknown or repeated ones are refused)."""
    args = request.args
    repeated = next((key for key in args if len(args.getlist(key)) > 1), None)
    if repeated is not None:
        raise Reject(400, f"{repeated}: give this query parameter once", repeated)
    try:
        return model.model_validate(args.to_dict())
    except ValidationError as exc:
        field, message = first_error(exc)
        raise Reject(400, f"{field}: {message}", field) from None


def _count_documents(route: str, documents: Sequence[Any]) -> None:
    """A rerank's documents in /metrics: how many, and why each unscored one was not scored."""
    metrics = web.metrics()
    metrics.documents.labels(route).inc(len(documents))
    preprocessor = web.service().model.preprocessor
    for reason in filter(None, (unscored_reason(d, preprocessor) for d in documents)):
        metrics.unscored.labels(reason).inc()


@bp.post("/v1/rerank")
def rerank() -> Response:
    params = _query_params(RerankParams)
    req = _parse(RerankRequest)
    if params.all_unscored == "refuse":
        preprocessor = web.service().model.preprocessor
        if all(unscored_reason(d, preprocessor) is not None for d in req.documents):
            raise Reject(400, f"documents: {ALL_UNSCORED}", "documents", reason="all_unscored")
    out = web.service().rerank_json(req, params)
    _count_documents("/v1/rerank", req.documents)
    return jsonify(out)


@bp.post("/v2/rerank")
def rerank_v2() -> Response:
    _no_query("/v2/rerank", " (see /v1/rerank)")  # a ?score=linear here must not be ignored
    req = _parse(RerankV2Request)
    out = web.service().rerank_v2_json(req)
    _count_documents("/v2/rerank", req.documents)
    return jsonify(out)


@bp.post("/v1/encode")
def encode() -> Response:
    """The product's own answer: each text's vector and BOW terms (its indexing and ingest pipelines)."""
    req = _parse(EncodeRequest)
    out = web.service().encode_json(req)
    web.metrics().documents.labels("/v1/encode").inc(len(req.texts))
    return jsonify(out.model_dump())


def _no_query(route: str, hint: str = "") -> None:
    """Refuse any URL parameter: a route that takes none must not ignore one silently."""
    if request.args:
        name = next(iter(request.args))
        raise Reject(400, f"{name}: {route} takes no query parameters{hint}", name)


@bp.post("/v1/embed")
def embed_v1() -> Response:
    """Cohere's v1 embed (``serving.cohere_embed``)."""
    _no_query("/v1/embed")
    req = _parse(CohereEmbedV1Request)
    vectors, read = web.service().cohere_vectors(req.texts, req.truncate)
    web.metrics().documents.labels("/v1/embed").inc(len(req.texts))
    return jsonify(cohere_answer(vectors, req.texts, "1", req.embedding_types is not None, read))


@bp.post("/v2/embed")
def embed_v2() -> Response:
    """Cohere's v2 embed: always ``embeddings_by_type``."""
    _no_query("/v2/embed")
    req = _parse(CohereEmbedV2Request)
    texts = req.all_texts()
    vectors, read = web.service().cohere_vectors(texts, req.truncate, req.output_dimension)
    web.metrics().documents.labels("/v2/embed").inc(len(texts))
    return jsonify(cohere_answer(vectors, texts, "2", True, read))
