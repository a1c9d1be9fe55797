"""LSTM and GRU encoders, Lei et al. (2016) Section 5's comparison models.

A forward-only ``nn.LSTM``/``nn.GRU`` over left-aligned padding: states before a row's end never
see its padding, so "last" (state at the last real token) and "mean" (average of L2-normalised
states over real tokens, as for the RCNN) ignore padding exactly without packing, which keeps
the graph ONNX-exportable.
"""

from __future__ import annotations

import torch
from torch import nn

from es_plugin_bridge.models.base import Encoder
from es_plugin_bridge.models.sequences import embed, l2_normalise, last_state, masked_mean


class RecurrentEncoder(Encoder):
    """``cell`` "lstm" or "gru", one layer, ``pooling`` "mean" or "last"."""

    def __init__(
        self,
        embedding: nn.Embedding,
        *,
        cell: str = "lstm",
        hidden_dim: int = 240,
        pooling: str = "mean",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.cell = cell
        self.pooling = pooling
        rnn_class = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn_class(embedding.embedding_dim, hidden_dim, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = hidden_dim

    def states(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, T, hidden_dim] hidden states."""
        states, _ = self.rnn(self.dropout(embed(self.embedding, ids, mask)))
        return states

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        states = self.states(ids, mask)
        if self.pooling == "last":
            pooled = last_state(states, mask)
        else:
            pooled = masked_mean(l2_normalise(states), mask)
        return self.dropout(pooled)
