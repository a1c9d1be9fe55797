"""``esrerank search``: the bridge from the command line — a first stage (the embedded engine over
``--corpus``, or an Elasticsearch or OpenSearch index with ``--engine``), sidecar rerank, first-stage
order when the sidecar is slow or down. Over an index it reranks as ``es search --mode bridge`` does
(both are :class:`BridgeSearch` over the engine's first stage) and prints the same way
(``cli/search_output.py``); ``es search`` adds the other modes."""

from __future__ import annotations

from typing import Any

import click

from es_plugin_bridge.cli.es_options import (
    connection_options,
    engine_option,
    pop_connection,
    sidecar_option,
    sidecar_target,
)
from es_plugin_bridge.cli.query_text import query_text
from es_plugin_bridge.cli.search_output import print_json, print_table
from es_plugin_bridge.core.fusion import FIRST_STAGES
from es_plugin_bridge.defaults import DEFAULT_INDEX


@click.command("search", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("query", nargs=-1, required=True)
@click.option("--corpus", "corpus_specs", metavar="SPEC", multiple=True,
              help="FORMAT:PATH of the questions to search (repeatable; the embedded engine).")
@engine_option("First stage: the embedded engine over --corpus, or the index of `es setup`/`es index`.")
@click.option("--index", "index_name", envvar="ESRERANK_ES_INDEX", default=DEFAULT_INDEX,
              show_default=True, help="--engine elasticsearch: the questions index.")
@sidecar_option("--sidecar", metavar="URL", envvar=None, default=None, show_default=False,
                help="Base URL of `esrerank serve` (e.g. http://127.0.0.1:8080); omitted: first stage only.")
@sidecar_option("--token")
@click.option("--similarity", default="bm25", show_default=True,
              type=click.Choice(FIRST_STAGES), help="First stage (its β is used for fusion).")
@click.option("--window", default=100, show_default=True, type=click.IntRange(min=1),
              help="First-stage hits sent to the sidecar.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1))
@sidecar_option("--timeout")
@sidecar_option("--sidecar-ca-certs")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@connection_options
def search_command(query: tuple[str, ...], corpus_specs: tuple[str, ...], engine: str, index_name: str,
                   sidecar_url: str | None, token: str | None, similarity: str, window: int, top: int,
                   timeout: float, sidecar_ca_certs: str | None, as_json: bool, **connection: Any) -> None:
    """Search QUERY among the corpus questions, reranked by the sidecar when one is given.

    Over an index (--engine elasticsearch or opensearch) this is `esrerank es search --mode bridge`;
    `es search` also runs the engine-side modes."""
    from es_plugin_bridge.bridge import BridgeSearch, SidecarClient
    from es_plugin_bridge.engines.registry import engine_info
    from es_plugin_bridge.engines.searchable import open_searchable

    target = sidecar_target(sidecar_url, token, timeout, sidecar_ca_certs) if sidecar_url else None
    sidecar = SidecarClient.reaching(target) if target is not None else None
    conn = pop_connection(connection, engine) if engine_info(engine).remote else None
    built, holds = open_searchable(engine, corpus_specs, index_name, conn)
    bridge = BridgeSearch(built.first_stage(similarity), sidecar, similarity=similarity, window=window)
    result = bridge.search(query_text(query), k=top)
    hits = [{"id": h.question.id, "title": h.question.title, "score": h.score,
             "first_stage_score": h.first_stage_score, "first_stage_rank": h.first_stage_rank}
            for h in result.hits]
    if as_json:
        print_json({"reranked": result.reranked, "fallback_reason": result.fallback_reason,
                    "timings_ms": result.timings_ms, "hits": hits})
    else:
        print_table(f"{holds}, {similarity}", hits, reranked=result.reranked,
                    fallback_reason=result.fallback_reason if sidecar is not None else None)
