"""One registry of model types: every table the product reads (CLI choices, hyper-parameters, recipes,
the papers' losses, encoders, pre-training) comes from ``models.registry``, so a new type is one entry."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import build_model, hyper_defaults
from es_plugin_bridge.models.hyper import LSTMHyper
from es_plugin_bridge.models.registry import ALL_TYPES, PAPER_TYPES, REGISTRY, ModelType, Recipe, model_type
from es_plugin_bridge.training.losses import PAPER_LOSS
from es_plugin_bridge.training.recipes import recipe_for


def test_every_table_is_read_from_the_registry():
    from es_plugin_bridge.cli.train import train

    choices = next(p for p in train.params if p.name == "model_type").type.choices
    assert tuple(choices) == ALL_TYPES == tuple(REGISTRY)
    assert "transformer" in ALL_TYPES and "transformer" not in PAPER_TYPES
    assert {name: REGISTRY[name].recipe.loss for name in PAPER_TYPES} == PAPER_LOSS
    for name, entry in REGISTRY.items():
        assert recipe_for(name) == entry.recipe
        assert hyper_defaults(name) == entry.hyper().model_dump(mode="json")
    assert recipe_for("transformer").loss == "in-batch"


def test_a_new_type_is_one_entry(monkeypatch):
    """Register a GRU with 8 units under a new name: building, hyper-parameters and recipe follow."""
    entry = ModelType("tiny-gru", "test", LSTMHyper, Recipe("max-margin", "adam", 3e-3, negatives=2),
                      "es_plugin_bridge.models.recurrent:RecurrentEncoder", {"cell": "gru"})
    monkeypatch.setitem(REGISTRY, "tiny-gru", entry)
    model = build_model("tiny-gru", 30, embedding_dim=4, hidden_dim=8)
    assert isinstance(model.encoder.rnn, torch.nn.GRU) and model.output_dim == 8
    assert recipe_for("tiny-gru", lr=1e-2) == replace(entry.recipe, lr=1e-2)
    with pytest.raises(UserError, match="unknown hyper-parameter 'window'"):
        build_model("tiny-gru", 30, embedding_dim=4, window=3)


def test_unknown_types_and_losses_are_user_errors():
    with pytest.raises(UserError, match="unknown model type 'bert'"):
        model_type("bert")
    with pytest.raises(UserError, match="unknown loss"):
        recipe_for("cnn", loss="hinge")
    with pytest.raises(UserError, match="not built over the vocabulary"):
        build_model("transformer", 10)


def test_listing_the_types_loads_no_torch():
    code = ("import sys; import es_plugin_bridge.cli.train as t; "
            "print(len(t.ALL_TYPES), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == [str(len(ALL_TYPES)), "False"]
