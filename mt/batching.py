"""Batching: ragged id lists → padded tensors with their masks, and length-sorted token-budget batches.

Shared by training (mt.data) and translation, which needs it without loading `datasets`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mt.model import make_pad_mask, make_tgt_mask
from mt.tokenizer import PAD


@dataclass
class Batch:
    """A padded batch for teacher forcing: the decoder reads `tgt_input` and must predict `tgt_label`."""

    src: Tensor        # [B, S]
    tgt_input: Tensor  # [B, T]   tgt[:, :-1]: BOS w1 … wn
    tgt_label: Tensor  # [B, T]   tgt[:, 1:]:  w1 … wn EOS
    src_mask: Tensor   # [B, 1, 1, S]
    tgt_mask: Tensor   # [B, 1, T, T]

    @property
    def num_tokens(self) -> int:
        """Target tokens that count in the loss (PAD excluded)."""
        return int((self.tgt_label != PAD).sum())

    def to(self, device: torch.device) -> Batch:
        return Batch(*(t.to(device, non_blocking=True) for t in self._tensors()))

    def pin_memory(self) -> Batch:
        """Page-locked copies, so that the copy to a GPU overlaps compute (DataLoader calls this)."""
        return Batch(*(t.pin_memory() for t in self._tensors()))

    def _tensors(self) -> list[Tensor]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]


def pad_ids(sequences: list[list[int]]) -> Tensor:
    """Ragged ids → [B, L_max], right-padded with PAD."""
    out = torch.full((len(sequences), max(len(s) for s in sequences)), PAD, dtype=torch.long)
    for row, seq in enumerate(sequences):
        out[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def make_batch(src_ids: list[list[int]], tgt_ids: list[list[int]]) -> Batch:
    src, tgt = pad_ids(src_ids), pad_ids(tgt_ids)
    tgt_input, tgt_label = tgt[:, :-1], tgt[:, 1:]
    return Batch(src, tgt_input, tgt_label, make_pad_mask(src, PAD), make_tgt_mask(tgt_input, PAD))


def token_batches(src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int,
                  rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Group pair indices into batches of at most `max_tokens` padded tokens per side.

    Pairs are sorted by length so that a batch holds similar lengths (little padding); with `rng`, ties are
    broken at random and the batch order is shuffled, so each epoch differs while padding stays low.
    """
    size = np.maximum(src_len, tgt_len)
    tiebreak = rng.permutation(len(size)) if rng is not None else np.arange(len(size))
    order = np.lexsort((tiebreak, size))  # by length, then by the tiebreak
    batches, start, longest = [], 0, 0
    for pos, index in enumerate(order):
        longest = max(longest, size[index])
        if pos > start and (pos - start + 1) * longest > max_tokens:  # a longer pair alone still fits
            batches.append(order[start:pos])
            start, longest = pos, size[index]
    batches.append(order[start:])
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches
