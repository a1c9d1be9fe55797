"""Every search answer of the product comes from all of its index's shards, or is refused in one line.

Two guards, both engines:

- each search asks for it: ``allow_partial_search_results=false`` (:data:`WHOLE`), a URL parameter of
  ``_search`` and a header-line field of ``_msearch`` (Elasticsearch's ``rest/action/search/
  RestSearchAction.java`` reads the parameter into ``SearchRequest.allowPartialSearchResults``;
  ``action/search/MultiSearchRequest.java``, ``readMultiLineFormat``, reads the header's; the
  specification has it in ``SearchRequest`` query parameters and ``MultisearchHeader``; OpenSearch's are
  the same files). Refused, a search with a shard lacking every copy fails with a 503.
- each answer is checked (:func:`check_whole`): a cluster setting (``search.default_allow_partial_results``)
  or a proxy may still answer 200 from part of the shards. OpenSearch's default answered a shard without
  any copy with ``_shards {total 2, successful 1, skipped 0, failed 0}``: the missing shard is in neither
  ``successful`` nor ``failed``, so ``failed > 0`` alone misses it. A skipped shard (the can-match phase
  found it cannot match) is fine and is counted in ``successful``
  (``AbstractSearchAsyncAction.skipShard``: ``successfulOps`` and ``skippedOps`` both incremented).
  The rule: whole iff ``failed == 0`` and ``successful == total``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from es_plugin_bridge.errors import UserError

#: The parameter (``_search``) and header field (``_msearch``) that refuses partial results.
WHOLE = {"allow_partial_search_results": "false"}


class PartialAnswer(UserError):
    """A search answered from only part of its shards (the message says how many are missing)."""


def missing_shards(answer: Any) -> str | None:
    """Why an answer is partial, in words (``1 of 2 shards did not answer (0 failed)``), or None when
    it is whole or says nothing of its shards."""
    answer = getattr(answer, "body", answer)  # elasticsearch-py's ObjectApiResponse is no Mapping
    shards = answer.get("_shards") if isinstance(answer, Mapping) else None
    if not isinstance(shards, Mapping):
        return None
    total, successful = int(shards.get("total") or 0), int(shards.get("successful") or 0)
    failed = int(shards.get("failed") or 0)
    if failed == 0 and successful >= total:
        return None
    missing, copyless = max(total - successful, failed), max(total - successful - failed, 0)
    return (f"{missing} of {total} shards did not answer ({failed} failed, {copyless} without any copy); "
            "partial results are refused")


def check_whole(answer: Any, index: str) -> None:
    """PartialAnswer naming the missing count when a ``_search`` answer lacks a shard."""
    why = missing_shards(answer)
    if why:
        raise PartialAnswer(f"searching {index}: {why}")


def check_whole_msearch(answer: Any, index: str) -> None:
    """:func:`check_whole` of each ``_msearch`` item that answered (a failed item is the caller's)."""
    answer = getattr(answer, "body", answer)
    items = answer.get("responses") if isinstance(answer, Mapping) else None
    for n, item in enumerate(items or ()):
        why = missing_shards(item) if isinstance(item, Mapping) and "error" not in item else None
        if why:
            raise PartialAnswer(f"searching {index}: search {n + 1} of {len(items)} of the _msearch: {why}")


def whole_msearch_lines(searches: list[Any]) -> list[Any]:
    """``_msearch`` header and body lines, each header refusing partial results (:data:`WHOLE`)."""
    return [{**line, "allow_partial_search_results": False} if n % 2 == 0 else line
            for n, line in enumerate(searches)]
