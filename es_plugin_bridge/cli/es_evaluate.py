"""``esrerank es evaluate``: ``esrerank evaluate`` (same tasks, options and JSON) run through Elasticsearch.

The run's collection goes into a throw-away index (so collection statistics are the run's own, as in
process); every first-stage ranker searches it; ``fused`` is computed by ``--mode`` (native, vectors
or bridge) instead of in process; per-query results also go to the results index that the Kibana
dashboards read (``--results-index``, default ``esrerank-runs``).
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from es_plugin_bridge.cli.es_options import pop_connection, sidecar_click_options, sidecar_target
from es_plugin_bridge.cli.evaluate import evaluate
from es_plugin_bridge.elastic.mode_registry import mode_names
from es_plugin_bridge.errors import UserError

EXTRA = [
    click.Option(
        ["--mode"],
        type=click.Choice(list(mode_names())),
        default="bridge",
        show_default=True,
        help="How Elasticsearch computes the fused ranker (hybrid, hybrid-rrf: those rankers instead).",
    ),
    click.Option(
        ["--knn"],
        type=click.Choice(["exact", "hnsw"]),
        default="exact",
        show_default=True,
        help="Modes hybrid, hybrid-rrf: exact script_score (the in-process order) or approximate HNSW knn.",
    ),
    click.Option(
        ["--window"],
        type=click.IntRange(min=1),
        default=100,
        show_default=True,
        help="retrieval: first-stage hits that fused reranks (rerank: all candidates).",
    ),
    click.Option(
        ["--sidecar-from-es"],
        envvar="ESRERANK_SIDECAR_FROM_ES",
        default=None,
        help="The sidecar as Elasticsearch reaches it (mode native); default: --sidecar.",
    ),
    *sidecar_click_options(),
    click.Option(
        ["--results-index"],
        envvar="ESRERANK_RESULTS_INDEX",
        default="esrerank-runs",
        show_default=True,
        help="Index of per-query results for Kibana [env ESRERANK_RESULTS_INDEX].",
    ),
    click.Option(
        ["--no-results-index"], is_flag=True, help="Do not write per-query results to Elasticsearch."
    ),
    click.Option(
        ["--dataset"], default=None, help="Data set name in the results index (default: from the spec)."
    ),
    click.Option(["--keep-index"], is_flag=True, help="Keep the run's questions index (esrerank-eval-...)."),
]


def _setup(options: dict[str, Any], conn: Any, first_stage: str | None) -> Any:
    """The hook ``evaluate`` calls: (engine factory, ranker context options, after-run step)."""
    mode, window = options["mode"], options["window"]
    sidecar = sidecar_target(options["sidecar_url"], options["token"], options["timeout"])
    sidecar_url, token, timeout = sidecar.url, sidecar.token, sidecar.timeout
    stage_name = first_stage or "bm25"
    if stage_name == "given":
        raise UserError(
            "--first-stage given is the data's own order; Elasticsearch modes fuse bm25 or lmdirichlet"
        )

    def setup(stack: ExitStack, params: Any, model_dir: Path | None, progress: bool) -> Any:
        from es_plugin_bridge.elastic.connection import call, cluster_info
        from es_plugin_bridge.elastic.engine import open_engine
        from es_plugin_bridge.elastic.mode_factory import make_mode, refuse_without_vectors
        from es_plugin_bridge.elastic.mode_registry import mode_spec
        from es_plugin_bridge.elastic.ranker import ModeRanker
        from es_plugin_bridge.elastic.results_index import index_results, results_documents, results_run_id
        from es_plugin_bridge.elastic.setup import check_sidecar, meta_for_model, register_endpoints
        from es_plugin_bridge.elastic.sidecar_embedder import SidecarEmbedder
        from es_plugin_bridge.engines.registry import EngineContext
        from es_plugin_bridge.serving.model_dir import ModelDirectory
        from es_plugin_bridge.text import TextOptions

        if model_dir is None:
            raise UserError("es evaluate needs --model DIR: the export-onnx directory the sidecar serves")
        model = ModelDirectory.load(model_dir)
        embedder = SidecarEmbedder.reaching(sidecar, timeout=max(timeout, 60.0))
        meta = meta_for_model(model, check_sidecar(embedder, model), TextOptions())
        refuse_without_vectors(mode, meta)  # before any index or endpoint is made
        meta.beta(stage_name)
        client = conn.client()
        cluster = cluster_info(client)
        cluster.require(mode)
        name = f"esrerank-eval-{uuid.uuid4().hex[:10]}"
        if mode == "native":
            endpoints, why = register_endpoints(
                client, name, meta, options["sidecar_from_es"] or sidecar_url, token, cluster
            )
            if why:
                raise UserError(why)
            for endpoint in endpoints.values():
                stack.callback(
                    call,
                    f"deleting {endpoint}",
                    client.options(ignore_status=404).inference.delete,
                    inference_id=endpoint,
                    force=True,
                )
            meta = replace(meta, inference=endpoints)
        if mode == "rerank":  # OpenSearch calls the sidecar through a search pipeline made for this run
            from es_plugin_bridge.elastic.opensearch_rerank import register_rerank, unregister_rerank

            registered = register_rerank(client, name, options["sidecar_from_es"] or sidecar_url, token)
            stack.callback(unregister_rerank, client, registered)
            meta = replace(meta, search_pipeline=registered["search_pipeline"])
        if not mode_spec(mode).needs_vectors:
            meta = replace(meta, dimension=None)

        def engine_factory(tokens: Any) -> Any:
            engine_options = {
                "connection": conn,
                "index": name,
                "keep": options["keep_index"],
                "embed": embedder.embed if meta.dimension is not None else None,
                "dimension": meta.dimension,
                "neural_similarity": meta.neural_similarity,
                "meta": meta.as_dict(),
            }
            return open_engine(
                EngineContext(
                    tokens=tokens, params=params, progress=progress, cleanup=stack, options=engine_options
                )
            )

        made: list[ModeRanker] = []
        # The in-process ranker whose order the mode gives (fused; hybrid; model for OpenSearch's rerank).
        ranker_name = mode_spec(mode).ranker

        def fused(context: Any) -> ModeRanker:
            searcher = make_mode(
                mode,
                context.first_stage(stage_name),
                meta,
                window=window,
                sidecar=sidecar,
                cluster=cluster,
                knn=options["knn"],
            )
            made.append(ModeRanker(context, searcher))
            return made[-1]

        def after(result: Any) -> None:
            for ranker in made:
                if ranker.fallbacks:
                    result.notes.append(
                        f"mode bridge kept the first-stage order for {len(ranker.fallbacks)} "
                        f"queries (first: {ranker.fallbacks[0]})"
                    )
            result.notes.append(
                f"{cluster.name} ({cluster.licence}), index {name}, {ranker_name} = mode {mode} over "
                f"{stage_name}"
            )
            if options["no_results_index"]:
                return
            dataset = options["dataset"] or _dataset(options)
            run_id = results_run_id(result, dataset=dataset, engine=cluster.engine, mode=mode)
            docs = results_documents(result, run_id=run_id, dataset=dataset, engine=cluster.engine, mode=mode)
            with_errors = call(
                f"writing results to {options['results_index']}",
                index_results,
                client,
                options["results_index"],
                docs,
            )
            indexed, errors = with_errors
            if errors:
                raise UserError(
                    f"{len(errors)} of {len(docs)} per-query results were refused by "
                    f"{options['results_index']}: {errors[0]}"
                )
            result.notes.append(
                f"run {run_id}: {indexed} per-query results in index {options['results_index']}"
            )

        return engine_factory, {"overrides": {ranker_name: fused}, "fused_first_stage": stage_name}, after

    return setup


def _dataset(options: dict[str, Any]) -> str:
    spec = options.get("data_spec") or options.get("queries_spec") or "data"
    return Path(str(spec).partition(":")[2] or str(spec)).name


def _callback(**kwargs: Any) -> None:
    options = {opt.name: kwargs.pop(opt.name) for opt in EXTRA}
    keys = ("es_url", "es_api_key", "es_username", "es_password", "es_ca_certs", "es_timeout")
    connection = {key: kwargs[key] for key in keys}
    conn = pop_connection(dict(connection))
    setup = _setup(options, conn, kwargs.get("fused_first_stage"))
    evaluate.callback(**kwargs, engine="elasticsearch", setup=setup)  # type: ignore[misc]


es_evaluate = click.Command(
    "evaluate",
    params=[p for p in evaluate.params if p.name != "engine"] + EXTRA,
    callback=_callback,
    help="The same tasks, options and JSON as `esrerank evaluate`, each ranker run through Elasticsearch; "
    "fused is computed by --mode. Needs --model DIR (the directory the sidecar serves).",
)
