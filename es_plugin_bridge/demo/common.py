"""What every ``esrerank demo`` step shares: the run's state, the split, evaluations as ``evaluate``
runs them, and the sidecar example.

Kept apart from ``steps.py`` (the default steps and the plan) and ``papers.py`` (the papers'
reproduction, ``--papers``) so both sets of steps write their tables and summary the same way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.evaluation.results import TaskResult

SEMEVAL_DEV = "semeval2016-task3/SemEval2016-Task3-CQA-QL-dev.xml"
ASKUBUNTU_TITLES = "askubuntu-pairs/train_titles.tsv"

#: Duplicate pairs held out from the AskUbuntu sample (whole duplicate clusters), and the split's seed.
SPLIT_DEV, SPLIT_TEST, SPLIT_SEED = 500, 1000, 1

#: Summary sections, in the order ``summary.md`` shows them (a step fills the ones it computes).
SECTIONS = ("sidecar", "retrieval", "rerank", "transformer", "split", "papers")


def samples_dir() -> Path:
    """The ``samples/`` folder inside the installed package."""
    return Path(str(resources.files("es_plugin_bridge") / "samples"))


@dataclass
class DemoContext:
    """State shared by the steps: where to write, what to print, what has been produced."""

    out: Path
    console: Console
    show_progress: bool = True
    train_seconds: float = 90.0
    max_pairs: int | None = None
    results: dict[str, TaskResult] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    sections: dict[str, list[str]] = field(default_factory=dict)
    split: dict[str, Path] = field(default_factory=dict)
    model_dir: Path | None = None
    transformer_dir: Path | None = None
    training: dict = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    plots: list[tuple[str, Path]] = field(default_factory=list)

    @property
    def split_dir(self) -> Path:
        return self.out / "askubuntu"

    def add(self, section: str, *lines: str) -> None:
        """Append Markdown lines to one section of ``summary.md``."""
        self.sections.setdefault(section, []).extend(lines)


Step = Callable[[DemoContext], None]


def say(ctx: DemoContext, text: str) -> None:
    ctx.console.print(text, soft_wrap=True, highlight=False)


def similarities() -> list[str]:
    from es_plugin_bridge.engines import SIMILARITIES

    return list(SIMILARITIES)


def evaluate_step(ctx: DemoContext, key: str, title: str, command: str, section: str, **run: object) -> None:
    """Run one evaluation like ``esrerank evaluate`` would, print it, write JSON/JSONL/PNG, summarise."""
    from es_plugin_bridge.evaluation import report
    from es_plugin_bridge.evaluation.task_run import run_task

    start = time.perf_counter()
    result = run_task(show_progress=ctx.show_progress, **run)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    ctx.results[key] = result
    result.inputs["command"] = command
    report.print_result(result, ctx.console, title=f"{title} — {seconds:.1f} s")
    json_path = ctx.out / f"{key}.json"
    png = report.write_plot(result, ctx.out / f"{key}.png", title=title)
    ctx.written += [report.write_json(result, json_path),
                    report.write_per_query(result, report.per_query_path(json_path)), png]
    ctx.plots.append((title, png))
    ctx.add(section, f"### {title}", "", f"`{command}`", "", report.markdown_table(result), "",
            f"![{title}]({png.name})", "")


def rerank(ctx: DemoContext, key: str, title: str, names: list[str], model: Path | None = None,
           section: str = "rerank", context_options: dict[str, Any] | None = None) -> None:
    """SemEval-2016 Task 3 dev reranked by ``names``, as the printed ``esrerank evaluate`` does it."""
    spec = f"semeval:{samples_dir() / SEMEVAL_DEV}"
    model_option = f"--model {model} " if model else ""
    command = (f"esrerank evaluate --task rerank --data semeval:es_plugin_bridge/samples/{SEMEVAL_DEV} "
               f"--rankers {','.join(names)} {model_option}--json {ctx.out}/{key}.json")
    evaluate_step(ctx, key, title, command, section, task="rerank", names=names, data_spec=spec,
                  model_dir=model, context_options=context_options)


def retrieval(ctx: DemoContext, key: str, title: str, names: list[str], model: Path | None = None,
              section: str = "retrieval", context_options: dict[str, Any] | None = None) -> None:
    """The test split's duplicate pairs are the queries; every title of the split's source is a document
    (``all.tsv``: also the questions of non-duplicate pairs the split dropped)."""
    ensure_split(ctx)
    queries, corpus = f"pairs:{ctx.split['test']}", [f"pairs:{ctx.split['all']}"]
    model_option = f"--model {model} " if model else ""
    command = (f"esrerank evaluate --task retrieval --queries {queries} "
               + "".join(f"--corpus {c} " for c in corpus)
               + f"--rankers {','.join(names)} {model_option}--json {ctx.out}/{key}.json")
    evaluate_step(ctx, key, title, command, section, task="retrieval", names=names, queries_spec=queries,
                  corpus_specs=corpus, model_dir=model, context_options=context_options)


def split_step(ctx: DemoContext) -> None:
    """Split the AskUbuntu titles into train/dev/test; whole duplicate clusters go to one split."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.data.split import split_by_question, write_pairs

    pairs = read_spec(f"pairs:{samples_dir() / ASKUBUNTU_TITLES}").pairs
    dev, test, limited = SPLIT_DEV, SPLIT_TEST, ""
    if ctx.max_pairs is not None and ctx.max_pairs < len(pairs):
        scale = ctx.max_pairs / len(pairs)
        dev, test = max(1, round(SPLIT_DEV * scale)), max(1, round(SPLIT_TEST * scale))
        limited = (f" (--max-pairs: only the first {ctx.max_pairs} of {len(pairs)} pairs, "
                   f"held-out sizes scaled to {dev}/{test})")
        pairs = pairs[: ctx.max_pairs]
    result = split_by_question(pairs, {"dev": dev, "test": test}, seed=SPLIT_SEED)
    parts = result.parts
    ctx.split_dir.mkdir(parents=True, exist_ok=True)
    command = (f"esrerank split pairs:es_plugin_bridge/samples/{ASKUBUNTU_TITLES} --out-dir {ctx.split_dir} "
               f"--dev {SPLIT_DEV} --test {SPLIT_TEST} --seed {SPLIT_SEED}")
    table = Table(title=escape(f"Split, AskUbuntu titles → {ctx.split_dir}{limited}"))
    for column in ("file", "pairs", "duplicates", "distinct titles"):
        table.add_column(column, justify="left" if column == "file" else "right")
    rows = []
    for name in ("train", "dev", "test"):
        path = ctx.split_dir / f"{name}.tsv"
        write_pairs(parts[name], path)
        ctx.split[name] = path
        ctx.written.append(path)
        dups = sum(1 for p in parts[name] if p.label > 0)
        titles = len({q.id for p in parts[name] for q in (p.q1, p.q2)})
        table.add_row(path.name, str(len(parts[name])), str(dups), str(titles))
        rows.append(f"| {name}.tsv | {len(parts[name])} | {dups} | {titles} |")
    everything = ctx.split_dir / "all.tsv"
    write_pairs(pairs, everything)
    ctx.split["all"] = everything
    ctx.written.append(everything)
    dropped = (f"dropped: {len(result.dropped)} of {len(pairs)} pairs (non-duplicates whose two "
               "questions fell in different splits)")
    ctx.console.print(table)
    say(ctx, f"[dim]= {escape(command)}{escape(limited)}; {dropped}[/dim]")
    ctx.add("split", f"### Split, AskUbuntu titles{limited}", "", f"`{command}`", "",
            "| file | pairs | duplicates | distinct titles |", "| --- | ---: | ---: | ---: |",
            *rows, "", dropped, "")


def ensure_split(ctx: DemoContext) -> None:
    """Split now unless this run already did (deterministic and about 2 s: never read from disk)."""
    if not ctx.split:
        split_step(ctx)


def sidecar_example(ctx: DemoContext, model_onnx: Path, query: Question, docs: Sequence[Question],
                    duplicate_id: str, how: str, section: str) -> int:
    """Rerank ``docs`` for ``query`` through the sidecar's own WSGI app (``esrerank serve``, called in
    process: onnxruntime alone, no torch); print and summarise the answer. Returns the known duplicate's
    1-based rank in the answer."""
    from es_plugin_bridge.serving.app import create_app

    client = create_app(model_onnx).test_client()
    request = {"query": query.title, "documents": [d.title for d in docs]}
    curl = (f"curl -s localhost:8080/v1/rerank -H 'Content-Type: application/json' "
            f"-d '{json.dumps(request)}'")
    say(ctx, f"$ esrerank serve {model_onnx} &")
    say(ctx, f"$ {escape(curl)}")
    answer = client.post("/v1/rerank", json=request)
    if answer.status_code != 200:
        raise RuntimeError(f"the sidecar answered {answer.status_code}: {answer.get_data(as_text=True)}")
    results = answer.get_json()["results"]
    table = Table(title=escape(f"sidecar /v1/rerank on {model_onnx.name}: {how}"))
    table.add_column("rank", justify="right")
    table.add_column("query / candidate (* = the known duplicate)")
    table.add_column("first stage", justify="right")
    table.add_column("relevance_score", justify="right")
    table.add_row("", f"[bold]{escape(query.title)}[/bold]", "", "")
    lines = [f"Query: **{query.title}**", "", "| rank | candidate (* = the known duplicate) | first stage | "
             "relevance_score |", "| ---: | --- | ---: | ---: |"]
    rank = 0
    for position, item in enumerate(results, start=1):
        doc = docs[item["index"]]
        mark = " *" if doc.id == duplicate_id else ""
        if mark:
            rank = position
        score = f"{item['relevance_score']:.3f}"
        table.add_row(str(position), escape(doc.title) + mark, str(item["index"] + 1), score)
        lines.append(f"| {position} | {doc.title.replace('|', '/')}{mark} | {item['index'] + 1} | {score} |")
    ctx.console.print(table)
    ctx.add(section, f"`esrerank serve {model_onnx}`, then `POST /v1/rerank` ({how}):", "", *lines, "")
    return rank
