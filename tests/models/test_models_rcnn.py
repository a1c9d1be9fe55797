"""The RCNN recurrence against a direct, step-by-step evaluation of Lei et al.'s equations (n = 2)."""

from __future__ import annotations

import numpy as np
import torch
from test_models_data import one_thread  # noqa: F401

from es_plugin_bridge.models import build_model


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def paper_states(x: np.ndarray, w_lam, u_lam, b_lam, w1, w2, b) -> list[np.ndarray]:
    """Section 4.1 with n = 2, written out literally in float64:

    λ_t = σ(W_λ x_t + U_λ h_{t−1} + b_λ)
    c1_t = λ_t ⊙ c1_{t−1} + (1 − λ_t) ⊙ (W_1 x_t)
    c2_t = λ_t ⊙ c2_{t−1} + (1 − λ_t) ⊙ (c1_{t−1} + W_2 x_t)
    h_t = tanh(c2_t + b)
    """
    hidden = b.shape[0]
    h = np.zeros(hidden)
    c1 = np.zeros(hidden)
    c2 = np.zeros(hidden)
    states = []
    for x_t in x:
        lam = sigmoid(w_lam @ x_t + u_lam @ h + b_lam)
        c1_new = lam * c1 + (1 - lam) * (w1 @ x_t)
        c2_new = lam * c2 + (1 - lam) * (c1 + w2 @ x_t)
        c1, c2 = c1_new, c2_new
        h = np.tanh(c2 + b)
        states.append(h)
    return states


def test_rcnn_matches_the_papers_equations():
    torch.manual_seed(3)
    model = build_model(
        "rcnn", 12, embedding_dim=5, hidden_dim=4, order=2, pooling="last", dropout=0.0
    ).eval()
    enc = model.encoder
    with torch.no_grad():
        enc.bias.uniform_(-0.5, 0.5)  # b starts at zero; make it matter
    p = {name: t.detach().double().numpy() for name, t in enc.named_parameters()}
    w1, w2 = p["filters.weight"][:4], p["filters.weight"][4:]
    ids = torch.tensor([[3, 7, 1, 9, 4, 0, 0], [5, 2, 8, 0, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]], dtype=torch.bool)
    with torch.no_grad():
        states = enc.states(ids, mask).double().numpy()
        last = enc(ids, mask).double().numpy()
    for row in range(2):
        n = int(mask[row].sum())
        x = p["embedding.weight"][ids[row, :n].numpy()]
        expected = paper_states(
            x, p["gate_input.weight"], p["gate_hidden.weight"], p["gate_input.bias"], w1, w2, p["bias"]
        )
        np.testing.assert_allclose(states[row, :n], np.stack(expected), atol=1e-6)
        np.testing.assert_allclose(last[row], expected[-1], atol=1e-6)

    mean_model = build_model("rcnn", 12, embedding_dim=5, hidden_dim=4, pooling="mean", dropout=0.0).eval()
    mean_model.load_state_dict(model.state_dict())
    with torch.no_grad():
        mean = mean_model.encoder(ids, mask).double().numpy()
    for row in range(2):
        n = int(mask[row].sum())
        normed = states[row, :n] / np.linalg.norm(states[row, :n], axis=1, keepdims=True)
        np.testing.assert_allclose(mean[row], normed.mean(0), atol=1e-6)


def test_zero_gate_is_a_plain_bigram_cnn():
    """λ_t = 0 reduces the RCNN to a CNN of width 2: h_t = tanh(W_1 x_{t−1} + W_2 x_t + b)."""
    model = build_model("rcnn", 12, embedding_dim=5, hidden_dim=4, dropout=0.0).eval()
    enc = model.encoder
    with torch.no_grad():
        enc.gate_input.bias.fill_(-1e4)  # σ(−10⁴) = 0
    ids = torch.tensor([[3, 7, 1, 9]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    with torch.no_grad():
        states = enc.states(ids, mask)[0]
        x = enc.embedding.weight[ids[0]]
        w1, w2 = enc.filters.weight[:4], enc.filters.weight[4:]
        for t in range(1, 4):
            expected = torch.tanh(w1 @ x[t - 1] + w2 @ x[t] + enc.bias)
            torch.testing.assert_close(states[t], expected, atol=1e-6, rtol=0)
