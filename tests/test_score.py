"""Forced decoding (`mt score`): a pair's score is the sum of the model's log-probabilities of its target's tokens,
EOS included; batching changes none; search's own outputs score what search said; an ensemble scores the weighted
mean of its models'; the CTranslate2 engine scores as mt does."""

import subprocess
import sys

import pytest
import torch

from conftest import tiny_model, write_lines
from mt.config import DecodeConfig
from mt.data.batching import pad_ids
from mt.data.tokenizer import BOS, EOS
from mt.decode.score import PairScore, score_pairs
from mt.decode.engine import output_limit
from mt.decode.searcher import Searcher
from mt.decode.steps import Ensemble
from mt.decode.translator import load_translator

CPU = torch.device("cpu")
SOURCES = [[5, 6, 7, 8, EOS], [9, 10, EOS], [11, EOS], [12, 13, 14, 15, 16, 17, EOS]]
TARGETS = [[20, 21, EOS], [22, 23, 24, 25, 26, 27, EOS], [EOS], [28, 29, 30, EOS]]  # pieces then EOS


def model(seed: int = 0):
    """An untrained model with a sharp output distribution (log-probabilities far from uniform); another `seed`,
    another model."""
    found = tiny_model(vocab=40, tie_embeddings=False)
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in found.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
        found.generator.proj.weight.mul_(8.0)
    return found


def teacher_forced(model, src: list[int], tgt: list[int]) -> list[float]:
    """The model's log-probability of each target token, from its logits for the pair alone."""
    with torch.no_grad():
        logits = model(pad_ids([src]), pad_ids([[BOS] + tgt[:-1]]))[0]                      # [T, V]
    return logits.log_softmax(dim=-1)[torch.arange(len(tgt)), tgt].tolist()


def test_a_score_is_the_sum_of_the_teacher_forced_log_probabilities_however_the_pairs_are_batched():
    searcher = Searcher(model(), CPU)
    expected = [teacher_forced(searcher.models[0], src, tgt) for src, tgt in zip(SOURCES, TARGETS)]
    batched = searcher.score_batch(SOURCES, TARGETS)  # one padded batch of different lengths
    for found, wanted in zip(batched, expected):
        assert found == pytest.approx(wanted, abs=1e-5)
    for max_tokens in (1, 14, 1000):  # each pair alone, a few batches, one batch
        scores = score_pairs(searcher, SOURCES, TARGETS, max_tokens)
        assert [s.tokens for s in scores] == [len(tgt) for tgt in TARGETS]  # pieces and EOS; an empty target: EOS
        assert [s.log_prob for s in scores] == pytest.approx([sum(lp) for lp in expected], abs=1e-4)
        assert [s.mean for s in scores] == pytest.approx([sum(lp) / len(lp) for lp in expected], abs=1e-4)
    assert score_pairs(searcher, [], [], 1000) == []
    assert PairScore(-3.0, 2).mean == -1.5


@pytest.mark.parametrize("models", [1, 2])
@pytest.mark.parametrize("beam", [1, 4])
def test_search_s_own_outputs_score_what_search_said(beam, models, trained_runs, corpus_dir):
    checkpoints = [trained_runs[0] / "checkpoints" / name for name in ("last.pt", "step-00000004.pt")][:models]
    translator = load_translator(checkpoints, "cpu", weights=[3.0, 1.0][:models] if models > 1 else None)
    src_ids = translator.encode((corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines())
    # alpha 0: a score is the log-probability; min_len: the barely trained model's outputs run on before their EOS
    decode = translator.decode.replace(beam_size=beam, nbest=1, alpha=0.0, min_len=3)
    found = [best for best, in translator.engine.search(src_ids, decode)]
    limits = [output_limit(decode, len(src), translator.engine.max_positions) for src in src_ids]
    assert all(3 <= len(h.tokens) < limit for h, limit in zip(found, limits))  # each ended with EOS
    scores = score_pairs(translator.engine, src_ids, [h.tokens + [EOS] for h in found], decode.max_tokens)
    assert [s.log_prob for s in scores] == pytest.approx([h.score for h in found], rel=1e-4)


@pytest.mark.parametrize("beam", [1, 4])
def test_an_output_cut_at_its_limit_scores_its_tokens_without_eos_as_search_did(beam):
    searcher = Searcher(model(), CPU)
    found = searcher.search(SOURCES, DecodeConfig(beam_size=beam, nbest=1, alpha=0.0, max_len_a=0.0, max_len_b=3))
    outputs = [best.tokens for best, in found]
    assert all(len(tokens) == 3 for tokens in outputs)  # the untrained model runs on to its limit
    per_token = searcher.score_batch(SOURCES, [tokens + [EOS] for tokens in outputs])
    assert [sum(lp[:-1]) for lp in per_token] == pytest.approx([best.score for best, in found], rel=1e-4)


def test_an_ensemble_scores_the_weighted_mean_of_its_models_log_probabilities():
    first, second = model(), model(seed=1)
    each = [Searcher(m, CPU).score_batch(SOURCES, TARGETS) for m in (first, second)]
    mixed = Searcher(Ensemble([first, second], [0.75, 0.25]), CPU).score_batch(SOURCES, TARGETS)
    for found, a, b in zip(mixed, *each):
        assert found == pytest.approx([0.75 * x + 0.25 * y for x, y in zip(a, b)], abs=1e-5)
        assert a != pytest.approx(b, abs=1e-3)  # two different models


def test_the_ctranslate2_engine_scores_as_mt_does(trained_runs, corpus_dir, tmp_path):
    pytest.importorskip("ctranslate2")
    from mt.exchange.ctranslate2 import export_ctranslate2

    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    export_ctranslate2(checkpoint, tmp_path / "ct2")
    sources = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines() + ["", "我爱你"]
    targets = (corpus_dir / "test.en").read_text(encoding="utf-8").splitlines() + ["Nothing.", ""]
    ours = load_translator(checkpoint, "cpu").score(sources, targets)
    ct2 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    theirs = ct2.score(sources, targets)
    assert [s.tokens for s in theirs] == [s.tokens for s in ours]  # EOS included, BOS not, on both
    assert [s.mean for s in theirs] == pytest.approx([s.mean for s in ours], abs=1e-3)


def test_translator_score_cuts_overlong_lines_with_a_warning(trained_runs, caplog):
    translator = load_translator(trained_runs[0] / "checkpoints" / "last.pt", "cpu")
    limit = translator.config.model.max_positions
    long = " ".join(["我爱你"] * limit)
    scores = translator.score([long, "我爱你"], ["I love you.", " ".join(["I love you."] * limit)], first_line=7)
    assert scores[1].tokens == limit - 1  # what search could output at most: pieces, then EOS
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(w.startswith("source line 7 has") and f"scoring its first {limit}" in w for w in warnings)
    assert any(w.startswith("target line 8 has") and f"scoring its first {limit - 1}" in w for w in warnings)


def test_mt_score_writes_one_line_per_pair_and_refuses_misaligned_files(trained_runs, tmp_path):
    checkpoint = str(trained_runs[0] / "checkpoints" / "last.pt")
    src = write_lines(tmp_path / "pairs.zh", ["我爱你。", "", "他走了。"])
    tgt = write_lines(tmp_path / "pairs.en", ["I love you.", "Nothing.", ""])
    done = run_mt("score", "--src", str(src), "--tgt", str(tgt), "--checkpoint", checkpoint, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(len(line.split("\t")) == 2 for line in lines)
    log_prob, mean = map(float, lines[2].split("\t"))
    assert log_prob == mean < 0  # an empty target: its EOS alone
    assert "scored 3 pairs" in done.stderr and "sentences/s" in done.stderr
    short = write_lines(tmp_path / "short.en", ["I love you."])
    refused = run_mt("score", "--src", str(src), "--tgt", str(short), "--checkpoint", checkpoint, cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.splitlines() == [f"mt: error: --src {src} has 3 lines but --tgt {short} has 1: give one "
                                           "translation per source line"]


def run_mt(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mt", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
