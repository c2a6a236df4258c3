"""use_huge_pages: a large tensor costs a few page faults instead of one per 4 KiB page; a user's setting stays."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mt.core.memory import use_huge_pages

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



def test_a_users_own_setting_wins(monkeypatch):
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "0")
    use_huge_pages()
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "0"
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE")
    use_huge_pages()
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
