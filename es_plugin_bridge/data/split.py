"""Carve train / dev / test files out of one pairs file, without leaking duplicates across splits.

Duplicate pairs are grouped by connected component of the duplicate graph (a question and all its
duplicates, transitively), and whole components go to one split, so a test query never has a
duplicate seen in training. Non-duplicate pairs follow the component of their first question.
Assignment is a seeded shuffle of the components: the same seed gives the same files.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from es_plugin_bridge.data.types import Pair
from es_plugin_bridge.errors import UserError


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
        self.parent[self.find(a)] = self.find(b)


def split_pairs(pairs: Sequence[Pair], sizes: dict[str, int], seed: int = 1) -> dict[str, list[Pair]]:
    """``sizes`` = duplicate pairs wanted per held-out split (e.g. {"dev": 2000, "test": 2000});
    everything else goes to "train". Each held-out split gets at least its size in duplicate pairs."""
    comps = _Components()
    for p in pairs:
        comps.find(p.q1.id)
        if p.label > 0:
            comps.union(p.q1.id, p.q2.id)
    roots = sorted({comps.find(p.q1.id) for p in pairs})
    random.Random(seed).shuffle(roots)
    dup_count: dict[str, int] = {}
    for p in pairs:
        if p.label > 0:
            root = comps.find(p.q1.id)
            dup_count[root] = dup_count.get(root, 0) + 1
    total = sum(dup_count.values())
    if sum(sizes.values()) >= total:
        raise UserError(f"asked for {sum(sizes.values())} held-out duplicate pairs but the file has {total}")
    assign: dict[str, str] = {}
    order = list(sizes.items())
    current, filled = 0, 0
    for root in roots:
        if current < len(order) and filled >= order[current][1]:
            current, filled = current + 1, 0
        name = order[current][0] if current < len(order) else "train"
        assign[root] = name
        filled += dup_count.get(root, 0)
    out: dict[str, list[Pair]] = {name: [] for name in (*sizes, "train")}
    for p in pairs:
        out[assign[comps.find(p.q1.id)]].append(p)
    return out


def write_pairs(pairs: Sequence[Pair], path: Path) -> None:
    """Write ``label<TAB>q1<TAB>q2`` lines (title and body joined back as they were read)."""
    label = {1: "duplicate", 0: "non-duplicate"}
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(f"{label[1 if p.label > 0 else 0]}\t{p.q1.title}{p.q1.body}\t{p.q2.title}{p.q2.body}\n")
    tmp.replace(path)
