"""The calls the product makes of a cluster's client, as one protocol.

elasticsearch-py's client (``elasticsearch_client.WholeElasticsearch``) and OpenSearch's behind the same
calls (``opensearch_client.OpenSearchClient``) both answer it, so the modes, the first stage, bulk
indexing and set-up are written against this and not against either library. Each call takes
elasticsearch-py's keyword arguments (``index=``, ``size=``, ``source=``, ``searches=``, ``operations=``)
and answers a mapping of the engine's JSON. A call the product adds is added here first.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class SearchClient(Protocol):
    """A cluster's client, as far as the product uses it (module doc)."""

    @property
    def indices(self) -> Any:
        """``exists``, ``create``, ``delete``, ``refresh``, ``get``, ``get_mapping``, ``put_mapping``."""

    @property
    def tasks(self) -> Any:
        """``get`` (a reindex or update-by-query task's progress)."""

    def info(self) -> Any:
        """``GET /``: the engine, its version."""

    def search(self, **kwargs: Any) -> Any:
        """``_search``; every answer is checked whole (``whole_answers``)."""

    def msearch(self, **kwargs: Any) -> Any:
        """``_msearch``; each item is checked whole."""

    def get(self, **kwargs: Any) -> Any:
        """One document by id."""

    def mget(self, **kwargs: Any) -> Any:
        """Documents by id."""

    def bulk(self, **kwargs: Any) -> Any:
        """``_bulk`` of index actions."""

    def reindex(self, **kwargs: Any) -> Any:
        """``_reindex`` (``es setup --in-place`` copying a user's index)."""

    def update_by_query(self, **kwargs: Any) -> Any:
        """``_update_by_query`` through an ingest pipeline (vectors added in place)."""

    def options(self, **kwargs: Any) -> SearchClient:
        """The same client with other request options (``ignore_status=404``)."""


__all__ = ["SearchClient"]
