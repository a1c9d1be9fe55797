"""``esrerank es ...``: the product against a real Elasticsearch cluster.

- ``es setup MODEL_DIR``: the questions index for that model, and the sidecar as an inference endpoint;
- ``es index SPEC...``: questions with their vectors and BOW terms (from the sidecar), in batches;
- ``es search QUERY --mode native|vectors|bridge``: one reranked query;
- ``es evaluate``: ``esrerank evaluate`` with every ranker run through Elasticsearch and ``fused``
  computed by ``--mode``; per-query results also go to an index that Kibana reads.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from es_plugin_bridge.cli.es_options import connection_options, pop_connection, sidecar_options
from es_plugin_bridge.errors import UserError

DEFAULT_INDEX = "esrerank-questions"
MODE_CHOICE = click.Choice(["native", "vectors", "bridge"])
STAGE_CHOICE = click.Choice(["bm25", "lmdirichlet"])

index_option = click.option(
    "--index",
    "index_name",
    envvar="ESRERANK_ES_INDEX",
    default=DEFAULT_INDEX,
    show_default=True,
    help="The questions index [env ESRERANK_ES_INDEX].",
)


@click.group("es", context_settings={"help_option_names": ["-h", "--help"]})
def es_group() -> None:
    """Set up, fill, search and evaluate an Elasticsearch index with the neural reranker."""


@es_group.command("setup")
@click.argument("model_dir", type=click.Path(path_type=Path, file_okay=False))
@index_option
@sidecar_options
@click.option(
    "--sidecar-from-es",
    "sidecar_from_es",
    envvar="ESRERANK_SIDECAR_FROM_ES",
    default=None,
    help="The sidecar's URL as Elasticsearch reaches it (e.g. http://sidecar:8080 in docker "
    "compose); default: --sidecar [env ESRERANK_SIDECAR_FROM_ES].",
)
@click.option("--recreate", is_flag=True, help="Delete the index first if it exists.")
@click.option(
    "--no-vectors", is_flag=True, help="No dense_vector/rank_features fields (modes native, bridge)."
)
@connection_options
def setup_command(
    model_dir: Path,
    index_name: str,
    sidecar_url: str,
    token: str | None,
    timeout: float,
    sidecar_from_es: str | None,
    recreate: bool,
    no_vectors: bool,
    **conn: Any,
) -> None:
    """Create the index for MODEL_DIR (an export-onnx directory) and register the sidecar as a reranker."""
    from es_plugin_bridge.elastic.connection import call, cluster_info
    from es_plugin_bridge.elastic.embedding import SidecarEmbedder
    from es_plugin_bridge.elastic.first_stage import ElasticsearchEngine
    from es_plugin_bridge.elastic.setup import check_sidecar, meta_for_model, register_endpoints
    from es_plugin_bridge.serving.model_dir import ModelDirectory
    from es_plugin_bridge.text import Preprocessor, TextOptions

    connection = pop_connection(conn)
    model = ModelDirectory.load(model_dir)  # verifies the manifest before anything is created
    ready = check_sidecar(SidecarEmbedder(sidecar_url, token=token, timeout=max(timeout, 10.0)))
    meta = meta_for_model(model, ready, TextOptions())
    client = connection.client()
    cluster = cluster_info(client)
    if call("checking the index", client.indices.exists, index=index_name):
        if not recreate:
            raise UserError(f"index {index_name} already exists (--recreate deletes it first)")
        call(f"deleting {index_name}", client.indices.delete, index=index_name)
    endpoints, native_off = register_endpoints(
        client, index_name, meta, sidecar_from_es or sidecar_url, token, cluster
    )
    meta = replace(meta, inference=endpoints)
    if no_vectors:
        meta = replace(meta, dimension=None)
    engine = ElasticsearchEngine(
        client,
        index_name,
        Preprocessor(TextOptions()).tokens,
        dimension=meta.dimension,
        neural_similarity=meta.neural_similarity,
        meta=meta.as_dict(),
    )
    engine.create()
    click.echo(
        f"created index {index_name} for {meta.model} ({meta.model_type}, "
        f"{'no vectors' if meta.dimension is None else f'{meta.dimension}-d vectors'}) on Elasticsearch "
        f"{cluster.version_text} ({cluster.licence} licence)"
    )
    for stage, endpoint in endpoints.items():
        click.echo(f"registered inference endpoint {endpoint} (first stage {stage})")
    click.echo(f"mode native:  {'ready' if endpoints else 'unavailable: ' + str(native_off)}")
    if meta.dimension is None:
        click.echo("mode vectors: unavailable (--no-vectors)")
    else:
        how = ("one call (rescorer retriever)" if cluster.paid
               else f"two calls ({cluster.licence} licence: the linear retriever needs enterprise or trial)")
        click.echo(f"mode vectors: ready, {how}")
    click.echo("mode bridge:  ready")
    click.echo(f"next: esrerank es index SPEC --index {index_name}")


@es_group.command("index")
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@index_option
@sidecar_options
@click.option("--batch-size", default=200, show_default=True, type=click.IntRange(min=1))
@click.option("--resume", is_flag=True, help="Skip questions already in the index (re-run after a failure).")
@click.option(
    "--max-retries",
    default=5,
    show_default=True,
    type=click.IntRange(min=0),
    help="Retries of 429/5xx answers, with exponential back-off.",
)
@click.option("--skip-bad", is_flag=True, help="Skip malformed records of the data (counted).")
@click.option("--no-progress", is_flag=True)
@connection_options
def index_command(
    specs: tuple[str, ...],
    index_name: str,
    sidecar_url: str,
    token: str | None,
    timeout: float,
    batch_size: int,
    resume: bool,
    max_retries: int,
    skip_bad: bool,
    no_progress: bool,
    **conn: Any,
) -> None:
    """Index the questions of SPEC (FORMAT:PATH, repeatable) with their vectors and BOW terms."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.elastic.bulk import index_questions
    from es_plugin_bridge.elastic.connection import call
    from es_plugin_bridge.elastic.embedding import SidecarEmbedder
    from es_plugin_bridge.elastic.first_stage import ElasticsearchEngine
    from es_plugin_bridge.elastic.setup import read_meta
    from es_plugin_bridge.text import Preprocessor

    client = pop_connection(conn).client()
    meta = read_meta(client, index_name)
    questions: dict[str, Any] = {}
    for spec in specs:
        data = read_spec(spec, skip_bad=skip_bad)
        if data.skipped:
            click.echo(f"{spec}: skipped {data.skipped} malformed records (--skip-bad)", err=True)
        for q in data.questions.values():
            questions.setdefault(q.id, q)
    embed = None
    if meta.dimension is not None:
        embedder = SidecarEmbedder(sidecar_url, token=token, timeout=max(timeout, 60.0))
        embedder.ready()
        embed = embedder.embed
    engine = ElasticsearchEngine(client, index_name, Preprocessor(meta.text_options()).tokens, embed=embed)
    report = index_questions(
        client,
        index_name,
        list(questions.values()),
        engine.actions,
        batch_size=batch_size,
        resume=resume,
        max_retries=max_retries,
        progress=not no_progress,
    )
    call(f"refreshing {index_name}", client.indices.refresh, index=index_name)
    for line in report.lines():
        click.echo(line)
    if not report.ok:
        click.echo(
            f"error: {report.failed} questions were not indexed; fix the cause and re-run with --resume",
            err=True,
        )
        sys.exit(1)


def _open_mode(
    client: Any,
    index_name: str,
    mode: str,
    first_stage: str,
    *,
    window: int,
    sidecar_url: str,
    token: str | None,
    timeout: float,
    allow_rerank_failures: bool = False,
) -> Any:
    from es_plugin_bridge.elastic.connection import cluster_info
    from es_plugin_bridge.elastic.first_stage import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.modes import make_mode
    from es_plugin_bridge.elastic.setup import read_meta
    from es_plugin_bridge.text import Preprocessor

    meta = read_meta(client, index_name)
    stage = ElasticsearchFirstStage(client, index_name, first_stage, Preprocessor(meta.text_options()).tokens)
    return make_mode(
        mode,
        stage,
        meta,
        window=window,
        sidecar_url=sidecar_url,
        token=token,
        timeout=timeout,
        cluster=cluster_info(client),
        allow_rerank_failures=allow_rerank_failures,
    )


allow_failures_option = click.option(
    "--allow-rerank-failures",
    is_flag=True,
    help="Mode native (Elasticsearch 8.19/9.1+): if Elasticsearch cannot reach the sidecar, answer in "
    "first-stage order instead of failing the search (Elasticsearch does not mark such answers).",
)


@es_group.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--mode", type=MODE_CHOICE, default="bridge", show_default=True, help="How to rerank.")
@click.option("--first-stage", type=STAGE_CHOICE, default="bm25", show_default=True)
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--window",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="First-stage hits that are reranked.",
)
@click.option("--explain", is_flag=True, help="Also print the request body sent and the timings.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@allow_failures_option
@index_option
@sidecar_options
@connection_options
def search_command(
    query: tuple[str, ...],
    mode: str,
    first_stage: str,
    top: int,
    window: int,
    explain: bool,
    as_json: bool,
    allow_rerank_failures: bool,
    index_name: str,
    sidecar_url: str,
    token: str | None,
    timeout: float,
    **conn: Any,
) -> None:
    """Search QUERY in the index, reranked in the given mode."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from es_plugin_bridge.data.readers._common import question_from_text

    text = " ".join(query)
    if not text.strip():
        raise UserError("the query is empty")
    client = pop_connection(conn).client()
    searcher = _open_mode(
        client,
        index_name,
        mode,
        first_stage,
        window=window,
        sidecar_url=sidecar_url,
        token=token,
        timeout=timeout,
        allow_rerank_failures=allow_rerank_failures,
    )
    result = searcher.search(question_from_text(text), top)
    hits = [
        {"id": doc, "title": searcher.stage.question(doc).title, "score": score} for doc, score in result.hits
    ]
    if as_json:
        out: dict[str, Any] = {
            "mode": mode,
            "first_stage": first_stage,
            "reranked": result.reranked,
            "fallback_reason": result.fallback_reason,
            "note": result.note,
            "timings_ms": result.timings_ms,
            "hits": hits,
        }
        if explain:
            out["request"] = result.request
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    how = f"mode {mode}, {first_stage}" + ("" if result.reranked else ", first-stage order")
    table = Table(title=escape(f"{index_name}: {how}"))
    for name, justify in (("#", "right"), ("score", "right"), ("id", "left"), ("title", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for rank, hit in enumerate(hits, start=1):
        table.add_row(str(rank), f"{hit['score']:.4f}", escape(hit["id"]), escape(hit["title"]))
    console = Console()
    console.print(table)
    if result.fallback_reason:
        console.print(f"[yellow]not reranked: {escape(result.fallback_reason)}[/yellow]")
    if result.note:
        console.print(f"[yellow]{escape(result.note)}[/yellow]")
    if explain:
        console.print_json(json.dumps({"timings_ms": result.timings_ms, "request": result.request}))


def _register() -> None:
    from es_plugin_bridge.cli.es_evaluate import es_evaluate

    es_group.add_command(es_evaluate)


_register()
