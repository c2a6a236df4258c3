"""train.precision auto: bf16 where the processor multiplies bf16 matrices natively, fp32 where it would emulate."""

import pytest
import torch

from mt.train.trainer import autocast_dtype

CPU = torch.device("cpu")


@pytest.mark.parametrize("avx512_bf16, amx, expected", [
    (True, False, torch.bfloat16),   # e.g. AMD Zen 4, Intel Cooper Lake
    (False, True, torch.bfloat16),   # Intel Sapphire Rapids and later
    (False, False, None),            # AVX2 or plain AVX-512: fp32
])
def test_auto_picks_bf16_only_on_a_cpu_with_native_bf16(monkeypatch, avx512_bf16, amx, expected):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert autocast_dtype("auto", CPU) == expected
    assert autocast_dtype("fp32", CPU) is None and autocast_dtype("bf16", CPU) == torch.bfloat16


def test_auto_is_fp32_when_torch_cannot_say(monkeypatch):
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    assert autocast_dtype("auto", CPU) is None
