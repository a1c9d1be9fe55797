"""Modes native, vectors and bridge, one class each (docs/elasticsearch.md; ``hybrid.py`` holds hybrid and
hybrid-rrf, ``opensearch_rerank.py`` OpenSearch's rerank; the registry, ``mode_registry``, lists them all).

Every mode answers ``search(query, k, only=, exclude=)`` with hits best first; each ends in the
product's ``fused`` order over the same first-stage window (up to ties and the ``rank_features``
truncation), so they can be compared with ``esrerank evaluate``'s ``fused``:

- ``native``: Elasticsearch calls the sidecar itself (``linear`` + ``text_similarity_reranker`` on
  the ``custom`` inference endpoint that ``es setup`` registered); one request.
- ``vectors``: stored vectors and BOW features; the sidecar embeds only the query; the window is
  rescored inside Elasticsearch (one call on enterprise/trial, two calls on a basic licence).
- ``bridge``: the client takes the window, calls ``/v1/rerank`` and falls back to the first-stage
  order when the sidecar is slow or down (marked not reranked, with the reason).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from es_plugin_bridge.bridge.search import BridgeSearch
from es_plugin_bridge.bridge.sidecar_client import SidecarClient
from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic import opensearch_dsl, queries
from es_plugin_bridge.elastic.connection import ClusterInfo, call
from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
from es_plugin_bridge.elastic.mappings import rerank_text
from es_plugin_bridge.elastic.sidecar_embedder import EmbedError, SidecarEmbedder
from es_plugin_bridge.errors import UserError


@dataclass(frozen=True)
class ModeOptions:
    """What every mode's builder receives beside its first stage and the index meta, one value for all
    (``mode_registry.ModeSpec.builder``): the window reranked, the sidecar, the cluster (its version,
    licence and engine), whether a failed rerank may fall back (native) and how vectors are searched
    (``exact`` script_score or approximate ``hnsw`` knn; hybrid modes)."""

    window: int
    sidecar: SidecarTarget
    cluster: ClusterInfo
    allow_rerank_failures: bool = False
    knn: str = "exact"


@dataclass
class ModeResult:
    hits: list[tuple[str, float]]  # (id, score) best first; the score's scale is the mode's own
    reranked: bool
    fallback_reason: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    request: dict[str, Any] = field(default_factory=dict)  # the (last) search body, for --explain
    note: str | None = None  # what the user should know about this answer (e.g. allow_rerank_failures)


#: What ``--allow-rerank-failures`` gives, said with every such answer: Elasticsearch does not mark it.
ALLOW_FAILURES_NOTE = (
    "allow_rerank_failures is on: if Elasticsearch could not reach the sidecar, this is the first-stage "
    "order (Elasticsearch keeps the first-stage scores and does not say so in the answer)"
)


def _hits(answer: Mapping[str, Any]) -> list[tuple[str, float]]:
    return [(h["_id"], float(h["_score"])) for h in answer["hits"]["hits"]]


class Mode:
    name = ""

    def __init__(self, stage: ElasticsearchFirstStage, beta: Mapping[str, float], window: int) -> None:
        if window < 1:
            raise UserError(f"window must be >= 1, got {window}")
        self.stage = stage
        self.beta = dict(beta)
        self.window = window

    @property
    def client(self) -> Any:
        return self.stage.client

    @property
    def index(self) -> str:
        return self.stage.index

    def _body(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` as this cluster's engine reads it: unchanged for Elasticsearch; for OpenSearch its
        vector parts in the k-NN plugin's terms (``elastic/opensearch_dsl.py``). What is sent is what
        ``--explain`` shows."""
        return opensearch_dsl.translate(body) if opensearch_dsl.is_opensearch(self.client) else body

    def _search(self, k: int, *, sources: bool = True, **body: Any) -> tuple[dict[str, Any], float]:
        """One search of the index; ``preference`` (when given) pins the shard copies it reads.

        With ``sources`` the hits bring their title and body, which the first stage keeps: whoever
        shows the answer (``es search``) reads them from there instead of one GET per hit."""
        start = time.perf_counter()
        answer = call(
            f"searching {self.index} (mode {self.name})",
            self.client.search,
            index=self.index,
            size=k,
            source={"includes": list(self.stage.fields)} if sources else False,
            track_total_hits=False,
            **self.stage.search_type,  # global statistics: exact on any number of shards (shards.py)
            **body,
        )
        if sources:
            self.stage.remember(answer["hits"]["hits"])
        return answer, 1000 * (time.perf_counter() - start)

    def search(
        self,
        query: Question,
        k: int,
        *,
        only: Collection[str] | None = None,
        exclude: Collection[str] | None = None,
    ) -> ModeResult:
        raise NotImplementedError

    def _embed(self, query: Question, timings: dict[str, float]) -> dict[str, Any]:
        """The query's vector and BOW terms from the sidecar (modes that need them: ``self.embedder``);
        a sidecar that cannot embed is a one-line UserError naming the mode."""
        start = time.perf_counter()
        try:
            embedding = self.embedder.embed([query])[0]  # type: ignore[attr-defined]
        except EmbedError as exc:
            raise UserError(f"mode {self.name} needs the sidecar to embed the query: {exc}") from None
        timings["embed"] = 1000 * (time.perf_counter() - start)
        return embedding


class NativeMode(Mode):
    """Elasticsearch calls the sidecar (``/v1/rerank?score=linear``) through ``inference_id``."""

    name = "native"

    def __init__(
        self,
        stage: ElasticsearchFirstStage,
        beta: Mapping[str, float],
        window: int,
        inference_id: str,
        allow_failures: bool = False,
    ) -> None:
        super().__init__(stage, beta, window)
        self.inference_id = inference_id
        self.allow_failures = allow_failures

    def search(
        self,
        query: Question,
        k: int,
        *,
        only: Collection[str] | None = None,
        exclude: Collection[str] | None = None,
    ) -> ModeResult:
        window = max(k, self.window)
        retriever = queries.native_retriever(
            similarity=self.stage.similarity,
            tokens=self.stage.tokens(query),
            query_text=rerank_text(query),
            inference_id=self.inference_id,
            beta_first_stage=self.beta["first_stage"],
            window=window,
            only=only,
            exclude=exclude,
            allow_failures=self.allow_failures,
        )
        answer, ms = self._search(k, retriever=retriever)
        note = (ALLOW_FAILURES_NOTE if self.allow_failures else None)
        return ModeResult(_hits(answer), True, timings_ms={"search": ms}, request={"retriever": retriever},
                          note=note)


class VectorsMode(Mode):
    """The query embedded once by the sidecar; the window rescored with stored vectors and BOW features.

    ``one_call`` (enterprise/trial): a ``rescorer`` retriever over a min-maxing ``linear``. Otherwise
    (any licence) two calls: the first reads the window's first-stage max and min, the second rescores
    with ``query_weight = β_fs / (max − min)``.
    """

    name = "vectors"

    def __init__(
        self,
        stage: ElasticsearchFirstStage,
        beta: Mapping[str, float],
        window: int,
        embedder: SidecarEmbedder,
        neural_similarity: str,
        one_call: bool,
    ) -> None:
        super().__init__(stage, beta, window)
        self.embedder = embedder
        self.neural_similarity = neural_similarity
        self.one_call = one_call

    def search(
        self,
        query: Question,
        k: int,
        *,
        only: Collection[str] | None = None,
        exclude: Collection[str] | None = None,
    ) -> ModeResult:
        window = max(k, self.window)
        timings: dict[str, float] = {}
        embedding = self._embed(query, timings)
        rest = queries.rest_of_fused(
            embedding["vector"], embedding["terms"], self.beta, self.neural_similarity
        )
        tokens = self.stage.tokens(query)
        if self.one_call:
            retriever = queries.vectors_retriever(
                similarity=self.stage.similarity,
                tokens=tokens,
                rest=rest,
                beta_first_stage=self.beta["first_stage"],
                window=window,
                only=only,
                exclude=exclude,
            )
            answer, timings["search"] = self._search(k, retriever=retriever)
            return ModeResult(_hits(answer), True, timings_ms=timings, request={"retriever": retriever})
        first = queries.first_stage_query(self.stage.similarity, tokens, only=only, exclude=exclude)
        # The same preference string on both calls: both read the same shard copies, so the second
        # call's first-pass scores are the ones the first call measured (a replica may hold other
        # deleted-document statistics until it merges). A copy that dies in between is skipped for
        # another: a custom preference picks among active copies only (shards.py).
        pin = {"preference": f"esrerank-{uuid.uuid4().hex}"}
        probe, timings["window"] = self._search(window, sources=False, query=first, **pin)
        found = _hits(probe)
        weight = queries.basic_query_weight(self.beta["first_stage"], [s for _, s in found])
        # A rescore window is per shard: rescoring only the global window's ids (each shard holds at
        # most ``window`` of them) reranks exactly the global first-stage top window on any shard count.
        window_only = queries.first_stage_query(self.stage.similarity, tokens, only=[d for d, _ in found],
                                                exclude=exclude)
        body = self._body({"query": window_only, "rescore": queries.rescore(rest, window, weight)})
        answer, timings["search"] = self._search(k, **body, **pin)
        return ModeResult(_hits(answer), True, timings_ms=timings, request=body)


class BridgeMode(Mode):
    """The client reranks the first-stage window through ``/v1/rerank`` (first-stage order on failure):
    ``esrerank search``'s :class:`BridgeSearch` over the Elasticsearch first stage."""

    name = "bridge"

    def __init__(
        self, stage: ElasticsearchFirstStage, beta: Mapping[str, float], window: int, sidecar: SidecarClient
    ) -> None:
        super().__init__(stage, beta, window)
        self.sidecar = sidecar

    def search(
        self,
        query: Question,
        k: int,
        *,
        only: Collection[str] | None = None,
        exclude: Collection[str] | None = None,
    ) -> ModeResult:
        start = time.perf_counter()
        if only is not None:  # rerank a given candidate list: every candidate, by first-stage score
            ids = [i for i in dict.fromkeys(only) if not exclude or i not in exclude]
            scores = self.stage.score(query, ids)
            found = sorted(zip(ids, map(float, scores), strict=True), key=lambda h: -h[1])
        else:
            found = self.stage.search(query, max(k, self.window), set(exclude or ()))
        bridge = BridgeSearch(self.stage, self.sidecar, window=max(k, self.window))
        result = bridge.rerank(query, found, k, {"first_stage": 1000 * (time.perf_counter() - start)})
        hits = [(h.question.id, h.score) for h in result.hits]
        return ModeResult(hits, result.reranked, result.fallback_reason, result.timings_ms)
