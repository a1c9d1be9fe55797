"""Regression tests for the outside probe of the sidecar (issue 8, section 4): each finding, as a new user
or an attacker found it, answered now with a 4xx naming the culprit or a one-line refusal, never a 500, a
traceback or a silent weakening."""

from __future__ import annotations

import json
import shutil
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from sidecar_apps import threaded_server

from es_plugin_bridge.bridge.sidecar_client import EmbedError, SidecarClient
from es_plugin_bridge.core.fusion import minmax
from es_plugin_bridge.core.manifest import manifest_digest, write_manifest
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.schemas import NOT_BLANK_PATTERN
from es_plugin_bridge.serving.server import LINGER_S, Limits

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def model(exported) -> ModelDirectory:
    return ModelDirectory.load(exported["bow-cnn"], threads=1)


@pytest.fixture(scope="module")
def client(model):
    return create_app(model, token=TOKEN).test_client()


@pytest.fixture(scope="module")
def semeval(semeval_dev):
    return semeval_dev[:3]


def _post_raw(client, data: bytes | str, path: str = "/v1/rerank"):
    return client.post(path, data=data, headers=AUTH)


# -- bodies ---------------------------------------------------------------------------------------
def test_a_body_nested_1000_levels_deep_is_a_400(client):
    for body in ('{"query": "q", "documents": ' + "[" * 1000 + "]" * 1000 + "}", "[" * 1000 + "]" * 1000,
                 '{"query": "q", "documents": ["a"], "model": ' + '{"a": ' * 1000 + "1" + "}" * 1001):
        resp = _post_raw(client, body)
        assert resp.status_code == 400 and "nested" in resp.json["error"], resp.json


@pytest.mark.parametrize(("body", "field"), [
    ('{"query": "\\ud800", "documents": ["a"]}', "query"),
    ('{"query": "q", "documents": ["a", "b\\udfffc"]}', "documents.1"),
    ('{"query": "q", "documents": [{"title": "t", "body": "\\ud800"}]}', "documents.0.body"),
])
def test_a_lone_surrogate_is_a_400_naming_the_field(client, body, field):
    resp = _post_raw(client, body)
    assert resp.status_code == 400 and resp.json["field"] == field, resp.json
    embed = _post_raw(client, '{"texts": ["ok", "\\ud800"]}', "/v1/encode")
    assert embed.status_code == 400 and embed.json["field"] == "texts.1"


def test_raw_utf8_encoded_surrogates_are_refused_too(client):
    body = b'{"query": "\xed\xa0\x80", "documents": ["a"]}'  # json.loads decodes bytes with surrogatepass
    resp = _post_raw(client, body)
    assert resp.status_code == 400 and resp.json["field"] == "query"


def test_duplicate_keys_and_nan_are_refused(client):
    resp = _post_raw(client, '{"query": "q", "documents": ["a"], "top_n": 1, "top_n": 5}')
    assert resp.status_code == 400 and resp.json["field"] == "top_n" and "twice" in resp.json["error"]
    resp = _post_raw(client, '{"query": "q", "documents": [{"title": "t", "title": "u"}]}')
    assert resp.status_code == 400 and resp.json["field"] == "title"
    resp = _post_raw(client, '{"query": "q", "documents": ["a"], "first_stage_scores": [NaN]}')
    assert resp.status_code == 400 and "not valid JSON" in resp.json["error"]


def test_first_stage_scores_whose_range_overflows_are_scored(client, model, semeval):
    assert np.isfinite(minmax(np.array([1e308, -1e308, 0.0]))).all()
    np.testing.assert_allclose(minmax(np.array([1e308, -1e308, 0.0])), [1.0, 0.0, 0.5])
    rq = semeval[0]
    docs = [{"title": c.title, "body": c.body} for c in rq.candidates[:3]]
    scores = [1e308, -1e308, 0.0]
    resp = client.post("/v1/rerank", json={"query": rq.query.title, "documents": docs,
                                           "first_stage_scores": scores, "explain": True}, headers=AUTH)
    assert resp.status_code == 200, resp.json
    fused = model.rerank(_q(rq.query.title), [_q(d) for d in docs], scores)["fused"]
    assert np.isfinite(fused).all()
    assert [r["index"] for r in resp.json["results"]] == list(np.argsort(-fused, kind="stable"))


def _q(item):
    from es_plugin_bridge.serving.schemas import DocumentIn, to_question

    return to_question(DocumentIn(**item) if isinstance(item, dict) else item)


def test_405_carries_allow_and_the_spec_says_texts_are_not_blank(client):
    resp = client.get("/v1/rerank", headers=AUTH)
    assert resp.status_code == 405 and set(resp.headers["Allow"].split(", ")) >= {"POST"}
    assert "error" in resp.json
    schemas = client.get("/openapi.json", headers=AUTH).json["components"]["schemas"]
    query = schemas["RerankRequest"]["properties"]["query"]["anyOf"][0]
    assert query["pattern"] == NOT_BLANK_PATTERN and query["minLength"] == 1
    assert schemas["DocumentIn"]["properties"]["title"]["pattern"] == NOT_BLANK_PATTERN


# -- tokens ---------------------------------------------------------------------------------------
def test_an_empty_token_is_refused_not_taken_as_no_authentication(model, exported, cli, monkeypatch):
    for bad in ("", "   ", "two words", "line\nbreak"):
        with pytest.raises(UserError, match="token"):
            create_app(model, token=bad)
    code, _, err = cli(["serve", str(exported["bow-cnn"]), "--token", ""])
    assert code == 2 and "token is empty" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv("ESRERANK_TOKEN", "")
    code, _, err = cli(["serve", str(exported["bow-cnn"])])
    assert code == 2 and "ESRERANK_TOKEN is set but empty" in err


def test_an_empty_token_file_is_refused(exported, cli, tmp_path):
    path = tmp_path / "token"
    path.write_text("\n")
    code, _, err = cli(["serve", str(exported["bow-cnn"]), "--token-file", str(path)])
    assert code == 2 and "empty" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli(["serve", str(exported["bow-cnn"]), "--token-file", str(path), "--token", "x"])
    assert code == 2 and "once" in err


# -- the server (waitress, hardened) --------------------------------------------------------------
@pytest.fixture(scope="module")
def server(model):
    limits = Limits(max_body_bytes=1024 * 1024, max_header_bytes=8 * 1024, request_timeout=1.5)
    with threaded_server(model, TOKEN, limits) as srv:
        yield srv


def _exchange(port: int, head: bytes, body: bytes = b"", wait: float = 5.0) -> tuple[int, dict, float]:
    """Send ``head`` (+ ``body``) and read until the server closes or answers; (status, JSON, seconds)."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(head + body)
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1]), time.monotonic() - start


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 1 << 30


def test_unauthenticated_requests_are_refused_before_their_body_is_read(server):
    head = (b"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n")
    status, body, seconds = _exchange(server.port, head)  # the 1 MB body is never sent
    # Sooner than request_timeout (1.5 s), the least a server waiting for the body would take.
    assert status == 401 and body["error"].startswith("Unauthorized") and seconds < 1.5, seconds


def test_the_servers_own_answers_are_json(server):
    too_big = (f"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
               "Content-Type: application/json\r\nContent-Length: 5000000\r\n\r\n").encode()
    status, body, _ = _exchange(server.port, too_big)
    assert status == 413 and "max_body" in body["error"]
    status, body, _ = _exchange(server.port, b"GET /healthz HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n")
    assert status == 431 and "error" in body
    status, body, _ = _exchange(server.port, b"NONSENSE\r\n\r\n")
    assert status == 400 and "error" in body


def test_a_client_that_sends_a_body_over_the_cap_whole_reads_its_413(server, semeval_dev):
    """Clients send the whole body before they read (urllib, http.client, the product's own client).
    The server answers 413 once the headers say the length, and then lingers: it shuts its side down and
    drops what the client still sends, so the answer reaches the client instead of a reset (closing a
    socket with unread bytes sends RST, which discarded the 413: urllib read "connection reset", the
    product's client "broken pipe", for a body 40 times the 1 MB cap)."""
    request = urllib.request.Request(f"{server.url}/v1/rerank", data=b"x" * (40 << 20), headers=AUTH)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=20)
    answer = json.loads(refused.value.read())
    assert refused.value.code == 413 and "--max-body-mb" in answer["error"], answer
    long_title = (" ".join(q.query.title for q in semeval_dev) * 200)[:90_000]  # real titles
    with pytest.raises(EmbedError) as embed:  # 20 of them: 1.8 MB of JSON
        SidecarClient(server.url, token=TOKEN, timeout=20).embed([Question("big", long_title, "")] * 20)
    assert embed.value.status == 413 and embed.value.refused_a_text, embed.value  # es index splits it
    assert "--max-body-mb" in str(embed.value)


def test_a_refused_connection_lingers_a_bounded_time_whatever_the_client_does(server):
    """After its 413, a client that neither sends the rest nor closes holds its connection for LINGER_S
    (plus the event loop's one-second turn), not until ``idle_timeout``: the linger is bounded."""
    channels = server.servers[0].active_channels
    head = (f"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 5000000\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head + b"x" * 65536)
        start, data = time.monotonic(), b""
        while chunk := sock.recv(65536):  # the answer, then the server's FIN (its side shut down)
            data += chunk
        assert data.split(b" ")[1] == b"413"
        port = sock.getsockname()[1]

        def mine() -> list:
            return [c for c in list(channels.values()) if c.addr[1] == port]

        assert mine()  # still open: the server reads what this client may still send
        while mine() and time.monotonic() - start < LINGER_S + 5:
            time.sleep(0.05)
        elapsed = time.monotonic() - start
    assert not mine() and elapsed < LINGER_S + 3, elapsed


def test_a_client_that_trickles_its_request_is_disconnected(server):
    start, closed = time.monotonic(), False
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 200:  # 20 s at this pace
            try:
                sock.send(bytes([byte]))
                closed = sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
            except BlockingIOError:  # nothing to read: still connected
                pass
            except OSError:  # reset or broken pipe
                closed = True
            if closed:
                break
            time.sleep(0.1)
    elapsed = time.monotonic() - start
    # request_timeout plus the maintenance interval, with slack for a loaded 2-core machine; a server
    # that let the trickle go on would hold it for 20 s.
    assert closed and 1.5 <= elapsed < 1.5 + 8.5, elapsed


# -- config.json beyond its schema, and the manifest's origin -------------------------------------
def _rewritten(exported, tmp_path, edit) -> Path:
    directory = tmp_path / "model"
    shutil.copytree(exported["gru"], directory)
    config = json.loads((directory / "config.json").read_text())
    edit(config)
    (directory / "config.json").write_text(json.dumps(config))
    write_manifest(directory)
    return directory


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c.update(max_title=10**9), "max_title"),
    (lambda c: c.update(max_body=10**9), "max_body"),
    (lambda c: c["beta"]["fusion"]["bm25"].update(neural=float("nan")), "beta.fusion"),
    (lambda c: c["beta"]["fusion"]["bm25"].update(neural=1e308), "beta.fusion"),
    (lambda c: c["beta"]["fusion"]["bm25"].update(first_stage=-0.5), "beta.fusion"),
    (lambda c: c["beta"].update(model=[1e308, 1.0]), "beta.model"),
    (lambda c: c["beta"]["calibration"].update(bm25=[1.0, float("inf")]), "beta.calibration"),
    (lambda c: c["beta"].update(fusion_default="dfr"), "fusion_default"),
])
def test_config_values_out_of_range_are_refused_at_load_in_one_line(exported, tmp_path, cli, edit, message):
    directory = _rewritten(exported, tmp_path, edit)
    with pytest.raises(UserError, match=message):
        ModelDirectory.load(directory)
    code, out, err = cli(["serve", str(directory)])
    assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1
    assert "serving" not in err


def test_a_pinned_manifest_digest_refuses_a_rewritten_directory(exported, tmp_path):
    digest = manifest_digest(exported["gru"])
    assert ModelDirectory.load(exported["gru"], expect_sha256=digest.upper()).model_type == "gru"
    rewritten = _rewritten(exported, tmp_path, lambda c: c["beta"]["fusion"]["bm25"].update(neural=0.9))
    with pytest.raises(UserError, match="rewritten"):
        ModelDirectory.load(rewritten, expect_sha256=digest)


# -- serve: bind first, then announce -------------------------------------------------------------
def test_serve_checks_the_address_before_announcing(exported, cli):
    code, _, err = cli(["serve", str(exported["gru"]), "--host", "999.1.1.1"])
    assert code == 2 and err.startswith("error: cannot listen on 999.1.1.1") and "serving" not in err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = cli(["serve", str(exported["gru"]), "--port", str(port)])
    assert code == 2 and "Address already in use" in err and "None" not in err and "serving" not in err
    assert len(err.strip().splitlines()) == 1


# -- evaluate: all outputs or none ----------------------------------------------------------------
def test_evaluate_with_an_unwritable_output_leaves_none_behind(cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = tmp_path / "out.json"
    out.write_text("previous run\n")
    run = ["evaluate", "--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "given,bm25",
           "--json", str(out), "--no-progress"]
    code, _, err = cli([*run, "--plot", str(blocker / "plot.png")])
    assert code == 2 and err.startswith("error:")
    assert out.read_text() == "previous run\n"  # the earlier JSON is back, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "out.json"]  # no per-query, no temps
    code, _, err = cli([*run, "--plot", str(tmp_path / "plot.png")])
    assert code == 0 and json.loads(out.read_text())["task"] == "rerank" and (tmp_path / "plot.png").is_file()


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_the_bearer_scheme_is_case_insensitive_the_token_is_not(server, scheme):
    """RFC 9110 11.1: "It uses a case-insensitive token to identify the authentication scheme"; the
    token itself is compared byte for byte."""
    def healthz_like(auth: str) -> int:
        head = (f"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n"
                "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}").encode()
        return _exchange(server.port, head)[0]

    assert healthz_like(f"{scheme} {TOKEN}") == 400  # past the token check: the body is refused
    assert healthz_like(f"{scheme} {TOKEN.upper()}") == 401
    assert healthz_like(f"{scheme}{TOKEN}") == 401
