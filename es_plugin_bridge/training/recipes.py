"""Each model type's training recipe, read from its registry entry (``models.registry``).

``--recipe best`` (the default) is the best this project measured per type (docs/training.md, "Default
recipes"); ``--recipe paper`` the paper's own, listed here:
- bow-cnn, cnn: dos Santos et al. 2015 — logistic ranking loss (γ = 10, hardest of 20 negatives),
  SGD with lr 0.01 (BOW-CNN) / 0.05 (CNN), Table 2.
- rcnn, lstm, gru: Lei et al. 2016 — max-margin over 20 random negatives, Adam lr 1e-3.
- siamese-lstm, siamese-cnn: paper 004 — MSE on 0/1 labels, Adadelta, gradient clipping 1.25.
- transformer: in-batch negatives (MultipleNegativesRankingLoss), AdamW with a linear warm-up.
Bogdanova et al.'s CNN is ``cnn`` trained with ``--loss mse``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.registry import LOSS_NAMES, OPTIMIZERS, Recipe, model_type


def recipe_for(model_type_name: str, recipe_name: str = "best", **overrides: Any) -> Recipe:
    """The type's ``best`` or ``paper`` recipe with the non-None ``overrides`` applied; UserError on a
    bad value."""
    given = {k: v for k, v in overrides.items() if v is not None}
    recipe = replace(model_type(model_type_name).recipe_named(recipe_name), **given)
    if recipe.loss not in LOSS_NAMES:
        raise UserError(f"unknown loss {recipe.loss!r}; choose one of {', '.join(LOSS_NAMES)}")
    if recipe.optimizer not in OPTIMIZERS:
        raise UserError(f"unknown optimizer {recipe.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    if recipe.lr <= 0 or recipe.batch_size < 1 or recipe.negatives < 1:
        raise UserError("learning rate, batch size and negatives must be positive")
    budget = recipe.time_budget
    if recipe.epochs < 0 or recipe.patience < 1 or (budget is not None and budget <= 0):
        raise UserError("epochs must be >= 0, patience >= 1 and the time budget positive")
    if recipe.hard_negatives < 0 or (recipe.hard_negatives and recipe.loss == "mse"):
        raise UserError("hard negatives (>= 0) apply to the in-batch and ranking losses, not mse")
    if recipe.hard_negatives > recipe.negatives and recipe.loss != "in-batch":
        raise UserError(f"--hard-negatives {recipe.hard_negatives} is more than --negatives "
                        f"{recipe.negatives}: with a ranking loss they are among a query's negatives")
    if recipe.loss == "in-batch" and recipe.batch_size < 2:
        raise UserError("the in-batch loss needs a batch size of at least 2 (other rows are the negatives)")
    return recipe


def make_optimizer(recipe: Recipe, params: Any) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad]
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(params, lr=recipe.lr)
    if recipe.optimizer == "adam":
        return torch.optim.Adam(params, lr=recipe.lr)
    if recipe.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=0.01)
    return torch.optim.Adadelta(params, lr=recipe.lr)


def warmup_schedule(
    recipe: Recipe, optimizer: torch.optim.Optimizer
) -> torch.optim.lr_scheduler.LambdaLR | None:
    """Linear warm-up over ``recipe.warmup`` steps, then the constant rate (a budget has no known end)."""
    if recipe.warmup <= 0:
        return None
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / recipe.warmup))


__all__ = ["Recipe", "make_optimizer", "recipe_for", "warmup_schedule"]
