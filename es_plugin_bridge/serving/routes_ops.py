"""The ``ops`` blueprint: what operators and orchestrators call (``/healthz``, ``/readyz``, ``/metrics``,
``/openapi.json``).

``/healthz`` and ``/readyz`` are open even with a token (``server.OPEN_PATHS``), so a probe needs no
secret; ``/metrics`` and ``/openapi.json`` are guarded like the API.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from es_plugin_bridge.serving import web
from es_plugin_bridge.serving.openapi import openapi_document

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz() -> Response:
    # The model directory was verified and ran a test input when it was loaded.
    service = web.service()
    model = service.model
    return jsonify({"status": "ready", "model": service.name, "model_type": model.model_type,
                    "provider": model.provider, "dimension": model.dimension,
                    "fusion": sorted(model.fusion),
                    "calibrated": sorted(model.config.beta.calibration)})


@bp.get("/metrics")
def prometheus() -> Response:
    return Response(generate_latest(web.metrics().registry), mimetype=CONTENT_TYPE_LATEST)


@bp.get("/openapi.json")
def openapi() -> Response:
    service = web.service()
    return jsonify(openapi_document(secured=web.settings().guarded,
                                    first_stages=list(service.model.fusion),
                                    max_documents=service.max_documents,
                                    dimension=None if service.model.pairwise else service.model.dimension,
                                    text_options=service.model.preprocessor.options.model_dump(mode="json")))
