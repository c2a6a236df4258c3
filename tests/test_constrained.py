"""Constrained search: every output holds its sentence's terms, in any order, with the search's other settings; a
sentence without terms gets what the search without a glossary gives."""

import random

import pytest
import torch

from test_search import MAX_LEN, SOURCES, SRC, EagerToStop, peaky_model, repeats_an_ngram
from mt.config import DecodeConfig
from mt.core.errors import MtError
from mt.data.tokenizer import EOS, UNK
from mt.decode.constrained import Finished, _allocate, _best, constrained_beam_search
from mt.decode.constraints import Terms, WordPieces
from mt.decode.ctranslate2 import CTranslate2Engine
from mt.decode.engine import Hypothesis, search_sources
from mt.decode.searcher import Searcher
from mt.decode.shortlist import Shortlist
from mt.decode.steps import Ensemble

CPU = torch.device("cpu")


def contains(tokens: list[int], form: list[int]) -> bool:
    return any(tokens[i:i + len(form)] == list(form) for i in range(len(tokens) - len(form) + 1))


def holds(tokens: list[int], terms) -> bool:
    """A form of each term among the tokens."""
    return all(any(contains(tokens, form) for form in forms) for forms in terms)


def sentences(terms: list) -> list[Terms | None]:
    """Each sentence's term forms (None or [] for none) as the search takes them."""
    return [Terms.of(t) if t else None for t in terms]


def written(terms, tokens: list[int], words: WordPieces = WordPieces()):
    """The TermState after each token, from an empty output."""
    states = [Terms.of(terms, words).start()]
    for token in tokens:
        states.append(states[-1].advance(token))
    return states[1:]


def test_term_state_meets_terms_in_any_order_and_restarts_a_broken_phrase():
    assert [s.bank for s in written([[[5, 6]]], [5, 7, 5, 6])] == [1, 0, 1, 2]  # 7 breaks the form: it counts no more
    assert [s.bank for s in written([[[5, 6]]], [5, 5, 6])] == [1, 1, 2]        # the second 5 starts it again
    assert [s.done for s in written([[[5, 6]]], [5, 5, 6])] == [False, False, True]
    assert written([[[5, 6]], [[9]]], [9, 5, 6])[-1].done                       # in any order
    assert written([[[5, 6], [7]]], [7])[-1].done                                # either form of a term
    assert [s.done for s in written([[[5]], [[5]]], [5, 8, 5])] == [False, False, True]  # a term twice: twice
    state = Terms.of([[[5, 6]], [[9]]]).start().advance(5)
    assert state.wanted == ([6], [5, 9])                   # goes on with 5 6, or starts a term
    assert state.advance(6).wanted == ([], [9])             # 5 6 met: only 9 is wanted
    assert state.advance(6).advance(9).wanted == ([], []) and state.advance(6).advance(9).done


def test_rows_go_bank_by_bank_after_the_likeliest_candidate_of_all():
    start = Terms.of([[[5, 6, 9]]]).start()
    rows = [start.advance(5), start]  # row 0 is one token into the term, row 1 holds none of it
    pool = {(0, 6): -3.0, (1, 5): -2.5, (1, 7): -1.0, (0, 8): -2.0}
    order = [(c.row, c.token, c.state.bank) for c in _allocate(pool, rows)]
    assert order == [(1, 7, 0), (0, 6, 2), (1, 5, 1), (0, 8, 0)]  # the likeliest, then the best of each bank, top down


def test_an_output_that_holds_a_term_more_often_than_its_sentence_ranks_after_those_that_do_not():
    once, twice = Terms.of([[[5, 6]]]), Terms.of([[[5, 6]], [[5, 6]]])
    assert once.surplus([5, 6, 8, 5, 6]) and not twice.surplus([5, 6, 8, 5, 6]) and not once.surplus([5, 8, 6])
    repeat, single, missing = Hypothesis([5, 6, 8, 5, 6], -1.0), Hypothesis([5, 6, 8], -2.0), Hypothesis([8], -0.5)
    assert _best(Finished([repeat, single], [missing]), 3, once) == [single, repeat, missing]
    assert _best(Finished([repeat, single], [missing]), 3, twice) == [repeat, single, missing]


def test_word_pieces_and_a_form_that_ends_a_word():
    words = WordPieces.of(["<pad>", "▁zu", "mu", "f", "'s", "▁the", "汤姆", "3"])
    assert words.ends == {1, 2, 3, 4, 5, 7} and words.glue == (2, 3, 7)  # "'s" and 汤姆 glue onto no word
    assert [s.word_end for s in written([[[1, 2]]], [1, 2, 5], words)] == [False, True, False]
    assert not written([[[6]]], [6], words)[-1].word_end  # 汤姆 ends in a character of a script without spaces


def test_the_token_after_a_form_that_ends_a_word_does_not_glue_onto_it():
    model = peaky_model()
    plain = constrained_beam_search(model, SRC, MAX_LEN + 4, 4, [Terms.of([[[20]]])] * 3)
    after = {hyps[0].tokens[hyps[0].tokens.index(20) + 1] for hyps in plain if hyps[0].tokens[-1] != 20}
    assert after
    words = WordPieces(ends=frozenset({20}), glue=tuple(after))  # the tokens the model writes after 20: glue
    found = constrained_beam_search(model, SRC, MAX_LEN + 4, 4, [Terms.of([[[20]]], words)] * 3)
    for hyps in found:
        tokens = hyps[0].tokens
        assert 20 in tokens and all(b not in after for a, b in zip(tokens, tokens[1:]) if a == 20)


def random_terms(rng: random.Random) -> list[list[list[int]]]:
    """1–3 terms of 1–3 tokens, the first with a second form at times."""
    terms = [[[rng.randrange(4, 40) for _ in range(rng.randint(1, 3))]] for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        terms[0].append([rng.randrange(4, 40) for _ in range(2)])
    return terms


def test_every_output_holds_every_term():
    model, rng = peaky_model(), random.Random(0)
    for _ in range(20):
        terms = [random_terms(rng) for _ in range(3)]
        found = constrained_beam_search(model, SRC, MAX_LEN + 8, 4, [Terms.of(t) for t in terms], alpha=0.6, nbest=2)
        for hyps, sentence_terms in zip(found, terms):
            assert len(hyps) == 2 and all(holds(h.tokens, sentence_terms) for h in hyps), (sentence_terms, hyps)


@pytest.fixture
def shortlist_file(tmp_path, monkeypatch) -> str:
    """A shortlist of the sources' own pieces and a few others (20, 21, 22): not the terms' 23–25."""
    monkeypatch.chdir(tmp_path)
    Shortlist(torch.full((40, 2), -1), torch.tensor([EOS, UNK, 20, 21, 22]), joint=True, vocab_hash="").save(
        tmp_path / "list.pt")
    return "list.pt"


MIXED_TERMS = [None, [[[20, 21]]], [], [[[22]], [[23, 24], [25]]]]  # for SOURCES: two sentences with terms


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("shortlist", [False, True], ids=["vocabulary", "shortlist"])
def test_a_sentence_without_terms_gets_what_the_search_without_a_glossary_gives(beam, shortlist, shortlist_file):
    searcher = Searcher(peaky_model(), CPU)
    decode = DecodeConfig(beam_size=beam, nbest=1, alpha=0.6, max_len_a=1.0, max_len_b=3,
                          shortlist=shortlist_file if shortlist else "")
    plain = searcher.search(SOURCES, decode)
    found = searcher.search(SOURCES, decode, sentences(MIXED_TERMS))
    for n in (0, 2):
        assert [h.tokens for h in found[n]] == [h.tokens for h in plain[n]]
        assert [h.score for h in found[n]] == pytest.approx([h.score for h in plain[n]], abs=1e-5)
    for n in (1, 3):  # the shortlist widened by the terms' ids: 23–25 are written
        assert len(found[n]) == 1 and holds(found[n][0].tokens, MIXED_TERMS[n])


def test_greedy_searches_sentences_with_terms_in_a_beam():
    searcher = Searcher(peaky_model(), CPU)
    decode = DecodeConfig(beam_size=1, max_len_a=1.0, max_len_b=3)
    greedy = searcher.search(SOURCES, decode)
    terms = [[[[t] for t in range(4, 40) if t not in hyps[0].tokens][:1]] for hyps in greedy]  # one unwritten token
    found = searcher.search(SOURCES, decode, sentences(terms))
    assert all(len(hyps) == 1 and holds(hyps[0].tokens, t) for hyps, t in zip(found, terms))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_cached_constrained_search_equals_full_recomputation(alpha):
    model, terms = peaky_model(), [Terms.of([[[7, 8]], [[20]]])] * 3
    cached = constrained_beam_search(model, SRC, MAX_LEN + 5, 4, terms, alpha=alpha, nbest=3)
    full = constrained_beam_search(model, SRC, MAX_LEN + 5, 4, terms, alpha=alpha, nbest=3, use_cache=False)
    for a, b in zip(cached, full):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-6, abs=1e-5)


def test_nbest_outputs_with_terms_are_distinct_sorted_and_all_hold_the_terms():
    model, terms = peaky_model(), [[[[9, 10]], [[30], [31, 32]]], [[[12]]], [[[25, 26, 27]]]]
    model.generator = EagerToStop(model.generator)  # each output ends once it holds its terms: n-best differ in where
    found = constrained_beam_search(model, SRC, MAX_LEN + 6, 5, [Terms.of(t) for t in terms], alpha=0.6, nbest=5)
    for hyps, sentence_terms in zip(found, terms):
        assert len(hyps) == 5 and len({tuple(h.tokens) for h in hyps}) == 5
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert all(holds(h.tokens, sentence_terms) for h in hyps)


def test_no_repeated_ngram_min_len_and_length_limits_hold_with_terms():
    model, terms = peaky_model(vocab=12), [[[[5, 6]]], [[[7], [8, 9]], [[10]]], [[[11, 4]]]]
    limits = torch.tensor([20, 12, 16])
    found = constrained_beam_search(model, SRC, limits, 3, [Terms.of(t) for t in terms], nbest=3, min_len=20,
                                    no_repeat_ngram_size=3)
    for hyps, sentence_terms, limit in zip(found, terms, limits.tolist()):
        assert all(holds(h.tokens, sentence_terms) and not repeats_an_ngram(h.tokens, 3) for h in hyps)
        assert all(len(h.tokens) == limit for h in hyps)  # min_len 20 above every limit: each output runs to it
    eager = peaky_model()
    eager.generator = EagerToStop(eager.generator)  # ends at once where it may
    found = constrained_beam_search(eager, SRC, torch.tensor([9, 9, 9]), 4, [Terms.of([[[20, 21]]])] * 3, min_len=4)
    assert all(4 <= len(hyps[0].tokens) <= 9 and holds(hyps[0].tokens, [[[20, 21]]]) for hyps in found)


def test_a_term_longer_than_the_sources_limit_still_fits():
    searcher = Searcher(peaky_model(), CPU)
    decode = DecodeConfig(beam_size=2, nbest=2, max_len_a=0.0, max_len_b=1)  # outputs of 1 token, without terms
    terms = [[[[20, 21, 22]], [[23]]]] * len(SOURCES)
    for hyps in searcher.search(SOURCES, decode, sentences(terms)):
        assert all(len(h.tokens) <= 1 + 4 and holds(h.tokens, terms[0]) for h in hyps)


def test_an_ensemble_searches_with_terms():
    decode, terms = DecodeConfig(beam_size=4, nbest=2, alpha=0.6), sentences([[[[20, 21]]], None, [[[22]], [[30]]], []])
    alone = Searcher(peaky_model(), CPU).search(SOURCES, decode, terms)
    twice = Searcher(Ensemble([peaky_model(), peaky_model()], [0.5, 0.5]), CPU).search(SOURCES, decode, terms)
    assert [[h.tokens for h in hyps] for hyps in twice] == [[h.tokens for h in hyps] for hyps in alone]
    assert [h.score for hyps in twice for h in hyps] == pytest.approx([h.score for hyps in alone for h in hyps],
                                                                     abs=1e-5)


class RecordingEngine:
    """An engine that finds empty outputs and keeps each call it gets: (sources, limits, terms or "no terms")."""

    max_positions = 12

    def __init__(self):
        self.calls = []

    def workers(self, decode):
        return 1

    def search_batch(self, src_ids, limits, decode, *terms):
        self.calls.append((src_ids, limits, *(terms or ["no terms"])))
        return [[Hypothesis([], 0.0)] for _ in src_ids]


def test_a_batch_without_terms_is_searched_as_without_a_glossary_and_terms_lengthen_their_sentences_limits():
    engine, decode = RecordingEngine(), DecodeConfig(max_tokens=6, max_len_a=1.0, max_len_b=3)
    sources = [[5, EOS], [6, EOS], [7, 8, 9, 10, EOS]]  # two batches: the short sources, the long one
    terms = sentences([None, [], [[[20, 21, 22], [23]], [[24]]]])
    search_sources(engine, sources, decode, terms)
    assert engine.calls == [([[5, EOS], [6, EOS]], [5, 5], "no terms"),
                            ([[7, 8, 9, 10, EOS]], [11], [terms[2]])]  # 1·5 + 3 + 3 + 1 (≤ 11)


def test_the_ctranslate2_engine_refuses_terms_in_one_line():
    engine = CTranslate2Engine.__new__(CTranslate2Engine)  # no export loaded: the terms are refused before any search
    with pytest.raises(MtError, match="^--glossary needs --engine mt: CTranslate2 has no constrained search$"):
        engine.search_batch([[5, EOS]], [4], DecodeConfig(), sentences([[[[20]]]]))
