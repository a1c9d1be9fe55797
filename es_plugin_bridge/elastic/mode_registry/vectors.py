"""Mode ``vectors``: stored vectors and BOW features; the sidecar embeds only the query and the window is
rescored inside the engine (Elasticsearch: one call on enterprise/trial, two on a basic licence;
OpenSearch: the two calls, with the k-NN plugin's Painless functions)."""

from es_plugin_bridge.elastic.mode_registry import ModeSpec, register_mode

register_mode(ModeSpec(
    "vectors", "es_plugin_bridge.elastic.mode_factory:build_vectors",
    "stored vectors: the window rescored inside the engine",
    engines=("elasticsearch", "opensearch"), needs_vectors=True, order=1))
