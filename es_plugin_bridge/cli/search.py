"""``esrerank search``: the bridge from the command line — a first stage (the embedded engine over
``--corpus``, or an Elasticsearch index with ``--engine elasticsearch``), sidecar rerank, first-stage
order when the sidecar is slow or down."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from es_plugin_bridge.cli.es_options import (
    connection_options,
    engine_option,
    pop_connection,
    sidecar_option,
    sidecar_target,
)
from es_plugin_bridge.errors import UserError


@click.command("search", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("query", nargs=-1, required=True)
@click.option("--corpus", "corpus_specs", metavar="SPEC", multiple=True,
              help="FORMAT:PATH of the questions to search (repeatable; the embedded engine).")
@engine_option("First stage: the embedded engine over --corpus, or the index of `es setup`/`es index`.")
@click.option("--index", "index_name", envvar="ESRERANK_ES_INDEX", default="esrerank-questions",
              show_default=True, help="--engine elasticsearch: the questions index.")
@sidecar_option("--sidecar", metavar="URL", envvar=None, default=None, show_default=False,
                help="Base URL of `esrerank serve` (e.g. http://127.0.0.1:8080); omitted: first stage only.")
@sidecar_option("--token")
@click.option("--similarity", default="bm25", show_default=True,
              type=click.Choice(["bm25", "lmdirichlet"]), help="First stage (its β is used for fusion).")
@click.option("--window", default=100, show_default=True, type=click.IntRange(min=1),
              help="First-stage hits sent to the sidecar.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1))
@sidecar_option("--timeout")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@connection_options
def search_command(query: tuple[str, ...], corpus_specs: tuple[str, ...], engine: str, index_name: str,
                   sidecar_url: str | None, token: str | None, similarity: str, window: int, top: int,
                   timeout: float, as_json: bool, **connection: Any) -> None:
    """Search QUERY among the corpus questions, reranked by the sidecar when one is given."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from es_plugin_bridge.bridge import BridgeSearch, SidecarClient
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.engines.registry import EngineContext, build_engine, engine_info, engine_names
    from es_plugin_bridge.text import Preprocessor

    target = sidecar_target(sidecar_url, token, timeout) if sidecar_url else None
    sidecar = SidecarClient(target.url, token=target.token, timeout=target.timeout) if target else None
    remote = {name: engine_info(name).remote for name in engine_names()}
    if remote[engine]:  # a server's index, named by --index, searched with its own preprocessing
        if corpus_specs:
            local = " or ".join(name for name, far in remote.items() if not far)
            raise UserError(f"--corpus is for the {local} engine; --engine {engine} searches --index")
        options = {"connection": pop_connection(connection), "index": index_name}
        built = build_engine(engine, EngineContext(options=options))
        size = f"index {index_name}"
    else:  # the --corpus questions, indexed in process
        if not corpus_specs:
            others = " or ".join(name for name, far in remote.items() if far)
            raise UserError("give the questions to search with --corpus SPEC"
                            + (f" (or --engine {others})" if others else ""))
        collection = {q.id: q for spec in corpus_specs for q in read_spec(spec).questions.values()}
        built = build_engine(engine, EngineContext(tokens=Preprocessor().tokens))
        built.index(list(collection.values()))
        size = f"{len(collection):,} questions"
    bridge = BridgeSearch(built.first_stage(similarity), sidecar, similarity=similarity, window=window)
    result = bridge.search(" ".join(query), k=top)
    if as_json:
        hits = [{"id": h.question.id, "title": h.question.title, "score": h.score,
                 "first_stage_score": h.first_stage_score, "first_stage_rank": h.first_stage_rank}
                for h in result.hits]
        json.dump({"reranked": result.reranked, "fallback_reason": result.fallback_reason,
                   "timings_ms": result.timings_ms, "hits": hits}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    how = "reranked by the sidecar" if result.reranked else "first-stage order"
    table = Table(title=escape(f"{size}, {similarity}, {how}"))
    for name, justify in (("#", "right"), (similarity, "right"), ("score", "right"), ("title", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for rank, hit in enumerate(result.hits, start=1):
        table.add_row(str(rank), str(hit.first_stage_rank), f"{hit.score:.3f}", escape(hit.question.title))
    console = Console()
    console.print(table)
    if result.fallback_reason and sidecar is not None:
        console.print(f"[yellow]warning: {escape(result.fallback_reason)}[/yellow]")
