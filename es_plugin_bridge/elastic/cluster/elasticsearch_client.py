"""elasticsearch-py's client with the product's two rules for every search (``whole_answers``).

The modes, the first stage and the results index call ``client.search`` / ``client.msearch`` as
elasticsearch-py defines them; this subclass adds ``allow_partial_search_results=false`` to each (a URL
parameter of ``_search``, a header field of each ``_msearch`` search: ``RestSearchAction.java``,
``MultiSearchRequest.java``) and checks each answer's ``_shards``, as ``OpenSearchClient`` does for
OpenSearch. ``client.options(...)`` keeps the class (``BaseClient.options`` builds ``type(self)``).
"""

from __future__ import annotations

from typing import Any

from elasticsearch import Elasticsearch

from es_plugin_bridge.elastic.cluster.whole_answers import (
    check_whole,
    check_whole_msearch,
    whole_msearch_lines,
)

#: Statuses elastic-transport sends again to the next node (its default adds 503): a search refused for a
#: shard without any copy answers 503 on every node, so it is sent once and its error is the one shown;
#: a node that does not answer is still tried on the next (connection errors are always retried).
RETRY_ON_STATUS = (429, 502, 504)


class WholeElasticsearch(Elasticsearch):
    """``Elasticsearch`` whose searches refuse partial results and whose answers are checked whole."""

    def search(self, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["allow_partial_search_results"] = False
        answer = super().search(**kwargs)
        check_whole(answer, str(kwargs.get("index", "")))
        return answer

    def msearch(self, **kwargs: Any) -> Any:  # type: ignore[override]
        if kwargs.get("searches") is not None:
            kwargs["searches"] = whole_msearch_lines(list(kwargs["searches"]))
        answer = super().msearch(**kwargs)
        check_whole_msearch(answer, str(kwargs.get("index", "")))
        return answer
