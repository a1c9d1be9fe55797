"""OpenSearch as a first-stage engine: the same factory as Elasticsearch's
(``es_plugin_bridge.elastic.engine``), which reaches an OpenSearch cluster through opensearch-py once
``GET /`` names it; registered under its own name so that runs (and the results index) say which engine
scored them."""

from __future__ import annotations

from es_plugin_bridge.engines.registry import register_engine

register_engine("opensearch", "es_plugin_bridge.elastic.engine:open_engine", remote=True,
                description="an OpenSearch index: a throw-away one per evaluation run, or an existing one "
                "to search (--es-url ...)")
