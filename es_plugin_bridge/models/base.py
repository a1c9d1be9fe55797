"""The encoder interface every neural question encoder implements."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["Encoder", "make_embedding"]


class Encoder(nn.Module):
    """Maps a padded batch of token ids to one vector per question.

    ``forward(ids: LongTensor[B, T], mask: BoolTensor[B, T]) -> FloatTensor[B, output_dim]``.
    ``mask`` is True on real tokens and must be left-aligned (a prefix of each row), so a question
    encodes to the same vector whatever padding follows it; an all-False row encodes to zeros.
    Every encoder owns its word-embedding layer as ``self.embedding``.
    """

    output_dim: int
    embedding: nn.Embedding

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


def make_embedding(vocab_size: int, dim: int, weights: np.ndarray | None, *, freeze: bool) -> nn.Embedding:
    """An embedding layer, initialised from word2vec vectors when given (else small random values)."""
    layer = nn.Embedding(vocab_size, dim)
    with torch.no_grad():
        if weights is None:
            layer.weight.normal_(0.0, 0.1)
        else:
            layer.weight.copy_(torch.as_tensor(np.asarray(weights, dtype=np.float32)))
    layer.weight.requires_grad_(not freeze)
    return layer
