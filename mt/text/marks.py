"""Texts with marks on some of their characters (an HTML element, a Word document's run) → the sentences the model
translates, each with the marks on it → the translated texts with the marks on the words the model aligned them to.

A format (mt/text/markup.py, mt/text/documents.py) turns its input into `Marked` texts and its output back from
them; everything between is here, the same for every format and for plain text (a text without marks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from mt.text.sentences import Fits, Layout, split_text

T = TypeVar("T")


@dataclass(frozen=True)
class Span:
    """Characters [start, end) of a text carry mark `mark` (a number that the format knows), inside the span of
    mark `parent` (None: at the top). start == end: a point, e.g. an image inside a sentence."""

    start: int
    end: int
    mark: int
    parent: int | None = None


@dataclass
class Marked:
    """A text and its marks, in document order (a parent before its children). Marks nest as a document's elements
    do: two spans either nest or do not overlap."""

    text: str
    spans: list[Span] = field(default_factory=list)


@dataclass
class Sentence:
    """What the model translates: one sentence, with the parts of the marks that fall on it (its own offsets)."""

    text: str
    spans: list[Span]


@dataclass
class Split:
    """Marked texts split into sentences: `sentences` of all texts in order, and how to put each text back."""

    sentences: list[Sentence]
    layouts: list[Layout]
    spans: list[list[Span]]  # each text's spans

    def join(self, translated: list[Marked]) -> list[Marked]:
        """Each text's translation, from its sentences' (in order, each with its marks placed), in the text's shape;
        a mark on several sentences becomes one span again, and a mark on no sentence's text (only on whitespace,
        or an empty element) sits where it was between the sentences."""
        texts, i = [], 0
        for layout, spans in zip(self.layouts, self.spans):
            mine, i = translated[i:i + len(layout.spans)], i + len(layout.spans)
            texts.append(_join(layout, spans, mine))
        return texts

    def per_text(self, found: list[T]) -> list[list[T]]:
        """What was found for each sentence (one each, in order), grouped by text."""
        groups, i = [], 0
        for layout in self.layouts:  # each text's sentences follow one another
            groups.append(found[i:i + len(layout.spans)])
            i += len(layout.spans)
        return groups


def split_marked(texts: list[Marked], src_lang: str, tgt_lang: str, fits: Fits | None = None,
                 split: bool = True) -> Split:
    """The sentences of the texts (mt/text/sentences.py's split_text), each with the parts of the marks on it."""
    sentences, layouts = [], []
    for text in texts:
        layout = split_text(text.text, src_lang, tgt_lang, fits, split)
        layouts.append(layout)
        for a, b in layout.spans:
            on = [Span(max(s.start, a) - a, min(s.end, b) - a, s.mark, s.parent) for s in text.spans
                  if s.start < b and s.end > a or (s.start == s.end and a <= s.start < b)]
            sentences.append(Sentence(text.text[a:b], on))
    return Split(sentences, layouts, [text.spans for text in texts])


def _join(layout: Layout, spans: list[Span], translated: list[Marked]) -> Marked:
    """One text's translation and its spans: each sentence's spans moved to where it lands; a mark's parts merged
    where only the gap between sentences separates them; a mark on no sentence kept at its gap."""
    text = layout.join([t.text for t in translated])
    starts, position = [], len(layout.gaps[0])  # where each sentence's translation starts in `text`
    for t, gap in zip(translated, layout.gaps[1:]):
        starts.append(position)
        position += len(t.text) + len(gap)
    placed: dict[int, tuple[int, int]] = {}
    for start, t in zip(starts, translated):
        for s in t.spans:
            a, b = start + s.start, start + s.end
            placed[s.mark] = (min(a, placed[s.mark][0]), max(b, placed[s.mark][1])) if s.mark in placed else (a, b)
    for s in spans:  # on no sentence: at the start of the gap it was in
        if s.mark not in placed:
            gap = sum(1 for _, end in layout.spans if end <= s.start)
            at = starts[gap] - len(layout.gaps[gap]) if gap < len(starts) else len(text) - len(layout.gaps[-1])
            placed[s.mark] = (at, at)
    return Marked(text, nest([Span(*placed[s.mark], s.mark, s.parent) for s in spans]))


def nest(spans: list[Span]) -> list[Span]:
    """Placed spans (in the source's document order) made to nest as in the source: each inside its parent's, and
    beside, not across, its siblings placed before it, in whatever order the translation puts them. An overlap that
    the alignment made is cut; no mark is dropped."""
    placed: dict[int, Span] = {}
    children: dict[int | None, list[Span]] = {}
    for s in spans:
        parent = placed.get(s.parent)
        low, high = (parent.start, parent.end) if parent else (0, max(s.end, 0))
        a, b = min(max(s.start, low), high), min(max(s.end, low), high)
        for o in children.get(s.parent, []):  # a sibling: keep to one side of it
            if a < o.end and o.start < b or (a == b and o.start < a < o.end):
                a, b = (a, min(b, o.start)) if a < o.start else (max(a, o.end), max(b, o.end))
        placed[s.mark] = Span(a, max(a, b), s.mark, s.parent)
        children.setdefault(s.parent, []).append(placed[s.mark])
    return [placed[s.mark] for s in spans]
