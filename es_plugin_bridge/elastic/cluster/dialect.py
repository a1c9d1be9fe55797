"""Which engine a cluster is: the one module that compares an engine's name (a test keeps it so).

Everything else asks these functions, or ``ClusterInfo.is_opensearch``, and never spells
``"opensearch"`` in a comparison: the answer comes from one place, ``GET /``'s ``version.distribution``
(OpenSearch writes ``opensearch`` there; Elasticsearch writes no distribution), read once per command
(``Connection.root``), and from the client made for it (``opensearch_client.OpenSearchClient.engine``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")

ELASTICSEARCH = "elasticsearch"
OPENSEARCH = "opensearch"
#: engine → how messages name it.
ENGINE_NAMES = {ELASTICSEARCH: "Elasticsearch", OPENSEARCH: "OpenSearch"}


def engine_of(version: Mapping[str, Any] | None) -> str:
    """The engine whose ``GET /`` answered ``version`` (its ``version`` object)."""
    distribution = version.get("distribution") if isinstance(version, Mapping) else None
    return OPENSEARCH if distribution == OPENSEARCH else ELASTICSEARCH


def is_opensearch(client_or_engine: Any) -> bool:
    """Whether a client (its ``engine`` attribute, which ``OpenSearchClient`` sets) or an engine name is
    OpenSearch."""
    if isinstance(client_or_engine, str):
        return client_or_engine == OPENSEARCH
    return getattr(client_or_engine, "engine", None) == OPENSEARCH


def for_client(client: Any, *, elasticsearch: T, opensearch: T) -> T:
    """The value given for the engine behind ``client``: how code holding only a client chooses a
    per-engine rule without comparing engine names itself."""
    return opensearch if is_opensearch(client) else elasticsearch


def has_knn_plugin(client: Any) -> bool:
    """Whether the cluster behind ``client`` stores vectors as the k-NN plugin's ``knn_vector``
    (OpenSearch) rather than Elasticsearch's ``dense_vector``."""
    return is_opensearch(client)


def engine_of_client(client: Any) -> str:
    """The engine a client talks to: OpenSearch's client says so; any other is Elasticsearch's."""
    return OPENSEARCH if is_opensearch(client) else ELASTICSEARCH


def display_name(engine: str | None, unknown: str = "the search engine") -> str:
    """``Elasticsearch`` / ``OpenSearch``, or ``unknown`` when nothing said which."""
    return ENGINE_NAMES.get(engine or "", unknown)
