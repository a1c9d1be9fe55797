"""Mode ``vectors``: stored vectors and BOW features; the sidecar embeds only the query and the window is
rescored inside the engine (Elasticsearch: one call on enterprise/trial, two on a basic licence;
OpenSearch: the two calls, with the k-NN plugin's Painless functions)."""

from es_plugin_bridge.elastic.mode_registry import ModeSpec, register_mode

register_mode(ModeSpec(
    "vectors", "es_plugin_bridge.elastic.mode_factory:build_vectors",
    "stored vectors: the window rescored inside the engine",
    engines=("elasticsearch", "opensearch"), needs_vectors=True, order=1,
    sidecar="the client, once per query (`/v1/encode` of the query); the window is rescored inside the "
            "engine from the stored vectors and `rank_features`",
    support={"elasticsearch": "any, in two calls; one call (`rescorer` over `linear`): 8.18+ or 9.0+, "
                              "enterprise or trial licence",
             "opensearch": "any 2.x with the k-NN plugin (its Painless functions), two calls"}))
