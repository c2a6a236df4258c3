"""Cleaning real corpora: each filter keeps what it must and removes what it must, the contamination guard finds a
test sentence however it is written, and `mt clean` reports what went and why."""

from __future__ import annotations

import csv
import subprocess
import sys

import datasets
import numpy as np
import pytest

from conftest import TATOEBA, require_shared, tiny_yaml, write_lines
from mt.clean.cleaning import Cleaning, bind, clean_corpus
from mt.clean.contamination import make_guard
from mt.config import load_config
from mt.core.errors import MtError
from mt.data.config import CorpusConfig, DataConfig
from mt.data.corpora import TrainingMixture
from mt.data.repairs import sentences
from mt.data.filters import (CopyFilter, DuplicateSourcesFilter, DuplicatesFilter, EncodingFilter, GluedFilter,
                             LangidFilter, LengthFilter, LexicalFilter, MarkupFilter, NumbersFilter, QuestionsFilter,
                             RatioFilter, ScriptFilter, TruncatedFilter, UrlsFilter)

ZH_EN = DataConfig()


def corpus(pairs: list[tuple[str, str]]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"src": [s for s, _ in pairs], "tgt": [t for _, t in pairs]})


def kept(pairs: list[tuple[str, str]], *chosen, data: DataConfig = ZH_EN, guard=None) -> list[tuple[str, str]]:
    """The pairs that cleaning with these filters keeps."""
    data_guard = guard or make_guard(data)
    cleaned = clean_corpus("train", corpus(pairs), bind(list(chosen), data, "data.filters"), data, data_guard, None)
    return list(zip(cleaned.pairs["src"], cleaned.pairs["tgt"]))


GOOD = [("我爱你。", "I love you."), ("汤姆说他三十岁。", "Tom said he was thirty."),
        ("我叫Tom。", "My name is Tom."), ("1999年我去了北京。", "I went to Beijing in 1999."),
        ("请访问 www.example.com。", "Please visit www.example.com."), ("2007年", "2007.")]


@pytest.mark.parametrize("chosen, bad", [
    (LengthFilter(max_chars=40), ("这" * 50, "This " * 30)),
    (LengthFilter(min_chars=2), ("好", "OK")),
    (CopyFilter(), ("我爱你。", "我爱你。")),
    (CopyFilter(), ("Please turn off the lights.", "please turn off the light")),
    (ScriptFilter(), ("I love you.", "我爱你。")),                 # swapped sides
    (ScriptFilter(), ("我爱你。", "他走了。")),                     # the target in the source's language
    (NumbersFilter(), ("我出生于1987年。", "I was born in 1978.")),
    (NumbersFilter(), ("版权所有 © 2019", "All rights reserved.")),
    (UrlsFilter(), ("访问 www.example.com/zh 了解更多", "Learn more.")),
    (UrlsFilter(), ("联系 info@example.com", "Write to sales@example.org")),
])
def test_each_row_filter_removes_its_damage_and_keeps_good_pairs(chosen, bad):
    assert kept(GOOD + [bad], chosen) == GOOD


def test_langid_removes_a_side_in_another_language():
    french = ("我不知道你是什么意思。", "Je ne sais pas ce que tu veux dire.")
    assert kept([("我不知道你是什么意思。", "I don't know what you mean."), french], LangidFilter()) == [
        ("我不知道你是什么意思。", "I don't know what you mean.")]


def test_ratio_is_measured_against_the_corpus_median():
    good = [(f"我们明天去北京{i}次。", f"We are going to Beijing {i} times tomorrow.") for i in range(20)]
    glued = ("我们明天去北京。", "We are going to Beijing tomorrow. My father is a doctor and he works in a hospital.")
    short = ("好。", "All right, go ahead.")  # the longer side under min_chars: kept, short pairs vary most
    assert kept(good + [glued, short], RatioFilter(max_factor=2.0, min_chars=25)) == good + [short]


def test_questions_go_where_one_side_asks_unless_one_side_of_the_corpus_never_marks_them():
    questions = [("你好吗？", "How are you?"), ("汤姆在哪儿?", "Where is Tom?"), ("你去吗؟", "¿Vienes?"),
                 ("Τι κάνεις\u037e", "How are you?")]  # full-width, Arabic and Greek marks count
    misaligned = [("你好吗？", "Tom is tall."), ("我累了。", "Where is Tom?")]
    assert kept(GOOD + questions + misaligned, QuestionsFilter()) == GOOD + questions
    # subtitles whose Chinese side has no punctuation: a question mark on the English side alone says nothing
    unmarked = [(s.rstrip("？?؟\u037e"), t) for s, t in questions + misaligned]
    assert kept(GOOD + unmarked, QuestionsFilter()) == GOOD + unmarked
    asked = QuestionsFilter(min_agreement=0.0)  # 0: always acts
    assert kept(GOOD + unmarked, asked) == GOOD + [pair for pair in unmarked if "?" not in pair[1]]


def tatoeba_misaligned() -> tuple[list[tuple[str, str]], list[tuple[str, str]], range]:
    """12,000 Tatoeba pairs aligned, the same with every tenth target moved to the next tenth pair (a sentence beside
    another's translation, as a crawled corpus misaligns them), and the rows of the misaligned ones."""
    require_shared()
    zh, en = ((TATOEBA / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("zh", "en"))
    rows = np.random.default_rng(0).choice(len(zh), 12_000, replace=False)
    targets = [en[i] for i in rows]
    moved = range(0, len(rows), 10)
    for a, b in zip(moved, [*moved[1:], moved[0]]):
        targets[b] = en[rows[a]]
    sources = [zh[i] for i in rows]
    return list(zip(sources, (en[i] for i in rows))), list(zip(sources, targets)), moved


def test_lexical_removes_most_misaligned_pairs_and_few_translations():
    aligned, pairs, moved = tatoeba_misaligned()
    kept_pairs = set(kept(pairs, LexicalFilter()))
    misaligned_kept = sum(pairs[i] in kept_pairs for i in moved) / len(moved)
    translations_removed = sum(pair not in kept_pairs for i, pair in enumerate(pairs) if i % 10) / (len(pairs) * 0.9)
    assert misaligned_kept < 0.2 and translations_removed < 0.04, (misaligned_kept, translations_removed)
    assert kept(pairs[:9999], LexicalFilter()) == pairs[:9999]  # too few pairs to learn from: left alone
    assert kept(aligned, LexicalFilter()) == aligned  # no sign of misalignment: its free translations stay


def test_lexical_judges_a_pair_alike_when_other_pairs_come_and_go():
    """As when other filters before it remove pairs, or a corpus grows: a pair's half and its place in the samples
    follow from its own text, so few judgements change, and none for a mere change of order."""
    _, pairs, _ = tatoeba_misaligned()
    judged = dict.fromkeys(kept(pairs, LexicalFilter()), True)
    rng = np.random.default_rng(1)
    fewer = [pairs[i] for i in rng.permutation(len(pairs))[:len(pairs) * 97 // 100]]   # 3% gone, the rest shuffled
    kept_of_fewer = set(kept(fewer, LexicalFilter()))
    changed = sum((pair in kept_of_fewer) != judged.get(pair, False) for pair in fewer) / len(fewer)
    assert changed < 0.005, changed
    assert kept(fewer[::-1], LexicalFilter()) == [pair for pair in fewer[::-1] if pair in kept_of_fewer]


def test_duplicates_keep_the_first_pair_and_duplicate_sources_keep_as_many_as_asked():
    pairs = [("你好。", "Hello."), ("你好。", " Hello. "), ("你好。", "Hi."), ("你好。", "Good day."), ("再见。", "Bye.")]
    assert kept(pairs, DuplicatesFilter()) == [pairs[0]] + pairs[2:]
    assert kept(pairs, DuplicatesFilter(), DuplicateSourcesFilter(keep=2)) == [pairs[0], pairs[2], pairs[4]]


def test_near_duplicates_differ_only_in_case_width_punctuation_spaces_or_chinese_script():
    first = ("我們走吧！", "Let's go!")
    near = [("我们走吧。", "let's  go."), ("我们走吧", "LET'S GO"), ("我们走吧！", "Let’s go！")]
    other = [("我们走吧。", "Let us go."), ("？", "?"), ("?", "?!")]  # nothing left after normalising: exact
    assert kept([first, *near, *other], DuplicatesFilter()) == [first, *other]
    assert kept([first, *near, *other], DuplicatesFilter(near=False)) == [first, *near, *other]


def test_of_near_duplicates_the_best_formed_is_kept_wherever_it_stands():
    careless = [("我爱你。", "i love you."), ("我爱你。", "I LOVE YOU."), ("我爱你。", "Ｉ love you."),
                ("我爱你。", "I love you"), ("我爱你。", " I love  you.")]
    best, also_good = ("我爱你。", "I love you."), ("我爱你。", "I love you!")
    assert kept([*careless, best, also_good, ("你好。", "Hello.")], DuplicatesFilter()) == [best, ("你好。", "Hello.")]


def test_markup_is_taken_out_of_a_pair_and_a_pair_of_code_or_remnants_is_removed():
    repaired = [("<p>我爱你。</p>", '<div class="tr">I love you.&nbsp;</div>'),
                ("汤姆&amp;玛丽", "Tom &amp;amp; Mary"), ("他说：&quot;好。&quot;", 'He said, <b>"Yes."</b>'),
                ("第一行<br/>第二行", "line one<br>line two")]
    removed = [("我爱你。", "<script>var a = 1;</script>"), ("我爱你。", "<br/>"),
               ("我爱你。", '<span style="x">I love {you}</span>')]
    plain = [("x < 3 而 y > 2", "x < 3 and y > 2"), ("A&B公司", "A&B Inc.")]  # no tag, no entity: as they are
    assert kept(repaired + removed + plain, MarkupFilter()) == [
        ("我爱你。", "I love you."), ("汤姆&玛丽", "Tom & Mary"), ('他说："好。"', 'He said, "Yes."'),
        ("第一行 第二行", "line one line two"), *plain]


def test_encoding_damage_is_undone_where_it_can_be_and_removed_where_bytes_were_lost():
    good = [("我爱你们", "I’m here, café.")]
    damaged = [(zh.encode().decode("latin-1"), en.encode().decode("cp1252")) for zh, en in good]
    gbk = [(good[0][0].encode().decode("gbk"), good[0][1])]  # 12 bytes: 6 GBK characters
    lost = [("我爱你\ufffd", "I love you."), ("锟斤拷", "Hello."), ("你好\x07", "Hello.")]
    assert kept(good + damaged + gbk + lost, EncodingFilter()) == good * 3


def test_the_steps_after_a_repair_and_the_guard_read_the_repaired_text(tmp_path):
    write_lines(tmp_path / "test.zh", ["汤姆每天早上六点起床。"])
    write_lines(tmp_path / "test.en", ["Tom gets up at six every morning."])
    data = DataConfig(test=CorpusConfig(path=str(tmp_path / "test")))
    wrapped = ("<p>汤姆每天早上六点起床。</p>", "<p>Tom gets up at six every morning.</p>")
    copied = ("<i>我爱你。</i>", "我爱你。")  # a copy once its tags are out
    assert kept(GOOD + [wrapped, copied], MarkupFilter(), CopyFilter(), data=data) == GOOD
    cleaned = clean_corpus("train", corpus(GOOD + [wrapped, copied, ("<b>你好。</b>", "Hello.")]),
                           bind([MarkupFilter(), CopyFilter()], data, "x"), data, make_guard(data), None)
    assert cleaned.removed() == {"contamination": 1, "markup": 0, "copy": 1} and cleaned.repaired() == {"markup": 1}
    assert cleaned.pairs[-1] == {"src": "你好。", "tgt": "Hello."}


def tatoeba_sample(n: int) -> list[tuple[str, str]]:
    require_shared()
    zh, en = ((TATOEBA / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("zh", "en"))
    return [(zh[i], en[i]) for i in np.random.default_rng(0).choice(len(zh), n, replace=False)]


def test_truncated_targets_go_by_their_missing_end_or_their_length():
    pairs = tatoeba_sample(2000)
    long = [(s, t) for s, t in pairs if len(s) >= 12 and len(t.split()) >= 6][:100]
    cut = [(s, " ".join(t.split()[:len(t.split()) // 2])) for s, t in long[:50]]          # no final stop
    cut_at_stop = [(s, t.split()[0] + ".") for s, t in long[50:]]                             # a stop, far too short
    trailing = [("不知道，我真的不太...", "I don't know. I'm not really--")]  # both trail off, each its own way
    assert kept(pairs + cut + cut_at_stop + trailing, TruncatedFilter()) == pairs + trailing
    unpunctuated = [(s.rstrip("。！？!?."), t) for s, t in pairs]  # subtitles: the Chinese side ends without stops
    left = kept(unpunctuated + cut, TruncatedFilter())  # sentence ends say nothing there: only the length judges
    assert left[:len(unpunctuated)] == unpunctuated and len(left) > len(unpunctuated)


def test_a_sentence_glued_on_one_side_only_goes_and_one_glued_on_both_sides_stays():
    pairs = tatoeba_sample(2000)
    one_side = [(pairs[i][0], f"{pairs[i][1]} {pairs[i + 1][1]}") for i in range(0, 40, 2)]
    one_side += [(pairs[i][0] + pairs[i + 1][0], pairs[i][1]) for i in range(40, 80, 2)]
    both = [(pairs[i][0] + pairs[i + 1][0], f"{pairs[i][1]} {pairs[i + 1][1]}") for i in range(80, 120, 2)]
    left = kept(pairs + one_side + both, GluedFilter())
    assert sum(pair in left for pair in one_side) <= 2 and all(pair in left for pair in both)
    assert sum(pair not in left for pair in pairs) <= 4


def test_a_subtitle_that_parts_its_sentences_by_a_space_is_no_glued_pair():
    """Chinese subtitles write a space where a sentence or a clause ends, and no stop: their translations in one
    sentence or in two stay; and so do English lines with an interjection more ("Oh.")."""
    subtitles = [("我们没有选择 一定得看", "I don't think we have a choice. We have to look."),
                 ("我得当你的面拆信 这是规定", "I've gotta open this in front of you. Those are the rules."),
                 ("她昨晚怎么样 睡着了吗", "How did she do last night? Did she get any sleep?"),
                 ("别回答 有诈", "Don't answer that. It's a trick question."),
                 ("我们没有选择 一定得看", "We have to."), ("当然 我很高兴能陪着你", "Sure."),
                 ("时间还真紧", "Oh. That's really soon."), ("有消息", "Hey. Got some news.")]
    assert kept(tatoeba_sample(2000) + subtitles, GluedFilter())[-8:] == subtitles
    assert [sentences(text, "zh") for text in ("我们没有选择 一定得看", "我们 没有 选择 一定 得 看", "我用 iPhone 拍的")] \
        == [(1, 2), (1, 1), (1, 1)]  # phrases; a segmented corpus's words; spaces around a Latin word


def test_filters_run_in_order_and_name_the_first_that_removed_each_pair():
    pairs = [("我爱你。", "我爱你。"), ("我爱你。", "我爱你。"), ("你好。", "Hello.")]
    cleaned = clean_corpus("train", corpus(pairs), bind([CopyFilter(), DuplicatesFilter()], ZH_EN, "x"), ZH_EN,
                           make_guard(ZH_EN), None)
    assert [cleaned.steps[r] if r >= 0 else "kept" for r in cleaned.reasons] == ["copy", "copy", "kept"]
    assert cleaned.removed() == {"contamination": 0, "copy": 2, "duplicates": 0}


def test_a_filter_that_removes_every_pair_is_one_clear_error():
    with pytest.raises(MtError, match="train: cleaning removed every one of its 2 pairs \\(most by script\\): loosen"):
        kept([("I love you.", "Hello."), ("Good.", "Bad.")], ScriptFilter())


def test_a_language_without_a_known_writing_system_is_named(tmp_path):
    data = DataConfig(src_lang="xx")
    with pytest.raises(MtError, match="data.filters.src_script.*'xx'"):
        bind([ScriptFilter()], data, "data.filters")


@pytest.fixture
def guarded(tmp_path):
    """A config whose test set holds 我們明天去北京。 / We are going to Beijing tomorrow. and 是的 / Yes."""
    write_lines(tmp_path / "test.zh", ["我們明天去北京。", "是的"])
    write_lines(tmp_path / "test.en", ["We are going to Beijing tomorrow.", "Yes."])
    return DataConfig(test=CorpusConfig(path=str(tmp_path / "test")))


@pytest.mark.parametrize("pair", [
    ("我们明天去北京！", "Something else entirely."),            # Simplified, other punctuation
    ("Ａnother source", "WE ARE GOING TO BEIJING TOMORROW"),   # case, no punctuation
    ("其他的句子", "We are going to Beijing, tomorrow!"),      # punctuation
    ("其他的句子", "Ｗｅ ａｒｅ ｇｏｉｎｇ ｔｏ Ｂｅｉｊｉｎｇ ｔｏｍｏｒｒｏｗ."),  # full width
    ("是的！", "yes"),                                         # a short pair counts as a whole pair
])
def test_the_guard_finds_a_test_sentence_however_it_is_written(guarded, pair):
    assert kept(GOOD + [pair], data=guarded) == GOOD


def test_the_guard_leaves_short_sentences_with_other_translations(guarded):
    pairs = GOOD + [("是的", "That's right."), ("对。", "Yes.")]  # common sentences, not the test pair
    assert kept(pairs, data=guarded) == pairs


def test_the_guard_can_keep_what_it_finds_with_a_warning(guarded, caplog):
    keeping = DataConfig(test=guarded.test, contamination="keep")
    pairs = GOOD + [("我们明天去北京。", "We are going to Beijing tomorrow.")]
    cleaned = clean_corpus("train", corpus(pairs), [], keeping, make_guard(keeping), None)
    assert len(cleaned.pairs) == len(pairs) and cleaned.contaminated == 1
    assert "1 training pairs hold a dev or test sentence and are kept" in caplog.text


def test_each_corpus_of_a_mixture_has_its_own_filters_and_repeats(tmp_path):
    write_lines(tmp_path / "a.zh", ["你好。", "你好。", "我爱你。"])
    write_lines(tmp_path / "a.en", ["Hello.", "Hello.", "我爱你。"])
    write_lines(tmp_path / "b.zh", ["再见。", "再见。"])
    write_lines(tmp_path / "b.en", ["Bye.", "Bye."])
    data = load_config([], [f"data.train.path={tmp_path / 'a'}",
                            f"data.extra_train=[{{path: {tmp_path / 'b'}, repeat: 2, filters: []}}]"]).data
    cleaning = Cleaning(data, tmp_path / "cache")
    mixture = TrainingMixture(data, 1, cleaning)
    assert mixture.pairs["src"] == ["你好。", "再见。", "再见。"]  # a: copy and duplicate removed; b: unfiltered
    assert [mixture.pairs["src"][r] for r in mixture.rows] == ["你好。"] + ["再见。"] * 4
    facts = cleaning.facts()["corpora"]
    assert facts["train"]["removed"]["copy"] == 1 and facts["train"]["removed"]["duplicates"] == 1
    assert facts["extra_train[0]"] == {"pairs": 2, "kept": 2, "removed": {"contamination": 0}, "repaired": {},
                                      "contaminated": 0}
    cached = sorted((tmp_path / "cache").glob("clean-*.npz"))
    assert len(cached) == 2  # the second run reads them
    again = TrainingMixture(data, 1, Cleaning(data, tmp_path / "cache"))
    assert again.pairs["src"] == mixture.pairs["src"]


def test_filter_config_errors_name_the_key():
    for setting, message in [("data.filters=[{filter: nope}]", "config key data.filters[0].filter: must be one of"),
                             ("data.filters=[{filter: ratio, max_facter: 2}]",
                              "unknown config key data.filters[0].max_facter"),
                             ("data.filters=[{filter: ratio, max_factor: 1}]",
                              "config key data.filters[0].max_factor: must be more than 1"),
                             ("data.test.filters=[]", "config key data.test.filters: only training corpora")]:
        with pytest.raises(MtError, match=message.replace("[", "\\[").replace("]", "\\]")):
            load_config([], [setting])


def test_mt_clean_writes_its_report_and_every_removed_pair(corpus_dir, tmp_path):
    noisy = tmp_path / "noisy"
    zh = (corpus_dir / "train.zh").read_text(encoding="utf-8").splitlines()
    en = (corpus_dir / "train.en").read_text(encoding="utf-8").splitlines()
    test_zh = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()
    test_en = (corpus_dir / "test.en").read_text(encoding="utf-8").splitlines()
    walk = ("我们今天去公园散步吧。", "Let's take a walk in the park today.")
    write_lines(noisy.with_suffix(".zh"), zh + zh[:10] + [test_zh[0], en[0], walk[0]])
    write_lines(noisy.with_suffix(".en"), en + en[:10] + [test_en[0], zh[0], f"<p>{walk[1]}</p>"])
    done = subprocess.run([sys.executable, "-m", "mt", "clean", "-c", str(_config_file(corpus_dir, tmp_path)),
                           "--set", f"data.train.path={noisy}", "--run-dir", str(tmp_path / "run")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "run" / "clean" / "report.md").read_text(encoding="utf-8")
    assert f"{len(zh) + 13:,} pairs" in report and "### removed by duplicates" in report
    assert f"| {len(zh) + 13} | {walk[0]} / <p>{walk[1]}</p> | {walk[0]} / {walk[1]} |" in report.split(
        "### repaired by markup")[1]
    with open(tmp_path / "run" / "clean" / "removed.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    reasons = {row["reason"] for row in rows}
    assert {"contamination", "script", "duplicates"} <= reasons
    assert {"row": str(len(zh) + 11), "reason": "contamination"}.items() <= next(
        row for row in rows if row["source"] == test_zh[0]).items()
    assert "train: cleaning kept " in done.stderr and f" of {len(zh) + 13:,} pairs" in done.stderr
    assert "(repaired: markup 1)" in done.stderr


def _config_file(corpus_dir, tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(tiny_yaml(corpus_dir, tmp_path / "run"), encoding="utf-8")
    return path


def test_cross_entropy_keeps_the_pairs_the_models_find_likeliest(trained_runs):
    from mt.data.filters import CrossEntropyFilter
    from mt.decode.translator import load_translator

    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    pairs = GOOD + [(src, tgt) for (src, _), (_, tgt) in zip(GOOD, GOOD[1:] + GOOD[:1])]  # good, then misaligned
    translator = load_translator(checkpoint, "cpu")
    forward = -np.array([s.mean for s in translator.score([s for s, _ in pairs], [t for _, t in pairs])])
    reverse = -np.array([s.mean for s in translator.score([t for _, t in pairs], [s for s, _ in pairs])])
    dual = np.abs(forward - reverse) + (forward + reverse) / 2
    for chosen, score in [(CrossEntropyFilter(forward=str(checkpoint), keep_fraction=0.5), forward),
                          (CrossEntropyFilter(forward=str(checkpoint), reverse=str(checkpoint), keep_fraction=0.25),
                           dual),
                          (CrossEntropyFilter(forward=str(checkpoint), threshold=float(np.median(forward))), forward)]:
        expected = ([pairs[i] for i in sorted(np.argsort(score, kind="stable")[:round(chosen.keep_fraction * 12)])]
                    if chosen.keep_fraction else [p for p, s in zip(pairs, score) if s <= chosen.threshold])
        assert kept(pairs, chosen) == expected


def test_mt_info_says_how_many_kept_pairs_a_repair_changed():
    from mt.exchange.checkpoint import cleaning_line

    corpus = {"pairs": 10, "kept": 8, "removed": {"markup": 1}, "repaired": {"markup": 2, "encoding": 1},
              "contaminated": 1}
    assert cleaning_line({"contamination": "remove", "corpora": {"train": corpus}}) == (
        "cleaning: 8 of 10 training pairs kept (3 repaired); 1 held a dev or test sentence (removed)")
    del corpus["repaired"]  # a checkpoint's record without repairs
    assert cleaning_line({"contamination": "remove", "corpora": {"train": corpus}}) == (
        "cleaning: 8 of 10 training pairs kept; 1 held a dev or test sentence (removed)")
