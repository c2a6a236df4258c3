"""Packed weights: the same products as plain ones with either library, never stale after the weights change,
applied to the chosen modules only for the duration of a block, and used by a search."""

import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import tiny_model
from mt.config import DecodeConfig
import mt.decode.packing
from mt.decode.packing import MKL_ROWS, PackedWeights, best_library
from mt.decode.search import Searcher
from mt.data.tokenizer import EOS

LIBRARIES = [
    pytest.param("onednn", marks=pytest.mark.skipif(not torch.backends.mkldnn.is_available(),
                                                    reason="this PyTorch build has no oneDNN")),
    pytest.param("mkl", marks=pytest.mark.skipif(not hasattr(torch.ops.mkl, "_mkl_linear"),
                                                 reason="this PyTorch build has no MKL")),
]


def plain(linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, linear.weight, linear.bias)


def packed_path(linear: nn.Linear, rows: int) -> bool:
    """Whether linear's product of an input of `rows` rows takes its packed path."""
    forward = vars(linear).get("forward")
    return forward is not None and (forward.func.__name__ == "_onednn_forward" or forward.args[1] == rows)


@pytest.mark.parametrize("library", LIBRARIES)
def test_packed_products_equal_plain_ones_for_any_number_of_rows(library):
    torch.manual_seed(0)
    linear, packed = nn.Linear(16, 24), PackedWeights(library)
    with torch.inference_mode(), packed.applied([linear], rows=8):
        assert packed_path(linear, 8)
        for shape in [(8, 16), (8, 1, 16), (3, 16), (4, 3, 16)]:  # MKL: 8 rows packed, the others plain
            x = torch.randn(shape)
            torch.testing.assert_close(linear(x), plain(linear, x), rtol=1e-5, atol=1e-5)
    assert "forward" not in vars(linear)


@pytest.mark.skipif(not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")),
                    reason="this PyTorch build lacks MKL or oneDNN")
@pytest.mark.parametrize("vendor, library", [("GenuineIntel", "mkl"), ("AuthenticAMD", "onednn"), ("", "mkl")])
def test_mkl_packs_on_intel_cpus_and_onednn_on_the_others(vendor, library, monkeypatch):
    monkeypatch.setattr(mt.decode.packing, "cpu_vendor", lambda: vendor)
    assert best_library() == library


def test_onednn_packs_any_number_of_rows_and_mkl_its_sizes_only():
    linear = nn.Linear(4, 4)
    for rows in [1, min(MKL_ROWS) - 1, max(MKL_ROWS) + 1, 4000]:
        with torch.inference_mode(), PackedWeights("onednn").applied([linear], rows=rows):
            assert packed_path(linear, rows)
        with torch.inference_mode(), PackedWeights("mkl").applied([linear], rows=rows):
            assert "forward" not in vars(linear)
    with torch.inference_mode(), PackedWeights("none").applied([linear], rows=8):
        assert "forward" not in vars(linear)


@pytest.mark.parametrize("library", LIBRARIES)
def test_only_the_chosen_modules_are_packed_and_other_instances_stay_plain(library):
    model, packed = tiny_model(), PackedWeights(library)
    with torch.inference_mode(), packed.applied([model.decoder], rows=8):
        assert all("forward" in vars(m) for m in model.decoder.modules() if isinstance(m, nn.Linear))
        assert not any("forward" in vars(m) for m in model.encoder.modules() if isinstance(m, nn.Linear))
        assert "forward" not in vars(tiny_model().decoder.layers[0].feed_forward.w_1)  # another model instance


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_weight_is_packed_once(library):
    torch.manual_seed(0)
    linear, x, packed = nn.Linear(16, 24), torch.randn(16, 16), PackedWeights(library)
    with torch.inference_mode():
        with packed.applied([linear], rows=8):
            first = linear.forward.args[-1]
        with packed.applied([linear], rows=16):  # another size: the kept copy (MKL: plain products for 16 rows)
            assert linear.forward.args[-1] is first
            torch.testing.assert_close(linear(x), plain(linear, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_changed_weight_is_packed_again(library):
    torch.manual_seed(0)
    linear, x, packed = nn.Linear(16, 24), torch.randn(8, 16), PackedWeights(library)
    with torch.inference_mode(), packed.applied([linear], rows=8):
        before = linear(x)
    with torch.no_grad():
        linear.weight.mul_(2.0)  # as an optimiser step does, in place
    with torch.inference_mode(), packed.applied([linear], rows=8):
        after = linear(x)
    torch.testing.assert_close(after - linear.bias, 2 * (before - linear.bias), rtol=1e-5, atol=1e-5)


def test_an_error_inside_the_block_leaves_plain_products():
    linear = nn.Linear(4, 4)
    with pytest.raises(RuntimeError), torch.inference_mode(), PackedWeights("onednn").applied([linear], rows=8):
        raise RuntimeError
    assert "forward" not in vars(linear)


@pytest.mark.parametrize("library", LIBRARIES)
def test_blocks_of_two_threads_share_the_packed_modules_until_the_last_leaves(library):
    linear, packed = nn.Linear(16, 24), PackedWeights(library)
    first_in, second_out = threading.Event(), threading.Event()
    seen = []

    def first():
        with packed.applied([linear], rows=8):
            first_in.set()
            second_out.wait(timeout=30)
            seen.append(packed_path(linear, 8))  # the other block has left: still packed for this one

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(timeout=30)
    with packed.applied([linear], rows=8):
        seen.append(packed_path(linear, 8))
    second_out.set()
    thread.join()
    assert seen == [True, True] and "forward" not in vars(linear)


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_search_decodes_with_packed_weights(library, monkeypatch):
    model, seen = tiny_model(), []
    searcher = Searcher(model, torch.device("cpu"))
    searcher.packed = PackedWeights(library)
    name = f"_{library}_forward"
    packed_forward = getattr(mt.decode.packing, name)

    def spy(linear, *args):
        seen.append((linear, args[-1].shape[:-1].numel()))  # the module and the rows of its input x
        return packed_forward(linear, *args)

    monkeypatch.setattr(mt.decode.packing, name, spy)
    sources = [[5, 6, EOS], [7, EOS]] * (min(MKL_ROWS) // 2)  # a batch of a size that MKL packs
    searcher.search(sources, DecodeConfig(beam_size=1, max_len_b=4))
    assert min(MKL_ROWS) in [rows for _, rows in seen]  # the decoder's steps
    encoder = set(model.encoder.modules())
    assert any(linear in encoder for linear, _ in seen) == (library == "onednn")  # MKL packs no [B, S] rows
    assert not any("forward" in vars(m) for m in model.modules())
