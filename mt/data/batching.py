"""Batching: ragged id lists → padded tensors, grouped into length-sorted token-budget batches.

Shared by training and translation, which needs it without loading `datasets`. The model builds its masks from
the padded ids itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mt.data.tokenizer import BOS, EOS, PAD


@dataclass
class Batch:
    """A padded batch for teacher forcing: the decoder reads `tgt_input` and must predict `tgt_label`."""

    src: Tensor        # [B, S]
    tgt_input: Tensor  # [B, T]   tgt[:, :-1]: BOS w1 … wn
    tgt_label: Tensor  # [B, T]   tgt[:, 1:]:  w1 … wn EOS

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
    return Batch(src, tgt_input, tgt_label)


def source_batches(src_ids: list[list[int]], max_tokens: int, shares: int = 1) -> list[list[int]]:
    """Indices of sources (ids), sorted by length into batches of at most `max_tokens` padded tokens; with
    `shares`, a batch also ends once it holds that fraction of all the source tokens, so that as many threads
    searching the batches at once get about equal work."""
    lengths = np.array([len(ids) for ids in src_ids], dtype=np.int64)
    if not len(lengths):
        return []
    share = -(-int(lengths.sum()) // shares)
    return [batch.tolist() for batch in token_batches(lengths, lengths, max_tokens, share=share)]


def token_batches(src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int,
                  rng: np.random.Generator | None = None, share: int = 0) -> list[np.ndarray]:
    """Group pair indices into batches of at most `max_tokens` padded tokens per side (and, with `share`, of
    source tokens up to the pair that reaches `share`).

    Pairs are sorted by source length, then by target length, so that a batch holds pairs of one source length
    and close target lengths: little padding on either side. With `rng`, ties are broken at random and the
    batch order is shuffled, so each epoch differs while padding stays low.
    """
    size = np.maximum(src_len, tgt_len)
    tiebreak = rng.permutation(len(size)) if rng is not None else np.arange(len(size))
    order = np.lexsort((tiebreak, tgt_len, src_len))  # by source length, then target length, then the tiebreak
    batches, start, longest, held = [], 0, 0, 0
    for pos, index in enumerate(order):
        longest = max(longest, size[index])
        # a longer pair alone still fits
        if pos > start and ((pos - start + 1) * longest > max_tokens or 0 < share <= held):
            batches.append(order[start:pos])
            start, longest, held = pos, size[index], 0
        held += src_len[index]
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


class TrainBatches:
    """Endless training batches, addressed by (epoch, index) so that a resumed run sees the same data order.

    `ids[rows]` reads pairs' `src_ids` and `tgt_ids` (the cached token ids); pair i of an epoch is row rows[i],
    with src_len[rows[i]] and tgt_len[rows[i]] tokens. Without `buckets`, a batch is as long as its longest
    pair; with them, it has its bucket's fixed shape.
    """

    def __init__(self, ids, src_len: np.ndarray, tgt_len: np.ndarray, rows: np.ndarray, max_tokens: int,
                 seed: int, buckets: list[int] | None = None):
        self.ids, self.rows, self.src_len, self.tgt_len = ids, rows, src_len[rows], tgt_len[rows]
        self.max_tokens, self.seed, self.buckets = max_tokens, seed, buckets

    def epoch(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, epoch])
        if self.buckets:
            return bucket_batches(self.src_len, self.tgt_len, self.max_tokens, self.buckets, rng)
        return token_batches(self.src_len, self.tgt_len, self.max_tokens, rng)

    def batch(self, indices: np.ndarray) -> Batch:
        pairs = self.ids[self.rows[indices].tolist()]
        return make_batch(pairs["src_ids"], pairs["tgt_ids"], self._shape(indices))

    def padding_ratio(self, epoch: int = 0) -> float:
        """Share of padded positions (both sides) in the epoch's batches."""
        real = padded = 0
        for indices in self.epoch(epoch):
            real += int(self.src_len[indices].sum() + self.tgt_len[indices].sum())
            if self.buckets:
                rows, length = self._shape(indices)
                padded += rows * (2 * length + 1)  # the target side holds BOS … EOS: L + 1 positions
            else:
                padded += len(indices) * int(self.src_len[indices].max() + self.tgt_len[indices].max())
        return 1.0 - real / padded

    def _shape(self, indices: np.ndarray) -> tuple[int, int] | None:
        if not self.buckets:
            return None
        return bucket_shape(self.src_len[indices], self.tgt_len[indices], self.max_tokens, self.buckets)
