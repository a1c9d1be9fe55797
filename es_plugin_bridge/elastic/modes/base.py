"""What every mode shares: the options its builder receives, the result it answers, and the base class
that owns the window, the timings and the search signature, so a mode's module fills in only what
ranks (:meth:`Mode.rank`).

Every mode answers ``search(query, k, only=, exclude=)`` with hits best first, over the first-stage
window ``max(k, window)``; each ends in its registry entry's in-process ranker's order (``ranker``:
``fused`` for most) over the same window, up to ties and the ``rank_features`` truncation, so it can be
compared with ``esrerank evaluate``'s figures.

Cheap to import (no search client): the registry imports every mode's module to list the modes.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.bridge.sidecar_client import EmbedError
from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo, call
from es_plugin_bridge.elastic.cluster.opensearch_dsl import request_body
from es_plugin_bridge.elastic.cluster.search_client import SearchClient
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text.sidecar_text import model_part, query_refusal

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage


@dataclass(frozen=True)
class ModeOptions:
    """What every mode's builder receives beside its first stage and the index meta, one value for all
    (``modes.ModeSpec.builder``): the window reranked, the sidecar, the cluster (its version, licence
    and engine), whether a failed rerank may fall back (native), how vectors are searched (``exact``
    script_score or approximate ``hnsw`` knn; hybrid modes) and any
    other option a mode declares (``extra``)."""

    window: int
    sidecar: SidecarTarget
    cluster: ClusterInfo
    allow_rerank_failures: bool = False
    #: None: the mode's own default (learned-hybrid: HNSW wherever the index has a graph,
    #: ``IndexMeta.default_knn``; hybrid, hybrid-rrf: exact, their in-process order)
    knn: str | None = None
    #: the values of a mode's own CLI options that are no field here (``ModeSpec.options``), by ``dest``
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class ModeResult:
    hits: list[tuple[str, float]]  # (id, score) best first; the score's scale is the mode's own
    reranked: bool
    fallback_reason: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    request: dict[str, Any] = field(default_factory=dict)  # the (last) search body, for --explain
    note: str | None = None  # what the user should know about this answer (e.g. allow_rerank_failures)


@dataclass(frozen=True)
class Ask:
    """One search as a mode ranks it: the query, how many hits, the first-stage window
    (``max(k, window)``), and the candidate restriction (``only``: rerank exactly these; ``exclude``)."""

    query: Question
    k: int
    window: int
    only: Collection[str] | None = None
    exclude: Collection[str] | None = None


class _ReadsNothing(Exception):
    """The model reads no word of the query (the sidecar refused to embed it as a blank text)."""


def hits_of(answer: Mapping[str, Any]) -> list[tuple[str, float]]:
    """A search answer's ``(id, score)`` hits, best first."""
    return [(h["_id"], float(h["_score"])) for h in answer["hits"]["hits"]]


class Mode:
    """A mode over one first stage. ``search`` is the same for all; a mode implements :meth:`rank`."""

    name = ""

    def __init__(self, stage: ElasticsearchFirstStage, beta: Mapping[str, float], window: int) -> None:
        if window < 1:
            raise UserError(f"window must be >= 1, got {window}")
        self.stage = stage
        self.beta = dict(beta)
        self.window = window

    @property
    def client(self) -> SearchClient:
        return self.stage.client

    @property
    def index(self) -> str:
        return self.stage.index

    def search(
        self,
        query: Question,
        k: int,
        *,
        only: Collection[str] | None = None,
        exclude: Collection[str] | None = None,
    ) -> ModeResult:
        """The top ``k`` for ``query``; ``timings_ms`` holds each step :meth:`rank` timed. A query that
        cannot be searched (blank, a lone surrogate) is the CLI's one-line UserError."""
        refusal = query_refusal(query)
        if refusal is not None:
            raise UserError(refusal)
        timings: dict[str, float] = {}
        try:
            result = self.rank(Ask(query, k, max(k, self.window), only, exclude), timings)
        except _ReadsNothing:  # no word to match, no vector to search: what a query of no token finds
            result = ModeResult([], reranked=False, fallback_reason="no match")
        result.timings_ms = {**timings, **result.timings_ms}
        return result

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        """The mode's own ranking of ``ask``; each step it times goes into ``timings`` (milliseconds)."""
        raise NotImplementedError

    def _body(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` as this cluster's engine reads it: unchanged for Elasticsearch; for OpenSearch its
        vector parts in the k-NN plugin's terms (``elastic/cluster/opensearch_dsl.py``). What is sent is what
        ``--explain`` shows."""
        return request_body(self.client, body)

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

    def _embed(self, query: Question, timings: dict[str, float]) -> dict[str, Any]:
        """The query's vector and BOW terms from the sidecar (modes that need them: ``self.embedder``), of
        the start the model reads (``model_part``: the first stage reads an over-long query whole); a
        sidecar that cannot embed is a one-line UserError naming the mode."""
        start = time.perf_counter()
        try:
            embedding = self.embedder.embed([model_part(query)])[0]  # type: ignore[attr-defined]
        except EmbedError as exc:
            if exc.refused_a_text and not self.stage.tokens(query):  # the index's text options: the model's
                raise _ReadsNothing from None  # the sidecar refuses a text it reads as no word (sidecar_text)
            raise UserError(f"mode {self.name} needs the sidecar to embed the query: {exc}") from None
        timings["embed"] = 1000 * (time.perf_counter() - start)
        return embedding
