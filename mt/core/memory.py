"""How the process gets memory for tensors: set at start, before torch allocates (no torch import here, so that
`mt --help` stays quick)."""

import os


def use_huge_pages() -> None:
    """Let torch's CPU allocator back tensors of 2 MiB or more with transparent huge pages (THP_MEM_ALLOC_ENABLE,
    from torch's CPU performance tuning guide; off in torch by default because memory use grows slightly).

    torch's CPU allocator keeps no freed memory, so each large tensor of a step (activations, the logits [N,V]) is
    fresh memory that the kernel zero-fills on first touch, with a page fault per page: one per 2 MiB huge page
    instead of one per 4 KiB page. Needs the kernel's transparent_hugepage at madvise or always
    (the usual defaults); with never, nothing changes. A THP_MEM_ALLOC_ENABLE the user set wins.
    """
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


def bound_kernel_cache() -> None:
    """Keep at most 64 of oneDNN's compiled products (ONEDNN_PRIMITIVE_CACHE_CAPACITY; oneDNN's default: 1,024).

    bf16 training on a CPU multiplies through oneDNN, which compiles and keeps a kernel, with its working memory,
    for each shape of product; every batch brings new shapes (its sentences and their lengths), so the process grows
    with the shapes seen. Keeping 64 bounds that at no loss of speed on the quick-start (docs/benchmarks.md). An
    ONEDNN_PRIMITIVE_CACHE_CAPACITY the user set wins.
    """
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")
