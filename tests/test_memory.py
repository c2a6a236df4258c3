"""use_huge_pages: a large tensor costs a few page faults instead of one per 4 KiB page; bound_kernel_cache: bf16
products of many shapes keep less memory; a user's setting stays."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mt.core.device import has_native_bf16
from mt.core.memory import bound_kernel_cache, use_huge_pages

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
MEASURE = """
import resource, sys
from mt.core.memory import use_huge_pages
if sys.argv[1] == "huge":
    use_huge_pages()
import torch
faults = []
for _ in range(3):  # 64 MiB, the size of a batch's bf16 logits: allocated, written, freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.ones(16 * 2 ** 20)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(faults[-1])
"""


@pytest.mark.skipif(not THP.exists() or "[madvise]" not in THP.read_text(),
                    reason="transparent huge pages are not on request here (never, or always for every mapping)")
def test_a_large_tensor_takes_few_page_faults(monkeypatch):
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)

    def faults(mode: str) -> int:
        return int(subprocess.run([sys.executable, "-c", MEASURE, mode], capture_output=True, text=True,
                                  check=True).stdout)
    pages = 64 * 2 ** 20 // 4096
    assert faults("default") > pages // 2  # every 4 KiB page faults
    assert faults("huge") < pages // 10


@pytest.mark.parametrize("setting, variable, ours, theirs", [
    (use_huge_pages, "THP_MEM_ALLOC_ENABLE", "1", "0"),
    (bound_kernel_cache, "ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64", "1024"),
])
def test_a_users_own_setting_wins(monkeypatch, setting, variable, ours, theirs):
    monkeypatch.setenv(variable, theirs)
    setting()
    assert os.environ[variable] == theirs
    monkeypatch.delenv(variable)
    setting()
    assert os.environ[variable] == ours


SHAPES = """
import re, sys
from mt.core.memory import bound_kernel_cache
if sys.argv[1] == "bound":
    bound_kernel_cache()
import torch
torch.set_num_threads(2)
weight = torch.randn(1024, 256, requires_grad=True)
for rows in range(8, 308):  # 300 shapes of product, as training's batches bring
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = torch.randn(rows, 256) @ weight.t()
    out.float().sum().backward()
# VmHWM is this process's own peak; getrusage's ru_maxrss would carry over the test process's peak through exec
print(int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) // 1024)
"""


@pytest.mark.skipif(not has_native_bf16(torch.device("cpu")), reason="bf16 products go through oneDNN's kernels "
                    "only on a CPU with native bf16")
def test_bf16_products_of_many_shapes_keep_less_memory_with_the_kernel_cache_bounded(monkeypatch):
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)

    def peak_mb(mode: str) -> int:
        return int(subprocess.run([sys.executable, "-c", SHAPES, mode], capture_output=True, text=True,
                                  check=True).stdout)
    assert peak_mb("bound") < peak_mb("default") - 50
