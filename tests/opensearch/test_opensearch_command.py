"""``make opensearch`` / ``make opensearch-stop``: the command behind them starts a node in the
background, prints its URL (and only that, on stdout), says so when one already runs, and stops it; and
where a node cannot start, the engine tests say which pieces are missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import engine_node
import pytest

from es_plugin_bridge.opensearch_node import layout

ROOT = Path(__file__).resolve().parents[2]


def _command(*args: str, java_opts: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"OPENSEARCH_JAVA_OPTS": java_opts} if java_opts is not None else {})}
    return subprocess.run([sys.executable, "-m", "es_plugin_bridge.opensearch_node", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)


def test_a_malformed_opensearch_java_opts_is_refused_in_one_line_before_anything_starts(tmp_path):
    run_dir = tmp_path / "local"
    refused = _command("start", "--run-dir", str(run_dir), java_opts='-Xmx1g "-Dunclosed')
    assert refused.returncode == 2 and refused.stdout == "" and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: OPENSEARCH_JAVA_OPTS='-Xmx1g \"-Dunclosed' is not a list of JVM options")
    assert not run_dir.exists()


def test_without_docker_java_or_maven_the_reason_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(engine_node, "docker_available", lambda: (False, "no Docker engine answers (x)"))
    monkeypatch.setattr(engine_node.layout, "missing_tools", lambda: ["mvn", "java"])
    assert engine_node.unavailable_reason() == (
        "no Docker engine answers (x); and the Maven-assembled node needs mvn and java (not found on PATH)")
    monkeypatch.setattr(engine_node.layout, "missing_tools", lambda: [])
    assert engine_node.unavailable_reason() is None


TITLES = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"

#: A connector as OpenSearch's Cohere embed blueprint writes one (only the URL is ours); it is stored in
#: ml-commons' system index, so it must survive a restart like the data.
CONNECTOR = {
    "name": "kept-across-restarts", "description": "survives stop and kill -9", "version": 1,
    "protocol": "http", "parameters": {"model": "embed-english-v3.0"},
    "credential": {"cohere_key": "t0k"},
    "actions": [{"action_type": "predict", "method": "POST", "url": "http://127.0.0.1:9/v1/encode",
                 "headers": {"Authorization": "Bearer ${credential.cohere_key}"},
                 "request_body": '{ "texts": ${parameters.texts}, "truncate": "END", '
                                 '"model": "${parameters.model}" }'}],
}


def _questions(count: int) -> bytes:
    """``count`` real AskUbuntu titles (duplicates dropped) as a ``_bulk`` body with ids."""
    from es_plugin_bridge.data.spec import read_spec

    questions = list(read_spec(f"pairs:{TITLES}").questions.values())[:count]
    assert len(questions) == count
    lines = []
    for q in questions:
        lines += [json.dumps({"index": {"_id": q.id}}), json.dumps({"title": q.title, "body": q.body})]
    return ("\n".join(lines) + "\n").encode()


def _held(url: str, connector_id: str) -> tuple[int, str]:
    node = engine_node.EngineNode(url, "the make-opensearch node")
    count = node.ok("GET", "/questions/_count")["count"]
    return count, node.ok("GET", f"/_plugins/_ml/connectors/{connector_id}")["name"]


@pytest.mark.engine
@pytest.mark.slow
def test_the_node_keeps_its_data_across_stop_kill_and_start_on_the_same_port(opensearch, tmp_path):
    """`make opensearch` used to delete the run folder (and so every index, connector and model) on
    each start of a node that was not running, and came up on a new port without a word. Also what
    `make opensearch` / `make opensearch-stop` print: the URL alone on stdout, "already running" for a
    second start, and the stop (one node's three starts serve both checks: each costs a JVM start)."""
    run_dir = tmp_path / "local"
    # OPENSEARCH_JAVA_OPTS comes after the node's own options, as in the distribution: -Xmx given again wins
    java_opts = f"{os.environ.get('OPENSEARCH_JAVA_OPTS', '')} -Xmx640m -Xms640m".strip()
    started = _command("start", "--run-dir", str(run_dir), java_opts=java_opts)
    assert started.returncode == 0, started.stderr
    (url,) = started.stdout.split()
    assert "new data folder" in started.stderr
    try:
        assert url.startswith("http://127.0.0.1:") and url != opensearch.url
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert json.loads(resp.read())["version"]["number"] == layout.SERVER_VERSION
        (jvm,) = engine_node.EngineNode(url, "the make-opensearch node").ok("GET", "/_nodes/_local/jvm")[
            "nodes"].values()
        assert jvm["jvm"]["input_arguments"][-len(java_opts.split()):] == java_opts.split()
        assert jvm["jvm"]["mem"]["heap_max_in_bytes"] == 640 * 2**20
        running = _command("start", "--run-dir", str(run_dir))
        assert running.returncode == 0 and running.stdout.strip() == url
        assert "already running" in running.stderr

        node = engine_node.EngineNode(url, "the make-opensearch node")
        node.ok("PUT", "/questions", {"settings": {"number_of_replicas": 0}})
        assert not node.ok("POST", "/questions/_bulk?refresh=true", _questions(1000))["errors"]
        connector = node.ok("POST", "/_plugins/_ml/connectors/_create", CONNECTOR)["connector_id"]
        assert _held(url, connector) == (1000, "kept-across-restarts")

        stopped = _command("stop", "--run-dir", str(run_dir))
        assert stopped.returncode == 0 and f"stopped OpenSearch at {url}" in stopped.stderr
        assert _command("url", "--run-dir", str(run_dir)).returncode == 1
        with pytest.raises(OSError):
            urllib.request.urlopen(url, timeout=5)
        again = _command("start", "--run-dir", str(run_dir))
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == url and "keeping the data in" in again.stderr
        assert _held(url, connector) == (1000, "kept-across-restarts")

        pid = json.loads((run_dir / "node.json").read_text())["pid"]
        os.killpg(pid, signal.SIGKILL)  # a crash: no clean close, the translog is replayed
        _wait_gone(pid)
        assert _command("url", "--run-dir", str(run_dir)).returncode == 1
        after_crash = _command("start", "--run-dir", str(run_dir))
        assert after_crash.returncode == 0, after_crash.stderr
        assert after_crash.stdout.strip() == url
        assert _held(url, connector) == (1000, "kept-across-restarts")
    finally:
        _command("stop", "--run-dir", str(run_dir))

    # clean deletes the folder, so the next start is the first one's: a new data folder, nothing in it
    cleaned = _command("clean", "--run-dir", str(run_dir))
    assert cleaned.returncode == 0 and f"deleted {run_dir}" in cleaned.stderr
    assert not run_dir.exists()


def test_clean_refuses_while_the_node_runs(tmp_path):
    """`clean` never deletes the folder of a running node: it names the node and says to stop it."""
    run_dir = tmp_path / "local"
    run_dir.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "Launcher"],
                               start_new_session=True)
    try:
        (run_dir / "node.json").write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": sleeper.pid}))
        refused = _command("clean", "--run-dir", str(run_dir))
        assert refused.returncode == 2 and "stop it first" in refused.stderr and run_dir.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert _command("clean", "--run-dir", str(run_dir)).returncode == 0 and not run_dir.exists()


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError(f"pid {pid} still runs after SIGKILL")
