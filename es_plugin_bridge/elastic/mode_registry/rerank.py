"""Mode ``rerank`` (OpenSearch): OpenSearch calls the sidecar itself, through the search pipeline ``es
setup`` made (neural-search's ``rerank`` response processor with an ml-commons model whose connector
calls ``/v1/rerank``); one request. The processor replaces each hit's score by the sidecar's, so the
order is the model's own (``model``), not the β fusion of the Elasticsearch modes."""

from es_plugin_bridge.elastic.mode_registry import ModeSpec, register_mode

register_mode(ModeSpec(
    "rerank", "es_plugin_bridge.elastic.opensearch_rerank:build_rerank",
    "OpenSearch calls the sidecar (search pipeline with a rerank processor)",
    engines=("opensearch",),
    # plugins.ml_commons.connector.private_ip_enabled (a sidecar on a private address): 2.15
    requires={"opensearch": {"version": {2: (2, 15)}, "version_text": "2.15+"}}, ranker="model", order=5,
    prepare="es_plugin_bridge.elastic.evaluation_run:prepare_rerank",
    sidecar="OpenSearch, through the search pipeline's `rerank` processor and an ml-commons connector "
            "(`/v1/rerank`)"))
