"""Modes ``hybrid`` and ``hybrid-rrf``: candidates from the first stage and the model's vectors
(``es_plugin_bridge.elastic.hybrid``)."""

from es_plugin_bridge.elastic.mode_registry import ModeSpec, register_mode

register_mode(ModeSpec(
    "hybrid", "es_plugin_bridge.elastic.hybrid:build_hybrid",
    "first stage and vectors, fused with β",
    needs_vectors=True,
    # include_named_queries_score (8.8.0: rest-api-spec search named_queries test); any licence
    requires={"version": {8: (8, 8), 9: (9, 0)}, "version_text": "8.8+"}, ranker="hybrid", order=3))
register_mode(ModeSpec(
    "hybrid-rrf", "es_plugin_bridge.elastic.hybrid:build_hybrid_rrf",
    "first stage and vectors, reciprocal-rank fusion",
    # rrf retriever on enterprise/trial 8.16+, else the client fuses the two windows: any licence
    needs_vectors=True, ranker="hybrid-rrf", order=4))
