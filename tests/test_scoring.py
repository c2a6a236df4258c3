"""sacreBLEU scoring reproduces the published WMT figures, with one or several references."""

import csv

import pytest

from conftest import SHARED, require_shared
from mt.core.lines import read_lines
from mt.core.errors import MtError
from mt.core.scoring import score


def published(folder: str, system: str, metric: str) -> float:
    with open(SHARED / folder / "automatic-scores.zh-en.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["system"] == system and row["metric"] == metric:
                return float(row["score"])
    raise KeyError((folder, system, metric))


@pytest.mark.parametrize("system", ["NiuTrans", "Borderline"])
def test_wmt21_scores_match_the_published_ones(system):
    require_shared()
    hyp = read_lines(SHARED / f"wmt21/system-outputs/newstest2021.zh-en.hyp.{system}.en")
    scores = score(hyp, [read_lines(SHARED / "wmt21/newstest2021.zh-en.en")], "en")
    assert round(scores.bleu, 3) == round(published("wmt21", system, "bleu-A"), 3)
    assert round(scores.chrf, 3) == round(published("wmt21", system, "chrf-A"), 3)
    assert "tok:13a" in scores.bleu_signature and "nrefs:1" in scores.bleu_signature


def test_niutrans_figures_are_the_ones_the_issue_names():
    require_shared()
    hyp = read_lines(SHARED / "wmt21/system-outputs/newstest2021.zh-en.hyp.NiuTrans.en")
    scores = score(hyp, [read_lines(SHARED / "wmt21/newstest2021.zh-en.en")], "en")
    assert scores.lines()[0].startswith("BLEU 31.886 ") and scores.lines()[1].startswith("chrF 61.070 ")


def test_wmt22_with_two_references():
    require_shared()
    hyp = read_lines(SHARED / "wmt22/system-outputs/generaltest2022.zh-en.hyp.NiuTrans.en")
    ref_a = read_lines(SHARED / "wmt22/generaltest2022.zh-en.refA.en")
    ref_b = read_lines(SHARED / "wmt22/generaltest2022.zh-en.refB.en")
    one = score(hyp, [ref_a], "en")
    both = score(hyp, [ref_a, ref_b], "en")
    assert round(one.bleu, 3) == round(published("wmt22", "NiuTrans", "bleu-A"), 3)
    assert round(both.bleu, 3) == round(published("wmt22", "NiuTrans", "bleu-all"), 3) == 30.504
    assert round(both.chrf, 3) == round(published("wmt22", "NiuTrans", "chrf-all"), 3)
    assert "nrefs:2" in both.bleu_signature


def test_chinese_output_is_scored_with_the_zh_tokenizer():
    assert "tok:zh" in score(["我爱你。"], [["我爱你。"]], "zh").bleu_signature


def test_a_reference_of_another_length_is_an_error():
    with pytest.raises(MtError, match="reference 1 has 1 lines but there are 2 hypotheses"):
        score(["a", "b"], [["a"]], "en")
