"""Convolutional encoder of dos Santos et al. (2015) and Bogdanova et al. (2015).

Each position n gets z_n, the concatenation of the k word vectors of a window centred on n
(zero vectors beyond the question's ends), then W¹z_n + b¹. Pooling "max" gives
r = tanh(max_n(W¹z_n + b¹)) (BOW-CNN paper, eq. 2); "sum" gives r = tanh(Σ_n tanh(W¹z_n + b¹))
(Bogdanova et al., eq. 2). The window concatenation + linear map is exactly a Conv1d of width k.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from es_plugin_bridge.models.base import Encoder
from es_plugin_bridge.models.sequences import embed, masked_max, masked_sum


class ConvEncoder(Encoder):
    """Window-k convolution, tanh, max or sum over the real positions."""

    def __init__(
        self,
        embedding: nn.Embedding,
        *,
        window: int = 3,
        conv_units: int = 400,
        pooling: str = "max",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.window = window
        self.pooling = pooling
        self.conv = nn.Conv1d(embedding.embedding_dim, conv_units, window)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = conv_units

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.dropout(embed(self.embedding, ids, mask)).transpose(1, 2)
        left = (self.window - 1) // 2
        x = F.pad(x, (left, self.window - 1 - left))
        z = self.conv(x).transpose(1, 2)  # [B, T, conv_units]: W¹z_n + b¹ at every position n
        if self.pooling == "max":
            return torch.tanh(masked_max(z, mask))
        return torch.tanh(masked_sum(torch.tanh(z), mask))
