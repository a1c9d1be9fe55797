"""Siamese CNN encoder of paper 004, Section 4: convolution (ReLU), max-pool, dropout, dense + ReLU.

One or more filter widths ("multi-channel"), each ``num_filters`` wide; inputs are zero-padded
so every width yields one feature per position; pooling is the max over real positions only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from es_plugin_bridge.models.base import Encoder
from es_plugin_bridge.models.sequences import embed, has_tokens, masked_max


class SiameseCNNEncoder(Encoder):
    """Convolution + max-pool + dense layer, ReLU activations, dropout after conv and pooling."""

    def __init__(
        self,
        embedding: nn.Embedding,
        *,
        num_filters: int = 32,
        kernel_sizes: tuple[int, ...] = (3,),
        dense_dim: int = 50,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.kernel_sizes = tuple(kernel_sizes)
        self.convs = nn.ModuleList(
            nn.Conv1d(embedding.embedding_dim, num_filters, k) for k in self.kernel_sizes
        )
        self.dense = nn.Linear(num_filters * len(self.kernel_sizes), dense_dim)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = dense_dim

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = embed(self.embedding, ids, mask).transpose(1, 2)
        pooled = []
        for width, conv in zip(self.kernel_sizes, self.convs, strict=True):
            left = (width - 1) // 2
            features = torch.relu(conv(F.pad(x, (left, width - 1 - left)))).transpose(1, 2)
            pooled.append(masked_max(self.dropout(features), mask))
        return torch.relu(self.dense(self.dropout(torch.cat(pooled, dim=1)))) * has_tokens(mask)
