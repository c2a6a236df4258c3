"""Dropout (section 5.4: on each sub-layer's output and on the embedding sums), with a cheaper mask on the CPU.

Each element is kept with probability 1−p and scaled by 1/(1−p), so that its expected value is unchanged.
torch's CPU dropout draws one random number per element, on one thread, which makes it one of the larger costs
of a training step on a CPU. Here one 64-bit draw gives four 16-bit numbers, each compared with a threshold: the
same Bernoulli mask, p rounded to a multiple of 1/65536, for a quarter of the random draws (docs/benchmarks.md
has the measurements). On a GPU torch's fused kernel is already cheap and is used as it is.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

LEVELS = 2 ** 16  # values of one 16-bit random number


def dropout_mask(shape: torch.Size, p: float, dtype: torch.dtype) -> Tensor:
    """A mask of `shape` in `dtype`: 0 with probability round(p·65536)/65536, else 1/(1 − that probability).

    Uses torch's default CPU generator, so torch.manual_seed makes it repeatable.
    """
    count = shape.numel()
    dropped = round(p * LEVELS)
    words = torch.empty((count + 3) // 4, dtype=torch.int64).random_(-2 ** 63, None)  # every bit random
    uniform = words.view(torch.int16)[:count].view(shape)  # uniform over [-32768, 32767]
    keep = uniform >= dropped - LEVELS // 2                  # False for `dropped` of the 65536 values
    return keep.to(dtype).mul_(LEVELS / (LEVELS - dropped))


class Dropout(nn.Dropout):
    """nn.Dropout (x·mask while training, x itself in eval mode), with the cheaper mask on the CPU. [*] → [*]."""

    def forward(self, x: Tensor) -> Tensor:
        if self.training and self.p > 0 and x.device.type == "cpu":
            return x * dropout_mask(x.shape, self.p, x.dtype)  # autograd keeps the mask for the backward pass
        return super().forward(x)
