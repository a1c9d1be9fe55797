"""Modes ``hybrid`` and ``hybrid-rrf``: candidates from the first stage *and* the model's vectors.

Why: every other mode reranks the first stage's window, and a duplicate BM25 missed is never in it;
the model's vectors find it (held-out AskUbuntu, docs/training.md "The transformer type": ``hybrid`` and
``dense`` beat ``fused``). These modes give the in-process rankers' orders
(``es_plugin_bridge/rankers/whole_collection.py``), per query:

``hybrid`` (exact on any licence, Elasticsearch 8.8+)
  0. the sidecar embeds the query (``/v1/encode``: vector and BOW terms), as mode vectors does;
  1. one ``_msearch``: the first stage's top ``window`` and the vectors' top ``window`` (exact: a
     ``script_score`` of the neural similarity over every document with a vector; ``--knn hnsw``:
     approximate ``knn``);
  2. one search restricted to the union of the two: its first stage carries ``_name`` and
     ``include_named_queries_score`` returns each hit's first-stage score in ``matched_queries`` (a
     member the first stage does not match has none: 0, as in process); a ``query`` rescore with
     ``query_weight: 0`` makes ``_score`` the rest of fused (``queries.rest_of_fused``). The client
     min-maxes the named scores over the union and adds β_fs·minmax: fused + one constant per query.
  Not ``linear``: it min-maxes a child over that child's own top window, never over the union (a
  knn-only member's first-stage score is not in it), and it needs enterprise.

``hybrid-rrf``
  The ``rrf`` retriever over a ``standard`` (first stage) and a ``knn`` (or exact ``script_score``)
  retriever, ``rank_constant`` 60 and ``rank_window_size`` = window (enterprise or trial, 8.16+).
  Elsewhere the client fuses the two lists of one ``_msearch`` with the same formula.

On OpenSearch (2.13+, the k-NN plugin) both modes send these bodies in the k-NN plugin's terms
(``elastic/cluster/opensearch_dsl.py``: its Painless functions, its ``knn`` query); ``hybrid`` is the same
three steps (OpenSearch returns named-query scores for ``include_named_queries_score`` given as a URL
parameter, as here), and ``hybrid-rrf`` always fuses in the client: OpenSearch has no ``rrf`` retriever.

On any number of shards (``elastic/cluster/shards.py``): both windows are the merged global tops (every search
with global statistics), and step 2 is restricted to the union, so the per-shard rescore window holds
all of it; one custom ``preference`` pins the calls to the same copies, among the active ones only.

HNSW (``--knn hnsw``) is approximate: a true neighbour can be missing from the vectors' window, so
the union can lack it; the union's scores stay exact. A query with no tokens skips the first-stage
search, and one whose vector is zero (cosine models) skips the vectors' search: Elasticsearch cannot
query a zero vector under cosine (``cosineSimilarity`` is NaN, ``knn`` refuses it), and in process
every cosine is then 0, so that window is an arbitrary tie. Manhattan models: exact only (no ``knn``
similarity is an L1 distance, and their vector field is not indexed for ``knn``).

Shapes: elasticsearch-specification ``specification/_types/Retriever.ts`` (``RRFRetriever``,
``KnnRetriever``, ``StandardRetriever``), ``_types/Knn.ts`` (``KnnSearch``),
``_global/search/SearchRequest.ts`` (``include_named_queries_score``, a query parameter),
``_global/search/_types/hits.ts`` (``matched_queries?: string[] | Dictionary<string, double>``),
``_global/msearch/types.ts`` (``MultisearchHeader``); checked by ``tests/elastic/test_es_hybrid.py``.
Behaviour: elasticsearch ``x-pack/plugin/rank-rrf/.../rrf/RRFRankPlugin.java`` (``RANK_RRF_FEATURE``:
``License.OperationMode.ENTERPRISE``), ``RRFRetrieverBuilder.java`` (``DEFAULT_RANK_CONSTANT = 60``,
score ``Σ 1/(rank_constant + rank)``, ties to the smaller doc id),
``server/.../search/fetch/subphase/MatchedQueriesPhase.java`` (the named query's own score, boost 1),
``rest-api-spec`` ``search/...named_queries`` ("introduced in 8.8.0").
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from es_plugin_bridge.bridge.sidecar_client import SidecarClient
from es_plugin_bridge.core.direction import has_direction
from es_plugin_bridge.core.fusion import minmax
from es_plugin_bridge.elastic import queries
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo, call
from es_plugin_bridge.elastic.cluster.dialect import display_name, engine_of_client
from es_plugin_bridge.elastic.cluster.engine_errors import answering_node, reason_of
from es_plugin_bridge.elastic.modes import ModeOption, ModeSpec, register_mode
from es_plugin_bridge.elastic.modes.base import Ask, Mode, ModeOptions, ModeResult, hits_of
from es_plugin_bridge.elastic.queries import (
    FIRST_STAGE_NAME,
    exact_dense_query,
    first_stage_query,
    knn_search,
    named,
    num_candidates,
    rescore,
)
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text.sidecar_text import model_part, rerank_text

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.setup import IndexMeta

Body = dict[str, Any]
Hits = list[tuple[str, float]]

KNN_METHODS = ("exact", "hnsw")
#: ``--knn``, declared here for the modes that search the vectors' window (``es search`` reads it from
#: the registry).
KNN_OPTION = ModeOption(
    "--knn", "knn", choices=KNN_METHODS,
    help="Vector modes: the vectors' top window by approximate HNSW knn or exact script_score (the "
    "in-process order; cost grows with the index). Default: hnsw for learned-hybrid (es search's default "
    "mode) wherever the index has a graph (cosine models); exact for hybrid and hybrid-rrf.")
#: The ``rrf`` retriever's first GA release; before it (or without enterprise) the client fuses.
RRF_RETRIEVER_SINCE = (8, 16, 0)


#: Elasticsearch's default and the in-process ``hybrid-rrf``'s ``k`` (``whole_collection.RRF_K``).
RANK_CONSTANT = 60

def _search_body(**parts: Any) -> Body:
    return {**parts, "_source": False, "track_total_hits": False}


def first_stage_search(
    similarity: str,
    tokens: Sequence[str],
    window: int,
    *,
    only: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
) -> Body:
    """Search body of the first stage's top window (ids and scores)."""
    query = first_stage_query(similarity, tokens, only=only, exclude=exclude)
    return _search_body(query=query, size=window)


def dense_search(
    vector: Sequence[float],
    window: int,
    similarity: str,
    knn: str,
    *,
    only: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
) -> Body:
    """Search body of the vectors' top window: exact ``script_score``, or HNSW ``knn``."""
    if knn == "hnsw":
        return _search_body(knn=knn_search(vector, window, only=only, exclude=exclude), size=window)
    return _search_body(query=exact_dense_query(vector, similarity, only=only, exclude=exclude), size=window)


def msearch_lines(bodies: Sequence[Body], preference: str) -> list[Body]:
    """``_msearch`` items: a header (the same ``preference`` as step 2: the same shard copies, so the
    same collection statistics) before each body."""
    lines: list[Body] = []
    for body in bodies:
        lines += [{"preference": preference}, body]
    return lines


def union_search(similarity: str, tokens: Sequence[str], union: Sequence[str], rest: Body) -> Body:
    """Step 2: the union's first-stage scores (named) and, as ``_score``, the rest of fused.

    ``first_stage_query(only=union)`` returns every member (the ``ids`` filter makes the match
    optional); the rescore window holds them all, and ``query_weight: 0`` drops the first pass.
    """
    query = named(first_stage_query(similarity, tokens, only=list(union)))
    return _search_body(query=query, rescore=rescore(rest, len(union), 0.0), size=len(union))


def rrf_retriever(
    *,
    similarity: str,
    tokens: Sequence[str],
    vector: Sequence[float],
    neural_similarity: str,
    knn: str,
    window: int,
    rank_constant: int = RANK_CONSTANT,
    only: Collection[str] | None = None,
    exclude: Collection[str] | None = None,
    vector_builder: Body | None = None,
) -> Body:
    """Mode hybrid-rrf in one call: ``rrf`` over the first stage and the vectors (enterprise/trial);
    with ``vector_builder`` (HNSW only) Elasticsearch embeds the query, and no client call is made."""
    first = first_stage_query(similarity, tokens, only=only, exclude=exclude)
    if knn == "hnsw":
        dense: Body = {"knn": knn_search(vector, window, only=only, exclude=exclude,
                                         vector_builder=vector_builder)}
    else:
        exact = exact_dense_query(vector, neural_similarity, only=only, exclude=exclude)
        dense = {"standard": {"query": exact}}
    return {
        "rrf": {
            "retrievers": [{"standard": {"query": first}}, dense],
            "rank_constant": int(rank_constant),
            "rank_window_size": int(window),
        }
    }


def first_stage_score(hit: Mapping[str, Any], name: str = FIRST_STAGE_NAME) -> float:
    """The named first-stage score of one hit; 0 when the first stage does not match it."""
    matched = hit.get("matched_queries")
    if matched is None:
        return 0.0
    if not isinstance(matched, Mapping):
        raise UserError(
            "the cluster answered matched_queries without scores: mode hybrid needs "
            "include_named_queries_score (Elasticsearch 8.8+, OpenSearch 2.13+)"
        )
    return float(matched.get(name, 0.0))


def fuse_union(
    union: Sequence[str], hits: Sequence[Mapping[str, Any]], beta_first_stage: float, k: int
) -> Hits:
    """β_fs·minmax(first stage over the union) + the rest of fused, top ``k``; ties keep union order.

    The min-max is the product's own (``core.fusion.minmax``) over every member Elasticsearch
    returned, as the in-process ``hybrid`` computes ``fuse`` over the union.
    """
    by_id = {h["_id"]: h for h in hits}
    ids = [doc for doc in union if doc in by_id]
    if not ids:
        return []
    first = np.array([first_stage_score(by_id[doc]) for doc in ids], dtype=np.float64)
    rest = np.array([float(by_id[doc]["_score"]) for doc in ids], dtype=np.float64)
    total = float(beta_first_stage) * minmax(first) + rest
    order = np.lexsort((np.arange(len(ids)), -total))[:k]
    return [(ids[i], float(total[i])) for i in order]


def rrf_fuse(lists: Sequence[Hits], k: int, rank_constant: float = RANK_CONSTANT) -> Hits:
    """Σ 1/(rank_constant + rank) over the lists, top ``k``; ties keep first-seen order (as in process)."""
    fused: dict[str, float] = {}
    for hits in lists:
        for rank, (doc, _) in enumerate(hits, start=1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (rank_constant + rank)
    ids = list(fused)
    scores = np.array([fused[doc] for doc in ids], dtype=np.float64)
    order = np.lexsort((np.arange(len(ids)), -scores))[:k]
    return [(ids[i], float(scores[i])) for i in order]


def example_bodies(
    similarity: str,
    tokens: Sequence[str],
    vector: Sequence[float],
    terms: Mapping[str, float],
    beta: Mapping[str, float],
    window: int,
) -> Body:
    """``mappings/elasticsearch/search-hybrid.json``: both modes' requests for one query, for people
    who send them by hand. Step 2's three ids stand for the union of step 1's hits (its ``size`` and
    rescore ``window_size`` are the union's length, at most twice the window)."""
    rest = queries.rest_of_fused(vector, terms, beta, "cosine")
    preference = "esrerank-example"
    union = ["id-1", "id-2", "id-3"]
    return {
        "hybrid": {
            "1 POST /INDEX/_msearch": msearch_lines(
                [
                    first_stage_search(similarity, tokens, window),
                    dense_search(vector, window, "cosine", "exact"),
                ],
                preference,
            ),
            "2 POST /INDEX/_search?include_named_queries_score=true&preference=esrerank-example":
                union_search(similarity, tokens, union, rest),
            "3 client": f"score = {beta['first_stage']} * minmax over the union of "
            f"matched_queries.{FIRST_STAGE_NAME} (0 when absent) + _score",
            "--knn hnsw: the second body of step 1": dense_search(vector, window, "cosine", "hnsw"),
        },
        "hybrid-rrf": {
            "POST /INDEX/_search (enterprise or trial)": {
                "retriever": rrf_retriever(similarity=similarity, tokens=tokens, vector=vector,
                                           neural_similarity="cosine", knn="hnsw", window=window),
                "size": 10,
            },
        },
    }


def _client_kwargs(body: Body) -> Body:
    """A request body as elasticsearch-py's keyword arguments (``_source`` is ``source`` there)."""
    return {("source" if key == "_source" else key): value for key, value in body.items()}


class _WindowsMode(Mode):
    """The query embedded once; the first stage's and the vectors' top windows in one ``_msearch``."""

    def __init__(
        self,
        stage: ElasticsearchFirstStage,
        beta: Mapping[str, float],
        window: int,
        embedder: SidecarClient,
        neural_similarity: str,
        knn: str = "exact",
    ) -> None:
        super().__init__(stage, beta, window)
        if knn not in KNN_METHODS:
            raise UserError(f"unknown --knn {knn!r} (choose from {', '.join(KNN_METHODS)})")
        self.embedder = embedder
        self.neural_similarity = neural_similarity
        self.knn = knn
        # One custom preference string for every call of this mode: the same shard copies answer (among
        # the active ones: a dead node's copy is never picked, shards.py).
        self.preference = f"esrerank-{uuid.uuid4().hex[:12]}"

    def _searchable(self, vector: Sequence[float]) -> bool:
        return self.neural_similarity == "manhattan" or has_direction(vector)

    def _windows(
        self,
        tokens: Sequence[str],
        vector: Sequence[float],
        window: int,
        only: Collection[str] | None,
        exclude: Collection[str] | None,
        timings: dict[str, float],
    ) -> tuple[dict[str, Hits], list[Body]]:
        """Each part's top window (``first_stage``, ``dense``), skipping a part that cannot search."""
        parts: dict[str, Body] = {}
        if tokens:
            parts["first_stage"] = first_stage_search(
                self.stage.similarity, tokens, window, only=only, exclude=exclude
            )
        if self._searchable(vector):
            parts["dense"] = dense_search(
                vector, window, self.neural_similarity, self.knn, only=only, exclude=exclude
            )
        lists: dict[str, Hits] = {"first_stage": [], "dense": []}
        if not parts:
            return lists, []
        lines = msearch_lines([self._body(part) for part in parts.values()], self.preference)
        start = time.perf_counter()
        answer = call(
            f"searching {self.index} (mode {self.name}: both windows)",
            self.client.msearch,
            index=self.index,
            searches=lines,
            **self.stage.search_type,  # the first stage's global window on any number of shards
        )
        timings["windows"] = 1000 * (time.perf_counter() - start)
        for name, response in zip(parts, answer["responses"], strict=True):
            if "error" in response:  # the item's cause and failed shards, and the node that answered
                node = answering_node(answer)
                engine = display_name(engine_of_client(self.client)) + (f" at {node}" if node else "")
                raise UserError(
                    f"searching {self.index} (mode {self.name}, {name} window): {engine} answered "
                    f"{response.get('status', '?')}: {reason_of(response)}"
                )
            lists[name] = [(h["_id"], float(h["_score"])) for h in response["hits"]["hits"]]
        return lists, lines


class HybridMode(_WindowsMode):
    """The in-process ``hybrid`` ranker: fused β over the union of both windows (exact, any licence)."""

    name = "hybrid"

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        """``only`` (rerank a candidate list): the union is the candidates, i.e. ``fused`` over them."""
        embedding = self._embed(ask.query, timings)
        vector, tokens = embedding["vector"], self.stage.tokens(ask.query)
        request: dict[str, Any] = {}
        if ask.only is not None:
            union = [doc for doc in dict.fromkeys(ask.only) if not ask.exclude or doc not in ask.exclude]
        else:
            lists, request["msearch"] = self._windows(tokens, vector, ask.window, None, ask.exclude, timings)
            union = list(dict.fromkeys(doc for part in lists.values() for doc, _ in part))
        if not union:
            return ModeResult([], True, request=request)
        rest = queries.rest_of_fused(vector, embedding["terms"], self.beta, self.neural_similarity)
        body = self._body(union_search(self.stage.similarity, tokens, union, rest))
        request["search"] = body
        start = time.perf_counter()
        answer = call(
            f"searching {self.index} (mode {self.name}: the union)",
            self.client.search,
            index=self.index,
            include_named_queries_score=True,
            preference=self.preference,
            **self.stage.search_type,
            **_client_kwargs(body),
        )
        timings["search"] = 1000 * (time.perf_counter() - start)
        hits = fuse_union(union, answer["hits"]["hits"], self.beta["first_stage"], ask.k)
        return ModeResult(hits, True, request=request)


class HybridRrfMode(_WindowsMode):
    """The in-process ``hybrid-rrf`` ranker: reciprocal-rank fusion of both windows."""

    name = "hybrid-rrf"

    def __init__(
        self,
        stage: ElasticsearchFirstStage,
        beta: Mapping[str, float],
        window: int,
        embedder: SidecarClient,
        neural_similarity: str,
        knn: str = "exact",
        *,
        in_elasticsearch: bool = False,
        rank_constant: int = RANK_CONSTANT,
        embed_endpoint: str | None = None,
    ) -> None:
        super().__init__(stage, beta, window, embedder, neural_similarity, knn)
        self.in_elasticsearch = in_elasticsearch
        self.rank_constant = rank_constant
        self.embed_endpoint = embed_endpoint

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        tokens = self.stage.tokens(ask.query)
        rrf = {"similarity": self.stage.similarity, "tokens": tokens, "window": ask.window, "knn": self.knn,
               "neural_similarity": self.neural_similarity, "rank_constant": self.rank_constant,
               "only": ask.only, "exclude": ask.exclude}
        if self.in_elasticsearch and self.knn == "hnsw" and self.embed_endpoint and tokens:
            # Elasticsearch embeds the query through the index's text_embedding endpoint (the text goes
            # through the endpoint's template: rerank_text writes ${ as &#36;{)
            builder = {"text_embedding": {"model_id": self.embed_endpoint,
                                          "model_text": rerank_text(model_part(ask.query))}}
            return self._in_elasticsearch(ask.k, rrf_retriever(**rrf, vector=[], vector_builder=builder),
                                          timings)
        embedding = self._embed(ask.query, timings)
        vector = embedding["vector"]
        if self.in_elasticsearch and tokens and self._searchable(vector):
            return self._in_elasticsearch(ask.k, rrf_retriever(**rrf, vector=vector), timings)
        lists, lines = self._windows(tokens, vector, ask.window, ask.only, ask.exclude, timings)
        hits = rrf_fuse([lists["first_stage"], lists["dense"]], ask.k, self.rank_constant)
        return ModeResult(hits, True, request={"msearch": lines})

    def _in_elasticsearch(self, k: int, retriever: Body, timings: dict[str, float]) -> ModeResult:
        """One search with the ``rrf`` retriever: Elasticsearch fuses both lists."""
        answer, timings["search"] = self._search(k, retriever=retriever, preference=self.preference)
        return ModeResult(hits_of(answer), True, request={"retriever": retriever})


def rrf_in_elasticsearch(cluster: ClusterInfo) -> bool:
    """Whether the cluster runs the ``rrf`` retriever: enterprise or trial (``RANK_RRF_FEATURE``), 8.16+;
    never OpenSearch, which has no retrievers."""
    return cluster.retrievers and tuple(cluster.version) >= RRF_RETRIEVER_SINCE


def _checked_embedder(mode: str, stage: ElasticsearchFirstStage, meta: IndexMeta,
                      options: ModeOptions) -> SidecarClient:
    """The query embedder of a hybrid mode, once the index, the model and ``--knn`` are checked to fit;
    UserError naming what the index or model lacks."""
    if options.knn is not None and options.knn not in KNN_METHODS:
        raise UserError(f"unknown --knn {options.knn!r} (choose from {', '.join(KNN_METHODS)})")
    if meta.dimension is None:
        raise UserError(
            f"mode {mode} searches the model's vectors; index {stage.index} holds none (it was set up "
            "with --no-vectors or without a model)"
        )
    if options.knn == "hnsw" and meta.hnsw_off_reason is not None:
        raise UserError(f"--knn hnsw cannot search index {stage.index}: {meta.hnsw_off_reason}; "
                        "use --knn exact")
    if options.knn == "hnsw":
        num_candidates(options.window)  # refuses a window above Elasticsearch's cap, before any call
    return SidecarClient.reaching(options.sidecar)


def build_hybrid(stage: ElasticsearchFirstStage, meta: IndexMeta, options: ModeOptions) -> Mode:
    """Mode ``hybrid``'s registry builder."""
    embedder = _checked_embedder("hybrid", stage, meta, options)
    return HybridMode(stage, meta.beta(stage.similarity), options.window, embedder, meta.neural_similarity,
                      options.knn or "exact")


def build_hybrid_rrf(stage: ElasticsearchFirstStage, meta: IndexMeta, options: ModeOptions) -> Mode:
    """Mode ``hybrid-rrf``'s registry builder."""
    embedder = _checked_embedder("hybrid-rrf", stage, meta, options)
    return HybridRrfMode(stage, {}, options.window, embedder, meta.neural_similarity,
                         options.knn or "exact",
                         in_elasticsearch=rrf_in_elasticsearch(options.cluster),
                         embed_endpoint=meta.embedding.get("text_embedding"))


register_mode(ModeSpec(
    "hybrid", build_hybrid,
    "first stage and vectors, fused with β",
    engines=("elasticsearch", "opensearch"), needs_vectors=True,
    requires={
        # include_named_queries_score (8.8.0: rest-api-spec search named_queries test); any licence
        "elasticsearch": {"version": {8: (8, 8), 9: (9, 0)}, "version_text": "8.8+"},
        # include_named_queries_score: OpenSearch PR #11626, first released in 2.13 (RestSearchAction,
        # SearchHit.toInnerXContent reads the URL parameter)
        "opensearch": {"version": {2: (2, 13)}, "version_text": "2.13+"},
    },
    ranker="hybrid", order=3, suggest=2, options=(KNN_OPTION,),
    sidecar="the client, once per query (`/v1/encode`); candidates from the first stage **and** the "
            "vectors' window, scored with β inside the engine"))
register_mode(ModeSpec(
    "hybrid-rrf", build_hybrid_rrf,
    "first stage and vectors, reciprocal-rank fusion",
    # rrf retriever on enterprise/trial 8.16+, else (and on OpenSearch, which has no rrf retriever) the
    # client fuses the two windows: any licence
    engines=("elasticsearch", "opensearch"), needs_vectors=True, ranker="hybrid-rrf", order=4,
    options=(KNN_OPTION,),
    sidecar="the client, once per query (`/v1/encode`); the same two windows merged by reciprocal rank",
    support={"elasticsearch": "any licence (the client fuses); the `rrf` retriever fuses in one call on "
                              "8.16+, enterprise or trial licence",
             "opensearch": "any 2.x with the k-NN plugin (the client fuses)"}))
