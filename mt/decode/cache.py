"""Incremental decoding: the decoder fed one new token per step, each layer's keys and values kept between steps.

`DecoderCache.step` applies the same boxes as `Transformer.decode` (mt/model/transformer.py), in the same order, to the
newest position only: its self-attention attends to the keys and values of every position before it, kept in
buffers here, and its cross-attention to the memory's keys and values, projected once per sentence. Search
tests check that it gives what decoding the whole prefix again gives.

In beam search the decoder's rows come in groups of `beams` hypotheses of one sentence, and the memory has one
row per sentence: a group's new positions attend to their sentence's memory row together, as `beams` queries,
so the memory is never copied per beam nor reordered with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mt.model.transformer import DecoderLayer, Transformer


@dataclass
class SelfAttentionCache:
    """One decoder layer's self-attention keys and values of the positions decoded so far.

    They live in buffers with room for `capacity` positions, written in place: a step neither copies the past
    nor allocates memory, as torch.cat would at every token. A buffer is laid out [N, capacity, H, d_k], so that
    each row's positions so far are one block of memory: beam search reorders the rows at every step, and copying
    N blocks is faster than copying N·H pieces.
    """

    k: Tensor | None = None  # [N,capacity,H,d_k]: the keys of the `length` positions so far, then room
    v: Tensor | None = None  # [N,capacity,H,d_k]
    length: int = 0
    capacity: int = 64       # positions to make room for at first; doubled when full
    spare: tuple[Tensor, Tensor] | None = None  # buffers of at least N rows that select() writes into, then swaps

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write new keys/values k, v [N,H,n,d_k] after the kept ones → all keys/values [N,H,length,d_k]."""
        end = self.length + k.size(2)
        if self.k is None or end > self.k.size(1):
            self._grow(k, max(end, 2 * self.capacity if self.k is not None else self.capacity))
        self.k[:, self.length:end] = k.transpose(1, 2)
        self.v[:, self.length:end] = v.transpose(1, 2)
        self.length = end
        return self.kept()

    def kept(self) -> tuple[Tensor, Tensor]:
        """The keys and values of the positions so far, [N,H,length,d_k] each (views of the buffers)."""
        return self.k[:, :self.length].transpose(1, 2), self.v[:, :self.length].transpose(1, 2)

    def _grow(self, like: Tensor, capacity: int) -> None:
        rows, heads, _, d_k = like.shape
        k, v = (like.new_empty(rows, capacity, heads, d_k) for _ in range(2))
        if self.k is not None:
            used = slice(0, self.length)
            k[:, used], v[:, used] = self.k[:, used], self.v[:, used]
        self.k, self.v, self.capacity, self.spare = k, v, capacity, None

    def select(self, rows: Tensor) -> None:
        """Keep rows `rows` [N'] of the batch, in that order."""
        if self.k is None:
            return
        if self.spare is None or self.spare[0].size(0) < len(rows):
            self.spare = tuple(self.k.new_empty(len(rows), *self.k.shape[1:]) for _ in range(2))
        # the first N' rows of the spare buffers: as beam search drops finished sentences, no step allocates
        new_k, new_v = (buffer[:len(rows)] for buffer in self.spare)
        used = slice(0, self.length)  # only the positions written so far are copied
        torch.index_select(self.k[:, used], 0, rows, out=new_k[:, used])
        torch.index_select(self.v[:, used], 0, rows, out=new_v[:, used])
        self.spare = (self.k, self.v)
        self.k, self.v = new_k, new_v


class DecoderCache:
    """The decoder's state for incremental decoding of one batch: memory [B,S,D] with src_mask [B,1,1,S], and
    `beams` decoder rows per memory row (1 for greedy search)."""

    def __init__(self, model: Transformer, memory: Tensor, src_mask: Tensor, beams: int, capacity: int):
        self.model, self.src_mask, self.beams = model, src_mask, beams
        layers = model.decoder.layers
        self.cross = [layer.cross_attn.keys_values(memory, memory) for layer in layers]  # [B,H,S,d_k] each, once
        self.self_attention = [SelfAttentionCache(capacity=capacity) for _ in layers]

    @property
    def length(self) -> int:
        """Target positions already decoded (the next token's position)."""
        return self.self_attention[0].length

    def step(self, tokens: Tensor) -> Tensor:
        """The newest token of each row, tokens [N,1] (N = B·beams) → its decoder output [N,1,D]."""
        x = self.model.positions(self.model.tgt_embed(tokens), self.length)
        for layer, kept, (cross_k, cross_v) in zip(self.model.decoder.layers, self.self_attention, self.cross):
            x = self._layer_step(layer, x, kept, cross_k, cross_v)
        return self.model.decoder.final_norm(x)

    def _layer_step(self, layer: DecoderLayer, x: Tensor, kept: SelfAttentionCache, cross_k: Tensor,
                    cross_v: Tensor) -> Tensor:
        """DecoderLayer.forward for the newest position x [N,1,D], with the kept keys and values."""
        def self_attention(y: Tensor) -> Tensor:  # no mask: every position so far is in the past
            k, v = kept.append(*layer.self_attn.keys_values(y, y))
            return layer.self_attn.attend(y, k, v, None)[0]

        def cross_attention(y: Tensor) -> Tensor:  # a sentence's beams [B·K,1,D] as K queries [B,K,D]
            queries = y.reshape(cross_k.size(0), self.beams, y.size(-1))
            return layer.cross_attn.attend(queries, cross_k, cross_v, self.src_mask)[0].view(y.shape)

        x = layer.add_norm_self(x, self_attention)
        x = layer.add_norm_cross(x, cross_attention)
        return layer.add_norm_ff(x, layer.feed_forward)

    def select(self, rows: Tensor, memory_rows: Tensor | None) -> None:
        """Keep decoder rows `rows` [N'] (beam search reorders and prunes hypotheses), and the memory rows
        `memory_rows` [N'/beams] of their sentences (None: all, in the same order)."""
        for kept in self.self_attention:
            kept.select(rows)
        if memory_rows is not None:
            self.cross = [(k.index_select(0, memory_rows), v.index_select(0, memory_rows)) for k, v in self.cross]
            self.src_mask = self.src_mask.index_select(0, memory_rows)
