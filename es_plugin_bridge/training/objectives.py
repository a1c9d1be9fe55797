"""The training objectives: one object per loss kind, chosen by the recipe's loss name in one table.

As in sentence-transformers' losses (MultipleNegativesRankingLoss is an object, not a branch of the
fit loop), an objective says what one epoch walks (its examples) and the loss of one batch of them, so
the trainer runs any objective without naming a loss. What is the trainer's stays the trainer's:
encoding questions with the model and its featurizer, drawing negatives with the run's seeded rng and
mining BM25 hard negatives; an objective asks for them through :class:`TrainingContext`. The
arithmetic is ``training.losses``'s pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import torch

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.models import QuestionSimilarityModel
from es_plugin_bridge.models.registry import Recipe
from es_plugin_bridge.plugins import Registry
from es_plugin_bridge.training.examples import TrainingSet
from es_plugin_bridge.training.losses import in_batch_loss, logistic_ranking_loss, max_margin_loss, mse_loss

#: A positive pair (query id, duplicate id) and a labelled pair (query id, other id, 0/1).
Pair = tuple[str, str]
Labelled = tuple[str, str, int]
Encoded = dict[str, torch.Tensor]
E = TypeVar("E")


class TrainingContext(Protocol):
    """What an objective uses of the trainer (the ``Trainer`` is one): its data, model and device, and
    the three services that hold its state (the featurizer, the seeded rng, the mined negatives)."""

    data: TrainingSet
    model: QuestionSimilarityModel
    device: torch.device

    def encode(self, questions: Sequence[Question]) -> tuple[Encoded, dict[str, int]]:
        """The model's encodings of the distinct ``questions``, and each question id's row in them."""
        ...

    def negatives(self, query_id: str, k: int) -> list[str]:
        """``k`` negatives of a query, drawn as the run draws them (seeded; BM25-mined ones first when
        the recipe asks for hard negatives)."""
        ...

    def hard_negatives(self, batch: Sequence[Pair]) -> list[str]:
        """The BM25-mined negatives the recipe adds to a batch as shared columns (none by default)."""
        ...


class Objective(Protocol[E]):
    """One loss kind: the examples an epoch walks (the trainer shuffles and caps them) and the loss of
    one batch of them."""

    def examples(self, ctx: TrainingContext) -> list[E]: ...

    def loss(self, batch: Sequence[E], ctx: TrainingContext) -> torch.Tensor: ...


def _tensor(rows: Sequence[Any], device: torch.device, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """A tensor on the training device (row indices by default)."""
    return torch.tensor(rows, dtype=dtype, device=device)


def _rows(encoded: Encoded, index: torch.Tensor) -> Encoded:
    return {key: value[index] for key, value in encoded.items()}


@dataclass(frozen=True)
class RankingObjective:
    """Each positive pair against ``negatives`` sampled negatives of its query, of which the loss only
    counts the hardest: logistic with γ (dos Santos et al.) or max-margin with δ (Lei et al.)."""

    negatives: int
    #: (positive scores [B], negative scores [B, K], neg_mask=[B, K]) → the batch's loss.
    rank_loss: Callable[..., torch.Tensor]

    def examples(self, ctx: TrainingContext) -> list[Pair]:
        return list(ctx.data.positives)

    def loss(self, batch: Sequence[Pair], ctx: TrainingContext) -> torch.Tensor:
        q, k = ctx.data.questions, self.negatives
        negs = [ctx.negatives(a, k) for a, _ in batch]
        encoded, where = ctx.encode(
            [q[a] for a, _ in batch] + [q[b] for _, b in batch] + [q[n] for row in negs for n in row]
        )
        qa = _rows(encoded, _tensor([where[a] for a, _ in batch], ctx.device))
        qb = _rows(encoded, _tensor([where[b] for _, b in batch], ctx.device))
        pos = ctx.model.score(qa, qb)
        # A query may get fewer than K negatives (a small pool): its empty slots are masked out.
        neg_index = torch.zeros((len(batch), k), dtype=torch.long)
        neg_mask = torch.zeros((len(batch), k), dtype=torch.bool)
        for i, row in enumerate(negs):
            neg_index[i, : len(row)] = torch.tensor([where[n] for n in row], dtype=torch.long)
            neg_mask[i, : len(row)] = True
        neg_index, neg_mask = neg_index.to(ctx.device), neg_mask.to(ctx.device)
        neg = ctx.model.score_candidates(qa, _rows(encoded, neg_index.reshape(-1)))
        return self.rank_loss(pos, neg, neg_mask=neg_mask)


@dataclass(frozen=True)
class InBatchObjective:
    """Each query's duplicate against the batch's other duplicates (MultipleNegativesRankingLoss), plus
    the BM25-mined negatives the recipe adds as shared columns; ``symmetric`` also picks each duplicate's
    query among the batch's queries and averages the two directions.

    A column that is a known duplicate of row i's query (big clusters put several pairs of one cluster
    in a batch) or the query itself is no negative: it is masked out of row i.
    """

    scale: float
    symmetric: bool

    def examples(self, ctx: TrainingContext) -> list[Pair]:
        return list(ctx.data.positives)

    def loss(self, batch: Sequence[Pair], ctx: TrainingContext) -> torch.Tensor:
        q = ctx.data.questions
        hard = ctx.hard_negatives(batch)
        encoded, where = ctx.encode(
            [q[a] for a, _ in batch] + [q[b] for _, b in batch] + [q[h] for h in hard]
        )
        qa = encoded["neural"][_tensor([where[a] for a, _ in batch], ctx.device)]
        qb = encoded["neural"][_tensor([where[b] for _, b in batch] + [where[h] for h in hard], ctx.device)]
        scores = _similarities(qa, qb, ctx.model.similarity)
        keep = _negative_columns(batch, [b for _, b in batch] + hard, ctx.data.duplicates).to(ctx.device)
        loss = in_batch_loss(scores, scale=self.scale, mask=keep)
        if self.symmetric:
            n = len(batch)
            loss = (loss + in_batch_loss(scores[:, :n].T, scale=self.scale, mask=keep[:, :n].T)) / 2
        return loss


def _similarities(qa: torch.Tensor, qb: torch.Tensor, similarity: str) -> torch.Tensor:
    """[B, C] similarities of every query vector with every column vector, as the model scores a pair."""
    if similarity == "manhattan":
        return torch.exp(-torch.cdist(qa, qb, p=1))
    # cosine (the transformer's vectors are unit already; normalising again changes nothing)
    return torch.nn.functional.normalize(qa, dim=1) @ torch.nn.functional.normalize(qb, dim=1).T


def _negative_columns(batch: Sequence[Pair], columns: Sequence[str],
                      duplicates: Mapping[str, set[str]]) -> torch.Tensor:
    """[B, C] True where column j may be a negative of row i: its own duplicate (j = i) stays as the
    target; any other column that is the query, its duplicate or a known duplicate of it is dropped."""
    keep = torch.ones((len(batch), len(columns)), dtype=torch.bool)
    for i, (a, b) in enumerate(batch):
        for j, other in enumerate(columns):
            if i != j and (other in (a, b) or other in duplicates.get(a, ())):
                keep[i, j] = False
    return keep


class MSEObjective:
    """Labelled pairs scored against their 0/1 labels (paper 004; Bogdanova et al.). Data that is (almost)
    only positives gets one sampled negative per positive pair, so that the model sees both labels."""

    def examples(self, ctx: TrainingContext) -> list[Labelled]:
        examples = list(ctx.data.labelled)
        negatives = sum(1 for *_, y in examples if y == 0)
        if negatives < 0.3 * len(examples):  # positives-only data: one random negative each
            for a, _ in ctx.data.positives:
                for n in ctx.negatives(a, 1):  # the recipe allows no hard negatives with mse: all sampled
                    examples.append((a, n, 0))
        return examples

    def loss(self, batch: Sequence[Labelled], ctx: TrainingContext) -> torch.Tensor:
        q = ctx.data.questions
        encoded, where = ctx.encode([q[a] for a, _, _ in batch] + [q[b] for _, b, _ in batch])
        qa = _rows(encoded, _tensor([where[a] for a, _, _ in batch], ctx.device))
        qb = _rows(encoded, _tensor([where[b] for _, b, _ in batch], ctx.device))
        labels = _tensor([float(y) for _, _, y in batch], ctx.device, torch.float32)
        return mse_loss(ctx.model.score(qa, qb), labels)


#: Builds a recipe's objective; the model is given for what its hyper-parameters decide (``symmetric``).
ObjectiveFactory = Callable[[Recipe, QuestionSimilarityModel], Objective[Any]]

#: The objective of each loss name a recipe takes (``models.registry.LOSS_NAMES``): a fixed table.
OBJECTIVES: Registry[ObjectiveFactory] = Registry("loss", None)
OBJECTIVES.add("logistic", lambda recipe, _: RankingObjective(
    recipe.negatives, partial(logistic_ranking_loss, gamma=recipe.gamma)))
OBJECTIVES.add("max-margin", lambda recipe, _: RankingObjective(
    recipe.negatives, partial(max_margin_loss, margin=recipe.margin)))
OBJECTIVES.add("mse", lambda recipe, _: MSEObjective())
OBJECTIVES.add("in-batch", lambda recipe, model: InBatchObjective(
    recipe.scale, symmetric=bool(getattr(model.hyper, "symmetric", False))))


def objective_for(recipe: Recipe, model: QuestionSimilarityModel) -> Objective[Any]:
    """The recipe's objective: the one place its loss name is looked up (UserError when unknown)."""
    return OBJECTIVES.get(recipe.loss)(recipe, model)


__all__ = ["OBJECTIVES", "InBatchObjective", "Labelled", "MSEObjective", "Objective", "Pair",
           "RankingObjective", "TrainingContext", "objective_for"]
