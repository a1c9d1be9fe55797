"""Elasticsearch as a first-stage engine: registered here, built by ``es_plugin_bridge.elastic.engine``.

Its code needs the Elasticsearch client and lives one layer up (``elastic`` imports ``engines``, never
the reverse), so the factory is named as text and imported only when the engine is built: listing the
engines for ``--help`` loads neither the client nor ``es_plugin_bridge.elastic``. (Named after that
package: a module called ``elasticsearch`` would shadow the client wherever this folder is on the path.)
"""

from __future__ import annotations

from es_plugin_bridge.engines.registry import register_engine

register_engine("elasticsearch", "es_plugin_bridge.elastic.engine:open_engine", remote=True,
                description="an Elasticsearch index: a throw-away one per evaluation run, or an existing one "
                "to search (--es-url ...)")
