"""``esrerank demo``: the product end to end on the samples shipped in the package (no shared data).

The demo is a list of steps (``STEPS``); each step does one thing, prints its table and records the
files it wrote. Later work appends steps (training, ONNX export, the sidecar) without touching these.
Each evaluation step runs exactly what the ``esrerank evaluate`` command it prints would run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import click
from rich.console import Console

from es_plugin_bridge.evaluation.results import TaskResult

RETRIEVAL_QUERIES = 1000


def samples_dir() -> Path:
    """The ``samples/`` folder inside the installed package."""
    return Path(str(resources.files("es_plugin_bridge") / "samples"))


SEMEVAL_DEV = "semeval2016-task3/SemEval2016-Task3-CQA-QL-dev.xml"
ASKUBUNTU_TITLES = "askubuntu-pairs/train_titles.tsv"


@dataclass
class DemoContext:
    """State shared by the steps: where to write, what to print, what has been produced."""

    out: Path
    console: Console
    show_progress: bool = True
    results: dict[str, TaskResult] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)


Step = Callable[[DemoContext], None]


def _similarities() -> list[str]:
    from es_plugin_bridge.engines import SIMILARITIES

    return list(SIMILARITIES)


def _evaluate_step(ctx: DemoContext, key: str, title: str, command: str, **run: object) -> None:
    """Run one evaluation like ``esrerank evaluate`` would, print it, write JSON/JSONL/PNG, summarise."""
    from es_plugin_bridge.cli.evaluate import run_task
    from es_plugin_bridge.evaluation import report

    start = time.perf_counter()
    result = run_task(show_progress=ctx.show_progress, **run)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    ctx.results[key] = result
    report.print_result(result, ctx.console, title=f"{title} — {seconds:.1f} s")
    json_path = ctx.out / f"{key}.json"
    ctx.written += [report.write_json(result, json_path),
                    report.write_per_query(result, report.per_query_path(json_path)),
                    report.write_plot(result, ctx.out / f"{key}.png", title=title)]
    ctx.summary += [f"### {title}", "", f"`{command}`", "", report.markdown_table(result), ""]


def rerank_step(ctx: DemoContext) -> None:
    """SemEval-2016 Task 3 dev: the search engine's order (given) against every embedded similarity."""
    spec = f"semeval:{samples_dir() / SEMEVAL_DEV}"
    names = ["given", *_similarities()]
    command = (f"esrerank evaluate --task rerank --data semeval:es_plugin_bridge/samples/{SEMEVAL_DEV} "
               f"--rankers {','.join(names)} --json {ctx.out}/rerank-semeval-dev.json")
    _evaluate_step(ctx, "rerank-semeval-dev", "Rerank, SemEval-2016 Task 3 dev (50 questions x 10)", command,
                   task="rerank", names=names, data_spec=spec)


def retrieval_step(ctx: DemoContext) -> None:
    """AskUbuntu: every distinct title is a document; a held-out subset of duplicate pairs are queries."""
    spec = f"pairs:{samples_dir() / ASKUBUNTU_TITLES}"
    names = _similarities()
    command = (f"esrerank evaluate --task retrieval "
               f"--queries pairs:es_plugin_bridge/samples/{ASKUBUNTU_TITLES} "
               f"--max-queries {RETRIEVAL_QUERIES} --rankers {','.join(names)} "
               f"--json {ctx.out}/retrieval-askubuntu.json")
    _evaluate_step(ctx, "retrieval-askubuntu", f"Retrieval, AskUbuntu titles ({RETRIEVAL_QUERIES} queries)",
                   command, task="retrieval", names=names, queries_spec=spec, max_queries=RETRIEVAL_QUERIES)


#: The demo, in order. Later work appends (name, step) pairs here.
STEPS: list[tuple[str, Step]] = [
    ("rerank", rerank_step),
    ("retrieval", retrieval_step),
]


def write_summary(ctx: DemoContext) -> Path:
    """``summary.md``: every step's command and table, in Markdown (what the README's table shows)."""
    from es_plugin_bridge.evaluation.report import write_atomic

    text = "# esrerank demo\n\n" + "\n".join(ctx.summary) + "\n"
    return write_atomic(ctx.out / "summary.md", lambda f: f.write(text))


def run_demo(out: Path, *, steps: list[str] | None = None, show_progress: bool = True,
             console: Console | None = None) -> DemoContext:
    """Run the demo steps (all, or those named) and write their outputs under ``out``."""
    from es_plugin_bridge.errors import UserError

    known = [name for name, _ in STEPS]
    unknown = [s for s in steps or [] if s not in known]
    if unknown:
        raise UserError(f"unknown demo step {unknown[0]!r} (steps: {', '.join(known)})")
    ctx = DemoContext(out=Path(out), console=console or Console(), show_progress=show_progress)
    for name, step in STEPS:
        if steps is None or name in steps:
            step(ctx)
    ctx.written.append(write_summary(ctx))
    return ctx


@click.command("demo")
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("runs/demo"),
              show_default=True, help="Where to write the results.")
@click.option("--step", "steps", multiple=True, help="Run only this step (repeatable).")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
def demo(out: Path, steps: tuple[str, ...], no_progress: bool) -> None:
    """Run the product on the shipped samples and print the comparison of the rankers."""
    start = time.perf_counter()
    ctx = run_demo(out, steps=list(steps) or None, show_progress=not no_progress)
    ctx.console.print(f"\ndemo finished in {time.perf_counter() - start:.1f} s; files written:")
    for path in ctx.written:
        ctx.console.print(f"  {path}", soft_wrap=True, highlight=False)
