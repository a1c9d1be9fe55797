"""Elasticsearch's ``linear`` retriever for the learned hybrid: the request body, when a cluster can run it,
and a pure-Python re-statement of the scores it computes.

Why: the learned hybrid (``core/hybrid_fusion.py``) fuses a lexical first stage and a vector clause with
fitted weights. OpenSearch computes it with the ``hybrid`` query and a ``normalization-processor``;
Elasticsearch's equivalent is the ``linear`` retriever, which normalises differently in a few edge cases.
:func:`linear_scores` computes what Elasticsearch does with the same inputs, so the rest of the code can set
it beside ``hybrid_fusion.fuse_lists`` and know exactly where the two engines part.

The rules, restated from elastic/elasticsearch (``x-pack/plugin/rank-rrf/src/main/java/org/elasticsearch/
xpack/rank/linear/``: ``LinearRetrieverBuilder.java``, ``LinearRetrieverComponent.java``,
``ScoreNormalizer.java``, ``MinMaxScoreNormalizer.java``, ``L2ScoreNormalizer.java``,
``IdentityScoreNormalizer.java``; ``server/.../search/retriever/CompoundRetrieverBuilder.java``;
``server/.../search/rank/RankDoc.java``), all in float32 as Java computes them:

* body: ``retrievers`` (each ``{retriever, weight, normalizer}``), ``rank_window_size`` (default
  ``RankBuilder.DEFAULT_RANK_WINDOW_SIZE`` = 10), and the multi-field ``query``/``fields``/``normalizer``
  (9.1+; a top-level ``normalizer`` as the default of the sub-retrievers' only from 9.2, refused next to
  ``retrievers`` before). ``weight`` defaults to 1 and must be ≥ 0; ``normalizer`` defaults to ``none``;
  the names are ``none``, ``minmax``, ``l2_norm`` (``ScoreNormalizer.valueOf``, case-insensitive);
* each child runs as its own search with ``size = rank_window_size``, sorted by ``_score`` then
  ``_shard_doc`` (``CompoundRetrieverBuilder.createSearchSourceBuilder``): a ``standard`` child returns its
  top ``rank_window_size``; a ``knn`` child keeps its own ``k`` (nothing sets it from the window), so it
  gives ``min(k, rank_window_size)`` hits — :func:`linear_retriever` sets ``k`` = the window;
* each child's own hits are normalised on their own:
  ``minmax``: ``(s − min) / (max − min)``; when ``|max − min| < 1e-6`` (``EPSILON``; one hit, or all equal)
  every hit gets 1.0 (fix elastic/elasticsearch#128689, June 2025, in 8.19.0 / 9.1.0 and backported to
  8.18 and 9.0 patches; before it, the raw ``min``); no floor: the minimum gets exactly 0. ``max`` starts at
  ``Float.MIN_VALUE`` (1.4e-45), so all-zero scores count as equal (1.0). NaN scores (none in practice) are
  left NaN; all-NaN is returned as is;
  ``l2_norm``: ``s / sqrt(Σ s²)`` (the squares in float, summed in double, the quotient cast to float);
  when the norm is ``< 1e-6`` the raw scores are kept (not zeros); ``none``: the raw score (NaN → 0);
* a document a child did not return gets nothing from it (its score starts at 0 and only the children that
  returned it add), i.e. 0;
* combined: ``Σ weight · normalised`` over the children in order (``rankDoc.score += weight * docScore``,
  NaN → 0), **not** divided by ``Σ weight``;
* ties: ``RankDoc.compareTo``: score descending, then shard index, then Lucene doc id, both ascending;
* the combined list is cut to ``rank_window_size`` (then ``min_score``, inclusive, when given), and the
  request's ``from + size`` must not exceed ``rank_window_size``.

Against the OpenSearch rule of ``fuse_lists`` (``arithmetic_mean`` over all clauses, so ``/ Σ w`` = ``/ 1``
for weights summing to 1): the same scores except that OpenSearch gives a clause's minimum 0.001
(``MIN_SCORE``) instead of 0 and treats only exactly equal scores as "all equal"; ``l2`` differs only for a
norm in (0, 1e-6). Elasticsearch has no harmonic or geometric mean.

Availability: ``linear`` since 8.18.0 and 9.0.0 (``TransportVersions.LINEAR_RETRIEVER_SUPPORT``, node
feature ``linear_retriever_supported``; the specification's ``LinearRetriever`` first on its 8.18 and 9.0
branches); ``l2_norm`` since 8.19.0 and 9.1.0, not in 9.0.x (elastic/elasticsearch#128504, #128972;
specification #4470, branches 8.19 and 9.1). Licence: ``LinearRetrieverBuilder.fromXContent`` refuses it
unless ``RRFRankPlugin.LINEAR_RETRIEVER_FEATURE`` allows the cluster's licence, an
``License.OperationMode.ENTERPRISE`` feature: enterprise or trial, not platinum
(``elastic/cluster/connection.py``, ``ClusterInfo.paid``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from es_plugin_bridge.core.hybrid_fusion import CLAUSES, HybridFusion
from es_plugin_bridge.elastic.mappings import VECTOR_FIELD
from es_plugin_bridge.elastic.queries import MAX_NUM_CANDIDATES

Body = dict[str, Any]
Hits = list[tuple[str, float]]

#: First version with the ``linear`` retriever (8.18.0 and 9.0.0 came out together).
LINEAR_SINCE: tuple[int, int, int] = (8, 18, 0)
#: First 8.x version with the ``l2_norm`` normalizer; on the 9 line it is :data:`L2_NORM_SINCE_9`.
L2_NORM_SINCE: tuple[int, int, int] = (8, 19, 0)
#: First 9.x version with ``l2_norm`` (9.0.x has ``minmax`` only).
L2_NORM_SINCE_9: tuple[int, int, int] = (9, 1, 0)
#: The fusion's normalisation → the ``linear`` retriever's normalizer name.
NORMALIZERS: dict[str, str] = {"min_max": "minmax", "l2": "l2_norm"}
#: ``MinMaxScoreNormalizer.EPSILON`` and ``L2ScoreNormalizer.EPSILON``.
EPSILON = np.float32(1e-6)
#: Java's ``Float.MIN_VALUE`` (the smallest positive float), ``MinMaxScoreNormalizer``'s starting max.
FLOAT_MIN_VALUE = np.float32(1e-45)
KNN_METHODS: tuple[str, ...] = ("hnsw", "exact")


def _version3(version: Sequence[int]) -> tuple[int, int, int]:
    padded = [*version, 0, 0, 0][:3]
    return int(padded[0]), int(padded[1]), int(padded[2])


def linear_supported(version: tuple[int, ...], paid: bool, normalization: str) -> bool:
    """Whether a cluster of ``version`` with this licence runs the ``linear`` retriever with the fusion's
    ``normalization`` (``min_max`` or ``l2``); ``paid``: an active enterprise or trial licence."""
    if normalization not in NORMALIZERS:
        raise ValueError(f"unknown normalization {normalization!r} (choose from {', '.join(NORMALIZERS)})")
    v = _version3(version)
    if not paid or v < LINEAR_SINCE:
        return False
    if normalization == "l2":
        return v >= L2_NORM_SINCE_9 if v[0] >= 9 else v >= L2_NORM_SINCE
    return True


def _check_arithmetic(fusion: HybridFusion) -> None:
    if fusion.combination != "arithmetic_mean":
        raise ValueError(f"the linear retriever only sums weighted scores (arithmetic_mean); "
                         f"it has no {fusion.combination}")


def linear_retriever(first_stage_query: Body, vector: list[float], fusion: HybridFusion, *, knn: str,
                     exact_query: Body | None = None, num_candidates: int) -> Body:
    """The ``{"linear": ...}`` retriever of ``fusion``: the first stage as a ``standard`` child, the vectors
    as a ``knn`` child (``knn="hnsw"``, ``k`` = the window) or a ``standard`` child of ``exact_query``
    (``knn="exact"``), each with its weight and normalizer, ``rank_window_size`` = the window."""
    _check_arithmetic(fusion)
    window = int(fusion.window)
    if knn == "hnsw":
        if exact_query is not None:
            raise ValueError("exact_query is for knn='exact'; knn='hnsw' searches the vectors' HNSW graph")
        if not window <= num_candidates <= MAX_NUM_CANDIDATES:  # KnnSearchBuilder's two checks
            raise ValueError(f"num_candidates must be in [k={window}, {MAX_NUM_CANDIDATES}], "
                             f"got {num_candidates}")
        dense: Body = {"knn": {"field": VECTOR_FIELD, "query_vector": [float(x) for x in vector],
                               "k": window, "num_candidates": int(num_candidates)}}
    elif knn == "exact":
        if exact_query is None:
            raise ValueError("knn='exact' needs exact_query (the vectors' exact script_score query)")
        dense = {"standard": {"query": exact_query}}
    else:
        raise ValueError(f"unknown knn {knn!r} (choose from {', '.join(KNN_METHODS)})")
    normalizer = NORMALIZERS[fusion.normalization]
    children = {"first_stage": {"standard": {"query": first_stage_query}}, "dense": dense}
    return {"linear": {
        "retrievers": [
            {"retriever": children[c], "weight": float(fusion.weights[c]), "normalizer": normalizer}
            for c in CLAUSES
        ],
        "rank_window_size": window,
    }}


def normalize(scores: Sequence[float], normalizer: str, *, single_doc_fix: bool = True) -> np.ndarray:
    """One child's hits normalised as Elasticsearch does (float32), by normalizer name (``none``,
    ``minmax``, ``l2_norm``). ``single_doc_fix=False``: ``minmax`` before elastic/elasticsearch#128689
    (all-equal scores keep the raw minimum instead of 1.0)."""
    s = np.asarray(scores, dtype=np.float32)
    if s.size == 0:
        return s
    name = normalizer.lower()
    if name == "none":
        return np.where(np.isnan(s), np.float32(0), s).astype(np.float32)
    if name == "minmax":
        if np.isnan(s).all():
            return s
        low, high = np.float32(np.finfo(np.float32).max), FLOAT_MIN_VALUE
        for x in s:  # Java's loop: NaN compares false, so it never becomes min or max
            if x > high:
                high = x
            if x < low:
                low = x
        if abs(np.float32(low - high)) < EPSILON:
            return np.full(s.shape, np.float32(1.0) if single_doc_fix else low, dtype=np.float32)
        return ((s - low) / np.float32(high - low)).astype(np.float32)
    if name == "l2_norm":
        valid = s[~np.isnan(s)]
        if valid.size == 0:
            return s
        total = 0.0
        for x in valid:  # the square in float, the sum in double
            total += float(np.float32(x * x))
        norm = math.sqrt(total)
        if norm < float(EPSILON):
            return s
        return (s.astype(np.float64) / norm).astype(np.float32)
    raise ValueError(f"unknown normalizer {normalizer!r} (choose from none, minmax, l2_norm)")


def linear_scores(lists: Mapping[str, Sequence[tuple[str, float]]], fusion: HybridFusion, k: int, *,
                  doc_keys: Mapping[str, tuple[int, int]] | None = None,
                  single_doc_fix: bool = True) -> Hits:
    """Elasticsearch's ``linear`` top ``k`` for each clause's hits (``lists[clause]``: ``(id, raw score)``
    best first; each is cut to its own top ``fusion.window``, as the child search's ``size``). A clause
    absent from ``lists`` returned nothing.

    ``doc_keys``: each id's ``(shard index, Lucene doc id)``, Elasticsearch's tie order; without it ties
    keep the order in which the documents first appear (first clause, then the next), as ``fuse_lists``.
    ``k`` may not exceed the window (Elasticsearch refuses ``from + size > rank_window_size``)."""
    _check_arithmetic(fusion)
    if k > fusion.window:
        raise ValueError(f"k={k} exceeds the window {fusion.window} (rank_window_size must be ≥ size)")
    normalizer = NORMALIZERS[fusion.normalization]
    total: dict[str, np.float32] = {}
    for clause in CLAUSES:  # the children in order: the float sum is Java's
        hits = list(lists.get(clause, ()))[: fusion.window]
        if not hits:
            continue
        weight = np.float32(fusion.weights[clause])
        normed = normalize([score for _, score in hits], normalizer, single_doc_fix=single_doc_fix)
        for (doc, _), value in zip(hits, normed, strict=True):
            contribution = np.float32(weight * (np.float32(0) if np.isnan(value) else value))
            total[doc] = np.float32(total.get(doc, np.float32(0)) + contribution)
    first = {doc: i for i, doc in enumerate(total)}
    if doc_keys is None:
        order = sorted(total, key=lambda d: (-float(total[d]), first[d]))
    else:
        order = sorted(total, key=lambda d: (-float(total[d]), *doc_keys[d]))
    return [(doc, float(total[doc])) for doc in order[: min(k, fusion.window)]]
