"""Packed weights: the same products as plain ones, never stale after the weights change, applied to the chosen
modules only for the duration of a block, and used by a search."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import tiny_model
from mt.config import DecodeConfig
from mt.decode.packing import ROWS, PackedWeights, can_pack
from mt.decode.search import Searcher
from mt.data.tokenizer import EOS

pytestmark = pytest.mark.skipif(not can_pack(torch.zeros(1)), reason="this PyTorch build has no MKL")


def plain(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, linear.weight, linear.bias)


def test_packed_products_equal_plain_ones_for_any_number_of_rows():
    torch.manual_seed(0)
    linear, packed = nn.Linear(16, 24), PackedWeights()
    with torch.inference_mode(), packed.applied([linear], rows=8):
        assert "forward" in vars(linear)  # this instance multiplies by its packed weight
        for shape in [(8, 16), (8, 1, 16), (3, 16), (4, 3, 16)]:  # 8 rows packed; the others multiply plainly
            x = torch.randn(shape)
            torch.testing.assert_close(linear(x), plain(linear, x), rtol=1e-5, atol=1e-5)
    assert "forward" not in vars(linear)


def test_only_the_chosen_modules_are_packed_and_other_instances_stay_plain():
    model, packed = tiny_model(), PackedWeights()
    with torch.inference_mode(), packed.applied([model.decoder], rows=8):
        assert all("forward" in vars(m) for m in model.decoder.modules() if isinstance(m, nn.Linear))
        assert not any("forward" in vars(m) for m in model.encoder.modules() if isinstance(m, nn.Linear))
        assert "forward" not in vars(tiny_model().decoder.layers[0].feed_forward.w_1)  # another model instance


def test_a_weight_is_packed_once_for_the_first_step_size():
    torch.manual_seed(0)
    linear, x, packed = nn.Linear(16, 24), torch.randn(16, 16), PackedWeights()
    with torch.inference_mode():
        with packed.applied([linear], rows=8):
            first = linear.forward.args
        with packed.applied([linear], rows=16):  # another size: the kept copy, and plain products for 16 rows
            assert linear.forward.args[1] == 8 and linear.forward.args[2] is first[2]
            torch.testing.assert_close(linear(x), plain(linear, x), rtol=1e-5, atol=1e-5)


def test_a_changed_weight_is_packed_again():
    torch.manual_seed(0)
    linear, x, packed = nn.Linear(16, 24), torch.randn(8, 16), PackedWeights()
    with torch.inference_mode(), packed.applied([linear], rows=8):
        before = linear(x)
    with torch.no_grad():
        linear.weight.mul_(2.0)  # as an optimiser step does, in place
    with torch.inference_mode(), packed.applied([linear], rows=8):
        after = linear(x)
    torch.testing.assert_close(after - linear.bias, 2 * (before - linear.bias), rtol=1e-5, atol=1e-5)


def test_an_error_inside_the_block_leaves_plain_products():
    linear = nn.Linear(4, 4)
    with pytest.raises(RuntimeError), torch.inference_mode(), PackedWeights().applied([linear], rows=8):
        raise RuntimeError
    assert "forward" not in vars(linear)


@pytest.mark.parametrize("rows", [min(ROWS) - 1, max(ROWS) + 1])
def test_steps_outside_the_packed_sizes_multiply_plainly(rows):
    linear = nn.Linear(4, 4)
    with torch.inference_mode(), PackedWeights().applied([linear], rows=rows):
        assert "forward" not in vars(linear)


def test_a_search_decodes_with_packed_weights(monkeypatch):
    import mt.decode.packing

    model, seen = tiny_model(), []
    packed_forward = mt.decode.packing._packed_forward

    def spy(linear, rows, weight, x):
        seen.append(x.shape[:-1].numel() == rows)  # a product that takes the packed path
        return packed_forward(linear, rows, weight, x)

    monkeypatch.setattr(mt.decode.packing, "_packed_forward", spy)
    sources = [[5, 6, EOS], [7, EOS]] * (min(ROWS) // 2)  # a batch of a packed size
    Searcher(model, torch.device("cpu")).search(sources, DecodeConfig(beam_size=1, max_len_b=4))
    assert any(seen)  # the decoder's steps (the encoder multiplies plainly)
    assert not any("forward" in vars(m) for m in model.modules())
