"""A glossary's two modes (`--glossary-mode`). Hard: mt's own search holds every term (mt/decode/constrained.py).
Soft, for either engine: each sentence is translated as without a glossary, and each term its translation misses is
written over the words that the term's source aligns to, found by the model's cross-attention as marks are placed
(mt/text/align.py). A term whose source aligns to no word, or to punctuation, is written where the attention points,
between words; two terms aligned to one word both stand, side by side.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mt.config import DecodeConfig
from mt.data.terms import Match, TermFinder, spaced_letter
from mt.decode.constraints import Terms
from mt.decode.translator import Translation, Translator, reported
from mt.text.align import place
from mt.text.marks import Sentence, Span

@dataclass(frozen=True)
class GlossaryUse:
    """A glossary made ready for a model (`finder`) and the mode it is used in."""

    finder: TermFinder
    soft: bool = False

    def translate(self, translator: Translator, lines: list[str], decode: DecodeConfig | None = None,
                  first_line: int = 1) -> list[list[Translation]]:
        """Translator.translate with the glossary: each translation holds the terms of its line (hard), or has the
        ones it missed written in (soft), and says what became of each."""
        matches, terms = self.prepared(translator, lines)
        found = translator.translate_ids(translator.encode(lines, first_line), decode, terms)
        return self.finished(translator, lines, matches, found)

    def prepared(self, translator: Translator, lines: list[str]) -> tuple[list[list[Match]], list[Terms | None] | None]:
        """Each line's terms, and what the search must hold for them: None in soft mode, which searches as without
        a glossary."""
        if self.soft:
            return [self.finder.find(line) for line in lines], None
        return translator.find_terms(lines, self.finder)

    def finished(self, translator: Translator, lines: list[str], matches: list[list[Match]],
                 found: list[list[Translation]]) -> list[list[Translation]]:
        """The lines' translations (`found`) with what became of their terms; in soft mode, the missed ones
        written in."""
        if not self.soft:
            return reported(self.finder, matches, found)
        return [[written_in(translator, line, t, m, self.finder) for t in hyps]
                for line, hyps, m in zip(lines, found, matches)]


def written_in(translator: Translator, sentence: str, translation: Translation, matches: list[Match],
               finder: TermFinder) -> Translation:
    """The translation of `sentence` with each term of `matches` it misses written over the words its source aligns
    to (the term's first target, as the model writes it), and the report of the result."""
    text = translation.text
    uses = finder.report(matches, text)
    missed = [m for m, use in zip(matches, uses) if not use.used]
    if missed:
        spans = place(Sentence(sentence, [Span(m.start, m.end, i) for i, m in enumerate(missed)]), text, translator)
        text = _replaced(text, [(s.start, s.end, finder.target(missed[s.mark].entry)) for s in spans])
        uses = finder.report(matches, text)
    if text == translation.text:
        return dataclasses.replace(translation, terms=uses)
    return dataclasses.replace(translation, text=text, terms=uses, confidence=None)  # the search's was of another text


def _replaced(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each [start, end) replaced by its target, from the right. Punctuation is not written over: a
    target aligned to it goes before it; and a target aligned to words that another target took goes just before
    that one (two terms aligned to one word both stand). A target that replaces the first word of a capitalised text
    is capitalised, and a target of a spaced script gets a space where it would touch a word."""
    points = [(start, start if not any(c.isalnum() for c in text[start:end]) else end, target)
              for start, end, target in edits]
    done_from = len(text)
    for start, end, target in sorted(points, key=lambda e: (-e[0], -e[1])):
        if end > done_from:
            start = end = done_from
        if start == 0 and text[:1].isupper():
            target = target[:1].upper() + target[1:]
        before = " " if start > 0 and spaced_letter(text[start - 1]) and spaced_letter(target[0]) else ""
        after = " " if end < len(text) and spaced_letter(text[end]) and spaced_letter(target[-1]) else ""
        text, done_from = text[:start] + before + target + after + text[end:], start
    return text
