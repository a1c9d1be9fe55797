"""Weighted bag of words of dos Santos et al. (2015): r = tf ⊙ t, t a learned per-word weight.

No |V|-sized tensor is ever built. A question's r is kept in fixed-width sparse form: one slot per
token position, holding (word id, tf(w)·t_w) at the first occurrence of each word and (−1, 0)
elsewhere, so ``ids``/``values`` are exactly the non-zeros of r. The dot product of two such
vectors is Σ_ij [a_i = b_j]·va_i·vb_j, a [B, Ta, Tb] comparison instead of a [B, V] scatter:
O(Ta·Tb) per pair (≈12k for 110 tokens) against O(V) (tens of thousands) — and it is plain
Equal/Mul/ReduceSum in ONNX. The same (id, value) pairs are what Elasticsearch stores as
``rank_features`` in the stored-vector mode.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from es_plugin_bridge.core.vocab import UNK_ID


class WeightedBagOfWords(nn.Module):
    """The BOW path: per-word weight vector ``weight`` (t), initialised to IDF or ones, optionally frozen."""

    def __init__(
        self, vocab_size: int, *, init: str = "idf", idf: np.ndarray | None = None, trainable: bool = True
    ) -> None:
        super().__init__()
        if init == "idf" and idf is not None:
            start = torch.as_tensor(np.asarray(idf, dtype=np.float32))
        else:
            # "ones", or rebuilding a checkpoint whose learned t comes from its state dict.
            start = torch.ones(vocab_size)
        self.weight = nn.Parameter(start, requires_grad=trainable)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, T] ids and mask → (term ids [B, T] with −1 off first occurrences, values tf·t [B, T]).

        The unknown-word id is no word: every out-of-vocabulary token shares it, so counting it
        would make two questions full of (different) unknown words look identical.
        """
        mask = mask & (ids != UNK_ID)
        real = mask.to(torch.float32)
        same = (ids.unsqueeze(2) == ids.unsqueeze(1)).to(torch.float32)
        same = same * real.unsqueeze(2) * real.unsqueeze(1)
        tf = same.sum(2)
        positions = torch.arange(ids.shape[1], device=ids.device)
        earlier = (positions.unsqueeze(0) < positions.unsqueeze(1)).to(torch.float32)  # [i, j]: j < i
        seen_before = (same * earlier.unsqueeze(0)).sum(2) > 0
        first = mask & ~seen_before
        values = torch.where(first, tf * self.weight[ids], torch.zeros_like(tf))
        term_ids = torch.where(first, ids, torch.full_like(ids, -1))
        return term_ids, values


def bow_cosine(
    ids_a: torch.Tensor, values_a: torch.Tensor, ids_b: torch.Tensor, values_b: torch.Tensor
) -> torch.Tensor:
    """Cosine of two batches of sparse weighted-BOW vectors (see module docstring) → [B]."""
    match = (ids_a.unsqueeze(2) == ids_b.unsqueeze(1)).to(torch.float32)
    dot = (match * values_a.unsqueeze(2) * values_b.unsqueeze(1)).sum((1, 2))
    norm_a = torch.sqrt((values_a * values_a).sum(1))
    norm_b = torch.sqrt((values_b * values_b).sum(1))
    return dot / (norm_a * norm_b).clamp_min(1e-8)
