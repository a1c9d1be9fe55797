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


#: Reranking queries a reader tagged with one of these splits are held out, never trained on.
HELD_OUT = frozenset({"dev", "test"})


def build_training_set(datasets: Sequence[Dataset]) -> TrainingSet:
    """Merge datasets; UserError when they hold no duplicate (positive) pair at all.

    Queries tagged ``dev``/``test`` (the AskUbuntu release's dev.txt/test.txt) are skipped. Two
    different questions under one id (e.g. two Stack Exchange dumps both numbering from 1) are an
    error rather than one silently replacing the other.
    """
    out = TrainingSet()
    for ds in datasets:
        for q in ds.questions.values():
            _keep(out, q, ds.name)
        for pair in ds.pairs:
            _keep(out, pair.q1, ds.name)
            _keep(out, pair.q2, ds.name)
            _add(out, pair.q1.id, pair.q2.id, 1 if pair.label > 0 else 0)
        for rq in ds.queries:
            if rq.split in HELD_OUT:
                continue
            _keep(out, rq.query, ds.name)
            for cand, label in zip(rq.candidates, rq.labels, strict=True):
                _keep(out, cand, ds.name)
                _add(out, rq.query.id, cand.id, 1 if label > 0 else 0)
    if not out.positives:
        names = ", ".join(ds.name for ds in datasets) or "(none)"
        raise UserError(f"the training data ({names}) holds no duplicate pair: nothing to learn from")
    return out


def _keep(out: TrainingSet, q: Question, source: str) -> None:
    known = out.questions.setdefault(q.id, q)
    if known is not q and (known.title, known.body) != (q.title, q.body):
        raise UserError(f"{source}: question id {q.id!r} already names a different question in the "
                        "training data; give each dataset distinct ids")


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
