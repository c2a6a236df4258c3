"""The failure guard: each way of failing is found, a translation that passes is never searched again, a failed one
is searched again and replaced where the retry passes, and one that still fails is kept, marked or emptied."""

import math

import pytest

from conftest import tiny_config
from mt.decode.engine import Hypothesis
from mt.decode.guard import MARK, Normal, failure, loops, retried
from mt.decode.translator import Translator

NORMAL = Normal((math.log(0.6), math.log(2.5)), ("LATIN",))
SOURCE = ["▁我们", "明天", "去", "北京", "。"]


@pytest.mark.parametrize("pieces, text, cut, expected", [
    (["▁We", "'", "ll", "▁go", "▁to", "▁Beijing", "▁tomorrow", "."], "We'll go to Beijing tomorrow.", False, None),
    (["▁我们", "明天", "去", "北京", "。"], "我们明天去北京。", False, "script"),
    (["▁Beijing", "▁Beijing", "▁Beijing", "▁tomorrow"], "Beijing Beijing Beijing tomorrow", False, "loop"),
    (["▁we", "▁go", "▁we", "▁go", "▁we", "▁go"], "we go we go we go", False, "loop"),
    (["▁We", "▁go", "▁to", "▁Beijing", "▁to", "▁Beijing"], "We go to Beijing to Beijing", True, "cut"),
    (["▁We", "."], "We.", False, "short"),
    ([], "", False, "short"),
    (["▁We"] + ["▁go", "▁to", "▁Beijing", "▁and", "▁then", "▁to", "▁Shanghai", "▁by", "▁train"] * 2, "…", False,
     "long"),
])
def test_each_way_of_failing_is_found(pieces, text, cut, expected):
    assert failure(SOURCE, pieces, text, cut, NORMAL) == expected


def test_a_copy_of_a_source_in_the_target_s_script_is_found_and_a_one_word_sentence_may_stay_as_it_is():
    latin = ["▁Tom", "▁and", "▁Mary", "▁went", "▁home"]
    assert failure(latin, latin, "Tom and Mary went home", False, NORMAL) == "copy"
    assert failure(["▁Tom", "▁and", "▁Mary", "▁went"], ["▁Tom", "▁and", "▁Mary", "▁left"], "Tom and Mary left",
                   False, NORMAL) == "copy"  # three words of four found in the source
    assert failure(["▁OK"], ["▁OK"], "OK", False, NORMAL) is None
    assert failure(SOURCE, SOURCE, "我们明天去北京。", False, Normal()) is None  # the scripts unknown: not checked


def test_a_short_source_has_no_length_check_and_a_long_loop_counts_as_one():
    assert failure(["▁好"], ["▁Fine", "▁,", "▁thank", "▁you", "▁very", "▁much"], "Fine, thank you very much", False,
                   NORMAL) is None
    assert not loops(["▁a", "▁b", "▁c", "▁a", "▁b", "▁d"])
    assert loops(["▁a", "▁b", "▁c", "▁d"] * 3)


def test_normal_lengths_and_scripts_come_from_the_references():
    normal = Normal.of_references([10] * 100, [12] * 99 + [40], ["It is fine, 很好."] * 100)
    assert normal.length_ratio[0] == pytest.approx(math.log(13 / 11) - 0.25)
    assert normal.length_ratio[1] == pytest.approx(math.log(41 / 11) + 0.25)
    assert normal.scripts == ("CJK", "LATIN")


def test_a_retry_is_greedy_with_a_longer_limit_and_never_repeats_a_trigram(tatoeba_decode):
    again = retried(tatoeba_decode)
    assert again.beam_size == 1 and again.alpha == 0 and again.no_repeat_ngram_size == 2
    assert again.max_len_a == tatoeba_decode.max_len_a + 1
    assert retried(tatoeba_decode.replace(no_repeat_ngram_size=0)).no_repeat_ngram_size == 3
    assert retried(tatoeba_decode.replace(nbest=3)).beam_size == 3  # an n-best list's worth


@pytest.fixture
def tatoeba_decode():
    from mt.config import DecodeConfig

    return DecodeConfig(beam_size=4, alpha=0.6, no_repeat_ngram_size=2)


class Scripted:
    """An engine whose outputs are scripted: `first` for the decode's own search, `again` for a retry's."""

    max_positions, compute_type = 64, "float32"

    def __init__(self, tokenizer, first: dict[str, str], again: dict[str, str]):
        self.tokenizer, self.calls = tokenizer, []
        self.outputs = {beam: {tuple(tokenizer.encode_src([source])[0]): tokenizer.encode_tgt([text])[0][1:-1]
                               for source, text in side.items()} for beam, side in (("first", first), ("again", again))}

    def workers(self, decode) -> int:
        return 1

    def score_batch(self, src_ids, tgt_ids):  # a failed translation and its retry are read for their confidence
        return [[-0.5] * len(ids) for ids in tgt_ids]

    def search_batch(self, src_ids, limits, decode, terms=None):
        side = "again" if decode.beam_size == 1 and decode.alpha == 0 else "first"  # a retry's search: greedy
        self.calls.append((side, len(src_ids)))
        return [[Hypothesis(self.outputs[side][tuple(ids)], -1.0)] for ids in src_ids]


GOOD, LOOPING, COPIED = "我爱你。", "我们明天去北京。", "谢谢你。"  # each of their characters in the vocabulary


@pytest.fixture
def scripted(tokenizer, corpus_dir, tmp_path):
    config = tiny_config(corpus_dir, tmp_path / "run", tmp_path)
    first = {GOOD: "I love you.", LOOPING: "we go we go we go", COPIED: COPIED}
    again = {LOOPING: "We go to Beijing.", COPIED: COPIED}
    engine = Scripted(tokenizer, first, again)
    # the tiny vocabulary spells English nearly letter by letter: a wide range of lengths
    return Translator(engine, tokenizer, config, normal=Normal((-2.0, 2.0), ("LATIN",))), engine


def test_a_translation_that_passes_is_searched_once_and_a_failed_one_is_searched_again(scripted):
    translator, engine = scripted
    found = [nbest[0] for nbest in translator.translate([GOOD, LOOPING, COPIED, ""])]
    assert engine.calls == [("first", 3), ("again", 2)]  # the good one is not searched again; the empty line never
    assert [t.text for t in found] == ["I love you.", "We go to Beijing.", COPIED, ""]
    assert [t.failure for t in found] == [None, None, "script", None]


@pytest.mark.parametrize("how, text", [("keep", COPIED), ("mark", MARK + COPIED), ("empty", "")])
def test_a_translation_that_still_fails_is_kept_marked_or_emptied(scripted, how, text):
    translator, engine = scripted
    [[copied]] = translator.translate([COPIED], translator.decode.replace(on_failure=how))
    assert copied.text == text and copied.failure == "script"


def test_without_the_guard_nothing_is_checked_or_searched_again(scripted):
    translator, engine = scripted
    found = translator.translate([GOOD, LOOPING, COPIED], translator.decode.replace(guard=False))
    assert engine.calls == [("first", 3)] and [nbest[0].failure for nbest in found] == [None, None, None]
    assert found[1][0].text == "we go we go we go"
