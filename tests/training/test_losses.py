"""The three training objectives against their formulas, on hand-computable scores."""

import math

import pytest
import torch

from es_plugin_bridge.training.losses import (
    PAPER_LOSS,
    hardest_negative,
    logistic_ranking_loss,
    max_margin_loss,
    mse_loss,
)


def test_logistic_uses_hardest_negative_and_gamma():
    pos = torch.tensor([0.9, 0.2])
    neg = torch.tensor([[0.1, 0.5, -0.3], [0.4, 0.0, 0.1]])
    expected = (math.log1p(math.exp(-10 * (0.9 - 0.5))) + math.log1p(math.exp(-10 * (0.2 - 0.4)))) / 2
    assert logistic_ranking_loss(pos, neg).item() == pytest.approx(expected, rel=1e-6)
    expected_g1 = (math.log1p(math.exp(-0.4)) + math.log1p(math.exp(0.2))) / 2
    assert logistic_ranking_loss(pos, neg, gamma=1.0).item() == pytest.approx(expected_g1, rel=1e-6)


def test_logistic_is_stable_for_large_gaps():
    loss = logistic_ranking_loss(torch.tensor([-1.0]), torch.tensor([[1.0]]), gamma=1000.0)
    assert torch.isfinite(loss) and loss.item() == pytest.approx(2000.0)


def test_max_margin_hinge():
    pos = torch.tensor([0.9, 0.2, 0.5])
    neg = torch.tensor([[0.1, 0.3], [0.4, 0.0], [-0.9, -0.6]])
    expected = (max(0, 1 - 0.9 + 0.3) + max(0, 1 - 0.2 + 0.4) + max(0, 1 - 0.5 - 0.6)) / 3
    assert max_margin_loss(pos, neg).item() == pytest.approx(expected, rel=1e-6)
    expected_small = (0 + max(0, 0.2 - 0.2 + 0.4) + 0) / 3
    assert max_margin_loss(pos, neg, margin=0.2).item() == pytest.approx(expected_small, rel=1e-6)


def test_negative_mask_skips_padding_slots_and_empty_rows():
    neg = torch.tensor([[0.1, 5.0], [7.0, 7.0]])
    mask = torch.tensor([[True, False], [False, False]])
    assert hardest_negative(neg, mask)[0].item() == pytest.approx(0.1)
    pos = torch.tensor([0.5, 0.0], requires_grad=True)
    loss = max_margin_loss(pos, neg, neg_mask=mask)
    assert loss.item() == pytest.approx(1 - 0.5 + 0.1, rel=1e-6)  # only row 0 counts
    loss.backward()
    assert torch.isfinite(pos.grad).all() and pos.grad[1].item() == 0.0
    assert logistic_ranking_loss(pos.detach(), neg, neg_mask=mask).item() == pytest.approx(
        math.log1p(math.exp(-10 * 0.4)), rel=1e-6
    )


def test_gradient_flows_only_to_hardest_negative():
    neg = torch.tensor([[0.1, 0.6, 0.2]], requires_grad=True)
    logistic_ranking_loss(torch.tensor([0.5]), neg).backward()
    assert neg.grad[0, 1] > 0 and neg.grad[0, 0] == 0 and neg.grad[0, 2] == 0


def test_mse_on_labels():
    scores = torch.tensor([0.9, 0.2, 0.6])
    labels = torch.tensor([1, 0, 0])
    assert mse_loss(scores, labels).item() == pytest.approx((0.01 + 0.04 + 0.36) / 3, rel=1e-6)


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match=r"\[B, K\]"):
        max_margin_loss(torch.zeros(3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="shape"):
        mse_loss(torch.zeros(3), torch.zeros(4))


def test_every_model_type_has_a_paper_loss():
    from es_plugin_bridge.models import PAPER_TYPES

    assert set(PAPER_LOSS) == set(PAPER_TYPES)
