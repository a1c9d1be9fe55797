"""Search with a first stage and the sidecar's reranking (Elasticsearch mode 3, on Elasticsearch or on
the embedded engine): retrieve a window, send it to ``/v1/rerank`` with its first-stage scores, and fall
back to the first-stage order when the sidecar is slow or down — a search never fails because the
reranker did."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from es_plugin_bridge.bridge.sidecar_client import SidecarClient, SidecarUnavailable
from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.engines.base import FirstStage
from es_plugin_bridge.engines.registry import EngineContext, build_engine, default_engine
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import model_part, query_refusal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hit:
    question: Question
    score: float  # the sidecar's relevance_score when reranked, else the first-stage score
    first_stage_score: float
    first_stage_rank: int  # 1-based


@dataclass
class SearchResult:
    hits: list[Hit]
    reranked: bool
    fallback_reason: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)


def _check(query: Question | str) -> None:
    """A query that cannot be searched is the CLI's one-line UserError here too (a library caller's)."""
    refusal = query_refusal(query)
    if refusal is not None:
        raise UserError(refusal)


class BridgeSearch:
    """A first stage (any engine) reranked by ``sidecar``.

    ``source`` is a first stage (:class:`es_plugin_bridge.engines.base.FirstStage`, e.g. an
    Elasticsearch index) or a collection of questions, which is then indexed in the default engine of
    the registry (the embedded one) with ``similarity``.
    """

    def __init__(
        self,
        source: Sequence[Question] | FirstStage,
        sidecar: SidecarClient | None,
        *,
        similarity: str = "bm25",
        window: int = 100,
        preprocessor: Preprocessor | None = None,
    ) -> None:
        if window < 1:
            raise UserError(f"window must be >= 1, got {window}")
        self.preprocessor = preprocessor or Preprocessor()
        if isinstance(source, FirstStage):
            self.first_stage: FirstStage = source
        else:
            if not source:
                raise UserError("the collection holds no questions")
            engine = build_engine(default_engine(), EngineContext(tokens=self.preprocessor.tokens))
            engine.index(list({q.id: q for q in source}.values()))
            self.first_stage = engine.first_stage(similarity)
            self.index = self.first_stage.index  # type: ignore[attr-defined]
        self.similarity = self.first_stage.similarity
        self.sidecar = sidecar
        self.window = window

    def search(self, query: Question | str, k: int = 10, exclude: set[str] | None = None) -> SearchResult:
        """The ``k`` best questions for ``query``: the first stage's window, reranked when possible."""
        _check(query)
        if isinstance(query, str):
            query = question_from_text(query)
        t0 = time.perf_counter()
        found = self.first_stage.search(query, max(k, self.window), exclude)
        return self.rerank(query, found, k, {"first_stage": 1000 * (time.perf_counter() - t0)})

    def rerank(self, query: Question, found: Sequence[tuple[str, float]], k: int,
               timings: dict[str, float] | None = None) -> SearchResult:
        """Send the first ``window`` of ``found`` (first-stage hits, best first) to the sidecar; the ``k``
        best, or the first-stage order with the reason when the sidecar is slow or down."""
        _check(query)
        timings = dict(timings or {})
        first = [Hit(self.first_stage.question(i), s, s, rank) for rank, (i, s) in enumerate(found, start=1)]
        if self.sidecar is None or not first:
            return SearchResult(first[:k], reranked=False, fallback_reason=None if first else "no match",
                                timings_ms=timings)
        window = first[: self.window]
        t1 = time.perf_counter()
        try:  # the model reads only the start of an over-long query (text.sidecar_text.model_part)
            order = self.sidecar.rerank(model_part(query), [h.question for h in window],
                                        [h.first_stage_score for h in window], self.similarity)
        except SidecarUnavailable as exc:
            log.info("reranking skipped, first-stage order kept: %s", exc)  # the result says so too
            timings["rerank"] = 1000 * (time.perf_counter() - t1)
            return SearchResult(first[:k], reranked=False, fallback_reason=str(exc), timings_ms=timings)
        timings["rerank"] = 1000 * (time.perf_counter() - t1)
        hits = [Hit(window[i].question, score, window[i].first_stage_score, window[i].first_stage_rank)
                for i, score in order]
        return SearchResult((hits + first[self.window:])[:k], reranked=True, timings_ms=timings)
