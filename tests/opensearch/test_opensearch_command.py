"""``make opensearch`` / ``make opensearch-stop``: the command behind them starts a node in the
background, prints its URL (and only that, on stdout), says so when one already runs, and stops it; and
where a node cannot start, the engine tests say which pieces are missing."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import engine_node
import pytest

from es_plugin_bridge.opensearch_node import layout

ROOT = Path(__file__).resolve().parents[2]


def _command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "es_plugin_bridge.opensearch_node", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.engine
@pytest.mark.slow
def test_start_prints_the_url_and_stop_stops_the_node(opensearch, tmp_path):
    run_dir = tmp_path / "local"
    started = _command("start", "--run-dir", str(run_dir))
    try:
        assert started.returncode == 0, started.stderr
        (url,) = started.stdout.split()
        assert url.startswith("http://127.0.0.1:") and url != opensearch.url
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert json.loads(resp.read())["version"]["number"] == layout.SERVER_VERSION
        again = _command("start", "--run-dir", str(run_dir))
        assert again.returncode == 0 and again.stdout.strip() == url and "already running" in again.stderr
    finally:
        stopped = _command("stop", "--run-dir", str(run_dir))
    assert stopped.returncode == 0 and f"stopped OpenSearch at {url}" in stopped.stderr
    assert _command("url", "--run-dir", str(run_dir)).returncode == 1
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)


def test_without_docker_java_or_maven_the_reason_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(engine_node, "docker_available", lambda: (False, "no Docker engine answers (x)"))
    monkeypatch.setattr(engine_node.layout, "missing_tools", lambda: ["mvn", "java"])
    assert engine_node.unavailable_reason() == (
        "no Docker engine answers (x); and the Maven-assembled node needs mvn and java (not found on PATH)")
    monkeypatch.setattr(engine_node.layout, "missing_tools", lambda: [])
    assert engine_node.unavailable_reason() is None
