"""The sidecar: a small Flask app factory around one verified model directory.

``create_app(settings)`` loads the model the settings name and returns the WSGI app; ``esrerank
serve`` builds the same :class:`~es_plugin_bridge.serving.settings.Settings` from its options and runs
the app with ``Server.for_app`` (waitress). The routes are two blueprints: ``api`` (``routes_api``:
``/v1/rerank``, ``/v2/rerank``, ``/v1/embed``) and ``ops`` (``routes_ops``: ``/healthz``, ``/readyz``,
``/metrics``, ``/openapi.json``); the app's state (Service, Metrics, Settings) is in ``app.extensions``.

What holds for every route, matched or not, is here: every answer is JSON; bad input is a 4xx whose
body names the field (``{"error", "field"}``); a 500 only ever means a bug. With a bearer token set,
everything but ``/healthz`` and ``/readyz`` requires it (any token of ``serving.token_file.Tokens``,
the same object the server checks before the body). Every 4xx is counted in ``/metrics`` by reason
and logged in one line (``Metrics.reject``). Every POST has a deadline (``serving.deadline``): work past
it, or for a client that hung up, is dropped and answered 504, counted by the stage it stopped at.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from flask import Flask, Response, current_app, g, request
from werkzeug.exceptions import HTTPException

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving import deadline, routes_api, routes_ops, routes_pair, web
from es_plugin_bridge.serving.metrics import Metrics
from es_plugin_bridge.serving.model_dir import ModelDirectory
from es_plugin_bridge.serving.server import OPEN_PATHS, RECEIVED
from es_plugin_bridge.serving.service import RequestError, Service
from es_plugin_bridge.serving.settings import LOAD_FIELDS, Settings
from es_plugin_bridge.serving.token_file import Tokens


def _settings(source: Settings | ModelDirectory | str | Path,
              overrides: dict[str, Any]) -> tuple[Settings, ModelDirectory | None]:
    """The app's settings, and the model when ``source`` is one already loaded."""
    if isinstance(source, Settings):
        return dataclasses.replace(source, **overrides), None
    if isinstance(source, ModelDirectory):
        loading = sorted(set(overrides) & set(LOAD_FIELDS))
        if loading:  # they would be silently ignored: the model is loaded already
            raise TypeError(f"create_app: {', '.join(loading)} only apply when loading a model directory; "
                            "pass its path or Settings, not a loaded ModelDirectory")
        return Settings(model_dir=source.path, **overrides), source
    return Settings(model_dir=Path(source), **overrides), None


def create_app(source: Settings | ModelDirectory | str | Path, **overrides: Any) -> Flask:
    """The sidecar app for ``source``: Settings, or a model (loaded, or its path) with ``overrides``.

    ``overrides`` are Settings fields (``token=``, ``max_documents=``, ...) applied on top of
    ``source``'s settings or of the defaults. A setting no server could use is a UserError naming it,
    before the model is loaded; loading verifies the directory (UserError naming the bad file).
    """
    settings, model = _settings(source, overrides)
    if model is None:
        model = ModelDirectory.load(settings.model_dir, threads=settings.onnx_threads,
                                    batch_size=settings.batch_size, expect_sha256=settings.expect_sha256,
                                    device=settings.device)
    service = Service(model, name=settings.name, max_documents=settings.max_documents,
                      cache_size=settings.cache_size, encoder_workers=settings.encoder_workers)
    metrics = Metrics(service.name, model.model_type, service.cache, provider=model.provider,
                      encoder=service.encoder)
    # No static folder: Flask would otherwise serve files from a ``static/`` directory beside the working
    # directory it was started in (``/static/...``); the sidecar serves JSON only.
    app = Flask("esrerank_sidecar", static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions[web.SERVICE] = service
    app.extensions[web.METRICS] = metrics  # the server counts what it refuses before the app here too
    app.extensions[web.SETTINGS] = settings
    app.extensions[web.TOKENS] = Tokens(settings.token, settings.token_file)
    app.before_request(_authenticate)
    app.before_request(_start_deadline)
    app.after_request(_not_late)
    app.after_request(_count)
    app.teardown_request(_end_deadline)
    app.register_error_handler(deadline.WorkAbandoned, _abandoned)
    app.register_error_handler(RequestError, _bad_request)
    app.register_error_handler(UserError, _user_error)
    app.register_error_handler(HTTPException, _http)
    app.register_error_handler(Exception, _bug)
    app.register_blueprint(routes_api.bp)
    app.register_blueprint(routes_ops.bp)
    app.register_blueprint(routes_pair.bp)
    return app


def _authenticate() -> tuple[Response, int] | None:
    """Start the request's clock; refuse it 401 without the bearer token (on every guarded path)."""
    g.started = time.perf_counter()
    tokens = web.tokens()
    given = request.headers.get("Authorization", "")
    if tokens and request.path not in OPEN_PATHS and not tokens.accepts(given):
        response, status = web.error(401, "missing or wrong bearer token", reason="unauthorized")
        response.headers["WWW-Authenticate"] = "Bearer"
        return response, status
    return None


def _start_deadline() -> tuple[Response, int] | None:
    """A POST's deadline (its header, else the server's default) from its first byte; dropped at once
    (WorkAbandoned) if it passed while the request waited for a thread."""
    if request.method != "POST":
        return None
    try:
        asked = deadline.parse_header(request.headers.get(deadline.HEADER))
    except ValueError as exc:
        return web.error(400, str(exc), deadline.HEADER)
    received = request.environ.get(RECEIVED, time.monotonic())
    gone = request.environ.get("waitress.client_disconnected")
    g.deadline = deadline.Deadline.starting(received, asked or web.settings().deadline_ms, gone)
    g.deadline_token = deadline.set_current(g.deadline)
    g.deadline.check("before_start")
    return None


def _not_late(response: Response) -> Response:
    """An answer finished past its deadline (or after its client left) is not sent as a late success:
    nobody waits for it. It becomes the 504 of :func:`_abandoned`, counted as computed for nobody."""
    late = g.get("deadline")
    if late is not None and response.status_code < 300:
        try:
            late.check("finished_late")
        except deadline.WorkAbandoned as exc:
            body, status = _abandoned(exc)
            body.status_code = status
            return body
    return response


def _end_deadline(_: BaseException | None) -> None:
    token = g.pop("deadline_token", None)
    if token is not None:
        deadline.set_current(None)


def _abandoned(exc: deadline.WorkAbandoned) -> tuple[Response, int]:
    web.metrics().drop(exc.stage, request.method, request.path, request.remote_addr or "-", exc.message)
    if isinstance(exc, deadline.PredictedLate):
        response, status = web.error(503, exc.message, reason="busy")
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response, status
    return web.error(504, exc.message, reason="deadline")


def _count(response: Response) -> Response:
    """Count every answer by route and status, time it, and count and log every 4xx by reason."""
    metrics = web.metrics()
    endpoint = request.url_rule.rule if request.url_rule else "unmatched"
    metrics.requests.labels(endpoint, str(response.status_code)).inc()
    if "started" in g:
        metrics.latency.labels(endpoint).observe(time.perf_counter() - g.started)
    if 400 <= response.status_code < 500:
        reason, message = g.get("rejected", (None, response.status))
        metrics.reject(response.status_code, reason, request.method, request.path,
                       request.remote_addr or "-", message)
    return response


def _bad_request(exc: RequestError) -> tuple[Response, int]:
    reason = "too_many_documents" if exc.status == 413 else None
    return web.error(exc.status, f"{exc.field}: {exc}", exc.field, reason)


def _user_error(exc: UserError) -> tuple[Response, int]:
    return web.error(400, str(exc))


def _http(exc: HTTPException) -> tuple[Response, int]:
    response, status = web.error(exc.code or 500, exc.description or exc.name)
    for key, value in exc.get_headers():  # e.g. Allow on a 405
        if key.lower() != "content-type":
            response.headers[key] = value
    return response, status


def _bug(exc: Exception) -> tuple[Response, int]:
    current_app.logger.exception("unhandled error")
    return web.error(500, f"internal error ({type(exc).__name__}); see the server log")
