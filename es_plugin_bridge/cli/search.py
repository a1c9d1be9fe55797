"""``esrerank search``: the bridge from the command line — embedded first stage, sidecar rerank,
first-stage order when the sidecar is slow or down."""

from __future__ import annotations

import json
import sys

import click


@click.command("search", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("query", nargs=-1, required=True)
@click.option("--corpus", "corpus_specs", metavar="SPEC", multiple=True, required=True,
              help="FORMAT:PATH of the questions to search (repeatable).")
@click.option("--sidecar", "sidecar_url", metavar="URL", default=None,
              help="Base URL of `esrerank serve` (e.g. http://127.0.0.1:8080); omitted: first stage only.")
@click.option("--token", envvar="ESRERANK_TOKEN", default=None, help="Bearer token of the sidecar.")
@click.option("--similarity", default="bm25", show_default=True,
              type=click.Choice(["bm25", "lmdirichlet"]), help="First stage (its β is used for fusion).")
@click.option("--window", default=100, show_default=True, type=click.IntRange(min=1),
              help="First-stage hits sent to the sidecar.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--timeout", default=2.0, show_default=True, type=click.FloatRange(min=0.001),
              help="Seconds to wait for the sidecar before keeping the first-stage order.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def search_command(query: tuple[str, ...], corpus_specs: tuple[str, ...], sidecar_url: str | None,
                   token: str | None, similarity: str, window: int, top: int, timeout: float,
                   as_json: bool) -> None:
    """Search QUERY among the corpus questions, reranked by the sidecar when one is given."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from es_plugin_bridge.bridge import BridgeSearch, SidecarClient
    from es_plugin_bridge.data.spec import read_spec

    collection = {q.id: q for spec in corpus_specs for q in read_spec(spec).questions.values()}
    sidecar = SidecarClient(sidecar_url, token=token, timeout=timeout) if sidecar_url else None
    bridge = BridgeSearch(list(collection.values()), sidecar, similarity=similarity, window=window)
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
    table = Table(title=escape(f"{len(collection):,} questions, {similarity}, {how}"))
    for name, justify in (("#", "right"), (similarity, "right"), ("score", "right"), ("title", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for rank, hit in enumerate(result.hits, start=1):
        table.add_row(str(rank), str(hit.first_stage_rank), f"{hit.score:.3f}", escape(hit.question.title))
    console = Console()
    console.print(table)
    if result.fallback_reason and sidecar is not None:
        console.print(f"[yellow]warning: {escape(result.fallback_reason)}[/yellow]")
