"""Dev queries split in two: one part picks the epoch, the other fits β and the calibration.

Fitted on the queries that chose the epoch, β sees the chosen epoch's neural score at its most
flattering (it won on exactly those queries) and drives the first stage's weight to zero. The split is
by duplicate cluster: a query, its relevant candidates and every query they are relevant to stay on one
side, so a fit query never shares a duplicate with a query that chose the epoch (AskUbuntu's dev pairs
form clusters; SemEval's queries each have their own thread and are their own cluster).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from es_plugin_bridge.data.types import RankingQuery

#: The two rules ``train --fusion-fit`` offers: ``held-out`` (the default) and today's ``epoch-data``.
HELD_OUT = "held-out"
EPOCH_DATA = "epoch-data"
FUSION_FITS = (HELD_OUT, EPOCH_DATA)
#: Fewer queries with a duplicate than this on either side and the dev data is not split (logged).
MIN_PART = 5


@dataclass(frozen=True)
class DevSplit:
    """``select`` picks the epoch; ``fit`` fits β and the calibration; ``rule`` says which rule made them
    (``held-out``, ``epoch-data``, or why a held-out split fell back to the same queries)."""

    select: list[RankingQuery]
    fit: list[RankingQuery]
    rule: str

    @property
    def disjoint(self) -> bool:
        return self.rule == HELD_OUT

    def describe(self) -> dict[str, object]:
        """What the saved metadata records: the rule, each part's size and query ids."""
        return {
            "rule": self.rule,
            "select_queries": len(self.select),
            "fit_queries": len(self.fit),
            "fit_query_ids": [rq.query.id for rq in self.fit] if self.disjoint else "same as select",
        }


def clusters(queries: Sequence[RankingQuery]) -> list[int]:
    """Each query's duplicate cluster: connected components of query ↔ relevant-candidate links."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for rq in queries:
        root = find(rq.query.id)
        for cand, label in zip(rq.candidates, rq.labels, strict=True):
            if label > 0:
                parent[find(cand.id)] = root
    roots: dict[str, int] = {}
    return [roots.setdefault(find(rq.query.id), len(roots)) for rq in queries]


def split_dev(queries: Sequence[RankingQuery], rule: str, share: float, seed: int) -> DevSplit:
    """``share`` of the duplicate clusters (at random, ``seed``) fit β; the rest pick the epoch.

    ``epoch-data`` keeps today's rule (both on every query). A held-out split that would leave either
    side with fewer than ``MIN_PART`` queries that have a duplicate falls back to ``epoch-data``, and
    ``rule`` says so: a β fitted on two or three queries is noise.
    """
    if rule not in FUSION_FITS:
        raise ValueError(f"unknown fusion fit rule {rule!r}; expected one of {', '.join(FUSION_FITS)}")
    everything = list(queries)
    if rule == EPOCH_DATA:
        return DevSplit(everything, everything, EPOCH_DATA)
    cluster_of = clusters(everything)
    sizes = Counter(cluster_of)
    order = sorted(sizes)
    random.Random(seed).shuffle(order)
    fit_clusters: set[int] = set()
    taken = 0
    for c in order:
        if taken >= share * len(everything):
            break
        fit_clusters.add(c)
        taken += sizes[c]
    fit = [rq for rq, c in zip(everything, cluster_of, strict=True) if c in fit_clusters]
    select = [rq for rq, c in zip(everything, cluster_of, strict=True) if c not in fit_clusters]
    relevant = [sum(any(label > 0 for label in rq.labels) for rq in part) for part in (select, fit)]
    if min(relevant) < MIN_PART:
        why = (f"{EPOCH_DATA} (dev too small to hold out: {relevant[0]} and {relevant[1]} queries with a "
               f"duplicate, fewer than {MIN_PART} on a side)")
        return DevSplit(everything, everything, why)
    return DevSplit(select, fit, HELD_OUT)
