"""Mode ``native``: Elasticsearch calls the sidecar itself (``linear`` over a ``text_similarity_reranker``
on the ``custom`` inference endpoint ``es setup`` registered); one request."""

from es_plugin_bridge.elastic.mode_registry import ModeSpec, register_mode

register_mode(ModeSpec(
    "native", "es_plugin_bridge.elastic.mode_factory:build_native",
    "Elasticsearch calls the sidecar (inference endpoint + text_similarity_reranker)",
    # the custom inference service and text_similarity_reranker: 8.19 / 9.1, enterprise or trial
    requires={"elasticsearch": {"version": {8: (8, 19), 9: (9, 1)}, "version_text": "8.19+ or 9.1+",
                                "licence": True,
                                "why": "the custom inference service and text_similarity_reranker"}},
    prepare="es_plugin_bridge.elastic.evaluation_run:prepare_native", order=0,
    sidecar="Elasticsearch, through a `custom` inference endpoint (`/v1/rerank?score=linear`)"))
