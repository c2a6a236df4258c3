"""Faster decoding on the CPU: a search's matrix products by weights kept in a BLAS library's own layout.

A decoding step multiplies a few rows (one per sentence, or per beam) by every weight matrix of the model. At that
size a plain product spends much of its time re-arranging the weight into the layout its kernel reads. Two
libraries in PyTorch's CPU builds can keep a weight in that layout, and PyTorch's own compiler uses both for frozen
CPU models:

- oneDNN, for products with any number of rows: torch.ops.mkldnn._reorder_linear_weight, then _linear_pointwise.
  Chosen on CPUs other than Intel's, where MKL (behind PyTorch's plain fp32 products) does not run its fastest
  kernels, and oneDNN's products by a reordered weight take a fraction of the plain ones' time.
- MKL, for products with a given number of rows M (cblas_sgemm_pack, then cblas_sgemm_compute):
  torch.ops.mkl._mkl_reorder_linear_weight, then _mkl_linear; an input with another number of rows gets the plain
  product. Chosen on Intel's CPUs, for step sizes in MKL_ROWS, where it paid on the CPUs measured.

Both give a model's outputs to float32 rounding (docs/benchmarks.md). On a CPU with bf16 products in hardware
(AVX512-BF16 or AMX), oneDNN can also keep a weight in bf16 (--compute-type bfloat16): each product then reads its
input rounded to bf16 and gives its bf16 result widened to float32, in less time the more rows a step has; all else
(attention, norms, the search's scores) stays float32. The model knows nothing of this:
`PackedWeights.applied` gives the chosen nn.Linear modules a packed forward for the duration of a block, on those
module instances only, and takes it away after.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal
from weakref import WeakKeyDictionary

import torch
from torch import Tensor, nn

from mt.core.device import cpu_vendor

Library = Literal["onednn", "mkl", "none"]
MKL_ROWS = range(8, 65)  # the step sizes that MKL packs


def best_library() -> Library:
    """The library that packs weights on this machine: MKL on Intel's CPUs, oneDNN on the others."""
    mkl = torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")
    vendor = cpu_vendor()
    if vendor == "GenuineIntel" and mkl:
        return "mkl"
    if vendor and torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return "onednn"
    return "mkl" if mkl else "none"


def _onednn_forward(linear: nn.Linear, rows: int | None, packed: Tensor, x: Tensor) -> Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, linear.bias, "none", [], "")  # any number of rows


def _onednn_bf16_forward(bias: Tensor | None, packed: Tensor, x: Tensor) -> Tensor:
    return torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), packed, bias, "none", [], "").float()


def _mkl_forward(linear: nn.Linear, rows: int, packed: Tensor, x: Tensor) -> Tensor:
    return torch.ops.mkl._mkl_linear(x, packed, linear.weight, linear.bias, rows)  # plain product if rows differ


# Each layout's (weight, rows) → packed weight (PackedWeights.kind)
REORDER = {"onednn": lambda weight, rows: torch.ops.mkldnn._reorder_linear_weight(weight, None),
           "mkl": lambda weight, rows: torch.ops.mkl._mkl_reorder_linear_weight(weight, rows),
           "onednn_bf16": lambda weight, rows: torch.ops.mkldnn._reorder_linear_weight(weight.bfloat16(), None)}


class PackedWeights:
    """Packed copies of some nn.Linear weights, kept by their owner (a translator) from one search to the next.

    A weight is packed once (by MKL: for the first step size in MKL_ROWS that a search brings) and packed again only
    when the weight changes: one packed copy per weight, however the batch sizes vary.
    """

    def __init__(self, library: Library | None = None, dtype: torch.dtype = torch.float32):
        self.library = best_library() if library is None else library
        self.dtype = dtype  # bf16: products by bf16 weights, which oneDNN alone keeps
        if dtype == torch.bfloat16:
            self.library = "onednn"
        self._kept: WeakKeyDictionary[nn.Linear, tuple[int | None, tuple[int, int], Tensor]] = WeakKeyDictionary()
        self._blocks: dict[nn.Linear, int] = {}  # each packed module: the blocks it is in, in any thread
        self._lock = threading.Lock()

    @contextmanager
    def applied(self, modules: list[nn.Module], rows: int | None) -> Iterator[None]:
        """Within the block, every packable fp32 CPU nn.Linear in `modules` multiplies by its packed weight (in bf16
        with dtype bf16): any input with oneDNN, inputs of `rows` rows with MKL (None: the block's products have no
        one size, and MKL packs none). The block must not change the weights. Blocks of several threads may share
        modules: the first to come packs them, the last to leave unpacks them."""
        linears = [m for module in modules for m in module.modules() if isinstance(m, nn.Linear)
                   and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32]
        if self.library == "none" or (self.library == "mkl" and rows not in MKL_ROWS):
            linears = []
        entered = []
        try:
            with self._lock:
                for linear in linears:  # an instance attribute, which nn.Module's __call__ finds before the class's
                    if not self._blocks.get(linear):
                        linear.forward = self._forward(linear, rows)
                    self._blocks[linear] = self._blocks.get(linear, 0) + 1
                    entered.append(linear)
            yield
        finally:
            with self._lock:
                for linear in entered:
                    self._blocks[linear] -= 1
                    if not self._blocks[linear]:
                        del self._blocks[linear]
                        linear.__dict__.pop("forward", None)

    def _forward(self, linear: nn.Linear, rows: int | None) -> functools.partial:
        """linear's packed product, with the kept packed weight unless the weight changed since."""
        weight = (linear.weight.data_ptr(), linear.weight._version)  # an optimiser step bumps _version
        if linear not in self._kept or self._kept[linear][1] != weight:
            self._kept.pop(linear, None)  # free the old one first
            self._kept[linear] = (rows, weight, REORDER[self.kind](linear.weight.detach(), rows))
        kept_rows, _, packed = self._kept[linear]
        if self.kind == "onednn_bf16":
            bias = None if linear.bias is None else linear.bias.detach().bfloat16()
            return functools.partial(_onednn_bf16_forward, bias, packed)
        forward = {"onednn": _onednn_forward, "mkl": _mkl_forward}[self.library]  # (linear, rows, packed, x)
        return functools.partial(forward, linear, kept_rows, packed)

    @property
    def kind(self) -> str:
        """The layout weights are kept in: the library's, in bf16 for oneDNN with dtype bf16."""
        return "onednn_bf16" if self.dtype == torch.bfloat16 else self.library
