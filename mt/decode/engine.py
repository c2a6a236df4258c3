"""What searches batches of sources, and how they are shared out: the engine's protocol (mt's own Searcher,
mt/decode/searcher.py, or a CTranslate2 export, mt/decode/ctranslate2.py), the hypotheses it returns, and
search_sources, the one place that sorts sources into length-sorted batches and gives each sentence its output limit,
for either engine. A source may come with terms (a glossary's, mt/decode/constraints.py) that each of its outputs
holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from torch import Tensor

from mt.data.batching import source_batches
from mt.config import DecodeConfig
from mt.core.openmp import map_in_threads
from mt.decode.constraints import Terms, longest_forms
from mt.decode.shortlist import Shortlist


@dataclass
class Hypothesis:
    tokens: list[int]  # output ids, without BOS and EOS
    score: float       # log-probability (EOS included) / length_penalty(length with EOS, alpha)
    log_probs: list[float] | None = None  # each token's, then EOS's where it ended (None: the search gives none)


class SearchEngine(Protocol):
    """What searches a batch of sources: mt's own Searcher, or a CTranslate2 export (mt/decode/ctranslate2.py)."""

    @property
    def max_positions(self) -> int:
        """The length of the position table: no output reaches it (output_limit)."""

    @property
    def compute_type(self) -> str:
        """What its products compute in, as resolved on this device (--compute-type auto becomes a type)."""

    def search_batch(self, src_ids: list[list[int]], limits: list[int], decode: DecodeConfig,
                     terms: list[Terms | None] | None = None) -> list[list[Hypothesis]]:
        """The decode.nbest best outputs of each source (ids) of one batch, best first, each of at most its limit's
        tokens; with `terms` (one entry per source, None for none), each output holds its source's terms."""

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


def search_sources(engine: SearchEngine, src_ids: list[list[int]], decode: DecodeConfig,
                   terms: list[Terms | None] | None = None) -> list[list[Hypothesis]]:
    """The decode.nbest best outputs of each source, best first, in input order. Sources are sorted by length into
    batches of at most decode.max_tokens tokens (one looping output delays only its batch), which the engine may
    search several at once (its `workers`, among whom the sources are then cut into batches of about equal work:
    equal_shares); each sentence keeps its own output limit. With `terms` (one entry per source, None for
    none), each output of a source holds its terms, within a limit longer by their longest forms; a batch without
    terms is searched as without them."""
    workers = engine.workers(decode)
    batches = source_batches(src_ids, decode.max_tokens)
    # a sample's draws follow its batch, which must not depend on the machine's threads
    if workers > 1 and not decode.sample and (shares := equal_shares(len(src_ids), len(batches), workers)) > 1:
        batches = source_batches(src_ids, decode.max_tokens, shares)

    def search(numbered: tuple[int, list[int]]) -> list[list[Hypothesis]]:
        n, batch = numbered
        batch_ids = [src_ids[i] for i in batch]
        batch_terms = [terms[i] for i in batch] if terms else [None] * len(batch)
        limits = [output_limit(decode, len(ids), engine.max_positions, longest_forms(sentence_terms))
                  for ids, sentence_terms in zip(batch_ids, batch_terms)]
        # sampling: each batch draws from a stream of its own, the same on every run and in any thread
        batch_decode = decode.replace(seed=decode.seed + n) if decode.sample else decode
        if any(batch_terms):
            return engine.search_batch(batch_ids, limits, batch_decode, batch_terms)
        return engine.search_batch(batch_ids, limits, batch_decode)  # the very call a search without terms makes

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


def output_limit(decode: DecodeConfig, src_len: int, max_positions: int, term_tokens: int = 0) -> int:
    """The most tokens an output may have: a · source length + b, and the `term_tokens` its terms need
    (longest_forms), within the position table."""
    return min(int(decode.max_len_a * src_len + decode.max_len_b) + term_tokens, max_positions - 1)
