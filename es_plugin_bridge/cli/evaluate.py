"""``esrerank evaluate``: score rankers on one of the three tasks and write the contract's outputs.

Forms (docs/getting-started.md has each with real data):
  --task rerank    --data semeval:FILE.xml --rankers given,bm25,lmdirichlet --json OUT.json
  --task retrieval --queries pairs:TEST.tsv --corpus pairs:A.tsv [--corpus ...] --rankers ... --json OUT
  --task classify  --data pairs:TEST.tsv --dev pairs:DEV.tsv (--model DIR | --rankers bm25,...) --json OUT
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from es_plugin_bridge.cli.es_options import connection_options, engine_option, pop_connection
from es_plugin_bridge.cli.options import skip_bad_option, title_only_option
from es_plugin_bridge.core.fusion import FIRST_STAGES
from es_plugin_bridge.engines.registry import engine_info
from es_plugin_bridge.errors import UserError

TASKS = ("rerank", "retrieval", "classify")
DEFAULT_RANKERS = {"rerank": ["given", *FIRST_STAGES], "retrieval": list(FIRST_STAGES),
                   "classify": []}
MODEL_RANKERS = ["model", "fused"]


def default_rankers(task: str, has_model: bool) -> list[str]:
    """Rankers used when --rankers is not given: first-stage baselines, plus the model when given."""
    if task == "classify":
        if not has_model:
            raise UserError("--task classify needs --model DIR or --rankers NAME[,NAME...]")
        return ["model"]
    return DEFAULT_RANKERS[task] + (MODEL_RANKERS if has_model else [])


def parse_params(items: Sequence[str], names: Sequence[str]) -> dict[str, dict[str, float]]:
    """``--param bm25.k1=1.2`` → ``{"bm25": {"k1": 1.2}}``, each for a ranker of ``names``."""
    params: dict[str, dict[str, float]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        ranker, dot, name = key.partition(".")
        if not sep or not dot or not ranker or not name:
            raise UserError(f"--param {item!r} is not RANKER.NAME=VALUE (e.g. bm25.k1=1.2)")
        try:
            params.setdefault(ranker, {})[name] = float(value)
        except ValueError:
            raise UserError(f"--param {item!r}: {value!r} is not a number") from None
    for ranker in params:
        if ranker not in names:
            raise UserError(f"--param {ranker}.*: ranker {ranker!r} is not in --rankers {','.join(names)}")
    return params


@click.command("evaluate")
@click.option("--task", required=True, type=click.Choice(TASKS), help="What to evaluate.")
@click.option("--data", "data_spec", metavar="SPEC", help="rerank: semeval:FILE; classify: test pairs.")
@click.option("--queries", "queries_spec", metavar="SPEC",
              help="retrieval: pairs whose duplicates are the queries.")
@click.option("--corpus", "corpus_specs", metavar="SPEC", multiple=True, help="retrieval: more documents.")
@click.option("--dev", "dev_spec", metavar="SPEC", help="classify: pairs that choose the threshold.")
@click.option("--rankers", "rankers_text", metavar="NAMES",
              help="Comma-separated: given, bm25, lmdirichlet, lmjelinekmercer, dfr, ib, tfidf, model, "
                   "fused, dense, hybrid, hybrid-rrf.")
@click.option("--model", "model_dir", type=click.Path(path_type=Path),
              help="Model directory (model, fused): a training checkpoint or an export-onnx directory.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the JSON here.")
@click.option("--per-query", "per_query_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Per-query JSONL (default: next to --json as OUT.per_query.jsonl).")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path, dir_okay=False), help="PNG bar chart.")
@click.option("--report", "report_dir", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="Comparison report: DIR/comparison.html and DIR/comparison.png; the review page "
                   "DIR/report.html and its data DIR/review.json (esrerank report joins runs).")
@click.option("--drop-no-relevant", is_flag=True, help="rerank: drop queries without a relevant candidate.")
@click.option("--max-queries", type=click.IntRange(min=1),
              help="retrieval: evaluate a deterministic subset of N queries.")
@click.option("--relevant", type=click.Choice(["pair", "cluster"]),
              help="retrieval: what counts as relevant: the pair's other question (pair, the default) "
                   "or every question linked to the query by known duplicate pairs of the given files "
                   "(cluster).")
@click.option("--queries-from", type=click.Choice(["q1", "q2"]),
              help="retrieval: which question of each duplicate pair searches (default q1).")
@click.option("--param", "params", metavar="RANKER.NAME=VALUE", multiple=True, help="e.g. bm25.k1=1.2")
@click.option("--body-words", type=click.IntRange(min=0), help="Cut bodies at N words (default 100).")
@title_only_option
@skip_bad_option
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--explain", is_flag=True,
              help="rerank: show each component of the fused score per candidate (needs --model, "
                   "--json and the fused ranker); all queries go to OUT.explain.jsonl next to --json.")
@engine_option("First-stage engine: in process, or a throw-away Elasticsearch index (--es-url ...).")
@click.option("--first-stage", "fused_first_stage", type=click.Choice(["given", *FIRST_STAGES]),
              help="First stage the fused ranker fuses with (default: the data's own order when the model "
                   "has β for it, else bm25).")
@connection_options
def evaluate(task: str, data_spec: str | None, queries_spec: str | None, corpus_specs: tuple[str, ...],
             dev_spec: str | None, rankers_text: str | None, model_dir: Path | None, json_path: Path | None,
             per_query_path: Path | None, plot_path: Path | None, report_dir: Path | None,
             drop_no_relevant: bool, max_queries: int | None, relevant: str | None, queries_from: str | None,
             params: tuple[str, ...], body_words: int | None,
             title_only: bool, skip_bad: bool, no_progress: bool, explain: bool, engine: str,
             fused_first_stage: str | None, setup: Any = None, **connection: Any) -> None:
    """Evaluate rankers on a task; print a table and write JSON, per-query JSONL and a plot."""
    from rich.console import Console

    from es_plugin_bridge.evaluation import report
    from es_plugin_bridge.evaluation.outputs import Outputs
    from es_plugin_bridge.evaluation.task_run import RunEngine, run_task

    _check_task_options(task, {"--data": data_spec, "--queries": queries_spec, "--corpus": corpus_specs,
                               "--dev": dev_spec, "--drop-no-relevant": drop_no_relevant,
                               "--max-queries": max_queries, "--relevant": relevant,
                               "--queries-from": queries_from})
    outputs = Outputs(json_path, per_query_path, plot_path, report_dir, explain)
    names = _ranker_names(task, rankers_text, model_dir, outputs)
    parsed = parse_params(params, names)
    with ExitStack() as stack:
        extra, after = {}, None
        if setup is not None:  # `es evaluate`: its own engine, rankers and results index (cli/es_evaluate.py)
            engine_factory, extra, after = setup(stack, parsed, model_dir, not no_progress)
        else:
            options = {"connection": pop_connection(connection, engine)} if engine_info(engine).remote else {}
            engine_factory = RunEngine(engine, stack, parsed, not no_progress, options)
        result = run_task(task, names, data_spec=data_spec, queries_spec=queries_spec,
                          corpus_specs=corpus_specs, dev_spec=dev_spec, model_dir=model_dir, params=parsed,
                          drop_no_relevant=drop_no_relevant, max_queries=max_queries, body_words=body_words,
                          relevant=relevant or "pair", queries_from=queries_from or "q1",
                          title_only=title_only, skip_bad=skip_bad, show_progress=not no_progress,
                          explain=explain, engine_factory=engine_factory,
                          context_options={"fused_first_stage": fused_first_stage, **extra})
        if after is not None:
            after(result)
    result.inputs["command"] = command_line(click.get_current_context())
    console = Console()
    report.print_result(result, console)
    if explain:
        from es_plugin_bridge.evaluation.explain import print_explain

        print_explain(result.explain, console)
    for path in outputs.write(result):  # every result is computed: the files appear together or not at all
        console.print(f"wrote {path}", soft_wrap=True, highlight=False)


def command_line(ctx: click.Context) -> str:
    """The run's command as given (options not at their default), for the review page's signature; a
    secret (token, password) is never written, only the environment variable that holds it."""
    import shlex

    from es_plugin_bridge.cli.rerun import SECRETS

    words = ctx.command_path.split()
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if value in (None, False, (), "") or value == param.default or not isinstance(param, click.Option):
            continue
        if param.name in SECRETS:
            words += [param.opts[0], f"${SECRETS[param.name]}"]
            continue
        for one in value if isinstance(value, tuple) else (value,):
            words += [param.opts[0]] if value is True else [param.opts[0], str(one)]
    return shlex.join(words)


def _check_task_options(task: str, given: dict[str, object]) -> None:
    """Each task's required options given, and none given that does not apply to it."""
    needed = {"rerank": ["--data"], "retrieval": ["--queries"], "classify": ["--data", "--dev"]}[task]
    allowed = {"rerank": ["--data", "--drop-no-relevant"],
               "retrieval": ["--queries", "--corpus", "--max-queries", "--relevant", "--queries-from"],
               "classify": ["--data", "--dev"]}[task]
    for option in needed:
        if not given.get(option):
            raise UserError(f"--task {task} needs {option}")
    for option, value in given.items():
        if value and option not in allowed:
            raise UserError(f"{option} does not apply to --task {task}")


def _ranker_names(task: str, rankers_text: str | None, model_dir: Path | None, outputs: Any) -> list[str]:
    """--rankers (or the task's defaults), each known and applicable; --explain's needs checked."""
    from es_plugin_bridge import rankers as registry

    if outputs.explain and (task != "rerank" or model_dir is None):
        raise UserError("--explain applies to --task rerank with --model DIR (it explains the fused score)")
    if outputs.explain and outputs.json is None:
        raise UserError("--explain needs --json OUT.json (the explanation is written to OUT.explain.jsonl)")
    if model_dir is not None and not model_dir.is_dir():
        raise UserError(f"--model {model_dir}: not a directory")
    names = ([n.strip() for n in rankers_text.split(",") if n.strip()] if rankers_text is not None
             else default_rankers(task, model_dir is not None))
    registry.check(names, task, has_model=model_dir is not None)
    if outputs.explain and "fused" not in names:
        raise UserError(f"--explain explains the fused ranker: add fused to --rankers {','.join(names)}")
    return names
