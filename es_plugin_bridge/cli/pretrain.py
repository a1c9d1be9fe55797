"""``esrerank pretrain``: adapt a sentence encoder to a site's own unlabelled text (TSDAE) before
``esrerank train --model-type transformer --init OUT`` fine-tunes it on the site's duplicates."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from es_plugin_bridge.cli.options import seed_option, skip_bad_option, title_only_option


@click.command("pretrain")
@click.option("--corpus", "corpora", multiple=True, required=True, metavar="SPEC",
              help="FORMAT:PATH of the site's text (questions, bodies, comments; labels unused); repeatable")
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="new sentence-transformers directory: the --init of train --model-type transformer")
@click.option("--init", "init_dir", type=click.Path(path_type=Path),
              help="encoder to start from (a local sentence-transformers directory); default: packaged "
                   "MiniLM")
@click.option("--time-budget", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True,
              help="seconds of pre-training")
@click.option("--max-steps", type=click.IntRange(min=1),
              help="stop after this many steps (the budget still applies)")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--lr", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=3e-5,
              show_default=True)
@click.option("--deletion", type=click.FloatRange(min=0, max=1, max_open=True), default=0.6,
              show_default=True,
              help="share of the words TSDAE deletes from each text")
@click.option("--max-length", type=click.IntRange(min=8, max=512), default=128, show_default=True,
              help="sub-words per text, [CLS] and [SEP] included")
@title_only_option
@click.option("--body-words", type=click.IntRange(min=0), default=100, show_default=True,
              help="keep each body's first N words (as train does)")
@seed_option
@click.option("--threads", type=click.IntRange(min=1), help="torch CPU threads")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--mixed-precision/--no-mixed-precision", default=True, show_default=True,
              help="bfloat16 autocast on a GPU that supports it (never on the CPU)")
@skip_bad_option
@click.option("--quiet", is_flag=True, help="no progress bar")
def pretrain(
    corpora: tuple[str, ...],
    out: Path,
    init_dir: Path | None,
    time_budget: float,
    max_steps: int | None,
    batch_size: int,
    lr: float,
    deletion: float,
    max_length: int,
    title_only: bool,
    body_words: int,
    seed: int,
    threads: int | None,
    device: str,
    mixed_precision: bool,
    skip_bad: bool,
    quiet: bool,
) -> None:
    """Pre-train an encoder on in-domain text with TSDAE and write it to OUT."""
    from es_plugin_bridge.errors import UserError
    from es_plugin_bridge.text import TextOptions
    from es_plugin_bridge.training.domain_pretrain import PretrainOptions, domain_texts, pretrain_tsdae

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if out.exists():
        raise UserError(f"--out {out}: already exists (pre-training writes a new directory)")
    options = PretrainOptions(time_budget=time_budget, max_steps=max_steps, batch_size=batch_size, lr=lr,
                              deletion=deletion, max_length=max_length, seed=seed, device=device,
                              mixed_precision=mixed_precision, show_progress=not quiet)
    options.check()
    if threads:
        import torch

        torch.set_num_threads(threads)
    corpus = domain_texts(corpora, TextOptions(use_body=not title_only, body_words=body_words), skip_bad)
    for source in corpus.sources:
        skipped = f", {source['skipped']} malformed records skipped" if source["skipped"] else ""
        counts = f"{source['questions']} questions, {source['comments']} comments{skipped}"
        click.echo(f"{source['spec']}: {counts}", err=True)
    summary = pretrain_tsdae(corpus, out, options, init_dir)
    click.echo(
        f"TSDAE: {summary['steps']} steps, {summary['texts_seen']} texts ({summary['epochs']:.2f} passes "
        f"over {summary['corpus']['texts']}), {summary['seconds']:.0f} s on {summary['device']}, stopped by "
        f"{summary['stopped']}; encoder written to {out} (train --model-type transformer --init {out})"
    )
