"""OpenMP threads that keep spinning: CTranslate2 loaded before torch, and a thread that only prepares work starting
no thread team (no torch import at the top, so that `mt --help` stays quick)."""

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def load_ctranslate2_first() -> None:
    """Import CTranslate2, when it is installed and torch is not imported yet, so that it keeps its own OpenMP
    runtime.

    torch puts its libgomp into the process's global symbol scope. A CTranslate2 loaded after it calls torch's libgomp
    instead of its own, and then torch's thread team (the main thread's) and CTranslate2's (its translator thread's)
    count together: with more threads than cores, libgomp no longer spins between parallel regions but puts its
    threads to sleep and wakes them for every region, which halves CTranslate2's decoding speed on a small CPU
    (figures: docs/benchmarks.md). Loaded first, CTranslate2 binds to its own libgomp. A program that imported torch
    already gets nothing from this: it should import ctranslate2 first itself."""
    if "torch" not in sys.modules and "ctranslate2" not in sys.modules and importlib.util.find_spec("ctranslate2"):
        importlib.import_module("ctranslate2")


@contextmanager
def without_a_thread_team() -> Iterator[None]:
    """torch's work inside runs on this thread alone: it starts no OpenMP thread team here. For a thread that
    prepares work (loads a model) for another that computes (`mt serve`'s worker): libgomp counts every thread's
    team together, and with more threads than cores it stops spinning between parallel regions, putting its threads
    to sleep and waking them for each region, which slows the computing thread's decoding (figures:
    docs/serving.md)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
