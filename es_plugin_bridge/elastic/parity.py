"""Engine parity: does a mode, run by the engine, rank exactly as the in-process ranker it must equal?

Each mode's registry entry names that ranker (``ModeSpec.ranker``: ``fused`` for bridge and vectors,
``hybrid``, ``hybrid-rrf``, ``learned-hybrid``, ``model`` for OpenSearch's rerank). :func:`in_process_ranker`
builds it entirely in this process (the embedded engine's Lucene formulas, the model run here, no
override), which is what the node tests compare every mode with and what ``es evaluate`` replays each
of the mode's searches on afterwards (:func:`parity`): the same query, the same candidates or ``k`` and
exclusions, and the ranked list compared id by id, in order — every candidate for rerank, the top ``k``
for retrieval. A query whose lists differ is named, with how far apart the in-process scores of the
documents the engine swapped lie (``swap_gap``: 0 for a tie broken the other way, about 1e-5 for a
float32 near-tie; a bug is neither); the review page shows the count as a badge.

Exact order is the rule, though the node tests allow a near-tie within Lucene's ``rank_features``
truncation to swap (``tests/es_commands.py``): a reviewer asks whether the engine gives the ranking that
was evaluated, and a swapped near-tie is a difference a reviewer may want to see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from es_plugin_bridge.data.types import Question, RankingQuery
from es_plugin_bridge.measures import rank_order
from es_plugin_bridge.rankers import Ranker, RankerContext, build

#: The in-process rankers whose window is the mode's ``--window`` (learned-hybrid's is its fit's, in the
#: mode as in process; ``model`` scores every candidate it is given).
WINDOWED = ("fused", "hybrid", "hybrid-rrf")
#: Differing queries whose two lists the result keeps (all of them are named).
EXAMPLES = 5


@dataclass(frozen=True)
class Asked:
    """One search a mode answered: a rerank of a :class:`RankingQuery`'s candidates, or a search of the
    collection for the top ``k`` (``exclude``: ids left out)."""

    query: RankingQuery | Question
    k: int = 0
    exclude: set[str] | None = None


def in_process_ranker(mode: str, context: RankerContext, window: int | None = None) -> Ranker:
    """The ranker ``mode`` must equal, over ``context``'s collection, computed here: no engine but the
    embedded one, no override (``es evaluate`` overrides it with the mode). A context that searched an
    engine gives a fresh shared state (its first stages were the engine's); an in-process one keeps its
    own, so rankers built from it share their index and vectors. ``window``: the mode's (given to the
    rankers of :data:`WINDOWED`)."""
    from es_plugin_bridge.elastic.modes import mode_spec

    name = mode_spec(mode).ranker
    params = {key: dict(value) for key, value in context.params.items()}
    if window is not None and name in WINDOWED:
        params[name] = {**params.get(name, {}), "window": window}
    shared = context.shared if context.engine is None else {}
    return build(name, replace(context, params=params, shared=shared, engine=None, overrides={}))


def ranked(ranker: Ranker, asked: Asked) -> list[tuple[str, float]]:
    """``ranker``'s ``(id, score)`` list for one search, in the order the evaluator records (ties keep the
    data's order)."""
    if isinstance(asked.query, RankingQuery):
        scores = list(ranker.rerank(asked.query))
        return [(asked.query.candidates[i].id, float(scores[i])) for i in rank_order(scores)]
    return ranker.search(asked.query, asked.k, exclude=asked.exclude)


def swap_gap(engine: Sequence[str], scored: Sequence[tuple[str, float]]) -> float | None:
    """The largest in-process score difference between two documents the engine ranks the other way
    round (0.0: none); None where the engine's list holds a document the in-process list does not."""
    score = dict(scored)
    if any(doc not in score for doc in engine):
        return None
    values = [score[doc] for doc in engine]
    return max((later - earlier for i, earlier in enumerate(values) for later in values[i + 1:]
                if later > earlier), default=0.0)


def recorded_ids(record: Mapping[str, Any]) -> list[str]:
    """The list a per-query record holds: rerank's ``ranking``, retrieval's ``top_ids``."""
    return [str(i) for i in record.get("ranking", record.get("top_ids", []))]


def parity(mode: str, ranker: str, records: Sequence[Mapping[str, Any]], asked: Sequence[Asked],
           reference: Ranker) -> dict[str, Any]:
    """The mode's lists (its per-query ``records``, in the order of ``asked``) against ``reference``'s for
    the same searches: how many queries agree, each differing query's id, and the first
    :data:`EXAMPLES` differing queries' two lists; ``max_swap_gap``: the largest :func:`swap_gap` of
    the differing queries (None where one holds another document); ``badge``: :func:`badge`'s line."""
    if len(records) != len(asked):
        return unchecked(mode, ranker, len(records), f"{len(asked)} searches for {len(records)} queries: "
                                                     "not compared")
    differ, examples, gaps = [], [], []
    for record, one in zip(records, asked, strict=True):
        engine, scored = recorded_ids(record), ranked(reference, one)
        here = [doc for doc, _ in scored]
        if engine != here:
            differ.append(str(record["query_id"]))
            gaps.append(swap_gap(engine, scored))
            if len(examples) < EXAMPLES:
                examples.append({"query_id": str(record["query_id"]), "engine": engine, "in_process": here,
                                 "swap_gap": gaps[-1]})
    known = [gap for gap in gaps if gap is not None]
    result = {"mode": mode, "ranker": ranker, "queries": len(records), "equal": len(records) - len(differ),
              "differ": differ, "examples": examples,
              "max_swap_gap": max(known) if known and len(known) == len(gaps) else None,
              "rule": "each query's ranked list, id by id in order (rerank: every candidate; retrieval: the "
                      "top k), against the in-process ranker run here on the embedded engine"}
    return {**result, "badge": badge(result)}


def unchecked(mode: str, ranker: str, queries: int, why: str) -> dict[str, Any]:
    """A parity result that compared nothing, saying why (its badge says so too)."""
    result = {"mode": mode, "ranker": ranker, "queries": queries, "equal": None, "differ": [], "examples": [],
              "error": why}
    return {**result, "badge": badge(result)}


def badge(result: Mapping[str, Any]) -> str:
    """The summary's one line: ``parity 20/20 queries`` or ``parity 18/20 queries; differs on q3, q9``."""
    if result.get("equal") is None:
        return f"parity not checked: {result.get('error', 'no comparison')}"
    text = f"parity {result['equal']}/{result['queries']} queries"
    if result["differ"]:
        shown = ", ".join(result["differ"][:3])
        more = f" and {len(result['differ']) - 3} more" if len(result["differ"]) > 3 else ""
        text += f"; differs on {shown}{more}"
        gap = result.get("max_swap_gap")
        if gap == 0.0:
            text += " (only documents tied in process, put in another order)"
        elif gap is not None:
            text += f" (swapped scores at most {gap:.1e} apart in process)"
    return text
