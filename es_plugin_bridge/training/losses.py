"""The papers' training objectives, batched: positives [B], sampled negatives [B, K].

- ``logistic_ranking_loss`` (dos Santos et al. 2015, after Yih et al. 2011): log(1 + exp(−γΔ)),
  Δ = s_pos − max_k s_neg, γ = 10 — only the hardest sampled negative counts.
- ``max_margin_loss`` (Lei et al. 2016): max(0, δ − s_pos + max_k s_neg); δ = 1.0 as in the
  authors' released code (the paper only says "a small constant").
- ``mse_loss`` (Bogdanova et al. 2015; paper 004): mean (s − y)² against 0/1 labels.
- ``in_batch_loss`` (Henderson et al. 2017; sentence-transformers' MultipleNegativesRankingLoss): the
  cross-entropy of picking each query's duplicate among every duplicate of the batch, scores scaled.

``neg_mask`` [B, K] (True = a real negative) lets rows carry fewer than K negatives; a row with
none contributes zero loss. Pure functions of scores: ``training.objectives`` holds the objects that
build a batch's scores and call them, one per loss name.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def hardest_negative(neg_scores: torch.Tensor, neg_mask: torch.Tensor | None = None) -> torch.Tensor:
    """max_k of [B, K] negative scores → [B], ignoring masked-out slots."""
    if neg_scores.dim() != 2:
        raise ValueError(f"negative scores must be [B, K], got shape {tuple(neg_scores.shape)}")
    if neg_mask is None:
        return neg_scores.max(dim=1).values
    return neg_scores.masked_fill(~neg_mask, float("-inf")).max(dim=1).values


def _row_weights(pos: torch.Tensor, neg_mask: torch.Tensor | None) -> torch.Tensor:
    if neg_mask is None:
        return torch.ones_like(pos)
    return neg_mask.any(dim=1).to(pos.dtype)


def _check(pos: torch.Tensor, neg: torch.Tensor) -> None:
    if pos.dim() != 1 or neg.dim() != 2 or neg.shape[0] != pos.shape[0]:
        raise ValueError(
            f"expected positive scores [B] and negatives [B, K], got {tuple(pos.shape)}, {tuple(neg.shape)}"
        )


def _mean(losses: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    losses = torch.where(weights > 0, losses, torch.zeros_like(losses))
    return losses.sum() / weights.sum().clamp_min(1.0)


def logistic_ranking_loss(
    pos_scores: torch.Tensor,
    neg_scores: torch.Tensor,
    *,
    gamma: float = 10.0,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean of log(1 + exp(−γ(s_pos − max_k s_neg))), computed stably as softplus."""
    _check(pos_scores, neg_scores)
    delta = pos_scores - hardest_negative(neg_scores, neg_mask)
    return _mean(F.softplus(-gamma * delta), _row_weights(pos_scores, neg_mask))


def max_margin_loss(
    pos_scores: torch.Tensor,
    neg_scores: torch.Tensor,
    *,
    margin: float = 1.0,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean of max(0, δ − s_pos + max_k s_neg)."""
    _check(pos_scores, neg_scores)
    hinge = torch.relu(margin - pos_scores + hardest_negative(neg_scores, neg_mask))
    return _mean(hinge, _row_weights(pos_scores, neg_mask))


def mse_loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean squared error of [B] scores against [B] 0/1 labels."""
    if scores.shape != labels.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and labels {tuple(labels.shape)} differ in shape")
    return F.mse_loss(scores, labels.to(scores.dtype))


def in_batch_loss(
    scores: torch.Tensor, *, scale: float = 20.0, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Cross-entropy of [B, C] query × candidate similarities with the diagonal as the target.

    The first B columns are the batch's duplicates (row i's is column i); any further columns are
    extra negatives shared by every row (e.g. BM25-mined hard negatives). Row i's other columns are
    its negatives; ``mask`` [B, C] (True = keep) drops the columns that are not negatives of row i
    (a known duplicate of its query sitting elsewhere in the batch).
    """
    if scores.dim() != 2 or scores.shape[1] < scores.shape[0]:
        raise ValueError(f"in-batch scores must be [B, C] with C >= B, got shape {tuple(scores.shape)}")
    logits = scale * scores
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    return F.cross_entropy(logits, torch.arange(scores.shape[0], device=scores.device))


def _paper_losses() -> dict[str, str]:
    from es_plugin_bridge.models.registry import PAPER_TYPES, REGISTRY

    return {name: REGISTRY[name].recipe.loss for name in PAPER_TYPES}


#: Each paper model type's objective (from its registry entry).
PAPER_LOSS = _paper_losses()
