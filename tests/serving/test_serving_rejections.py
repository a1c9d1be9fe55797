"""What a client or an operator sees of a refused request (issue 15): the OpenAPI document says the token
is needed, every refusal — the server's own before the app (401, 413 by Content-Length, 431, a late
request) and the app's (400, 413, 415) — is counted in ``/metrics`` by reason and logged in one line
without the token, a compressed body is a 415 naming its encoding, ``--host ::`` takes IPv4 too, and
``--token-file`` reads one token a line as its help says."""

from __future__ import annotations

import gzip
import json
import logging
import socket
import threading
import time
import urllib.request

import pytest
from sidecar_apps import threaded_server

from es_plugin_bridge.cli.serve import serve_command
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.server import Limits, Server

TOKEN = "rejections-t0ken"
WRONG = "not-the-t0ken-4321"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def model(exported) -> ModelDirectory:
    return ModelDirectory.load(exported["bow-cnn"], threads=1)


def _metric(text: str, reason: str, status: int) -> float:
    line = f'esrerank_requests_rejected_total{{reason="{reason}",status="{status}"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].rsplit(" ", 1)[1]) if found else 0.0


def _rejections(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "esrerank.sidecar"
            and r.getMessage().startswith("rejected")]


# -- OpenAPI ---------------------------------------------------------------------------------------
def test_openapi_declares_the_bearer_scheme_and_which_paths_need_it(model):
    doc = create_app(model, token=TOKEN).test_client().get("/openapi.json", headers=AUTH).json
    assert doc["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    assert doc["security"] == [{"bearer": []}]  # every operation, unless it says otherwise
    for path in ("/healthz", "/readyz"):
        assert doc["paths"][path]["get"]["security"] == []
    for path, item in doc["paths"].items():
        if path not in ("/healthz", "/readyz"):
            op = next(iter(item.values()))
            assert "security" not in op and "401" in op["responses"], path
    open_doc = create_app(model).test_client().get("/openapi.json").json  # served without a token
    assert "security" not in open_doc and "securitySchemes" not in open_doc["components"]
    assert not any("401" in op["responses"] for item in open_doc["paths"].values() for op in item.values())


# -- the app's own refusals ------------------------------------------------------------------------
def test_a_compressed_body_is_a_415_naming_its_encoding(model):
    client = create_app(model, token=TOKEN).test_client()
    body = json.dumps({"query": "q", "documents": ["a"]}).encode()
    for path in ("/v1/rerank", "/v2/rerank"):
        resp = client.post(path, data=gzip.compress(body), headers={**AUTH, "Content-Encoding": "gzip",
                                                                    "Content-Type": "application/json"})
        assert resp.status_code == 415 and "gzip" in resp.json["error"], resp.json
    plain = client.post("/v1/rerank", data=body, headers={**AUTH, "Content-Encoding": "identity",
                                                          "Content-Type": "application/json"})
    assert plain.status_code == 200


def test_the_apps_refusals_are_counted_by_reason_and_logged_once_without_the_token(model, caplog):
    client = create_app(model, token=TOKEN, max_documents=3).test_client()
    caplog.set_level(logging.INFO, logger="esrerank.sidecar")
    sent = [
        (client.post("/v1/rerank", json={"query": "q", "documents": ["a"]},
                     headers={"Authorization": f"Bearer {WRONG}"}), "unauthorized", 401),
        (client.post("/v1/rerank", data="query=q", headers=AUTH), "not_json", 415),
        (client.post("/v1/rerank", data=b"{}", headers={**AUTH, "Content-Encoding": "br",
                                                        "Content-Type": "application/json"}),
         "unsupported_content_encoding", 415),
        (client.post("/v1/rerank", json={"query": "q", "documents": ["a"], "topn": 1}, headers=AUTH),
         "invalid", 400),
        (client.post("/v2/rerank", json={"query": "q", "documents": ["a"] * 4}, headers=AUTH),
         "too_many_documents", 413),
        (client.get("/v1/rerank", headers=AUTH), "method_not_allowed", 405),
    ]
    assert [resp.status_code for resp, _, _ in sent] == [status for _, _, status in sent]
    text = client.get("/metrics", headers=AUTH).get_data(as_text=True)
    for _, reason, status in sent:
        assert _metric(text, reason, status) == 1.0, (reason, status)
    lines = _rejections(caplog)
    assert len(lines) == len(sent)
    for line, (_, reason, status) in zip(lines, sent, strict=True):
        assert f": {status} {reason} (" in line and "from 127.0.0.1" in line, line
    assert not any(WRONG in line or TOKEN in line for line in caplog.messages)


# -- the server's refusals, before the app ---------------------------------------------------------
@pytest.fixture(scope="module")
def server(model):
    limits = Limits(max_body_bytes=64 * 1024, max_header_bytes=8 * 1024, request_timeout=1.0)
    with threaded_server(model, TOKEN, limits) as srv:
        yield srv


def _send(port: int, data: bytes) -> bytes:
    """The answer's status line and headers (read until the blank line: the server may then reset a
    connection whose request it did not read whole)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    return answer


def _scrape(port: int) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=AUTH)
    with urllib.request.urlopen(request, timeout=10) as resp:
        return resp.read().decode()


def test_refusals_before_the_app_are_counted_and_logged_without_the_token(server, caplog):
    caplog.set_level(logging.INFO, logger="esrerank.sidecar")
    before = _scrape(server.port)
    wrong = (f"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRONG}\r\n"
             "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n").encode()
    assert _send(server.port, wrong).split(b" ")[1] == b"401"  # the body is never read
    too_big = (f"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
               "Content-Type: application/json\r\nContent-Length: 5000000\r\n\r\n").encode()
    assert _send(server.port, too_big).split(b" ")[1] == b"413"
    huge_header = b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n"
    assert _send(server.port, huge_header).split(b" ")[1] == b"431"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as slow:  # never finishes
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        deadline = time.monotonic() + 8
        while _metric(_scrape(server.port), "request_timeout", 408) < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
    after = _scrape(server.port)
    for reason, status in (("unauthorized", 401), ("body_too_large", 413), ("headers_too_large", 431),
                           ("request_timeout", 408)):
        assert _metric(after, reason, status) - _metric(before, reason, status) == 1.0, (reason, status)
    lines = _rejections(caplog)
    assert len(lines) == 4 and any("POST /v1/rerank" in line and "401 unauthorized" in line
                                   for line in lines), lines
    assert not any(WRONG in m or TOKEN in m for m in caplog.messages)


# -- --host :: -------------------------------------------------------------------------------------
def test_host_ipv6_any_serves_ipv4_too(model):
    if not socket.has_ipv6 or not socket.has_dualstack_ipv6():
        pytest.skip("this OS has no dual-stack IPv6 sockets")
    try:
        srv = Server(create_app(model), host="::", port=0, threads=1)
    except Exception as exc:  # IPv6 disabled in this container
        pytest.skip(f"cannot listen on [::]: {exc}")
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        for host in ("127.0.0.1", "[::1]"):
            with urllib.request.urlopen(f"http://{host}:{srv.port}/healthz", timeout=10) as resp:
                assert json.loads(resp.read()) == {"status": "ok"}, host
    finally:
        srv.close()
        thread.join(timeout=5)


# -- --token-file ------------------------------------------------------------------------------------
def test_token_file_help_and_behaviour_agree_one_token_a_line(exported, cli, tmp_path):
    help_text = next(p.help for p in serve_command.params if p.name == "token_file")
    assert "one a line" in help_text and "# are ignored" in help_text
    path = tmp_path / "token"
    path.write_text("\n\n# only a comment\n")
    path.chmod(0o600)
    code, _, err = cli(["serve", str(exported["bow-cnn"]), "--token-file", str(path)])
    assert code == 2 and "holds no token" in err and len(err.strip().splitlines()) == 1
    path.write_text("s3cret\ntwo words\n")
    code, _, err = cli(["serve", str(exported["bow-cnn"]), "--token-file", str(path)])
    assert code == 2 and f"line 2 of the token file {path}" in err and len(err.strip().splitlines()) == 1
    # Blank and comment lines are skipped, each token stripped (the live sidecars of
    # tests/serving/test_serving_cohere.py serve from such a file); here the tokens read are checked.
    from es_plugin_bridge.serving.token_file import read_tokens

    path.write_text("  s3cret \n# rotated monthly\n\nother-cluster\n")
    assert read_tokens(path) == ("s3cret", "other-cluster")
