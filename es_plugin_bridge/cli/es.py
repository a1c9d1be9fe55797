"""``esrerank es ...``: the product against a real Elasticsearch cluster.

- ``es setup MODEL_DIR``: the questions index for that model, and the sidecar as an inference endpoint;
- ``es index SPEC...``: questions with their vectors and BOW terms (from the sidecar), in batches;
- ``es search QUERY --mode MODE``: one reranked query, in any registered mode (``elastic/modes/``: the
  choices and each mode's own options are read from the registry);
- ``es evaluate``: ``esrerank evaluate`` with every ranker run through Elasticsearch and ``fused``
  computed by ``--mode``; per-query results also go to an index that Kibana reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from es_plugin_bridge.cli.es_options import (
    connection_options,
    pop_connection,
    sidecar_options,
    sidecar_target,
)
from es_plugin_bridge.cli.mode_options import ModeChoice, ModeCommand
from es_plugin_bridge.cli.query_text import query_text
from es_plugin_bridge.core.fusion import FIRST_STAGES
from es_plugin_bridge.defaults import DEFAULT_INDEX
from es_plugin_bridge.errors import UserError

MODE_CHOICE = ModeChoice()
STAGE_CHOICE = click.Choice(FIRST_STAGES)

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
    "--no-vectors", is_flag=True,
    help="No dense_vector (OpenSearch: knn_vector) or rank_features fields (modes native, rerank, bridge).",
)
@click.option(
    "--embed-at-ingest", is_flag=True,
    help="OpenSearch: the index's ingest pipeline embeds each question (ml-commons models calling the "
    "sidecar's /v1/encode, neural-search's text_embedding and sparse_encoding processors), so es index "
    "sends the text only. Elasticsearch embeds at ingest wherever its licence allows; there this flag "
    "makes setup fail when it cannot.",
)
@click.option(
    "--from-index",
    default=None,
    metavar="THEIRS",
    help="Take the questions from your own index THEIRS, which the cluster embeds (Elasticsearch: needs "
    "enterprise or trial, 8.19/9.1+; OpenSearch: ml-commons and neural-search; a model without vectors "
    "needs neither): copied into --index by _reindex, or extended with --in-place.",
)
@click.option("--title-field", default="title", show_default=True, help="With --from-index: the title field.")
@click.option("--body-field", default="body", show_default=True, help="With --from-index: the body field.")
@click.option("--id-field", default=None, help="With --from-index: a field to use as the question id "
              "(default: their _id).")
@click.option("--in-place", is_flag=True, help="With --from-index: add the reranker's fields to THEIRS "
              "(_update_by_query) instead of copying it; first stage bm25 only.")
@click.option("--shards", type=click.IntRange(min=1), default=1, show_default=True,
              help="Primary shards of the new index (raise it past ~10-50 GB of questions, or to spread "
              "the search over nodes; every mode stays exact: docs/scaling-out.md).")
@click.option("--replicas", type=click.IntRange(min=0), default=None,
              help="Copies of each shard on other nodes (default: the cluster's, 1).")
@click.option("--no-progress", is_flag=True)
@connection_options
def setup_command(
    model_dir: Path,
    index_name: str,
    sidecar_url: str,
    token: str | None,
    timeout: float,
    sidecar_ca_certs: str | None,
    sidecar_from_es: str | None,
    recreate: bool,
    no_vectors: bool,
    embed_at_ingest: bool,
    from_index: str | None,
    title_field: str,
    body_field: str,
    id_field: str | None,
    in_place: bool,
    shards: int,
    replicas: int | None,
    no_progress: bool,
    **conn: Any,
) -> None:
    """Create the index for MODEL_DIR (an export-onnx directory) and register the sidecar as a reranker
    (and, where the licence allows, as the embedder of an ingest pipeline)."""
    from es_plugin_bridge.elastic.cluster.shards import IndexLayout
    from es_plugin_bridge.elastic.provision import FromIndex, setup_index

    if from_index is None and (in_place or id_field or (title_field, body_field) != ("title", "body")):
        raise UserError("--in-place, --title-field, --body-field and --id-field go with --from-index")
    if in_place and recreate:
        raise UserError("--recreate deletes an index; it does not go with --in-place (your index)")
    if embed_at_ingest and no_vectors:
        raise UserError("--embed-at-ingest: an index made with --no-vectors holds nothing to embed")
    source = None if from_index is None else FromIndex(from_index, title_field, body_field, id_field,
                                                       in_place)
    sidecar = sidecar_target(sidecar_url, token, timeout, sidecar_ca_certs)
    done = setup_index(pop_connection(conn), model_dir, index_name, sidecar, sidecar_from_es=sidecar_from_es,
                       recreate=recreate, no_vectors=no_vectors, embed_at_ingest=embed_at_ingest,
                       source=source, progress=not no_progress, layout=IndexLayout(shards, replicas))
    for line in done.lines:
        click.echo(line)
    if from_index is None:
        click.echo(f"next: esrerank es index SPEC --index {done.index}")
    else:
        click.echo(f"next: esrerank es search QUERY --index {done.index} --mode {done.suggested_mode}")


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
@click.option("--dry-run", is_flag=True, help="Write the _bulk NDJSON to --out instead of sending it: no "
              "cluster or sidecar needed (an index with vectors embeds it in its ingest pipeline).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --dry-run: the file to write.")
@click.option("--vectors", "vectors_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Take each question's vector and terms from this file of `esrerank embed` (made with the "
              "index's model) instead of asking the sidecar, which need not run.")
@connection_options
def index_command(
    specs: tuple[str, ...],
    index_name: str,
    sidecar_url: str,
    token: str | None,
    timeout: float,
    sidecar_ca_certs: str | None,
    batch_size: int,
    resume: bool,
    max_retries: int,
    skip_bad: bool,
    no_progress: bool,
    dry_run: bool,
    out_file: Path | None,
    vectors_file: Path | None,
    **conn: Any,
) -> None:
    """Index the questions of SPEC (FORMAT:PATH, repeatable) with their vectors and BOW terms.

    Where ``es setup`` made an ingest pipeline, the cluster embeds them (Elasticsearch where its licence
    allows; OpenSearch after ``es setup --embed-at-ingest``); otherwise this client asks the sidecar.
    An index without vectors (a cross-encoder's, or --no-vectors) gets the text only.
    ``--dry-run --out FILE`` writes the bulk body instead; ``--vectors FILE`` stores what
    ``esrerank embed`` wrote (no sidecar)."""
    from es_plugin_bridge.cli.rerun import finish_index_run
    from es_plugin_bridge.elastic.indexing import index_run
    from es_plugin_bridge.text import Preprocessor

    if dry_run != (out_file is not None):
        raise UserError("--dry-run and --out go together")
    if dry_run and vectors_file is not None:
        raise UserError("--vectors goes with a real run, not --dry-run")
    questions = read_questions(specs, skip_bad)
    if dry_run:
        from es_plugin_bridge.elastic.bulk_file import write_bulk_file
        from es_plugin_bridge.text import TextOptions

        assert out_file is not None
        count = write_bulk_file(out_file, index_name, questions.values(), Preprocessor(TextOptions()).tokens)
        click.echo(f"wrote {count} questions for index {index_name} to {out_file} (_bulk NDJSON of the text; "
                   "where the index holds vectors, its ingest pipeline adds them when it is sent)")
        return
    sidecar = sidecar_target(sidecar_url, token, timeout, sidecar_ca_certs)
    run = index_run(pop_connection(conn).client(), index_name, list(questions.values()),
                    sidecar, batch_size=batch_size, resume=resume,
                    max_retries=max_retries, progress=not no_progress,
                    note=lambda line: click.echo(line, err=True), vectors=vectors_file)
    finish_index_run(run)


def read_questions(specs: tuple[str, ...], skip_bad: bool) -> dict[str, Any]:
    """The questions of every SPEC by id (the first of an id wins), saying how many records were skipped."""
    from es_plugin_bridge.data.spec import read_spec

    questions: dict[str, Any] = {}
    for spec in specs:
        data = read_spec(spec, skip_bad=skip_bad)
        if data.skipped:
            click.echo(f"{spec}: skipped {data.skipped} malformed records (--skip-bad)", err=True)
        for q in data.questions.values():
            questions.setdefault(q.id, q)
    return questions


allow_failures_option = click.option(
    "--allow-rerank-failures",
    is_flag=True,
    help="Mode native (Elasticsearch 8.19/9.1+): if Elasticsearch cannot reach the sidecar, answer in "
    "first-stage order instead of failing the search (Elasticsearch does not mark such answers).",
)

@es_group.command("search", cls=ModeCommand)
@click.argument("query", nargs=-1, required=True)
@click.option("--mode", type=MODE_CHOICE, default=None,
              help="How to rerank (default: the first mode this cluster runs on the index, as es setup's "
              "last line names it: learned-hybrid where the index holds vectors and the model its fit).")
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
@click.option("--shard-statistics", is_flag=True,
              help="Score the first stage with each shard's own statistics: one round-trip less on an index "
              "of several shards, but not the embedded engine's scores (default: global statistics, "
              "dfs_query_then_fetch; docs/scaling-out.md).")
@allow_failures_option
@index_option
@sidecar_options
@connection_options
def search_command(
    query: tuple[str, ...],
    mode: str | None,
    first_stage: str,
    top: int,
    window: int,
    explain: bool,
    as_json: bool,
    shard_statistics: bool,
    allow_rerank_failures: bool,
    index_name: str,
    sidecar_url: str,
    token: str | None,
    timeout: float,
    sidecar_ca_certs: str | None,
    mode_options: dict[str, Any],
    **conn: Any,
) -> None:
    """Search QUERY in the index, reranked in the given mode."""
    from es_plugin_bridge.cli.search_output import print_json, print_table
    from es_plugin_bridge.data.questions import question_from_text
    from es_plugin_bridge.elastic.modes.factory import open_mode

    text = query_text(query)
    if not text.strip():
        raise UserError("the query is empty")
    searcher = open_mode(pop_connection(conn).open(), index_name, mode, first_stage, window=window,
                         sidecar=sidecar_target(sidecar_url, token, timeout, sidecar_ca_certs),
                         allow_rerank_failures=allow_rerank_failures, **mode_options,
                         global_statistics=not shard_statistics)
    mode = searcher.name
    result = searcher.search(question_from_text(text), top)
    # The modes' searches bring their hits' titles; only those they do not (hybrid) are read, in one mget.
    found = searcher.stage.questions([doc for doc, _ in result.hits])
    hits = [{"id": doc, "title": q.title, "score": score}
            for (doc, score), q in zip(result.hits, found, strict=True)]
    if as_json:
        print_json({"mode": mode, "first_stage": first_stage, "reranked": result.reranked,
                    "fallback_reason": result.fallback_reason, "note": result.note,
                    "timings_ms": result.timings_ms, "hits": hits,
                    **({"request": result.request} if explain else {})})
    else:
        print_table(f"{index_name}: mode {mode}, {first_stage}", hits, reranked=result.reranked,
                    fallback_reason=result.fallback_reason, note=result.note,
                    explain={"timings_ms": result.timings_ms, "request": result.request} if explain else None)


def _register() -> None:
    from es_plugin_bridge.cli.es_evaluate import es_evaluate

    es_group.add_command(es_evaluate)


_register()
