"""The real search engine the ``engine`` tests run on: one OpenSearch node per test session.

Where a Docker engine answers, testcontainers runs the official ``opensearchproject/opensearch`` image
(security plugin off, host networking, so the node reaches a sidecar on this machine's 127.0.0.1 as
the Maven-assembled node does). Everywhere else the node is assembled from Maven Central
(``es_plugin_bridge.opensearch_node``: Java 17 and Maven, no Docker) into the git-ignored
``build/opensearch/`` and started from there. Where neither can run, :func:`unavailable_reason` says
which of the two is missing and the tests skip with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from docker_available import OPENSEARCH_VERSION, docker_available

from es_plugin_bridge.local_http import free_port
from es_plugin_bridge.opensearch_node import layout, node

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class EngineNode:
    """A running node: its URL and, for the log, what it is and where it came from."""

    url: str
    description: str

    def call(self, method: str, path: str, body: object = None) -> tuple[int, dict]:
        """One request; ``(status, JSON answer)`` whatever the status, so a test can read a refusal.
        ``body``: a JSON value, or ``bytes`` sent as NDJSON (``_bulk``)."""
        data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        kind = "application/x-ndjson" if isinstance(body, bytes) else "application/json"
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                         headers={"Content-Type": kind})
        try:
            with urllib.request.urlopen(request, timeout=120) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def ok(self, method: str, path: str, body: object = None) -> dict:
        """:meth:`call` that must succeed (the answer names the refusal otherwise)."""
        status, answer = self.call(method, path, body)
        assert status < 300, f"{method} {path}: {status} {json.dumps(answer)[:600]}"
        return answer


def unavailable_reason() -> str | None:
    """None when some node can start here, else why not (both causes named)."""
    docker_ok, docker_why = docker_available()
    if docker_ok:
        return None
    missing = layout.missing_tools()
    if not missing:
        return None
    return f"{docker_why}; and the Maven-assembled node needs {' and '.join(missing)} (not found on PATH)"


@contextlib.contextmanager
def running_opensearch(run_dir: Path) -> Iterator[EngineNode]:
    """Start the session's node (Docker first, else Maven) and stop it on the way out."""
    if docker_available()[0]:
        with _container() as started:
            yield started
        return
    home = layout.assemble(layout.default_home(ROOT), log=lambda line: None)
    started = node.start(home, run_dir)
    try:
        yield EngineNode(started.url, f"OpenSearch {layout.SERVER_VERSION} assembled from Maven Central "
                                      f"({home.relative_to(ROOT)}), {started.url}, log {started.log}")
    finally:
        node.stop(started)


@dataclass(frozen=True)
class EngineCluster:
    """A running cluster: a client for each node (node order), and where its nodes live (to kill and
    restart one)."""

    nodes: list[EngineNode]
    home: Path
    root: Path

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]


def cluster_unavailable_reason() -> str | None:
    """None when the Maven-assembled cluster can start here (it needs no Docker), else why not."""
    missing = layout.missing_tools()
    return f"the three-node cluster needs {' and '.join(missing)} (not found on PATH)" if missing else None


@contextlib.contextmanager
def running_cluster(root: Path, count: int = 3) -> Iterator[EngineCluster]:
    """Start a cluster of ``count`` Maven-assembled nodes (green, every node in) and stop it at the end."""
    from es_plugin_bridge.opensearch_node import cluster

    home = layout.assemble(layout.default_home(ROOT), log=lambda line: None)
    started = cluster.start_cluster(home, root, count=count)
    try:
        yield EngineCluster([EngineNode(n.url, f"cluster node {i} ({n.url}, log {n.log})")
                             for i, n in enumerate(started)], home, root)
    finally:
        for running in cluster.running_nodes(root):
            node.stop(running)


@contextlib.contextmanager
def _container() -> Iterator[EngineNode]:
    from testcontainers.core.container import DockerContainer

    port = free_port()
    settings = {key: str(value).lower() if isinstance(value, bool) else value
                for key, value in node.NODE_SETTINGS.items()
                if key not in ("node.name", "network.host")}
    java_opts = f"-Xms1g -Xmx1g {os.environ.get('OPENSEARCH_JAVA_OPTS', '')}".strip()  # conftest.py's too
    container = (DockerContainer(f"opensearchproject/opensearch:{OPENSEARCH_VERSION}")
                 .with_env("DISABLE_SECURITY_PLUGIN", "true").with_env("DISABLE_INSTALL_DEMO_CONFIG", "true")
                 .with_env("OPENSEARCH_JAVA_OPTS", java_opts).with_env("http.port", str(port))
                 .with_env("network.host", "127.0.0.1").with_kwargs(network_mode="host"))
    for key, value in settings.items():
        container = container.with_env(key, json.dumps(value) if isinstance(value, list) else str(value))
    with container:
        url = f"http://127.0.0.1:{port}"
        node.wait_ready(url, timeout=240)
        yield EngineNode(url, f"OpenSearch {OPENSEARCH_VERSION} in Docker (testcontainers), {url}")
