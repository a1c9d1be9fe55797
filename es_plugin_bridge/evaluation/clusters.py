"""Duplicate clusters: the transitive closure of known duplicate links (retrieval ``--relevant cluster``).

In AskUbuntu's pair files one canonical question is the first question of many pairs, so a query
usually has several known duplicates. Under the pair protocol only the pair's partner counts and
retrieving another known duplicate is a miss; users count any of them as a hit. A cluster is a
connected component of the duplicate links (label 1) of every given file: if a~b and b~c, then c is
relevant for a even when no file pairs them directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

from es_plugin_bridge.data.types import Pair


class DuplicateClusters:
    """Union-find over question ids; ``relevant(id)`` is the id's cluster without the id itself."""

    def __init__(self, links: Iterable[tuple[str, str]] = ()) -> None:
        self._parent: dict[str, str] = {}
        self._members: dict[str, frozenset[str]] | None = None
        for a, b in links:
            self.link(a, b)

    @classmethod
    def from_pairs(cls, *pair_lists: Iterable[Pair]) -> DuplicateClusters:
        """Clusters of the duplicate pairs (label 1) of every list given; non-duplicates are ignored."""
        return cls((p.q1.id, p.q2.id) for p in chain.from_iterable(pair_lists) if p.label == 1)

    def _root(self, qid: str) -> str:
        self._parent.setdefault(qid, qid)
        while (parent := self._parent[qid]) != qid:  # path halving keeps the trees flat
            grand = self._parent[parent]
            self._parent[qid] = grand
            qid = grand
        return qid

    def link(self, a: str, b: str) -> None:
        """Record that ``a`` and ``b`` are duplicates (their clusters merge)."""
        root_a, root_b = self._root(a), self._root(b)
        if root_a != root_b:
            self._parent[max(root_a, root_b)] = min(root_a, root_b)
        self._members = None

    def _clusters(self) -> dict[str, frozenset[str]]:
        if self._members is None:
            groups: dict[str, set[str]] = {}
            for qid in self._parent:
                groups.setdefault(self._root(qid), set()).add(qid)
            self._members = {root: frozenset(ids) for root, ids in groups.items()}
        return self._members

    def members(self, qid: str) -> frozenset[str]:
        """Every id of ``qid``'s cluster, ``qid`` included (just ``{qid}`` for an unlinked id)."""
        if qid not in self._parent:
            return frozenset({qid})
        return self._clusters()[self._root(qid)]

    def relevant(self, qid: str) -> frozenset[str]:
        """What counts as relevant for ``qid`` as a query: its cluster, the query itself excluded."""
        return self.members(qid) - {qid}

    def sizes(self) -> list[int]:
        """Size of every cluster (two or more linked ids), largest first."""
        return sorted((len(ids) for ids in self._clusters().values()), reverse=True)
