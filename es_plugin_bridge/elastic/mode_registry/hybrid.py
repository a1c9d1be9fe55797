"""Modes ``hybrid`` and ``hybrid-rrf``: candidates from the first stage and the model's vectors
(``es_plugin_bridge.elastic.hybrid``), on Elasticsearch and on OpenSearch (whose bodies
``es_plugin_bridge.elastic.opensearch_dsl`` writes in the k-NN plugin's terms)."""

from es_plugin_bridge.elastic.mode_registry import ModeSpec, register_mode

register_mode(ModeSpec(
    "hybrid", "es_plugin_bridge.elastic.hybrid:build_hybrid",
    "first stage and vectors, fused with β",
    engines=("elasticsearch", "opensearch"), needs_vectors=True,
    requires={
        # include_named_queries_score (8.8.0: rest-api-spec search named_queries test); any licence
        "elasticsearch": {"version": {8: (8, 8), 9: (9, 0)}, "version_text": "8.8+"},
        # include_named_queries_score: OpenSearch PR #11626, first released in 2.13 (RestSearchAction,
        # SearchHit.toInnerXContent reads the URL parameter)
        "opensearch": {"version": {2: (2, 13)}, "version_text": "2.13+"},
    },
    ranker="hybrid", order=3,
    sidecar="the client, once per query (`/v1/encode`); candidates from the first stage **and** the "
            "vectors' window, scored with β inside the engine"))
register_mode(ModeSpec(
    "hybrid-rrf", "es_plugin_bridge.elastic.hybrid:build_hybrid_rrf",
    "first stage and vectors, reciprocal-rank fusion",
    # rrf retriever on enterprise/trial 8.16+, else (and on OpenSearch, which has no rrf retriever) the
    # client fuses the two windows: any licence
    engines=("elasticsearch", "opensearch"), needs_vectors=True, ranker="hybrid-rrf", order=4,
    sidecar="the client, once per query (`/v1/encode`); the same two windows merged by reciprocal rank",
    support={"elasticsearch": "any licence (the client fuses); the `rrf` retriever fuses in one call on "
                              "8.16+, enterprise or trial licence",
             "opensearch": "any 2.x with the k-NN plugin (the client fuses)"}))
