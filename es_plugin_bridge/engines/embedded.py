"""The embedded engine behind the first-stage interface: Lucene 8's similarities in process.

The postings are built once per indexed collection and shared by every similarity, so asking for
``bm25`` then ``lmdirichlet`` costs one tokenisation and one postings build.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.engines.base import Hits, Tokens
from es_plugin_bridge.engines.index import EmbeddedIndex
from es_plugin_bridge.engines.registry import EngineContext, register_engine
from es_plugin_bridge.errors import UserError


class EmbeddedFirstStage:
    """One similarity of an :class:`EmbeddedIndex`, speaking in questions instead of token lists."""

    def __init__(self, index: EmbeddedIndex, tokens: Tokens, questions: Mapping[str, Question]) -> None:
        self.index = index
        self.similarity = index.similarity.name
        self._tokens = tokens
        self._questions = questions

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> Hits:
        return self.index.search(self._tokens(query), k=k, exclude=exclude)

    def score(self, query: Question, doc_ids: Sequence[str]) -> np.ndarray:
        return np.asarray(self.index.score(self._tokens(query), list(doc_ids)), dtype=np.float64)

    def question(self, doc_id: str) -> Question:
        try:
            return self._questions[doc_id]
        except KeyError:
            raise UserError(f"unknown document id {doc_id!r}") from None


class EmbeddedEngine:
    """In-memory index of one collection; ``tokens`` is the run's preprocessing (shared cache)."""

    name = "embedded"

    def __init__(self, tokens: Tokens) -> None:
        self._tokens = tokens
        self._questions: dict[str, Question] = {}
        self._base: EmbeddedIndex | None = None
        self._pending: list[Question] | None = None

    def index(self, questions: Sequence[Question]) -> None:
        if not questions:
            raise UserError("the collection holds no questions")
        self._questions = {}
        for q in questions:
            if q.id in self._questions:
                raise UserError(f"duplicate document id {q.id!r}")
            self._questions[q.id] = q
        self._base, self._pending = None, list(questions)

    def first_stage(self, similarity: str, params: Mapping[str, float] | None = None) -> EmbeddedFirstStage:
        if self._pending is None and self._base is None:
            raise UserError("nothing is indexed yet")
        if self._base is None:
            assert self._pending is not None
            docs = [self._tokens(q) for q in self._pending]
            # Built with the first similarity asked for, so that one scores the postings only once.
            self._base = EmbeddedIndex.build(
                docs, similarity, ids=[q.id for q in self._pending], **dict(params or {})
            )
            self._pending = None
            index = self._base
        else:
            index = self._base.with_similarity(similarity, **dict(params or {}))
        return EmbeddedFirstStage(index, self._tokens, self._questions)


@register_engine("embedded", default=True, description="in process: Lucene 8's similarities over the run's "
                 "collection, no server")
def embedded_engine(context: EngineContext) -> EmbeddedEngine:
    """The embedded engine of a run: it indexes the collection it is given, with the run's tokens."""
    if context.tokens is None:
        raise UserError("the embedded engine indexes a given collection: it needs the run's tokens")
    return EmbeddedEngine(context.tokens)
