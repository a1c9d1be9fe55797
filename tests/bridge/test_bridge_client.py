"""The sidecar client's contract with every kind of answer, on real AskUbuntu questions: each 5xx, a reset
or an unreadable body is an outage (the bridge falls back to the first-stage order); each 3xx/4xx is a
refusal (an error to report); the request it sends, and where documents without a title go.

A scripted WSGI sidecar (waitress, as ``esrerank serve`` runs) answers what a test tells it, so these
tests need no model and no torch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waitress.server import create_server

from es_plugin_bridge.bridge import BridgeSearch, SidecarClient
from es_plugin_bridge.bridge.sidecar_client import EmbedError, SidecarUnavailable
from es_plugin_bridge.bridge.sidecar_target import DEFAULT_TIMEOUT
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text.sidecar_text import MAX_TEXT_CHARS, rerank_text

TITLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / \
    "train_titles.tsv"


class ScriptedSidecar:
    """Answers ``status`` with ``body`` (bytes, or a callable of the request's JSON) and records requests."""

    def __init__(self) -> None:
        self.status = "200 OK"
        self.body: Any = b"{}"
        self.requests: list[dict[str, Any]] = []
        self.server = create_server(self._app, host="127.0.0.1", port=0, threads=2)
        self.url = f"http://127.0.0.1:{self.server.effective_port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def _app(self, environ: dict, start_response: Any) -> list[bytes]:
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        request = {"path": environ["PATH_INFO"], "auth": environ.get("HTTP_AUTHORIZATION"),
                   "content_type": environ.get("CONTENT_TYPE"), "json": json.loads(raw)}
        self.requests.append(request)
        body = self.body(request["json"]) if callable(self.body) else self.body
        start_response(self.status, [("Content-Type", "application/json")])
        return [body]

    def answer(self, status: str, body: Any) -> None:
        self.status, self.body = status, body

    def close(self) -> None:
        self.server.close()
        self.thread.join(timeout=5)


def best_last(request: dict) -> bytes:
    """A well-formed answer ranking the documents in reverse order with falling scores."""
    n = len(request["documents"])
    return json.dumps({"results": [{"index": i, "relevance_score": (i + 1) / (n + 1)}
                                   for i in reversed(range(n))]}).encode()


@pytest.fixture(scope="module")
def sidecar() -> Iterator[ScriptedSidecar]:
    server = ScriptedSidecar()
    yield server
    server.close()


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return list(read_spec(f"pairs:{TITLES}").questions.values())[:400]


@pytest.mark.parametrize("status", ["500 Internal Server Error", "502 Bad Gateway", "503 Service Unavailable",
                                    "504 Gateway Timeout", "599 Network Connect Timeout"])
def test_every_server_error_is_an_outage_and_the_bridge_falls_back(status, sidecar, questions):
    sidecar.answer(status, b'{"error": "model crashed"}')
    code = status.split()[0]
    with pytest.raises(SidecarUnavailable, match=f"answered {code}: .*model crashed"):
        SidecarClient(sidecar.url).rerank(questions[0], questions[1:4])
    plain = BridgeSearch(questions, None, window=20).search(questions[0], k=10, exclude={questions[0].id})
    result = BridgeSearch(questions, SidecarClient(sidecar.url), window=20).search(
        questions[0], k=10, exclude={questions[0].id})
    assert not result.reranked and f"answered {code}" in result.fallback_reason
    assert [h.question.id for h in result.hits] == [h.question.id for h in plain.hits]
    assert [h.score for h in result.hits] == [h.first_stage_score for h in plain.hits]


@pytest.mark.parametrize("status", ["300 Multiple Choices", "301 Moved Permanently", "400 Bad Request",
                                    "401 Unauthorized", "403 Forbidden", "404 Not Found",
                                    "405 Method Not Allowed", "413 Payload Too Large",
                                    "415 Unsupported Media Type", "422 Unprocessable Entity",
                                    "499 Client Closed Request"])
def test_every_refusal_is_an_error_not_a_fallback(status, sidecar, questions):
    sidecar.answer(status, b'{"error": "first_stage dfr has no beta"}')
    code = status.split()[0]
    with pytest.raises(UserError, match=f"refused the request \\({code}\\): .*no beta"):
        SidecarClient(sidecar.url).rerank(questions[0], questions[1:4])
    with pytest.raises(UserError, match=code):
        BridgeSearch(questions, SidecarClient(sidecar.url), window=5).search(questions[0])


def test_an_error_detail_is_cut_to_300_characters(sidecar, questions):
    sidecar.answer("500 Internal Server Error", b"x" * 1000)
    with pytest.raises(SidecarUnavailable) as err:
        SidecarClient(sidecar.url).rerank(questions[0], questions[1:3])
    assert str(err.value) == "sidecar answered 500: " + "x" * 300
    sidecar.answer("400 Bad Request", b"y" * 1000)
    with pytest.raises(UserError) as refused:
        SidecarClient(sidecar.url).rerank(questions[0], questions[1:3])
    assert str(refused.value) == "sidecar refused the request (400): " + "y" * 300


@pytest.mark.parametrize(("status", "error", "prefix"), [
    ("502 Bad Gateway", SidecarUnavailable, "sidecar answered 502: "),
    ("403 Forbidden", UserError, "sidecar refused the request (403): "),
])
def test_an_error_body_that_is_not_utf8_is_reported_not_a_crash(status, error, prefix, sidecar, questions):
    sidecar.answer(status, b"\xff\xfeproxy says no")  # a proxy's latin-1 page, say
    with pytest.raises(error) as err:
        SidecarClient(sidecar.url).rerank(questions[0], questions[1:3])
    assert str(err.value) == prefix + "\ufffd\ufffdproxy says no"


def test_the_request_carries_the_documents_scores_token_and_path(sidecar, questions):
    sidecar.answer("200 OK", best_last)
    sidecar.requests.clear()
    query, docs = questions[0], questions[1:6]
    got = SidecarClient(sidecar.url + "/", token="s3cret").rerank(query, docs, [5.0, 4, 3, 2, 1], "bm25")
    assert got == [(4, 5 / 6), (3, 4 / 6), (2, 3 / 6), (1, 2 / 6), (0, 1 / 6)]
    (request,) = sidecar.requests
    assert request["path"] == "/v1/rerank" and request["auth"] == "Bearer s3cret"
    assert request["content_type"] == "application/json"
    assert request["json"] == {
        "query": {"id": query.id, "title": query.title, "body": query.body},
        "documents": [{"id": d.id, "title": d.title, "body": d.body} for d in docs],
        "first_stage_scores": [5.0, 4.0, 3.0, 2.0, 1.0], "first_stage": "bm25"}
    sidecar.requests.clear()
    SidecarClient(sidecar.url).rerank(query, docs)  # no token, no first stage
    (request,) = sidecar.requests
    assert request["auth"] is None and set(request["json"]) == {"query", "documents"}


def test_a_path_prefix_in_the_url_is_kept(sidecar, questions):
    sidecar.answer("200 OK", best_last)
    sidecar.requests.clear()
    SidecarClient(sidecar.url + "/rerank-proxy/").rerank(questions[0], questions[1:3])
    assert sidecar.requests[-1]["path"] == "/rerank-proxy/v1/rerank"


def test_documents_the_sidecar_would_not_score_are_left_out_and_ranked_last_in_their_order(sidecar, questions,
                                                                                           caplog):
    """The server's own rule (``text.sidecar_text.unscored_candidate``): a blank title with a body is sent
    and scored, as the server scores it when an engine sends it (issue 45); a document blank in every
    part, or over the sidecar's length, is left out and ranked last."""
    caplog.set_level(logging.INFO, logger="es_plugin_bridge.bridge.sidecar_client")
    sidecar.answer("200 OK", best_last)
    sidecar.requests.clear()
    blank_title, blank = Question("blank-a", "  ", "some body"), Question("blank-b", "", "")
    too_long = Question("long", "x" * (MAX_TEXT_CHARS + 1), "")
    docs = [blank_title, questions[1], questions[2], blank, questions[3], too_long]
    got = SidecarClient(sidecar.url).rerank(questions[0], docs, [9.0, 8.0, 7.0, 6.0, 5.0, 4.0], "bm25")
    assert got == [(4, 4 / 5), (2, 3 / 5), (1, 2 / 5), (0, 1 / 5), (3, 0.0), (5, 0.0)]
    sent = sidecar.requests[-1]["json"]
    assert [d["id"] for d in sent["documents"]] == ["blank-a", *(q.id for q in questions[1:4])]
    assert sent["first_stage_scores"] == [9.0, 8.0, 7.0, 5.0]  # the scores of the documents sent, in order
    assert [r.getMessage() for r in caplog.records] == [
        "2 of 6 documents are blank or too long for the sidecar; ranked last"]


def test_nothing_to_rerank_is_an_outage_before_any_request(sidecar, questions):
    sidecar.requests.clear()
    with pytest.raises(SidecarUnavailable, match="^the query has no title; the sidecar cannot score it$"):
        SidecarClient(sidecar.url).rerank(Question("q", " ", "body only"), questions[1:3])
    with pytest.raises(SidecarUnavailable,
                       match="^no document holds text the sidecar scores; nothing for it to rerank$"):
        SidecarClient(sidecar.url).rerank(questions[0], [Question("d", "", " "), Question("e", " ", "")])
    assert sidecar.requests == []


@pytest.mark.parametrize(("body", "reason"), [
    (b"not json", "lacks results"),
    (b'{"hits": []}', "lacks results"),
    (b'{"results": [{"index": 0}]}', "lacks results"),
    (b'{"results": [{"index": "first", "relevance_score": 1}]}', "lacks results"),
    (b'{"results": [{"index": 0, "relevance_score": 1}, {"index": 0, "relevance_score": 1}]}',
     "^sidecar answer does not score every document exactly once$"),
    (b'{"results": [{"index": 0, "relevance_score": 1}]}', "exactly once"),
    (b'{"results": [{"index": 0, "relevance_score": 1}, {"index": 2, "relevance_score": 1}]}',
     "exactly once"),
    (b'{"results": []}', "exactly once"),
])
def test_an_answer_that_does_not_score_every_document_once_is_an_outage(body, reason, sidecar, questions):
    sidecar.answer("200 OK", body)
    with pytest.raises(SidecarUnavailable, match=reason):
        SidecarClient(sidecar.url).rerank(questions[0], questions[1:3])


class ResettingSidecar:
    """Accepts one connection, reads the request and closes it without a byte of answer."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")

    def close(self) -> None:
        self.sock.close()
        self.thread.join(timeout=5)


def test_a_connection_reset_without_an_answer_is_an_outage(questions):
    server = ResettingSidecar()
    try:
        with pytest.raises(SidecarUnavailable, match="closed the connection without an HTTP answer") as caught:  # noqa: E501
            SidecarClient(server.url, timeout=5).rerank(questions[0], questions[1:3])
        # A plain-HTTP server that hangs up (as one at its connection limit does) is not a TLS problem
        # (issue 48, item 10): no TLS handshake succeeds there, so no https:// advice.
        assert str(caught.value).endswith("likely at its connection limit (esrerank serve --max-connections) "
                                          "or restarting")
        assert "TLS" not in str(caught.value)
    finally:
        server.close()


def test_nothing_listening_is_unreachable(questions):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(SidecarUnavailable, match="unreachable"):
        SidecarClient(url).rerank(questions[0], questions[1:3])


def test_https_to_a_plain_http_sidecar_is_an_outage_that_names_tls(sidecar, questions):
    """A plain waitress (not the sidecar's hardened server, which answers at once) waits for a request
    that never comes: the deadline ends the handshake, and the reason names the likely fix."""
    sidecar.answer("200 OK", best_last)  # over plain HTTP this sidecar would answer well
    assert SidecarClient(sidecar.url).rerank(questions[0], questions[1:3]) == [(1, 2 / 3), (0, 1 / 3)]
    https = sidecar.url.replace("http://", "https://")
    reason = rf"TLS handshake with {https} failed \(no answer in 0.5 s\): the sidecar there speaks plain HTTP"
    with pytest.raises(SidecarUnavailable, match=rf"{reason}\? use {sidecar.url}$"):
        SidecarClient(https, timeout=0.5).rerank(questions[0], questions[1:3])


@pytest.mark.parametrize(("url", "timeout", "message"), [
    ("localhost:8080", 1.0, "must start with http"),
    ("ftp://localhost", 1.0, "must start with http"),
    ("http://", 1.0, "no host"),
    ("http://localhost", 0.0, "must be > 0"),
    ("http://localhost", -1.0, "must be > 0"),
])
def test_a_bad_url_or_timeout_is_refused_at_once(url, timeout, message):
    with pytest.raises(UserError, match=message):
        SidecarClient(url, timeout=timeout)


def test_the_smallest_timeout_and_the_url_parts_are_kept():
    client = SidecarClient("https://reranker.internal:8443/base/", token="t", timeout=1e-3)
    assert (client.url, client.timeout, client.token) == ("https://reranker.internal:8443/base", 1e-3, "t")
    assert SidecarClient("http://localhost").timeout == DEFAULT_TIMEOUT == 10.0  # the one documented default
    assert SidecarClient("http://localhost/PREFIX//").url == "http://localhost/PREFIX"  # only slashes go


def test_a_sidecar_that_never_accepts_the_connection_times_out_at_the_deadline(questions):
    """A full accept queue leaves the SYN unanswered: connecting itself must be bounded by the timeout
    (the watchdog cannot shut down a socket that is not connected yet)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(address)
        fillers.append(filler)
    time.sleep(0.2)
    unblock = threading.Timer(8.0, listener.close)  # a client that ignored its timeout fails, not hangs
    unblock.start()
    try:
        client = SidecarClient(f"http://{address[0]}:{address[1]}", timeout=0.5)
        start = time.monotonic()
        with pytest.raises(SidecarUnavailable, match="timed out after 0.5 s"):
            client.rerank(questions[0], questions[1:3])
        assert time.monotonic() - start < 0.5 + 5.0  # slack for a loaded 2-core machine
    finally:
        unblock.cancel()
        listener.close()
        for filler in fillers:
            filler.close()


def test_a_timed_out_call_leaves_no_worker_reading_the_trickle(questions):
    """The caller gives up at the deadline and shuts the call's socket down: its worker thread ends
    too, instead of reading a trickling answer for as long as the server goes on."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
            while not stop.wait(0.05):
                conn.sendall(b" ")

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    before = {t.ident for t in threading.enumerate()}
    try:
        host, port = listener.getsockname()
        with pytest.raises(SidecarUnavailable, match="timed out"):
            SidecarClient(f"http://{host}:{port}", timeout=0.3).rerank(questions[0], questions[1:3])
        deadline = time.monotonic() + 5.0  # slack for a loaded 2-core machine; the trickle lasts 50 s
        while time.monotonic() < deadline:
            lingering = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
            if not lingering:
                break
            time.sleep(0.05)
        assert not lingering, lingering
    finally:
        stop.set()
        listener.close()
        server.join(timeout=5)


def _encoded_or_ranked(request: dict) -> bytes:
    if "texts" in request:
        return json.dumps({"embeddings": [{"vector": [1.0], "terms": {}}] * len(request["texts"])}).encode()
    return best_last(request)


def test_embedding_and_reranking_share_one_pooled_connection_and_say_why_they_fail(sidecar, questions):
    """One client for every call the product makes (issue 45): ``/v1/encode`` (es index, the modes that
    embed the query), the token check and ``/v1/rerank`` reuse one kept-alive connection; the indexing
    side's failures keep their wording and status (``EmbedError``)."""
    client = SidecarClient(sidecar.url, token="s3cret")
    made: list[int] = []
    make = client.pool._make
    client.pool._make = lambda: made.append(1) or make()  # type: ignore[method-assign]
    sidecar.answer("200 OK", _encoded_or_ranked)
    sidecar.requests.clear()
    assert len(client.embed(questions[:3])) == 3
    client.check_token()
    client.rerank(questions[0], questions[1:3])
    assert made == [1]
    assert [r["path"] for r in sidecar.requests] == ["/v1/encode", "/v1/encode", "/v1/rerank"]
    assert sidecar.requests[0]["json"] == {"texts": [rerank_text(q) for q in questions[:3]]}
    assert {r["auth"] for r in sidecar.requests} == {"Bearer s3cret"}
    sidecar.answer("400 Bad Request", b'{"error": "texts.0: text must not be empty"}')
    with pytest.raises(EmbedError, match=r"^sidecar answered 400 to /v1/encode: .*must not be empty") as bad:
        client.embed(questions[:1])
    assert bad.value.refused_a_text and bad.value.status == 400
    sidecar.answer("401 Unauthorized", b'{"error": "bad token"}')
    with pytest.raises(UserError, match="^sidecar answered 401 to /v1/encode: "):
        client.check_token()
    unreachable = r"^sidecar at http://127\.0\.0\.1:1 did not answer /v1/encode: "
    with pytest.raises(EmbedError, match=unreachable) as down:
        SidecarClient("http://127.0.0.1:1", timeout=2.0).embed(questions[:1])
    assert down.value.status is None and not down.value.refused_a_text
