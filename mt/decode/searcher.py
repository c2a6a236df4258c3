"""mt's own engine (SearchEngine, mt/decode/engine.py): a model or an ensemble on a device, which searches batches
of sources (mt/decode/search.py; sources with terms, mt/decode/constrained.py) and scores given translations (forced
decoding, mt/decode/score.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
from torch import Tensor, nn

from mt.data.batching import pad_ids
from mt.config import DecodeConfig
from mt.core.errors import MtError
from mt.model.transformer import Transformer
from mt.decode.constrained import constrained_beam_search
from mt.decode.constraints import Terms
from mt.decode.engine import Hypothesis, search_sources
from mt.decode.packing import PackedWeights
from mt.decode.sampling import TokenSampling
from mt.decode.score import gold_log_probs
from mt.decode.running import RunningSearch
from mt.decode.search import beam_search, greedy_search
from mt.decode.shortlist import Shortlist, narrowed_generator
from mt.decode.steps import Ensemble
from mt.data.tokenizer import BOS

TERM_BEAM = 4  # the smallest beam a sentence with terms is searched in: greedy's one hypothesis cannot hold a term back


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

    def search(self, src_ids: list[list[int]], decode: DecodeConfig,
               terms: list[Terms | None] | None = None) -> list[list[Hypothesis]]:
        """The decode.nbest best outputs of each source, best first, in input order (search_sources)."""
        return search_sources(self, src_ids, decode, terms)

    def workers(self, decode: DecodeConfig) -> int:
        """decode.parallel_batches (0: one per torch thread, at most 4; Python's lock, which every thread takes
        between operations, would hold more back) on the CPU; one batch at a time on a GPU, which one batch keeps
        busy."""
        if self.device.type != "cpu":
            return 1
        return decode.parallel_batches or min(torch.get_num_threads(), 4)

    def search_batch(self, src_ids: list[list[int]], limits: list[int], decode: DecodeConfig,
                     terms: list[Terms | None] | None = None) -> list[list[Hypothesis]]:
        """The decode.nbest best outputs of each source of one batch, best first, each of at most its limit's
        tokens; greedy when decode.beam_size is 1; one drawn output each with decode.sample. With `terms`, the
        sources without terms are searched as without them, those with terms by constrained beam search. Batches
        may be searched from several threads at once (workers): the models are only read."""
        src = pad_ids(src_ids).to(self.device)                                                    # [B, S]
        max_len = torch.tensor(limits, device=self.device)                                        # [B]
        vocab = self.shortlist(decode.shortlist).targets(src_ids).to(self.device) if decode.shortlist else None
        if not terms or not any(terms):
            return self._search(src, max_len, decode, vocab)
        if decode.sample:
            raise MtError("--glossary: --sample draws outputs at random; a glossary constrains searched ones")

        def rows(chosen: list[int]) -> tuple[Tensor, Tensor]:  # src [B', S] (the batch's padding), max_len [B']
            index = torch.tensor(chosen, device=self.device)
            return src[index], max_len[index]

        # sources without terms: searched as without a glossary (the batch's padding and shortlist), in a batch of
        # their own, which changes no output in float32 (as any batching)
        plain = [i for i, sentence_terms in enumerate(terms) if not sentence_terms]
        held = [i for i, sentence_terms in enumerate(terms) if sentence_terms]
        found = dict(zip(held, self._search_terms(*rows(held), decode, vocab, [terms[i] for i in held])))
        if plain:
            found |= dict(zip(plain, self._search(*rows(plain), decode, vocab)))
        return [found[i] for i in range(len(src_ids))]

    def _search(self, src: Tensor, max_len: Tensor, decode: DecodeConfig,
                vocab: Tensor | None) -> list[list[Hypothesis]]:
        """Sources src [B, S] searched greedily, by beam search or by sampling (decode), within max_len [B]."""
        # the generators narrowed to the shortlist are copies: the models stay as other batches' searches read them
        generators = [narrowed_generator(model, vocab) for model in self.models]
        options = {"alpha": decode.alpha, "min_len": decode.min_len,
                   "no_repeat_ngram_size": decode.no_repeat_ngram_size, "vocab": vocab, "generators": generators}
        beams = 1 if decode.sample else decode.beam_size
        with self.products(self._packed(generators), src.size(0) * beams):
            if beams == 1:
                sampling = TokenSampling.of(decode, self.device) if decode.sample else None
                return [[h] for h in greedy_search(self.ensemble, src, max_len, sampling=sampling, **options)]
            return beam_search(self.ensemble, src, max_len, decode.beam_size, nbest=decode.nbest, **options)

    def _search_terms(self, src: Tensor, max_len: Tensor, decode: DecodeConfig, vocab: Tensor | None,
                      terms: list[Terms]) -> list[list[Hypothesis]]:
        """Sources src [B, S] with terms, by constrained beam search in a beam of at least TERM_BEAM, the shortlist
        widened by the terms' ids."""
        if vocab is not None:
            ids = sorted(set().union(*(sentence.ids for sentence in terms)))
            vocab = torch.cat([vocab, torch.tensor(ids, dtype=torch.long, device=self.device)]).unique()  # ascending
        generators = [narrowed_generator(model, vocab) for model in self.models]
        beams = max(decode.beam_size, TERM_BEAM)
        with self.products(self._packed(generators), src.size(0) * beams):
            return constrained_beam_search(
                self.ensemble, src, max_len, beams, terms, alpha=decode.alpha,
                nbest=decode.nbest, min_len=decode.min_len, no_repeat_ngram_size=decode.no_repeat_ngram_size,
                vocab=vocab, generators=generators)

    def running_search(self, decode: DecodeConfig) -> RunningSearch:
        """A running search with decode's settings (continuous batching, mt/decode/running.py): greedy or beam
        search, over the whole vocabulary (no shortlist), without sampling or terms. Its products are those of
        `_search`, packed for no one number of rows (MKL then packs none)."""
        generators = [model.generator for model in self.models]
        return RunningSearch(self.ensemble, decode.beam_size, decode.nbest, decode.alpha, decode.min_len,
                             decode.no_repeat_ngram_size, lambda: self.products(self._packed(generators), None))

    def _packed(self, generators: list[nn.Module]) -> list[nn.Module]:
        """The modules whose weights a search packs: oneDNN packs every product; MKL packs for one number of rows,
        that of the decoder's steps: B·beam (fewer once a beam search sentence is done)."""
        if self.packed.library == "onednn":
            return [*self.models, *generators]
        return [module for model, generator in zip(self.models, generators) for module in (model.decoder, generator)]

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
