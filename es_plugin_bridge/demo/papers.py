"""``esrerank demo --papers``: the papers' reproduction — a BOW-CNN (dos Santos et al. 2015) trained on the
AskUbuntu split, compared with the first stages, exported and served.

Not part of the default demo since it is slower (``--train-seconds`` of training, then the model scores
every title per query) and its model does not beat BM25 at Acc@1 in that budget; the steps say so.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from es_plugin_bridge.core.fusion import FIRST_STAGES
from es_plugin_bridge.demo.common import (
    DemoContext,
    ensure_split,
    rerank,
    retrieval,
    say,
    sidecar_example,
)

#: Training: dos Santos et al.'s BOW-CNN with 100-d word2vec trained on the train split's titles (about
#: 5 s on 2 cores, measured), Adam instead of the paper's SGD so a short budget gets somewhere, and the
#: dev MAP checked every EPOCH_EXAMPLES positive pairs so early stopping has several points to pick from.
TRAIN_SECONDS = 90.0
MODEL_TYPE, OPTIMIZER, LR, EMBEDDING_DIM = "bow-cnn", "adam", 1e-3, 100
EPOCH_EXAMPLES, MAX_EPOCHS, PATIENCE = 640, 1000, 5


@contextlib.contextmanager
def training_log(ctx: DemoContext) -> Iterator[None]:
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


def training_table(summary: dict, seconds: float, name: str = MODEL_TYPE) -> tuple[Table, list[str]]:
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
    for row, value, weights in rows:
        betas = [f"{weights[k]:.2f}" for k in ("first_stage", "bow", "neural")] if weights else ["", "", ""]
        table.add_row(row, f"{value:.2f}", *betas)
        lines.append(f"| {row} | {value:.2f} | " + " | ".join(betas) + " |")
    return table, lines


def _word2vec(ctx: DemoContext) -> tuple[Path, str]:
    """100-d skip-gram vectors on the train split's titles, as ``esrerank embeddings`` trains them."""
    from es_plugin_bridge.text import TextOptions
    from es_plugin_bridge.training.embeddings import Word2VecOptions, save_embeddings, train_word2vec
    from es_plugin_bridge.training.word2vec_run import collect_sentences

    path = ctx.split_dir / f"w2v-{EMBEDDING_DIM}.txt"
    command = (f"esrerank embeddings --corpus pairs:{ctx.split['train']} --out {path} "
               f"--dim {EMBEDDING_DIM}")
    start = time.perf_counter()
    sentences, _ = collect_sentences([f"pairs:{ctx.split['train']}"], TextOptions(body_words=None))
    vectors = train_word2vec(sentences, Word2VecOptions(dim=EMBEDDING_DIM))
    save_embeddings(vectors, path)
    ctx.written.append(path)
    say(ctx, f"word2vec: {len(vectors)} words x {EMBEDDING_DIM} from {len(sentences)} train titles "
             f"in {time.perf_counter() - start:.1f} s → {path}")
    say(ctx, f"[dim]= {escape(command)}[/dim]")
    return path, command


def train_step(ctx: DemoContext) -> None:
    """Train a bow-cnn on the train split for ``train_seconds``, early-stopped and β-fitted on dev."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer

    ensure_split(ctx)
    out = ctx.out / "model"
    say(ctx, f"\n[bold]The papers: training {MODEL_TYPE}[/bold] for {ctx.train_seconds:g} s: optimiser "
             f"{OPTIMIZER} lr {LR:g} (dos Santos et al. used SGD lr 0.01; Adam converges much faster in a "
             f"short budget), 20 sampled negatives per duplicate pair, dev MAP checked every "
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
    with training_log(ctx):
        summary = Trainer(cfg, [read_spec(f"pairs:{ctx.split['train']}")],
                          [read_spec(f"pairs:{ctx.split['dev']}")], out).run()
    seconds = time.perf_counter() - start
    table, lines = training_table(summary, seconds)
    ctx.console.print(table)
    say(ctx, f"[dim]= {escape(command)}[/dim]")
    ctx.model_dir = out
    ctx.training = {"seconds": seconds, **summary["train"]}
    ctx.written += [out / name for name in ("config.json", "vocab.json", "model.safetensors", "history.json",
                                            "training.png")]
    best = summary["train"]["best_epoch"]
    ctx.add("papers", f"### Training {MODEL_TYPE} ({seconds:.0f} s, best epoch {best})", "",
            f"`{w2v_command}`", "", f"`{command}`", "", *lines, "", "![training](model/training.png)", "")


def _model(ctx: DemoContext) -> Path:
    """The model trained in this run, else one left in ``OUT/model`` by an earlier run."""
    from es_plugin_bridge.errors import UserError

    if ctx.model_dir is None:
        if not (ctx.out / "model" / "config.json").is_file():
            raise UserError(f"no trained model in {ctx.out / 'model'}: run the demo's train step first "
                            "(esrerank demo --papers)")
        ctx.model_dir = ctx.out / "model"
        say(ctx, f"using the model trained by an earlier run: {ctx.model_dir}")
    return ctx.model_dir


def retrieval_model_step(ctx: DemoContext) -> None:
    """The same retrieval queries: the first stages against the model alone and fused with BM25."""
    retrieval(ctx, "retrieval-askubuntu-model", "Retrieval, AskUbuntu test duplicates, with the BOW-CNN",
              [*FIRST_STAGES, "model", "fused"], _model(ctx), section="papers")


def rerank_model_step(ctx: DemoContext) -> None:
    """SemEval dev reranked by the AskUbuntu model: out of domain (Qatar Living, not AskUbuntu)."""
    rerank(ctx, "rerank-semeval-dev-model",
           "Rerank, SemEval-2016 dev, with the AskUbuntu BOW-CNN (out of domain)",
           ["given", "bm25", "model", "fused"], _model(ctx), section="papers")
    note = ("the model was trained on AskUbuntu titles; on SemEval (Qatar Living) its rows are out of "
            "domain, so they show transfer, not what a model trained on SemEval would reach")
    say(ctx, f"[dim]note: {note}[/dim]")
    ctx.add("papers", f"Note: {note}.", "")


def export_step(ctx: DemoContext) -> None:
    """ONNX export of the trained BOW-CNN, then one AskUbuntu query reranked by the sidecar app."""
    from es_plugin_bridge.data.spec import read_spec
    from exporters.export import export_checkpoint

    ensure_split(ctx)
    out = ctx.out / "model-onnx"
    say(ctx, f"$ esrerank export-onnx {_model(ctx)} --out {out} --force")
    result = export_checkpoint(_model(ctx), out, force=True)
    say(ctx, f"[dim]max |onnx − torch| = {result.max_abs_diff:.1e}[/dim]")
    pairs = read_spec(f"pairs:{ctx.split['test']}").pairs
    duplicate = next(p for p in pairs if p.label > 0)
    others = [p.q2 for p in pairs if p.q2.id not in (duplicate.q1.id, duplicate.q2.id)][:4]
    rank = sidecar_example(ctx, out, duplicate.q1, [duplicate.q2, *others], duplicate.q2.id,
                           "the first test duplicate and four other test titles", "papers")
    verdict = "on top" if rank == 1 else f"ranked {rank} of {len(others) + 1}: not on top"
    say(ctx, f"BOW-CNN through the sidecar: the known duplicate is {verdict}.")
    ctx.add("papers", f"BOW-CNN through the sidecar: the known duplicate is {verdict}. Exported model "
                      f"directory (ONNX, sha256 manifest): `{out}`; serve it with "
                      f"`esrerank serve {out}`.", "")
