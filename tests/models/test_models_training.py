"""Every model type learns from real AskUbuntu pairs with its paper's loss; checkpoints round-trip."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from test_models_data import SMALL, Vocab, one_thread, read_pairs, small_model  # noqa: F401

from es_plugin_bridge.models import PAPER_TYPES, TitleDecoder, build_model
from es_plugin_bridge.training.losses import PAPER_LOSS, logistic_ranking_loss, max_margin_loss, mse_loss

NEGATIVES = 4
STEPS = 30


@pytest.fixture(scope="module")
def data():
    rows = read_pairs("train_titles.tsv", 400)
    vocab = Vocab([r[1] for r in rows] + [r[3] for r in rows])
    rng = random.Random(7)
    dups = [r for r in rows if r[0] == 1][:24]
    pool = [r[3] for r in rows if r[0] == 0]
    negatives = [t for _ in dups for t in rng.sample(pool, NEGATIVES)]
    mixed = rows[:32]
    empty = [""]

    def q(titles):
        return vocab.questions(titles, empty * len(titles))

    return {
        "vocab": vocab,
        "query": q([r[1] for r in dups]),
        "positive": q([r[3] for r in dups]),
        "negatives": q(negatives),
        "left": q([r[1] for r in mixed]),
        "right": q([r[3] for r in mixed]),
        "labels": torch.tensor([r[0] for r in mixed], dtype=torch.float32),
        "idf": idf(vocab, [r[1] for r in rows] + [r[3] for r in rows]),
    }


def idf(vocab: Vocab, texts: list[str]) -> np.ndarray:
    from test_models_data import tokens

    df = np.zeros(len(vocab))
    for text in texts:
        for word in set(tokens(text)):
            df[vocab.ids[word]] += 1
    return np.log(len(texts) / np.maximum(df, 1)).astype(np.float32)


def paper_loss(model, data) -> torch.Tensor:
    kind = PAPER_LOSS[model.model_type]
    if kind == "mse":
        return mse_loss(model(data["left"], data["right"]), data["labels"])
    query = model.encode(*data["query"].values())
    pos = model.score(query, model.encode(*data["positive"].values()))
    neg = model.score_candidates(query, model.encode(*data["negatives"].values()))
    assert neg.shape == (pos.shape[0], NEGATIVES)
    return logistic_ranking_loss(pos, neg) if kind == "logistic" else max_margin_loss(pos, neg)


@pytest.mark.parametrize("model_type", PAPER_TYPES)
def test_loss_falls_with_a_few_steps(model_type, data):
    torch.manual_seed(0)
    extra = {"idf": data["idf"]} if model_type == "bow-cnn" else {}
    model = small_model(model_type, len(data["vocab"]), **extra)
    optimiser = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.01)
    model.eval()
    with torch.no_grad():
        before = paper_loss(model, data).item()
    model.train()
    for _ in range(STEPS):
        optimiser.zero_grad()
        loss = paper_loss(model, data)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.25)
        optimiser.step()
    model.eval()
    with torch.no_grad():
        after = paper_loss(model, data).item()
    assert after < 0.7 * before, (model_type, before, after)


def test_bow_weights_start_at_idf_and_can_be_frozen(data):
    model = small_model("bow-cnn", len(data["vocab"]), idf=data["idf"], bow_trainable=False)
    assert torch.equal(model.bow.weight.detach(), torch.from_numpy(data["idf"]))
    assert not model.bow.weight.requires_grad
    ones = small_model("bow-cnn", len(data["vocab"]), bow_init="ones", idf=data["idf"])
    assert torch.equal(ones.bow.weight.detach(), torch.ones(len(data["vocab"])))
    scores = model.component_scores(
        model.encode(*data["query"].values()), model.encode(*data["positive"].values())
    )
    assert set(scores) == {"neural", "bow"}
    assert ((scores["bow"] >= 0) & (scores["bow"] <= 1 + 1e-6)).all()


@pytest.mark.parametrize("model_type", PAPER_TYPES)
def test_safetensors_round_trip_gives_identical_scores(model_type, data, tmp_path):
    torch.manual_seed(1)
    model = small_model(model_type, len(data["vocab"])).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))  # not the initial values
    path = tmp_path / "model.safetensors"
    save_file(model.state_dict(), str(path))
    config = model.config()
    torch.manual_seed(99)
    rebuilt = build_model(**config).eval()
    rebuilt.load_state_dict(load_file(str(path)))
    assert rebuilt.config() == config
    with torch.no_grad():
        expected = model(data["left"], data["right"])
        got = rebuilt(data["left"], data["right"])
    assert torch.equal(expected, got)


@pytest.mark.parametrize("model_type", ["rcnn", "gru"])
def test_title_decoder_pretraining_learns_and_transfers(model_type, tmp_path):
    rows = read_pairs("val.tsv", 16)
    titles, bodies = [r[1] for r in rows], [r[2] for r in rows]
    vocab = Vocab(titles + bodies)
    q = vocab.questions(titles, bodies)
    torch.manual_seed(0)
    model = small_model(model_type, len(vocab))
    decoder = TitleDecoder.for_model(model, dropout=0.0)
    optimiser = torch.optim.Adam(decoder.parameters(), lr=0.01)
    decoder.eval()
    with torch.no_grad():
        before = decoder.question_loss(*q.values()).item()
        from_body = decoder(q["body_ids"], q["body_mask"], q["title_ids"], q["title_mask"]).item()
    assert before == pytest.approx(np.log(len(vocab) + 1), rel=0.2)  # near-uniform over words + end
    assert from_body > 0
    decoder.train()
    for _ in range(20):
        optimiser.zero_grad()
        decoder.question_loss(*q.values()).backward()
        optimiser.step()
    decoder.eval()
    with torch.no_grad():
        after = decoder.question_loss(*q.values()).item()
    assert after < 0.8 * before
    # The pre-trained encoder moves into a fresh similarity model through safetensors.
    path = tmp_path / "encoder.safetensors"
    save_file(decoder.encoder_state(), str(path))
    fresh = build_model(**model.config()).eval()
    fresh.load_encoder_state(load_file(str(path)))
    model.eval()
    with torch.no_grad():
        assert torch.equal(fresh.encode(*q.values())["neural"], model.encode(*q.values())["neural"])


def test_pretraining_refuses_other_types_and_mismatched_weights():
    from es_plugin_bridge.errors import UserError

    with pytest.raises(UserError, match="pre-training applies to rcnn, lstm, gru"):
        TitleDecoder.for_model(build_model("cnn", 20, embedding_dim=8, conv_units=8))
    small = build_model("rcnn", 20, embedding_dim=8, hidden_dim=8)
    bigger = build_model("rcnn", 20, embedding_dim=8, hidden_dim=12)
    with pytest.raises(UserError, match="shape"):
        bigger.load_encoder_state(small.encoder.state_dict())
    with pytest.raises(UserError, match="does not fit"):
        small.load_encoder_state(build_model("gru", 20, embedding_dim=8, hidden_dim=8).encoder.state_dict())


assert set(SMALL) == set(PAPER_TYPES)
