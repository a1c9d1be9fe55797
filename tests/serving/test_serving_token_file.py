"""``--token-file`` with one token per client cluster (issue 48, item 1): the real server (waitress, the
token checked before the body) and the app both take every token of the file and nothing else, and a
rewritten file takes effect without a restart: the old token refused, the new one taken."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from sidecar_apps import app_server

from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.token_file import RECHECK_S

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
#: Real AskUbuntu titles: a query and its window.
TITLES = [line.split("\t")[1] for line in
          (SAMPLES / "askubuntu-pairs" / "val.tsv").read_text(encoding="utf-8").splitlines()[:6]]


def _rerank(url: str, token: str) -> int:
    body = json.dumps({"query": TITLES[0].split("<p>")[0],
                       "documents": [t.split("<p>")[0] for t in TITLES[1:]]}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    req = urllib.request.Request(f"{url}/v1/rerank", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert len(json.loads(resp.read())["results"]) == 5
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "tokens"
    path.write_text("# one token per cluster\ncluster-a-t0ken\n\ncluster-b-t0ken\n", encoding="utf-8")
    path.chmod(0o600)
    return path


def test_every_token_of_the_file_is_taken_and_no_other(exported, token_file):
    app = create_app(exported["bow-cnn"], token_file=token_file, port=0)
    with app_server(app) as srv:
        assert _rerank(srv.url, "cluster-a-t0ken") == 200
        assert _rerank(srv.url, "cluster-b-t0ken") == 200
        assert _rerank(srv.url, "cluster-c-t0ken") == 401  # refused by the server, before the body
        assert _rerank(srv.url, "# one token per cluster") == 401  # a comment is no token
    # the app's own check (no server in front) takes the same tokens
    client = app.test_client()
    for token, status in (("cluster-b-t0ken", 200), ("cluster-c-t0ken", 401)):
        answer = client.post("/v1/rerank", json={"query": "wifi", "documents": ["wifi drops"]},
                             headers={"Authorization": f"bearer {token}"})
        assert answer.status_code == status


def test_a_rewritten_token_file_rotates_the_tokens_without_a_restart(exported, token_file):
    app = create_app(exported["bow-cnn"], token_file=token_file, port=0)
    with app_server(app) as srv:
        assert _rerank(srv.url, "cluster-a-t0ken") == 200
        assert _rerank(srv.url, "cluster-a-rotated") == 401
        token_file.write_text("cluster-a-rotated\ncluster-b-t0ken\n", encoding="utf-8")  # a's token rotated
        time.sleep(RECHECK_S + 0.2)
        assert _rerank(srv.url, "cluster-a-t0ken") == 401
        assert _rerank(srv.url, "cluster-a-rotated") == 200
        assert _rerank(srv.url, "cluster-b-t0ken") == 200
        token_file.write_text("", encoding="utf-8")  # a botched edit locks nobody out: last tokens kept
        time.sleep(RECHECK_S + 0.2)
        assert _rerank(srv.url, "cluster-a-rotated") == 200
