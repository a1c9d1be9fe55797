"""The Python bridge (DESIGN.md, Elasticsearch mode 3): first stage, then the sidecar, with fallback."""

from es_plugin_bridge.bridge.search import BridgeSearch, Hit, SearchResult
from es_plugin_bridge.bridge.sidecar_client import SidecarClient, SidecarUnavailable

__all__ = ["BridgeSearch", "Hit", "SearchResult", "SidecarClient", "SidecarUnavailable"]
