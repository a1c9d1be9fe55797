"""The terms a first-stage query searches: each distinct token once, with its count, at most
:data:`MAX_QUERY_TERMS` of them.

Why: a search engine refuses a query of more than ``indices.query.bool.max_clause_count`` clauses
(1,024 on OpenSearch 2.19: ``server/src/main/java/org/opensearch/search/SearchModule.java``,
``INDICES_MAX_CLAUSE_COUNT_SETTING``; Lucene 9 counts every leaf of the whole query,
``IndexSearcher.getNumClausesCheckVisitor``), and a ``match`` makes one clause per token, repeats
included. A pasted log of a few kilobytes is enough. Lucene already merges repeated ``SHOULD`` clauses
into one boosted by their count (``BooleanQuery.rewrite``, "Deduplicate SHOULD clauses"), so one clause
per distinct token with its count as boost scores exactly as before. Beyond the bound the query keeps
the tokens it repeats most (ties: the earliest first), a rule that needs no collection statistics, so
the embedded engine and a remote one keep the same terms and rank alike.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

#: Distinct terms one first-stage query keeps: well under the engines' 1,024 clauses, leaving room for
#: the rest of a body (the ``ids`` filters, the BOW ``rank_feature`` clauses, a ``knn`` clause).
MAX_QUERY_TERMS = 256


def query_terms(tokens: Iterable[str], limit: int = MAX_QUERY_TERMS) -> list[tuple[str, int]]:
    """``(term, count)`` of each distinct token in first-occurrence order; past ``limit`` distinct terms,
    only the ``limit`` most frequent (equal counts: the earliest) are kept, still in that order."""
    if isinstance(tokens, str):
        raise TypeError("tokens is a string; pass a list of tokens")
    counts = Counter(tokens)  # insertion order: first occurrence
    if len(counts) <= limit:
        return list(counts.items())
    ranked = sorted(counts.items(), key=lambda item: -item[1])  # stable: equal counts keep their order
    kept = {term for term, _ in ranked[:limit]}
    return [(term, n) for term, n in counts.items() if term in kept]


def bounded_tokens(tokens: Iterable[str], limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The tokens of :func:`query_terms`, each repeated its count times (a query any engine reads)."""
    return [term for term, n in query_terms(tokens, limit) for _ in range(n)]
