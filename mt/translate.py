"""Text in, text out: tokenise, sort by length into batches, search, restore the input order, detokenise."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from mt.config import DecodeConfig
from mt.data import pad_ids
from mt.model import Transformer
from mt.search import beam_search, greedy_search
from mt.tokenizer import Tokenizer


@dataclass
class Translation:
    text: str
    score: float  # log-probability / length penalty


def translate_nbest(model: Transformer, tokenizer: Tokenizer, lines: list[str], decode: DecodeConfig,
                    device: torch.device) -> list[list[Translation]]:
    """The `decode.nbest` best translations of each line, best first, in input order (greedy when
    decode.beam_size is 1). An empty line gets one empty translation."""
    src_ids = _encode(tokenizer, lines, model.config.max_positions)
    outputs = [[Translation("", 0.0)] for _ in lines]
    todo = sorted((i for i, line in enumerate(lines) if line.strip()), key=lambda i: len(src_ids[i]))
    for start in range(0, len(todo), decode.batch_size):  # similar lengths together: little padding
        chunk = todo[start:start + decode.batch_size]
        src = pad_ids([src_ids[i] for i in chunk]).to(device)
        lengths = torch.tensor([len(src_ids[i]) for i in chunk], device=device)
        max_len = (decode.max_len_a * lengths + decode.max_len_b).long().clamp(max=model.config.max_positions - 1)
        if decode.beam_size == 1:
            found = [[h] for h in greedy_search(model, src, max_len)]
        else:
            found = beam_search(model, src, max_len, decode.beam_size, decode.alpha, decode.nbest)
        for i, hyps in zip(chunk, found):
            texts = tokenizer.decode_tgt([h.tokens for h in hyps])
            outputs[i] = [Translation(text, h.score) for text, h in zip(texts, hyps)]
    return outputs


def translate_lines(model: Transformer, tokenizer: Tokenizer, lines: list[str], decode: DecodeConfig,
                    device: torch.device) -> list[str]:
    """One output line per input line, in input order; an empty input line gives an empty output line."""
    return [best[0].text for best in translate_nbest(model, tokenizer, lines, decode, device)]


def _encode(tokenizer: Tokenizer, lines: list[str], limit: int) -> list[list[int]]:
    src_ids = tokenizer.encode_src([line.strip() for line in lines])
    for number, ids in enumerate(src_ids, start=1):
        if len(ids) > limit:  # the position table ends there: keep the start, say so
            print(f"warning: input line {number} has {len(ids)} tokens; translating its first {limit}",
                  file=sys.stderr)
            src_ids[number - 1] = ids[:limit - 1] + ids[-1:]
    return src_ids
