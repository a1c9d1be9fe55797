"""Carve train / dev / test files out of one pairs file, without a question crossing splits.

Every question (q1 or q2 of any pair) belongs to its component of the duplicate graph (a question
and all its duplicates, transitively; a question with no duplicate is a component of its own), and
whole components go to one split, so a test question is never seen in training, neither itself nor
through a duplicate. A duplicate pair always lies inside one component; a non-duplicate pair is kept
only when both its questions land in the same split, and is dropped otherwise (``PairSplit.dropped``).
Assignment is a seeded shuffle of the components: the same seed gives the same files.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from es_plugin_bridge.data.types import Pair
from es_plugin_bridge.errors import UserError

TRAIN = "train"


@dataclass(frozen=True)
class PairSplit:
    """The pairs of each split (held-out names in the order asked, then ``train``), and the pairs dropped
    because their two questions fell in different splits."""

    parts: dict[str, list[Pair]]
    dropped: list[Pair]


class _Components:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        # The smaller id is the root, so a component's name does not depend on the order of the pairs.
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _question_splits(pairs: Sequence[Pair], sizes: dict[str, int], seed: int) -> dict[str, str]:
    """Split name of every question id: components shuffled, held-out splits filled in turn."""
    comps = _Components()
    for p in pairs:
        comps.find(p.q1.id)
        comps.find(p.q2.id)
        if p.label > 0:
            comps.union(p.q1.id, p.q2.id)
    dup_count: dict[str, int] = {}
    for p in pairs:
        if p.label > 0:
            root = comps.find(p.q1.id)
            dup_count[root] = dup_count.get(root, 0) + 1
    total = sum(dup_count.values())
    if sum(sizes.values()) >= total:
        raise UserError(f"asked for {sum(sizes.values())} held-out duplicate pairs but the file has {total}")
    roots = sorted({comps.find(q) for q in comps.parent})
    random.Random(seed).shuffle(roots)
    assign: dict[str, str] = {}
    order = list(sizes.items())
    current, filled = 0, 0
    for root in roots:
        if current < len(order) and filled >= order[current][1]:
            current, filled = current + 1, 0
        assign[root] = order[current][0] if current < len(order) else TRAIN
        filled += dup_count.get(root, 0)
    return {q: assign[comps.find(q)] for q in comps.parent}


def split_by_question(pairs: Sequence[Pair], sizes: dict[str, int], seed: int = 1) -> PairSplit:
    """``sizes`` = duplicate pairs wanted per held-out split (e.g. {"dev": 2000, "test": 2000});
    everything else goes to "train". Each held-out split gets at least its size in duplicate pairs.
    A pair is kept in a split only when both its questions are in it; the others are ``dropped``."""
    where = _question_splits(pairs, sizes, seed)
    parts: dict[str, list[Pair]] = {name: [] for name in (*sizes, TRAIN)}
    dropped: list[Pair] = []
    for p in pairs:
        s1, s2 = where[p.q1.id], where[p.q2.id]
        if s1 == s2:
            parts[s1].append(p)
        else:
            dropped.append(p)
    return PairSplit(parts, dropped)


def write_pairs(pairs: Sequence[Pair], path: Path) -> None:
    """Write ``label<TAB>q1<TAB>q2`` lines (title and body joined back as they were read)."""
    label = {1: "duplicate", 0: "non-duplicate"}
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(f"{label[1 if p.label > 0 else 0]}\t{p.q1.title}{p.q1.body}\t{p.q2.title}{p.q2.body}\n")
    tmp.replace(path)
