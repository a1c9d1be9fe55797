"""Word2vec on the shipped SemEval dev sample: training, word2vec-format round trips, embedding init, CLI."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest
from click.testing import CliRunner

from es_plugin_bridge.cli.embeddings import embeddings_command
from es_plugin_bridge.core.vocab import PAD_ID, UNK_ID, Vocabulary
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import DataFormatError, UserError
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.embeddings import (
    Word2VecOptions,
    build_embedding_matrix,
    embedding_matrix,
    is_binary_word2vec,
    load_embeddings,
    save_embeddings,
    train_word2vec,
)
from es_plugin_bridge.training.word2vec_run import collect_sentences

SEMEVAL_DEV = (
    resources.files("es_plugin_bridge") / "samples/semeval2016-task3/SemEval2016-Task3-CQA-QL-dev.xml"
)
SPEC = f"semeval:{SEMEVAL_DEV}"
ASKUBUNTU_VAL = resources.files("es_plugin_bridge") / "samples/askubuntu-pairs/val.tsv"
FULL_BODIES = TextOptions(body_words=None)
# Skip-gram (the default), kept small so the whole file runs in seconds.
OPTS = Word2VecOptions(dim=24, epochs=2, window=2, workers=1, min_count=2, seed=7)


_DATASET = read_spec(SPEC)


@pytest.fixture(scope="module")
def sentences() -> list[list[str]]:
    sents, stats = collect_sentences([SPEC], FULL_BODIES)
    assert stats[0]["questions"] == 550 and stats[0]["comments"] > 4000  # 50 original + 500 related
    return sents


@pytest.fixture(scope="module")
def vectors(sentences):
    return train_word2vec(sentences, OPTS)


def test_training_covers_frequent_words_and_is_reproducible(sentences, vectors):
    assert vectors.vector_size == 24
    assert {"visa", "qatar", "doha"} <= set(vectors.index_to_key)
    first = train_word2vec(sentences[:1500], OPTS)
    again = train_word2vec(sentences[:1500], OPTS)
    assert again.index_to_key == first.index_to_key
    assert np.array_equal(again.vectors, first.vectors)  # workers=1 + fixed seed
    other_seed = train_word2vec(sentences[:1500], Word2VecOptions(**{**OPTS.__dict__, "seed": 8}))
    assert not np.array_equal(other_seed.vectors, first.vectors)


def test_epochs_are_reported(sentences):
    seen: list[tuple[int, int]] = []
    train_word2vec(
        sentences[:300],
        Word2VecOptions(dim=8, epochs=3, workers=1),
        on_epoch=lambda e, t: seen.append((e, t)),
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize("binary", [False, True])
def test_word2vec_file_round_trip(vectors, tmp_path, binary):
    path = tmp_path / ("v.bin" if binary else "v.txt")
    save_embeddings(vectors, path, binary=binary)
    assert is_binary_word2vec(path) is binary
    words, matrix = load_embeddings(path)
    assert words == list(vectors.index_to_key)
    assert np.array_equal(matrix, vectors.vectors)
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file was renamed


def test_bad_vectors_files(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_embeddings(tmp_path / "missing.txt")
    bad_header = tmp_path / "header.txt"
    bad_header.write_text("hello world\n")
    with pytest.raises(DataFormatError, match="header.txt:line 1"):
        load_embeddings(bad_header)
    short = tmp_path / "short.txt"
    short.write_text("2 3\nfoo 1 2 3\nbar 1 2\n")
    with pytest.raises(DataFormatError, match="short.txt"):
        load_embeddings(short)


def test_embedding_matrix_from_vectors(vectors, tmp_path):
    pre = Preprocessor(FULL_BODIES)
    questions = _DATASET.questions.values()
    vocab = Vocabulary.build([pre.tokens(q) for q in questions], min_count=2)
    path = tmp_path / "v.bin"
    save_embeddings(vectors, path, binary=True)
    matrix = embedding_matrix(vocab, path, dim=24, seed=3)
    assert matrix.shape == (len(vocab), 24) and matrix.dtype == np.float32
    assert not matrix[PAD_ID].any() and matrix[UNK_ID].any()
    # The vectors were trained on a superset of these questions with the same min count: all covered.
    words, vecs = load_embeddings(path)
    _, cov = build_embedding_matrix(vocab, words, vecs, seed=3)
    assert cov.found == cov.words == len(vocab) - 2 and cov.token_rate == 1.0
    for tok in ("visa", "qatar"):
        assert np.array_equal(matrix[vocab.id(tok)], vectors[tok])
    # A vocabulary with words the vectors lack: those rows are random, small, and seeded.
    other = Vocabulary.build([["visa", "visa", "zzqx", "zzqx"]], min_count=1)
    m1, cov1 = build_embedding_matrix(other, words, vecs, seed=3)
    m2, _ = build_embedding_matrix(other, words, vecs, seed=3)
    assert cov1.found == 1 and cov1.word_rate == 0.5 and np.array_equal(m1, m2)
    assert np.abs(m1[other.id("zzqx")]).max() < np.abs(vecs).max()
    with pytest.raises(UserError, match="dimension"):
        embedding_matrix(vocab, path, dim=50)
    random_only = embedding_matrix(vocab, None, dim=10)
    assert random_only.shape == (len(vocab), 10) and not random_only[PAD_ID].any()


def test_cli_writes_vectors_and_sidecar(tmp_path):
    # Two corpora: 300 real AskUbuntu pairs (title + HTML body) and the same again as a second spec.
    lines = (ASKUBUNTU_VAL.read_text(encoding="utf-8").splitlines())[:300]
    tsv = tmp_path / "val300.tsv"
    tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "askubuntu.bin"
    args = ["--corpus", f"pairs:{tsv}", "--corpus", f"pairs:{tsv}", "--out", str(out)]
    result = CliRunner().invoke(
        embeddings_command, [*args, "--dim", "16", "--epochs", "1", "--workers", "1", "--cbow"]
    )
    assert result.exit_code == 0, result.output
    words, matrix = load_embeddings(out)
    assert is_binary_word2vec(out) and matrix.shape == (len(words), 16)
    assert {"ubuntu", "install", "__url__"} <= set(words)
    meta = json.loads((tmp_path / "askubuntu.bin.json").read_text())
    assert meta["words"] == len(words) and meta["options"]["architecture"] == "cbow"
    assert len(meta["corpora"]) == 2 and meta["corpora"][0] == {
        **meta["corpora"][1],
        "spec": meta["corpora"][0]["spec"],
    }
    assert 300 < meta["corpora"][0]["questions"] <= 600 and meta["tokens"] > 10_000
    text_out = tmp_path / "askubuntu.txt"
    result = CliRunner().invoke(
        embeddings_command, [*args[:2], "--out", str(text_out), "--dim", "8", "--epochs", "1"]
    )
    assert result.exit_code == 0, result.output
    assert not is_binary_word2vec(text_out) and load_embeddings(text_out)[1].shape[1] == 8


def test_cli_bad_input_names_the_problem(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(
        embeddings_command, ["--corpus", f"semeval:{tmp_path}/nope.xml", "--out", str(tmp_path / "v")]
    )
    assert isinstance(missing.exception, UserError) and "nope.xml" in str(missing.exception)
    unknown = runner.invoke(
        embeddings_command, ["--corpus", f"word:{SEMEVAL_DEV}", "--out", str(tmp_path / "v")]
    )
    assert isinstance(unknown.exception, UserError) and "unknown format" in str(unknown.exception)
    no_dir = runner.invoke(embeddings_command, ["--corpus", SPEC, "--out", str(tmp_path / "no" / "v")])
    assert isinstance(no_dir.exception, UserError) and "does not exist" in str(no_dir.exception)
    no_corpus = runner.invoke(embeddings_command, ["--out", str(tmp_path / "v")])
    assert no_corpus.exit_code == 2 and "--corpus" in no_corpus.output
