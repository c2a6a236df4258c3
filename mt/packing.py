"""Faster decoding on CPU: the decoder's weight matrices, packed into MKL's GEMM layout for a search's steps.

A decoding step multiplies a few rows (one per sentence, or per beam) by every weight matrix. At that size a
plain matrix product spends much of its time re-arranging the weight into the layout its kernel reads. MKL can
keep a weight in that layout (cblas_sgemm_pack) for products with a given number of rows M
(cblas_sgemm_compute); PyTorch exposes the pair as torch.ops.mkl._mkl_reorder_linear_weight and _mkl_linear,
which its compiler uses for frozen CPU models. An input with another number of rows takes the plain product.

On this project's 2-core CPU, for the shapes of d_model 256 and 512 models, packed products of 8 to 64 rows
took 1.1–2.4× less time than plain ones; of 1 row, up to 1.6× more; of 128 or more, 1.0–1.3× less, which does
not pay for a packed copy of every weight. So only steps of ROWS rows are packed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from weakref import WeakKeyDictionary

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Linear(nn.Linear):
    """nn.Linear, which a search may give a packed copy of its weight for inputs of `rows` rows."""

    packed: tuple[int, Tensor] | None = None  # (rows, the weight in MKL's packed layout) during a search

    def forward(self, x: Tensor) -> Tensor:
        if self.packed is None:
            return F.linear(x, self.weight, self.bias)
        rows, weight = self.packed
        return torch.ops.mkl._mkl_linear(x, weight, self.weight, self.bias, rows)  # plain product if rows differ


def can_pack(weight: Tensor) -> bool:
    """MKL's packed product exists for fp32 weights on the CPU in PyTorch builds with MKL."""
    return (weight.device.type == "cpu" and weight.dtype == torch.float32 and torch.backends.mkl.is_available()
            and hasattr(torch.ops.mkl, "_mkl_linear"))


ROWS = range(8, 65)  # the step sizes that are packed
_kept: WeakKeyDictionary[Linear, tuple[int, tuple[int, int], Tensor]] = WeakKeyDictionary()  # between searches


@contextmanager
def packed_weights(modules: list[nn.Module], rows: int) -> Iterator[None]:
    """Within the block, every Linear in `modules` multiplies by its packed weight, if it has one for `rows`.

    A weight is packed once, for the first step size in ROWS that a search brings, and kept until the weight
    changes. Packing it again for each new batch size cost more memory: over 500 news sentences in batches of
    varying size, the peak grew by 100–150 MB instead of about 80. The block must not change the weights.
    """
    linears = [m for module in modules for m in module.modules()
               if isinstance(m, Linear) and can_pack(m.weight) and rows in ROWS]
    try:
        for linear in linears:
            linear.packed = _pack(linear, rows)
        yield
    finally:
        for linear in linears:
            linear.packed = None


def _pack(linear: Linear, rows: int) -> tuple[int, Tensor]:
    """linear's packed weight and the rows it is for: the kept one, unless the weight changed since."""
    weight = (linear.weight.data_ptr(), linear.weight._version)  # an optimiser step bumps _version
    if linear not in _kept or _kept[linear][1] != weight:
        _kept.pop(linear, None)  # free the old one first
        _kept[linear] = (rows, weight, torch.ops.mkl._mkl_reorder_linear_weight(linear.weight.detach(), rows))
    kept_rows, _, packed = _kept[linear]
    return kept_rows, packed
