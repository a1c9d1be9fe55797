"""The bridge's connections to a real sidecar (``esrerank serve``'s hardened waitress server in a thread,
serving the tiny BOW-CNN) while one host holds many silent connections to it (issue 34, item 10):

- consecutive searches reuse one persistent connection (the sidecar sees one client port, the pool
  opened one connection), so they do not queue behind the sidecar's accept queue each time;
- with the sidecar's connection limit taken by connections that send nothing, a new client's search is
  still reranked, well within its deadline: the server closes idle connections to make room
  (``serving/server.py``, ``_Server.readable``) instead of accepting nothing until they time out;
- a connection that never sends a byte is closed after ``request_timeout``.

The silent connections are the test's own, on 127.0.0.1, bounded in count and closed at the end.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from es_plugin_bridge.bridge import BridgeSearch, SidecarClient
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.server import Limits, Server

TITLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / \
    "train_titles.tsv"
TOKEN = "pool-t0ken"
#: The sidecar's connection limit here, and the silent connections the test holds (more than the limit).
LIMIT, SILENT = 30, 60


class Sidecar:
    """The real sidecar app behind ``Server``, recording the client port of every request it serves."""

    def __init__(self, model: ModelDirectory, limits: Limits) -> None:
        app = create_app(model, token=TOKEN)
        self.ports: list[int] = []
        inner: Callable[..., Any] = app.wsgi_app

        def recording(environ: dict, start_response: Any) -> Any:
            self.ports.append(int(environ["REMOTE_PORT"]))
            return inner(environ, start_response)

        app.wsgi_app = recording  # type: ignore[method-assign]
        self.server = Server(app, host="127.0.0.1", port=0, threads=2, token=TOKEN, limits=limits)
        self.url = self.server.url
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.close()
        self.thread.join(timeout=5)


@contextlib.contextmanager
def sidecar(exported, limits: Limits) -> Iterator[Sidecar]:
    server = Sidecar(ModelDirectory.load(exported["bow-cnn"], threads=1), limits)
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def silent_connections(url: str, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``url`` (127.0.0.1) that send nothing, closed on the way out."""
    port = int(url.rsplit(":", 1)[1])
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
    try:
        yield held
    finally:
        for sock in held:
            sock.close()


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return list(read_spec(f"pairs:{TITLES}").questions.values())[:300]


def test_consecutive_searches_reuse_one_connection(exported, questions):
    with sidecar(exported, Limits()) as server:
        client = SidecarClient(server.url, token=TOKEN, timeout=10.0)
        search = BridgeSearch(questions, client, window=20)
        for query in questions[:5]:
            result = search.search(query.title, k=5)
            assert result.reranked, result.fallback_reason
        assert len(server.ports) == 5 and len(set(server.ports)) == 1  # the sidecar saw one connection
        assert client.pool.opened == 1
        client.close()


def test_searches_rerank_within_their_deadline_while_silent_connections_fill_the_limit(exported, questions):
    deadline = 3.0
    with sidecar(exported, Limits(max_connections=LIMIT)) as server:
        warm = SidecarClient(server.url, token=TOKEN, timeout=deadline)  # connected before the flood
        assert BridgeSearch(questions, warm, window=20).search(questions[0].title, k=5).reranked
        with silent_connections(server.url, SILENT):
            time.sleep(0.5)  # the server has taken what it can of them
            for client in (warm, SidecarClient(server.url, token=TOKEN, timeout=deadline)):
                search = BridgeSearch(questions, client, window=20)
                for query in questions[1:4]:
                    t0 = time.perf_counter()
                    result = search.search(query.title, k=5)
                    took = time.perf_counter() - t0
                    # Before: the new client's connection waited behind the silent ones for a slot
                    # (idle_timeout, 60 s) and every search fell back at its deadline.
                    assert result.reranked, result.fallback_reason
                    assert took < deadline
        assert warm.pool.opened == 1  # its connection had served requests: the silent ones went first


def test_a_connection_that_never_sends_a_byte_is_closed_after_the_request_timeout(exported):
    with sidecar(exported, Limits(request_timeout=1.0)) as server, \
            silent_connections(server.url, 1) as (sock,):
        sock.settimeout(10)
        t0 = time.perf_counter()
        assert sock.recv(1) == b""  # closed by the server (before: held for idle_timeout, 60 s)
        assert time.perf_counter() - t0 < 5


def test_a_kept_connection_the_sidecar_closed_is_replaced_not_a_fallback(exported, questions):
    """The sidecar closes a keep-alive connection idle for ``idle_timeout``; the next search notices
    (the socket reads as closed before the request is sent) and opens another."""
    # waitress reads channel_timeout as an int: a second is the least idle_timeout that is not 0.
    with sidecar(exported, Limits(idle_timeout=1.0, request_timeout=2.0)) as server:
        client = SidecarClient(server.url, token=TOKEN, timeout=5.0)
        search = BridgeSearch(questions, client, window=20)
        assert search.search(questions[0].title, k=5).reranked
        time.sleep(2.5)  # past idle_timeout and the server's next maintenance turn (every 0.5 s)
        result = search.search(questions[1].title, k=5)
        assert result.reranked, result.fallback_reason
        assert client.pool.opened == 2 and len(set(server.ports)) == 2


def test_a_sub_second_idle_timeout_is_rounded_up_not_down_to_zero(exported, questions):
    """waitress takes ``channel_timeout`` as an int: 0.5 s became 0 and the server closed every
    connection before its request was read, so no search was ever reranked."""
    with sidecar(exported, Limits(idle_timeout=0.5)) as server:
        client = SidecarClient(server.url, token=TOKEN, timeout=5.0)
        search = BridgeSearch(questions, client, window=20)
        for query in questions[:3]:
            result = search.search(query.title, k=5)
            assert result.reranked, result.fallback_reason
