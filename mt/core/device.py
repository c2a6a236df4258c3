"""train.device / --device (auto, cpu, cuda) → torch.device, with a clear error when CUDA is asked for but absent;
and whether the device has native bf16, or decodes faster in int8."""

import platform

import torch

from mt.core.errors import MtError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise MtError("--device cuda: CUDA is not available on this machine (use --device cpu or auto)")
    return torch.device(name)


def has_native_bf16(device: torch.device) -> bool:
    """Whether the device multiplies bf16 matrices in hardware (train.precision auto then picks bf16): a CUDA GPU
    that supports it, or an x86 CPU with AVX512-BF16 or AMX (Intel Cooper Lake, Sapphire Rapids and later; AMD
    Zen 4 and later), where oneDNN's bf16 products outrun its fp32 ones. Elsewhere bf16 would be emulated and
    slower than fp32. torch reads the CPU's flags through private functions, so their absence means no. A CPU whose
    torch kernels are capped below AVX-512 (ATEN_CPU_CAPABILITY=avx2, as scripts/avx2.sh sets) counts as one
    without: it is how such a CPU is imitated on one that has bf16."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return (device.type == "cpu" and torch.backends.cpu.get_cpu_capability() == "AVX512"
            and _cpu_has("_is_avx512_bf16_supported", "_is_amx_tile_supported"))


def int8_decodes_faster(device: torch.device) -> bool:
    """Whether CTranslate2 decodes faster in int8 than in float32 here. On an Intel CPU it multiplies with Intel's
    MKL, whose int8 pays where the CPU multiplies 8-bit integers in hardware (VNNI: AVX512-VNNI or AVX-VNNI,
    Cascade Lake and Alder Lake on). On AMD's CPUs it multiplies with oneDNN, whose int8 products are slower than its
    float32 ones on CPUs with AVX-512 (Zen 4 on, VNNI or not) and faster on those that stop at AVX2 (Zen 2); figures:
    docs/benchmarks.md."""
    if device.type != "cpu":
        return False
    vendor = cpu_vendor()  # read from /proc/cpuinfo: once
    if vendor == "GenuineIntel":
        return _cpu_has("_is_vnni_supported")
    return vendor == "AuthenticAMD" and _cpu_has("_is_avx2_supported") and not _cpu_has("_is_avx512_supported")


def cpu_vendor() -> str:
    """The CPU's vendor string as cpuid gives it (GenuineIntel, AuthenticAMD, …), read from Linux's /proc/cpuinfo
    or the platform's processor name; "" when neither says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return next((v for v in ("GenuineIntel", "AuthenticAMD") if v in platform.processor()), "")


def _cpu_has(*checks: str) -> bool:
    """Whether any of torch.cpu's private flag checks says yes; one this torch lacks says no."""
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)
