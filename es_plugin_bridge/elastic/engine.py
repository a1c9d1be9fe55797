"""Elasticsearch behind the first-stage interface (``es_plugin_bridge.engines.base``), built by
``open_engine`` (the ``elasticsearch`` engine of ``es_plugin_bridge.engines.registry``).

A query is preprocessed by the product (the options stored in the index's ``_meta``) and sent as a
``match`` on the similarity's field (``queries.first_stage_query``), so Elasticsearch scores the
embedded engine's tokens with the same similarity and parameters. Questions come back from
``_source`` and are kept, so the bridge can send their text to the sidecar without another call.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.cluster.connection import call
from es_plugin_bridge.elastic.cluster.dialect import has_knn_plugin
from es_plugin_bridge.elastic.cluster.shards import search_type as search_type_for
from es_plugin_bridge.elastic.queries import first_stage_query
from es_plugin_bridge.engines.base import Hits, Tokens
from es_plugin_bridge.engines.registry import EngineContext
from es_plugin_bridge.engines.similarities import SIMILARITIES, make_similarity
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient

__all__ = ["ElasticsearchEngine", "ElasticsearchFirstStage", "Tokens", "open_engine"]


class ElasticsearchFirstStage:
    """One similarity of a questions index (one of the ``text`` fields)."""

    def __init__(
        self,
        client: SearchClient,
        index: str,
        similarity: str,
        tokens: Tokens,
        questions: dict[str, Question] | None = None,
        fields: tuple[str, str] = ("title", "body"),
        global_statistics: bool = True,
    ) -> None:
        """``fields``: where the title and body live in ``_source`` (a user's own field paths when the
        reranker's fields were added to their index in place). ``global_statistics``: every search of
        this stage and of the modes over it scores with the statistics of all shards
        (``dfs_query_then_fetch``, ``cluster/shards.py``): the embedded engine's scores on any number of
        shards; False: each shard's own, one round-trip less (``es search --shard-statistics``)."""
        if similarity not in mappings.FIELDS:
            raise UserError(f"unknown similarity {similarity!r} (choose from {', '.join(SIMILARITIES)})")
        self.client = client
        self.index = index
        self.similarity = similarity
        self.tokens = tokens
        self._questions = questions if questions is not None else {}
        self.fields = fields
        self.global_statistics = global_statistics

    @property
    def search_type(self) -> dict[str, str]:
        """The ``search_type`` keyword every search over this stage sends (none: the engine's default)."""
        return search_type_for(self.global_statistics)

    def _question(self, doc_id: str, source: Mapping[str, Any]) -> Question:
        title, body = (mappings.value_at(source, path) for path in self.fields)
        return Question(doc_id, "" if title is None else str(title), "" if body is None else str(body))

    def remember(self, hits: list[dict[str, Any]]) -> Hits:
        """Keep the questions of search hits that carry their ``_source`` (title and body fields), so
        :meth:`question` needs no request for them; returns the hits as ``(id, score)``."""
        out = []
        for hit in hits:
            if "_source" in hit:
                self._questions.setdefault(hit["_id"], self._question(hit["_id"], hit["_source"]))
            out.append((hit["_id"], float(hit["_score"])))
        return out

    def _run(self, body: dict[str, Any], size: int) -> Hits:
        answer = call(f"searching {self.index}", self.client.search, index=self.index, query=body, size=size,
                      source={"includes": list(self.fields)}, track_total_hits=False, **self.search_type)
        return self.remember(answer["hits"]["hits"])

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> Hits:
        if k <= 0:
            return []
        return self._run(first_stage_query(self.similarity, self.tokens(query), exclude=exclude), k)

    def score(self, query: Question, doc_ids: Sequence[str]) -> np.ndarray:
        ids = list(doc_ids)
        if not ids:
            return np.zeros(0)
        found = self._run(first_stage_query(self.similarity, self.tokens(query), only=ids), len(set(ids)))
        scores = dict(found)
        missing = [i for i in ids if i not in scores]
        if missing:
            raise UserError(f"{len(missing)} ids are not in index {self.index} (first: {missing[0]!r})")
        return np.array([scores[i] for i in ids], dtype=np.float64)

    def questions(self, doc_ids: Sequence[str]) -> list[Question]:
        """The questions of ``doc_ids``; those not already kept are read in one ``mget``, not one GET each."""
        missing = [doc for doc in dict.fromkeys(doc_ids) if doc not in self._questions]
        if missing:
            answer = call(f"reading {len(missing)} questions from {self.index}", self.client.mget,
                          index=self.index, ids=missing, source_includes=list(self.fields))
            for doc in answer["docs"]:
                if doc.get("found"):
                    self._questions[doc["_id"]] = self._question(doc["_id"], doc.get("_source") or {})
        return [self.question(doc) for doc in doc_ids]

    def question(self, doc_id: str) -> Question:
        question = self._questions.get(doc_id)
        if question is None:
            answer = call(
                f"reading {doc_id!r} from {self.index}",
                self.client.get,
                index=self.index,
                id=doc_id,
                source_includes=list(self.fields),
            )
            question = self._questions[doc_id] = self._question(doc_id, answer.get("_source") or {})
        return question


class ElasticsearchEngine:
    """A questions index as the engine of a run: ``index`` fills it, ``first_stage`` searches it.

    ``params`` are the similarities' parameters the index was (or is to be) created with; asking for
    a first stage with other values is an error, since Elasticsearch fixes them at index creation.
    """

    name = "elasticsearch"

    def __init__(
        self,
        client: SearchClient,
        index: str,
        tokens: Tokens,
        *,
        params: Mapping[str, Mapping[str, float]] | None = None,
        embed: Callable[[Sequence[Question]], list[dict[str, Any]]] | None = None,
        dimension: int | None = None,
        neural_similarity: str = "cosine",
        meta: Mapping[str, Any] | None = None,
        batch_size: int = 200,
        progress: bool = True,
        fields: tuple[str, str] = ("title", "body"),
        shards: int = 1,
        replicas: int | None = None,
    ) -> None:
        """``fields``: where its first stages read the title and body (``ElasticsearchFirstStage``);
        ``shards``/``replicas``: of the index it creates (``mappings.index_body``)."""
        self.client = client
        self.index_name = index
        self.tokens = tokens
        self.params = {k: dict(v) for k, v in (params or {}).items()}
        self.embed = embed
        self.dimension = dimension
        self.neural_similarity = neural_similarity
        self.meta = dict(meta or {})
        self.batch_size = batch_size
        self.progress = progress
        self.fields = fields
        self.shards = shards
        self.replicas = replicas
        self._questions: dict[str, Question] = {}

    def create(self) -> None:
        """Create the index (refusing to overwrite one that exists)."""
        if call("checking the index", self.client.indices.exists, index=self.index_name):
            raise UserError(f"index {self.index_name} already exists; delete it or choose another name")
        body = mappings.index_body(
            dimension=self.dimension,
            neural_similarity=self.neural_similarity,
            params=self.params,
            meta=self.meta,
            knn_plugin=has_knn_plugin(self.client),  # OpenSearch: a knn_vector
            shards=self.shards,
            replicas=self.replicas,
        )
        call(f"creating index {self.index_name}", self.client.indices.create, index=self.index_name, **body)

    def actions(self, batch: Sequence[Question]) -> list[dict[str, Any]]:
        """Bulk actions for a batch: the source of each question, with its embedding when asked."""
        embeddings = self.embed(batch) if self.embed is not None else [None] * len(batch)
        tokens = [self.tokens(q) for q in batch]
        sources = mappings.documents(batch, tokens, embeddings, self.neural_similarity)
        return [{"_index": self.index_name, "_id": q.id, "_source": source}
                for q, source in zip(batch, sources, strict=True)]

    def index(self, questions: Sequence[Question]) -> None:
        from es_plugin_bridge.elastic.bulk import index_questions

        if not call("checking the index", self.client.indices.exists, index=self.index_name):
            self.create()
        report = index_questions(
            self.client,
            self.index_name,
            list(questions),
            self.actions,
            batch_size=self.batch_size,
            progress=self.progress,
        )
        if not report.ok:
            first = report.failures[0]
            raise UserError(
                f"{report.failed} of {report.read} questions could not be indexed into "
                f"{self.index_name} (first: {first[0]!r}: {first[2]})"
            )
        call(f"refreshing {self.index_name}", self.client.indices.refresh, index=self.index_name)
        self._questions.update({q.id: q for q in questions})

    def first_stage(
        self, similarity: str, params: Mapping[str, float] | None = None
    ) -> ElasticsearchFirstStage:
        wanted = make_similarity(similarity, **dict(params or {})).params
        built = make_similarity(similarity, **self.params.get(similarity, {})).params
        if wanted != built:
            raise UserError(
                f"index {self.index_name} scores {similarity} with {built}; parameters are fixed "
                "when the index is created"
            )
        return ElasticsearchFirstStage(
            self.client, self.index_name, similarity, self.tokens, self._questions, fields=self.fields
        )


#: What ``open_engine`` reads from ``EngineContext.options``.
OPTIONS = frozenset(
    {"connection", "client", "index", "keep", "embed", "dimension", "neural_similarity", "meta", "fields",
     "shards", "replicas"}
)


def open_engine(context: EngineContext) -> ElasticsearchEngine:
    """The one way to build the Elasticsearch engine (every command's, through the engine registry).

    With ``context.cleanup`` the engine gets the run's own index — ``options["index"]``, or
    ``esrerank-eval-<random>`` — created with ``context.params`` and filled on the first first-stage
    call, so collection statistics are the run's own as in process; the index is deleted when
    ``cleanup`` closes unless ``options["keep"]``. Without it, the engine opens the existing
    ``options["index"]``, searched with that index's own preprocessing (its ``_meta``) unless
    ``context.tokens`` is given. Options: ``connection`` (a ``Connection``; a run's index needs it) or
    ``client``, ``index``, ``keep``, ``fields`` (where the title and body are read, default ``title``
    and ``body``), and for indexing ``embed``, ``dimension``, ``neural_similarity`` (default cosine)
    and ``meta``, and ``shards``/``replicas`` of the index it creates.
    """
    options = dict(context.options)
    unknown = set(options) - OPTIONS
    if unknown:
        raise ValueError(f"the elasticsearch engine has no option {', '.join(sorted(unknown))}")
    own = ("embed", "dimension", "neural_similarity", "meta", "fields", "shards", "replicas")  # its defaults
    more = {key: options[key] for key in own if key in options}
    if context.cleanup is None:
        index = options.get("index")
        if not index:
            raise UserError("the elasticsearch engine needs the name of the index to open")
        client = options["client"] if options.get("client") is not None else options["connection"].client()
        tokens = context.tokens
        if tokens is None:
            from es_plugin_bridge.elastic.setup import read_meta
            from es_plugin_bridge.text import Preprocessor

            tokens = Preprocessor(read_meta(client, index).text_options()).tokens
        return ElasticsearchEngine(
            client, index, tokens, params=context.params, progress=context.progress, **more
        )
    if context.tokens is None:
        raise UserError("the elasticsearch engine indexes the run's collection: it needs the run's tokens")
    conn = options["connection"]
    client = conn.client()
    call(f"connecting to {conn.url}", client.info)
    name = options.get("index") or f"esrerank-eval-{uuid.uuid4().hex[:10]}"
    engine = ElasticsearchEngine(
        client, name, context.tokens, params=context.params, progress=context.progress, **more
    )
    if not options.get("keep"):
        context.cleanup.enter_context(_deleted_after(client, name))
    return engine


@contextmanager
def _deleted_after(client: SearchClient, index: str) -> Iterator[None]:
    """Delete a run's index on the way out; on the way out of an error, that error is the one reported."""
    failed = True
    try:
        yield
        failed = False
    finally:
        try:
            call(f"deleting {index}", client.options(ignore_status=404).indices.delete, index=index)
        except UserError:
            if not failed:
                raise
