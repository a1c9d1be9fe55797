"""Vocabulary on real SemEval questions: min count, reserved ids, order, encoding, idf, JSON round trip."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources

import numpy as np
import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import DataFormatError, UserError
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.vocab import PAD, PAD_ID, UNK, UNK_ID, Vocabulary

SEMEVAL_DEV = (
    resources.files("es_plugin_bridge") / "samples/semeval2016-task3/SemEval2016-Task3-CQA-QL-dev.xml"
)


@pytest.fixture(scope="module")
def docs() -> list[list[str]]:
    ds = read_spec(f"semeval:{SEMEVAL_DEV}")
    pre = Preprocessor(TextOptions())
    return [pre.tokens(q) for q in ds.questions.values()]


def test_build_keeps_words_at_min_count_in_count_then_token_order(docs):
    counts = Counter(tok for d in docs for tok in d)
    vocab = Vocabulary.build(docs, min_count=3)
    assert vocab.tokens[:2] == [PAD, UNK]
    kept = vocab.tokens[2:]
    assert set(kept) == {t for t, c in counts.items() if c >= 3}
    assert kept == sorted(kept, key=lambda t: (-counts[t], t))
    assert all(vocab.counts[vocab.id(t)] == counts[t] for t in kept)
    rare = next(t for t, c in counts.items() if c == 2)
    assert rare not in vocab and vocab.id(rare) == UNK_ID
    assert vocab.counts[UNK_ID] == sum(c for c in counts.values() if c < 3)
    assert vocab.n_docs == len(docs)
    # min_count=1 keeps every word; the order is the same for the words both keep.
    full = Vocabulary.build(docs, min_count=1)
    assert len(full) == len(counts) + 2
    assert full.tokens[: len(vocab)] == vocab.tokens


def test_build_is_deterministic_and_max_size_keeps_most_frequent(docs):
    a = Vocabulary.build(docs, min_count=2)
    b = Vocabulary.build(list(reversed(docs)), min_count=2)
    assert a.tokens == b.tokens
    small = Vocabulary.build(docs, min_count=2, max_size=50)
    assert len(small) == 50 and small.tokens == a.tokens[:50]


def test_encode_pads_and_truncates_only_with_max_len(docs):
    vocab = Vocabulary.build(docs, min_count=2)
    doc = max(docs, key=len)
    ids, mask = vocab.encode(doc)
    assert len(ids) == len(doc) and mask.all()
    assert vocab.decode(ids) == [t if t in vocab else UNK for t in doc]
    cut, cut_mask = vocab.encode(doc, max_len=5)
    assert cut.tolist() == ids[:5].tolist() and cut_mask.tolist() == [1] * 5
    padded, pad_mask = vocab.encode(["the", "zzz-never-seen"], max_len=4)
    assert padded.tolist() == [vocab.id("the"), UNK_ID, PAD_ID, PAD_ID]
    assert pad_mask.tolist() == [1, 1, 0, 0]
    batch, batch_mask = vocab.encode_batch([doc[:3], [], doc[:7]], max_len=6)
    assert batch.shape == (3, 6) and batch_mask.sum(axis=1).tolist() == [3, 0, 6]
    empty, empty_mask = vocab.encode_batch([[]])
    assert empty.shape == (1, 1) and empty_mask.sum() == 0


def test_idf_falls_with_document_frequency(docs):
    vocab = Vocabulary.build(docs, min_count=2)
    idf = vocab.idf
    assert idf.shape == (len(vocab),) and idf[PAD_ID] == 0.0
    assert (idf[1:] > 0).all()
    df = vocab.doc_freqs[2:]
    common, rare = 2 + int(np.argmax(df)), 2 + int(np.argmin(df))
    assert idf[common] < idf[rare]
    assert idf[UNK_ID] >= idf[2:].max()
    n = len(docs)
    expected = np.log1p((n - df + 0.5) / (df + 0.5))
    np.testing.assert_allclose(idf[2:], expected, rtol=1e-6)


def test_json_round_trip_and_bad_files(docs, tmp_path):
    vocab = Vocabulary.build(docs, min_count=2)
    path = tmp_path / "vocab.json"
    vocab.save(path)
    again = Vocabulary.load(path)
    assert again.tokens == vocab.tokens and again.n_docs == vocab.n_docs
    assert np.array_equal(again.counts, vocab.counts) and np.array_equal(again.idf, vocab.idf)

    data = json.loads(path.read_text())
    data["tokens"][1] = "x"
    path.write_text(json.dumps(data))
    with pytest.raises(DataFormatError, match="vocab.json"):
        Vocabulary.load(path)
    path.write_text("{not json")
    with pytest.raises(DataFormatError, match="vocab.json"):
        Vocabulary.load(path)
    with pytest.raises(UserError, match="not found"):
        Vocabulary.load(tmp_path / "missing.json")


def test_reserved_tokens_in_data_are_refused():
    with pytest.raises(UserError, match="<unk>"):
        Vocabulary.build([["a", "<unk>"]], min_count=1)
    with pytest.raises(UserError, match="min_count"):
        Vocabulary.build([["a"]], min_count=0)
