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
