"""The three shapes every reader produces and every other part consumes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Question:
    """One forum question: raw title and raw body (HTML allowed; the text module cleans it)."""

    id: str
    title: str
    body: str = ""


@dataclass(frozen=True, slots=True)
class Pair:
    """Two questions and whether they are duplicates (1) or not (0)."""

    q1: Question
    q2: Question
    label: int


@dataclass(slots=True)
class RankingQuery:
    """A query with the candidates a first stage found for it.

    ``labels`` are graded relevance (SemEval: 2 PerfectMatch, 1 Relevant, 0 Irrelevant); a
    candidate is relevant when its label is > 0. ``first_stage_scores`` are higher-is-better
    scores of the data's own first stage (SemEval: ``-RELQ_RANKING_ORDER``), or None.
    """

    query: Question
    candidates: list[Question]
    labels: list[int]
    first_stage_scores: list[float] | None = None
    split: str = ""


@dataclass(slots=True)
class Dataset:
    """What one SPEC holds. Every field may be empty; ``skipped`` counts records dropped by --skip-bad."""

    name: str
    questions: dict[str, Question] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)
    queries: list[RankingQuery] = field(default_factory=list)
    unlabelled: list[str] = field(default_factory=list)
    skipped: int = 0
