"""``esrerank embeddings``: train word2vec on one or more corpora and write the vectors in word2vec format.

Every text a corpus holds is used — titles, full bodies (not cut: the cut is a model input cap) and
unlabelled comments (SemEval) — tokenised exactly as the models will tokenise their input, so the
vectors' words match the models' vocabulary.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
from tqdm import tqdm

from es_plugin_bridge.cli.options import seed_option, skip_bad_option
from es_plugin_bridge.data.corpus import distinct_questions
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.text import TextOptions


def collect_sentences(
    specs: list[str], options: TextOptions, skip_bad: bool = False
) -> tuple[list[list[str]], list[dict]]:
    """Token lists (a title, a body, a comment each) of every corpus, and per-corpus counts."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.text import Preprocessor

    pre = Preprocessor(options)
    sentences: list[list[str]] = []
    stats: list[dict] = []
    for spec in specs:
        ds = read_spec(spec, skip_bad=skip_bad)
        n_q = n_c = n_tok = 0
        for q in distinct_questions(ds):
            n_q += 1
            for toks in (pre.title_tokens(q), pre.body_tokens(q)):
                if toks:
                    sentences.append(toks)
                    n_tok += len(toks)
        for text in ds.unlabelled:
            toks = pre.text_tokens(text)
            if toks:
                n_c += 1
                sentences.append(toks)
                n_tok += len(toks)
        stats.append(
            {"spec": spec, "questions": n_q, "comments": n_c, "tokens": n_tok, "skipped": ds.skipped}
        )
    return sentences, stats


def _write_json(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    os.replace(tmp, path)


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
    import gensim  # imported here: gensim takes ~1.6 s to load, which every `esrerank` call would pay

    from es_plugin_bridge.text import TextOptions
    from es_plugin_bridge.training.embeddings import Word2VecOptions, save_embeddings, train_word2vec

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
    n_tokens = sum(len(s) for s in sentences)
    for s in stats:
        click.echo(
            f"{s['spec']}: {s['questions']} questions, {s['comments']} comments, {s['tokens']} tokens",
            err=True,
        )
    with tqdm(total=epochs, desc="word2vec", unit="epoch", file=sys.stderr) as bar:
        vectors = train_word2vec(sentences, opts, on_epoch=lambda _e, _t: bar.update(1))
    save_embeddings(vectors, out_path, binary=binary)
    seconds = time.perf_counter() - started
    sidecar = Path(f"{out_path}.json")
    _write_json(
        sidecar,
        {
            "vectors": out_path.name,
            "format": "word2vec-binary" if binary else "word2vec-text",
            "words": len(vectors),
            "options": {**opts.__dict__, "architecture": "skip-gram" if sg else "cbow"},
            "text_options": text_options.model_dump(),
            "corpora": stats,
            "sentences": len(sentences),
            "tokens": n_tokens,
            "seconds": round(seconds, 2),
            "gensim": gensim.__version__,
        },
    )
    click.echo(
        f"wrote {len(vectors)} vectors of dimension {dim} to {out_path} ({seconds:.1f}s); "
        f"options in {sidecar}",
        err=True,
    )
