"""Faster decoding on the CPU: a search's small matrix products by weights packed into MKL's GEMM layout.

A decoding step multiplies a few rows (one per sentence, or per beam) by every weight matrix of the decoder. At
that size a plain product spends much of its time re-arranging the weight into the layout its kernel reads.
MKL can keep a weight in that layout for products with a given number of rows M (cblas_sgemm_pack, then
cblas_sgemm_compute); PyTorch exposes the pair as torch.ops.mkl._mkl_reorder_linear_weight and _mkl_linear, which
its own compiler uses for frozen CPU models. An input with another number of rows gets the plain product.

The model knows nothing of this: `PackedWeights.applied` gives the chosen nn.Linear modules a packed forward
for the duration of a block, on those module instances only, and takes it away after. ROWS are the step sizes
where packing paid on the CPUs measured (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from weakref import WeakKeyDictionary

import torch
from torch import Tensor, nn

ROWS = range(8, 65)  # the step sizes that are packed


def can_pack(weight: Tensor) -> bool:
    """MKL's packed product exists for fp32 weights on the CPU in PyTorch builds with MKL."""
    return (weight.device.type == "cpu" and weight.dtype == torch.float32 and torch.backends.mkl.is_available()
            and hasattr(torch.ops.mkl, "_mkl_linear"))


def _packed_forward(linear: nn.Linear, rows: int, packed: Tensor, x: Tensor) -> Tensor:
    return torch.ops.mkl._mkl_linear(x, packed, linear.weight, linear.bias, rows)  # plain product if rows differ


class PackedWeights:
    """Packed copies of some nn.Linear weights, kept by their owner (a translator) from one search to the next.

    A weight is packed once, for the first step size in ROWS that a search brings, and packed again only when
    the weight changes: one packed copy per weight, however the batch sizes vary.
    """

    def __init__(self):
        self._kept: WeakKeyDictionary[nn.Linear, tuple[int, tuple[int, int], Tensor]] = WeakKeyDictionary()

    @contextmanager
    def applied(self, modules: list[nn.Module], rows: int) -> Iterator[None]:
        """Within the block, every packable nn.Linear in `modules` multiplies inputs of `rows` rows by its packed
        weight (when it was packed for that size). The block must not change the weights."""
        linears = [m for module in modules for m in module.modules()
                   if isinstance(m, nn.Linear) and can_pack(m.weight)] if rows in ROWS else []
        try:
            for linear in linears:  # an instance attribute, which nn.Module's __call__ finds before the class's
                linear.forward = functools.partial(_packed_forward, linear, *self._packed(linear, rows))
            yield
        finally:
            for linear in linears:
                linear.__dict__.pop("forward", None)

    def _packed(self, linear: nn.Linear, rows: int) -> tuple[int, Tensor]:
        """linear's packed weight and the rows it is for: the kept one, unless the weight changed since."""
        weight = (linear.weight.data_ptr(), linear.weight._version)  # an optimiser step bumps _version
        if linear not in self._kept or self._kept[linear][1] != weight:
            self._kept.pop(linear, None)  # free the old one first
            packed = torch.ops.mkl._mkl_reorder_linear_weight(linear.weight.detach(), rows)
            self._kept[linear] = (rows, weight, packed)
        kept_rows, _, packed = self._kept[linear]
        return kept_rows, packed
