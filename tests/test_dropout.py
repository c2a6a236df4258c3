"""Dropout's CPU mask: the Bernoulli mask nn.Dropout draws, from 16-bit random numbers."""

import pytest
import torch

from mt.model.dropout import Dropout, dropout_mask

N = 2 ** 20


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drops_a_fraction_p_and_keeps_the_expected_value(p):
    torch.manual_seed(0)
    mask = dropout_mask(torch.Size([N]), p, torch.float32)
    dropped = (mask == 0).double().mean().item()
    assert abs(dropped - p) < 5 * (p * (1 - p) / N) ** 0.5   # five standard deviations
    assert mask.unique().tolist() == [0.0, pytest.approx(1 / (1 - p), rel=1e-4)]
    assert mask.double().mean().item() == pytest.approx(1.0, abs=5 * (p / (1 - p) / N) ** 0.5)


def test_every_16_bits_of_a_64_bit_draw_are_uniform():
    """Each 64-bit draw gives four 16-bit numbers: at p = 0.5 each of the four (the sign bit of the last
    included) must decide half of its elements."""
    torch.manual_seed(0)
    mask = dropout_mask(torch.Size([N]), 0.5, torch.float32).view(-1, 4)
    kept = (mask > 0).double().mean(dim=0)
    assert ((kept - 0.5).abs() < 5 * (0.25 / (N / 4)) ** 0.5).all(), kept


def test_the_gradient_passes_through_kept_elements_only():
    layer = Dropout(0.3).train()
    x = torch.randn(64, 7, 32, dtype=torch.bfloat16, requires_grad=True)
    torch.manual_seed(3)
    y = layer(x)
    y.sum().backward()
    torch.manual_seed(3)
    mask = dropout_mask(x.shape, 0.3, torch.bfloat16)
    assert torch.equal(y, x * mask) and torch.equal(x.grad, mask)
    assert y.dtype == torch.bfloat16


def test_the_seed_decides_the_mask():
    x = torch.ones(4096)
    layer = Dropout(0.1).train()
    torch.manual_seed(1)
    first = layer(x)
    torch.manual_seed(1)
    assert torch.equal(layer(x), first)
    torch.manual_seed(2)
    assert not torch.equal(layer(x), first)


def test_eval_mode_and_p_zero_leave_the_input_as_it_is():
    x = torch.randn(8, 16)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
