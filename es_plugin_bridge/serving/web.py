"""What the sidecar's app factory and its blueprints share: the app's own state and the JSON error answer.

The state lives on the app (Flask's ``app.extensions``) and views read it through ``current_app``, never
from module globals: two apps in one process (the tests build dozens, each with its model, cache and
metrics registry) share nothing. ``error`` is every 4xx/5xx body the app writes, and remembers why for
the rejection count that ``app.py`` keeps after the request.
"""

from __future__ import annotations

from typing import Any, cast

from flask import Response, current_app, g, jsonify

from es_plugin_bridge.serving.metrics import Metrics
from es_plugin_bridge.serving.service import Service
from es_plugin_bridge.serving.settings import Settings
from es_plugin_bridge.serving.token_file import Tokens

#: ``app.extensions`` keys. The Service keeps the short key that tests and the bridge read;
#: ``Server`` reads the other two (its refusals are counted in the app's metrics; it serves by its settings).
SERVICE, METRICS, SETTINGS = "esrerank", "esrerank_metrics", "esrerank_settings"
#: The bearer tokens the app and its server check (one ``Tokens``: a rotated file re-read once for both).
TOKENS = "esrerank_tokens"


def service() -> Service:
    """The current app's Service (its model, cache and limits)."""
    return cast(Service, current_app.extensions[SERVICE])


def metrics() -> Metrics:
    """The current app's Prometheus metrics (its own registry)."""
    return cast(Metrics, current_app.extensions[METRICS])


def settings() -> Settings:
    """The settings the current app was built from."""
    return cast(Settings, current_app.extensions[SETTINGS])


def tokens() -> Tokens:
    """The bearer tokens the current app accepts."""
    return cast(Tokens, current_app.extensions[TOKENS])


def error(status: int, message: str, field: str | None = None,
          reason: str | None = None) -> tuple[Response, int]:
    """The JSON error answer; remembers why for the rejection count (``reason`` None: by status)."""
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    g.rejected = (reason, message)
    return jsonify(body), status
