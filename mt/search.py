"""Decoding: from source ids to output ids. Greedy search here; it re-runs the decoder over the whole
prefix at each step (no cache yet), so it is the reference that a cached or beam search must match."""

from __future__ import annotations

import torch
from torch import Tensor

from mt.model import Transformer, make_pad_mask, make_tgt_mask
from mt.tokenizer import BOS, EOS, PAD


@torch.no_grad()
def greedy_search(model: Transformer, src: Tensor, max_len: Tensor) -> list[list[int]]:
    """src [B,S] padded ids, max_len [B] output budget per sentence → output ids per sentence (no BOS/EOS)."""
    src_mask = make_pad_mask(src, PAD)                        # [B,1,1,S]
    memory = model.encode(src, src_mask)                      # [B,S,D]
    batch = src.size(0)
    ys = torch.full((batch, 1), BOS, dtype=torch.long, device=src.device)   # [B, t]
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    for step in range(int(max_len.max())):
        hidden, _ = model.decode(ys, memory, src_mask, make_tgt_mask(ys, PAD))
        next_token = model.generator(hidden[:, -1]).argmax(dim=-1)          # [B]
        next_token = next_token.masked_fill(finished, PAD)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        finished |= (next_token == EOS) | (step + 1 >= max_len)
        if finished.all():
            break
    return [_strip(row) for row in ys[:, 1:].tolist()]


def _strip(ids: list[int]) -> list[int]:
    """Cut at the first EOS and drop padding."""
    if EOS in ids:
        ids = ids[:ids.index(EOS)]
    return [i for i in ids if i != PAD]
