"""Beam search that holds each sentence's terms (hard lexical constraints, a glossary's): every output of a sentence
holds a target form of each of its terms (mt/decode/constraints.py), in any order, unless none can within its limit.

Dynamic beam allocation (Post & Vilar 2018) with fairseq's unordered constraints (Hu et al. 2019). At each step, a
sentence's candidates are (1) its best 2K (row, token) over its K rows, as beam_search takes them; (2) each row's
best token; (3) each row's tokens that go on with its open form, and its best token that starts a form of an unmet
term. Each candidate falls into a bank, the term tokens its output holds (TermState.bank); the K rows are dealt
out bank by bank: the best of the top bank, the best of the next one, …, then the second best of each, and so on
(empty banks take no row), so that likelier hypotheses holding fewer term tokens never crowd out those holding more.
One departure: the likeliest candidate of all takes the first row, whatever its bank. Dealt by bank, a beam of 4
leaves the lower banks a row or two, and the path the model prefers, which would write the term where it fits,
could be pruned for one that wrote it early: "I think his important opinion is very important." where the
model's own "I think his opinion is very important." holds the term "important".

EOS is open only to a row whose output holds every term, and the pieces that glue onto a word are closed to a row
whose last token completed a form that ends a word (TermState.word_end). At its output limit a sentence's
candidates all finish, those that miss a term too: they fill its n-best only where outputs that hold every term
cannot. Among those that hold every term, one that holds a term more often than the sentence has it ranks after
those that do not (Terms.surplus): where the search found both, the repeat is the model's mistake. A sentence
stops once it has n-best outputs that hold every term and no open row that holds every term can enter them, or
once it has as many outputs that hold every term as it has open rows (_done).
Scores mean what they mean in beam_search (mt/decode/search.py).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from mt.decode.constraints import Terms, TermState
from mt.decode.engine import Hypothesis
from mt.decode.search import length_penalty
from mt.decode.steps import Ensemble, StepDecoder
from mt.model.transformer import Transformer
from mt.data.tokenizer import BOS, EOS, PAD

Pool = dict[tuple[int, int], float]  # one sentence's candidates: (row, token id) → score


class Candidate(NamedTuple):
    score: float       # the log-probability of the row's output and this token
    row: int           # of the batch's N·K rows
    token: int         # target id
    state: TermState   # the row's state after the token


class Finished(NamedTuple):
    """One sentence's finished outputs: those that hold every term, and those that miss one (at the limit)."""

    met: list[Hypothesis]
    unmet: list[Hypothesis]


@torch.inference_mode()  # no autograd bookkeeping at all, not even version counters
def constrained_beam_search(model: Transformer | Ensemble, src: Tensor, max_len: Tensor, beam_size: int,
                            terms: list[Terms], alpha: float = 0.0, nbest: int = 1, use_cache: bool = True,
                            min_len: int = 0, no_repeat_ngram_size: int = 0, vocab: Tensor | None = None,
                            generators: list[nn.Module] | None = None) -> list[list[Hypothesis]]:
    """Beam search of src [B,S] within max_len [B] whose outputs hold each sentence's `terms` (one Terms each, all
    of one target vocabulary: the first one's WordPieces serve them all).
    Returns the `nbest` best outputs per sentence, best first: those that hold every term, then, only where they are
    fewer than nbest, the best of those that do not. With `vocab` (a shortlist), as beam_search; a term's id outside
    it cannot be written."""
    batch, k, device = src.size(0), beam_size, src.device
    decoder = StepDecoder(model, src, use_cache, int(max_len.max()), min_len, no_repeat_ngram_size, k, vocab,
                          generators)
    ys = torch.full((batch * k, 1), BOS, dtype=torch.long, device=device)          # [B*K, t]
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0                                                              # one live beam at first
    states = [[sentence.start()] * k for sentence in terms]                        # [B][K]
    glue = decoder.columns(torch.tensor(terms[0].words.glue, dtype=torch.long, device=device))
    glue = glue[glue >= 0]                                                          # [G] in the shortlist
    finished = [Finished([], []) for _ in range(batch)]
    active = list(range(batch))                                                     # sentences still searching
    limits = max_len.tolist()
    for step in range(int(max_len.max())):
        rows = [state for sentence in active for state in states[sentence]]        # [N*K]
        log_probs = decoder.log_probs(ys)                                           # [N*K, V]
        if decoder.eos >= 0:  # an output ends only once it holds every term
            log_probs[torch.tensor([not state.done for state in rows], device=device), decoder.eos] = float("-inf")
        if glue.numel() and any(state.word_end for state in rows):  # a form that ends a word is not glued onto
            word_ends = torch.tensor([state.word_end for state in rows], device=device)
            log_probs[word_ends.nonzero()[:, :1], glue] = float("-inf")
        pools = _candidates(log_probs, scores, rows, decoder, k)
        survivors, still_active = [], []
        for n, sentence in enumerate(active):
            at_limit = step + 1 >= limits[sentence]
            kept = _extend(_allocate(pools[n], rows), ys, k, at_limit, alpha, finished[sentence])
            if kept and not _done(finished[sentence].met, kept, nbest, limits[sentence], alpha):
                survivors += kept + [kept[0]._replace(score=float("-inf"), token=PAD)] * (k - len(kept))  # dead rows
                states[sentence] = [candidate.state for candidate in survivors[-k:]]
                still_active.append(sentence)
        if not still_active:
            break
        index = torch.tensor([c.row for c in survivors], device=device)
        ys = torch.cat([ys.index_select(0, index), torch.tensor([c.token for c in survivors], device=device)[:, None]],
                       dim=1)
        scores = torch.tensor([c.score for c in survivors], device=device).view(-1, k)
        decoder.select(index, same_sentences=len(still_active) == len(active))
        active = still_active
    return [_best(sentence, nbest, sentence_terms) for sentence, sentence_terms in zip(finished, terms)]


def _candidates(log_probs: Tensor, scores: Tensor, rows: list[TermState], decoder: StepDecoder, k: int) -> list[Pool]:
    """Each of the N sentences' candidates: (1) its best 2K over its rows, (2) each row's best token, (3) each row's
    wanted tokens (TermState.wanted: all that go on with its open form, the best that starts an unmet term)."""
    sentences = scores.size(0)
    totals = scores.view(-1, 1)                                                     # [N*K, 1]
    width = min(2 * k, log_probs.size(-1))
    row_best, row_columns = log_probs.topk(width, dim=-1)                           # [N*K, 2K]
    candidates = (totals + row_best).view(sentences, k * width)                     # [N, K*2K]
    top_scores, top_index = candidates.topk(min(2 * k, k * width), dim=-1)          # [N, 2K]
    top_rows = top_index // width + torch.arange(sentences, device=scores.device)[:, None] * k
    top_tokens = decoder.ids(row_columns.view(sentences, k * width).gather(1, top_index))
    pools: list[Pool] = []
    for n_scores, n_rows, n_tokens in zip(top_scores.tolist(), top_rows.tolist(), top_tokens.tolist()):
        pools.append(dict(zip(zip(n_rows, n_tokens), n_scores)))
    best_scores, best_tokens = (totals[:, 0] + row_best[:, 0]).tolist(), decoder.ids(row_columns[:, 0]).tolist()
    for row, (token, score) in enumerate(zip(best_tokens, best_scores)):
        pools[row // k][row, token] = score
    for row, token, score in _wanted(log_probs, totals, rows, decoder):
        pools[row // k][row, token] = score
    return pools


def _wanted(log_probs: Tensor, totals: Tensor, rows: list[TermState],
            decoder: StepDecoder) -> list[tuple[int, int, float]]:
    """(row, token, score) of each row's tokens that go on with its open form, and of its best token that starts a
    form of an unmet term: the scores of all P wanted tokens in one gather."""
    wanted = [state.wanted for state in rows]
    pairs = [(row, token) for row, (go_on, starts) in enumerate(wanted) for token in go_on + starts]
    if not pairs:
        return []
    row_index = torch.tensor([row for row, _ in pairs], device=log_probs.device)               # [P]
    columns = decoder.columns(torch.tensor([token for _, token in pairs], device=log_probs.device))  # [P]
    found = totals[row_index, 0] + log_probs[row_index, columns.clamp(min=0)]
    found = found.masked_fill(columns < 0, float("-inf")).tolist()                  # outside a shortlist: unwritable
    score = dict(zip(pairs, found))
    chosen = []
    for row, (go_on, starts) in enumerate(wanted):
        chosen += [(row, token, score[row, token]) for token in go_on]
        if starts:
            best = max(starts, key=lambda token: score[row, token])
            chosen.append((row, best, score[row, best]))
    return chosen


def _allocate(pool: Pool, rows: list[TermState]) -> list[Candidate]:
    """A sentence's candidates in the order they get its rows: the likeliest of all first, whatever its bank; then
    by rank inside their bank ("stripe"), from the top bank down: the best of each bank, the second best of each, …"""
    ranked = [Candidate(score, row, token, rows[row].advance(token)) for (row, token), score in pool.items()
              if score > float("-inf")]
    if not ranked:
        return []
    ranked.sort(key=lambda c: (-c.state.bank, -c.score))
    seen: dict[int, int] = {}  # bank → its candidates so far
    stripes = []
    for candidate in ranked:
        stripes.append(seen.get(candidate.state.bank, 0))
        seen[candidate.state.bank] = stripes[-1] + 1
    ordered = [candidate for _, candidate in sorted(zip(stripes, ranked), key=lambda pair: pair[0])]  # stable
    likeliest = max(ordered, key=lambda c: c.score)
    return [likeliest, *(candidate for candidate in ordered if candidate is not likeliest)]


def _extend(ordered: list[Candidate], ys: Tensor, k: int, at_limit: bool, alpha: float,
            finished: Finished) -> list[Candidate]:
    """Walk one sentence's candidates in allocation order: one ending in EOS (or reaching the length limit)
    finishes; the others stay open, up to k of them. Returns the open ones."""
    kept = []
    for candidate in ordered:
        if len(kept) == k:
            break
        if candidate.token == EOS or at_limit:
            tokens = ys[candidate.row, 1:].tolist() + ([] if candidate.token == EOS else [candidate.token])
            hypothesis = Hypothesis(tokens, candidate.score / length_penalty(ys.size(1), alpha))
            (finished.met if candidate.state.done else finished.unmet).append(hypothesis)
        else:
            kept.append(candidate)
    return kept


def _done(met: list[Hypothesis], kept: list[Candidate], nbest: int, max_len: int, alpha: float) -> bool:
    """True when no open hypothesis that holds every term can enter the n-best of those that hold every term any
    more, or when at least as many outputs hold every term as rows are open (as fairseq stops). An open row that
    misses a term is not waited for: it has not paid for the term yet, so it scores above the outputs that hold it,
    and waiting until it falls below them would keep the search going to the output limit."""
    if len(met) < nbest:
        return False
    holding = [candidate.score for candidate in kept if candidate.state.done]
    if len(met) >= len(kept) or not holding:
        return True
    worst_kept = sorted(h.score for h in met)[-nbest]
    best_possible = max(holding) / length_penalty(max_len, alpha) if alpha > 0 else max(holding)
    return best_possible <= worst_kept


def _best(finished: Finished, nbest: int, terms: Terms) -> list[Hypothesis]:
    """The nbest best outputs that hold every term, best first, those that hold a term more often than the sentence
    has it after the others (Terms.surplus); then, if they are fewer, the best of the outputs that miss a term."""
    met = sorted(finished.met, key=lambda h: (terms.surplus(h.tokens), -h.score))[:nbest]
    return met + sorted(finished.unmet, key=lambda h: -h.score)[:nbest - len(met)]
