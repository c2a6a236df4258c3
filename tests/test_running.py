"""The running search (continuous batching): a source searched among others that come and go gives what it gives
searched offline."""

import random

import pytest
import torch

from mt.data.tokenizer import EOS
from mt.decode.running import RunningSearch
from mt.decode.search import beam_search, greedy_search
from mt.decode.steps import Ensemble
from test_search import peaky_model


def sources(count: int, seed: int = 0) -> list[list[int]]:
    draw = random.Random(seed)
    return [[draw.randrange(5, 40) for _ in range(draw.randrange(1, 12))] + [EOS] for _ in range(count)]


def offline(model, ids: list[int], limit: int, beam: int, **options) -> list:
    """The source searched alone, offline."""
    src, max_len = torch.tensor([ids]), torch.tensor([limit])
    if beam == 1:
        return greedy_search(model, src, max_len, alpha=options.get("alpha", 0.0),
                             min_len=options.get("min_len", 0),
                             no_repeat_ngram_size=options.get("no_repeat_ngram_size", 0))
    return beam_search(model, src, max_len, beam, **options)[0]


def run_staggered(search: RunningSearch, src: list[list[int]], limits: list[int], seed: int = 1) -> dict:
    """The sources admitted a few at a time at random steps, while others run; → each source's outputs."""
    draw, waiting, done = random.Random(seed), list(range(len(src))), {}
    while waiting or len(search):
        if waiting and (not len(search) or draw.random() < 0.3):
            joining = waiting[:draw.randrange(1, 4)]
            waiting = waiting[len(joining):]
            search.admit(joining, [src[i] for i in joining], [limits[i] for i in joining])
        for key, hypotheses in search.step():
            done[key] = hypotheses
    return done


@pytest.mark.parametrize("beam, options", [
    (1, {}), (1, {"alpha": 0.6, "min_len": 3}), (1, {"no_repeat_ngram_size": 2}),
    (4, {"alpha": 0.0, "nbest": 1}), (4, {"alpha": 0.6, "nbest": 3}), (3, {"min_len": 2, "no_repeat_ngram_size": 2}),
])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_a_source_joining_a_running_search_gets_its_offline_outputs(beam, options, norm):
    model = peaky_model(norm=norm)
    src = sources(30)
    limits = [min(int(1.5 * len(ids)) + 3, 63) for ids in src]
    done = run_staggered(RunningSearch(model, beam, **options), src, limits)
    assert sorted(done) == list(range(len(src)))
    for i, ids in enumerate(src):
        expected = offline(model, ids, limits[i], beam, **options)
        assert [h.tokens for h in done[i]] == [h.tokens for h in expected], i
        assert [h.score for h in done[i]] == pytest.approx([h.score for h in expected], rel=1e-6, abs=1e-5)
        assert all(len(h.tokens) <= limits[i] for h in done[i])
        for got, want in zip(done[i], expected):
            assert got.log_probs == pytest.approx(want.log_probs, rel=1e-6, abs=1e-5)


def test_sources_leave_as_soon_as_they_are_done_and_long_runs_reuse_their_buffers():
    """A short source admitted beside a long one is given back before the long one ends; many sources in turn
    over hundreds of steps keep the key and value buffers at a bounded size."""
    model = peaky_model()
    search = RunningSearch(model, 2)
    search.admit(["long"], [sources(1)[0]], [60])
    search.step()
    search.admit(["short"], [[7, EOS]], [1])
    answered = [key for key, _ in search.step()]
    assert answered == ["short"] and len(search) == 1
    for n, ids in enumerate(sources(200, seed=3)):  # about four running at a time
        search.admit([n], [ids], [8])
        search.step()
        search.step()
    while len(search):
        search.step()
    capacity = search.caches[0].slots[0].k.size(1)
    assert search.now > 400 and capacity <= 128


def test_an_ensemble_runs_as_offline():
    model = Ensemble([peaky_model(), peaky_model(vocab=40, d_ff=24)], [0.3, 0.7])
    src = sources(12, seed=5)
    limits = [12] * len(src)
    done = run_staggered(RunningSearch(model, 3, nbest=2), src, limits)
    for i, ids in enumerate(src):
        assert [h.tokens for h in done[i]] == [h.tokens for h in offline(model, ids, 12, 3, nbest=2)]
