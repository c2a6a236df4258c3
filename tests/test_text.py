"""Real text: sentences split and rejoined in the text's shape, marks kept on the words they were on, HTML kept
exactly but for its translated words."""

import random
import xml.etree.ElementTree as ET

import pytest
import torch

from mt.core.errors import MtError
from mt.text.marks import Marked, Span, nest, split_marked
from mt.text.markup import MAX_DEPTH, read_html
from mt.text.sentences import fit, split_text


def sentences(text: str, src: str = "zh", tgt: str = "en") -> list[str]:
    return [text[a:b] for a, b in split_text(text, src, tgt).spans]


@pytest.mark.parametrize("text, expected", [
    ("我們試試看！我该去睡觉了。你在干什麼啊？", ["我們試試看！", "我该去睡觉了。", "你在干什麼啊？"]),
    ("他说：“你好。”然后走了。", ["他说：“你好。”", "然后走了。"]),           # a closing quote stays
    ("真的吗？！太好了。", ["真的吗？！", "太好了。"]),
    ("价格是3.14元。他走了……我们走吧。", ["价格是3.14元。", "他走了……我们走吧。"]),  # decimals; … pauses
    ("Mr. Smith来了。我爱你。I love you. 你呢？", ["Mr. Smith来了。", "我爱你。", "I love you.", "你呢？"]),
    ("Ms. Smith来了。", ["Ms. Smith来了。"]),
    ("我在看书。ls -l很好用。", ["我在看书。", "ls -l很好用。"]),              # 。 ends one whatever follows
    ("他很累；他想睡觉。", ["他很累；", "他想睡觉。"]),
])
def test_chinese_sentences(text, expected):
    assert sentences(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("Mr. Smith paid $3.14 for it. He left!", ["Mr. Smith paid $3.14 for it.", "He left!"]),
    ("J. R. R. Tolkien wrote it... Then he left.", ["J. R. R. Tolkien wrote it...", "Then he left."]),
    ("It was 5 p.m. when we arrived. The U.S. is big.", ["It was 5 p.m. when we arrived.", "The U.S. is big."]),
    ("Come to see me. Feel free. I miss. Tom is ok.", ["Come to see me.", "Feel free.", "I miss.", "Tom is ok."]),
    ("Ask Miss. Smith about No. 5, I said no.", ["Ask Miss. Smith about No. 5, I said no."]),  # not a stop here
    ("He met Ms. Smith. Then he left.", ["He met Ms. Smith.", "Then he left."]),
])
def test_english_sentences(text, expected):
    assert sentences(text, "en", "zh") == expected


def test_the_text_keeps_its_shape_in_the_target_languages_way():
    text = "  第一句。第二句！\n\n第三段。\n"
    layout = split_text(text, "zh", "en")
    assert layout.join(["One.", "Two!", "Three."]) == "  One. Two!\n\nThree.\n"  # a space between English ones
    back = split_text("One. Two!\n\n  Three.", "en", "zh")
    assert back.join(["一。", "二！", "三。"]) == "一。二！\n\n  三。"  # none between Chinese ones
    assert split_text("", "zh", "en").join([]) == "" and split_text(" \n", "zh", "en").join([]) == " \n"
    assert split_text("第一句。第二句。", "zh", "en", split=False).spans == [(0, 8)]


def test_a_sentence_too_long_for_the_model_is_cut_at_clauses_then_words_and_nothing_is_lost():
    fits = lambda s: len(s) <= 12  # noqa: E731
    sentence = "这是一个很长的句子，有很多从句，还有更多的从句；最后结束。"
    parts = [sentence[a:b] for a, b in fit(sentence, fits)]
    assert all(fits(p) for p in parts) and "".join(parts) == sentence
    assert parts[1] == "有很多从句，"  # cut after the clause's comma
    words = "one two three four five six seven"
    parts = [words[a:b] for a, b in fit(words, fits)]
    assert all(fits(p) for p in parts) and " ".join(parts) == words
    unbroken = "x" * 100
    assert "".join(unbroken[a:b] for a, b in fit(unbroken, fits)) == unbroken


def echo(split, upper=True):
    """A stand-in translator: each sentence's translation is its text (upper-cased), marks where they were."""
    return split.join([Marked(s.text.upper() if upper else s.text, list(s.spans)) for s in split.sentences])


def test_marks_follow_their_sentences_and_come_back_whole():
    text = Marked("aa. bb. cc.", [Span(0, 7, 0), Span(4, 6, 1, parent=0), Span(8, 8, 2)])
    [out] = echo(split_marked([text], "en", "en"))
    assert out.text == "AA. BB. CC."
    assert out.spans == [Span(0, 7, 0), Span(4, 6, 1, 0), Span(8, 8, 2)]  # one span again across two sentences


def test_placed_marks_nest_as_in_the_source_whatever_the_alignment_says():
    spans = [Span(0, 10, 0), Span(2, 12, 1, parent=0), Span(5, 8, 2, parent=0), Span(9, 9, 3, parent=2)]
    placed = nest(spans)
    for s in placed:
        assert s.start <= s.end
    parent, child, sibling, point = placed
    assert child.end <= parent.end and sibling.start >= child.end or sibling.end <= child.start
    assert sibling.start <= point.start <= sibling.end


HTML = [
    '<p>我爱<b>汤姆</b>。你呢？</p>\n<script>var x = "中文。";</script><ul><li>一<i>二</i></li></ul>',
    '<div>Hello &amp; <a href="x?a=1&amp;b=2">link <code>a<b>c</b></code></a><!-- 注释 --> end<br>next'
    '<img src="x.png" alt="图"> ok&nbsp;!</div>',
    '<p>unclosed <b>bold', 'text only', '<b><i>x</b></i> y', '<p>a <b>b <i>c</b> d</i> e</p>',
    '<!DOCTYPE html><html><head><title>标题</title><style>p{color:red}</style></head><body>'
    '<a href="#"><div>块</div></a><pre>  保留  </pre><p translate="no">不译</p></body></html>',
    '</b>stray<p></p>x &lt; y &gt; z',
]


@pytest.mark.parametrize("source", HTML)
def test_html_comes_back_exactly_when_nothing_changes(source):
    document = read_html(source)
    assert document.render(echo(split_marked(document.texts, "zh", "en", split=False), upper=False)) == source


def test_html_keeps_what_is_not_text_and_translates_what_is():
    source = HTML[0] + HTML[6]
    document = read_html(source)
    out = document.render(echo(split_marked(document.texts, "zh", "en")))
    for kept in ['<script>var x = "中文。";</script>', "<style>p{color:red}</style>", "<pre>  保留  </pre>",
                 '<p translate="no">不译</p>', "<b>", "</b>", '<a href="#">']:
        assert kept in out
    assert all(t.text.strip() for t in document.texts)
    assert "中文。" not in "".join(t.text for t in document.texts)  # a script's text is not the model's


def test_html_nested_too_deep_is_refused_in_one_line():
    read_html("<b>" * (MAX_DEPTH - 1) + "x")
    with pytest.raises(MtError, match="nested more than"):
        read_html("<b>" * 10_000 + "x")


def test_well_formed_html_stays_well_formed_wherever_the_marks_land():
    source = ('<p>One <b>two <i>three</i></b> four <a href="u">five</a><img src="i"/> six. '
              'Seven <span>eight</span>.</p><p>Nine &amp; <code>ten</code>.</p>')
    document = read_html(source)
    rng = random.Random(0)
    for _ in range(200):
        translated = []
        for text in document.texts:  # a translation of another length, marks thrown anywhere on it
            words = rng.randint(0, 12)
            out = " ".join("w" * rng.randint(1, 4) for _ in range(words))
            spans = []
            for s in text.spans:
                a, b = sorted(rng.randint(0, len(out)) for _ in range(2))
                spans.append(Span(a, b if s.start < s.end else a, s.mark, s.parent))
            translated.append(Marked(out, nest(spans)))
        rendered = document.render(translated)
        ET.fromstring(f"<root>{rendered}</root>")  # well-formed
        for tag in ("<b>", "</b>", "<i>", "</i>", '<a href="u">', "</a>", '<img src="i"/>', "<code>ten</code>"):
            assert rendered.count(tag) == source.count(tag)


def test_a_placed_mark_is_widened_to_whole_words_but_not_over_an_english_clitic_nor_in_chinese():
    from mt.text.align import _words

    text = "I'm Tom's father; I don't know it's here."
    widened = {text[slice(*_words(text, text.index(part), text.index(part) + size))]
               for part, size in (("Tom's", 2), ("don't", 2), ("father", 3), ("it's", 2))}
    assert widened == {"Tom", "don't", "father", "it"}
    chinese = "我想让汤姆赢。"  # no spaces: the pieces are the words
    assert chinese[slice(*_words(chinese, 3, 5))] == "汤姆"


def test_a_mark_goes_to_the_words_that_attend_most_to_its_pieces_not_to_every_word_that_attends_most_to_it():
    from mt.text.align import _span

    text, translation = "汤姆不在这里工作。", "Tom doesn't work here."
    source = [(0, 2), (2, 3), (3, 4), (4, 6), (6, 8), (8, 9)]            # 汤姆 不 在 这里 工作 。
    target = [(0, 3), (3, 11), (11, 16), (16, 21), (21, 22)]             # Tom ␣doesn't ␣work ␣here .
    scores = torch.tensor([[0.9, 0.0, 0.0, 0.0, 0.0, 0.1],               # [T, S]
                           [0.5, 0.4, 0.0, 0.0, 0.0, 0.1],               # "doesn't" attends most to 汤姆 as well
                           [0.0, 0.0, 0.1, 0.0, 0.9, 0.0],
                           [0.0, 0.0, 0.1, 0.9, 0.0, 0.0],
                           [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    aligned = scores.argmax(dim=1).tolist()

    def placed(start, end):
        span = _span(Span(start, end, 0), text, source, target, aligned, scores, translation)
        return translation[span.start:span.end]

    assert placed(0, 2) == "Tom"
    assert placed(4, 8) == "work here"  # 这里工作: from the first to the last word of its pieces'
    assert placed(2, 3) == "doesn't"    # 不: no word attends most to it, the one attending most to it does


def test_a_mark_on_what_no_source_piece_holds_becomes_a_point_before_the_words_after_it():
    from mt.text.align import _span

    text, translation = "我爱 你。", "I love you."                      # the space is in no piece
    source, target = [(0, 1), (1, 2), (3, 4), (4, 5)], [(0, 1), (1, 6), (6, 10), (10, 11)]
    scores = torch.eye(4)
    span = _span(Span(2, 3, 0), text, source, target, scores.argmax(dim=1).tolist(), scores, translation)
    assert (span.start, span.end) == (6, 6)


def test_a_mark_on_text_the_translation_copies_goes_on_the_copy_nearest_the_attentions_place():
    from mt.text.align import _copy

    out = "Tom comes home at 2:30 every day, and 12 of 2 in 2010."
    assert _copy("2", out, out.index("home")) == (out.index("2:30"), out.index("2:30") + 1)  # not in 12 or 2010
    assert _copy(" 2 ", out, out.index("of")) == (out.index("of 2") + 3, out.index("of 2") + 4)
    assert _copy("12", out, 0) == (out.index("12"), out.index("12") + 2)
    assert _copy("Tom", out, 30) == (0, 3)
    assert _copy("汤姆", out, 0) is None and _copy("7", out, 0) is None and _copy("：", out, 0) is None
