"""The sidecar: a small Flask app factory around one verified model directory.

``create_app(model)`` returns the WSGI app; ``esrerank serve`` runs it with waitress. Every answer
is JSON. Bad input is a 4xx whose body names the field (``{"error", "field"}``); a 500 only ever
means a bug. With a bearer token set, everything but ``/healthz`` and ``/readyz`` requires it. Every
4xx is counted in ``/metrics`` by reason and logged in one line (``Metrics.reject``).
"""

from __future__ import annotations

import hmac
import re
import time
from pathlib import Path
from typing import Any, TypeVar

from flask import Flask, Response, g, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import HTTPException

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.jsonbody import BodyError, parse_body
from es_plugin_bridge.serving.metrics import Metrics, printable
from es_plugin_bridge.serving.model_dir import ModelDirectory
from es_plugin_bridge.serving.openapi import openapi_document
from es_plugin_bridge.serving.schemas import (
    EmbedRequest,
    RerankParams,
    RerankRequest,
    RerankV2Request,
    first_error,
    unscored_reason,
)
from es_plugin_bridge.serving.server import OPEN_PATHS, Limits
from es_plugin_bridge.serving.service import DEFAULT_CACHE_SIZE, RequestError, Service

MAX_BODY_BYTES = Limits().max_body_bytes


def _error(status: int, message: str, field: str | None = None,
           reason: str | None = None) -> tuple[Response, int]:
    """The JSON error answer; remembers why for the rejection count (``reason`` None: by status)."""
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    g.rejected = (reason, message)
    return jsonify(body), status


class _Reject(Exception):
    """A request refused before it reaches the model (not JSON, not an object, invalid fields)."""

    def __init__(self, status: int, message: str, field: str | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field, self.reason = status, message, field, reason


Body = TypeVar("Body", bound=BaseModel)


def _parse(model: type[Body]) -> Body:
    encoding = request.headers.get("Content-Encoding", "identity").strip()
    if encoding.lower() != "identity":  # a compressed body would otherwise be "invalid JSON"
        raise _Reject(415, f"Content-Encoding {printable(encoding, 40)!r} is not supported; send the "
                           "body uncompressed", reason="unsupported_content_encoding")
    if not request.is_json:
        raise _Reject(415, "send a JSON body with Content-Type: application/json", reason="not_json")
    try:
        data = parse_body(request.get_data(cache=False))
    except BodyError as exc:
        raise _Reject(400, str(exc), exc.field) from None
    if not isinstance(data, dict):
        raise _Reject(400, "the body must be a JSON object", "(body)")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise _Reject(400, f"{field}: {message}", field) from None


def check_token(token: str | None) -> None:
    """UserError unless ``token`` is None (no authentication) or visible ASCII without spaces."""
    if token is None:
        return
    if not token:
        raise UserError("the bearer token is empty; give a real token, or none to serve without one")
    if not re.fullmatch(r"[\x21-\x7e]+", token):
        raise UserError("the bearer token must be printable ASCII without spaces or line breaks")


def _query_params(model: type[Body]) -> Body:
    """The URL's query parameters validated by ``model`` (unknown or repeated ones are refused)."""
    args = request.args
    repeated = next((key for key in args if len(args.getlist(key)) > 1), None)
    if repeated is not None:
        raise _Reject(400, f"{repeated}: give this query parameter once", repeated)
    try:
        return model.model_validate(args.to_dict())
    except ValidationError as exc:
        field, message = first_error(exc)
        raise _Reject(400, f"{field}: {message}", field) from None


def create_app(
    model: ModelDirectory | str | Path,
    *,
    token: str | None = None,
    name: str | None = None,
    max_documents: int = 1000,
    max_body_bytes: int = MAX_BODY_BYTES,
    cache_size: int = DEFAULT_CACHE_SIZE,
) -> Flask:
    """The sidecar app for ``model`` (a loaded ModelDirectory or its path; loading verifies it).

    ``token``, when given, must be a usable bearer token: an empty one is refused rather than taken
    to mean "no authentication".
    """
    check_token(token)
    if not isinstance(model, ModelDirectory):
        model = ModelDirectory.load(model)
    service = Service(model, name=name, max_documents=max_documents, cache_size=cache_size)
    metrics = Metrics(service.name, model.model_type, service.cache, provider=model.provider)
    app = Flask("esrerank_sidecar")
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["esrerank"] = service
    app.extensions["esrerank_metrics"] = metrics  # the server counts what it refuses before the app

    @app.before_request
    def _start() -> tuple[Response, int] | None:
        g.started = time.perf_counter()
        if token and request.path not in OPEN_PATHS:
            given = request.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                response, status = _error(401, "missing or wrong bearer token", reason="unauthorized")
                response.headers["WWW-Authenticate"] = "Bearer"
                return response, status
        return None

    @app.after_request
    def _count(response: Response) -> Response:
        endpoint = request.url_rule.rule if request.url_rule else "unmatched"
        metrics.requests.labels(endpoint, str(response.status_code)).inc()
        if "started" in g:
            metrics.latency.labels(endpoint).observe(time.perf_counter() - g.started)
        if 400 <= response.status_code < 500:
            reason, message = g.get("rejected", (None, response.status))
            metrics.reject(response.status_code, reason, request.method, request.path,
                           request.remote_addr or "-", message)
        return response

    @app.errorhandler(_Reject)
    def _rejected(exc: _Reject) -> tuple[Response, int]:
        return _error(exc.status, exc.message, exc.field, exc.reason)

    @app.errorhandler(RequestError)
    def _bad_request(exc: RequestError) -> tuple[Response, int]:
        reason = "too_many_documents" if exc.status == 413 else None
        return _error(exc.status, f"{exc.field}: {exc}", exc.field, reason)

    @app.errorhandler(UserError)
    def _user_error(exc: UserError) -> tuple[Response, int]:
        return _error(400, str(exc))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> tuple[Response, int]:
        response, status = _error(exc.code or 500, exc.description or exc.name)
        for key, value in exc.get_headers():  # e.g. Allow on a 405
            if key.lower() != "content-type":
                response.headers[key] = value
        return response, status

    @app.errorhandler(Exception)
    def _bug(exc: Exception) -> tuple[Response, int]:
        app.logger.exception("unhandled error")
        return _error(500, f"internal error ({type(exc).__name__}); see the server log")

    @app.post("/v1/rerank")
    def rerank() -> Response:
        params = _query_params(RerankParams)
        req = _parse(RerankRequest)
        out = service.rerank_json(req, params)
        metrics.documents.labels("/v1/rerank").inc(len(req.documents))
        for reason in filter(None, map(unscored_reason, req.documents)):
            metrics.unscored.labels(reason).inc()
        return jsonify(out)

    @app.post("/v2/rerank")
    def rerank_v2() -> Response:
        if request.args:  # v2 has no URL parameters: a ?score=linear here must not be ignored
            name = next(iter(request.args))
            raise _Reject(400, f"{name}: /v2/rerank takes no query parameters (see /v1/rerank)", name)
        req = _parse(RerankV2Request)
        out = service.rerank_v2_json(req)
        metrics.documents.labels("/v2/rerank").inc(len(req.documents))
        for reason in filter(None, map(unscored_reason, req.documents)):
            metrics.unscored.labels(reason).inc()
        return jsonify(out)

    @app.post("/v1/embed")
    def embed() -> Response:
        req = _parse(EmbedRequest)
        out = service.embed(req)
        metrics.documents.labels("/v1/embed").inc(len(req.texts))
        return jsonify(out.model_dump())

    @app.get("/healthz")
    def healthz() -> Response:
        return jsonify({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        # The model directory was verified and ran a test input when it was loaded.
        return jsonify({"status": "ready", "model": service.name, "model_type": model.model_type,
                        "provider": model.provider, "dimension": model.dimension,
                        "fusion": sorted(model.fusion),
                        "calibrated": sorted(model.config.beta.calibration)})

    @app.get("/metrics")
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), mimetype=CONTENT_TYPE_LATEST)

    @app.get("/openapi.json")
    def openapi() -> Response:
        return jsonify(openapi_document(secured=bool(token)))

    return app
