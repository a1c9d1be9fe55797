"""One registry of model types: every table the product reads (CLI choices, hyper-parameters, recipes,
the papers' losses, encoders, pre-training) comes from ``models.registry``, and every entry from its
module of ``models.types``, so a new type over an existing encoder is one new module."""

from __future__ import annotations

import json
import os
import pkgutil
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import build_model, hyper_defaults
from es_plugin_bridge.models import types as type_modules
from es_plugin_bridge.models.registry import ALL_TYPES, PAPER_TYPES, REGISTRY, ModelType, Recipe, model_type
from es_plugin_bridge.models.types.lei import LSTMHyper
from es_plugin_bridge.training.losses import PAPER_LOSS
from es_plugin_bridge.training.recipes import recipe_for


def test_every_table_is_read_from_the_registry():
    from es_plugin_bridge.cli.train import train

    choices = next(p for p in train.params if p.name == "model_type").type.choices
    assert tuple(choices) == ALL_TYPES and set(ALL_TYPES) == set(REGISTRY)
    assert "transformer" in ALL_TYPES and "transformer" not in PAPER_TYPES
    assert {name: REGISTRY[name].recipe.loss for name in PAPER_TYPES} == PAPER_LOSS
    for name, entry in REGISTRY.items():
        assert recipe_for(name) == entry.recipe
        assert hyper_defaults(name) == entry.hyper().model_dump(mode="json")
    assert recipe_for("transformer").loss == "in-batch"


def test_the_types_keep_their_order():
    """``--model-type``'s choices and the papers' types, as they were before the types had modules."""
    assert PAPER_TYPES == ("bow-cnn", "cnn", "rcnn", "lstm", "gru", "siamese-lstm", "siamese-cnn")
    assert ALL_TYPES == ("bow-cnn", "cnn", "rcnn", "lstm", "gru", "siamese-lstm", "siamese-cnn",
                         "transformer", "cross-encoder")


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


TYPE_MODULES = [m.name for m in pkgutil.iter_modules(type_modules.__path__)]


@pytest.mark.parametrize("first", TYPE_MODULES)
def test_every_type_is_registered_in_order_whichever_module_is_imported_first(first):
    code = (f"import es_plugin_bridge.models.types.{first}; import es_plugin_bridge.models.registry as r; "
            "print(sorted(r.ALL_TYPES) == sorted(r.REGISTRY.names()), ','.join(r.ALL_TYPES))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["True", ",".join(ALL_TYPES)]


TINY_GRU = '''"""A GRU with 8 units: a new type over an existing encoder, in one module."""

from pydantic import Field

from es_plugin_bridge.models.hyper import VocabularyHyper
from es_plugin_bridge.models.registry import ModelType, Recipe, register_types


class TinyGRUHyper(VocabularyHyper):
    hidden_dim: int = Field(8, ge=1)


register_types(ModelType("tiny-gru", "test", TinyGRUHyper, Recipe("max-margin", "adam", 3e-3, negatives=2),
                         "es_plugin_bridge.models.recurrent:RecurrentEncoder", {"cell": "gru"}), order=25)
'''

LIST_AND_BUILD = """
import json, sys
import es_plugin_bridge
import es_plugin_bridge.cli.train as t
from es_plugin_bridge.models.registry import PAPER_TYPES, hyper_defaults
choices = next(p for p in t.train.params if p.name == "model_type").type.choices
listed = {"file": es_plugin_bridge.__file__, "choices": list(choices), "paper": list(PAPER_TYPES),
          "defaults": hyper_defaults("tiny-gru"), "torch": "torch" in sys.modules}
from es_plugin_bridge.models import build_model
listed["output_dim"] = build_model("tiny-gru", 30, embedding_dim=4).output_dim
print(json.dumps(listed))
"""


def test_a_type_is_one_module(tmp_path):
    """One file dropped into a copy of ``models.types``, nothing else edited: the CLI lists the type
    between Lei's and paper 004's (its ``order``, 25), with its hyper defaults, and builds it."""
    package = Path(type_modules.__file__).parents[2]
    shutil.copytree(package, tmp_path / package.name,
                    ignore=shutil.ignore_patterns("samples", "__pycache__"))
    (tmp_path / package.name / "models" / "types" / "tiny_gru.py").write_text(TINY_GRU, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", LIST_AND_BUILD], capture_output=True, text=True, check=True,
                         timeout=120, cwd=tmp_path, env=env)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(tmp_path))
    assert got["choices"] == [*ALL_TYPES[:5], "tiny-gru", *ALL_TYPES[5:]]
    assert got["paper"] == [*PAPER_TYPES[:5], "tiny-gru", *PAPER_TYPES[5:]]
    assert got["defaults"] == {"freeze_embeddings": False, "dropout": 0.0, "text_combine": "concat",
                               "similarity": "cosine", "hidden_dim": 8}
    assert not got["torch"] and got["output_dim"] == 8
