"""Mask-aware operations on padded batches, written with ONNX-exportable ops only.

Masks are left-aligned booleans (True on real tokens). Every reduction here ignores padded
positions exactly, so extra padding never changes a result, and an empty row gives zeros.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def float_mask(mask: torch.Tensor) -> torch.Tensor:
    """[B, T] bool → [B, T, 1] float, for multiplying into [B, T, D] states."""
    return mask.to(torch.float32).unsqueeze(-1)


def lengths(mask: torch.Tensor) -> torch.Tensor:
    """Number of real tokens per row, [B] long."""
    return mask.to(torch.int64).sum(1)


def has_tokens(mask: torch.Tensor) -> torch.Tensor:
    """[B, 1] float: 1 where the row has at least one token, else 0."""
    return (mask.to(torch.float32).sum(1, keepdim=True) > 0).to(torch.float32)


def embed(embedding: nn.Embedding, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Word vectors with padded positions zeroed (the "common padding embedding" is the zero vector)."""
    return embedding(ids) * float_mask(mask)


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over real positions of [B, T, D]; zeros for an empty row."""
    filled = x.masked_fill(~mask.unsqueeze(-1), -1e9)
    return filled.max(dim=1).values * has_tokens(mask)


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum over real positions of [B, T, D]."""
    return (x * float_mask(mask)).sum(1)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over real positions of [B, T, D]; zeros for an empty row."""
    count = mask.to(torch.float32).sum(1, keepdim=True).clamp_min(1.0)
    return masked_sum(x, mask) / count


def last_state(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """State at the last real position of [B, T, D]; zeros for an empty row."""
    index = (lengths(mask) - 1).clamp_min(0)
    index = index.view(-1, 1, 1).expand(-1, 1, x.shape[2])
    return x.gather(1, index).squeeze(1) * has_tokens(mask)


def l2_normalise(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Divide each vector along the last axis by its L2 norm (zero vectors stay zero)."""
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def pad_to(x: torch.Tensor, length: int, value: float | int | bool = 0) -> torch.Tensor:
    """Right-pad [B, T] to [B, length]."""
    extra = length - x.shape[1]
    if extra <= 0:
        return x
    return F.pad(x, (0, extra), value=value)


def stack_rows(
    a_ids: torch.Tensor, a_mask: torch.Tensor, b_ids: torch.Tensor, b_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two padded batches [Ba, Ta] and [Bb, Tb] as one [Ba + Bb, max(Ta, Tb)] batch (ids and mask), so
    one encoder call serves both (e.g. titles and bodies)."""
    length = max(a_ids.shape[1], b_ids.shape[1])
    ids = torch.cat([pad_to(a_ids, length), pad_to(b_ids, length)], dim=0)
    mask = torch.cat([pad_to(a_mask, length, False), pad_to(b_mask, length, False)], dim=0)
    return ids, mask


def concat_packed(
    ids_a: torch.Tensor, mask_a: torch.Tensor, ids_b: torch.Tensor, mask_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Join two left-aligned padded sequences into one left-aligned sequence (title then body).

    Position p of the result takes a's token p when p < len(a), else b's token p − len(a): a
    gather with computed indices, so it runs inside an exported graph.
    """
    ta = ids_a.shape[1]
    total = ta + ids_b.shape[1]
    ids = torch.cat([ids_a, ids_b], dim=1)
    len_a = lengths(mask_a).unsqueeze(1)
    len_b = lengths(mask_b).unsqueeze(1)
    positions = torch.arange(total, device=ids.device).unsqueeze(0)
    index = torch.where(positions < len_a, positions, positions - len_a + ta).clamp(0, total - 1)
    packed = ids.gather(1, index)
    mask = positions < (len_a + len_b)
    return packed * mask.to(packed.dtype), mask


def check_left_aligned(mask: torch.Tensor, name: str) -> None:
    """Refuse masks with a hole (a real token after padding): encoders assume prefixes."""
    if mask.dtype != torch.bool:
        raise ValueError(f"{name} must be a bool tensor, got {mask.dtype}")
    if mask.shape[1] > 1 and bool((mask[:, 1:] & ~mask[:, :-1]).any()):
        raise ValueError(f"{name} is not left-aligned: real tokens must come before padding")
