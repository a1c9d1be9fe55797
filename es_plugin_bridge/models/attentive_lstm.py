"""Attentive Siamese LSTM encoder (paper 004, Section 3.5; attention as Yang et al. 2016).

    u_i = tanh(W_h h_i + b_h),   α_i = softmax_i(u_iᵀ u_h),   r = Σ_i α_i h_i

over the LSTM states h_i of the real tokens, u_h a learned context vector. Both questions go
through this one encoder (shared weights); the model compares them with Manhattan similarity.
"""

from __future__ import annotations

import torch
from torch import nn

from es_plugin_bridge.models.base import Encoder
from es_plugin_bridge.models.sequences import embed, has_tokens


class AttentiveLSTMEncoder(Encoder):
    """LSTM states pooled by word attention with a learned context vector."""

    def __init__(
        self, embedding: nn.Embedding, *, hidden_dim: int = 50, attention_dim: int = 50, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.rnn = nn.LSTM(embedding.embedding_dim, hidden_dim, batch_first=True)
        self.project = nn.Linear(hidden_dim, attention_dim)  # W_h, b_h
        self.context = nn.Parameter(torch.empty(attention_dim).uniform_(-0.1, 0.1))  # u_h
        self.dropout = nn.Dropout(dropout)
        self.output_dim = hidden_dim

    def attention(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(weights α [B, T], 0 on padding; LSTM states [B, T, hidden_dim])."""
        states, _ = self.rnn(self.dropout(embed(self.embedding, ids, mask)))
        logits = (torch.tanh(self.project(states)) * self.context).sum(-1)
        weights = torch.softmax(logits.masked_fill(~mask, -1e9), dim=1)
        return weights * mask.to(torch.float32), states

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weights, states = self.attention(ids, mask)
        pooled = (weights.unsqueeze(-1) * states).sum(1) * has_tokens(mask)
        return self.dropout(pooled)
