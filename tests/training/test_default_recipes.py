"""Default recipes: ``esrerank train`` with no options takes the best measured recipe of its type
(word2vec on the training text, Adam for the CNNs, a time budget); ``--recipe paper`` gives the paper's
own, one option away."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.registry import PAPER_TYPES, REGISTRY
from es_plugin_bridge.training.recipes import recipe_for
from es_plugin_bridge.training.trainer import TrainConfig, Trainer

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> tuple[Path, Path]:
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(5).shuffle(lines)
    root = tmp_path_factory.mktemp("recipes")
    (root / "train.tsv").write_text("".join(lines[:800]), encoding="utf-8")
    (root / "dev.tsv").write_text("".join(lines[800:1000]), encoding="utf-8")
    return root / "train.tsv", root / "dev.tsv"


def test_best_and_paper_recipes_differ_where_measured():
    bow_best, bow_paper = recipe_for("bow-cnn"), recipe_for("bow-cnn", "paper")
    paper_fields = (bow_paper.optimizer, bow_paper.lr, bow_paper.epochs, bow_paper.word2vec)
    assert paper_fields == ("sgd", 0.01, 10, False)
    assert (bow_best.optimizer, bow_best.lr, bow_best.word2vec) == ("adam", 1e-3, True)
    assert bow_best.time_budget == 600 and bow_best.loss == bow_paper.loss == "logistic"
    for name in PAPER_TYPES:  # every paper type: its paper's loss, word2vec and a budget by default
        best, paper = recipe_for(name), recipe_for(name, "paper")
        assert best.loss == paper.loss and best.word2vec and best.time_budget and not paper.word2vec
        assert paper == REGISTRY[name].paper_recipe
    assert recipe_for("transformer").time_budget == 900  # the 15 minutes
    assert recipe_for("cnn", "paper", lr=0.2).lr == 0.2
    with pytest.raises(UserError, match="unknown recipe 'fast'"):
        recipe_for("cnn", "fast")


def test_the_default_starts_from_word2vec_on_the_training_text(pairs, tmp_path):
    train, dev = read_spec(f"pairs:{pairs[0]}"), read_spec(f"pairs:{pairs[1]}")
    common = {"model_type": "bow-cnn", "epochs": 1, "examples_per_epoch": 64, "embedding_dim": 16,
              "hyper": {"conv_units": 16}, "show_progress": False, "max_dev_queries": 20, "negatives": 3}
    best = Trainer(TrainConfig(**common), [train], [dev], tmp_path / "best")
    info = best.embeddings_info
    assert info["source"] == "word2vec on the training text" and info["dim"] == 16
    assert info["sentences"] == len(best.data.questions)  # one title per question (titles only)
    # Exactly the words seen twice or more (word2vec's min_count) get a trained vector.
    vocab = best.featurizer.vocab
    assert info["found"] == int((vocab.counts[2:] >= 2).sum()) > 500
    assert best.recipe.optimizer == "adam"
    paper = Trainer(TrainConfig(**common, recipe="paper"), [train], [dev], tmp_path / "paper")
    assert paper.embeddings_info == {"source": "random"} and paper.recipe.optimizer == "sgd"
    # Same seed, same vectors: the word2vec run is reproducible (one worker).
    again = Trainer(TrainConfig(**common), [train], [dev], tmp_path / "again")
    assert (again.model.encoder.embedding.weight == best.model.encoder.embedding.weight).all()


def test_the_cli_records_the_recipe_it_trained_with(pairs, tmp_path, cli):
    data = ["--train", f"pairs:{pairs[0]}", "--dev", f"pairs:{pairs[1]}", "--embedding-dim", "16",
            "--hyper", "conv_units=16", "--epochs", "1", "--examples-per-epoch", "64", "--quiet"]
    for recipe in ("best", "paper"):
        out = str(tmp_path / recipe)
        code, _, err = cli(["train", "--model-type", "cnn", "--recipe", recipe, "--out", out, *data])
        assert code == 0, err
        train = json.loads((tmp_path / recipe / "config.json").read_text())["train"]
        assert train["recipe_name"] == recipe
        assert train["recipe"]["optimizer"] == {"best": "adam", "paper": "sgd"}[recipe]
        assert train["recipe"]["time_budget"] == {"best": 600.0, "paper": None}[recipe]
        source = {"best": "word2vec on the training text", "paper": "random"}[recipe]
        assert train["embeddings"]["source"] == source


def test_an_unknown_recipe_is_one_line(pairs, tmp_path, cli):
    code, _, err = cli(["train", "--model-type", "cnn", "--recipe", "fast", "--train", f"pairs:{pairs[0]}",
                        "--dev", f"pairs:{pairs[1]}", "--out", str(tmp_path / "m")])
    assert code == 2 and "'fast' is not one of 'best', 'paper'" in err
