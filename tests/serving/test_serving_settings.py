"""One Settings object for the sidecar: ``esrerank serve``'s options become it, ``create_app(settings)``
and ``Server.for_app`` read it, and the app is two blueprints (``api`` and ``ops``), on real exported
models."""

from __future__ import annotations

import json
import math
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import es_plugin_bridge.cli.serve as serve_module
from es_plugin_bridge.cli.serve import serve_command
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.model_dir import ModelDirectory
from es_plugin_bridge.serving.server import Limits, Server
from es_plugin_bridge.serving.settings import OPTIONS, Settings

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BODY = {"query": "how do I install ubuntu from a usb stick",
        "documents": ["install ubuntu from usb", "wifi keeps dropping", "ubuntu usb boot"]}
API_ROUTES = {"/v1/rerank", "/v2/rerank", "/v1/encode", "/v1/embed", "/v2/embed"}
OPS_ROUTES = {"/healthz", "/readyz", "/metrics", "/openapi.json"}
PAIR_ROUTES = {"/v1/text-pair"}  # OpenSearch's cross-encoder tutorial's shape (serving.routes_pair)


@pytest.fixture
def captured(monkeypatch) -> list[Settings]:
    """The Settings ``esrerank serve`` hands on, instead of loading and serving."""
    seen: list[Settings] = []
    monkeypatch.setattr(serve_module, "run_sidecar", seen.append)
    monkeypatch.delenv("ESRERANK_TOKEN", raising=False)
    return seen


# -- esrerank serve's options → Settings -----------------------------------------------------------
def test_every_serve_option_sets_its_settings_field(exported, cli, captured, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n# a comment line\n")
    token_file.chmod(0o600)
    model_dir = exported["bow-cnn"]
    code, _, err = cli(["serve", str(model_dir), "--host", "0.0.0.0", "--port", "9191",
                        "--token-file", str(token_file), "--expect-sha256", "ab" * 32,
                        "--max-documents", "7", "--max-body-mb", "3", "--request-timeout", "2.5",
                        "--max-connections", "9", "--max-queue", "5", "--deadline-ms", "1234",
                        "--threads", "3", "--onnx-threads", "2",
                        "--cache-size", "11", "--batch-size", "5", "--encoder-workers", "4",
                        "--device", "cpu", "--name", "mine"])
    assert code == 0, err
    [settings] = captured
    expected = {"model_dir": model_dir, "host": "0.0.0.0", "port": 9191, "token": None,
                "token_file": token_file, "max_queue": 5, "deadline_ms": 1234, "expect_sha256": "ab" * 32,
                "max_documents": 7, "max_body_bytes": 3 * 1024 * 1024,
                "request_timeout": 2.5, "max_connections": 9, "threads": 3, "onnx_threads": 2,
                "cache_size": 11, "batch_size": 5, "encoder_workers": 4, "device": "cpu", "name": "mine"}
    assert set(expected) == set(OPTIONS)  # every field an option sets is checked here
    assert {field: getattr(settings, field) for field in expected} == expected
    assert settings.limits == Limits(max_body_bytes=3 * 1024 * 1024, request_timeout=2.5, max_connections=9,
                                     max_queue=5)
    # OPTIONS names real options of the command (an error message cites them)
    opts = {opt for param in serve_command.params for opt in param.opts} | {"MODEL_DIR"}
    assert set(OPTIONS.values()) <= opts


def test_serve_defaults_and_the_token_from_the_environment(exported, cli, captured, monkeypatch):
    monkeypatch.setenv("ESRERANK_TOKEN", TOKEN)
    code, _, err = cli(["serve", str(exported["gru"])])
    assert code == 0, err
    [settings] = captured
    assert settings == Settings(model_dir=exported["gru"], token=TOKEN, max_documents=1000,
                                max_body_bytes=32 * 1024 * 1024, request_timeout=10.0, max_connections=500,
                                threads=2, onnx_threads=1, cache_size=20_000, batch_size=16, device="auto",
                                encoder_workers=serve_module.available_cores())
    assert (settings.host, settings.port, settings.name, settings.expect_sha256) == ("127.0.0.1", 8080,
                                                                                    None, None)


def test_settings_defaults_are_the_serve_limits_and_the_loaders_own():
    """Library defaults: the server's limits, and ModelDirectory.load's way of loading (so a test's
    ``create_app(path)`` loads as it always has); ``esrerank serve`` passes its measured ones."""
    settings = Settings(model_dir="m")
    assert settings.model_dir == Path("m") and settings.limits == Limits()
    assert (settings.onnx_threads, settings.batch_size, settings.device) == (None, 64, "cpu")
    assert settings.encoder_workers is None  # each request thread encodes, as create_app always did
    assert (settings.token, settings.max_documents, settings.cache_size) == (None, 1000, 20_000)


# -- bad settings: a UserError naming the field and its option, before anything loads ---------------
@pytest.mark.parametrize(("field", "value", "named"), [
    ("max_documents", 0, "max_documents (--max-documents)"),
    ("port", 70000, "port (--port)"),
    ("max_body_bytes", 0, "max_body_bytes (--max-body-mb)"),
    ("request_timeout", math.nan, "request_timeout (--request-timeout)"),
    ("idle_timeout", 0.0, "idle_timeout must"),
    ("threads", 0, "threads (--threads)"),
    ("onnx_threads", 0, "onnx_threads (--onnx-threads)"),
    ("cache_size", -1, "cache_size (--cache-size)"),
    ("device", "tpu", "device (--device) must be one of auto, cpu, cuda, not 'tpu'"),
])
def test_a_bad_setting_is_a_user_error_naming_it(tmp_path, field, value, named):
    with pytest.raises(UserError, match="^" + re.escape(f"setting {named}")):
        Settings(model_dir=tmp_path, **{field: value})
    # create_app refuses it before reading the directory (here: none at all)
    with pytest.raises(UserError, match=field):
        create_app(tmp_path / "absent", **{field: value})


def test_a_bad_token_or_an_unknown_or_inapplicable_override_is_refused(exported, tmp_path):
    with pytest.raises(UserError, match="token is empty"):
        Settings(model_dir=tmp_path, token="")
    with pytest.raises(TypeError, match="max_docs"):
        create_app(exported["bow-cnn"], max_docs=3)
    model = ModelDirectory.load(exported["bow-cnn"], threads=1)
    with pytest.raises(TypeError, match="batch_size, device"):  # would be silently ignored otherwise
        create_app(model, device="cuda", batch_size=8)


# -- the app built from Settings -------------------------------------------------------------------
@pytest.fixture(scope="module")
def app(exported):
    return create_app(Settings(model_dir=exported["bow-cnn"], token=TOKEN, max_documents=3, name="tiny",
                               onnx_threads=1, cache_size=5))


def test_the_app_from_settings_serves_rerank_on_a_real_model(app, exported):
    client = app.test_client()
    answer = client.post("/v1/rerank", json=BODY, headers=AUTH)
    assert answer.status_code == 200 and answer.json["model"] == "tiny"
    assert sorted(r["index"] for r in answer.json["results"]) == [0, 1, 2]
    # the same answer as the model-and-keywords form (the call sites of before)
    legacy = create_app(exported["bow-cnn"], token=TOKEN, max_documents=3, name="tiny", onnx_threads=1)
    legacy = legacy.test_client()
    assert legacy.post("/v1/rerank", json=BODY, headers=AUTH).json == answer.json
    # the settings are what the app enforces: token, max_documents, cache size
    assert client.post("/v1/rerank", json=BODY).status_code == 401
    too_many = client.post("/v1/rerank", json={**BODY, "documents": BODY["documents"] + ["one more"]},
                           headers=AUTH)
    assert too_many.status_code == 413 and too_many.json["field"] == "documents"
    service = app.extensions["esrerank"]
    assert service.max_documents == 3 and service.cache.capacity == 5
    assert app.extensions["esrerank_settings"].token == TOKEN
    assert client.get("/openapi.json", headers=AUTH).json["security"] == [{"bearer": []}]


def test_overrides_apply_on_top_of_settings(exported):
    base = Settings(model_dir=exported["bow-cnn"], max_documents=2)
    app = create_app(base, name="renamed")
    settings = app.extensions["esrerank_settings"]
    assert (settings.max_documents, settings.name) == (2, "renamed") and base.name is None
    assert app.test_client().get("/readyz").json["model"] == "renamed"


def test_the_blueprints_hold_the_documented_routes(app):
    assert list(app.blueprints) == ["api", "ops", "pair"]
    by_blueprint: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        if "." in rule.endpoint:
            by_blueprint.setdefault(rule.endpoint.split(".")[0], set()).add(rule.rule)
    assert by_blueprint == {"api": API_ROUTES, "ops": OPS_ROUTES, "pair": PAIR_ROUTES}
    client = app.test_client()
    documented = set(client.get("/openapi.json", headers=AUTH).json["paths"])
    assert documented == API_ROUTES | OPS_ROUTES | PAIR_ROUTES
    # app-wide rules hold in both blueprints and outside them: the token, JSON errors, the counts
    assert client.get("/healthz").json == {"status": "ok"}  # open
    assert client.get("/metrics").status_code == 401
    missing = client.get("/nowhere", headers=AUTH)
    assert missing.status_code == 404 and "error" in missing.json
    not_json = client.post("/v1/encode", data="x", headers=AUTH)
    assert not_json.status_code == 415 and "error" in not_json.json
    metrics = client.get("/metrics", headers=AUTH).get_data(as_text=True)
    assert 'esrerank_requests_rejected_total{reason="not_json",status="415"}' in metrics
    assert 'esrerank_requests_rejected_total{reason="not_found",status="404"}' in metrics


def test_no_static_route_even_where_a_static_folder_is_beside_the_working_directory(exported, tmp_path,
                                                                                  monkeypatch):
    """Flask adds ``/static/<path>`` for a ``static/`` folder next to its root (the working directory for
    an app named as a string); the sidecar must serve none of those files."""
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "secret.txt").write_text("not for clients", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    app = create_app(exported["bow-cnn"])
    assert not [rule.rule for rule in app.url_map.iter_rules() if "static" in rule.rule]
    answer = app.test_client().get("/static/secret.txt")
    assert answer.status_code == 404 and "not for clients" not in answer.get_data(as_text=True)


def test_two_apps_share_no_state(exported):
    first, second = (create_app(exported["bow-cnn"], name=n) for n in ("one", "two"))
    first.test_client().post("/v1/rerank", json=BODY)
    assert first.extensions["esrerank"] is not second.extensions["esrerank"]
    scraped = second.test_client().get("/metrics").get_data(as_text=True)
    assert 'endpoint="/v1/rerank"' not in scraped and 'name="two"' in scraped


# -- the server reads the same Settings --------------------------------------------------------------
def test_the_server_binds_and_guards_by_the_apps_settings(exported):
    settings = Settings(model_dir=exported["bow-cnn"], port=0, token=TOKEN, threads=1,
                        max_body_bytes=2048, onnx_threads=1)
    server = Server.for_app(create_app(settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.host == "127.0.0.1" and server.port > 0
        url = f"{server.url}/v1/rerank"

        def post(body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
            request = urllib.request.Request(url, data=body, method="POST",
                                             headers={"Content-Type": "application/json", **headers})
            try:
                with urllib.request.urlopen(request, timeout=10) as resp:
                    return resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        status, answer = post(json.dumps(BODY).encode(), AUTH)
        assert status == 200 and len(answer["results"]) == 3
        assert post(json.dumps(BODY).encode(), {})[0] == 401  # refused by the server, before the app
        status, answer = post(b'{"query": "q", "documents": ["' + b"a" * 4096 + b'"]}', AUTH)
        assert status == 413 and "error" in answer  # over max_body_bytes, from its Content-Length
    finally:
        server.close()
        thread.join(timeout=5)
