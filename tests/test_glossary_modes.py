"""Soft glossary terms: each term a translation misses is written over the words its source aligns to, with either
engine (the same output from mt's and from its CTranslate2 export); a sentence without a term is left as it is."""

import re

import pytest

from mt.data.glossary import parse_glossary
from mt.data.terms import TermFinder
from mt.decode.translator import load_translator
from mt.text.glossary_modes import GlossaryUse, _replaced

SENTENCES = ["我爱你。", "汤姆说他明天会来。", "他走了。", "我们明天去北京。"]
GLOSSARY = "我\tThomas\n北京\tzumu\n明天\tthe day after\n"


def test_words_are_written_over_from_the_right_each_once():
    assert _replaced("I love you.", [(0, 1, "Thomas")]) == "Thomas love you."
    assert _replaced("i love you.", [(7, 10, "zumu")]) == "i love zumu."
    assert _replaced("We go there.", [(0, 2, "they")]) == "They go there."  # the first word of a capitalised text
    assert _replaced("We go.", [(3, 3, "now")]) == "We now go."              # between words: a word of its own
    assert _replaced("We go.", [(5, 5, "now")]) == "We go now."
    assert _replaced("We go.", [(3, 5, "walk"), (3, 5, "run")]) == "We run walk."  # two terms on one word: both
    assert _replaced("A new year!", [(10, 11, "toke")]) == "A new year toke!"  # punctuation stays
    assert _replaced("I drink juice.", [(8, 13, "duli"), (8, 8, "tuti")]) == "I drink tuti duli."
    assert _replaced("...", [(0, 3, "zumu"), (1, 2, "the day")]) == "zumu.the day.."


@pytest.fixture(scope="module")
def engines(trained_runs, tmp_path_factory):
    """mt's engine and the CTranslate2 export of the same trained tiny model, greedy (where their outputs agree)."""
    pytest.importorskip("ctranslate2")
    from mt.exchange.ctranslate2 import export_ctranslate2

    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    export = tmp_path_factory.mktemp("soft") / "ct2"
    export_ctranslate2(checkpoint, export)
    return [load_translator(checkpoint, "cpu"), load_translator(export, "cpu", "ctranslate2", compute_type="float32")]


def test_soft_terms_hold_with_either_engine_and_leave_other_sentences_alone(engines):
    outputs = []
    for translator in engines:
        decode = translator.decode.replace(beam_size=1, min_len=3)  # outputs of some words, to write over
        use = GlossaryUse(TermFinder(parse_glossary(GLOSSARY, "g.tsv"), translator.tokenizer), soft=True)
        plain = [hyps[0].text for hyps in translator.translate(SENTENCES, decode)]
        soft = [hyps[0] for hyps in use.translate(translator, SENTENCES, decode)]
        matches = [use.finder.find(sentence) for sentence in SENTENCES]
        assert [[t.source for t in s.terms] for s in soft] == [[m.entry.source for m in found] for found in matches]
        assert sum(map(bool, matches)) >= 2 and not matches[2]
        assert all(t.used for s in soft for t in s.terms), [(s.text, s.terms) for s in soft]
        assert re.search(r"\bzumu\b", soft[3].text)
        assert soft[2].text == plain[2]  # no term: the translation as it was
        outputs.append([s.text for s in soft])
    assert outputs[0] == outputs[1]
