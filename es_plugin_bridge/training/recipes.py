"""Each paper's training recipe per model type: loss, optimiser, learning rate, clipping.

- bow-cnn, cnn: dos Santos et al. 2015 — logistic ranking loss (γ = 10, hardest of 20 negatives),
  SGD with lr 0.01 (BOW-CNN) / 0.05 (CNN), Table 2.
- rcnn, lstm, gru: Lei et al. 2016 — max-margin over 20 random negatives, Adam lr 1e-3.
- siamese-lstm, siamese-cnn: paper 004 — MSE on 0/1 labels, Adadelta, gradient clipping 1.25.
Bogdanova et al.'s CNN is ``cnn`` trained with ``--loss mse``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.training.losses import PAPER_LOSS


@dataclass(frozen=True)
class Recipe:
    loss: str
    optimizer: str
    lr: float
    clip: float | None = 5.0
    negatives: int = 20
    batch_size: int = 32
    margin: float = 1.0
    gamma: float = 10.0


RECIPES: dict[str, Recipe] = {
    "bow-cnn": Recipe("logistic", "sgd", 0.01),
    "cnn": Recipe("logistic", "sgd", 0.05),
    "rcnn": Recipe("max-margin", "adam", 1e-3),
    "lstm": Recipe("max-margin", "adam", 1e-3),
    "gru": Recipe("max-margin", "adam", 1e-3),
    "siamese-lstm": Recipe("mse", "adadelta", 1.0, clip=1.25, batch_size=64),
    "siamese-cnn": Recipe("mse", "adadelta", 1.0, clip=1.25, batch_size=64),
}
assert all(RECIPES[t].loss == loss for t, loss in PAPER_LOSS.items())


def recipe_for(model_type: str, **overrides: Any) -> Recipe:
    """The paper's recipe with the non-None ``overrides`` applied; UserError on a bad value."""
    if model_type not in RECIPES:
        raise UserError(f"unknown model type {model_type!r}; choose one of {', '.join(RECIPES)}")
    recipe = replace(RECIPES[model_type], **{k: v for k, v in overrides.items() if v is not None})
    if recipe.loss not in PAPER_LOSS.values():
        raise UserError(f"unknown loss {recipe.loss!r}; choose one of logistic, max-margin, mse")
    if recipe.optimizer not in ("sgd", "adam", "adadelta"):
        raise UserError(f"unknown optimizer {recipe.optimizer!r}; choose one of sgd, adam, adadelta")
    if recipe.lr <= 0 or recipe.batch_size < 1 or recipe.negatives < 1:
        raise UserError("learning rate, batch size and negatives must be positive")
    return recipe


def make_optimizer(recipe: Recipe, params: Any) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(params, lr=recipe.lr)
    if recipe.optimizer == "adam":
        return torch.optim.Adam(params, lr=recipe.lr)
    return torch.optim.Adadelta(params, lr=recipe.lr)
