"""OpenSearch behind the part of elasticsearch-py's interface that the product's cluster code calls.

The ``es`` commands, the first-stage engine, bulk indexing and the results index are written against
elasticsearch-py (keyword arguments, ``client.options(...)``, answers with ``.meta.status``). That
client refuses any server that is not Elasticsearch (it checks the ``X-Elastic-Product`` header), so an
OpenSearch cluster is reached through opensearch-py, and this class gives it the same calls: each
method builds the request body opensearch-py takes (``body=`` plus query parameters) from the keyword
arguments the product passes. Only the calls the product makes are here; OpenSearch answers them with
the same JSON (it forked Elasticsearch 7.10, and these APIs have not diverged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import SimpleNamespace
from typing import Any

from es_plugin_bridge.elastic.cluster import lost_copy
from es_plugin_bridge.elastic.cluster.dialect import OPENSEARCH
from es_plugin_bridge.elastic.cluster.engine_errors import node_of, note_answered_by
from es_plugin_bridge.elastic.cluster.whole_answers import (
    WHOLE,
    check_whole,
    check_whole_msearch,
    whole_msearch_lines,
)


class Answer(dict):
    """A JSON answer with its HTTP status at ``.meta.status``, as elasticsearch-py's responses have it."""

    def __init__(self, body: Mapping[str, Any] | None, status: int = 200) -> None:
        super().__init__(body or {})
        self.meta = SimpleNamespace(status=status)

    @property
    def body(self) -> dict[str, Any]:
        """The JSON itself, as elasticsearch-py's ``ObjectApiResponse.body``."""
        return dict(self)


def _error_info(exc: Exception) -> Any:
    """The error answer an opensearch-py exception carries (``TransportError.info``), else nothing."""
    return getattr(exc, "info", None)


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class OpenSearchClient:
    """An opensearch-py client with elasticsearch-py's calling conventions (for the calls used here).

    ``ignore_status``: statuses answered as an :class:`Answer` with that status instead of raised,
    as ``Elasticsearch.options(ignore_status=...)`` does.
    """

    engine = OPENSEARCH

    def __init__(self, client: Any, ignore_status: Iterable[int] = ()) -> None:
        self._os = client
        self._ignore = frozenset(ignore_status)
        self.indices = _Indices(self)
        self.tasks = _Tasks(self)

    @property
    def raw(self) -> Any:
        """The opensearch-py client, for what has no Elasticsearch twin (ml-commons, search pipelines)."""
        return self._os

    def options(self, *, ignore_status: int | Iterable[int] = (), **_: Any) -> OpenSearchClient:
        """Elasticsearch's per-call options: ``ignore_status`` is kept; retry and timeout options are
        the transport's own here (opensearch-py retries nothing unless told), so they are accepted."""
        statuses = (ignore_status,) if isinstance(ignore_status, int) else tuple(ignore_status)
        copy = OpenSearchClient(self._os, statuses)
        copy.__dict__.update({k: v for k, v in self.__dict__.items()  # what was noted on it (GET /)
                              if k not in ("_os", "_ignore", "indices", "tasks")})
        return copy

    def _call(self, fn: Any, **kwargs: Any) -> Answer:
        from opensearchpy.exceptions import TransportError

        try:
            answer = fn(**kwargs)
        except TransportError as exc:
            status = exc.status_code if isinstance(exc.status_code, int) else None
            if status in self._ignore:
                return Answer(exc.info if isinstance(exc.info, dict) else {}, status)
            raise
        return Answer(answer if isinstance(answer, Mapping) else {"result": answer})

    @staticmethod
    def bulk_helper(client: OpenSearchClient, actions: Iterable[Mapping[str, Any]], **options: Any) -> Any:
        """``opensearchpy.helpers.bulk`` on the wrapped client: elasticsearch-py's ``helpers.bulk``
        contract (``(indexed, errors)``, the same options)."""
        from opensearchpy import helpers

        return helpers.bulk(client.raw, actions, **options)

    def info(self) -> Answer:
        return self._call(self._os.info)

    def search(self, *, index: str, query: Any = None, size: int | None = None, source: Any = None,
               track_total_hits: Any = None, preference: str | None = None,
               search_pipeline: str | Mapping[str, Any] | None = None, verbose_pipeline: bool | None = None,
               include_named_queries_score: bool | None = None, search_type: str | None = None,
               **body: Any) -> Answer:
        """``POST /index/_search``; every other keyword (``rescore``, ``ext``, ...) goes into the body.

        ``include_named_queries_score`` is sent as the URL parameter: OpenSearch 2.19 writes the named
        queries' scores only when the URL asks (``SearchHit.toInnerXContent`` reads
        ``RestSearchAction.INCLUDE_NAMED_QUERIES_SCORE_PARAM``); the same key in the body computes them
        and answers names only. ``search_pipeline``: a name goes in the URL, a mapping in the body (a
        temporary pipeline: ``SearchRequest``'s body field, OpenSearch 2.9+). Partial results are refused
        (:data:`WHOLE`)."""
        temporary = search_pipeline if isinstance(search_pipeline, Mapping) else None
        payload = _drop_none({"query": query, "size": size, "_source": source,
                              "track_total_hits": track_total_hits, "search_pipeline": temporary, **body})
        params = _drop_none({**WHOLE, "preference": preference, "search_type": search_type,
                             "search_pipeline": None if temporary is not None else search_pipeline,
                             "verbose_pipeline": "true" if verbose_pipeline else None,
                             "include_named_queries_score": "true" if include_named_queries_score else None})
        def send() -> Answer:
            return self._call(self._os.search, index=index, body=payload, params=params)

        answer = lost_copy.retrying(send, lambda _answer: False, _error_info)
        check_whole(answer, index)
        return answer

    def msearch(self, *, index: str, searches: list[Any], search_type: str | None = None) -> Answer:
        """``POST /index/_msearch`` of header and body lines, as elasticsearch-py's ``searches=``
        (``search_type``: every search's, a URL parameter); each search refuses partial results
        (:data:`WHOLE`, in its header line)."""
        params = _drop_none({"search_type": search_type})
        lines = whole_msearch_lines(searches)
        def send() -> Answer:
            return self._call(self._os.msearch, index=index, body=lines, params=params)

        answer = lost_copy.retrying(send, lost_copy.msearch_lost_copy, _error_info)
        check_whole_msearch(answer, index)
        return answer

    def get(self, *, index: str, id: str, source_includes: list[str] | None = None) -> Answer:
        params = _drop_none({"_source_includes": ",".join(source_includes) if source_includes else None})
        return self._call(self._os.get, index=index, id=id, params=params)

    def mget(self, *, index: str, ids: list[str], source: Any = None,
             source_includes: list[str] | None = None) -> Answer:
        params = _drop_none({"_source": "false" if source is False else None,
                             "_source_includes": ",".join(source_includes) if source_includes else None})
        return self._call(self._os.mget, index=index, body={"ids": list(ids)}, params=params)

    def bulk(self, *, operations: list[Any], index: str | None = None) -> Answer:
        return self._call(self._os.bulk, body=operations, index=index)

    def reindex(self, *, source: Any, dest: Any, script: Any = None,
                wait_for_completion: bool | None = None) -> Answer:
        """``POST _reindex`` (the reindex module); ``wait_for_completion=False`` answers ``{"task": id}``."""
        params = _drop_none({"wait_for_completion": _flag(wait_for_completion)})
        body = _drop_none({"source": source, "dest": dest, "script": script})
        return self._call(self._os.reindex, body=body, params=params)

    def update_by_query(self, *, index: str, pipeline: str | None = None, conflicts: str | None = None,
                        wait_for_completion: bool | None = None) -> Answer:
        """``POST /index/_update_by_query`` of every document, through ``pipeline``."""
        params = _drop_none({"pipeline": pipeline, "conflicts": conflicts,
                             "wait_for_completion": _flag(wait_for_completion)})
        return self._call(self._os.update_by_query, index=index, params=params)


def _flag(value: bool | None) -> str | None:
    return None if value is None else str(bool(value)).lower()


class _Tasks:
    def __init__(self, owner: OpenSearchClient) -> None:
        self._owner = owner

    def get(self, *, task_id: str) -> Answer:
        return self._owner._call(self._owner.raw.tasks.get, task_id=task_id)


class _Indices:
    def __init__(self, owner: OpenSearchClient) -> None:
        self._owner = owner

    @property
    def _os(self) -> Any:
        return self._owner.raw.indices

    def exists(self, *, index: str) -> bool:
        return bool(self._os.exists(index=index))

    def create(self, *, index: str, settings: Any = None, mappings: Any = None) -> Answer:
        body = _drop_none({"settings": settings, "mappings": mappings})
        return self._owner._call(self._os.create, index=index, body=body)

    def delete(self, *, index: str) -> Answer:
        return self._owner._call(self._os.delete, index=index)

    def refresh(self, *, index: str) -> Answer:
        return self._owner._call(self._os.refresh, index=index)

    def get_mapping(self, *, index: str) -> Answer:
        return self._owner._call(self._os.get_mapping, index=index)

    def get(self, *, index: str) -> Answer:
        """``GET /index``: its mappings and settings (a user's index, ``es setup --from-index``)."""
        return self._owner._call(self._os.get, index=index)

    def put_mapping(self, *, index: str, properties: Any, meta: Any = None) -> Answer:
        """``PUT /index/_mapping``: fields added, ``_meta`` replaced whole when given."""
        body = _drop_none({"properties": properties, "_meta": meta})
        return self._owner._call(self._os.put_mapping, index=index, body=body)


#: Statuses opensearch-py sends again to the next node (its default is 502, 503 and 504). Not 503: a
#: search refused for a missing shard answers 503 (``search_phase_execution_exception``) on every node, and
#: opensearch-py marks each node that answered it dead, so the search went up to four times and the error
#: shown was the last node's connection error. A node that does not answer (refused, reset) is still
#: tried on the next: connection errors are always retried (``Transport.perform_request``).
RETRY_ON_STATUS = (502, 504)


def _named_connection() -> type:
    """opensearch-py's connection class whose errors carry the node that answered (``.node``,
    ``host:port``), which the exception alone does not say."""
    from opensearchpy import Urllib3HttpConnection
    from opensearchpy.exceptions import TransportError

    class NamedConnection(Urllib3HttpConnection):  # type: ignore[misc]
        def perform_request(self, *args: Any, **kwargs: Any) -> Any:
            answer = super().perform_request(*args, **kwargs)
            note_answered_by(node_of(self.host))  # an _msearch item's error names it (answering_node)
            return answer

        def _raise_error(self, *args: Any, **kwargs: Any) -> None:
            try:
                super()._raise_error(*args, **kwargs)
            except TransportError as exc:
                exc.node = node_of(self.host)
                raise

    return NamedConnection


def connect(url: str | list[str], *, username: str | None = None, password: str | None = None,
            ca_certs: str | None = None, timeout: float = 30.0) -> OpenSearchClient:
    """An :class:`OpenSearchClient` for ``url`` (nothing is sent yet); several URLs: nodes of one
    cluster, each request retried on the next when a node does not answer (``Transport``), never on
    an answer (:data:`RETRY_ON_STATUS`)."""
    from opensearchpy import OpenSearch

    options: dict[str, Any] = {"timeout": timeout, "retry_on_status": RETRY_ON_STATUS,
                               "connection_class": _named_connection()}
    if username:
        options["http_auth"] = (username, password)
    if ca_certs:
        options.update(ca_certs=ca_certs, verify_certs=True)
    return OpenSearchClient(OpenSearch(url, **options))
