"""Word2vec vectors: train them with gensim, store them in word2vec format, turn them into an embedding layer.

Bogdanova et al. found in-domain skip-gram vectors matter most for the CNN; Lei et al. and the
attentive Siamese LSTM paper initialise their encoders the same way (CBOW for the latter). Vectors
are only ever written and read in the word2vec text or binary format — plain numbers, so loading a
vectors file can never execute code (unlike a pickled gensim model).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gensim.models import KeyedVectors, Word2Vec
from gensim.models.callbacks import CallbackAny2Vec

from es_plugin_bridge.core.vocab import PAD_ID, Vocabulary
from es_plugin_bridge.errors import DataFormatError, UserError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Word2VecOptions:
    """Training options; defaults follow Bogdanova et al. (skip-gram, 200 dimensions)."""

    dim: int = 200
    sg: bool = True
    window: int = 5
    min_count: int = 2
    epochs: int = 5
    workers: int = 2
    seed: int = 1
    negative: int = 5

    def check(self) -> None:
        for name in ("dim", "window", "min_count", "epochs", "workers"):
            if getattr(self, name) < 1:
                raise UserError(f"word2vec option {name} must be >= 1, got {getattr(self, name)}")


class _EpochProgress(CallbackAny2Vec):
    """Forwards each finished epoch to ``on_epoch(epoch, total)`` (e.g. a progress bar)."""

    def __init__(self, on_epoch: Callable[[int, int], None], total: int) -> None:
        self.on_epoch = on_epoch
        self.total = total
        self.epoch = 0

    def on_epoch_end(self, model: Word2Vec) -> None:
        self.epoch += 1
        self.on_epoch(self.epoch, self.total)


def train_word2vec(
    sentences: Sequence[Sequence[str]],
    options: Word2VecOptions | None = None,
    on_epoch: Callable[[int, int], None] | None = None,
) -> KeyedVectors:
    """Train word2vec on token lists and return the word vectors.

    A run is reproducible bit for bit with ``workers=1`` (gensim seeds every worker from ``seed``,
    but several threads interleave their updates in a different order each run).
    """
    opts = options or Word2VecOptions()
    opts.check()
    sentences = [list(s) for s in sentences if len(s) > 0]
    if not sentences:
        raise UserError("no text to train word2vec on (every corpus was empty)")
    model = Word2Vec(
        vector_size=opts.dim,
        sg=1 if opts.sg else 0,
        window=opts.window,
        min_count=opts.min_count,
        workers=opts.workers,
        seed=opts.seed,
        negative=opts.negative,
    )
    model.build_vocab(sentences)
    if len(model.wv) == 0:
        raise UserError(f"no word occurs at least {opts.min_count} times (min_count); nothing to train")
    callbacks = [_EpochProgress(on_epoch, opts.epochs)] if on_epoch else []
    model.train(
        sentences,
        total_examples=model.corpus_count,
        total_words=model.corpus_total_words,
        epochs=opts.epochs,
        callbacks=callbacks,
    )
    return model.wv


def save_embeddings(vectors: KeyedVectors, path: str | os.PathLike[str], binary: bool = False) -> None:
    """Write ``vectors`` in word2vec text or binary format, atomically (temporary file, then rename)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise UserError(f"output directory does not exist: {path.parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        vectors.save_word2vec_format(tmp, binary=binary)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _header(path: Path) -> tuple[int, int, bytes]:
    """(vocabulary size, dimension, first record line) of a word2vec file."""
    with path.open("rb") as fh:
        head = fh.readline(1 << 16)
        first = fh.readline(1 << 20)
    try:
        count, dim = (int(x) for x in head.decode("utf-8").split())
    except (UnicodeDecodeError, ValueError):
        raise DataFormatError(
            str(path), "line 1", f"expected a word2vec header 'COUNT DIM', got {head[:60]!r}"
        ) from None
    if count < 0 or dim < 1:
        raise DataFormatError(str(path), "line 1", f"bad word2vec header {head.strip()!r}")
    return count, dim, first


def is_binary_word2vec(path: str | os.PathLike[str]) -> bool:
    """True when the file is in word2vec binary format, judged from its first record.

    Both formats start with the text header ``COUNT DIM``; a text record is a line holding a word
    and DIM numbers, which packed float32 bytes practically never form.
    """
    _, dim, first = _header(Path(path))
    try:
        parts = first.decode("utf-8").rstrip("\n").split(" ")
        parts = [p for p in parts if p]
        if len(parts) == dim + 1:
            [float(x) for x in parts[1:]]
            return False
    except (UnicodeDecodeError, ValueError):
        pass
    return first != b""  # an empty vocabulary counts as text


def load_keyed_vectors(path: str | os.PathLike[str]) -> KeyedVectors:
    """Read a word2vec text or binary file (format detected); errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"embeddings file not found: {path}")
    binary = is_binary_word2vec(path)
    try:
        return KeyedVectors.load_word2vec_format(str(path), binary=binary, unicode_errors="strict")
    except (ValueError, EOFError, UnicodeDecodeError) as exc:
        kind = "binary" if binary else "text"
        raise DataFormatError(str(path), "records", f"not a valid word2vec {kind} file: {exc}") from None


def load_embeddings(path: str | os.PathLike[str]) -> tuple[list[str], np.ndarray]:
    """(words, float32 matrix [len(words), dim]) of a word2vec text or binary file."""
    kv = load_keyed_vectors(path)
    return list(kv.index_to_key), np.asarray(kv.vectors, dtype=np.float32)


@dataclass(frozen=True)
class Coverage:
    """How much of a vocabulary the pre-trained vectors cover (specials excluded)."""

    words: int
    found: int
    tokens: int
    tokens_found: int

    @property
    def word_rate(self) -> float:
        return self.found / self.words if self.words else 0.0

    @property
    def token_rate(self) -> float:
        """Share of running text (weighted by corpus count) that got a pre-trained vector."""
        return self.tokens_found / self.tokens if self.tokens else 0.0

    def describe(self) -> str:
        return (
            f"pre-trained vectors cover {self.found}/{self.words} words ({100 * self.word_rate:.1f}%), "
            f"{100 * self.token_rate:.1f}% of tokens"
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "word_rate": self.word_rate, "token_rate": self.token_rate}


def build_embedding_matrix(
    vocab: Vocabulary,
    words: Sequence[str] | None,
    vectors: np.ndarray | None,
    dim: int | None = None,
    seed: int = 1,
) -> tuple[np.ndarray, Coverage]:
    """Embedding layer init [len(vocab), dim] from pre-trained ``words``/``vectors`` (both may be None).

    Known words copy their vector (exact match first, then lowercased). Other rows, ``<unk>``
    included, are drawn uniformly with the same variance as the pre-trained vectors (±0.1 without
    any), so they neither dominate nor vanish next to them. ``<pad>`` is all zeros.
    """
    if vectors is not None:
        if words is None or len(words) != len(vectors):
            raise ValueError("words and vectors must have the same length")
        if dim is not None and dim != vectors.shape[1]:
            raise UserError(f"embeddings have dimension {vectors.shape[1]}, the model expects {dim}")
        dim = int(vectors.shape[1])
    if dim is None or dim < 1:
        raise UserError("an embedding dimension is needed when no pre-trained vectors are given")
    rng = np.random.default_rng(seed)
    scale = 0.1
    if vectors is not None and vectors.size:
        scale = float(np.std(vectors)) * np.sqrt(3.0)
    matrix = rng.uniform(-scale, scale, size=(len(vocab), dim)).astype(np.float32)
    matrix[PAD_ID] = 0.0
    found = tokens_found = 0
    if vectors is not None:
        where = {w: i for i, w in enumerate(words)}
        for wid in range(2, len(vocab)):
            tok = vocab.tokens[wid]
            row = where.get(tok)
            if row is None:
                row = where.get(tok.lower())
            if row is not None:
                matrix[wid] = vectors[row]
                found += 1
                tokens_found += int(vocab.counts[wid])
    cov = Coverage(
        words=len(vocab) - 2, found=found, tokens=int(vocab.counts[2:].sum()), tokens_found=tokens_found
    )
    return matrix, cov


def embedding_matrix(
    vocab: Vocabulary, path: str | os.PathLike[str] | None, dim: int | None = None, seed: int = 1
) -> np.ndarray:
    """Embedding layer init from a word2vec file (or random when ``path`` is None); logs the coverage."""
    words, vectors = load_embeddings(path) if path is not None else (None, None)
    matrix, cov = build_embedding_matrix(vocab, words, vectors, dim, seed)
    if path is not None:
        log.info("%s: %s", path, cov.describe())
    return matrix


def word2vec_matrix(
    vocab: Vocabulary, sentences: Sequence[Sequence[str]], dim: int, seed: int = 1
) -> tuple[np.ndarray, dict[str, Any]]:
    """Embedding layer init from skip-gram word2vec trained on ``sentences`` (the training text).

    The default recipes start here when no ``--embeddings`` are given: every paper initialised its
    encoder with in-domain word2vec, and it beat random vectors in this project's runs. One worker,
    so a seeded run is reproducible bit for bit. Returns the matrix and what to record of the run.
    """
    started = time.perf_counter()
    options = Word2VecOptions(dim=dim, seed=seed, workers=1)
    vectors = train_word2vec(sentences, options)
    matrix, cov = build_embedding_matrix(vocab, list(vectors.index_to_key),
                                         np.asarray(vectors.vectors, dtype=np.float32), dim, seed)
    info = {"source": "word2vec on the training text", **asdict(options), "sentences": len(sentences),
            "seconds": round(time.perf_counter() - started, 2), **cov.to_dict()}
    log.info("word2vec on the training text (%d sentences, %d-d, %.1f s): %s", len(sentences), dim,
             info["seconds"], cov.describe())
    return matrix, info
