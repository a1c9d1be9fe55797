"""Mode ``bridge``: the client takes the first-stage window, calls ``/v1/rerank`` and falls back to the
first-stage order when the sidecar is slow or down; any version, any licence, either engine."""

from es_plugin_bridge.elastic.mode_registry import ModeSpec, register_mode

register_mode(ModeSpec(
    "bridge", "es_plugin_bridge.elastic.mode_factory:build_bridge",
    "the client calls the sidecar on the first-stage window",
    engines=("elasticsearch", "opensearch"), order=2,
    sidecar="the client (`/v1/rerank` on the first-stage window); first-stage order, marked not reranked "
            "with the reason, when the sidecar is slow or down"))
