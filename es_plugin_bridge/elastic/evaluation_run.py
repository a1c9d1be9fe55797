"""``es evaluate``'s run through a cluster: a throw-away questions index for the run's collection, what
the mode needs registered for it (its registry entry's ``prepare``), the mode as the ``fused`` (or
``hybrid``, ``model``) ranker, and the per-query results written to the results index afterwards.

``EsEvaluationRun`` is the ``setup`` hook ``esrerank evaluate`` calls: everything ``es evaluate``
decides lives here, below the CLI. After the run, each of the mode's searches is asked again of the
in-process ranker it must equal (``elastic/parity.py``; ``parity`` False: not), and the mode's p50 / p95
latency and the requests each search sent (``elastic/request_count.py``) are kept beside its figures
(``TaskResult.parity``, ``TaskResult.cost``: the JSON's ``parity`` and ``cost``, the review page's badge).
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo, call
from es_plugin_bridge.elastic.modes import require
from es_plugin_bridge.elastic.run_cleanup import RunCleanup
from es_plugin_bridge.elastic.setup import IndexMeta
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient


def computed_by(rankers: list[str], mode_ranker: str) -> dict[str, str]:
    """Where each ranker of an ``es evaluate`` run is computed: the first stages (every similarity) search
    the run's index and the mode gives its own ranker (``engine``); ``given`` is the data's order
    (``data``); any other ranker (``model``, ``fused`` under ``--mode hybrid``...) ran here."""
    from es_plugin_bridge.engines.similarities import SIMILARITIES

    return {name: "engine" if name in SIMILARITIES or name == mode_ranker else
            "data" if name == "given" else "in process" for name in rankers}


@dataclass(frozen=True)
class EsEvaluationRun:
    """One ``es evaluate`` run's choices. ``sidecar_from_es``: the sidecar as the cluster reaches it
    (default: ``sidecar``'s URL); ``results_index`` None: no per-query results written."""

    connection: Any
    mode: str
    window: int
    sidecar: SidecarTarget
    first_stage: str = "bm25"
    sidecar_from_es: str | None = None
    knn: str = "exact"
    keep_index: bool = False
    results_index: str | None = "esrerank-runs"
    dataset: str = "data"
    #: Primary shards of the run's index; its searches use global statistics (``cluster/shards.py``), so
    #: the figures are the in-process ones on any number.
    shards: int = 1
    #: Replay the mode's searches on its in-process ranker afterwards (the run's cost: that ranker's).
    parity: bool = True

    def __post_init__(self) -> None:
        if self.first_stage == "given":
            raise UserError(
                "--first-stage given is the data's own order; Elasticsearch modes fuse bm25 or lmdirichlet")

    def __call__(self, stack: ExitStack, params: Any, model_dir: Path | None, progress: bool) -> Any:
        """``(engine factory, ranker options, after-run step)`` for ``evaluation.task_run.run_task``."""
        from es_plugin_bridge.bridge.sidecar_client import SidecarClient
        from es_plugin_bridge.elastic.modes import mode_spec
        from es_plugin_bridge.elastic.modes.factory import refuse_without_vectors
        from es_plugin_bridge.elastic.request_count import counting
        from es_plugin_bridge.elastic.setup import check_sidecar, meta_for_model
        from es_plugin_bridge.serving.model_dir import ModelDirectory
        from es_plugin_bridge.text import TextOptions

        if model_dir is None:
            raise UserError("es evaluate needs --model DIR: the export-onnx directory the sidecar serves")
        model = ModelDirectory.load(model_dir)
        embedder = SidecarClient.reaching(self.sidecar, timeout=max(self.sidecar.timeout, 60.0))
        meta = meta_for_model(model, check_sidecar(embedder, model), TextOptions())
        refuse_without_vectors(self.mode, meta)  # before any index or endpoint is made
        meta.beta(self.first_stage)
        opened = self.connection.open()
        client, cluster = opened.client, opened.info
        require(cluster, self.mode)
        index = f"esrerank-eval-{uuid.uuid4().hex[:10]}"
        cleanup = stack.enter_context(RunCleanup(self.connection.url))
        if not self.keep_index:  # removed last, after what the mode registered for it (LIFO)
            cleanup.remove(f"index {index}", "DELETE", f"/{index}", call, f"deleting {index}",
                           client.options(ignore_status=404).indices.delete, index=index)
        spec = mode_spec(self.mode)
        prepare = spec.prepare
        if prepare is not None:
            meta = prepare(client, index, meta, self.sidecar_from_es or self.sidecar.url, self.sidecar.token,
                           cluster, cleanup)
        if not spec.needs_vectors:
            meta = replace(meta, dimension=None)
        made: list[Any] = []
        engine_factory = self._engine_factory(index, meta, embedder, params, progress, stack)
        fused = self._ranker_factory(meta, cluster, made, stack.enter_context(counting()))
        # The in-process ranker whose order the mode gives (fused; hybrid; model for OpenSearch's rerank).
        overrides = {"overrides": {spec.ranker: fused}, "fused_first_stage": self.first_stage}
        return engine_factory, overrides, lambda result: self._after(result, client, cluster, index, made)

    def _engine_factory(self, index: str, meta: IndexMeta, embedder: Any, params: Any, progress: bool,
                        stack: ExitStack) -> Any:
        from es_plugin_bridge.elastic.engine import open_engine
        from es_plugin_bridge.engines.registry import EngineContext

        # "keep": the run's RunCleanup deletes the index (and says so when it cannot), not the engine.
        options = {"connection": self.connection, "index": index, "keep": True,
                   "embed": embedder.embed if meta.dimension is not None else None,
                   "dimension": meta.dimension, "neural_similarity": meta.neural_similarity,
                   "meta": meta.as_dict(), "shards": self.shards}
        return lambda tokens: open_engine(EngineContext(tokens=tokens, params=params, progress=progress,
                                                        cleanup=stack, options=options))

    def _ranker_factory(self, meta: IndexMeta, cluster: ClusterInfo, made: list[Any], requests: Any) -> Any:
        from es_plugin_bridge.elastic.modes.factory import make_mode
        from es_plugin_bridge.elastic.ranker import ModeRanker

        def fused(context: Any) -> Any:
            searcher = make_mode(self.mode, context.first_stage(self.first_stage), meta, window=self.window,
                                 sidecar=self.sidecar, cluster=cluster, knn=self.knn)
            made.append(ModeRanker(context, searcher, requests))
            return made[-1]

        return fused

    def _after(self, result: Any, client: SearchClient, cluster: ClusterInfo, index: str,
               made: list[Any]) -> None:
        """Notes on the run (fallbacks, the cluster) and its per-query results in the results index."""
        from es_plugin_bridge.elastic.modes import mode_spec
        from es_plugin_bridge.elastic.results_index import index_results, results_documents, results_run_id

        for ranker in made:
            if ranker.fallbacks:
                result.notes.append(f"mode bridge kept the first-stage order for {len(ranker.fallbacks)} "
                                    f"queries (first: {ranker.fallbacks[0]})")
        mine = mode_spec(self.mode).ranker
        result.computed_by = computed_by(list(result.rankers), mine)
        if mine in result.rankers:
            result.notes.append(f"{cluster.name} ({cluster.licence}), index {index}, "
                                f"{mine} = mode {self.mode} over {self.first_stage}")
        else:
            result.notes.append(f"{cluster.name} ({cluster.licence}), index {index}; mode {self.mode} gives "
                                f"ranker {mine}, which --rankers did not ask for")
        if mine in result.rankers and made:
            self._parity_and_cost(result, mine, made[-1])
        here = [name for name, where in result.computed_by.items() if where == "in process"]
        if here:
            result.notes.append(f"computed in process, not by the cluster: {', '.join(here)} (mode "
                                f"{self.mode} gives {mine}; ask --rankers with {mine} for its figures)")
        if self.results_index is None:
            return
        labels = {"dataset": self.dataset, "engine": cluster.engine, "mode": self.mode}
        run_id = results_run_id(result, **labels)
        docs = results_documents(result, run_id=run_id, **labels)
        indexed, errors = call(f"writing results to {self.results_index}", index_results, client,
                               self.results_index, docs)
        if errors:
            raise UserError(f"{len(errors)} of {len(docs)} per-query results were refused by "
                            f"{self.results_index}: {errors[0]}")
        result.notes.append(f"run {run_id}: {indexed} per-query results in index {self.results_index}")

    def _parity_and_cost(self, result: Any, ranker: str, made: Any) -> None:
        """The mode's searches replayed on its in-process ranker (``parity``), and what they cost."""
        from es_plugin_bridge.elastic.parity import in_process_ranker, parity, unchecked
        from es_plugin_bridge.elastic.request_count import by_target
        from es_plugin_bridge.evaluation.review_data import latency_percentiles

        records = result.rankers[ranker].per_query
        if self.parity:
            try:
                reference = in_process_ranker(self.mode, made.context, self.window)
                result.parity[ranker] = parity(self.mode, ranker, records, made.asked, reference)
            except UserError as exc:  # the run's figures stand; the check says why it was not made
                result.parity[ranker] = unchecked(self.mode, ranker, len(records), f"in process: {exc}")
            result.notes.append(f"mode {self.mode}: {result.parity[ranker]['badge']} (against {ranker} in "
                                "process, each query's list in order)")
        cost: dict[str, Any] = {"mode": self.mode, "searches": len(made.asked),
                                **latency_percentiles(result.rankers[ranker].latencies)}
        if made.sent:
            sent = [by_target(one, self.connection.urls, self.sidecar.url) for one in made.sent]
            targets = sorted({key for one in sent for key in one})
            cost["requests_per_search"] = {key: round(sum(one.get(key, 0) for one in sent) / len(sent), 2)
                                           for key in targets}
        result.cost[ranker] = cost
