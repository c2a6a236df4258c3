"""Text in, text out: tokenise, sort by length into batches, search, restore the input order, detokenise."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from mt.config import DecodeConfig
from mt.batching import pad_ids, token_batches
from mt.model import Transformer
from mt.search import beam_search, greedy_search
from mt.tokenizer import Tokenizer


@dataclass
class Translation:
    text: str
    score: float  # log-probability / length penalty


def translate_nbest(model: Transformer, tokenizer: Tokenizer, lines: list[str], decode: DecodeConfig,
                    device: torch.device, first_line: int = 1) -> list[list[Translation]]:
    """The `decode.nbest` best translations of each line, best first, in input order (greedy when
    decode.beam_size is 1). An empty line gets one empty translation."""
    src_ids = encode_sources(tokenizer, lines, model.config.max_positions, first_line)
    outputs = [[Translation("", 0.0)] for _ in lines]
    for chunk in batches_of_lines(lines, src_ids, decode.max_tokens):
        src = pad_ids([src_ids[i] for i in chunk]).to(device)
        limits = [output_limit(decode, len(src_ids[i]), model.config.max_positions) for i in chunk]
        max_len = torch.tensor(limits, device=device)
        if decode.beam_size == 1:
            found = [[h] for h in greedy_search(model, src, max_len, min_len=decode.min_len,
                                                no_repeat_ngram_size=decode.no_repeat_ngram_size)]
        else:
            found = beam_search(model, src, max_len, decode.beam_size, decode.alpha, decode.nbest,
                                min_len=decode.min_len, no_repeat_ngram_size=decode.no_repeat_ngram_size)
        for i, hyps in zip(chunk, found):
            texts = tokenizer.decode_tgt([h.tokens for h in hyps])
            outputs[i] = [Translation(text, h.score) for text, h in zip(texts, hyps)]
    return outputs


ChunkTranslator = Callable[[list[str], int], list[list[Translation]]]  # (lines, number of the first) → n-best


def translate_stream(translate_chunk: ChunkTranslator, lines: Iterable[str], chunk_size: int
                     ) -> Iterator[list[Translation]]:
    """Translate `chunk_size` lines at a time and yield each line's translations as soon as its chunk is
    done, holding one chunk at a time. Lines are sorted by length within a chunk only."""
    lines = iter(lines)
    first_line = 1
    while chunk := list(itertools.islice(lines, chunk_size)):
        yield from translate_chunk(chunk, first_line)
        first_line += len(chunk)


def translate_lines(model: Transformer, tokenizer: Tokenizer, lines: list[str], decode: DecodeConfig,
                    device: torch.device) -> list[str]:
    """One output line per input line, in input order; an empty input line gives an empty output line."""
    return [best[0].text for best in translate_nbest(model, tokenizer, lines, decode, device)]


def batches_of_lines(lines: list[str], src_ids: list[list[int]], max_tokens: int) -> Iterator[list[int]]:
    """Indices of the non-empty lines, sorted by length into batches of at most `max_tokens` source tokens:
    similar lengths together, so little padding."""
    todo = np.array([i for i, line in enumerate(lines) if line.strip()], dtype=np.int64)
    if len(todo):
        lengths = np.array([len(src_ids[i]) for i in todo], dtype=np.int64)
        for batch in token_batches(lengths, lengths, max_tokens):
            yield todo[batch].tolist()


def output_limit(decode: DecodeConfig, src_len: int, max_positions: int) -> int:
    """The most tokens an output may have: a · source length + b, within the position table."""
    return min(int(decode.max_len_a * src_len + decode.max_len_b), max_positions - 1)


def encode_sources(tokenizer: Tokenizer, lines: list[str], limit: int, first_line: int) -> list[list[int]]:
    """Source ids per line; a line longer than the position table is cut there, with a warning."""
    src_ids = tokenizer.encode_src([line.strip() for line in lines])
    for i, ids in enumerate(src_ids):
        if len(ids) > limit:
            print(f"warning: input line {first_line + i} has {len(ids)} tokens; translating its first {limit}",
                  file=sys.stderr)
            src_ids[i] = ids[:limit - 1] + ids[-1:]
    return src_ids
