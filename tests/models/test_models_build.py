"""build_model's contract: every type builds, config rebuilds, bad input fails clearly; Manhattan range."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_models_data import SMALL, Vocab, one_thread, read_pairs, small_model  # noqa: F401

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import PAPER_TYPES, build_model, hyper_defaults, manhattan_similarity


def test_unknown_model_type_names_it_and_the_choices():
    with pytest.raises(UserError, match=r"unknown model type 'bert-large'.*bow-cnn.*siamese-cnn"):
        build_model("bert-large", 100)


@pytest.mark.parametrize(
    ("model_type", "hyper", "pattern"),
    [
        ("cnn", {"windw": 3}, r"unknown hyper-parameter 'windw' for model type 'cnn' \(known: .*window"),
        ("rcnn", {"pooling": "max"}, r"bad hyper-parameter 'pooling' for model type 'rcnn'.*'max'"),
        ("lstm", {"hidden_dim": 0}, r"bad hyper-parameter 'hidden_dim'.*greater than or equal to 1"),
        ("bow-cnn", {"bow_init": "random"}, r"bad hyper-parameter 'bow_init'"),
        ("siamese-lstm", {"similarity": "euclidean"}, r"bad hyper-parameter 'similarity'"),
        ("gru", {"dropout": 1.5}, r"bad hyper-parameter 'dropout'"),
        ("siamese-cnn", {"kernel_sizes": []}, r"bad hyper-parameter 'kernel_sizes'"),
        ("rcnn", {"window": 3}, r"unknown hyper-parameter 'window' for model type 'rcnn'"),
    ],
)
def test_bad_hyper_parameters_are_user_errors(model_type, hyper, pattern):
    with pytest.raises(UserError, match=pattern):
        build_model(model_type, 100, **hyper)


def test_bad_arrays_and_sizes_are_user_errors():
    with pytest.raises(UserError, match=r"embeddings have shape \(10, 8\), expected \(10, 200\)"):
        build_model("cnn", 10, embeddings=np.zeros((10, 8)))
    with pytest.raises(UserError, match=r"idf has shape \(9,\), expected \(10,\)"):
        build_model("bow-cnn", 10, idf=np.ones(9))
    with pytest.raises(UserError, match="vocab_size"):
        build_model("cnn", 0)


def test_embeddings_initialise_and_can_freeze():
    vectors = np.random.default_rng(0).normal(size=(30, 8)).astype(np.float32)
    model = build_model("gru", 30, embedding_dim=8, embeddings=vectors, freeze_embeddings=True, hidden_dim=8)
    assert np.array_equal(model.encoder.embedding.weight.detach().numpy(), vectors)
    assert not model.encoder.embedding.weight.requires_grad


@pytest.mark.parametrize("model_type", PAPER_TYPES)
def test_config_is_json_and_rebuilds_the_same_architecture(model_type):
    import json

    model = small_model(model_type, 50)
    config = json.loads(json.dumps(model.config()))
    rebuilt = build_model(**config)
    assert rebuilt.config() == config
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {
        k: v.shape for k, v in model.state_dict().items()
    }
    assert model.similarity == hyper_defaults(model_type)["similarity"]
    assert model.model_type == model_type


def test_manhattan_similarity_is_in_zero_one():
    rows = read_pairs("train_titles.tsv", 64)
    vocab = Vocab([r[1] for r in rows] + [r[3] for r in rows])
    left = vocab.questions([r[1] for r in rows], [""] * len(rows))
    right = vocab.questions([r[3] for r in rows], [""] * len(rows))
    for model_type in ("siamese-lstm", "siamese-cnn"):
        torch.manual_seed(0)
        model = small_model(model_type, len(vocab)).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(20.0)  # far-apart vectors: the similarity must not underflow to 0
            scores = model(left, right)
            same = model(left, left)
        assert ((scores > 0) & (scores <= 1)).all(), model_type
        assert scores.min() < 1e-2, model_type  # the scaling really did push pairs apart
        assert torch.equal(same, torch.ones_like(same)), model_type
    a = torch.tensor([[0.0, 1.0], [5.0, -5.0]])
    b = torch.tensor([[0.0, 1.0], [-60.0, 60.0]])
    sims = manhattan_similarity(a, b)
    assert sims[0].item() == 1.0 and 0 < sims[1].item() < 1e-30


def test_left_aligned_masks_are_required():
    model = build_model("cnn", 10, embedding_dim=4, conv_units=4)
    ids = torch.ones(1, 3, dtype=torch.int64)
    holey = torch.tensor([[True, False, True]])
    with pytest.raises(ValueError, match="title_mask is not left-aligned"):
        model.encode(ids, holey, ids, torch.ones(1, 3, dtype=torch.bool))


assert set(SMALL) == set(PAPER_TYPES)
