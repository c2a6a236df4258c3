"""The training loss (section 5.4): cross entropy against label-smoothed targets, summed over non-PAD tokens.

With smoothing ε the target gives 1−ε to the reference token and ε/V to every token, as torch's
CrossEntropyLoss(label_smoothing=ε) does, so for one token's logits z [V] with lse = log Σ exp(z):

    loss = (1−ε)·(lse − z[ref]) + ε·(lse − mean(z))
    ∂loss/∂z = softmax(z) − ε/V − (1−ε)·onehot(ref)

torch computes this through log_softmax, which on a CPU writes and reads several fp32 tensors as large as the
logits [N,V], the largest tensor of a training step (in bf16 it first copies them to fp32). Here the same numbers
are computed in blocks of rows small enough to stay in the processor's cache, in fp32, and the backward pass keeps
only the logits and each row's lse. It writes the gradient over the logits, which nothing reads after the loss: a
step allocates no second tensor of their size, the largest of the step, whose first writing into fresh memory (page
faults, the kernel zero-filling it) takes longer than computing the gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

# fp32 logits per block: 1 MiB, within a core's L2 cache, and below the 2 MiB from which torch backs a tensor
# with fresh huge pages (mt/core/memory.py), which the kernel would zero again for every block.
BLOCK_BYTES = 2 ** 20


class SmoothedCrossEntropy(nn.Module):
    """logits [N,V] (fp32 or bf16), target [N] → the loss summed over targets ≠ ignore_index (fp32 scalar).
    Its backward pass overwrites the logits with their gradient."""

    def __init__(self, ignore_index: int, label_smoothing: float):
        super().__init__()
        self.ignore_index, self.smoothing = ignore_index, label_smoothing

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return _SmoothedCrossEntropy.apply(logits, target, self.ignore_index, self.smoothing)


def _blocks(*tensors: Tensor) -> zip:
    """The same rows of each tensor, a block at a time."""
    rows = max(1, BLOCK_BYTES // (4 * tensors[0].size(-1)))
    return zip(*(t.split(rows) for t in tensors))


class _SmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, ignore_index: int, smoothing: float) -> Tensor:
        total = torch.zeros((), device=logits.device)
        lse = torch.empty(logits.size(0), device=logits.device)                # [N]
        for z, ref, lse_part in _blocks(logits, target, lse):
            z = z.float()                                                       # [n,V]
            torch.logsumexp(z, dim=-1, out=lse_part)
            nll = lse_part - z.gather(1, ref[:, None]).squeeze(1)               # [n]
            uniform = lse_part - z.mean(dim=-1)                                 # [n]
            per_token = (1 - smoothing) * nll + smoothing * uniform
            total += per_token.masked_fill(ref == ignore_index, 0).sum()
        ctx.save_for_backward(logits, target, lse)
        ctx.ignore_index, ctx.smoothing = ignore_index, smoothing
        return total

    @staticmethod
    def backward(ctx, grad_total: Tensor) -> tuple[Tensor, None, None, None]:
        logits, target, lse = ctx.saved_tensors
        smoothing, vocab = ctx.smoothing, logits.size(-1)
        for z, ref, lse_part in _blocks(logits, target, lse):
            g = z.float()                                                       # fp32: z itself; bf16: a copy
            g.sub_(lse_part[:, None]).exp_().sub_(smoothing / vocab)            # softmax − ε/V  [n,V]
            g.scatter_add_(1, ref[:, None], g.new_full((len(ref), 1), smoothing - 1))
            weight = (ref != ctx.ignore_index) * grad_total                     # [n]: 0 for PAD
            g.mul_(weight[:, None])
            if g is not z:  # bf16 logits: the fp32 block back into their place
                z.copy_(g)
        return logits, None, None, None
