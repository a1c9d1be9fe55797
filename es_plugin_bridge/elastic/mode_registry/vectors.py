"""Mode ``vectors``: stored vectors and BOW features; the sidecar embeds only the query and the window is
rescored inside Elasticsearch (one call on enterprise/trial, two on a basic licence: any licence)."""

from es_plugin_bridge.elastic.mode_registry import ModeSpec, register_mode

register_mode(ModeSpec(
    "vectors", "es_plugin_bridge.elastic.mode_factory:build_vectors",
    "stored vectors: the window rescored inside Elasticsearch",
    needs_vectors=True, order=1))
