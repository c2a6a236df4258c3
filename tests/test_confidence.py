"""Confidence: the log-probabilities mt's search gives with its outputs are those a forced pass reads; the signals
see loops, copies and lengths; the estimator learns, is kept beside its checkpoint, goes with an export and is left
aside for another model; `mt confidence`, `mt translate --scores` and `mt evaluate --scores` give what they say."""

import json
import logging
import math

import pytest
import torch

from conftest import write_lines
from mt.config import DecodeConfig
from mt.core.errors import MtError
from mt.data.tokenizer import EOS
from mt.decode.confidence import SIGNALS, Confidence, Estimator, NormalFile, signals, untrained, words_of
from mt.decode.confidence_fit import rank_correlation
from mt.decode.searcher import Searcher
from mt.decode.translator import load_translator
from mt.exchange.checkpoint import estimator_path
from test_cli import mt_in_process as mt
from test_score import SOURCES, model

CPU = torch.device("cpu")
TATOEBA_DEV = 60  # dev lines for the fitted estimators below: at least confidence_fit.FEWEST


@pytest.mark.parametrize("beam", [1, 4])
def test_the_search_gives_each_token_s_log_probability_as_a_forced_pass_reads_it(beam):
    searcher = Searcher(model(), CPU)
    decode = DecodeConfig(beam_size=beam, nbest=beam, alpha=0.6, max_len_a=1.0, max_len_b=3)
    found = searcher.search(SOURCES, decode)
    for src, hyps in zip(SOURCES, found):
        for h in hyps:
            ended = len(h.log_probs) == len(h.tokens) + 1  # else cut at its length limit, without EOS
            assert len(h.log_probs) in (len(h.tokens), len(h.tokens) + 1)
            [forced] = searcher.score_batch([src], [h.tokens + [EOS]])
            assert h.log_probs == pytest.approx(forced[:len(h.log_probs)], abs=1e-4)
            assert sum(h.log_probs) / ((5 + len(h.log_probs)) / 6) ** 0.6 == pytest.approx(h.score, abs=1e-4)
            assert ended or len(h.tokens) == len(src) + 3  # its limit, a · source length + b


def test_a_translation_s_confidence_from_the_search_is_the_one_the_forced_pass_reads(trained_runs):
    translator = load_translator(trained_runs[0] / "checkpoints" / "best.pt", "cpu")
    lines = ["我爱你。", "他是我的朋友。", "我们明天去北京。", ""]
    for beam in (1, 4):
        found = [hyps[0] for hyps in translator.translate(lines, translator.decode.replace(beam_size=beam))]
        read = translator.confidences(lines, [t.text for t in found])
        for line, t, forced in zip(lines, found, read):
            pieces = translator.tokenizer.encode_tgt([t.text])[0][1:-1]
            if line and t.text and translator.tokenizer.decode_tgt([pieces])[0] == t.text:
                assert t.confidence.score == pytest.approx(forced.score, abs=1e-4)
                assert [w for w, _ in t.confidence.words] == [w for w, _ in forced.words]
        assert found[-1].confidence == Confidence(1.0, [])  # an empty line: nothing to get wrong


def test_words_gather_their_pieces_and_sum_their_log_probabilities():
    words = words_of(["▁I", "▁lo", "ve", "▁", ",", "▁it", "."], [-0.1, -1.0, -0.5, -0.2, -0.3, -0.4, -0.6])
    assert [w for w, _ in words] == ["I", "love", ",", "it."]
    assert [lp for _, lp in words] == pytest.approx([-0.1, -1.5, -0.5, -1.0])
    assert words_of([], []) == []


def _signals(src: list[str], tgt: list[str], log_probs: list[float] | None = None) -> dict[str, float]:
    return dict(zip(SIGNALS, signals(src, tgt, log_probs or [-0.5] * (len(tgt) + 1))))


def test_signals_see_a_loop_a_copy_and_an_unlikely_token():
    source = ["▁我", "爱", "你", "们"]
    fine = _signals(source, ["▁I", "▁love", "▁you"])
    loop = _signals(source, ["▁I", "▁love", "▁I", "▁love", "▁I", "▁love"])
    copy = _signals(source, ["▁我", "爱", "你"])
    assert fine["repetition"] == 0 and loop["repetition"] > 0.5
    assert fine["copy_rate"] == 0 and copy["copy_rate"] == 1
    assert fine["length_ratio"] == pytest.approx(math.log(4 / 5))  # EOS counted on both sides
    assert loop["length_ratio"] > fine["length_ratio"]
    assert fine["mean_log_prob"] == pytest.approx(-0.5) and fine["log_prob_spread"] == pytest.approx(0.0)
    doubt = _signals(source, ["▁I", "▁love", "▁you"], [-0.1, -5.0, -0.1, -0.1])
    assert doubt["min_log_prob"] == -5.0 and doubt["unlikely_share"] == 0.25 and doubt["min_word_log_prob"] == -5.0
    cut = _signals(source, ["▁I", "▁love", "▁you"], [-0.5] * 3)  # at its length limit: no EOS
    assert cut["mean_log_prob"] == pytest.approx(-0.5)
    empty = _signals([], [])  # an empty line's: EOS alone on both sides
    assert empty["length_ratio"] == 0 and empty["mean_word_log_prob"] == -0.5


def test_the_estimator_learns_a_ranking_the_untrained_score_misses_and_keeps_it_in_its_file(tmp_path):
    torch.manual_seed(1)
    features = torch.randn(400, len(SIGNALS))
    labels = torch.sigmoid(2 * features[:, SIGNALS.index("length_ratio")] - features[:, SIGNALS.index("repetition")])
    estimator = Estimator.fit(features, labels)
    assert rank_correlation(estimator(features), labels) > 0.9 > abs(rank_correlation(untrained(features), labels))
    assert ((estimator(features) >= 0) & (estimator(features) <= 1)).all()
    path = tmp_path / "best.confidence.json"
    estimator.save(path, NormalFile(length_ratio=(-1.0, 1.0), scripts=["LATIN"]), {"step": 8, "vocab_hash": "v"},
                   {"sentences": 400})
    loaded, file = Estimator.load(path)
    assert torch.allclose(loaded(features), estimator(features), atol=1e-6) and file.model["step"] == 8
    path.write_text('{"format": 1}', encoding="utf-8")
    with pytest.raises(MtError, match="best.confidence.json: not a confidence estimator"):
        Estimator.load(path)


def test_a_text_s_confidence_weighs_its_sentences_by_their_words():
    joined = Confidence.joined([Confidence(1.0, [("a", 0.9)] * 3), Confidence(0.0, [("b", 0.1)])])
    assert joined.score == pytest.approx(0.75) and len(joined.words) == 4
    assert Confidence.joined([]).score == 1.0
    assert Confidence(0.123456, [("a", 0.5)]).json() == {"confidence": 0.1235, "words": [["a", 0.5]]}


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    from conftest import TATOEBA

    out = tmp_path_factory.mktemp("dev")
    for lang in ("zh", "en"):
        lines = (TATOEBA / f"dev.{lang}").read_text(encoding="utf-8").splitlines()
        write_lines(out / f"dev.{lang}", lines[:TATOEBA_DEV])
    return out


@pytest.fixture(scope="module")
def fitted(trained_runs, dev, tmp_path_factory):
    """A copy of the tiny trained run's checkpoint, with its estimator fitted by `mt confidence`."""
    checkpoint = tmp_path_factory.mktemp("fitted") / "best.pt"
    checkpoint.write_bytes((trained_runs[0] / "checkpoints" / "best.pt").read_bytes())
    result = mt("confidence", "--checkpoint", str(checkpoint), "--src", str(dev / "dev.zh"), "--ref",
                str(dev / "dev.en"), cwd=checkpoint.parent)
    assert result.exit_code == 0, result.output
    return checkpoint


def refused(result, message: str) -> bool:
    """The command stopped on a user's mistake (MtError: one line, a non-zero exit) that says `message`."""
    return isinstance(result.exception, MtError) and message in str(result.exception)


def test_mt_confidence_writes_the_estimator_beside_its_checkpoint_which_translate_then_uses(fitted):
    path = estimator_path(fitted)
    assert path == fitted.parent / "best.confidence.json"
    file = json.loads(path.read_text(encoding="utf-8"))
    assert file["signals"] == list(SIGNALS) and file["fitted"]["sentences"] == TATOEBA_DEV
    translator = load_translator(fitted, "cpu")
    assert translator.estimator is not None
    sources, outputs = ["我爱你。", "你好。"], ["I love you.", "Hello."]
    features, _ = translator.signals(sources, outputs)
    assert [c.score for c in translator.confidences(sources, outputs)] == \
        pytest.approx(translator.estimator(features).tolist())


def test_an_estimator_fitted_for_another_step_is_left_aside_with_a_warning(fitted, tmp_path, caplog):
    other = tmp_path / "best.pt"
    other.write_bytes(fitted.read_bytes())
    file = json.loads(estimator_path(fitted).read_text(encoding="utf-8"))
    estimator_path(other).write_text(json.dumps({**file, "model": {**file["model"], "step": 1}}), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        translator = load_translator(other, "cpu")
    assert translator.estimator is None and "fitted for another model" in caplog.text
    [sure] = translator.confidences(["我爱你。"], ["I love you."])
    features, _ = translator.signals(["我爱你。"], ["I love you."])
    assert sure.score == pytest.approx(untrained(features).item())  # the untrained score: exp(mean log-prob)


def test_an_export_takes_its_checkpoint_s_estimator_and_reads_the_same_signals(fitted, tmp_path):
    pytest.importorskip("ctranslate2")
    from mt.exchange.ctranslate2 import export_ctranslate2

    export_ctranslate2(fitted, tmp_path / "ct2")
    ours = load_translator(fitted, "cpu")
    theirs = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    assert theirs.estimator is not None
    sources, outputs = ["我爱你。", "他是我的朋友。", ""], ["I love you.", "He is my friend.", ""]
    assert torch.allclose(theirs.signals(sources, outputs)[0], ours.signals(sources, outputs)[0], atol=1e-3)
    assert [c.score for c in theirs.confidences(sources, outputs)] == \
        pytest.approx([c.score for c in ours.confidences(sources, outputs)], abs=1e-3)


def test_translate_and_evaluate_write_scores(fitted, dev, tmp_path):
    scores = tmp_path / "scores.jsonl"
    done = mt("translate", "--checkpoint", str(fitted), "--scores", str(scores), "我爱你。你好。", "",
              cwd=tmp_path)
    assert done.exit_code == 0, done.output
    lines = [json.loads(line) for line in scores.read_text(encoding="utf-8").splitlines()]
    assert [line["line"] for line in lines] == [1, 2] and 0 <= lines[0]["confidence"] <= 1
    assert lines[1] == {"line": 2, "confidence": 1.0, "words": [], "failure": None}
    nbest = mt("translate", "--checkpoint", str(fitted), "--beam", "2", "--nbest", "2", "我爱你。", cwd=tmp_path)
    assert nbest.exit_code == 0 and all(0 <= float(line.split(" ||| ")[3]) <= 1 for line in nbest.stdout.splitlines())
    html = mt("translate", "--checkpoint", str(fitted), "--format", "html", "--scores", str(tmp_path / "no.jsonl"),
              "<p>我爱你</p>", cwd=tmp_path)
    assert refused(html, "--scores gives each line's confidence: plain text only")
    evaluated = mt("evaluate", "--checkpoint", str(fitted), "--src", str(dev / "dev.zh"), "--ref", str(dev / "dev.en"),
                   "--scores", str(tmp_path / "test.jsonl"), cwd=tmp_path)
    assert evaluated.exit_code == 0, evaluated.output
    assert "Spearman's ρ with sentence chrF" in evaluated.stdout and f"on {TATOEBA_DEV} sentences" in evaluated.stdout
    rows = [json.loads(line) for line in (tmp_path / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == TATOEBA_DEV and {"line", "confidence", "chrf", "words"} <= rows[0].keys()


def test_mt_confidence_refuses_a_dev_set_too_small_and_an_ensemble(fitted, tmp_path):
    write_lines(tmp_path / "few.zh", ["我爱你。"] * 3)
    write_lines(tmp_path / "few.en", ["I love you."] * 3)
    few = mt("confidence", "--checkpoint", str(fitted), "--src", str(tmp_path / "few.zh"), "--ref",
             str(tmp_path / "few.en"), cwd=tmp_path)
    assert refused(few, "needs at least 50")
    assert refused(mt("confidence", "--checkpoint", str(fitted), "--checkpoint", str(fitted), cwd=tmp_path),
                   "one checkpoint")
