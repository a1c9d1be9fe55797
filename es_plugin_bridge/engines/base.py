"""The one first-stage interface: what the rankers, the bridge and ``evaluate`` need of a search engine.

Two engines implement it: the embedded one (:mod:`.embedded`, Lucene 8's formulas in process) and
Elasticsearch (:mod:`es_plugin_bridge.elastic.engine`); :mod:`.registry` names and builds them.
Code above this interface is given an ``Engine`` and never asks which one it has: it indexes a
collection once, then asks each similarity for the scores of a query's candidates (``score``) or for
the best ``k`` documents (``search``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from es_plugin_bridge.data.types import Question

Hits = list[tuple[str, float]]  # (question id, first-stage score), best first
Tokens = Callable[[Question], list[str]]  # a run's preprocessing: the tokens indexed and searched


@runtime_checkable
class FirstStage(Protocol):
    """One similarity over an indexed collection."""

    similarity: str

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> Hits:
        """The ``k`` best documents for ``query`` (only documents sharing a term with it), best first;
        ids in ``exclude`` are skipped. Equal scores keep indexing order."""
        ...

    def score(self, query: Question, doc_ids: Sequence[str]) -> np.ndarray:
        """The score of each given document (0 for a document sharing no term with the query)."""
        ...

    def question(self, doc_id: str) -> Question:
        """The indexed question ``doc_id`` (title and body as given at indexing)."""
        ...


@runtime_checkable
class Engine(Protocol):
    """Indexes one collection and hands out a first stage per similarity over it."""

    name: str

    def index(self, questions: Sequence[Question]) -> None:
        """Index ``questions`` (ids unique); the collection statistics become theirs."""
        ...

    def first_stage(self, similarity: str, params: Mapping[str, float] | None = None) -> FirstStage:
        """The first stage scoring with ``similarity`` (bm25, lmdirichlet, ...) over the indexed questions."""
        ...
