"""Forced decoding: how likely a model finds given translations (fairseq's --score-reference, Marian's scorer,
CTranslate2's score_batch).

A pair's score is the sum over its target's tokens, pieces then EOS (not BOS), of log p(token | source, the
tokens before it): the log-probability that search computes for that output (mt/decode/search.py), with no
length penalty. score_pairs batches the pairs for either engine; gold_log_probs is one model's share of mt's own
engine's scores (Searcher.score_batch, mt/decode/searcher.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import Tensor

from mt.data.batching import token_batches
from mt.data.tokenizer import PAD
from mt.decode.engine import SearchEngine
from mt.model.transformer import Transformer, make_pad_mask, make_tgt_mask


@dataclass
class PairScore:
    log_prob: float  # summed over the target's tokens, EOS included
    tokens: int      # how many were scored: the target's pieces and EOS

    @property
    def mean(self) -> float:
        """Log-probability per token (an empty target still scores its EOS: tokens ≥ 1)."""
        return self.log_prob / self.tokens


def score_pairs(engine: SearchEngine, src_ids: list[list[int]], tgt_ids: list[list[int]],
                max_tokens: int) -> list[PairScore]:
    """The score of each pair (source ids, EOS last; target ids, pieces then EOS, no BOS), in input order. The ids
    must fit the model's position table (Translator.score cuts lines that do not)."""
    return [PairScore(sum(log_probs), len(log_probs)) for log_probs in token_log_probs(engine, src_ids, tgt_ids,
                                                                                       max_tokens)]


def token_log_probs(engine: SearchEngine, src_ids: list[list[int]], tgt_ids: list[list[int]],
                    max_tokens: int) -> list[list[float]]:
    """The log-probability of each token of each pair's target, in input order, the pairs sorted by length into
    batches of at most `max_tokens` padded tokens per side."""
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"{len(src_ids)} sources but {len(tgt_ids)} targets")
    if not src_ids:
        return []
    lengths = [np.array([len(ids) for ids in side], dtype=np.int64) for side in (src_ids, tgt_ids)]
    found: list[list[float]] = [None] * len(src_ids)  # each filled by its batch
    for batch in token_batches(*lengths, max_tokens):
        batch = batch.tolist()
        for i, log_probs in zip(batch, engine.score_batch([src_ids[i] for i in batch], [tgt_ids[i] for i in batch])):
            found[i] = log_probs
    return found


def gold_log_probs(model: Transformer, src: Tensor, tgt_input: Tensor, gold: Tensor) -> Tensor:
    """One model's log-probability of each gold token after the decoder input tgt_input [B, T] (teacher forcing),
    in float32 as a search step computes it (ModelStep, mt/decode/steps.py): [N], the tokens of gold [B, T] that are not PAD, row by
    row. Only they go through the generator, the costliest product, which padding would only slow down."""
    src_mask = make_pad_mask(src, PAD)                                                            # [B,1,1,S]
    hidden, _ = model.decode(tgt_input, model.encode(src, src_mask), src_mask, make_tgt_mask(tgt_input, PAD))
    real = gold != PAD                                                                            # [B, T]
    log_probs = model.generator(hidden[real]).float().log_softmax(dim=-1)                         # [N, V]
    return log_probs.gather(-1, gold[real][:, None]).squeeze(-1)                                  # [N]
