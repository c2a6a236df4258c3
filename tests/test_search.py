"""Search: the cache changes nothing, beam search finds the best output, batching changes no sentence."""

import threading

import pytest
import torch

from conftest import tiny_model
from mt.config import Config, DecodeConfig
from mt.decode.packing import PackedWeights
from mt.decode.shortlist import Shortlist
from mt.decode.engine import SHARED_ROWS, Hypothesis, equal_shares
from mt.decode.search import beam_search, greedy_search, length_penalty
from mt.decode.searcher import Searcher
from mt.decode.steps import Ensemble, StepDecoder, block_repeated_ngrams
from mt.data.tokenizer import BOS, EOS, PAD, UNK
from mt.model.config import ModelConfig
from mt.decode.translator import Translator, translate_stream


def peaky_model(vocab: int = 40, norm: str = "post", **shape):
    """An untrained model with a sharp output distribution, so that outputs vary and ties do not happen."""
    model = tiny_model(vocab=vocab, norm=norm, tie_embeddings=False, **shape)
    with torch.no_grad():
        model.generator.proj.weight.mul_(8.0)
    return model


SRC = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD], [11, EOS, PAD, PAD, PAD]])
MAX_LEN = torch.tensor([8, 6, 5])


@pytest.mark.parametrize("norm, positions", [("post", "sinusoidal"), ("pre", "sinusoidal"), ("post", "learned")])
def test_cached_greedy_equals_full_recomputation(norm, positions):
    model = peaky_model(norm=norm, positions=positions)
    cached, full = greedy_search(model, SRC, MAX_LEN), greedy_search(model, SRC, MAX_LEN, use_cache=False)
    assert [h.tokens for h in cached] == [h.tokens for h in full]
    for a, b in zip(cached, full):
        assert a.score == pytest.approx(b.score, abs=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_cached_beam_equals_full_recomputation(alpha):
    model = peaky_model()
    cached = beam_search(model, SRC, MAX_LEN, beam_size=4, alpha=alpha, nbest=3)
    full = beam_search(model, SRC, MAX_LEN, beam_size=4, alpha=alpha, nbest=3, use_cache=False)
    for a, b in zip(cached, full):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize("library", ["onednn", "mkl"])
def test_cached_search_with_packed_weights_equals_full_recomputation(library):
    """8 rows, greedy or 2 sentences × 4 beams: a step size whose weights are packed (mt/decode/packing.py)."""
    model, packed = peaky_model(), PackedWeights(library)
    decoding = [model]
    src, max_len = SRC.repeat(3, 1)[:8], MAX_LEN.repeat(3)[:8]
    full = greedy_search(model, src, max_len, use_cache=False)
    with packed.applied(decoding, rows=8):
        cached = greedy_search(model, src, max_len)
    assert [h.tokens for h in cached] == [h.tokens for h in full]
    assert [h.score for h in cached] == pytest.approx([h.score for h in full], abs=1e-5)
    full = beam_search(model, src[:2], max_len[:2], beam_size=4, alpha=0.6, nbest=4, use_cache=False)
    with packed.applied(decoding, rows=8):
        cached = beam_search(model, src[:2], max_len[:2], beam_size=4, alpha=0.6, nbest=4)
    for a, b in zip(cached, full):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_each_sentence_keeps_its_own_length_budget(beam):
    model = peaky_model()
    found = beam_search(model, SRC, torch.tensor([4, 1, 2]), beam_size=beam, nbest=beam)
    for hyps, limit in zip(found, [4, 1, 2]):
        assert all(len(h.tokens) <= limit for h in hyps)
    greedy = greedy_search(model, SRC, torch.tensor([4, 1, 2]))
    assert all(len(h.tokens) <= limit for h, limit in zip(greedy, [4, 1, 2]))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_of_one_is_greedy_and_a_score_means_the_same_in_both(alpha):
    model = peaky_model()
    greedy = greedy_search(model, SRC, MAX_LEN, alpha=alpha)
    beam = beam_search(model, SRC, MAX_LEN, beam_size=1, alpha=alpha)
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam]
    assert [h.score for h in greedy] == pytest.approx([b[0].score for b in beam], abs=1e-5)
    if alpha:  # normalised by the length penalty, not the raw log-probability
        raw = greedy_search(model, SRC, MAX_LEN)
        assert all(g.score != pytest.approx(r.score) for g, r in zip(greedy, raw))


def brute_force_best(model, src, max_len: int, alpha: float) -> float:
    """Score every possible output (every token sequence ending in EOS, or max_len long) and keep the best."""
    decoder = StepDecoder(model, src, use_cache=False, max_len=max_len)
    words = [t for t in range(model.generator.proj.out_features) if t not in (PAD, BOS, EOS)]
    best = float("-inf")
    frontier = [((), 0.0)]  # (prefix, its log-probability), grown one token at a time
    for length in range(max_len + 1):
        grown = []
        for prefix, lp in frontier:
            if length == max_len:  # stopped by the length limit
                best = max(best, lp / length_penalty(length, alpha))
                continue
            log_probs = decoder.log_probs(torch.tensor([[BOS, *prefix]]))[0]
            best = max(best, (lp + log_probs[EOS].item()) / length_penalty(length + 1, alpha))
            grown += [(prefix + (w,), lp + log_probs[w].item()) for w in words]
        frontier = grown
    return best


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_a_wide_beam_finds_the_brute_force_best(alpha):
    model = tiny_model(vocab=8, tie_embeddings=False)  # 5 real tokens (UNK included) + EOS
    src, max_len = torch.tensor([[7, 5, 6, EOS]]), torch.tensor([4])
    best = brute_force_best(model, src, 4, alpha)
    assert beam_search(model, src, max_len, beam_size=64, alpha=alpha)[0][0].score == pytest.approx(best, abs=1e-5)
    if alpha == 0.0:  # same scale as greedy's unnormalised score: a case where searching pays
        assert greedy_search(model, src, max_len)[0].score < best - 0.1


def test_nbest_lists_are_sorted_and_distinct():
    for hyps in beam_search(peaky_model(), SRC, MAX_LEN, beam_size=5, alpha=0.6, nbest=5):
        assert len(hyps) == 5
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 5


class FakePieces:
    @staticmethod
    def id_to_piece(i: int) -> str:
        return f"▁{i}"


class FakeTokenizer:
    """Digits as tokens, so that a test can translate "sentences" with an untrained model."""

    src = tgt = FakePieces()

    def encode_src(self, lines):
        return [[5 + int(c) for c in line] + [EOS] for line in lines]

    def decode_tgt(self, ids):
        return [" ".join(map(str, seq)) for seq in ids]


@pytest.mark.parametrize("beam", [1, 3])
def test_batching_and_sorting_change_no_output_and_keep_the_order(beam):
    model = peaky_model()
    lines = ["1234567", "12", "", "98765", "3", "4444444444", "55"]
    decode = DecodeConfig(beam_size=beam, alpha=0.6, max_tokens=12, max_len_a=1.0, max_len_b=3)
    translator = Translator(Searcher(model, torch.device("cpu")), FakeTokenizer(), Config(model=model.config))
    together = translator.translate(lines, decode)
    alone = [translator.translate([line], decode)[0] for line in lines]
    assert [t[0].text for t in together] == [t[0].text for t in alone]
    assert [t[0].score for t in together] == pytest.approx([t[0].score for t in alone], abs=1e-5)
    assert together[2][0].text == ""


class MeetingSearcher(Searcher):
    """mt's engine, whose batches wait for each other: a search of several batches fails unless `meet` of them
    are searched at once. It keeps the torch threads each batch had."""

    def __init__(self, model, meet: int):
        super().__init__(model, torch.device("cpu"))
        self.meeting, self.threads = threading.Barrier(meet, timeout=30), []

    def search_batch(self, src_ids, limits, decode):
        self.threads.append(torch.get_num_threads())
        self.meeting.wait()
        return super().search_batch(src_ids, limits, decode)


@pytest.mark.parametrize("decode", [DecodeConfig(beam_size=1), DecodeConfig(beam_size=3, nbest=2, alpha=0.6),
                                    DecodeConfig(sample=True, temperature=2.0), DecodeConfig(shortlist="list.pt")],
                         ids=["greedy", "beam", "sample", "shortlist"])
def test_batches_searched_at_once_give_what_one_at_a_time_gives(decode, tmp_path, monkeypatch):
    model = peaky_model()
    monkeypatch.chdir(tmp_path)  # a shortlist of the sources' own pieces and a few others
    Shortlist(torch.full((40, 2), -1), torch.tensor([EOS, UNK, 20, 21, 22]), joint=True, vocab_hash="").save(
        tmp_path / "list.pt")
    lines = ["1234567", "12", "98765", "3", "4444444444", "55"]
    # 4 batches, searched two by two; no retries of the failure guard, which are searches of their own
    decode = decode.replace(max_tokens=12, max_len_a=1.0, max_len_b=3, guard=False)
    alone = Translator(Searcher(model, torch.device("cpu")), FakeTokenizer(), Config(model=model.config))
    at_once = Translator(MeetingSearcher(model, meet=2), FakeTokenizer(), Config(model=model.config))
    threads = torch.get_num_threads()
    expected = alone.translate(lines, decode.replace(parallel_batches=1))
    found = at_once.translate(lines, decode.replace(parallel_batches=2))
    assert [[t.text for t in best] for best in found] == [[t.text for t in best] for best in expected]
    assert [t.score for best in found for t in best] == pytest.approx(
        [t.score for best in expected for t in best], abs=1e-5)
    assert at_once.engine.threads == [max(1, threads // 2)] * 4 and torch.get_num_threads() == threads
    assert not any("forward" in vars(m) for m in model.modules())  # the last batch out unpacked the weights


def test_batches_searched_at_once_are_one_per_thread_by_default():
    searcher = Searcher(peaky_model(), torch.device("cpu"))
    threads = torch.get_num_threads()
    assert searcher.workers(DecodeConfig()) == min(threads, 4)
    assert searcher.workers(DecodeConfig(parallel_batches=3)) == 3
    assert searcher.workers(DecodeConfig(parallel_batches=1)) == 1


def test_threads_get_two_batches_each_of_at_least_shared_rows_sentences():
    assert equal_shares(sources=1000, batches=1, workers=2) == 4
    assert equal_shares(sources=1000, batches=3, workers=2) == 8
    assert equal_shares(sources=3 * SHARED_ROWS, batches=1, workers=2) == 3
    assert equal_shares(sources=2 * SHARED_ROWS - 1, batches=1, workers=2) == 1  # one batch, on both threads


class WorkerCountingSearcher(Searcher):
    """mt's engine, keeping the number of sources in each batch it searches."""

    def __init__(self, model):
        super().__init__(model, torch.device("cpu"))
        self.batches = []

    def search_batch(self, src_ids, limits, decode):
        self.batches.append(len(src_ids))
        return super().search_batch(src_ids, limits, decode)


@pytest.mark.parametrize("decode", [DecodeConfig(beam_size=1), DecodeConfig(beam_size=3, alpha=0.6),
                                    DecodeConfig(sample=True)], ids=["greedy", "beam", "sample"])
def test_a_batch_of_many_sources_is_shared_out_with_the_same_outputs_but_not_a_sample(decode):
    model = peaky_model()
    lines = [str(1 + i % 9) * (1 + i % 5) for i in range(2 * SHARED_ROWS)]  # one batch by the token budget
    decode = decode.replace(max_len_a=1.0, max_len_b=3, guard=False)  # no retries: only the batches counted here
    shared = Translator(WorkerCountingSearcher(model), FakeTokenizer(), Config(model=model.config))
    found = shared.translate(lines, decode.replace(parallel_batches=2))
    expected = Translator(Searcher(model, torch.device("cpu")), FakeTokenizer(), Config(model=model.config)
                          ).translate(lines, decode.replace(parallel_batches=1))
    if decode.sample:  # its batches are the token budget's, whatever the machine's threads
        assert shared.engine.batches == [2 * SHARED_ROWS]
    else:
        assert len(shared.engine.batches) == 2 and sum(shared.engine.batches) == 2 * SHARED_ROWS
    assert [t[0].text for t in found] == [t[0].text for t in expected]
    assert [t[0].score for t in found] == pytest.approx([t[0].score for t in expected], abs=1e-5)


class RecordingEngine:
    """An engine that finds empty outputs and keeps each batch it is given, with its limits."""

    max_positions = 10

    def __init__(self):
        self.batches = []

    def workers(self, decode):
        return 1

    def search_batch(self, src_ids, limits, decode):
        self.batches.append((src_ids, limits))
        return [[Hypothesis([], 0.0)] for _ in src_ids]


def test_the_translator_gives_an_engine_length_sorted_batches_with_each_sentences_limit():
    engine = RecordingEngine()
    translator = Translator(engine, FakeTokenizer(), Config(model=ModelConfig(max_positions=10)))
    translator.translate(["1234567", "12", "", "98765", "3"],
                         DecodeConfig(max_tokens=12, max_len_a=1.0, max_len_b=3, guard=False))  # no retries
    assert engine.batches == [  # at most 12 padded tokens each; limits 1 · length + 3, at most 10 - 1
        ([[8, EOS], [6, 7, EOS]], [5, 6]),
        ([[14, 13, 12, 11, 10, EOS]], [9]),
        ([[6, 7, 8, 9, 10, 11, 12, EOS]], [9]),
    ]


def test_streaming_reads_one_chunk_ahead_at_most():
    consumed = []

    def lines():
        for i in range(10):
            consumed.append(i)
            yield str(i)

    results = translate_stream(lambda chunk, first: [[chunk_line] for chunk_line in chunk], lines(), chunk_size=4)
    assert next(results) == ["0"] and len(consumed) == 4  # the first output comes before the rest is read
    assert [r[0] for r in results] == [str(i) for i in range(1, 10)]


class EagerToStop(torch.nn.Module):
    """A generator that favours EOS, so that outputs end at once unless min_len forbids it."""

    def __init__(self, generator):
        super().__init__()
        self.generator = generator

    def forward(self, hidden):
        logits = self.generator(hidden)
        logits[..., EOS] += 1000.0
        return logits


def test_min_len_forces_outputs_to_run_on():
    model = peaky_model()
    model.generator = EagerToStop(model.generator)
    assert [h.tokens for h in greedy_search(model, SRC, torch.tensor([6, 6, 6]))] == [[], [], []]
    assert [len(h.tokens) for h in greedy_search(model, SRC, torch.tensor([6, 6, 6]), min_len=4)] == [4, 4, 4]
    for hyps in beam_search(model, SRC, torch.tensor([6, 6, 6]), beam_size=3, min_len=4):
        assert len(hyps[0].tokens) == 4


def test_block_repeated_ngrams_forbids_only_the_token_that_would_repeat_one():
    tokens = torch.tensor([[5, 6, 7, 5, 6], [5, 6, 7, 8, 9]])
    for n, banned in ((3, [7]), (2, [7]), (1, [5, 6, 7])):
        log_probs = torch.zeros(2, 12)
        block_repeated_ngrams(log_probs, tokens, n)
        assert torch.isinf(log_probs[0]).nonzero().flatten().tolist() == banned
        assert not torch.isinf(log_probs[1]).any() or n == 1  # row 2's context never occurred before (n > 1)


def repeats_an_ngram(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("beam", [1, 3])
def test_no_output_repeats_an_ngram_when_asked(beam):
    model = peaky_model(vocab=12)  # few words and long outputs: plain search repeats n-grams
    src, limit = SRC, torch.tensor([20, 20, 20])
    plain = beam_search(model, src, limit, beam_size=beam, min_len=20)
    assert any(repeats_an_ngram(hyps[0].tokens, 2) for hyps in plain)
    blocked = beam_search(model, src, limit, beam_size=beam, no_repeat_ngram_size=2)
    assert not any(repeats_an_ngram(hyps[0].tokens, 2) for hyps in blocked)
    if beam == 1:
        greedy = greedy_search(model, src, limit, no_repeat_ngram_size=2)
        assert [h.tokens for h in greedy] == [hyps[0].tokens for hyps in blocked]
        cached = greedy_search(model, src, limit, no_repeat_ngram_size=2, use_cache=False)
        assert [h.tokens for h in greedy] == [h.tokens for h in cached]


def second_model(vocab: int = 40) -> torch.nn.Module:
    """Another peaky model of the same vocabulary, with other weights."""
    torch.manual_seed(1)
    model = peaky_model(vocab=vocab)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return model.eval()


@pytest.mark.parametrize("beam", [1, 4])
def test_an_ensemble_of_a_model_with_itself_is_that_model(beam):
    model = peaky_model()
    copy = peaky_model()  # the same weights in another instance: its own cache
    alone = Searcher(model, torch.device("cpu")).search(SOURCES, DecodeConfig(beam_size=beam, nbest=beam, alpha=0.6))
    twice = Searcher(Ensemble([model, copy], [0.5, 0.5]), torch.device("cpu")).search(
        SOURCES, DecodeConfig(beam_size=beam, nbest=beam, alpha=0.6))
    assert [[(h.tokens, h.score) for h in hyps] for hyps in twice] == [[(h.tokens, h.score) for h in hyps]
                                                                        for hyps in alone]


def test_an_ensemble_steps_with_the_weighted_mean_of_its_models_log_probabilities_cached_or_not():
    first, second = peaky_model(), second_model()
    ensemble = Ensemble([first, second], [0.25, 0.75])
    prefixes = torch.tensor([[BOS]] * 3)
    with torch.inference_mode():
        mixed = StepDecoder(ensemble, SRC, use_cache=True, max_len=8).log_probs(prefixes)
        each = [StepDecoder(model, SRC, use_cache=True, max_len=8).log_probs(prefixes) for model in (first, second)]
    words = [t for t in range(40) if t not in (PAD, BOS)]
    torch.testing.assert_close(mixed[:, words], 0.25 * each[0][:, words] + 0.75 * each[1][:, words])
    assert not torch.allclose(each[0][:, words], each[1][:, words])  # two different models
    cached = beam_search(ensemble, SRC, MAX_LEN, beam_size=4, nbest=3)
    full = beam_search(ensemble, SRC, MAX_LEN, beam_size=4, nbest=3, use_cache=False)
    assert [[h.tokens for h in hyps] for hyps in cached] == [[h.tokens for h in hyps] for hyps in full]


SOURCES = [[5, 6, 7, 8, EOS], [9, 10, EOS], [11, EOS], [12, 13, 14, 15, 16, 17, EOS]]


def test_a_draw_follows_the_models_distribution_narrowed_by_top_k_top_p_and_temperature():
    from mt.decode.sampling import TokenSampling

    probs = torch.tensor([0.5, 0.3, 0.1, 0.07, 0.03])
    log_probs = probs.log().expand(40_000, -1)

    def frequencies(top_k=0, top_p=1.0, temperature=1.0):
        sampling = TokenSampling(top_k, top_p, temperature, torch.Generator().manual_seed(0))
        return torch.bincount(sampling.draw(log_probs), minlength=5) / log_probs.size(0)

    close = dict(rtol=0, atol=0.015)
    torch.testing.assert_close(frequencies(), probs, **close)
    torch.testing.assert_close(frequencies(top_k=2), torch.tensor([0.625, 0.375, 0, 0, 0]), **close)
    torch.testing.assert_close(frequencies(top_p=0.8), torch.tensor([0.625, 0.375, 0, 0, 0]), **close)  # 0.5+0.3
    torch.testing.assert_close(frequencies(top_p=0.81), torch.cat([probs[:3] / 0.9, torch.zeros(2)]), **close)
    torch.testing.assert_close(frequencies(temperature=0.5), probs ** 2 / (probs ** 2).sum(), **close)


def test_sampling_is_seeded_varied_and_greedy_at_top_k_one():
    model = peaky_model()
    lines = ["1234567", "12", "98765", "3", "4444444444", "55"]
    translator = Translator(Searcher(model, torch.device("cpu")), FakeTokenizer(), Config(model=model.config))
    decode = DecodeConfig(sample=True, temperature=2.0, max_tokens=12, max_len_a=1.0, max_len_b=3)

    def texts(**change):
        return [t[0].text for t in translator.translate(lines, decode.replace(**change))]

    assert texts(seed=1) == texts(seed=1)
    assert texts(seed=1) != texts(seed=2)
    greedy = [t[0] for t in translator.translate(lines, decode.replace(sample=False, beam_size=1))]
    top_one = [t[0] for t in translator.translate(lines, decode.replace(top_k=1))]
    assert [h.text for h in top_one] == [h.text for h in greedy]
    assert [h.score for h in top_one] == pytest.approx([h.score for h in greedy], abs=1e-5)  # the model's, untempered
