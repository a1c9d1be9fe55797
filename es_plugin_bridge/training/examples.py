"""Training examples from any readers' datasets: positives, labelled pairs, negatives' pool.

Every source is reduced to the same few things: known duplicates (from duplicate pairs and from
relevant reranking candidates), labelled non-duplicates (non-duplicate pairs, irrelevant
candidates), and the pool of all questions to draw random negatives from. A random negative is
never a known duplicate of its query.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from es_plugin_bridge.data.types import Dataset, Question
from es_plugin_bridge.errors import UserError


@dataclass
class TrainingSet:
    """What the trainer draws batches from."""

    questions: dict[str, Question] = field(default_factory=dict)
    positives: list[tuple[str, str]] = field(default_factory=list)
    labelled: list[tuple[str, str, int]] = field(default_factory=list)
    hard_negatives: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    duplicates: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    @property
    def pool(self) -> list[str]:
        return list(self.questions)

    def negatives(self, query_id: str, k: int, rng: random.Random, pool: Sequence[str]) -> list[str]:
        """``k`` negatives for a query: its labelled non-duplicates first (shuffled), then random ones.

        Known duplicates of the query and the query itself are never returned.
        """
        banned = self.duplicates.get(query_id, set()) | {query_id}
        hard = [n for n in self.hard_negatives.get(query_id, []) if n not in banned]
        rng.shuffle(hard)
        chosen = hard[:k]
        taken = set(chosen)
        attempts = 0
        while len(chosen) < k and attempts < 20 * k:
            attempts += 1
            cand = pool[rng.randrange(len(pool))]
            if cand not in banned and cand not in taken:
                chosen.append(cand)
                taken.add(cand)
        return chosen


def build_training_set(datasets: Sequence[Dataset]) -> TrainingSet:
    """Merge datasets; UserError when they hold no duplicate (positive) pair at all."""
    out = TrainingSet()
    for ds in datasets:
        out.questions.update(ds.questions)
        for pair in ds.pairs:
            out.questions.setdefault(pair.q1.id, pair.q1)
            out.questions.setdefault(pair.q2.id, pair.q2)
            _add(out, pair.q1.id, pair.q2.id, 1 if pair.label > 0 else 0)
        for rq in ds.queries:
            out.questions.setdefault(rq.query.id, rq.query)
            for cand, label in zip(rq.candidates, rq.labels, strict=True):
                out.questions.setdefault(cand.id, cand)
                _add(out, rq.query.id, cand.id, 1 if label > 0 else 0)
    if not out.positives:
        names = ", ".join(ds.name for ds in datasets) or "(none)"
        raise UserError(f"the training data ({names}) holds no duplicate pair: nothing to learn from")
    return out


def _add(out: TrainingSet, a: str, b: str, label: int) -> None:
    if a == b:
        return
    out.labelled.append((a, b, label))
    if label:
        out.positives.append((a, b))
        out.duplicates[a].add(b)
        out.duplicates[b].add(a)
    else:
        out.hard_negatives[a].append(b)
