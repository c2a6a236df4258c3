"""OpenMP threads that keep spinning: CTranslate2 loaded before torch, and a thread that only prepares work starting
no thread team; work shared out among threads that split torch's threads between them (no torch import at the top,
so that `mt --help` stays quick)."""

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

Item, Result = TypeVar("Item"), TypeVar("Result")


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


def map_in_threads(function: Callable[[Item], Result], items: Iterable[Item], workers: int) -> list[Result]:
    """[function(item) for item in items], by `workers` threads at once, each running torch's work on its share of
    torch's threads (at least one). torch's operations let go of Python's lock while they compute, so two threads
    of one thread each keep both cores of a small CPU busy where one thread of two leaves them waiting on each
    other between small products."""
    if workers <= 1:
        return [function(item) for item in items]
    import torch

    threads = torch.get_num_threads()
    try:
        with ThreadPoolExecutor(workers, thread_name_prefix="mt-batch", initializer=torch.set_num_threads,
                                initargs=(max(1, threads // workers),)) as pool:
            return list(pool.map(function, items))
    finally:
        torch.set_num_threads(threads)  # also the count that new threads and MKL start from, which the workers set
