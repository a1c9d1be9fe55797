"""``esrerank embeddings``: train word2vec on one or more corpora and write the vectors in word2vec format.

Every text a corpus holds is used — titles, full bodies (not cut: the cut is a model input cap) and
unlabelled comments (SemEval) — tokenised exactly as the models will tokenise their input, so the
vectors' words match the models' vocabulary.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from es_plugin_bridge.cli.options import seed_option, skip_bad_option
from es_plugin_bridge.errors import UserError


@click.command("embeddings")
@click.option(
    "--corpus",
    "corpora",
    multiple=True,
    required=True,
    metavar="SPEC",
    help="FORMAT:PATH (semeval, pairs, mqp, askubuntu, stackexchange, jsonl); repeatable.",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="W2V",
    help="Vectors file (word2vec format); OUT.json gets the options and corpus counts.",
)
@click.option("--dim", default=200, show_default=True, type=click.IntRange(min=1), help="Vector size.")
@click.option("--sg/--cbow", default=True, show_default=True, help="Skip-gram (default) or CBOW.")
@click.option("--window", default=5, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--min-count",
    default=2,
    show_default=True,
    type=click.IntRange(min=1),
    help="Ignore words seen fewer times.",
)
@click.option("--epochs", default=5, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(min=1),
    help="Threads; 1 makes a run reproducible bit for bit.",
)
@seed_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "text", "binary"]),
    default="auto",
    show_default=True,
    help="auto: binary when W2V ends in .bin, text otherwise.",
)
@click.option(
    "--code",
    type=click.Choice(["keep", "remove", "prefix"]),
    default="keep",
    show_default=True,
    help="Code blocks in bodies (use the same choice as the models' training data).",
)
@click.option("--lowercase/--no-lowercase", default=True, show_default=True)
@skip_bad_option
def embeddings_command(
    corpora: tuple[str, ...],
    out: str,
    dim: int,
    sg: bool,
    window: int,
    min_count: int,
    epochs: int,
    workers: int,
    seed: int,
    fmt: str,
    code: str,
    lowercase: bool,
    skip_bad: bool,
) -> None:
    """Train word2vec (gensim) on every title, body and comment of the corpora."""
    from es_plugin_bridge.text import TextOptions
    from es_plugin_bridge.training.embeddings import Word2VecOptions
    from es_plugin_bridge.training.word2vec_run import collect_sentences, write_vectors

    out_path = Path(out)
    if not out_path.parent.is_dir():
        raise UserError(f"--out: directory does not exist: {out_path.parent}")
    binary = out_path.suffix == ".bin" if fmt == "auto" else fmt == "binary"
    text_options = TextOptions(code=code, lowercase=lowercase, body_words=None)
    opts = Word2VecOptions(
        dim=dim, sg=sg, window=window, min_count=min_count, epochs=epochs, workers=workers, seed=seed
    )
    started = time.perf_counter()
    sentences, stats = collect_sentences(list(corpora), text_options, skip_bad=skip_bad)
    for s in stats:
        click.echo(f"{s['spec']}: {s['questions']} questions, {s['comments']} comments, {s['tokens']} tokens",
                   err=True)
    record = write_vectors(sentences, stats, out_path, opts, text_options, binary=binary)
    click.echo(f"wrote {record['words']} vectors of dimension {dim} to {out_path} "
               f"({time.perf_counter() - started:.1f}s); options in {out_path}.json", err=True)
