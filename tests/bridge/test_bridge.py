"""The bridge (Elasticsearch mode 3 on the embedded engine) against a real sidecar over HTTP:
reranked results when it answers, the first-stage order when it is down, slow or failing."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from waitress.server import create_server

from es_plugin_bridge.bridge import BridgeSearch, SidecarClient
from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TOKEN = "bridge-token"


@pytest.fixture(scope="module")
def collection():
    return list(read_spec(f"pairs:{TITLES}").questions.values())


@pytest.fixture(scope="module")
def queries():
    return [p.q1 for p in read_spec(f"pairs:{TITLES}").pairs if p.label > 0][:5]


class Server:
    """A real WSGI server (waitress, as ``esrerank serve`` runs) on a free local port, in a thread."""

    def __init__(self, app) -> None:
        self.server = create_server(app, host="127.0.0.1", port=0, threads=2)
        self.url = f"http://127.0.0.1:{self.server.effective_port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def sidecar(exported):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1)
    server = Server(create_app(model, token=TOKEN))
    yield server.url, model
    server.close()


@pytest.fixture(scope="module")
def bridge_index(collection):
    return BridgeSearch(collection, None, window=20)


def test_reranked_results_are_the_sidecars_fused_order(sidecar, collection, queries, bridge_index):
    url, model = sidecar
    bridge = BridgeSearch(collection, SidecarClient(url, token=TOKEN), window=20)
    for query in queries:
        result = bridge.search(query, k=10, exclude={query.id})
        assert result.reranked and result.fallback_reason is None and set(result.timings_ms) == {
            "first_stage", "rerank"}
        first = bridge_index.search(query, k=20, exclude={query.id}).hits
        assert not any(h.question.id == query.id for h in result.hits)
        window = [h.question for h in first]
        fused = model.rerank(query, window, [h.first_stage_score for h in first], "bm25")["fused"]
        expected = sorted(range(len(window)), key=lambda i: -fused[i])[:10]
        assert [h.question.id for h in result.hits] == [window[i].id for i in expected]
        assert [h.first_stage_rank for h in result.hits] == [i + 1 for i in expected]
        assert all(0 <= h.score <= 1 for h in result.hits)


def test_without_a_sidecar_it_is_the_first_stage(collection, queries, bridge_index):
    query = queries[0]
    result = bridge_index.search(query, k=5)
    assert not result.reranked and result.fallback_reason is None
    assert [h.first_stage_rank for h in result.hits] == [1, 2, 3, 4, 5]
    tokens = bridge_index.preprocessor.tokens(query)
    assert [(h.question.id, h.score) for h in result.hits] == bridge_index.index.search(tokens, k=5)


def test_down_slow_or_failing_sidecar_falls_back_to_first_stage(sidecar, collection, queries, bridge_index):
    url, _ = sidecar
    query = queries[1]
    expected = [h.question.id for h in bridge_index.search(query, k=10).hits]
    with socket.socket() as probe:  # a local port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        down_url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    failing = Server(lambda environ, start: (start("503 Service Unavailable", []), [b"overloaded"])[1])
    try:
        cases = {
            "unreachable": SidecarClient(down_url),
            "timed out": SidecarClient(url, token=TOKEN, timeout=0.001),  # a 100-document rerank takes ms
            "503": SidecarClient(failing.url),
        }
        for reason, client in cases.items():
            result = BridgeSearch(collection, client, window=100).search(query, k=10)
            assert not result.reranked and reason in result.fallback_reason, result.fallback_reason
            assert [h.question.id for h in result.hits] == expected
    finally:
        failing.close()


def test_refused_requests_are_errors_not_fallbacks(sidecar, collection, queries):
    url, _ = sidecar
    with pytest.raises(UserError, match="401"):
        BridgeSearch(collection, SidecarClient(url, token="wrong"), window=5).search(queries[0])
    with pytest.raises(UserError, match="first_stage"):  # the model has no β for dfr
        client = SidecarClient(url, token=TOKEN)
        BridgeSearch(collection, client, similarity="dfr", window=5).search(queries[0])
    with pytest.raises(UserError, match="http://"):
        SidecarClient("localhost:8080")
    with pytest.raises(UserError, match="empty"):
        BridgeSearch(collection, None).search("   ")


def test_search_command_end_to_end(sidecar, cli):
    url, _ = sidecar
    code, out, _ = cli(["search", "--corpus", f"pairs:{TITLES}", "--sidecar", url, "--token", TOKEN,
                        "--top", "3", "--json", "how to install ubuntu from usb"])
    assert code == 0
    got = json.loads(out)
    assert got["reranked"] and len(got["hits"]) == 3 and got["hits"][0]["title"]
    code, out, _ = cli(["search", "--corpus", f"pairs:{TITLES}", "--sidecar", "http://127.0.0.1:9",
                        "--top", "2", "how to install ubuntu from usb"])
    assert code == 0 and "first-stage order" in out and "unreachable" in out



class RawSidecar:
    """A misbehaving sidecar on a local port: reads the request, then answers with ``answer(sock)``."""

    def __init__(self, answer) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.answer = answer
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(body) < length:
                body += conn.recv(65536)
            with contextlib.suppress(OSError):  # the client hung up: what it should do
                self.answer(conn, self.stop)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.thread.join(timeout=5)


JSON_HEAD = b"Content-Type: application/json\r\n"


def _drip(conn, stop, unit: bytes = b" ") -> None:
    while not stop.wait(0.05):  # one unit every 50 ms: no single read ever times out
        conn.sendall(unit)


def _trickle(conn, stop) -> None:
    """HTTP/1.1, keep-alive, a Content-Length it takes 50 s to honour."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n" + JSON_HEAD + b"Content-Length: 1000\r\n\r\n")
    _drip(conn, stop)


def _trickle_http10_close(conn, stop) -> None:
    """HTTP/1.0, no length: the body ends when the server closes, so http.client hands the socket to the
    answer and the connection's ``sock`` is None (the bug of issue 15)."""
    conn.sendall(b"HTTP/1.0 200 OK\r\n" + JSON_HEAD + b"\r\n")
    _drip(conn, stop)


def _trickle_http11_close(conn, stop) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n" + JSON_HEAD + b"Content-Length: 1000\r\n\r\n")
    _drip(conn, stop)


def _trickle_chunked(conn, stop) -> None:
    """Chunked, one 1-byte chunk every 50 ms, never the last chunk."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + JSON_HEAD + b"\r\n")
    _drip(conn, stop, b"1\r\n \r\n")


def _trickle_headers(conn, stop) -> None:
    """The status line, then header bytes one at a time: the answer never starts."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    _drip(conn, stop, b"X")


def _silent(conn, stop) -> None:
    """Reads the request and says nothing, holding the connection open."""
    stop.wait()


def _truncated(conn, stop) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n" + JSON_HEAD + b"Content-Length: 1000\r\n\r\n" + b'{"results": [')


def _truncated_chunked(conn, stop) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + JSON_HEAD + b"\r\n"
                 b'd\r\n{"results": [\r\n')


def _truncated_headers(conn, stop) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Ty")


def _http10_cut_body(conn, stop) -> None:
    """HTTP/1.0 without a length, closed mid-JSON: the body "ends" there, and is not an answer."""
    conn.sendall(b"HTTP/1.0 200 OK\r\n" + JSON_HEAD + b'\r\n{"results": [')


TIMEOUT = 0.5
#: Slack over the timeout for the whole search (first stage included) on a loaded 2-core machine.
MARGIN = 2.0


@pytest.mark.parametrize(("answer", "reason"), [
    (_trickle, "timed out"), (_trickle_http10_close, "timed out"), (_trickle_http11_close, "timed out"),
    (_trickle_chunked, "timed out"), (_trickle_headers, "timed out"), (_silent, "timed out"),
    (_truncated, "truncated"), (_truncated_chunked, "truncated"),
    (_truncated_headers, "lacks results"),  # http.client takes the cut headers as all, then an empty body
    (_http10_cut_body, "lacks results"),
])
def test_a_misbehaving_sidecar_falls_back_within_the_timeout(answer, reason, collection, queries,
                                                             bridge_index):
    query = queries[2]
    expected = [h.question.id for h in bridge_index.search(query, k=10).hits]
    sidecar = RawSidecar(answer)
    try:
        client = SidecarClient(sidecar.url, timeout=TIMEOUT)
        bridge = BridgeSearch(collection, client, window=20)  # indexing the collection is not timed
        start = time.monotonic()
        result = bridge.search(query, k=10)
        elapsed = time.monotonic() - start
    finally:
        sidecar.close()
    assert not result.reranked and reason in result.fallback_reason, result.fallback_reason
    assert [h.question.id for h in result.hits] == expected
    # The whole call is bounded, not each read: every trickle would hold a per-read timeout for 50 s or
    # for ever.
    assert elapsed < TIMEOUT + MARGIN, elapsed
    if reason == "timed out":  # it waited for the deadline: the fallback is the deadline's
        assert elapsed >= TIMEOUT and result.timings_ms["rerank"] >= 1000 * TIMEOUT, result.timings_ms


def test_search_command_against_a_one_byte_a_second_http10_sidecar(cli):
    """The report of issue 15, as it was run: ``esrerank search --timeout`` against an HTTP/1.0 sidecar
    sending its answer one byte a second ran past 50 s; it must fall back at the deadline."""

    def one_byte_a_second(conn, stop) -> None:
        conn.sendall(b"HTTP/1.0 200 OK\r\nConnection: close\r\n" + JSON_HEAD + b"\r\n")
        while not stop.wait(1.0):
            conn.sendall(b" ")

    sidecar = RawSidecar(one_byte_a_second)
    try:
        start = time.monotonic()
        code, out, _ = cli(["search", "--corpus", f"pairs:{TITLES}", "--sidecar", sidecar.url, "--timeout",
                            "1", "--top", "2", "how to install ubuntu from usb"])
        elapsed = time.monotonic() - start
    finally:
        sidecar.close()
    assert code == 0 and "first-stage order" in out and "timed out after 1.0 s" in out, out
    assert elapsed < 1.0 + 10.0, elapsed  # indexing the corpus is in this time; the old client took 50 s+


def test_a_question_without_title_is_scored_and_does_not_cost_the_window_its_reranking(sidecar, collection):
    """A blank title with a body is scored by its body, as the server scores it when an engine sends it
    (modes native and rerank; issue 45), not put last with 0.0."""
    url, model = sidecar
    query = "how to install ubuntu from usb"
    blank = Question("no-title", "", "install ubuntu from a usb stick, how to install ubuntu usb")
    bridge = BridgeSearch([*collection, blank], SidecarClient(url, token=TOKEN), window=20)
    plain = BridgeSearch([*collection, blank], None, window=20).search(query, k=20)
    assert "no-title" in [h.question.id for h in plain.hits]  # it is in the window
    result = bridge.search(query, k=20)
    assert result.reranked, result.fallback_reason
    scored = plain.hits
    fused = model.rerank(question_from_text(query), [h.question for h in scored],
                         [h.first_stage_score for h in scored], "bm25")["fused"]
    assert next(h.score for h in result.hits if h.question.id == "no-title") > 0.0
    assert [h.question.id for h in result.hits] == [scored[i].question.id
                                                 for i in np.argsort(-fused, kind="stable")]
