"""What the corpus filters repair in a text, and what they read of its sentences: markup and HTML entities taken out,
encoding damage (mojibake) undone, and where a side's sentences end.

Each repair returns the text repaired (the same text when there is nothing to repair), or None when the text cannot
be repaired: the pair is then removed. A cheap test comes first, so a clean text costs a character scan.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

TAG = re.compile(r"<\s*/?\s*[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?\s*>|<!--")
ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")
# What is left of markup that could not be read as text: a tag's start or end, an attribute, a style's braces.
REMNANT = re.compile(r"</?[A-Za-z!]|/>|[{}]|\b[\w-]+=[\"']")
CODE = {"script", "style", "noscript", "template", "svg", "math", "head", "title"}  # their content is not text
BLOCK = {"br", "p", "div", "li", "ul", "ol", "tr", "td", "th", "table", "h1", "h2", "h3", "h4", "h5", "h6",
         "section", "article", "header", "footer", "blockquote", "hr"}  # a word boundary where they stand
SPACES = re.compile(r"[\s\u00a0\u2000-\u200b\u202f\u205f\u3000]+")

# Encoding damage that no decoding undoes: U+FFFD where bytes were lost, control characters (C1 ones left after
# ftfy's repair), and 锟斤拷, what UTF-8's replacement character becomes when read as GBK.
LOST = re.compile("[\ufffd\x00-\x08\x0b-\x1f\x7f-\x9f]|锟斤拷")
HAN = re.compile("[\u3400-\u9fff]")
# The characters UTF-8 text shows when read as GBK and fixed: CJK and their punctuation, and ASCII.
CJK_TEXT = re.compile("[\u0020-\u007e\u2000-\u206f\u3000-\u303f\u3400-\u9fff\uff00-\uffef]+")

# A sentence's end: a stop (with its closing quotes and brackets) at the end of a side; not an utterance that trails
# off (an ellipsis, a dash: "I'm not really--", 我真的不太...), which its translation may mark another way.
END = re.compile(r"[.!?。！？．｡]+[\"'”’」』）)\]》〉】]*$")
TRAILING = re.compile(r"(?:\.\.|…|--|—|–)[\"'”’」』）)\]》〉】]*$")
# Where a side written without spaces starts another sentence: a stop with more text after it. A quotation's own
# stop followed by its closing quote and the words that report it (“看啊！”她说。) is not an end.
UNSPACED_STOP = re.compile(r"[。！？!?．]+(?=[^。！？!?．”’」』\"'）)])"
                           r"|[。！？!?．]+[”’」』\"'）)]+(?=\s*[“‘「『\"'(（])")
UNSPACED = {"zh", "ja", "th", "lo", "km", "my", "bo", "yue", "wuu"}  # written without spaces between sentences
# in those languages, a space between two letters of their own scripts (not Latin ones: "我用 iPhone 拍的")
PHRASE_SPACE = re.compile(r"(?<=[^\W\d_A-Za-z\u00C0-\u024F])\s+(?=[^\W\d_A-Za-z\u00C0-\u024F])")
MIN_PHRASE = 2.5  # the mean characters between such spaces from which on they part phrases (words: under 2)
INNER_STOP = re.compile(r"[.!?…]+[\"'”’)\]]*\s+\S")  # a spaced side may hold another sentence: sentencex decides


class _Text(HTMLParser):
    """The text of a piece of HTML: tags out, character references read, code (script, style) left out."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.code = 0      # inside how many code elements
        self.had_code = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in CODE:
            self.code += 1
            self.had_code = True
        elif tag in BLOCK:
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        if tag in BLOCK:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in CODE:
            self.code = max(self.code - 1, 0)
        elif tag in BLOCK:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self.code:
            self.parts.append(data)


def without_markup(text: str) -> str | None:
    """The text with its tags taken out and its entities read (twice: crawls escape them again, &amp;nbsp;), spaces
    of every width as one; None when it held code, nothing is left, or markup remains that is not text."""
    if ("<" not in text and "&" not in text) or not (TAG.search(text) or ENTITY.search(text)):
        return text
    parser = _Text()
    parser.feed(text)
    parser.close()
    inner = html.unescape("".join(parser.parts))
    inner = SPACES.sub(" ", inner).strip()
    if parser.had_code or not inner or TAG.search(inner) or ENTITY.search(inner) or REMNANT.search(inner):
        return None
    return inner


def without_mojibake(text: str) -> str | None:
    """The text with its encoding damage undone: UTF-8 read as Latin-1 or Windows-1252 (Iâ€™m, æ—¥æœ¬) by
    ftfy, UTF-8 read as GBK (鎴戠埍浣犱滑) by reading its GBK bytes as UTF-8; None when bytes were lost or ftfy
    still sees damage after fixing."""
    if text.isascii():
        return None if LOST.search(text) else text
    from ftfy import fix_encoding
    from ftfy.badness import is_bad

    if is_bad(text):  # C1 control characters too: UTF-8 read as Latin-1
        text = fix_encoding(text)
        if is_bad(text):
            return None
    elif HAN.search(text):
        text = _from_gbk(text)
    return None if LOST.search(text) else text


def _from_gbk(text: str) -> str:
    """UTF-8 Chinese read as GBK, read again: its GBK bytes decode as UTF-8 into CJK text (real Chinese's GBK
    bytes almost never decode as UTF-8 at all); any other text unchanged."""
    try:
        fixed = text.encode("gbk").decode("utf-8")
    except UnicodeError:
        return text
    return fixed if fixed != text and HAN.search(fixed) and CJK_TEXT.fullmatch(fixed) else text


# Letters and digits in full width (Ａ, ０): the ASCII forms of them are what every language writes.
WIDE_ALNUM = re.compile("[\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]")


def oddities(text: str, other_ends: bool) -> int:
    """How many signs of a copy made carelessly a side shows: letters or digits in full width, all its letters in
    capitals (four or more), a first letter in lower case where case is written, spaces at its ends or doubled,
    and no sentence end where the other side (`other_ends`) has one. Of duplicates, the one with fewest is kept."""
    cased = [c for c in text if c.isupper() or c.islower()]
    return (bool(WIDE_ALNUM.search(text)) + (len(cased) >= 4 and all(c.isupper() for c in cased))
            + bool(cased and cased[0].islower()) + (text != text.strip() or "  " in text)
            + (other_ends and not ends_sentence(text)))


def ends_sentence(text: str) -> bool:
    text = text.rstrip()
    return END.search(text) is not None and TRAILING.search(text) is None


def sentences(text: str, lang: str) -> tuple[int, int]:
    """The fewest and the most sentences a side in language `lang` may hold (1 for a text without a stop inside): by
    its stops, and its phrase spaces, in a language written without spaces; by sentencex (mt's sentence splitter)
    in any other. Subtitles and dialogue in those languages part their sentences by a space where they write no
    stop (我们没有选择 一定得看), and their clauses too, so each such space may or may not end a sentence; a text
    cut into words by spaces (a segmented corpus: words of one or two characters) has none. A sentence of one word
    in a spaced language ("Oh.", "Okay."), which dialogue adds where the other language leaves it out, may or may
    not count."""
    text = text.strip()
    if lang.split("-")[0].lower() in UNSPACED:
        spaces = len(PHRASE_SPACE.findall(text))
        phrases = spaces if spaces and len("".join(text.split())) >= MIN_PHRASE * (spaces + 1) else 0
        stops = 1 + len(UNSPACED_STOP.findall(text))
        return stops, stops + phrases
    if not INNER_STOP.search(text):
        return 1, 1
    from sentencex import segment

    found = [s for s in segment(lang, text) if s.strip()]
    return max(1, sum(len(s.split()) > 1 for s in found)), len(found)
