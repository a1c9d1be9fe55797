"""The clauses the modes share (the first stage, the BOW and neural parts of fused, the rescore, the
vectors' exact and HNSW searches, the first stage's name), built with the client's typed queries where
they exist. A body only one mode sends lives in that mode's module (``modes/native.py``
``native_retriever``, ``modes/vectors.py`` ``vectors_retriever``, ``modes/hybrid.py`` the two windows,
the union and ``rrf_retriever``).

Queries come from ``elasticsearch.dsl.query`` (typed, validated by the client); retrievers have no
typed classes in elasticsearch-py 9.x, so they are dicts shaped after the specification's
``specification/_types/Retriever.ts`` (``LinearRetriever``, ``InnerRetriever``,
``TextSimilarityReranker``, ``RescorerRetriever``) and ``_global/search/_types/rescoring.ts``
(``Rescore``, ``RescoreQuery``). ``tests/elastic/test_es_requests.py`` checks every body against those shapes.

Exactness (docs/elasticsearch.md): every mode ends in the product's ``fused`` order —
``β_fs·minmax(first stage) + β_bow·bow + β_nn·neural`` — plus one constant per query.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from es_plugin_bridge.core.direction import has_direction
from es_plugin_bridge.core.features import feature_key
from es_plugin_bridge.elastic.mappings import BOW_FIELD, FIELDS, VECTOR_FIELD
from es_plugin_bridge.engines.query_terms import MAX_QUERY_TERMS, query_terms
from es_plugin_bridge.errors import UserError

Body = dict[str, Any]


class _Dsl:
    """``elasticsearch.dsl.query``, imported on the first query built: the modes' modules import this
    one, and listing the modes (``--help``) must not load the Elasticsearch client."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("elasticsearch.dsl.query"), name)


Q: Any = _Dsl()


def first_stage_query(
    similarity: str,
    tokens: Sequence[str],
    *,
    only: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
) -> Body:
    """The first stage: one ``match`` on the similarity's field, as the embedded engine scores it.

    ``tokens`` are already preprocessed; the field's whitespace analyzer keeps them as they are, and
    ``match`` makes a BooleanQuery of SHOULD term clauses (repeated tokens merged with a boost, as the
    embedded engine does). A query of more than ``MAX_QUERY_TERMS`` tokens would hit the engine's clause
    limit (``engines/query_terms.py``): it becomes one ``match`` per distinct term kept, boosted by its
    count — the clauses Lucene's rewrite would have made of the long ``match``, so the scores are the
    same. ``only`` restricts to given ids: the ``ids`` filter makes the ``match``
    optional, so a candidate sharing no token still comes back, with score 0 (as in the embedded
    engine's ``score``). ``exclude`` drops ids (the query itself, in retrieval).
    """
    field = FIELDS[similarity]
    scoring: Any
    if len(tokens) <= MAX_QUERY_TERMS:
        scoring = Q.Match(**{field: {"query": " ".join(tokens)}})
    else:
        scoring = Q.Bool(should=[
            Q.Match(**{field: {"query": term, **({"boost": float(n)} if n > 1 else {})}})
            for term, n in query_terms(tokens)
        ])
    filters, must_not = id_clauses(only, exclude)
    return Q.Bool(should=[scoring], filter=filters, must_not=must_not).to_dict()


def id_clauses(only: Collection[str] | None, exclude: Collection[str] | None) -> tuple[list[Any], list[Any]]:
    """The ``filter`` and ``must_not`` clauses that keep only ``only`` (in their order, once each) and drop
    ``exclude``: ``ids`` in ``filter`` keeps the given documents and in ``must_not`` drops them
    (``IdsQueryBuilder``, ``BoolQueryBuilder``)."""
    filters = [Q.Ids(values=list(dict.fromkeys(only)))] if only is not None else []
    must_not = [Q.Ids(values=sorted(exclude))] if exclude else []
    return filters, must_not


def bow_query(terms: Mapping[str, float]) -> Body:
    """Σ u_t·v_d[t] over the query's BOW terms: one linear ``rank_feature`` clause per term.

    ``filter: match_all`` keeps documents that share no term (their BOW cosine is 0, not absent).
    """
    clauses = [
        Q.RankFeature(field=f"{BOW_FIELD}.{feature_key(t)}", linear={}, boost=abs(float(w)))
        for t, w in sorted(terms.items())
        if abs(float(w)) > 0
    ]
    return Q.Bool(filter=[Q.MatchAll()], should=clauses).to_dict()


def neural_script(similarity: str) -> str:
    """Painless for the neural part; ≥ 0 as Elasticsearch requires (cosine shifted by +1).

    A document stored without a vector (a zero vector: Elasticsearch refuses to index it under
    ``cosine``) scores cosine 0, as the product's own cosine of a zero vector does.
    """
    if similarity == "manhattan":
        return f"Math.exp(-l1norm(params.q, '{VECTOR_FIELD}'))"
    return (f"(doc['{VECTOR_FIELD}'].size() == 0 ? 1.0 : "
            f"cosineSimilarity(params.q, '{VECTOR_FIELD}') + 1.0)")


def neural_range(similarity: str) -> tuple[float, float]:
    """Bounds of :func:`neural_script`: exp(−L1) in (0, 1], cosine + 1 in [0, 2]."""
    return (0.0, 1.0) if similarity == "manhattan" else (0.0, 2.0)


def rest_shift(beta: Mapping[str, float], similarity: str) -> float:
    """The constant that keeps the rest of fused ≥ 0 whatever the sign of β_bow and β_nn.

    ``script_score`` refuses negative scores. The BOW part (Σ u·v of non-negative features) is in
    [0, 1] and the neural part in :func:`neural_range`, so ``β·x`` is ≥ ``min(β·low, β·high)``; adding
    the opposite of those lows is one constant per query: the order is unchanged.
    """
    low, high = neural_range(similarity)
    bow, neural = float(beta["bow"]), float(beta["neural"])
    return -min(0.0, bow) - min(0.0, neural * low, neural * high)


def rest_of_fused(
    vector: Sequence[float], terms: Mapping[str, float], beta: Mapping[str, float], similarity: str
) -> Body:
    """``script_score`` = β_bow·cos_bow + β_nn·(neural shifted ≥ 0) + shift: the fused score less its
    first stage, plus the constant :func:`rest_shift` (non-zero only for a negative β).

    A query whose vector is zero (a text with no tokens, cosine models) has cosine 0 with every
    document in the product; ``cosineSimilarity`` would be NaN and fail the script, so its neural
    term is the constant β_nn·1 instead.
    """
    has_vector = similarity == "manhattan" or has_direction(vector)
    neural = neural_script(similarity) if has_vector else "1.0"
    params: dict[str, Any] = {"b_bow": float(beta["bow"]), "b_nn": float(beta["neural"])}
    if has_vector:
        params["q"] = [float(x) for x in vector]
    source = f"params.b_bow * _score + params.b_nn * {neural}"
    shift = rest_shift(beta, similarity)
    if shift:
        source += " + params.shift"
        params["shift"] = shift
    return Q.ScriptScore(query=bow_query(terms), script={"source": source, "params": params}).to_dict()


def rescore(rest: Body, window: int, query_weight: float) -> Body:
    """One ``query`` rescore adding ``rest`` to the first pass's score times ``query_weight``."""
    return {
        "window_size": window,
        "query": {
            "rescore_query": rest,
            "query_weight": float(query_weight),
            "rescore_query_weight": 1.0,
            "score_mode": "total",
        },
    }


# -- the hybrid modes' requests (elastic/modes/hybrid.py) -------------------------------------------------

#: ``_name`` of the first stage in step 2; its score comes back in ``matched_queries``.
FIRST_STAGE_NAME = "esrerank_first_stage"
#: Elasticsearch's cap on ``num_candidates`` (and so on ``k``) of a ``knn`` search.
MAX_NUM_CANDIDATES = 10_000


def num_candidates(window: int) -> int:
    """HNSW candidates per shard: 10× the window (capped at Elasticsearch's 10,000), ≥ ``k``."""
    if window > MAX_NUM_CANDIDATES:
        raise UserError(f"--knn hnsw takes a window of at most {MAX_NUM_CANDIDATES}, got {window}")
    return min(MAX_NUM_CANDIDATES, 10 * window)


def exact_dense_query(
    vector: Sequence[float],
    similarity: str,
    *,
    only: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
) -> Body:
    """The exact nearest neighbours: ``script_score`` of the neural similarity (cosine + 1, or
    exp(−L1)) over every document that has a vector, as the in-process ``dense`` ranker computes it."""
    filters, must_not = id_clauses(only, exclude)
    return Q.ScriptScore(
        query=Q.Bool(filter=[Q.Exists(field=VECTOR_FIELD), *filters], must_not=must_not),
        script={"source": neural_script(similarity), "params": {"q": [float(x) for x in vector]}},
    ).to_dict()


def knn_search(
    vector: Sequence[float],
    window: int,
    *,
    only: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
    vector_builder: Body | None = None,
) -> Body:
    """Approximate (HNSW) nearest neighbours: a ``knn`` section (``KnnSearch``, or a ``KnnRetriever``).

    ``vector_builder``: a ``query_vector_builder`` (``QueryVectorBuilder``) instead of ``vector``, so
    Elasticsearch embeds the query itself through the index's ``text_embedding`` endpoint."""
    body: Body = {"field": VECTOR_FIELD}
    if vector_builder is not None:
        body["query_vector_builder"] = vector_builder
    else:
        body["query_vector"] = [float(x) for x in vector]
    body.update({"k": window, "num_candidates": num_candidates(window)})
    filters, must_not = id_clauses(only, exclude)
    if filters or must_not:
        body["filter"] = Q.Bool(filter=filters, must_not=must_not).to_dict()
    return body


def named(query: Body, name: str = FIRST_STAGE_NAME) -> Body:
    """``query`` (a :func:`first_stage_query`) with ``_name`` on its scoring clause — the one ``match``,
    or the ``bool`` of a long query's ``match`` clauses: the first stage's score, nothing else."""
    out = copy.deepcopy(query)
    should = out.get("bool", {}).get("should") or []
    if len(should) != 1:
        raise AssertionError(f"the first stage has {len(should)} match clauses, expected one")
    (clause,) = should
    if set(clause) == {"match"} and len(clause["match"]) == 1:
        next(iter(clause["match"].values()))["_name"] = name
    elif set(clause) == {"bool"}:
        clause["bool"]["_name"] = name
    else:
        raise AssertionError(f"not a first-stage query: {query}")
    return out


