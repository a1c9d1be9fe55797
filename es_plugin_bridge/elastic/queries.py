"""Request bodies of the three modes, built with the client's typed queries where they exist.

Queries come from ``elasticsearch.dsl.query`` (typed, validated by the client); retrievers have no
typed classes in elasticsearch-py 9.x, so they are dicts shaped after the specification's
``specification/_types/Retriever.ts`` (``LinearRetriever``, ``InnerRetriever``,
``TextSimilarityReranker``, ``RescorerRetriever``) and ``_global/search/_types/rescoring.ts``
(``Rescore``, ``RescoreQuery``). ``tests/elastic/test_es_requests.py`` checks every body against those shapes.

Exactness (docs/elasticsearch.md): every mode ends in the product's ``fused`` order —
``β_fs·minmax(first stage) + β_bow·bow + β_nn·neural`` — plus one constant per query.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from elasticsearch.dsl import query as Q

from es_plugin_bridge.core.features import feature_key
from es_plugin_bridge.elastic.mappings import BOW_FIELD, FIELDS, RERANK_FIELD, VECTOR_FIELD

Body = dict[str, Any]


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
    embedded engine does). ``only`` restricts to given ids: the ``ids`` filter makes the ``match``
    optional, so a candidate sharing no token still comes back, with score 0 (as in the embedded
    engine's ``score``). ``exclude`` drops ids (the query itself, in retrieval).
    """
    match = Q.Match(**{FIELDS[similarity]: {"query": " ".join(tokens)}})
    filters, must_not = id_clauses(only, exclude)
    return Q.Bool(should=[match], filter=filters, must_not=must_not).to_dict()


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
    has_vector = similarity == "manhattan" or any(float(x) != 0.0 for x in vector)
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


def native_retriever(
    *,
    similarity: str,
    tokens: Sequence[str],
    query_text: str,
    inference_id: str,
    beta_first_stage: float,
    window: int,
    only: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
    allow_failures: bool = False,
) -> Body:
    """Mode native: ``linear`` of the first stage (weight β_fs, ``minmax``) and the sidecar's reranker.

    The sidecar's endpoint answers the linear rest of the fused score (``/v1/rerank?score=linear``),
    which Elasticsearch turns into s + 1 (s ≥ 0); the sum is ``fused + 1 + const``. Both children see
    the same first-stage window (``rank_window_size`` of the reranker = the parent's).

    ``allow_failures`` (``allow_rerank_failures``, Elasticsearch 8.19/9.1+): when the sidecar fails,
    ``RankFeaturePhase`` keeps the window's first-stage scores instead of failing the search, so the
    ``linear`` sum is β_fs·minmax(s) + s: the first-stage order. Elasticsearch marks nothing in the
    answer (``TextSimilarityRankRetrieverBuilder``, ``RankFeaturePhaseRankCoordinatorContext``).
    """
    first = first_stage_query(similarity, tokens, only=only, exclude=exclude)
    reranker = {
        "text_similarity_reranker": {
            "retriever": {"standard": {"query": first}},
            "field": RERANK_FIELD,
            "inference_id": inference_id,
            "inference_text": query_text,
            "rank_window_size": window,
            **({"allow_rerank_failures": True} if allow_failures else {}),
        }
    }
    return {
        "linear": {
            "retrievers": [
                {
                    "retriever": {"standard": {"query": first}},
                    "weight": float(beta_first_stage),
                    "normalizer": "minmax",
                },
                {"retriever": reranker, "weight": 1.0, "normalizer": "none"},
            ],
            "rank_window_size": window,
        }
    }


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


def vectors_retriever(
    *,
    similarity: str,
    tokens: Sequence[str],
    rest: Body,
    beta_first_stage: float,
    window: int,
    only: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
) -> Body:
    """Mode vectors in one call (enterprise/trial: ``linear`` is not in the basic licence): a ``rescorer``
    over a one-child ``linear`` that min-maxes the first stage with weight β_fs, adding ``rest``."""
    first = first_stage_query(similarity, tokens, only=only, exclude=exclude)
    return {
        "rescorer": {
            "retriever": {
                "linear": {
                    "retrievers": [
                        {
                            "retriever": {"standard": {"query": first}},
                            "weight": float(beta_first_stage),
                            "normalizer": "minmax",
                        }
                    ],
                    "rank_window_size": window,
                }
            },
            "rescore": rescore(rest, window, 1.0),
        }
    }


def basic_query_weight(beta_first_stage: float, scores: Sequence[float]) -> float:
    """Mode vectors on any licence: β_fs / (max − min) of the window's first-stage scores, so that
    ``query_weight·s`` = β_fs·minmax(s) + a constant (0 when the window's scores are all equal,
    where the embedded min-max gives zeros)."""
    if not scores:
        return 0.0
    spread = max(scores) - min(scores)
    return float(beta_first_stage) / spread if spread > 0 else 0.0
