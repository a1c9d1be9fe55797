"""Mode ``native``: Elasticsearch calls the sidecar itself (``linear`` over a ``text_similarity_reranker``
on the ``custom`` inference endpoint ``es setup`` registered, ``/v1/rerank?score=linear``); one request.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.elastic.cluster.connection import ClusterInfo, call
from es_plugin_bridge.elastic.mappings import RERANK_FIELD
from es_plugin_bridge.elastic.modes import ModeSpec, register_mode, require
from es_plugin_bridge.elastic.modes.base import Ask, Mode, ModeOptions, ModeResult, hits_of
from es_plugin_bridge.elastic.queries import first_stage_query
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text.sidecar_text import model_part, rerank_text

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.run_cleanup import RunCleanup
    from es_plugin_bridge.elastic.setup import IndexMeta

Body = dict[str, Any]

#: What ``--allow-rerank-failures`` gives, said with every such answer: Elasticsearch does not mark it.
ALLOW_FAILURES_NOTE = (
    "allow_rerank_failures is on: if Elasticsearch could not reach the sidecar, this is the first-stage "
    "order (Elasticsearch keeps the first-stage scores and does not say so in the answer)"
)


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


class NativeMode(Mode):
    """Elasticsearch calls the sidecar (``/v1/rerank?score=linear``) through ``inference_id``."""

    name = "native"

    def __init__(
        self,
        stage: ElasticsearchFirstStage,
        beta: Mapping[str, float],
        window: int,
        inference_id: str,
        allow_failures: bool = False,
    ) -> None:
        super().__init__(stage, beta, window)
        self.inference_id = inference_id
        self.allow_failures = allow_failures

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        retriever = native_retriever(
            similarity=self.stage.similarity,
            tokens=self.stage.tokens(ask.query),
            query_text=rerank_text(model_part(ask.query)),  # the model reads its start (sidecar_text)
            inference_id=self.inference_id,
            beta_first_stage=self.beta["first_stage"],
            window=ask.window,
            only=ask.only,
            exclude=ask.exclude,
            allow_failures=self.allow_failures,
        )
        answer, timings["search"] = self._search(ask.k, retriever=retriever)
        note = ALLOW_FAILURES_NOTE if self.allow_failures else None
        return ModeResult(hits_of(answer), True, request={"retriever": retriever}, note=note)


def build_native(stage: ElasticsearchFirstStage, meta: IndexMeta, options: ModeOptions) -> Mode:
    """The index's inference endpoint for this first stage, which ``es setup`` registered."""
    endpoint = meta.inference.get(stage.similarity)
    if endpoint is None:
        raise UserError(
            f"index {stage.index} has no inference endpoint for {stage.similarity}; run "
            "`esrerank es setup` against a cluster that supports mode native"
        )
    if options.allow_rerank_failures:
        require(options.cluster, "native-allow-failures")
    return NativeMode(stage, meta.beta(stage.similarity), options.window, endpoint,
                      options.allow_rerank_failures)


def native_rule(cluster: ClusterInfo, meta: IndexMeta) -> str | None:
    """The inference endpoints ``es setup`` registered (one per first stage; the builder picks its own)."""
    if meta.inference:
        return None
    return ("the index has no inference endpoint; run `esrerank es setup` against a cluster that supports "
            "mode native")


def prepare_native(client: SearchClient, index: str, meta: IndexMeta, sidecar_url: str, token: str | None,
                   cluster: ClusterInfo, stack: RunCleanup) -> IndexMeta:
    """A throw-away run's inference endpoints (one per first stage), deleted after the run."""
    from dataclasses import replace

    from es_plugin_bridge.elastic.setup import register_endpoints

    endpoints, why = register_endpoints(client, index, meta, sidecar_url, token, cluster)
    if why:
        raise UserError(why)
    for endpoint in endpoints.values():
        stack.remove(f"inference endpoint {endpoint}", "DELETE", f"/_inference/{endpoint}?force=true",
                     call, f"deleting {endpoint}", client.options(ignore_status=404).inference.delete,
                     inference_id=endpoint, force=True)
    return replace(meta, inference=endpoints)


register_mode(ModeSpec(
    "native", build_native,
    "Elasticsearch calls the sidecar (inference endpoint + text_similarity_reranker)",
    # the custom inference service and text_similarity_reranker: 8.19 / 9.1, enterprise or trial
    requires={"elasticsearch": {"version": {8: (8, 19), 9: (9, 1)}, "version_text": "8.19+ or 9.1+",
                                "licence": True,
                                "why": "the custom inference service and text_similarity_reranker"}},
    prepare=prepare_native, rule=native_rule, order=0, suggest=3,
    sidecar="Elasticsearch, through a `custom` inference endpoint (`/v1/rerank?score=linear`)"))
