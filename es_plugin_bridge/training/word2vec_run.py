"""The ``esrerank embeddings`` run: every text of the corpora tokenised as the models tokenise it, word2vec
trained on it, the vectors written with a JSON record of the options and the corpus counts beside them.

Every text a corpus holds is used — titles, full bodies (not cut: the cut is a model input cap) and
unlabelled comments (SemEval) — so the vectors' words match the models' vocabulary.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gensim
from tqdm import tqdm

from es_plugin_bridge.data.corpus import distinct_questions
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.embeddings import Word2VecOptions, save_embeddings, train_word2vec


def collect_sentences(
    specs: list[str], options: TextOptions, skip_bad: bool = False
) -> tuple[list[list[str]], list[dict]]:
    """Token lists (a title, a body, a comment each) of every corpus, and per-corpus counts."""
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


def write_vectors(sentences: list[list[str]], stats: list[dict], out_path: Path, opts: Word2VecOptions,
                  text_options: TextOptions, *, binary: bool, progress: bool = True) -> dict[str, Any]:
    """Train word2vec on ``sentences``, write the vectors to ``out_path`` and the run's record to
    ``OUT.json`` (returned): options, text options, corpus counts, seconds, gensim's version."""
    started = time.perf_counter()
    with tqdm(total=opts.epochs, desc="word2vec", unit="epoch", file=sys.stderr, disable=not progress) as bar:
        vectors = train_word2vec(sentences, opts, on_epoch=lambda _e, _t: bar.update(1))
    save_embeddings(vectors, out_path, binary=binary)
    record = {
        "vectors": out_path.name,
        "format": "word2vec-binary" if binary else "word2vec-text",
        "words": len(vectors),
        "options": {**opts.__dict__, "architecture": "skip-gram" if opts.sg else "cbow"},
        "text_options": text_options.model_dump(),
        "corpora": stats,
        "sentences": len(sentences),
        "tokens": sum(len(s) for s in sentences),
        "seconds": round(time.perf_counter() - started, 2),
        "gensim": gensim.__version__,
    }
    _write_json(Path(f"{out_path}.json"), record)
    return record
