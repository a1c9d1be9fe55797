"""What a ranker is: one object that scores questions for the three evaluation tasks.

A ranker is built from a ``RankerContext`` (the collection it may index, the text pipeline, an
optional model directory) and answers whichever of these its ``tasks`` declares:

* ``rerank(query)`` – scores of a RankingQuery's candidates (task ``rerank``);
* ``search(query, k, exclude)`` – the best ``k`` collection ids for a query (task ``retrieval``);
* ``score_pairs(pairs)`` – one similarity score per pair, higher = more alike (task ``classify``).

The evaluator only talks to this interface, so a new ranker is a new module, not an evaluator change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from es_plugin_bridge.data.types import Pair, Question, RankingQuery
from es_plugin_bridge.engines.base import Engine, FirstStage
from es_plugin_bridge.errors import UserError

TASKS = ("rerank", "retrieval", "classify")


class TokenCache:
    """Tokens of each question, computed once per question id and shared by every ranker of a run."""

    def __init__(self, preprocessor: object) -> None:
        self.preprocessor = preprocessor
        self._cache: dict[str, list[str]] = {}

    def __call__(self, question: Question) -> list[str]:
        tokens = self._cache.get(question.id)
        if tokens is None:
            tokens = list(self.preprocessor.tokens(question))  # type: ignore[attr-defined]
            self._cache[question.id] = tokens
        return tokens


@dataclass
class RankerContext:
    """Everything a ranker may need; built once per evaluation run.

    ``collection`` is the set of questions whose statistics a first-stage index uses (rerank: every
    candidate of the data file; retrieval: every document; classify: every question of data + dev),
    deduplicated by id and in a stable order. ``params`` maps a ranker name to its keyword
    parameters (e.g. ``{"bm25": {"k1": 1.2}}``). ``shared`` lets rankers of one run reuse costly
    work. ``engine`` answers the first-stage similarities (None: the engine registry's default, the
    embedded one); it is given ``collection`` to index on the first first-stage call.
    ``fused_first_stage`` forces the first stage the ``fused`` ranker fuses with (default: the data's
    own order when it can, else BM25).
    """

    collection: Sequence[Question]
    tokens: TokenCache
    model_dir: Path | None = None
    params: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    shared: dict[str, object] = field(default_factory=dict)
    engine: Engine | None = None
    fused_first_stage: str | None = None
    #: Rankers built another way in this run (e.g. ``fused`` computed by an Elasticsearch mode).
    overrides: Mapping[str, Callable[[RankerContext], Ranker]] = field(default_factory=dict)

    def first_stage(self, similarity: str) -> FirstStage:
        """The run's first stage for ``similarity`` (its ``--param`` values applied), built once."""
        key = f"first_stage.{similarity}"
        stage = self.shared.get(key)
        if stage is None:
            if self.engine is None:
                from es_plugin_bridge.engines.registry import EngineContext, build_engine, default_engine

                self.engine = build_engine(default_engine(), EngineContext(tokens=self.tokens))
            if not self.shared.get("engine.indexed"):
                self.engine.index(list(self.collection))
                self.shared["engine.indexed"] = True
            stage = self.shared[key] = self.engine.first_stage(similarity, self.params.get(similarity, {}))
        return stage  # type: ignore[return-value]


class Ranker:
    """Base class; subclasses override the methods of the tasks they support."""

    name: ClassVar[str] = ""
    tasks: ClassVar[frozenset[str]] = frozenset(TASKS)

    def __init__(self, context: RankerContext) -> None:
        self.context = context

    def score(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        """Scores of ``candidates`` for ``query``, higher is better."""
        raise UserError(f"ranker {self.name!r} cannot score arbitrary candidates")

    def rerank(self, query: RankingQuery) -> np.ndarray:
        """Scores of a RankingQuery's candidates (default: ``score`` of its query and candidates)."""
        return self.score(query.query, query.candidates)

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        """The best ``k`` (collection id, score) pairs for ``query``, best first."""
        raise UserError(f"ranker {self.name!r} cannot search a collection")

    def score_pairs(self, pairs: Sequence[Pair]) -> np.ndarray:
        """One score per pair: how well q2 answers q1 as a query."""
        return np.array([float(self.score(p.q1, [p.q2])[0]) for p in pairs], dtype=np.float64)


def unique_questions(groups: Sequence[Sequence[Question]]) -> list[Question]:
    """Questions of all groups, first occurrence of each id kept, order preserved."""
    seen: dict[str, Question] = {}
    for group in groups:
        for q in group:
            seen.setdefault(q.id, q)
    return list(seen.values())
