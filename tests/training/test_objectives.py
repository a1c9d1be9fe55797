"""The training objectives (``training.objectives``): one object per loss name, each computing what
its paper's formula says on a batch of real AskUbuntu pairs, and a trainer that runs whichever it is
given without naming a loss."""

from __future__ import annotations

import ast
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.registry import LOSS_NAMES
from es_plugin_bridge.training import trainer as trainer_module
from es_plugin_bridge.training.losses import in_batch_loss, logistic_ranking_loss, max_margin_loss, mse_loss
from es_plugin_bridge.training.objectives import (
    OBJECTIVES,
    InBatchObjective,
    MSEObjective,
    Pair,
    RankingObjective,
    TrainingContext,
    objective_for,
)
from es_plugin_bridge.training.trainer import TrainConfig, Trainer

TITLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / \
    "train_titles.tsv"
K = 3


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory) -> dict[str, Path]:
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(9).shuffle(lines)
    root = tmp_path_factory.mktemp("objectives")
    files = {"train": lines[:200], "dev": lines[200:260],
             "positives": [line for line in lines[:200] if line.startswith("duplicate\t")]}
    for name, chosen in files.items():
        (root / f"{name}.tsv").write_text("".join(chosen), encoding="utf-8")
    return {name: root / f"{name}.tsv" for name in files}


def tiny_trainer(files: dict[str, Path], train: str = "train", **kwargs) -> Trainer:
    cfg = TrainConfig(**{"model_type": "cnn", "embedding_dim": 16, "hyper": {"conv_units": 8},
                         "word2vec": False, "negatives": K, "show_progress": False, "max_dev_queries": 10,
                         "dev_window": 5, **kwargs})
    trainer = Trainer(cfg, [read_spec(f"pairs:{files[train]}")], [read_spec(f"pairs:{files['dev']}")],
                      files["dev"].parent / cfg.model_type)
    trainer.model.eval()  # no dropout: the objective and the formula below see the same network
    return trainer


def distinct_pairs(trainer: Trainer, n: int) -> list[Pair]:
    """``n`` positive pairs of which no question is a known duplicate of another pair's (no masking)."""
    out: list[Pair] = []
    seen: set[str] = set()
    for a, b in trainer.data.positives:
        cluster = {a, b} | trainer.data.duplicates[a] | trainer.data.duplicates[b]
        if not cluster & seen:
            out.append((a, b))
            seen |= cluster
        if len(out) == n:
            return out
    raise AssertionError("too few distinct pairs")


def vectors(ctx: TrainingContext, ids: Sequence[str]) -> dict[str, dict[str, torch.Tensor]]:
    """Each question's encoding on its own (one row), so the formula below owes nothing to batching."""
    q = ctx.data.questions
    encoded, where = ctx.encode([q[i] for i in ids])
    return {i: {key: value[where[i] : where[i] + 1] for key, value in encoded.items()} for i in ids}


def test_the_objective_table_names_exactly_the_recipe_losses():
    assert OBJECTIVES.names() == list(LOSS_NAMES)
    with pytest.raises(UserError, match="unknown loss 'hinge'"):
        OBJECTIVES.get("hinge")


def test_the_trainer_names_no_loss():
    """The loss name is looked up once, in the objectives' table: the trainer holds none of them."""
    tree = ast.parse(Path(trainer_module.__file__).read_text(encoding="utf-8"))
    named = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and node.value in LOSS_NAMES]
    assert named == []


@pytest.mark.parametrize("loss", ["logistic", "max-margin"])
def test_a_ranking_objective_is_its_paper_loss_over_the_sampled_negatives(pair_files, loss):
    trainer = tiny_trainer(pair_files, loss=loss)
    objective = trainer.objective
    assert isinstance(objective, RankingObjective) and objective.negatives == K
    batch = trainer.data.positives[:6]
    state = trainer.rng.getstate()
    with torch.no_grad():
        got = objective.loss(batch, trainer).item()
        trainer.rng.setstate(state)  # the same draws: negatives come from the trainer's seeded rng
        negs = [trainer.negatives(a, K) for a, _ in batch]
        assert all(len(row) == K for row in negs)
        vec = vectors(trainer, sorted({i for pair in batch for i in pair} | {n for row in negs for n in row}))
        pos = torch.cat([trainer.model.score(vec[a], vec[b]) for a, b in batch])
        neg = torch.stack([torch.cat([trainer.model.score(vec[a], vec[n]) for n in row])
                           for (a, _), row in zip(batch, negs, strict=True)])
    if loss == "logistic":
        expected = logistic_ranking_loss(pos, neg, gamma=trainer.recipe.gamma).item()
    else:
        expected = max_margin_loss(pos, neg, margin=trainer.recipe.margin).item()
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert trainer.rng.getstate() != state  # the negatives were drawn (and advanced the run's rng)


@pytest.mark.parametrize("symmetric", [False, True])
def test_the_in_batch_objective_is_the_cross_entropy_over_the_batch_duplicates(pair_files, symmetric):
    trainer = tiny_trainer(pair_files, loss="in-batch")
    assert isinstance(trainer.objective, InBatchObjective)
    objective = replace(trainer.objective, symmetric=symmetric)
    batch = distinct_pairs(trainer, 5)
    with torch.no_grad():
        got = objective.loss(batch, trainer).item()
        vec = vectors(trainer, [i for pair in batch for i in pair])
        unit = {i: torch.nn.functional.normalize(v["neural"], dim=1) for i, v in vec.items()}
        scores = torch.cat([torch.cat([unit[a] @ unit[b].T for _, b in batch], dim=1) for a, _ in batch])
    expected = in_batch_loss(scores, scale=objective.scale).item()
    if symmetric:
        expected = (expected + in_batch_loss(scores.T, scale=objective.scale).item()) / 2
    assert got == pytest.approx(expected, rel=1e-5)


def test_the_in_batch_objective_drops_a_known_duplicate_from_the_negatives(pair_files):
    trainer = tiny_trainer(pair_files, loss="in-batch")
    (a, b), (c, d) = batch = distinct_pairs(trainer, 2)
    with torch.no_grad():
        unmasked = trainer.objective.loss(batch, trainer).item()
        trainer.data.duplicates[a].add(d)  # d is now a known duplicate of a: no negative of row 0
        masked = trainer.objective.loss(batch, trainer).item()
        vec = vectors(trainer, [a, b, c, d])
        unit = {i: torch.nn.functional.normalize(v["neural"], dim=1) for i, v in vec.items()}
        scores = torch.cat([torch.cat([unit[x] @ unit[y].T for y in (b, d)], dim=1) for x in (a, c)])
    keep = torch.tensor([[True, False], [True, True]])
    expected = in_batch_loss(scores, scale=trainer.recipe.scale, mask=keep).item()
    assert masked == pytest.approx(expected, rel=1e-5)
    assert masked != pytest.approx(unmasked)


def test_the_mse_objective_scores_labelled_pairs_against_their_labels(pair_files):
    trainer = tiny_trainer(pair_files, loss="mse")
    assert isinstance(trainer.objective, MSEObjective)
    examples = trainer.objective.examples(trainer)
    assert examples == trainer.data.labelled  # both labels present: nothing added
    batch = [e for e in examples if e[2] == 1][:4] + [e for e in examples if e[2] == 0][:4]
    with torch.no_grad():
        got = trainer.objective.loss(batch, trainer).item()
        vec = vectors(trainer, sorted({i for a, b, _ in batch for i in (a, b)}))
        scores = torch.cat([trainer.model.score(vec[a], vec[b]) for a, b, _ in batch])
    expected = mse_loss(scores, torch.tensor([float(y) for *_, y in batch])).item()
    assert got == pytest.approx(expected, rel=1e-5)
    by_hand = sum((s - y) ** 2 for s, (*_, y) in zip(scores.tolist(), batch, strict=True)) / len(batch)
    assert got == pytest.approx(by_hand, rel=1e-5)


def test_the_mse_objective_gives_positives_only_data_one_sampled_negative_each(pair_files):
    trainer = tiny_trainer(pair_files, train="positives", loss="mse")
    positives = trainer.data.positives
    examples = trainer.objective.examples(trainer)
    assert examples[: len(positives)] == [(a, b, 1) for a, b in positives]
    added = examples[len(positives):]
    assert [(a, y) for a, _, y in added] == [(a, 0) for a, _ in positives]
    assert all(n != a and n not in trainer.data.duplicates[a] for a, n, _ in added)


def test_the_trainer_walks_and_steps_whatever_objective_it_is_given(pair_files, tmp_path):
    """The epoch is the objective's examples (shuffled, capped), each step its loss: nothing else."""
    trainer = tiny_trainer(pair_files, loss="max-margin", epochs=1, examples_per_epoch=40, batch_size=8)
    inner = objective_for(replace(trainer.recipe, loss="logistic"), trainer.model)
    seen: list[Pair] = []
    losses: list[float] = []

    class Recording:
        def examples(self, ctx: TrainingContext) -> list[Pair]:
            return [pair for pair in inner.examples(ctx) if pair[0] < pair[1]]

        def loss(self, batch: Sequence[Pair], ctx: TrainingContext) -> torch.Tensor:
            seen.extend(batch)
            loss = inner.loss(batch, ctx)
            losses.append(loss.item())
            return loss

    trainer.objective = Recording()
    trainer.out = tmp_path / "m"
    trainer.run()
    assert len(seen) == 40 and len(set(seen)) == 40 and all(a < b for a, b in seen)
    assert trainer.history[-1]["loss"] == pytest.approx(sum(losses) / len(losses))
