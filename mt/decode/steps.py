"""The step decoder: the next token's log-probabilities for a batch of prefixes, from one model or an ensemble,
with the search's constraints applied (min_len, no repeated n-gram, a shortlist's vocabulary). Greedy and beam
search (mt/decode/search.py) call it once per step.

Each model encodes the source once, and its decoder is fed one new token per step, keeping each layer's keys and
values in a DecoderCache (mt/decode/cache.py); use_cache=False decodes the whole prefix again at every step instead:
the reference that the cached path must match.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from mt.decode.cache import DecoderCache
from mt.model.transformer import Transformer, make_pad_mask, make_tgt_mask
from mt.decode.shortlist import narrowed_generator
from mt.data.tokenizer import BOS, EOS, PAD


@dataclass
class Ensemble:
    """Models that share one vocabulary, decoded as one: at every step, the next token's log-probability is the
    weighted mean of theirs (log-linear, as Marian's --weights). A model alone is an ensemble of one, weight 1."""

    models: list[Transformer]
    weights: list[float]  # summing to 1

    @classmethod
    def of(cls, model: Transformer | Ensemble) -> Ensemble:
        return model if isinstance(model, Ensemble) else cls([model], [1.0])

    @property
    def max_positions(self) -> int:
        return min(model.config.max_positions for model in self.models)


class StepDecoder:
    """Next-token log-probabilities for a batch of prefixes of the sources src [B,S], from a model or the weighted
    mean of an ensemble's (each model with its own memory and cache), with the search's constraints applied.

    With `beams` K, the prefixes come in groups of K per sentence. With a shortlist's `vocab` [V'] (target ids,
    ascending), log-probabilities are over its ids, column c for id vocab[c]; `ids` turns columns into ids. Each
    model's `generators` give its logits (default: narrowed_generator, mt/decode/shortlist.py).
    """

    def __init__(self, model: Transformer | Ensemble, src: Tensor, use_cache: bool, max_len: int, min_len: int = 0,
                 no_repeat_ngram_size: int = 0, beams: int = 1, vocab: Tensor | None = None,
                 generators: list[nn.Module] | None = None):
        ensemble = Ensemble.of(model)
        generators = generators or [narrowed_generator(m, vocab) for m in ensemble.models]
        src_mask = make_pad_mask(src, PAD)                                                        # [B,1,1,S]
        self.members = [ModelStep(m, generator, m.encode(src, src_mask), src_mask, use_cache, max_len, beams)
                        for m, generator in zip(ensemble.models, generators)]
        self.weights, self.min_len, self.no_repeat_ngram_size = ensemble.weights, min_len, no_repeat_ngram_size
        self.vocab, self.column = vocab, None  # column [V]: each id's column, -1 for ids outside the shortlist
        if vocab is not None:
            self.column = torch.full((ensemble.models[0].tgt_embed.embedding.num_embeddings,), -1, device=src.device)
            self.column[vocab] = torch.arange(len(vocab), device=src.device)
        pad, bos, self.eos = self.columns(torch.tensor([PAD, BOS, EOS], device=src.device)).tolist()
        self.never = [c for c in (pad, bos) if c >= 0]  # never outputs

    def ids(self, columns: Tensor) -> Tensor:
        """Columns of log_probs → target ids (the same with the whole vocabulary)."""
        return columns if self.vocab is None else self.vocab[columns]

    def columns(self, ids: Tensor) -> Tensor:
        """Target ids → their columns of log_probs, -1 for those outside the shortlist."""
        return ids if self.vocab is None else self.column[ids]

    def log_probs(self, prefixes: Tensor) -> Tensor:
        """prefixes [N, t] (BOS first) → log-probabilities of the next token [N, V] (or [N, V']: see `vocab`)."""
        if len(self.members) == 1:  # a model alone: its own log-probabilities, untouched
            log_probs = self.members[0].log_probs(prefixes)
        else:  # each member once: a step appends to its cache
            log_probs = sum(w * member.log_probs(prefixes) for w, member in zip(self.weights, self.members))
        log_probs[:, self.never] = float("-inf")
        if prefixes.size(1) <= self.min_len and self.eos >= 0:  # fewer than min_len tokens so far (BOS aside)
            log_probs[:, self.eos] = float("-inf")
        if self.no_repeat_ngram_size:
            block_repeated_ngrams(log_probs, prefixes[:, 1:], self.no_repeat_ngram_size, self.columns)
        return log_probs

    def select(self, rows: Tensor, same_sentences: bool) -> None:
        """Keep rows `rows` of the batch, in that order (beam search reorders its hypotheses). With
        `same_sentences`, each row stays among its sentence's rows, so the memory rows need no reordering."""
        for member in self.members:
            member.select(rows, same_sentences)


class ModelStep:
    """One model's next-token log-probabilities, with or without the incremental cache, its logits from `generator`
    (the model's own, or one narrowed to a shortlist).

    With `beams` K, the cache lets each group of K prefixes share its sentence's memory row [B,S,D]; the full
    recomputation copies each row K times.
    """

    def __init__(self, model: Transformer, generator: nn.Module, memory: Tensor, src_mask: Tensor, use_cache: bool,
                 max_len: int, beams: int):
        self.cache = DecoderCache(model, memory, src_mask, beams, capacity=max_len) if use_cache else None
        if not use_cache and beams > 1:
            rows = torch.arange(memory.size(0), device=memory.device).repeat_interleave(beams)
            memory, src_mask = memory.index_select(0, rows), src_mask.index_select(0, rows)  # [B·K,S,D]
        # memory and src_mask are read by the full recomputation only: the cache keeps its own
        self.model, self.generator, self.memory, self.src_mask, self.beams = model, generator, memory, src_mask, beams

    def log_probs(self, prefixes: Tensor) -> Tensor:
        """prefixes [N, t] (BOS first) → the model's log-probabilities of the next token [N, V]."""
        if self.cache is not None:  # only the newest token goes through the decoder
            hidden = self.cache.step(prefixes[:, -1:])
        else:
            hidden, _ = self.model.decode(prefixes, self.memory, self.src_mask, make_tgt_mask(prefixes, PAD))
        return self.generator(hidden[:, -1]).float().log_softmax(dim=-1)

    def select(self, rows: Tensor, same_sentences: bool) -> None:
        if self.cache is not None:  # one memory row per group of beams: the group's sentence
            self.cache.select(rows, None if same_sentences else rows.view(-1, self.beams)[:, 0] // self.beams)
        elif not same_sentences:
            self.memory, self.src_mask = self.memory.index_select(0, rows), self.src_mask.index_select(0, rows)


def block_repeated_ngrams(log_probs: Tensor, tokens: Tensor, n: int, columns=lambda ids: ids) -> None:
    """Forbid each next token that would repeat an n-gram already in its row of `tokens` [N, t] (the output so
    far): where the last n-1 tokens occurred before, the token that followed them then gets -inf in log_probs, at
    its column (`columns`: ids → columns, -1 for none)."""
    if tokens.size(1) < n:
        return
    grams = tokens.unfold(1, n, 1)                                            # [N, t-n+1, n]
    context = tokens[:, tokens.size(1) - n + 1:]                              # [N, n-1]
    repeats = (grams[:, :, :-1] == context[:, None, :]).all(dim=-1)           # [N, t-n+1]
    rows, starts = repeats.nonzero(as_tuple=True)
    banned = columns(grams[rows, starts, -1])
    log_probs[rows[banned >= 0], banned[banned >= 0]] = float("-inf")
