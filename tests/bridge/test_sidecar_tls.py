"""An https sidecar (TLS ended in front of ``esrerank serve``, as a proxy does) reached with the CA file of
``SidecarTarget``: the bridge's client, the indexing side's embedder and ``esrerank search`` check its
certificate against that CA, and a certificate this machine does not trust is a setting to fix (one line
naming ``--sidecar-ca-certs``), never a silent fall-back to the first-stage order.

The sidecar is the real app on a tiny exported model; werkzeug's server does the TLS (waitress, which
``esrerank serve`` runs, does not speak it: a deployment puts a proxy there). The certificates come
from ``trustme``, a throw-away CA made for tests."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from werkzeug.serving import make_server

from es_plugin_bridge.bridge import BridgeSearch, SidecarClient
from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app

TITLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / \
    "train_titles.tsv"
TOKEN = "tls-token"


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory) -> Iterator[tuple[trustme.CA, Path]]:
    ca = trustme.CA()
    path = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    yield ca, path


@pytest.fixture(scope="module")
def https_sidecar(exported, ca_file) -> Iterator[tuple[str, ModelDirectory]]:
    ca, _ = ca_file
    model = ModelDirectory.load(exported["bow-cnn"], threads=1)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # the server's side of the handshake
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server_context)
    server = make_server("127.0.0.1", 0, create_app(model, token=TOKEN), threaded=True,
                         ssl_context=server_context)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_port}", model
    server.shutdown()
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def questions():
    return list(read_spec(f"pairs:{TITLES}").questions.values())[:40]


def test_the_bridge_reranks_over_https_with_the_sidecars_ca(https_sidecar, ca_file, questions):
    url, model = https_sidecar
    client = SidecarClient.reaching(SidecarTarget(url, TOKEN, 10.0, str(ca_file[1])))
    got = client.rerank(questions[0], questions[1:11])
    assert sorted(index for index, _ in got) == list(range(10))
    scores = [score for _, score in got]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) > 1  # the model's order, not a tie
    result = BridgeSearch(questions, client, window=10).search(questions[0], k=5)
    assert result.reranked and result.fallback_reason is None


def test_an_untrusted_certificate_is_a_setting_to_fix_not_a_fallback(https_sidecar, questions):
    url, _ = https_sidecar
    client = SidecarClient(url, token=TOKEN, timeout=10.0)  # the system's trust store: not our test CA
    with pytest.raises(UserError, match="certificate is not trusted here .*--sidecar-ca-certs FILE"):
        client.rerank(questions[0], questions[1:4])
    with pytest.raises(UserError, match="--sidecar-ca-certs"):  # the bridge does not hide it either
        BridgeSearch(questions, client, window=5).search(questions[0], k=3)


def test_the_embedder_checks_the_certificate_too(https_sidecar, ca_file, questions):
    url, model = https_sidecar
    embedder = SidecarClient.reaching(SidecarTarget(url, TOKEN, 10.0, str(ca_file[1])))
    assert embedder.ready()["dimension"] == model.dimension
    vectors = embedder.embed(questions[:3])
    assert [len(v["vector"]) for v in vectors] == [model.dimension] * 3
    with pytest.raises(UserError, match="certificate is not trusted here"):
        SidecarClient(url, token=TOKEN).embed(questions[:1])


def test_search_command_over_https(https_sidecar, ca_file, cli):
    url, _ = https_sidecar
    argv = ["search", "--corpus", f"pairs:{TITLES}", "--sidecar", url, "--token", TOKEN, "--top", "3",
            "--json", "how to install ubuntu from usb"]
    code, out, _ = cli([*argv, "--sidecar-ca-certs", str(ca_file[1])])
    assert code == 0 and json.loads(out)["reranked"] is True
    code, out, err = cli(argv)
    assert code != 0 and "--sidecar-ca-certs" in err and "Traceback" not in err + out


@pytest.mark.parametrize(("url", "ca", "message"), [
    ("http://127.0.0.1:8080", "ca.pem", "applies to an https:// sidecar"),
    ("https://127.0.0.1:8443", "missing.pem", "sidecar CA file not found"),
    ("https://127.0.0.1:8443", "not-pem.txt", "holds no PEM certificate"),
])
def test_a_ca_file_that_cannot_serve_is_told_at_once(tmp_path, ca_file, url, ca, message):
    (tmp_path / "ca.pem").write_bytes(ca_file[1].read_bytes())
    (tmp_path / "not-pem.txt").write_text("ubuntu 14.04 sudo apt-get install\n", encoding="utf-8")
    with pytest.raises(UserError, match=message):
        SidecarTarget(url, None, 1.0, str(tmp_path / ca))


# -- the wrong scheme (issue 34, item 11) -----------------------------------------------------------------
def test_https_to_the_plain_http_sidecar_fails_at_once_and_names_http(exported, questions):
    """``esrerank serve`` answers a TLS ClientHello with a 400 at once (``serving/server.py``), so the
    client's handshake fails in milliseconds (WRONG_VERSION_NUMBER: "HTTP/1.1" where a TLS record
    belongs) instead of after the sidecar's request_timeout; the reason names the fix."""
    from sidecar_apps import threaded_server

    from es_plugin_bridge.serving.server import Limits

    with threaded_server(ModelDirectory.load(exported["bow-cnn"], threads=1), TOKEN, Limits()) as server:
        plain = server.url
        https = plain.replace("http://", "https://")
        client = SidecarClient(https, token=TOKEN, timeout=10.0)
        t0 = time.perf_counter()
        result = BridgeSearch(questions, client, window=10).search(questions[0], k=5)
        took = time.perf_counter() - t0
        assert not result.reranked and took < 2.0  # before: 10 s, the whole deadline, per search
        assert result.fallback_reason.startswith(f"TLS handshake with {https} failed (")
        assert "WRONG_VERSION_NUMBER" in result.fallback_reason
        assert result.fallback_reason.endswith(f"the sidecar there speaks plain HTTP? use {plain}")
        assert SidecarClient(plain, token=TOKEN).rerank(questions[0], questions[1:4])  # the fix works


def test_http_to_a_tls_sidecar_names_https(https_sidecar, questions):
    url, _ = https_sidecar
    plain = url.replace("https://", "http://")
    t0 = time.perf_counter()
    result = BridgeSearch(questions, SidecarClient(plain, token=TOKEN, timeout=10.0), window=10).search(
        questions[0], k=5)
    assert not result.reranked and time.perf_counter() - t0 < 2.0
    assert result.fallback_reason.startswith(f"the sidecar at {plain} closed the connection without an HTTP "
                                             "answer")
    assert result.fallback_reason.endswith(f"answers a TLS handshake: it speaks TLS; use {url}")
