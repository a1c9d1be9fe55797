"""The sidecar in process, as the tests that talk to it without a port build it: one Flask app (test
client and service) per exported tiny model, and the hardened waitress server in a thread."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.server import Limits, Server


def in_process_apps(exported: dict[str, Path]) -> dict[str, tuple[Any, Any]]:
    """``{model type: (Flask test client, its Service)}`` for each exported model directory."""
    out = {}
    for name, path in exported.items():
        app = create_app(ModelDirectory.load(path, threads=1))
        out[name] = (app.test_client(), app.extensions["esrerank"])
    return out


@contextlib.contextmanager
def threaded_server(model: ModelDirectory, token: str, limits: Limits) -> Iterator[Server]:
    """``esrerank serve``'s server (waitress behind the app) on a free port of 127.0.0.1, in a thread."""
    srv = Server(create_app(model, token=token, max_body_bytes=limits.max_body_bytes), host="127.0.0.1",
                 port=0, threads=2, token=token, limits=limits)
    with _running(srv):
        yield srv


@contextlib.contextmanager
def app_server(app: Any) -> Iterator[Server]:
    """``Server.for_app(app)`` (the server ``esrerank serve`` runs, bound by the app's own Settings: give
    it ``port=0``) in a thread; closed on the way out."""
    srv = Server.for_app(app)
    with _running(srv):
        yield srv


@contextlib.contextmanager
def _running(srv: Server) -> Iterator[None]:
    """``srv`` serving in a daemon thread; closed and joined on the way out."""
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        srv.close()
        thread.join(timeout=5)
