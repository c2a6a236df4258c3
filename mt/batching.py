"""Batching: ragged id lists → padded tensors with their masks, and length-sorted token-budget batches.

Shared by training (mt.data) and translation, which needs it without loading `datasets`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mt.model import make_pad_mask, make_tgt_mask
from mt.tokenizer import BOS, EOS, PAD


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


def pad_ids(sequences: list[list[int]], width: int = 0) -> Tensor:
    """Ragged ids → [B, width or L_max], right-padded with PAD."""
    out = torch.full((len(sequences), width or max(len(s) for s in sequences)), PAD, dtype=torch.long)
    for row, seq in enumerate(sequences):
        out[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def make_batch(src_ids: list[list[int]], tgt_ids: list[list[int]], shape: tuple[int, int] | None = None) -> Batch:
    """Pairs → a Batch as long as its longest pair; or, with shape (rows, L), exactly rows × L on each side.

    To fill a shape, the rows past the pairs get a source of one EOS and a target of BOS alone: no label to
    predict, so they add nothing to the loss or its gradient; and no row is all PAD, which written-out attention
    (a softmax over nothing but −∞) would turn into NaN.
    """
    rows, length = shape or (len(src_ids), 0)  # length 0: as long as the longest pair
    filler = rows - len(src_ids)
    src = pad_ids(src_ids + [[EOS]] * filler, length)                # [B, S]
    tgt = pad_ids(tgt_ids + [[BOS]] * filler, length + 1 if length else 0)  # [B, T + 1]
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
    return _shuffled(batches, rng)


def bucket_batches(src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int, buckets: Sequence[int],
                   rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Group pair indices into batches of a few fixed shapes, so that a compiled model meets only those shapes.

    A pair goes to the shortest bucket L that holds its source and its decoder input; a batch of bucket L holds
    max_tokens // L pairs, padded by `make_batch(..., bucket_shape(...))` to L positions per side. Only each
    bucket's last batch is short of pairs; it is filled with empty rows.
    """
    bucket = np.searchsorted(buckets, _positions(src_len, tgt_len))  # the shortest L ≥ the pair's positions
    order = rng.permutation(len(bucket)) if rng is not None else np.arange(len(bucket))
    batches = []
    for index, length in enumerate(buckets):
        members, rows = order[bucket[order] == index], max_tokens // length
        batches += [members[start:start + rows] for start in range(0, len(members), rows)]
    return _shuffled(batches, rng)


def bucket_shape(src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int, buckets: Sequence[int]) -> tuple[int, int]:
    """(rows, L): the fixed shape of the bucket that a batch of pairs with these lengths belongs to."""
    length = buckets[int(np.searchsorted(buckets, _positions(src_len, tgt_len).max()))]
    return max_tokens // length, length


def _positions(src_len: np.ndarray, tgt_len: np.ndarray) -> np.ndarray:
    """Positions a pair needs on each side: its source, and its decoder input (the target without EOS)."""
    return np.maximum(src_len, tgt_len - 1)


def _shuffled(batches: list[np.ndarray], rng: np.random.Generator | None) -> list[np.ndarray]:
    """The batches in a random order (each epoch differs), or as they are without `rng`."""
    return batches if rng is None else [batches[i] for i in rng.permutation(len(batches))]
