"""``esrerank demo``: the product at its best, end to end on the samples shipped in the package. The
steps live below the CLI, in ``es_plugin_bridge/demo/`` (``steps.py`` says what each does); this module
is the command only."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markup import escape

from es_plugin_bridge.demo import papers as demo_papers
from es_plugin_bridge.demo.steps import headline, run_demo


@click.command("demo")
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("runs/demo"),
              show_default=True, help="Where to write the results.")
@click.option("--step", "steps", multiple=True,
              help="Run only this step (repeatable): split, transformer, retrieval, sidecar, rerank, and "
                   "the papers' train, retrieval-model, rerank-model, export.")
@click.option("--papers", is_flag=True,
              help="Also reproduce the papers: train a BOW-CNN for --train-seconds and compare it (slower).")
@click.option("--skip-training", is_flag=True, help="No model at all: the first-stage rankers only (fast).")
@click.option("--train-seconds", type=click.FloatRange(min=1), default=demo_papers.TRAIN_SECONDS,
              show_default=True,
              help="--papers: the BOW-CNN's training budget (setup, dev checks and the β fit come on top).")
@click.option("--max-pairs", type=click.IntRange(min=100),
              help="Use only the first N AskUbuntu pairs, held-out sizes scaled (quick runs, tests).")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
def demo(out: Path, steps: tuple[str, ...], papers: bool, skip_training: bool, train_seconds: float,
         max_pairs: int | None, no_progress: bool) -> None:
    """Run the product on the shipped samples: MiniLM via the sidecar, against BM25 and SemEval's order."""
    start = time.perf_counter()
    ctx = run_demo(out, steps=list(steps) or None, show_progress=not no_progress, skip_training=skip_training,
                   papers=papers, train_seconds=train_seconds, max_pairs=max_pairs)
    ctx.console.print(f"\ndemo finished in {time.perf_counter() - start:.1f} s; files written:")
    for path in ctx.written:
        ctx.console.print(f"  {path}", soft_wrap=True, highlight=False)
    for line in headline(ctx):
        ctx.console.print(f"\n[bold]{escape(line)}[/bold]", soft_wrap=True, highlight=False)
    if "report" in ctx.facts:
        ctx.console.print(f"\nreview page (self-contained HTML): {ctx.facts['report']}", soft_wrap=True,
                          highlight=False)
    ctx.console.print(f"\nsummary with every command, table and plot: {ctx.out / 'summary.md'}",
                      soft_wrap=True, highlight=False)
