"""Decoding: from source ids to output ids, greedy, by beam search, or by sampling (greedy search with a
TokenSampling, mt/decode/sampling.py).

Both take each step's log-probabilities from a StepDecoder (mt/decode/steps.py), which encodes the source once and
feeds the decoder one new token per step, keeping each layer's keys and values in a DecoderCache
(mt/decode/cache.py); use_cache=False decodes the whole prefix again at every step instead: the reference that the
cached path must match. An output is its tokens up to and including EOS, or `max_len` tokens without one.

A hypothesis's score means the same in both searches: its log-probability (EOS included) divided by GNMT's
length penalty ((5 + length) / 6) ** alpha, its length counting EOS. With alpha 0 it is the log-probability.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mt.decode.engine import Hypothesis
from mt.decode.sampling import TokenSampling
from mt.decode.steps import Ensemble, StepDecoder
from mt.model.transformer import Transformer
from mt.data.tokenizer import BOS, EOS, PAD


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
    steps = []                                                             # each step's chosen log-probs [B]
    for step in range(int(max_len.max())):  # finished rows stay in the batch: every step has B rows
        log_probs = decoder.log_probs(ys)                                  # [B, V]
        choice = log_probs.argmax(dim=-1) if sampling is None else sampling.draw(log_probs)   # [B]: columns
        steps.append(log_probs.gather(-1, choice[:, None]).squeeze(-1))
        log_prob += steps[-1].masked_fill(finished, 0.0)
        next_token = decoder.ids(choice).masked_fill(finished, PAD)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        finished |= (next_token == EOS) | (step + 1 >= max_len)
        if finished.all():
            break
    hypotheses = []
    for row, lp, token_lps in zip(ys[:, 1:].tolist(), log_prob.tolist(), torch.stack(steps, dim=1).tolist()):
        tokens = _strip(row)
        length = len(tokens) + (EOS in row)
        hypotheses.append(Hypothesis(tokens, lp / length_penalty(length, alpha), token_lps[:length]))
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
    token_lps = torch.zeros(batch * k, 0, device=device)                          # [B*K, t-1]: each token's
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0                                                              # one live beam at first
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    active = list(range(batch))                                                     # sentences still searching
    limits = max_len.tolist()
    for step in range(int(max_len.max())):
        log_probs = decoder.log_probs(ys)                                           # [N*K, V]
        top_scores, top_rows, top_tokens, top_lps = best_continuations(log_probs, scores, decoder.ids)
        survivors, still_active = [], []                                            # (row, token, score, lp)
        for n, sentence in enumerate(active):
            ranked = zip(top_scores[n], top_rows[n], top_tokens[n], top_lps[n])
            at_limit = step + 1 >= limits[sentence]
            kept = extend_hypotheses(ranked, ys, token_lps, k, at_limit, alpha, finished[sentence])
            if kept and not search_done(finished[sentence], kept[0][2], nbest, limits[sentence], alpha):
                survivors += kept + [(kept[0][0], PAD, float("-inf"), 0.0)] * (k - len(kept))  # dead rows: -inf
                still_active.append(sentence)
        if not still_active:
            break
        rows_kept, tokens, kept_scores, kept_lps = zip(*survivors)
        index = torch.tensor(rows_kept, device=device)
        ys = torch.cat([ys.index_select(0, index), torch.tensor(tokens, device=device)[:, None]], dim=1)
        token_lps = torch.cat([token_lps.index_select(0, index), torch.tensor(kept_lps, device=device)[:, None]], 1)
        scores = torch.tensor(kept_scores, device=device).view(-1, k)
        decoder.select(index, same_sentences=len(still_active) == len(active))
        active = still_active
    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]


def best_continuations(log_probs: Tensor, scores: Tensor, ids=lambda columns: columns) -> tuple[list, ...]:
    """The best 2K continuations of each of N sentences' K hypotheses: log_probs [N*K, V] of the next token, scores
    [N, K] of the hypotheses so far (-inf: a dead row) → per sentence, best first, lists of 2K scores, rows (of the
    N*K), token ids (`ids`: columns → ids) and the tokens' own log-probabilities."""
    n, k = scores.shape
    # a sentence's best 2K continuations (room after EOS) are among each of its rows' best 2K: ranking those
    # alone leaves out a sum and a ranking over all K·V
    width = min(2 * k, log_probs.size(-1))
    row_best, row_tokens = log_probs.topk(width, dim=-1)                        # [N*K, 2K]
    candidates = (scores.view(-1, 1) + row_best).view(n, k * width)             # [N, K*2K]
    top_scores, top_index = candidates.topk(min(2 * k, k * width), dim=-1)      # [N, 2K]
    top_rows = top_index // width + torch.arange(n, device=scores.device)[:, None] * k
    top_tokens = ids(row_tokens.view(n, k * width).gather(1, top_index))
    top_lps = row_best.view(n, k * width).gather(1, top_index)                   # [N, 2K]: the tokens' own
    return top_scores.tolist(), top_rows.tolist(), top_tokens.tolist(), top_lps.tolist()


def extend_hypotheses(ranked, ys: Tensor, token_lps: Tensor, k: int, at_limit: bool, alpha: float,
            finished: list[Hypothesis]) -> list[tuple[int, int, float, float]]:
    """Walk one sentence's candidates (score, row, token, the token's log-probability), best first: one ending in
    EOS (or reaching the length limit) joins `finished`; the others stay open, up to k of them. Returns the open
    ones as (row, token, score, the token's log-probability)."""
    kept = []
    for score, row, token, lp in ranked:
        if score == float("-inf") or len(kept) == k:
            break
        if token == EOS or at_limit:
            tokens = ys[row, 1:].tolist() + ([] if token == EOS else [token])
            length = ys.size(1)  # the tokens so far (BOS aside) and this one
            finished.append(Hypothesis(tokens, score / length_penalty(length, alpha), token_lps[row].tolist() + [lp]))
        else:
            kept.append((row, token, score, lp))
    return kept


def search_done(finished: list[Hypothesis], best_open: float, nbest: int, max_len: int, alpha: float) -> bool:
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
