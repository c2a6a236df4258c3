"""Decoding: from source ids to output ids, greedy, by beam search, or by sampling.

Both encode the source once and feed the decoder one new token per step, keeping each layer's keys and values
in a DecoderCache (mt/decode/cache.py); use_cache=False decodes the whole prefix again at every step instead: the
reference that the cached path must match. An output is its tokens up to and including EOS, or `max_len` tokens
without one.

A hypothesis's score means the same in both searches: its log-probability (EOS included) divided by GNMT's
length penalty ((5 + length) / 6) ** alpha, its length counting EOS. With alpha 0 it is the log-probability.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor, nn

from mt.data.batching import pad_ids, source_batches
from mt.decode.cache import DecoderCache
from mt.config import DecodeConfig
from mt.core.errors import MtError
from mt.core.openmp import map_in_threads
from mt.model.transformer import Transformer, make_pad_mask, make_tgt_mask
from mt.decode.packing import PackedWeights
from mt.decode.shortlist import Shortlist, narrowed_generator
from mt.data.tokenizer import BOS, EOS, PAD


@dataclass
class Hypothesis:
    tokens: list[int]  # output ids, without BOS and EOS
    score: float       # log-probability (EOS included) / length_penalty(length with EOS, alpha)


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


class SearchEngine(Protocol):
    """What searches a batch of sources: mt's own Searcher, or a CTranslate2 export (mt/decode/ctranslate2.py)."""

    @property
    def max_positions(self) -> int:
        """The length of the position table: no output reaches it (output_limit)."""

    @property
    def compute_type(self) -> str:
        """What its products compute in, as resolved on this device (--compute-type auto becomes a type)."""

    def search_batch(self, src_ids: list[list[int]], limits: list[int],
                     decode: DecodeConfig) -> list[list[Hypothesis]]:
        """The decode.nbest best outputs of each source (ids) of one batch, best first, each of at most its limit's
        tokens."""

    def workers(self, decode: DecodeConfig) -> int:
        """How many batches to search at once (search_batch from as many threads)."""

    def shortlist(self, path: str) -> Shortlist:
        """The shortlist file at `path` (decode.shortlist), read and checked once, before the searches use it."""

    def score_batch(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[list[float]]:
        """Forced decoding (mt/decode/score.py): the log-probability of each token of each target (ids: pieces then
        EOS, no BOS) given its source (ids, EOS last), one batch of pairs."""

    def cross_attention(self, src_ids: list[int], tgt_ids: list[int]) -> Tensor:
        """What each piece of a target (ids: pieces then EOS) attended to in its source (ids, EOS last), teacher
        forced: weights [layers, heads, T, S] (a CTranslate2 export: its last layer, heads averaged, [1, 1, T, S])."""


def search_sources(engine: SearchEngine, src_ids: list[list[int]], decode: DecodeConfig) -> list[list[Hypothesis]]:
    """The decode.nbest best outputs of each source, best first, in input order. Sources are sorted by length into
    batches of at most decode.max_tokens tokens (one looping output delays only its batch), which the engine may
    search several at once (its `workers`, among whom the sources are then cut into batches of about equal work:
    equal_shares); each sentence keeps its own output limit."""
    workers = engine.workers(decode)
    batches = source_batches(src_ids, decode.max_tokens)
    # a sample's draws follow its batch, which must not depend on the machine's threads
    if workers > 1 and not decode.sample and (shares := equal_shares(len(src_ids), len(batches), workers)) > 1:
        batches = source_batches(src_ids, decode.max_tokens, shares)

    def search(numbered: tuple[int, list[int]]) -> list[list[Hypothesis]]:
        n, batch = numbered
        limits = [output_limit(decode, len(src_ids[i]), engine.max_positions) for i in batch]
        # sampling: each batch draws from a stream of its own, the same on every run and in any thread
        batch_decode = decode.replace(seed=decode.seed + n) if decode.sample else decode
        return engine.search_batch([src_ids[i] for i in batch], limits, batch_decode)

    found: list[list[Hypothesis]] = [[] for _ in src_ids]
    searched = map_in_threads(search, enumerate(batches), min(workers, len(batches)))
    for batch, hyps_of_batch in zip(batches, searched):
        for i, hyps in zip(batch, hyps_of_batch):
            found[i] = hyps
    return found


SHARED_ROWS = 64  # the fewest sentences a batch shared out holds (equal_shares; docs/translating.md)


def equal_shares(sources: int, batches: int, workers: int) -> int:
    """Into how many batches of about equal source tokens to cut `sources` sentences, which the token budget puts
    into `batches`, for `workers` threads at once. The budget's batches would keep threads waiting for the one
    with the largest (its last batch is small); equal shares, two a thread for every `workers` of the budget's (a
    thread whose batch ends first takes the next), keep them all busy to the end, as long as each holds at least
    SHARED_ROWS sentences (below that, two threads on one batch beat a thread on each half). 1: keep the budget's
    batches."""
    return min(2 * workers * -(-batches // workers), sources // SHARED_ROWS)


def output_limit(decode: DecodeConfig, src_len: int, max_positions: int) -> int:
    """The most tokens an output may have: a · source length + b, within the position table."""
    return min(int(decode.max_len_a * src_len + decode.max_len_b), max_positions - 1)


class Searcher:
    """mt's own engine: a model (or an ensemble) on a device. On the CPU, a search multiplies by weights packed into
    a BLAS library's layout (mt/decode/packing.py), kept from batch to batch. With `dtype` bf16, its products by
    weights are bf16 ones: by weights packed in bf16 on the CPU, under autocast on a GPU."""

    def __init__(self, model: Transformer | Ensemble, device: torch.device, vocab_hash: str = "",
                 dtype: torch.dtype = torch.float32):
        self.ensemble, self.device = Ensemble.of(model), device
        self.packed = PackedWeights(dtype=dtype)  # holds the dtype (Searcher.dtype)
        self.vocab_hash = vocab_hash  # its tokenizer's: a shortlist must be made for it
        self._shortlists: dict[str, Shortlist] = {}

    @property
    def models(self) -> list[Transformer]:
        return self.ensemble.models

    @property
    def max_positions(self) -> int:
        return self.ensemble.max_positions

    @property
    def dtype(self) -> torch.dtype:
        return self.packed.dtype

    @property
    def compute_type(self) -> str:
        return "bfloat16" if self.dtype == torch.bfloat16 else "float32"

    def search(self, src_ids: list[list[int]], decode: DecodeConfig) -> list[list[Hypothesis]]:
        """The decode.nbest best outputs of each source, best first, in input order (search_sources)."""
        return search_sources(self, src_ids, decode)

    def workers(self, decode: DecodeConfig) -> int:
        """decode.parallel_batches (0: one per torch thread, at most 4; Python's lock, which every thread takes
        between operations, would hold more back) on the CPU; one batch at a time on a GPU, which one batch keeps
        busy."""
        if self.device.type != "cpu":
            return 1
        return decode.parallel_batches or min(torch.get_num_threads(), 4)

    def search_batch(self, src_ids: list[list[int]], limits: list[int],
                     decode: DecodeConfig) -> list[list[Hypothesis]]:
        """The decode.nbest best outputs of each source of one batch, best first, each of at most its limit's
        tokens; greedy when decode.beam_size is 1; one drawn output each with decode.sample. Batches may be
        searched from several threads at once (workers): the models are only read."""
        src = pad_ids(src_ids).to(self.device)                                                    # [B, S]
        max_len = torch.tensor(limits, device=self.device)                                        # [B]
        vocab = self.shortlist(decode.shortlist).targets(src_ids).to(self.device) if decode.shortlist else None
        # the generators narrowed to the shortlist are copies: the models stay as other batches' searches read them
        generators = [narrowed_generator(model, vocab) for model in self.models]
        options = {"alpha": decode.alpha, "min_len": decode.min_len,
                   "no_repeat_ngram_size": decode.no_repeat_ngram_size, "vocab": vocab, "generators": generators}
        beams = 1 if decode.sample else decode.beam_size
        # oneDNN packs every product; MKL packs for one number of rows, that of the decoder's steps: B·beam (fewer
        # once a beam search sentence is done)
        parts = [*self.models, *generators] if self.packed.library == "onednn" else [
            module for model, generator in zip(self.models, generators) for module in (model.decoder, generator)]
        with self.products(parts, len(src_ids) * beams):
            if beams == 1:
                sampling = TokenSampling.of(decode, self.device) if decode.sample else None
                return [[h] for h in greedy_search(self.ensemble, src, max_len, sampling=sampling, **options)]
            return beam_search(self.ensemble, src, max_len, decode.beam_size, nbest=decode.nbest, **options)

    @contextmanager
    def products(self, parts: list[nn.Module], rows: int | None) -> Iterator[None]:
        """Within the block, the products of `parts` by their weights in the searcher's dtype: by packed weights on
        the CPU (PackedWeights.applied), under bf16 autocast on other devices when dtype is bf16."""
        # A float32 search leaves any autocast of the caller's alone: only a bf16 one off the CPU opens its own.
        on_gpu = self.dtype == torch.bfloat16 and self.device.type != "cpu"
        autocast = torch.autocast(self.device.type, torch.bfloat16) if on_gpu else nullcontext()
        with self.packed.applied(parts, rows), autocast:
            yield

    def shortlist(self, path: str) -> Shortlist:
        """The shortlist file at `path`, read once."""
        if path not in self._shortlists:
            model = self.models[0]
            sizes = model.src_embed.embedding.num_embeddings, model.tgt_embed.embedding.num_embeddings
            self._shortlists[path] = Shortlist.load(Path(path), self.vocab_hash, sizes)
        return self._shortlists[path]

    def cross_attention(self, src_ids: list[int], tgt_ids: list[int]) -> Tensor:
        """The model's cross-attention of a target given its source, teacher forced: [layers, heads, T, S]."""
        if len(self.models) != 1:
            raise MtError("attention maps need one model: an ensemble has none of its own")
        src, tgt_input = pad_ids([src_ids]), pad_ids([[BOS] + tgt_ids[:-1]])   # the decoder reads BOS pieces …
        return self.models[0].cross_attention(src.to(self.device), tgt_input.to(self.device))[0].cpu()

    @torch.inference_mode()
    def score_batch(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[list[float]]:
        """The log-probability of each token of each target (pieces then EOS) given its source, teacher forced:
        what search adds up for that output, the weighted mean of an ensemble's at every step (StepDecoder)."""
        src = pad_ids(src_ids).to(self.device)                                                    # [B, S]
        tgt_input = pad_ids([[BOS] + ids[:-1] for ids in tgt_ids]).to(self.device)               # [B, T]: BOS pieces
        gold = pad_ids(tgt_ids).to(self.device)                                                   # [B, T]: pieces EOS
        # log-linear: the weighted mean of the models' log-probabilities of the gold tokens, [N] (N: real tokens)
        with self.products(self.models, rows=None):  # products of no one size: packed by oneDNN only
            log_probs = sum(w * gold_log_probs(model, src, tgt_input, gold)
                            for w, model in zip(self.ensemble.weights, self.models))
        return [row.tolist() for row in log_probs.split([len(ids) for ids in tgt_ids])]


def gold_log_probs(model: Transformer, src: Tensor, tgt_input: Tensor, gold: Tensor) -> Tensor:
    """One model's log-probability of each gold token after the decoder input tgt_input [B, T] (teacher forcing),
    in float32 as a search step computes it (ModelStep): [N], the tokens of gold [B, T] that are not PAD, row by
    row. Only they go through the generator, the costliest product, which padding would only slow down."""
    src_mask = make_pad_mask(src, PAD)                                                            # [B,1,1,S]
    hidden, _ = model.decode(tgt_input, model.encode(src, src_mask), src_mask, make_tgt_mask(tgt_input, PAD))
    real = gold != PAD                                                                            # [B, T]
    log_probs = model.generator(hidden[real]).float().log_softmax(dim=-1)                         # [N, V]
    return log_probs.gather(-1, gold[real][:, None]).squeeze(-1)                                  # [N]


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


@dataclass
class TokenSampling:
    """Sampling's draw of each next token: from the top_k likeliest, then from the fewest whose probabilities reach
    top_p (Holtzman et al., 2020), after dividing the log-probabilities by the temperature."""

    top_k: int
    top_p: float
    temperature: float
    generator: torch.Generator

    @classmethod
    def of(cls, decode: DecodeConfig, device: torch.device) -> TokenSampling:
        generator = torch.Generator(device=device).manual_seed(decode.seed)
        return cls(decode.top_k, decode.top_p, decode.temperature, generator)

    def draw(self, log_probs: Tensor) -> Tensor:
        """log_probs [N, V] → one token per row [N]."""
        logits = log_probs / self.temperature                                    # [N, V]
        if self.top_k:
            kth = logits.topk(min(self.top_k, logits.size(-1)), dim=-1).values[:, -1:]   # [N, 1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            ranked, order = logits.sort(dim=-1, descending=True)
            probs = ranked.softmax(dim=-1)
            outside = probs.cumsum(dim=-1) - probs >= self.top_p                 # the mass before it reaches p
            logits = logits.scatter(-1, order, ranked.masked_fill(outside, float("-inf")))
        return torch.multinomial(logits.softmax(dim=-1), 1, generator=self.generator).squeeze(-1)


@torch.inference_mode()  # no autograd bookkeeping at all, not even version counters
def greedy_search(model: Transformer | Ensemble, src: Tensor, max_len: Tensor, use_cache: bool = True,
                  alpha: float = 0.0, min_len: int = 0, no_repeat_ngram_size: int = 0,
                  sampling: TokenSampling | None = None, vocab: Tensor | None = None,
                  generators: list[nn.Module] | None = None) -> list[Hypothesis]:
    """src [B,S] padded ids, max_len [B] output budget per sentence → the most likely token at every step, or one
    drawn by `sampling`. An output's score is its log-probability under the model (the temperature aside), which
    alpha normalises (see the module's docstring) as beam search would. With `vocab` (a shortlist's target ids; the
    models' `generators` narrowed to them, StepDecoder) it chooses among those only."""
    decoder = StepDecoder(model, src, use_cache, int(max_len.max()), min_len, no_repeat_ngram_size, vocab=vocab,
                          generators=generators)
    batch = src.size(0)
    ys = torch.full((batch, 1), BOS, dtype=torch.long, device=src.device)  # [B, t]
    log_prob = torch.zeros(batch, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    for step in range(int(max_len.max())):  # finished rows stay in the batch: every step has B rows
        log_probs = decoder.log_probs(ys)                                  # [B, V]
        choice = log_probs.argmax(dim=-1) if sampling is None else sampling.draw(log_probs)   # [B]: columns
        log_prob += log_probs.gather(-1, choice[:, None]).squeeze(-1).masked_fill(finished, 0.0)
        next_token = decoder.ids(choice).masked_fill(finished, PAD)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        finished |= (next_token == EOS) | (step + 1 >= max_len)
        if finished.all():
            break
    hypotheses = []
    for row, lp in zip(ys[:, 1:].tolist(), log_prob.tolist()):
        tokens = _strip(row)
        length = len(tokens) + (EOS in row)
        hypotheses.append(Hypothesis(tokens, lp / length_penalty(length, alpha)))
    return hypotheses


def length_penalty(length: int, alpha: float) -> float:
    """GNMT (Wu et al., 2016): ((5 + length) / 6) ** alpha; alpha 0 means no normalisation."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.inference_mode()  # no autograd bookkeeping at all, not even version counters
def beam_search(model: Transformer | Ensemble, src: Tensor, max_len: Tensor, beam_size: int, alpha: float = 0.0,
                nbest: int = 1, use_cache: bool = True, min_len: int = 0, no_repeat_ngram_size: int = 0,
                vocab: Tensor | None = None, generators: list[nn.Module] | None = None) -> list[list[Hypothesis]]:
    """Batched beam search: B sentences × K beams decoded together. Returns the `nbest` best outputs per
    sentence, best first, by log-probability / length_penalty(output length incl. EOS, alpha).

    A finished hypothesis is kept; a sentence stops when it has `nbest` finished ones and no open one can
    beat them any more (log-probabilities only fall; with alpha > 0 the penalty is at most that of max_len).
    With `vocab`, as greedy_search.
    """
    batch, k = src.size(0), beam_size
    device = src.device
    decoder = StepDecoder(model, src, use_cache, int(max_len.max()), min_len, no_repeat_ngram_size, k, vocab,
                          generators)
    ys = torch.full((batch * k, 1), BOS, dtype=torch.long, device=device)          # [B*K, t]
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0                                                              # one live beam at first
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    active = list(range(batch))                                                     # sentences still searching
    limits = max_len.tolist()
    for step in range(int(max_len.max())):
        log_probs = decoder.log_probs(ys)                                           # [N*K, V]
        # a sentence's best 2K continuations (room after EOS) are among each of its rows' best 2K: ranking those
        # alone leaves out a sum and a ranking over all K·V
        width = min(2 * k, log_probs.size(-1))
        row_best, row_tokens = log_probs.topk(width, dim=-1)                        # [N*K, 2K]
        candidates = (scores.view(-1, 1) + row_best).view(len(active), k * width)   # [N, K*2K]
        top_scores, top_index = candidates.topk(min(2 * k, k * width), dim=-1)      # [N, 2K]
        top_rows = top_index // width + torch.arange(len(active), device=device)[:, None] * k
        top_tokens = decoder.ids(row_tokens.view(len(active), k * width).gather(1, top_index))
        top_scores, top_rows, top_tokens = top_scores.tolist(), top_rows.tolist(), top_tokens.tolist()
        survivors, still_active = [], []                                            # (row, token, score)
        for n, sentence in enumerate(active):
            ranked = zip(top_scores[n], top_rows[n], top_tokens[n])
            at_limit = step + 1 >= limits[sentence]
            kept = _extend(ranked, ys, k, at_limit, alpha, finished[sentence])
            if kept and not _done(finished[sentence], kept[0][2], nbest, limits[sentence], alpha):
                survivors += kept + [(kept[0][0], PAD, float("-inf"))] * (k - len(kept))  # dead rows: -inf
                still_active.append(sentence)
        if not still_active:
            break
        rows_kept, tokens, kept_scores = zip(*survivors)
        index = torch.tensor(rows_kept, device=device)
        ys = torch.cat([ys.index_select(0, index), torch.tensor(tokens, device=device)[:, None]], dim=1)
        scores = torch.tensor(kept_scores, device=device).view(-1, k)
        decoder.select(index, same_sentences=len(still_active) == len(active))
        active = still_active
    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]


def _extend(ranked, ys: Tensor, k: int, at_limit: bool, alpha: float,
            finished: list[Hypothesis]) -> list[tuple[int, int, float]]:
    """Walk one sentence's candidates, best first: one ending in EOS (or reaching the length limit) joins
    `finished`; the others stay open, up to k of them. Returns the open ones as (row, token, score)."""
    kept = []
    for score, row, token in ranked:
        if score == float("-inf") or len(kept) == k:
            break
        if token == EOS or at_limit:
            tokens = ys[row, 1:].tolist() + ([] if token == EOS else [token])
            length = ys.size(1)  # the tokens so far (BOS aside) and this one
            finished.append(Hypothesis(tokens, score / length_penalty(length, alpha)))
        else:
            kept.append((row, token, score))
    return kept


def _done(finished: list[Hypothesis], best_open: float, nbest: int, max_len: int, alpha: float) -> bool:
    """True when no open hypothesis can enter the n-best any more."""
    if len(finished) < nbest:
        return False
    worst_kept = sorted(h.score for h in finished)[-nbest]
    best_possible = best_open / length_penalty(max_len, alpha) if alpha > 0 else best_open
    return best_possible <= worst_kept


def _strip(ids: list[int]) -> list[int]:
    """Cut at the first EOS and drop padding."""
    if EOS in ids:
        ids = ids[:ids.index(EOS)]
    return [i for i in ids if i != PAD]
