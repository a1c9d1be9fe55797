"""``make_mode``: the one place that builds a mode by name (``native``, ``vectors``, ``bridge``,
``hybrid``, ``hybrid-rrf``) over a first stage, with the index meta's β for it.

Apart from ``elastic.modes`` (the modes) and ``elastic.hybrid`` (the hybrid modes, built on them), so
that both are imported one way: factory → hybrid → modes.
"""

from __future__ import annotations

from typing import Any

from es_plugin_bridge.bridge.sidecar_client import SidecarClient
from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
from es_plugin_bridge.elastic.hybrid import make_hybrid_mode
from es_plugin_bridge.elastic.mode_names import MODES, VECTOR_MODES
from es_plugin_bridge.elastic.modes import BridgeMode, Mode, NativeMode, VectorsMode
from es_plugin_bridge.elastic.sidecar_embedder import SidecarEmbedder
from es_plugin_bridge.errors import UserError


def refuse_without_vectors(mode: str, meta: Any) -> None:
    """One-line UserError when ``mode`` needs vectors and the index's model has none per text (a
    pairwise model, the cross-encoder), naming the modes that do run; decided by ``meta.pairwise``,
    what ``es setup`` read from the model directory, so no search or sidecar call is made first."""
    if mode in VECTOR_MODES and getattr(meta, "pairwise", False):
        raise UserError(
            f"mode {mode} needs the model's vectors; {meta.model} ({meta.model_type}) reads a query and "
            "a document together and has no vectors: use --mode native or --mode bridge"
        )


def make_mode(
    mode: str,
    stage: ElasticsearchFirstStage,
    meta: Any,
    *,
    window: int,
    sidecar_url: str,
    token: str | None,
    timeout: float,
    cluster: Any,
    allow_rerank_failures: bool = False,
    knn: str = "exact",
) -> Mode:
    """The mode ``mode`` over ``stage`` with the index meta's β for that first stage; UserError naming
    what the cluster or the index lacks for it."""
    if mode not in MODES:
        raise UserError(f"unknown mode {mode!r} (choose from {', '.join(MODES)})")
    refuse_without_vectors(mode, meta)
    cluster.require(mode)
    if mode in ("hybrid", "hybrid-rrf"):  # knn: exact (script_score) or hnsw
        return make_hybrid_mode(mode, stage, meta, window=window, sidecar_url=sidecar_url, token=token,
                                timeout=timeout, cluster=cluster, knn=knn)
    beta = meta.beta(stage.similarity)
    if mode == "native":
        endpoint = meta.inference.get(stage.similarity)
        if endpoint is None:
            raise UserError(
                f"index {stage.index} has no inference endpoint for {stage.similarity}; run "
                "`esrerank es setup` against a cluster that supports mode native"
            )
        if allow_rerank_failures:
            cluster.require("native-allow-failures")
        return NativeMode(stage, beta, window, endpoint, allow_rerank_failures)
    if mode == "vectors":
        if meta.dimension is None:
            raise UserError(f"index {stage.index} holds no vectors (it was set up without a model)")
        embedder = SidecarEmbedder(sidecar_url, token=token, timeout=timeout)
        one_call = cluster.paid and cluster.version >= (8, 18, 0)
        return VectorsMode(stage, beta, window, embedder, meta.neural_similarity, one_call)
    return BridgeMode(stage, beta, window, SidecarClient(sidecar_url, token=token, timeout=timeout))


__all__ = ["MODES", "VECTOR_MODES", "make_mode", "refuse_without_vectors"]
