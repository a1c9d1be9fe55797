"""Real AskUbuntu questions as model inputs (helpers shared by the model tests), and padding/body handling.

Tokenisation is a plain lowercase regex and the vocabulary is built here, so these tests do not
depend on the text module.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import es_plugin_bridge
from es_plugin_bridge.models import PAPER_TYPES, build_model

SAMPLES = Path(es_plugin_bridge.__file__).parent / "samples" / "askubuntu-pairs"
TOKEN = re.compile(r"[a-z0-9]+")
TAG = re.compile(r"<[^>]*>")

# Small sizes so every model type trains in well under a second per step.
SMALL = {
    "bow-cnn": {"conv_units": 32},
    "cnn": {"conv_units": 32},
    "rcnn": {"hidden_dim": 24},
    "lstm": {"hidden_dim": 24},
    "gru": {"hidden_dim": 24},
    "siamese-lstm": {"hidden_dim": 16, "attention_dim": 16},
    "siamese-cnn": {"num_filters": 16, "kernel_sizes": [2, 3], "dense_dim": 16},
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run faster on one thread, and other processes share the 2 cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


def read_pairs(name: str, limit: int) -> list[tuple[int, str, str, str, str]]:
    """(label, title1, body1, title2, body2) of the first ``limit`` lines; bodies split at the first tag."""
    rows = []
    with open(SAMPLES / name, encoding="utf-8") as handle:
        for line in handle:
            label, q1, q2 = line.rstrip("\n").split("\t")
            parts = []
            for q in (q1, q2):
                cut = q.find("<")
                title, body = (q, "") if cut < 0 else (q[:cut], TAG.sub(" ", q[cut:]))
                parts += [title, body]
            rows.append((int(label == "duplicate"), *parts))
            if len(rows) == limit:
                break
    return rows


class Vocab:
    """Word → id over the given texts; ids 0 and 1 are padding and the unknown word, as in
    core.vocab.Vocabulary."""

    def __init__(self, texts: list[str]) -> None:
        self.ids = {"<pad>": 0, "<unk>": 1}
        for text in texts:
            for word in tokens(text):
                self.ids.setdefault(word, len(self.ids))

    def __len__(self) -> int:
        return len(self.ids)

    def encode(
        self, texts: list[str], length: int | None = None, cap: int = 40
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-aligned [B, length] ids and bool mask (length: longest text, at least 1)."""
        seqs = [[self.ids.get(w, 1) for w in tokens(t)][:cap] for t in texts]
        width = length or max(1, max(len(s) for s in seqs))
        ids = torch.zeros(len(seqs), width, dtype=torch.int64)
        mask = torch.zeros(len(seqs), width, dtype=torch.bool)
        for row, seq in enumerate(seqs):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.int64)
            mask[row, : len(seq)] = True
        return ids, mask

    def questions(self, titles: list[str], bodies: list[str], pad: int = 0) -> dict[str, torch.Tensor]:
        """The four-tensor question dict the models take, with ``pad`` extra padding columns."""
        title_ids, title_mask = self.encode(titles)
        body_ids, body_mask = self.encode(bodies)
        if pad:
            title_ids, title_mask = self.encode(titles, title_ids.shape[1] + pad)
            body_ids, body_mask = self.encode(bodies, body_ids.shape[1] + pad)
        return {
            "title_ids": title_ids,
            "title_mask": title_mask,
            "body_ids": body_ids,
            "body_mask": body_mask,
        }


def small_model(model_type: str, vocab_size: int, **extra):
    return build_model(model_type, vocab_size, embedding_dim=16, **{**SMALL[model_type], **extra})


def test_padding_never_changes_an_encoding():
    rows = read_pairs("val.tsv", 6)
    titles, bodies = [r[1] for r in rows], [r[2] for r in rows]
    bodies[1] = ""  # one question without body
    vocab = Vocab(titles + bodies)
    tight, padded = vocab.questions(titles, bodies), vocab.questions(titles, bodies, pad=7)
    assert padded["title_ids"].shape[1] == tight["title_ids"].shape[1] + 7
    for model_type in PAPER_TYPES:
        torch.manual_seed(0)
        model = small_model(model_type, len(vocab)).eval()
        with torch.no_grad():
            a = model.encode(*tight.values())
            b = model.encode(*padded.values())
            assert torch.allclose(a["neural"], b["neural"], atol=1e-5), model_type
            assert a["neural"].abs().sum(1).min() > 0, model_type
            if "bow" in a:
                assert torch.allclose(a["bow"].sum(1), b["bow"].sum(1), atol=1e-5)
            assert torch.allclose(model(tight, tight), model(padded, padded), atol=1e-5)


def test_title_and_body_both_count_and_empty_body_is_handled():
    rows = read_pairs("val.tsv", 4)
    titles, bodies = [r[1] for r in rows], [r[2] for r in rows]
    vocab = Vocab(titles + bodies)
    with_body = vocab.questions(titles, bodies)
    without_body = vocab.questions(titles, [""] * len(titles))
    assert not without_body["body_mask"].any()
    for model_type in PAPER_TYPES:
        torch.manual_seed(0)
        model = small_model(model_type, len(vocab)).eval()
        with torch.no_grad():
            full = model.encode(*with_body.values())["neural"]
            title_only = model.encode(*without_body.values())["neural"]
            title_alone = model.encoder(with_body["title_ids"], with_body["title_mask"])
        assert torch.isfinite(title_only).all(), model_type
        assert not torch.allclose(full, title_only, atol=1e-4), f"{model_type} ignores the body"
        # with no body, the question is its title
        assert torch.allclose(title_only, title_alone, atol=1e-5), model_type


def test_bow_representation_is_tf_times_weight_over_distinct_words():
    rows = read_pairs("val.tsv", 3)
    titles, bodies = [r[1] for r in rows], [r[2] for r in rows]
    vocab = Vocab(titles + bodies)
    q = vocab.questions(titles, bodies)
    model = small_model("bow-cnn", len(vocab), bow_init="ones")
    with torch.no_grad():
        model.bow.weight.copy_(torch.rand(len(vocab)) + 0.5)
        enc = model.encode(*q.values())
    for row, (title, body) in enumerate(zip(titles, bodies, strict=True)):
        words = tokens(title)[:40] + tokens(body)[:40]
        expected = {}
        for word in words:
            expected[vocab.ids[word]] = expected.get(vocab.ids[word], 0.0) + 1.0
        got = {
            int(i): float(v) for i, v in zip(enc["bow_ids"][row], enc["bow"][row], strict=True) if int(i) >= 0
        }
        assert set(got) == set(expected)
        for word_id, tf in expected.items():
            assert got[word_id] == pytest.approx(tf * float(model.bow.weight[word_id].detach()), rel=1e-6)


def test_unknown_words_are_no_shared_word_in_the_bag_of_words():
    """Two questions made only of (different) unknown words must not look alike to the BOW path."""
    from es_plugin_bridge.models.bow import bow_cosine

    vocab = Vocab(["how do I install ubuntu"])
    q = vocab.questions(["zzqxfoo blargh", "how do I install wxyzbar"], ["", ""])
    other = vocab.questions(["quuxly frobnicate", "how do I install quuxly"], ["", ""])
    model = small_model("bow-cnn", len(vocab))
    with torch.no_grad():
        a, b = model.encode(*q.values()), model.encode(*other.values())
    cos = bow_cosine(a["bow_ids"], a["bow"], b["bow_ids"], b["bow"])
    assert float(cos[0]) == 0.0  # nothing but unknown words on either side
    assert float(cos[1]) == pytest.approx(1.0)  # the known words match; the unknown ones count for nothing
