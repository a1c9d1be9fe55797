"""A recorder standing in for the HTTP peer of the ``elasticsearch`` client: a few lines of ``http.server``
on 127.0.0.1 that record what the real client sends and answer in the shape of the API called. It is
never evidence that Elasticsearch accepts a request (``tests/elastic/test_es_cluster.py`` is, where Docker
runs); it shows what the product sends and how it treats the answer."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Recorder:
    """Answers scripted JSON per (method, path prefix); records (method, path, query, headers, body)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: dict[tuple[str, str], Any] = {}
        self.delay: dict[tuple[str, str], float] = {}

    def answer(self, method: str, path: str) -> tuple[int, Any, float]:
        for (m, prefix), value in self.answers.items():
            if m == method and path.startswith(prefix):
                status, body = value if isinstance(value, tuple) else (200, value)
                return status, body, self.delay.get((m, prefix), 0.0)
        return 404, {"error": {"type": "resource_not_found_exception", "reason": path}}, 0.0


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    rec = Recorder()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            rec.requests.append({"method": self.command, "path": path, "query": query,
                                 "headers": dict(self.headers), "body": raw.decode("utf-8")})
            status, body, delay = rec.answer(self.command, path)
            time.sleep(delay)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Elastic-Product", "Elasticsearch")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield rec, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def es_client(url: str, timeout: float = 5.0) -> Any:
    from elasticsearch import Elasticsearch

    return Elasticsearch(url, request_timeout=timeout, max_retries=0)
