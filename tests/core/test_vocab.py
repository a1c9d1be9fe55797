"""Vocabulary on real SemEval questions: min count, reserved ids, order, encoding, idf, JSON round trip."""

from __future__ import annotations

import json
import os
from collections import Counter
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.core.vocab import PAD, PAD_ID, UNK, UNK_ID, Vocabulary
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import DataFormatError, UserError
from es_plugin_bridge.text import Preprocessor, TextOptions

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


# -- empty, one-element and degenerate inputs; every refusal names its field ------------------------


def test_a_vocabulary_of_no_document_has_only_the_reserved_ids():
    vocab = Vocabulary.build([], min_count=1)
    assert vocab.tokens == [PAD, UNK] and vocab.n_docs == 0 and len(vocab) == 2
    assert vocab.counts.tolist() == [0, 0] and vocab.doc_freqs.tolist() == [0, 0]
    # n_docs counts as 1 and <unk> as a one-document word: ln(1 + 0.5 / 1.5).
    np.testing.assert_allclose(vocab.idf, [0.0, np.log1p(0.5 / 1.5)], rtol=1e-6)
    assert vocab.idf.dtype == np.float32


def test_counts_document_frequencies_and_unk_totals_on_real_questions(docs):
    vocab = Vocabulary.build(docs, min_count=4)
    counts = Counter(tok for d in docs for tok in d)
    dfs = Counter(tok for d in docs for tok in set(d))
    kept = set(vocab.tokens[2:])
    assert all(vocab.doc_freqs[vocab.id(t)] == dfs[t] for t in kept)
    assert vocab.counts[UNK_ID] == sum(c for t, c in counts.items() if t not in kept)
    assert vocab.doc_freqs[UNK_ID] == sum(d for t, d in dfs.items() if t not in kept)
    assert (vocab.counts[PAD_ID], vocab.doc_freqs[PAD_ID], vocab.min_count) == (0, 0, 4)
    word = next(t for t, c in counts.items() if c == 4)
    assert word in vocab  # exactly min_count occurrences are kept


def test_max_size_at_its_ends(docs):
    with pytest.raises(UserError, match="max_size must be >= 2"):
        Vocabulary.build(docs, max_size=1)
    only_reserved = Vocabulary.build(docs, min_count=1, max_size=2)
    assert only_reserved.tokens == [PAD, UNK]
    assert only_reserved.counts[UNK_ID] == sum(len(d) for d in docs)
    assert only_reserved.doc_freqs[UNK_ID] == sum(len(set(d)) for d in docs)
    three = Vocabulary.build(docs, min_count=1, max_size=3)
    most = Counter(tok for d in docs for tok in d).most_common(1)[0][0]
    assert three.tokens == [PAD, UNK, most]


def test_encode_at_max_len_one_exact_and_empty(docs):
    vocab = Vocabulary.build(docs, min_count=2)
    doc = [t for t in docs[0] if t in vocab][:3]
    ids, mask = vocab.encode(doc, max_len=1)
    assert ids.tolist() == [vocab.id(doc[0])] and mask.tolist() == [1]
    ids, mask = vocab.encode(doc, max_len=3)
    assert ids.tolist() == [vocab.id(t) for t in doc] and mask.tolist() == [1, 1, 1]
    ids, mask = vocab.encode([], max_len=2)
    assert ids.tolist() == [PAD_ID, PAD_ID] and mask.tolist() == [0, 0]
    ids, mask = vocab.encode([])
    assert ids.shape == (0,) and mask.shape == (0,) and ids.dtype == mask.dtype == np.int64
    for bad in (0, -1):
        with pytest.raises(ValueError, match="max_len must be >= 1"):
            vocab.encode(doc, max_len=bad)


def test_encode_batch_width_is_the_longest_document_capped(docs):
    vocab = Vocabulary.build(docs, min_count=2)
    batch, mask = vocab.encode_batch([docs[0][:2], docs[1][:5]])
    assert batch.shape == (2, 5) and mask.sum(axis=1).tolist() == [2, 5]
    assert batch[0].tolist() == vocab.encode(docs[0][:2], 5)[0].tolist()
    capped, _ = vocab.encode_batch([docs[1][:5]], max_len=10)
    assert capped.shape == (1, 5)  # the cap never widens
    none, none_mask = vocab.encode_batch([])
    assert none.shape == (0, 1) and none_mask.shape == (0, 1)


def test_lookup_decode_and_membership():
    vocab = Vocabulary([PAD, UNK, "ubuntu", "wifi"], [0, 3, 5, 2], [0, 2, 4, 2], n_docs=6)
    assert "ubuntu" in vocab and "usb" not in vocab and PAD in vocab and 3 not in vocab
    assert vocab.ids(["wifi", "usb", "ubuntu"]) == [3, UNK_ID, 2] and vocab.id("usb") == UNK_ID
    assert vocab.decode([2, PAD_ID, UNK_ID, 3, PAD_ID]) == ["ubuntu", UNK, "wifi"]
    assert vocab.decode([]) == []
    np.testing.assert_allclose(vocab.idf, [0.0, np.log1p(5.5 / 1.5), np.log1p(2.5 / 4.5),
                                           np.log1p(4.5 / 2.5)], rtol=1e-6)


SIX_TWICE = [PAD, UNK, *"abcdef", *"abcdef", "g"]


@pytest.mark.parametrize(("tokens", "counts", "dfs", "message"), [
    (["a", UNK, "b"], [0, 0, 0], [0, 0, 0], "a vocabulary starts with '<pad>', '<unk>'; got ['a', '<unk>']"),
    ([PAD], [0], [0], "a vocabulary starts with '<pad>', '<unk>'; got ['<pad>']"),
    ([PAD, UNK, "a"], [0, 0], [0, 0, 0], "tokens, counts and doc_freqs must have the same length"),
    ([PAD, UNK, "a"], [0, 0, 1], [0, 0], "tokens, counts and doc_freqs must have the same length"),
    ([PAD, UNK, "a", "b", "a"], [0] * 5, [0] * 5, "duplicate tokens in vocabulary: ['a']"),
    (SIX_TWICE, [0] * 15, [0] * 15, "duplicate tokens in vocabulary: ['a', 'b', 'c', 'd', 'e']"),
])
def test_an_inconsistent_vocabulary_is_refused(tokens, counts, dfs, message):
    with pytest.raises(ValueError) as err:
        Vocabulary(tokens, counts, dfs, n_docs=1)
    assert str(err.value) == message


NOT_A_VOCABULARY = "not a vocabulary file (expected format 'es_plugin_bridge.vocabulary')"


@pytest.mark.parametrize(("edit", "field", "problem"), [
    (lambda d: d.update(format="other"), "format", NOT_A_VOCABULARY),
    (lambda d: d.pop("format"), "format", NOT_A_VOCABULARY),
    (lambda d: d.update(version=2), "version", "unsupported version 2"),
    (lambda d: d.update(tokens="abc"), "tokens", "missing or not a list"),
    (lambda d: d.update(counts=None), "counts", "missing or not a list"),
    (lambda d: d.update(doc_freqs={}), "doc_freqs", "missing or not a list"),
    (lambda d: d.update(n_docs="3"), "n_docs", "missing or not a int"),
    (lambda d: d["tokens"].append(7), "tokens", "every token must be a string"),
    (lambda d: d["counts"].append(7), "tokens", "tokens, counts and doc_freqs must have the same length"),
])
def test_a_malformed_file_names_the_field(edit, field, problem):
    data = Vocabulary([PAD, UNK, "a"], [0, 1, 2], [0, 1, 1], n_docs=2, min_count=2).to_dict()
    edit(data)
    with pytest.raises(DataFormatError) as err:
        Vocabulary.from_dict(data, "v.json")
    assert (err.value.path, err.value.where, err.value.problem) == ("v.json", field, problem)


def test_from_dict_round_trip_and_default_min_count():
    data = Vocabulary([PAD, UNK, "a"], [0, 1, 2], [0, 1, 1], n_docs=2, min_count=2).to_dict()
    assert data == {"format": "es_plugin_bridge.vocabulary", "version": 1, "min_count": 2, "n_docs": 2,
                    "tokens": [PAD, UNK, "a"], "counts": [0, 1, 2], "doc_freqs": [0, 1, 1]}
    assert Vocabulary.from_dict(data).min_count == 2
    del data["min_count"]
    assert Vocabulary.from_dict(data).min_count == 1
    with pytest.raises(DataFormatError) as err:
        Vocabulary.from_dict([1, 2])
    assert (err.value.path, err.value.where) == ("vocabulary", "format")


def test_the_default_minimum_counts(docs):
    assert Vocabulary([PAD, UNK], [0, 0], [0, 0], n_docs=0).min_count == 1
    vocab = Vocabulary.build(docs)
    counts = Counter(tok for d in docs for tok in d)
    assert vocab.min_count == 2 and set(vocab.tokens[2:]) == {t for t, c in counts.items() if c >= 2}


def test_save_replaces_atomically_and_leaves_no_temporary_file(tmp_path):
    vocab = Vocabulary([PAD, UNK, "é"], [0, 1, 2], [0, 1, 1], n_docs=2)
    path = tmp_path / "vocab.json"
    path.write_text("old")
    vocab.save(path)
    assert Vocabulary.load(path).tokens == [PAD, UNK, "é"] and "é" in path.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vocab.json"]
    broken = Vocabulary([PAD, UNK, "x"], [0, 1, 1], [0, 1, 1], n_docs=1)
    broken.tokens.append(object())  # json.dump fails half-way through the temporary file
    with pytest.raises(TypeError, match="not JSON serializable"):
        broken.save(tmp_path / "bad.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vocab.json"]


def test_save_writes_a_hidden_temporary_file_beside_the_target(tmp_path, monkeypatch):
    """Beside it, so the final rename stays on one file system (atomic); hidden, so no reader takes it."""
    renames = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (renames.append((Path(src), Path(dst))),
                                                         real_replace(src, dst))[1])
    target = tmp_path / "models" / "vocab.json"
    target.parent.mkdir()
    Vocabulary([PAD, UNK, "a"], [0, 1, 2], [0, 1, 1], n_docs=2).save(target)
    ((src, dst),) = renames
    assert dst == target and src.parent == target.parent
    assert src.name.startswith(".vocab.json.") and src.name.endswith(".tmp")
    monkeypatch.chdir(tmp_path / "models")
    Vocabulary([PAD, UNK], [0, 0], [0, 0], n_docs=0).save("here.json")  # a bare name: the current dir
    assert renames[-1][0].parent.resolve() == (tmp_path / "models").resolve()
    assert Vocabulary.load(tmp_path / "models" / "here.json").tokens == [PAD, UNK]


def test_arrays_are_int64_ids_and_masks_and_float32_weights(docs):
    vocab = Vocabulary.build(docs, min_count=2)
    for ids, mask in (vocab.encode(docs[0], max_len=4), vocab.encode_batch(docs[:3]),
                      vocab.encode_batch(docs[:3], max_len=2)):
        assert ids.dtype == np.int64 and mask.dtype == np.int64
    assert vocab.idf.dtype == np.float32


def test_a_file_that_is_not_json_names_the_field_and_the_reason(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text('{"format": ', encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        Vocabulary.load(path)
    assert (err.value.path, err.value.where) == (str(path), "json")
    assert err.value.problem.startswith("Expecting value")
    path.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(DataFormatError) as err:
        Vocabulary.load(path)
    assert err.value.where == "json" and "utf-8" in err.value.problem
