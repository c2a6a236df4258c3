"""train.precision auto: bf16 where the processor multiplies bf16 matrices natively, fp32 where it would emulate."""

import pytest
import torch

from mt.train.trainer import autocast_dtype

CPU = torch.device("cpu")


@pytest.mark.parametrize("capability, avx512_bf16, amx, expected", [
    ("AVX512", True, False, torch.bfloat16),   # e.g. AMD Zen 4, Intel Cooper Lake
    ("AVX512", False, True, torch.bfloat16),   # Intel Sapphire Rapids and later
    ("AVX512", False, False, None),            # plain AVX-512: fp32
    ("AVX2", False, False, None),              # AVX2 only: fp32
    ("AVX2", True, False, None),               # kernels capped at AVX2 (scripts/avx2.sh): fp32, as on such a CPU
])
def test_auto_picks_bf16_only_on_a_cpu_with_native_bf16(monkeypatch, capability, avx512_bf16, amx, expected):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert autocast_dtype("auto", CPU) == expected
    assert autocast_dtype("fp32", CPU) is None and autocast_dtype("bf16", CPU) == torch.bfloat16


def test_auto_is_fp32_when_torch_cannot_say(monkeypatch):
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    assert autocast_dtype("auto", CPU) is None
