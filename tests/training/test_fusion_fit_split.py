"""β and the calibration are fitted on dev queries that did not pick the epoch (issue 29).

Fitted on the queries early stopping chose the epoch on, the fit sees the neural score at its most
flattering and drives the first stage's weight to zero. These tests split real dev data (AskUbuntu
duplicate clusters, SemEval's threads), train a real model, and check from what the checkpoint saved
that each part did only its own job.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.dev_split import EPOCH_DATA, HELD_OUT, MIN_PART, clusters, split_dev
from es_plugin_bridge.training.devdata import FORCED, dev_queries
from es_plugin_bridge.training.fusion_fit import mean_ap
from es_plugin_bridge.training.trainer import TrainConfig, Trainer, _first_stage_scores

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory) -> dict[str, Path]:
    """Real AskUbuntu title pairs (shell commands, package names): 1,200 to train on, 600 for dev, and
    in dev the duplicate chains of 15 questions that are a first question in one pair and a second in
    another (so two dev queries share a duplicate: one cluster)."""
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    dupes = [line.rstrip("\n").split("\t") for line in lines if line.startswith("duplicate\t")]
    linking = sorted({q1 for _, q1, _ in dupes} & {q2 for _, _, q2 in dupes})[:15]
    chains = [line for line in lines if line.startswith("duplicate\t")
              and any(f"\t{title}\n" in line or f"\t{title}\t" in line for title in linking)]
    rest = [line for line in lines if line not in set(chains)]
    random.Random(5).shuffle(rest)
    root = tmp_path_factory.mktemp("pairs")
    (root / "train.tsv").write_text("".join(rest[:1200]), encoding="utf-8")
    (root / "dev.tsv").write_text("".join(rest[1200:1800] + chains[:150]), encoding="utf-8")
    return {"train": root / "train.tsv", "dev": root / "dev.tsv"}


@pytest.fixture(scope="module")
def askubuntu_dev(pair_files):
    return dev_queries([read_spec(f"pairs:{pair_files['dev']}")], Preprocessor(TextOptions()))


def _relevant(rq) -> set[str]:
    return {c.id for c, label in zip(rq.candidates, rq.labels, strict=True) if label > 0}


def test_no_duplicate_cluster_is_on_both_sides(askubuntu_dev):
    split = split_dev(askubuntu_dev, HELD_OUT, 0.5, seed=1)
    assert split.rule == HELD_OUT
    assert len(split.select) + len(split.fit) == len(askubuntu_dev)
    select_ids = {rq.query.id for rq in split.select} | {i for rq in split.select for i in _relevant(rq)}
    fit_ids = {rq.query.id for rq in split.fit} | {i for rq in split.fit for i in _relevant(rq)}
    # A question and its duplicates are on one side: no fit query's duplicate chose the epoch.
    assert not select_ids & fit_ids
    # About half the queries each side (whole clusters move together), the same split for the same seed.
    assert abs(len(split.fit) - len(askubuntu_dev) / 2) <= max(5, len(askubuntu_dev) // 20)
    again = split_dev(askubuntu_dev, HELD_OUT, 0.5, seed=1)
    assert [rq.query.id for rq in again.fit] == [rq.query.id for rq in split.fit]
    other = split_dev(askubuntu_dev, HELD_OUT, 0.5, seed=2)
    assert [rq.query.id for rq in other.fit] != [rq.query.id for rq in split.fit]


def test_askubuntu_clusters_join_questions_linked_through_a_shared_duplicate(askubuntu_dev):
    cluster_of = clusters(askubuntu_dev)
    by_cluster: dict[int, set[str]] = {}
    for rq, c in zip(askubuntu_dev, cluster_of, strict=True):
        by_cluster.setdefault(c, set()).update({rq.query.id} | _relevant(rq))
    members = list(by_cluster.values())
    # The clusters partition the linked questions: no question id belongs to two clusters.
    assert sum(len(m) for m in members) == len(set().union(*members))
    assert len(members) < len(askubuntu_dev)  # some dev questions share a duplicate: real clusters


def test_semeval_queries_split_by_question():
    queries = dev_queries([read_spec(f"semeval:{SEMEVAL_DEV}")], Preprocessor(TextOptions()))
    assert len(set(clusters(queries))) == len(queries)  # each original question has its own thread
    split = split_dev(queries, HELD_OUT, 0.5, seed=1)
    assert len(split.fit) == len(queries) // 2
    assert not {rq.query.id for rq in split.fit} & {rq.query.id for rq in split.select}


def test_epoch_data_and_a_dev_set_too_small_to_split_use_every_query(askubuntu_dev):
    same = split_dev(askubuntu_dev, EPOCH_DATA, 0.5, seed=1)
    assert same.select == same.fit == askubuntu_dev and same.rule == EPOCH_DATA
    tiny = askubuntu_dev[: 2 * MIN_PART - 1]
    fallback = split_dev(tiny, HELD_OUT, 0.5, seed=1)
    assert fallback.select == fallback.fit == tiny
    assert fallback.rule.startswith(f"{EPOCH_DATA} (dev too small to hold out")
    assert fallback.describe()["fit_query_ids"] == "same as select"
    with pytest.raises(ValueError, match="unknown fusion fit rule 'dev'"):
        split_dev(askubuntu_dev, "dev", 0.5, seed=1)


@pytest.fixture(scope="module")
def trained(pair_files, tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("ckpt") / "bow-cnn"
    cfg = TrainConfig(model_type="bow-cnn", epochs=3, examples_per_epoch=400, embedding_dim=24,
                      hyper={"conv_units": 40}, show_progress=False, max_dev_queries=200, negatives=5,
                      fusion_fit=HELD_OUT)
    trainer = Trainer(cfg, [read_spec(f"pairs:{pair_files['train']}")],
                      [read_spec(f"pairs:{pair_files['dev']}")], out)
    trainer.run()
    return trainer, json.loads((out / "config.json").read_text())


def test_train_picks_the_epoch_on_one_part_and_fits_beta_on_the_other(trained):
    trainer, config = trained
    split = config["train"]["dev_split"]
    assert split["rule"] == HELD_OUT
    fit_ids = set(split["fit_query_ids"])
    select_ids = {rq.query.id for rq in trainer.split.select}
    assert fit_ids == {rq.query.id for rq in trainer.split.fit} and not fit_ids & select_ids
    assert split["select_queries"] + split["fit_queries"] == config["train"]["dev_queries"] == 200
    # The epoch was chosen on the select part: the kept model's MAP there is the best dev MAP recorded.
    assert trainer.dev_map() == pytest.approx(config["train"]["best_dev_map"], abs=1e-9)
    assert trainer.dev_map(trainer.split.fit) != pytest.approx(config["train"]["best_dev_map"], abs=1e-6)
    # β was fitted on the other part: the first stage's MAP saved beside β is the fit part's, not all dev's.
    fit = [rq for rq in trainer.split.fit if rq.split != FORCED]
    everything = [rq for rq in trainer.dev if rq.split != FORCED]
    labels = [rq.labels for rq in fit]
    for stage, saved in config["fusion"]["first_stages"].items():
        on_fit = mean_ap(_first_stage_scores(fit, trainer.preprocessor)[stage], labels)
        on_all = mean_ap(_first_stage_scores(everything, trainer.preprocessor)[stage],
                         [rq.labels for rq in everything])
        assert saved["first_stage_dev_map"] == pytest.approx(on_fit, abs=1e-12)
        assert on_fit != pytest.approx(on_all, abs=1e-6)
        assert saved["dev_map"] >= saved["first_stage_dev_map"] - 1e-9
    assert config["fusion"]["fitted_on"] == f"{HELD_OUT}: {len(fit)} dev queries"


def test_the_training_log_says_which_queries_fit_what(pair_files, tmp_path, caplog):
    caplog.set_level("INFO", logger="es_plugin_bridge.training.trainer")
    cfg = TrainConfig(model_type="siamese-cnn", epochs=1, examples_per_epoch=100, embedding_dim=16,
                      show_progress=False, max_dev_queries=60, fusion_fit=EPOCH_DATA)
    Trainer(cfg, [read_spec(f"pairs:{pair_files['train']}")], [read_spec(f"pairs:{pair_files['dev']}")],
            tmp_path / "m")
    said = "the same 60 queries pick the epoch and fit the fusion β and calibration (epoch-data)"
    assert said in caplog.text
    cfg.fusion_fit = HELD_OUT
    Trainer(cfg, [read_spec(f"pairs:{pair_files['train']}")], [read_spec(f"pairs:{pair_files['dev']}")],
            tmp_path / "m")
    assert "other queries (other duplicate clusters) fit the fusion β and calibration" in caplog.text


def test_each_model_type_defaults_to_the_rule_that_won_on_unseen_data():
    """The defaults are benchmarks/fusion_fit.json's verdicts (SemEval train-part2 for every type,
    AskUbuntu's held-out clusters for three; never trained or tuned on): held-out is a type's default
    exactly where it lost significantly (p < 0.05) on no first stage of either data set and gained on
    average — the transformer. Every default is a rule split_dev knows."""
    from es_plugin_bridge.models.registry import ALL_TYPES, model_type
    from es_plugin_bridge.training.dev_split import FUSION_FITS

    defaults = {name: model_type(name).fusion_fit for name in ALL_TYPES}
    assert set(defaults.values()) <= set(FUSION_FITS)
    measured = json.loads((Path(__file__).resolve().parents[2] / "benchmarks/fusion_fit.json").read_text())
    rows = measured["rows"]
    assert {r["model_type"] for r in rows if r["dataset"] == "semeval"} == set(ALL_TYPES)
    for name, rule in defaults.items():
        mine = [r for r in rows if r["model_type"] == name]
        gains = [r["fused_held-out"] - r["fused_epoch-data"] for r in mine]
        lost = any(g < 0 and r["held_out_vs_epoch_data"]["p_value"] < 0.05
                   for g, r in zip(gains, mine, strict=True))
        assert (rule == HELD_OUT) == (not lost and sum(gains) > 0), (name, gains)
    assert {name for name, rule in defaults.items() if rule == HELD_OUT} == {"transformer"}
