"""The sidecar client's rules that mutation testing found unpinned (``es_plugin_bridge/bridge/
sidecar_client.py``), on real AskUbuntu questions:

- a token or a host that can never be sent is a configuration mistake, reported when the client is made
  (before: the call's thread died of http.client's ValueError or the IDNA codec's UnicodeError, and the
  caller got a bare AssertionError);
- a call abandoned at its deadline: its worker is a daemon thread named ``sidecar-call`` whose socket has
  a finite timeout past the deadline, and if it connects only after the deadline it sends nothing;
- ``abort`` of a call whose socket is already closed (the answer completed as the deadline passed) is
  silent.

The deadline tests sequence the worker with events, not sleeps: nothing here measures time.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from es_plugin_bridge.bridge import sidecar_client
from es_plugin_bridge.bridge.sidecar_client import SidecarClient, SidecarUnavailable, _Call
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError

VAL = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"


class Recorder:
    """A sidecar that records each request (path, Authorization, JSON body) and ranks in given order."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                          "json": body})
                n = len(body["documents"])
                data = json.dumps({"results": [{"index": i, "relevance_score": 1.0 - i / n}
                                               for i in range(n)]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sidecar() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.close()


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return list(read_spec(f"pairs:{VAL}").questions.values())[:6]


# -- what cannot be sent is refused up front --------------------------------------------------------------
@pytest.mark.parametrize("token", ["s3cret\n", "s3cret\r\n", "two words", "s\u00e9cret", "tab\there", " "])
def test_a_token_the_sidecar_can_never_accept_is_a_user_error(token):
    """The sidecar takes printable ASCII without spaces (``bearer_token.check_token``); a token with
    a line break (a token file's or a secret's trailing newline) cannot even be sent as a header."""
    with pytest.raises(UserError) as info:
        SidecarClient("http://127.0.0.1:8080", token=token)
    assert str(info.value) == "sidecar token must be printable ASCII without spaces or line breaks"


@pytest.mark.parametrize("url", ["http://a..b:8080", "http://sidecar..local", f"http://{'a' * 64}.example"])
def test_a_host_name_no_resolver_can_take_is_a_user_error(url):
    """``socket.getaddrinfo`` encodes a host name with the IDNA codec, which refuses an empty label or
    one over 63 characters."""
    with pytest.raises(UserError) as info:
        SidecarClient(url)
    assert str(info.value) == f"sidecar URL has a malformed host: {url!r}"


def test_good_tokens_and_hosts_are_sent_as_given(sidecar, questions):
    port = sidecar.url.rsplit(":", 1)[1]
    query, docs = questions[0], questions[1:]
    for url, token, auth in ((sidecar.url, "s3cret-Token_~!", "Bearer s3cret-Token_~!"),
                             (f"http://localhost:{port}/", None, None), (sidecar.url, "", None)):
        ranked = SidecarClient(url, token=token, timeout=5.0).rerank(query, docs)
        assert ranked == [(i, pytest.approx(1.0 - i / len(docs))) for i in range(len(docs))]
        assert sidecar.requests[-1]["auth"] == auth and sidecar.requests[-1]["path"] == "/v1/rerank"
        sent = sidecar.requests[-1]["json"]
        assert sent["query"] == {"id": query.id, "title": query.title, "body": query.body}
        assert [d["id"] for d in sent["documents"]] == [d.id for d in docs]


# -- a call abandoned at its deadline ---------------------------------------------------------------------
def test_a_call_that_connects_after_its_deadline_sends_nothing(monkeypatch, sidecar, questions):
    """The caller gives up at the deadline; the worker, still connecting, is a daemon (it never holds the
    interpreter at exit) whose socket timeout is finite and past the deadline; once it connects it sees
    the call was abandoned and sends nothing, so the sidecar does no work for an answer nobody reads."""
    gate, timeouts = threading.Event(), []
    connect = http.client.HTTPConnection.connect

    def late_connect(conn: http.client.HTTPConnection) -> None:
        timeouts.append(conn.timeout)
        gate.wait(30)
        connect(conn)

    monkeypatch.setattr(http.client.HTTPConnection, "connect", late_connect)
    client = SidecarClient(sidecar.url, timeout=0.2)
    with pytest.raises(SidecarUnavailable, match="timed out after 0.2 s"):
        client.rerank(questions[0], questions[1:])
    workers = [t for t in threading.enumerate() if t.name == "sidecar-call"]
    assert len(workers) == 1 and workers[0].daemon
    assert timeouts == [pytest.approx(0.2 + sidecar_client._THREAD_GRACE_S)]
    gate.set()
    workers[0].join(30)
    assert not workers[0].is_alive() and sidecar.requests == []


def test_a_call_aborted_before_it_connects_sends_nothing(sidecar):
    client = SidecarClient(sidecar.url, timeout=5.0)
    call = _Call(client.pool, sidecar.url, "/v1/rerank", b'{"query": "q", "documents": ["a"]}',
                 {"Content-Type": "application/json"})
    call.abort()
    call.run()
    assert call.done.is_set() and call.answer is None
    assert isinstance(call.error, SidecarUnavailable) and "abandoned" in str(call.error)
    assert sidecar.requests == []


def test_abort_after_the_answer_closed_the_socket_is_silent():
    """The worker closes its connection as soon as the answer is read; if that happens just as the
    deadline passes, ``abort`` finds a closed socket, whose shutdown fails (EBADF): nothing to do."""
    left, right = socket.socketpair()
    right.close()
    call = _Call(SidecarClient("http://127.0.0.1:9").pool, "http://127.0.0.1:9", "/v1/rerank", b"{}", {})
    call._sock = left
    left.close()
    call.abort()
    with pytest.raises(OSError):
        left.shutdown(socket.SHUT_RDWR)
