"""Whether a Docker engine answers, shared by every test that starts containers.

``docker_available()`` pings the engine once per session (docker SDK, which testcontainers also
uses) and returns ``(True, "")`` or ``(False, reason)``; ``requires_docker`` is the matching skip
mark, so the skip reason names the real cause (no socket, permission denied, engine down).
``STACK_VERSION`` is the Elasticsearch/Kibana version the container tests start.
"""

from __future__ import annotations

import functools
import os

import pytest

STACK_VERSION = os.environ.get("ESRERANK_STACK_VERSION", "9.5.4")
#: The same OpenSearch as the Maven-assembled node (es_plugin_bridge.opensearch_node.layout).
OPENSEARCH_VERSION = os.environ.get("ESRERANK_OPENSEARCH_VERSION", "2.19.1")


@functools.lru_cache(maxsize=1)
def docker_available() -> tuple[bool, str]:
    """``(True, "")`` when a Docker engine answers a ping within 5 s, else ``(False, why)``."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency of testcontainers
        return False, f"the docker Python package is missing ({exc})"
    try:
        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # any failure means: no engine we can use
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        return False, f"no Docker engine answers ({reason})"
    return True, ""


def _skip_mark() -> pytest.MarkDecorator:
    ok, reason = docker_available()
    return pytest.mark.skipif(not ok, reason=reason or "Docker engine available")


requires_docker = _skip_mark()
