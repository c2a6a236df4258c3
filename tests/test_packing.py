"""Packed weights: the same products as plain ones, never stale after the weights change, and used by search."""

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_model
from mt.packing import ROWS, Linear, can_pack, packed_weights
from mt.search import greedy_search
from mt.tokenizer import EOS

pytestmark = pytest.mark.skipif(not can_pack(torch.zeros(1)), reason="this PyTorch build has no MKL")


def test_packed_products_equal_plain_ones_for_any_number_of_rows():
    torch.manual_seed(0)
    linear = Linear(16, 24)
    with torch.inference_mode(), packed_weights([linear], rows=8):
        assert linear.packed is not None and linear.packed[0] == 8
        for shape in [(8, 16), (8, 1, 16), (3, 16), (4, 3, 16)]:  # 8 rows packed; the others multiply plainly
            x = torch.randn(shape)
            torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias), rtol=1e-5, atol=1e-5)
    assert linear.packed is None


def test_a_weight_is_packed_once_for_the_first_step_size():
    torch.manual_seed(0)
    linear, x = Linear(16, 24), torch.randn(16, 16)
    with torch.inference_mode():
        with packed_weights([linear], rows=8):
            first = linear.packed
        with packed_weights([linear], rows=16):  # another size: the kept copy, and plain products for 16 rows
            assert linear.packed[0] == 8 and linear.packed[1] is first[1]
            torch.testing.assert_close(linear(x), F.linear(x, linear.weight, linear.bias), rtol=1e-5, atol=1e-5)


def test_a_changed_weight_is_packed_again():
    torch.manual_seed(0)
    linear, x = Linear(16, 24), torch.randn(8, 16)
    with torch.inference_mode(), packed_weights([linear], rows=8):
        before = linear(x)
    with torch.no_grad():
        linear.weight.mul_(2.0)  # as an optimiser step does, in place
    with torch.inference_mode(), packed_weights([linear], rows=8):
        after = linear(x)
    torch.testing.assert_close(after - linear.bias, 2 * (before - linear.bias), rtol=1e-5, atol=1e-5)


def test_an_error_inside_the_block_leaves_plain_products():
    linear = Linear(4, 4)
    with pytest.raises(RuntimeError), torch.inference_mode(), packed_weights([linear], rows=8):
        raise RuntimeError
    assert linear.packed is None


@pytest.mark.parametrize("rows", [min(ROWS) - 1, max(ROWS) + 1])
def test_steps_outside_the_packed_sizes_multiply_plainly(rows):
    linear = Linear(4, 4)
    with torch.inference_mode(), packed_weights([linear], rows=rows):
        assert linear.packed is None


def test_search_decodes_with_packed_weights(monkeypatch):
    model, seen = tiny_model(), []
    plain_forward = Linear.forward

    def spy(self, x):
        seen.append(self.packed is not None)
        return plain_forward(self, x)

    monkeypatch.setattr(Linear, "forward", spy)
    sources = torch.tensor([[5, 6, EOS], [7, EOS, 0]]).repeat(min(ROWS), 1)  # a batch of a packed size
    greedy_search(model, sources, torch.full((len(sources),), 4))
    assert any(seen)  # the decoder's steps (the encoder multiplies plainly)
    assert not any(linear.packed for linear in model.modules() if isinstance(linear, Linear))
