"""Packed weights: the same products as plain ones with either library, never stale after the weights change,
applied to the chosen modules only for the duration of a block, and used by a search; in bf16 where asked and the
hardware has it."""

import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import tiny_model
from test_search import peaky_model
from mt.config import DecodeConfig
from mt.core.device import has_native_bf16
from mt.core.errors import MtError
import mt.decode.packing
import mt.decode.translator
from mt.decode.packing import MKL_ROWS, PackedWeights, best_library
from mt.decode.searcher import Searcher
from mt.decode.translator import load_translator, products_dtype
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


NATIVE_BF16 = pytest.mark.skipif(not has_native_bf16(torch.device("cpu")),
                                 reason="this CPU has no bf16 products in hardware")


@NATIVE_BF16
def test_bf16_packed_products_are_those_of_the_bf16_rounded_input_and_weights():
    torch.manual_seed(0)
    linear, packed = nn.Linear(64, 48), PackedWeights("mkl", dtype=torch.bfloat16)  # bf16: oneDNN's, whatever asked
    with torch.inference_mode(), packed.applied([linear], rows=None):
        for rows in [1, 4, 20, 128]:
            x = torch.randn(rows, 64)
            out = linear(x)
            assert out.dtype == torch.float32
            rounded = F.linear(x.bfloat16().float(), linear.weight.bfloat16().float(), linear.bias.bfloat16().float())
            torch.testing.assert_close(out, rounded, rtol=1e-2, atol=1e-2)  # the product's own bf16 output rounding
            assert not torch.equal(out, plain(linear, x))  # not float32's
    assert "forward" not in vars(linear)


@NATIVE_BF16
def test_a_bfloat16_search_multiplies_in_bf16_and_agrees_with_float32(trained_runs, monkeypatch):
    model, rows = peaky_model(d_model=64, d_ff=128), []
    bf16_forward = mt.decode.packing._onednn_bf16_forward
    monkeypatch.setattr(mt.decode.packing, "_onednn_bf16_forward",
                        lambda *args: rows.append(args[-1].shape[:-1].numel()) or bf16_forward(*args))
    torch.manual_seed(1)
    sources = [torch.randint(5, 40, (int(n),)).tolist() + [EOS] for n in torch.randint(2, 9, (60,))]
    decode = DecodeConfig(beam_size=4, max_len_b=8)
    float32 = Searcher(model, torch.device("cpu")).search(sources, decode)
    assert not rows
    bf16 = Searcher(model, torch.device("cpu"), dtype=torch.bfloat16).search(sources, decode)
    assert rows  # the search multiplied by bf16 weights
    same = [a[0].tokens == b[0].tokens for a, b in zip(float32, bf16)]
    assert sum(same) >= 2 / 3 * len(sources)  # a wrong product would agree on none
    differences = [abs(a[0].score - b[0].score) for a, b, equal in zip(float32, bf16, same) if equal]
    assert sum(differences) / len(differences) < 0.1  # the same outputs' log-probabilities, to bf16's rounding
    outputs = [hyps[0].tokens + [EOS] for hyps in float32]
    rows.clear()
    scored = Searcher(model, torch.device("cpu"), dtype=torch.bfloat16).score_batch(sources, outputs)
    assert rows  # forced decoding (mt score) multiplies by bf16 weights too
    reference = Searcher(model, torch.device("cpu")).score_batch(sources, outputs)
    gaps = [abs(a - b) for x, y in zip(scored, reference) for a, b in zip(x, y)]
    assert 0 < max(gaps) and sum(gaps) / len(gaps) < 0.05  # per token: bf16's rounding, not another model's
    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    assert load_translator(checkpoint, "cpu", compute_type="bfloat16").engine.compute_type == "bfloat16"


def test_mt_engine_computes_in_float32_unless_bfloat16_is_asked_where_the_hardware_has_it(monkeypatch):
    cpu = torch.device("cpu")
    assert [products_dtype(t, cpu) for t in ("auto", "default", "float32")] == [torch.float32] * 3
    with pytest.raises(MtError, match="--compute-type int8: mt's engine computes in float32 or bfloat16"):
        products_dtype("int8", cpu)
    monkeypatch.setattr(mt.decode.translator, "has_native_bf16", lambda device: False)
    with pytest.raises(MtError, match="--compute-type bfloat16: this CPU has no bf16 products in hardware"):
        products_dtype("bfloat16", cpu)
    monkeypatch.setattr(mt.decode.translator, "has_native_bf16", lambda device: True)
    assert products_dtype("bfloat16", cpu) == torch.bfloat16
