"""Mode ``learned-hybrid``: the engine's own hybrid search, with the normalisation, combination, weights
and window the model's fit chose (``core/hybrid_fusion.py``, ``training/hybrid_fit.py``).

Why: OpenSearch already fuses a ``match`` and a vector query in one request; what this product adds is
the fusion learned on the site's duplicates, with a guard that never keeps a fusion losing to either
clause alone. The in-process ranker ``learned-hybrid`` computes the same ranking, so evaluation figures
are the engine's (a node test holds the two to the same top 10).

OpenSearch (neural-search 2.10+; ``pagination_depth`` 2.19): **one search**, a ``hybrid`` query of two
sub-queries, the first stage's ``match`` (``queries.first_stage_query``) and the vectors' query, with
``pagination_depth`` = the fusion's window (each sub-query's own top window: neural-search 2.19.1
``HybridCollectorManager.getSubqueryResultsRetrievalSize``), and the ``normalization-processor`` of the
fit given in the body as a temporary search pipeline (``search_pipeline``: ``SearchRequest``'s own field,
OpenSearch 2.9+), so the pipeline can never disagree with the index's ``_meta``. The vectors' query:
the k-NN plugin's ``knn`` (``--knn hnsw``; ``k`` = the window: the hybrid collector keeps no more, and
Lucene's HNSW search explores ``k`` candidates, so a larger ``k`` costs time for no hit it keeps — 17 ms
against 14 ms p50 at ``k`` 100 against 5 in benchmarks/engine_hybrid.json; the approximation's cost in
quality is the same file's exact row), or an exact ``script_score`` of ``(1 + cos) / 2`` (Lucene's
cosine score, so both methods score alike); with ``--knn hnsw`` on an index set up with
``--embed-at-ingest``, the ``neural`` query with the index's vector model, so OpenSearch embeds the query
through the sidecar and the client makes one call.

Several shards with global statistics (``dfs_query_then_fetch``, the product's default: ``shards.py``):
neural-search 2.19 skips the normalization processor after a DFS query phase and answers each
sub-query's raw hits, duplicates included (neural-search issue #1490; later versions refuse the
combination, PR #1873). There, as on Elasticsearch, the two windows come in one ``_msearch`` with global
statistics and the client fuses them by the same rule, so the ranking is the in-process ranker's on any
number of shards.

Elasticsearch 8.18+ / 9.0+ with an enterprise or trial licence (``l2`` from 8.19 / 9.1), for an
``arithmetic_mean`` fusion: one search with the ``linear`` retriever (``elastic/linear_retriever.py``),
whose min-max has no 0.001 floor and whose sum is not divided by Σ w (the weights sum to 1): the same
order but where a document sits at a clause's minimum (OpenSearch's and the in-process score is 0.001·w
higher there). Elsewhere (another licence, an older version, harmonic or geometric) both windows in one
``_msearch`` and the client fuses them by the rule above.

A zero query vector (cosine) cannot be searched: its sub-query becomes ``match_none`` (no results), as
the in-process ranker leaves that clause empty. A query with no tokens: the ``match`` matches nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from es_plugin_bridge.bridge.sidecar_client import SidecarClient
from es_plugin_bridge.core.direction import has_direction
from es_plugin_bridge.core.hybrid_fusion import HybridFusion, fuse_lists, pipeline_body
from es_plugin_bridge.elastic import queries
from es_plugin_bridge.elastic.cluster import opensearch_dsl
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo, call
from es_plugin_bridge.elastic.linear_retriever import linear_retriever, linear_supported
from es_plugin_bridge.elastic.mappings import VECTOR_FIELD
from es_plugin_bridge.elastic.modes import ModeSpec, register_mode
from es_plugin_bridge.elastic.modes.base import Ask, Mode, ModeOptions, ModeResult, hits_of
from es_plugin_bridge.elastic.modes.hybrid import KNN_METHODS, KNN_OPTION, HybridMode
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.setup import IndexMeta

Body = dict[str, Any]
#: The exact vectors' clause: Lucene's cosine score, (1 + cos) / 2, as the ``knn`` query scores.
EXACT_COSINE = f"(cosineSimilarity(params.q, '{VECTOR_FIELD}') + 1.0) / 2.0"


def exact_clause(vector: list[float], similarity: str, only: Any = None, exclude: Any = None) -> Body:
    """The vectors' exact clause: every document with a vector, scored as the ``knn`` query would."""
    body = queries.exact_dense_query(vector, similarity, only=only, exclude=exclude)
    if similarity == "cosine":
        body["script_score"]["script"]["source"] = EXACT_COSINE
    return body


def opensearch_body(fusion: HybridFusion, first_stage: Body, vector_clause: Body, k: int) -> Body:
    """The one OpenSearch search: the ``hybrid`` query and its temporary pipeline."""
    return {
        "query": {"hybrid": {"queries": [first_stage, vector_clause],
                             "pagination_depth": max(k, fusion.window)}},
        "search_pipeline": pipeline_body(fusion),
    }


class LearnedHybridMode(Mode):
    """The learned hybrid, computed by the engine (OpenSearch) or on the two windows (Elasticsearch)."""

    name = "learned-hybrid"

    def __init__(self, stage: ElasticsearchFirstStage, fusion: HybridFusion, embedder: SidecarClient,
                 neural_similarity: str, knn: str, *, hybrid_query: bool,
                 vector_model: str | None = None, linear: bool = False, shards: int = 1) -> None:
        super().__init__(stage, {}, fusion.window)
        self.fusion = fusion
        self.embedder = embedder
        self.neural_similarity = neural_similarity
        self.knn = knn
        self.hybrid_query = hybrid_query
        self.vector_model = vector_model if knn == "hnsw" else None
        self.linear = linear
        #: the index's primary shards: on several, a DFS query phase skips the hybrid pipeline (#1490)
        self.shards = shards
        # the two-windows path of Elasticsearch (the msearch and its shard pinning) is mode hybrid's
        self._windows_mode = HybridMode(stage, {"first_stage": 0.0, "bow": 0.0, "neural": 0.0}, fusion.window,
                                        embedder, neural_similarity, knn)

    def _vector_clause(self, ask: Ask, vector: list[float] | None) -> Body:
        window = max(ask.k, self.fusion.window)
        if vector is None:  # the cluster embeds the query itself (neural query, the index's model)
            section = queries.knn_search([], window, only=ask.only, exclude=ask.exclude)
            inner: Body = {"query_text": ask.query.title, "model_id": self.vector_model, "k": window}
            if "filter" in section:
                inner["filter"] = section["filter"]
            return {"neural": {VECTOR_FIELD: inner}}
        if self.neural_similarity != "manhattan" and not has_direction(vector):
            return {"match_none": {}}
        if self.knn == "hnsw":
            section = queries.knn_search(vector, window, only=ask.only, exclude=ask.exclude)
            section["num_candidates"] = window  # the knn query's k: see the module docstring
            return opensearch_dsl.knn_query(section)
        return exact_clause(vector, self.neural_similarity, ask.only, ask.exclude)

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        if self.linear:
            return self._linear(ask, timings)
        if not self.hybrid_query or (self.shards > 1 and self.stage.search_type):
            return self._in_client(ask, timings)
        vector = None
        if self.vector_model is None or ask.query.body:  # the index's model embeds a title alone
            vector = self._embed(ask.query, timings)["vector"]
        tokens = self.stage.tokens(ask.query)
        first = queries.first_stage_query(self.stage.similarity, tokens, only=ask.only, exclude=ask.exclude)
        body = opensearch_dsl.translate(opensearch_body(self.fusion, first, self._vector_clause(ask, vector),
                                                        ask.k))
        answer, timings["search"] = self._search(ask.k, **body)
        return ModeResult(hits_of(answer), True, request=body)

    def _linear(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        """Elasticsearch 8.18+ / 9.0+, enterprise or trial: one search with the ``linear`` retriever."""
        vector = self._embed(ask.query, timings)["vector"]
        window = max(ask.k, self.fusion.window)
        first = queries.first_stage_query(self.stage.similarity, self.stage.tokens(ask.query), only=ask.only,
                                          exclude=ask.exclude)
        exact = exact_clause(vector, self.neural_similarity, ask.only, ask.exclude)
        fusion = self.fusion.model_copy(update={"window": window})
        retriever = linear_retriever(first, vector, fusion, knn=self.knn,
                                     exact_query=exact if self.knn == "exact" else None,
                                     num_candidates=queries.num_candidates(window))
        answer, timings["search"] = self._search(ask.k, retriever=retriever)
        return ModeResult(hits_of(answer), True, request={"retriever": retriever})

    def _in_client(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        """Elasticsearch without the ``linear`` retriever, and OpenSearch on several shards with global
        statistics: both windows in one ``_msearch``, fused here by the engine's rule."""
        embedding = self._embed(ask.query, timings)
        window = max(ask.k, self.fusion.window)
        lists, lines = self._windows_mode._windows(self.stage.tokens(ask.query), embedding["vector"], window,
                                                   ask.only, ask.exclude, timings)
        if self.neural_similarity == "cosine" and self.knn == "exact":
            # the exact script scores cos + 1 (queries.neural_script); the knn query (1 + cos) / 2
            lists["dense"] = [(doc, score / 2.0) for doc, score in lists["dense"]]
        return ModeResult(fuse_lists(lists, self.fusion, ask.k), True, request={"msearch": lines})


def build_learned_hybrid(stage: ElasticsearchFirstStage, meta: IndexMeta, options: ModeOptions) -> Mode:
    """Mode ``learned-hybrid``'s registry builder; UserError naming what the index or model lacks."""
    if meta.dimension is None:
        raise UserError(f"mode learned-hybrid searches the model's vectors; index {stage.index} holds none "
                        f"({meta.no_vectors_reason})")
    knn = options.knn or meta.default_knn
    if knn not in KNN_METHODS:
        raise UserError(f"unknown --knn {knn!r} (choose from {', '.join(KNN_METHODS)})")
    if knn == "hnsw" and meta.hnsw_off_reason is not None:
        raise UserError(f"--knn hnsw cannot search index {stage.index}: {meta.hnsw_off_reason}; "
                        "use --knn exact")
    fusion = HybridFusion(**(meta.hybrid or {}))  # learned_hybrid_rule checked it
    if fusion.first_stage != stage.similarity:
        fusion = fusion.model_copy(update={"first_stage": stage.similarity})
    cluster = options.cluster
    linear = (cluster.retrievers and fusion.combination == "arithmetic_mean"
              and linear_supported(tuple(cluster.version), bool(cluster.paid), fusion.normalization))
    return LearnedHybridMode(stage, fusion, SidecarClient.reaching(options.sidecar), meta.neural_similarity,
                             knn, hybrid_query=cluster.hybrid_query,
                             vector_model=meta.embedding.get("vector_model"), linear=linear,
                             shards=primary_shards(stage) if cluster.hybrid_query else 1)


def learned_hybrid_rule(cluster: ClusterInfo, meta: IndexMeta) -> str | None:
    """The fusion the model's fit recorded, which the mode sends as the engine's pipeline."""
    if meta.hybrid is not None:
        return None
    return ("the index was set up with a model that records no learned hybrid: run "
            "`esrerank fit-hybrid MODEL_DIR --dev ... --corpus ...`, then `es setup` again")


def primary_shards(stage: ElasticsearchFirstStage) -> int:
    """The index's ``number_of_shards`` (one GET when the mode is built, not per search)."""
    answer = call(f"reading the settings of {stage.index}", stage.client.indices.get, index=stage.index)
    settings = next(iter(answer.values()))["settings"]["index"]
    return int(settings.get("number_of_shards", 1))


register_mode(ModeSpec(
    "learned-hybrid", build_learned_hybrid,
    "the engine's hybrid with the learned fusion (the default)",
    engines=("elasticsearch", "opensearch"), needs_vectors=True,
    requires={
        # pagination_depth: neural-search 2.19.0 (HybridQueryBuilder.PAGINATION_DEPTH_FIELD)
        "opensearch": {"version": {2: (2, 19)}, "version_text": "2.19+ (neural-search)"},
        # the two windows' msearch (include_named_queries_score is not needed): any 8.x with knn
        "elasticsearch": {"version": {8: (8, 0), 9: (9, 0)}, "version_text": "8.0+"},
    },
    ranker="learned-hybrid", order=-1, suggest=0, rule=learned_hybrid_rule, options=(KNN_OPTION,),
    sidecar="the client, once per query (`/v1/encode`), or OpenSearch itself (`neural` query, on an index "
            "set up with `--embed-at-ingest`); one search",
    support={"opensearch": "2.19+ with neural-search: one `hybrid` query, the fitted "
                           "`normalization-processor` in the request",
             "elasticsearch": "any licence: both windows in one `_msearch`, fused in the client by the "
                              "same rule; one search with the `linear` retriever on 8.18+ / 9.0+, enterprise "
                              "or trial licence (arithmetic mean)"}))
