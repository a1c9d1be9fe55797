"""Every distinct question a dataset holds, whichever of its fields holds it.

A corpus for unsupervised training (word2vec, an encoder's in-domain pre-training) is a dataset's text,
not its labels: the questions of its pairs, of its reranking queries and their candidates, and its
stand-alone questions, each once.
"""

from __future__ import annotations

from collections.abc import Iterator

from es_plugin_bridge.data.types import Dataset, Question


def distinct_questions(ds: Dataset) -> Iterator[Question]:
    """Each question of ``ds`` once (by id), in the order the dataset holds them."""
    seen: set[str] = set()

    def fresh(q: Question) -> bool:
        if q.id in seen:
            return False
        seen.add(q.id)
        return True

    for q in ds.questions.values():
        if fresh(q):
            yield q
    for p in ds.pairs:
        for q in (p.q1, p.q2):
            if fresh(q):
                yield q
    for rq in ds.queries:
        for q in (rq.query, *rq.candidates):
            if fresh(q):
                yield q


__all__ = ["distinct_questions"]
