"""Mode ``bridge``: the client takes the first-stage window, calls ``/v1/rerank`` and falls back to the
first-stage order when the sidecar is slow or down (marked not reranked, with the reason); any version,
any licence, either engine. It is ``esrerank search``'s :class:`BridgeSearch` over the engine's first
stage, so both commands rerank the same way.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from es_plugin_bridge.bridge.search import BridgeSearch
from es_plugin_bridge.bridge.sidecar_client import SidecarClient
from es_plugin_bridge.elastic.modes import ModeSpec, register_mode
from es_plugin_bridge.elastic.modes.base import Ask, Mode, ModeOptions, ModeResult

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.setup import IndexMeta


class BridgeMode(Mode):
    """The client reranks the first-stage window through ``/v1/rerank`` (first-stage order on failure)."""

    name = "bridge"

    def __init__(
        self, stage: ElasticsearchFirstStage, beta: Mapping[str, float], window: int, sidecar: SidecarClient
    ) -> None:
        super().__init__(stage, beta, window)
        self.sidecar = sidecar

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        start = time.perf_counter()
        if ask.only is not None:  # rerank a given candidate list: every candidate, by first-stage score
            ids = [i for i in dict.fromkeys(ask.only) if not ask.exclude or i not in ask.exclude]
            scores = self.stage.score(ask.query, ids)
            found = sorted(zip(ids, map(float, scores), strict=True), key=lambda h: -h[1])
        else:
            found = self.stage.search(ask.query, ask.window, set(ask.exclude or ()))
        timings["first_stage"] = 1000 * (time.perf_counter() - start)
        bridge = BridgeSearch(self.stage, self.sidecar, window=ask.window)
        result = bridge.rerank(ask.query, found, ask.k, timings)
        hits = [(h.question.id, h.score) for h in result.hits]
        return ModeResult(hits, result.reranked, result.fallback_reason, result.timings_ms)


def build_bridge(stage: ElasticsearchFirstStage, meta: IndexMeta, options: ModeOptions) -> Mode:
    """A sidecar client with the target's timeout and token; nothing asked of the cluster."""
    client = SidecarClient.reaching(options.sidecar)
    return BridgeMode(stage, meta.beta(stage.similarity), options.window, client)


register_mode(ModeSpec(
    "bridge", build_bridge,
    "the client calls the sidecar on the first-stage window",
    engines=("elasticsearch", "opensearch"), order=2, suggest=4,
    sidecar="the client (`/v1/rerank` on the first-stage window); first-stage order, marked not reranked "
            "with the reason, when the sidecar is slow or down"))
