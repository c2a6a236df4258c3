"""A text split into the sentences that a sentence-level model translates, and put back together in the target
language's way: line breaks, blank lines and indentation where they were, sentences of one line joined by a space
(English) or by nothing (Chinese).

The boundaries are sentencex's (Wikimedia's segmenter for some 300 languages): it keeps closing quotes and
brackets and "！？" with their sentence, knows abbreviations, decimals and initials, and is fast enough to run on
every request (docs/translating.md compares it with pysbd). A sentence too long for the model's position table is
split further, at clause punctuation first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sentencex import get_sentence_boundaries

from mt.data.repairs import UNSPACED

CLAUSE_ENDS = "，、；：,;:"  # where a sentence too long for the model is split first
# Full-width stops end a sentence whatever follows (sentencex wants a capital letter after them, as after "."),
# with the closing quotes and brackets after them. Not "…": in Chinese it often pauses inside a sentence.
FULL_STOP = re.compile(r"[。！？；]+[”’」』）》〉】\"')\]]*")
# Ordinary English words that sentencex's English list also holds as abbreviations (Me. for Maine, Miss, Ill.,
# No., …): written in lower case and followed by a capital, their full stop ends a sentence ("Call me. Tom left.").
WORD_STOP = re.compile(r"(?<![\w.])(?:art|ill|man|mass|may|me|miss|no|ok|pa|wash)\.[”’\"')\]]*(?=\s+[\"“‘(]?[A-Z])")
# Titles that sentencex's English list lacks: their full stop never ends a sentence ("Ms. Smith").
TITLE = re.compile(r"(?<![\w.])(?:Ms|Mx)\.\s*$")

Fits = Callable[[str], bool]  # whether the model reads a sentence whole (within its position table)


@dataclass
class Layout:
    """Where a text's sentences are: `spans[i]` = [start, end) of sentence i in the text; `gaps` (one more than the
    spans) = what goes before each sentence and after the last in the translation. A gap that holds a line break is
    kept as it is; a gap inside a line becomes the target language's joiner."""

    spans: list[tuple[int, int]]
    gaps: list[str]

    def join(self, translations: list[str]) -> str:
        """The translation of the text: its sentences' translations, in the text's shape."""
        parts = [self.gaps[0]]
        for translation, gap in zip(translations, self.gaps[1:]):
            parts += [translation, gap]
        return "".join(parts)


def joiner(lang: str) -> str:
    return "" if lang.split("-")[0].lower() in UNSPACED else " "


def split_text(text: str, src_lang: str, tgt_lang: str, fits: Fits | None = None, split: bool = True) -> Layout:
    """The text's sentences (each line's, or each line whole when `split` is off), and a sentence that does not
    fit the model cut in parts (`fit`)."""
    spans, start = [], 0
    for line in text.split("\n"):
        found = sentence_spans(line, src_lang) if split else _stripped(line, 0, len(line))
        for a, b in found:
            parts = fit(line[a:b], fits) if fits else [(0, b - a)]
            spans += [(start + a + pa, start + a + pb) for pa, pb in parts]
        start += len(line) + 1
    bounds = [0] + [x for span in spans for x in span] + [len(text)]
    gaps = [text[a:b] for a, b in zip(bounds[::2], bounds[1::2])]
    inner = [gap if "\n" in gap else joiner(tgt_lang) for gap in gaps[1:-1]]
    return Layout(spans, gaps[:1] + inner + gaps[-1:] if spans else gaps[:1])


def sentence_spans(line: str, lang: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence of one line, without the whitespace around it. In a text of another language,
    a full stop of Latin script ends a sentence only where English rules agree ("Mr. Smith来了" is one)."""
    lang = lang.split("-")[0].lower()
    stops = [FULL_STOP, WORD_STOP] if lang == "en" else [FULL_STOP]
    ends, start = [], 0
    for b in get_sentence_boundaries(lang, line):
        end = b["end_index"]
        if lang != "en" and b.get("boundary_symbol") == "." and end < len(line) and not _english_end(line[start:],
                                                                                                    end - start):
            continue
        if lang == "en" and end < len(line) and TITLE.search(line, start, end):
            continue
        ends += sorted(m.end() for stop in stops for m in stop.finditer(line, start, end) if m.end() < end)
        ends.append(end)
        start = end
    if not ends or ends[-1] != len(line):
        ends.append(len(line))
    spans, start = [], 0
    for end in ends:
        spans += _stripped(line, start, end)
        start = end
    return spans


def _english_end(text: str, end: int) -> bool:
    """Whether English rules end a sentence of `text` at `end` (trailing whitespace aside)."""
    return len(text[:end].rstrip()) in {b for _, b in sentence_spans(text, "en")}


def _stripped(line: str, start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) without its surrounding whitespace; none when it is all whitespace."""
    text = line[start:end]
    if not text.strip():
        return []
    return [(start + len(text) - len(text.lstrip()), end - len(text) + len(text.rstrip()))]


def fit(sentence: str, fits: Fits) -> list[tuple[int, int]]:
    """Parts of a sentence that each fit the model, as [start, end) in it: whole when it fits; else cut after clause
    punctuation, else between words, else in the middle, with consecutive parts merged as long as they fit. No text
    is left out: a single character that does not fit is given whole, and the search cuts it."""
    if len(sentence) < 2 or fits(sentence):
        return [(0, len(sentence))]
    cuts = _cuts(sentence, CLAUSE_ENDS) or _cuts(sentence, " ") or [len(sentence) // 2]
    merged: list[tuple[int, int]] = []
    for a, b in zip([0] + cuts, cuts + [len(sentence)]):
        if merged and fits(sentence[merged[-1][0]:b]):
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    spans = [(a + x, a + y) for a, b in merged for x, y in fit(sentence[a:b], fits)]
    return [span for a, b in spans for span in _stripped(sentence, a, b)]


def _cuts(sentence: str, marks: str) -> list[int]:
    """Positions just after each of `marks` inside the sentence (none at its ends)."""
    return [i + 1 for i, c in enumerate(sentence[:-1]) if c in marks and i > 0]
