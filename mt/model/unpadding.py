"""Computing on the tokens of a padded batch alone.

A batch pads its sentences to the longest one, [B,L]. Every box of an encoder or decoder layer but attention
treats each position on its own (the projections, the feed-forward network, Add&Norm, dropout), and so does the
generator, so in training on a CPU they run on the tokens alone, packed into [N,D] with N the batch's tokens, and
skip the work on PAD. Attention alone needs the padded layout: its queries, keys and values are padded again into
[B,L,D], with zeros at PAD, which the masks hide as before. Batches sorted by target length leave much of the
source as padding.
"""

from __future__ import annotations

from torch import Tensor


class Unpadding:
    """The positions of a padded batch that hold tokens: `real` [B,L] bool, True for a token."""

    def __init__(self, real: Tensor):
        self.batch, self.length = real.shape
        self.index = real.flatten().nonzero().squeeze(1)  # [N]: the tokens' rows in the flattened [B·L]

    def unpad(self, x: Tensor) -> Tensor:
        """[B,L,D] → [N,D]"""
        return x.flatten(0, 1).index_select(0, self.index)

    def pad(self, x: Tensor) -> Tensor:
        """[N,D] → [B,L,D], zeros at PAD"""
        padded = x.new_zeros(self.batch * self.length, x.size(-1)).index_copy(0, self.index, x)
        return padded.view(self.batch, self.length, -1)
