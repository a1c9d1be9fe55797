"""Mode ``vectors``: stored vectors and BOW features; the sidecar embeds only the query and the window is
rescored inside the engine (Elasticsearch: one call on enterprise/trial, two on a basic licence;
OpenSearch: the two calls, with the k-NN plugin's Painless functions).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.bridge.sidecar_client import SidecarClient
from es_plugin_bridge.elastic import queries
from es_plugin_bridge.elastic.modes import ModeSpec, register_mode
from es_plugin_bridge.elastic.modes.base import Ask, Mode, ModeOptions, ModeResult, hits_of
from es_plugin_bridge.elastic.queries import first_stage_query, rescore
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.setup import IndexMeta

Body = dict[str, Any]


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


class VectorsMode(Mode):
    """The query embedded once by the sidecar; the window rescored with stored vectors and BOW features.

    ``one_call`` (enterprise/trial): a ``rescorer`` retriever over a min-maxing ``linear``. Otherwise
    (any licence) two calls: the first reads the window's first-stage max and min, the second rescores
    with ``query_weight = β_fs / (max − min)``.
    """

    name = "vectors"

    def __init__(
        self,
        stage: ElasticsearchFirstStage,
        beta: Mapping[str, float],
        window: int,
        embedder: SidecarClient,
        neural_similarity: str,
        one_call: bool,
    ) -> None:
        super().__init__(stage, beta, window)
        self.embedder = embedder
        self.neural_similarity = neural_similarity
        self.one_call = one_call

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        embedding = self._embed(ask.query, timings)
        rest = queries.rest_of_fused(
            embedding["vector"], embedding["terms"], self.beta, self.neural_similarity
        )
        tokens = self.stage.tokens(ask.query)
        if self.one_call:
            retriever = vectors_retriever(
                similarity=self.stage.similarity,
                tokens=tokens,
                rest=rest,
                beta_first_stage=self.beta["first_stage"],
                window=ask.window,
                only=ask.only,
                exclude=ask.exclude,
            )
            answer, timings["search"] = self._search(ask.k, retriever=retriever)
            return ModeResult(hits_of(answer), True, request={"retriever": retriever})
        first = queries.first_stage_query(self.stage.similarity, tokens, only=ask.only, exclude=ask.exclude)
        # The same preference string on both calls: both read the same shard copies, so the second
        # call's first-pass scores are the ones the first call measured (a replica may hold other
        # deleted-document statistics until it merges). A copy that dies in between is skipped for
        # another: a custom preference picks among active copies only (shards.py).
        pin = {"preference": f"esrerank-{uuid.uuid4().hex}"}
        probe, timings["window"] = self._search(ask.window, sources=False, query=first, **pin)
        found = hits_of(probe)
        weight = basic_query_weight(self.beta["first_stage"], [s for _, s in found])
        # A rescore window is per shard: rescoring only the global window's ids (each shard holds at
        # most ``window`` of them) reranks exactly the global first-stage top window on any shard count.
        window_only = queries.first_stage_query(self.stage.similarity, tokens, only=[d for d, _ in found],
                                                exclude=ask.exclude)
        body = self._body({"query": window_only, "rescore": queries.rescore(rest, ask.window, weight)})
        answer, timings["search"] = self._search(ask.k, **body, **pin)
        return ModeResult(hits_of(answer), True, request=body)


def build_vectors(stage: ElasticsearchFirstStage, meta: IndexMeta, options: ModeOptions) -> Mode:
    """One call where the cluster has the ``linear`` and ``rescorer`` retrievers, else two."""
    if meta.dimension is None:
        raise UserError(f"index {stage.index} holds no vectors (it was set up without a model)")
    embedder = SidecarClient.reaching(options.sidecar)
    # OpenSearch has no linear or rescorer retriever: the two calls (query, then query + rescore)
    cluster = options.cluster
    one_call = cluster.retrievers and cluster.version >= (8, 18, 0)
    return VectorsMode(stage, meta.beta(stage.similarity), options.window, embedder, meta.neural_similarity,
                       one_call)


register_mode(ModeSpec(
    "vectors", build_vectors,
    "stored vectors: the window rescored inside the engine",
    engines=("elasticsearch", "opensearch"), needs_vectors=True, order=1,
    sidecar="the client, once per query (`/v1/encode` of the query); the window is rescored inside the "
            "engine from the stored vectors and `rank_features`",
    support={"elasticsearch": "any, in two calls; one call (`rescorer` over `linear`): 8.18+ or 9.0+, "
                              "enterprise or trial licence",
             "opensearch": "any 2.x with the k-NN plugin (its Painless functions), two calls"}))
