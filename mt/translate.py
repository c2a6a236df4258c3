"""Text in, text out: tokenise, sort by length into batches, search, restore the input order, detokenise."""

from __future__ import annotations

import sys

import torch

from mt.config import DecodeConfig
from mt.data import pad_ids
from mt.model import Transformer
from mt.search import greedy_search
from mt.tokenizer import Tokenizer


def translate_lines(model: Transformer, tokenizer: Tokenizer, lines: list[str], decode: DecodeConfig,
                    device: torch.device) -> list[str]:
    """One output line per input line, in input order; an empty input line gives an empty output line."""
    src_ids = tokenizer.encode_src([line.strip() for line in lines])
    limit = model.config.max_positions
    for number, ids in enumerate(src_ids, start=1):
        if len(ids) > limit:  # the position table ends there: keep the start, say so
            print(f"warning: input line {number} has {len(ids)} tokens; translating its first {limit}",
                  file=sys.stderr)
            src_ids[number - 1] = ids[:limit - 1] + ids[-1:]
    outputs = [""] * len(lines)
    todo = [i for i, line in enumerate(lines) if line.strip()]
    todo.sort(key=lambda i: len(src_ids[i]))  # similar lengths together: less padding
    for start in range(0, len(todo), decode.batch_size):
        chunk = todo[start:start + decode.batch_size]
        src = pad_ids([src_ids[i] for i in chunk]).to(device)
        lengths = torch.tensor([len(src_ids[i]) for i in chunk], device=device)
        max_len = (decode.max_len_a * lengths + decode.max_len_b).long().clamp(max=limit - 1)
        for i, text in zip(chunk, tokenizer.decode_tgt(greedy_search(model, src, max_len))):
            outputs[i] = text
    return outputs
