"""The Python bridge (docs/elasticsearch.md, mode 3; docs/architecture.md): first stage, then the sidecar,
with fallback."""

from es_plugin_bridge.bridge.search import BridgeSearch, Hit, SearchResult
from es_plugin_bridge.bridge.sidecar_client import EmbedError, SidecarClient, SidecarUnavailable

__all__ = ["BridgeSearch", "EmbedError", "Hit", "SearchResult", "SidecarClient", "SidecarUnavailable"]
