"""RCNN encoder of Lei et al. (2016), Section 4.1: non-consecutive convolution with adaptive gated decay.

    λ_t     = σ(W_λ x_t + U_λ h_{t−1} + b_λ)
    c⁽¹⁾_t  = λ_t ⊙ c⁽¹⁾_{t−1} + (1 − λ_t) ⊙ (W₁ x_t)
    c⁽ᵏ⁾_t  = λ_t ⊙ c⁽ᵏ⁾_{t−1} + (1 − λ_t) ⊙ (c⁽ᵏ⁻¹⁾_{t−1} + W_k x_t)      k = 2..n
    h_t     = tanh(c⁽ⁿ⁾_t + b)

with c⁽ᵏ⁾_0 = h_0 = 0. Pooling "last" takes h at the last real token; "mean" averages the
L2-normalised states over real tokens (the paper's footnote 4). The recurrence is a Python loop
over the fixed padded length, which traces into an unrolled ONNX graph.
"""

from __future__ import annotations

import torch
from torch import nn

from es_plugin_bridge.models.base import Encoder
from es_plugin_bridge.models.sequences import embed, l2_normalise, last_state, masked_mean


class RCNNEncoder(Encoder):
    """Gated non-consecutive convolution of order n (2 by default)."""

    def __init__(
        self,
        embedding: nn.Embedding,
        *,
        hidden_dim: int = 400,
        order: int = 2,
        pooling: str = "last",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.hidden_dim = hidden_dim
        self.order = order
        self.pooling = pooling
        dim = embedding.embedding_dim
        self.gate_input = nn.Linear(dim, hidden_dim)  # W_λ and b_λ
        self.gate_hidden = nn.Linear(hidden_dim, hidden_dim, bias=False)  # U_λ
        self.filters = nn.Linear(dim, order * hidden_dim, bias=False)  # W_1 … W_n stacked
        self.bias = nn.Parameter(torch.zeros(hidden_dim))  # b
        self.dropout = nn.Dropout(dropout)
        self.output_dim = hidden_dim

    def states(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """All states h_1 … h_T, [B, T, hidden_dim] (states past a row's end are never read)."""
        x = self.dropout(embed(self.embedding, ids, mask))
        batch, steps = x.shape[0], x.shape[1]
        gate_x = self.gate_input(x)
        filtered = self.filters(x).reshape(batch, steps, self.order, self.hidden_dim)
        # unbind once: indexing step t inside the loop would make backward write T full-size gradients
        gate_steps = gate_x.unbind(1)
        filter_steps = filtered.unbind(1)
        h = x.new_zeros(batch, self.hidden_dim)
        c = [x.new_zeros(batch, self.hidden_dim) for _ in range(self.order)]
        outputs = []
        for t in range(steps):
            lam = torch.sigmoid(gate_steps[t] + self.gate_hidden(h))
            patterns = filter_steps[t].unbind(1)
            new_c = []
            for k in range(self.order):
                pattern = patterns[k] if k == 0 else c[k - 1] + patterns[k]
                new_c.append(lam * c[k] + (1.0 - lam) * pattern)
            c = new_c
            h = torch.tanh(c[-1] + self.bias)
            outputs.append(h)
        return torch.stack(outputs, dim=1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        states = self.states(ids, mask)
        if self.pooling == "last":
            pooled = last_state(states, mask)
        else:
            pooled = masked_mean(l2_normalise(states), mask)
        return self.dropout(pooled)
