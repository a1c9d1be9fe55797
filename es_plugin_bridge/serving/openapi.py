"""``GET /openapi.json``: the API described from the same pydantic models that validate it."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from es_plugin_bridge import __version__
from es_plugin_bridge.serving.schemas import (
    EmbedRequest,
    EmbedResponse,
    ErrorResponse,
    RerankRequest,
    RerankResponse,
)

_REF = "#/components/schemas/{model}"


def _body(name: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": {"$ref": _REF.format(model=name)}}}}


def _errors() -> dict[str, Any]:
    return {
        code: {"description": text, **_body("ErrorResponse")}
        for code, text in (("400", "invalid request; `field` names the culprit"),
                           ("401", "missing or wrong bearer token"),
                           ("413", "request body too large"), ("415", "body is not JSON"))
    }


def openapi_document() -> dict[str, Any]:
    """OpenAPI 3.1 document of the sidecar."""
    models = [(m, "validation") for m in (RerankRequest, EmbedRequest)]
    models += [(m, "serialization") for m in (RerankResponse, EmbedResponse, ErrorResponse)]
    _, schemas = models_json_schema(models, ref_template=_REF)

    def post(summary: str, request: str, response: str) -> dict[str, Any]:
        return {"post": {"summary": summary, "requestBody": {"required": True, **_body(request)},
                         "responses": {"200": {"description": "OK", **_body(response)}, **_errors()}}}

    def get(summary: str) -> dict[str, Any]:
        return {"get": {"summary": summary, "responses": {"200": {"description": "OK"}}}}

    return {
        "openapi": "3.1.0",
        "info": {"title": "esrerank sidecar", "version": __version__},
        "paths": {
            "/v1/rerank": post("Rerank documents for a query (Cohere rerank shape)",
                               "RerankRequest", "RerankResponse"),
            "/v1/embed": post("Neural vector and weighted-BOW terms of each text", "EmbedRequest",
                              "EmbedResponse"),
            "/healthz": get("Liveness"),
            "/readyz": get("Readiness: the model is loaded and has answered a test input"),
            "/metrics": get("Prometheus metrics"),
            "/openapi.json": get("This document"),
        },
        "components": {
            "schemas": schemas["$defs"],
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
