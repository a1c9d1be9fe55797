"""The papers' two vector similarities: cosine (dos Santos, Bogdanova, Lei), Manhattan (paper 004)."""

from __future__ import annotations

import torch

_TINY = float(torch.finfo(torch.float32).tiny)


def cosine_similarity(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Cosine of [B, D] rows → [B] in [−1, 1]; 0 when either vector is zero."""
    dot = (a * b).sum(-1)
    norms = torch.sqrt((a * a).sum(-1)) * torch.sqrt((b * b).sum(-1))
    return dot / norms.clamp_min(eps)


def manhattan_similarity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """exp(−‖a − b‖₁) of [B, D] rows → [B] in (0, 1], exactly 1 for identical vectors.

    Floored at the smallest normal float32 so a far pair (‖a − b‖₁ > 87) never underflows to 0.
    """
    return torch.exp(-(a - b).abs().sum(-1)).clamp_min(_TINY)


SIMILARITY_FUNCTIONS = {"cosine": cosine_similarity, "manhattan": manhattan_similarity}
