"""A glossary's two modes (`--glossary-mode`). Hard: mt's own search holds every term (mt/decode/constrained.py).
Soft, for either engine: each sentence is translated as without a glossary, and each term its translation misses is
written over the words that the term's source aligns to, found by the model's cross-attention as marks are placed
(mt/text/align.py). A term whose source aligns to no word is written where the attention points, between words.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mt.config import DecodeConfig
from mt.data.terms import Match, TermFinder, spaced_letter
from mt.decode.translator import Translation, Translator
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
        if not self.soft:
            return translator.translate(lines, decode, first_line, self.finder)
        found = translator.translate(lines, decode, first_line)
        return [[written_in(translator, line, t, matches, self.finder) for t in hyps]
                for line, hyps, matches in zip(lines, found, map(self.finder.find, lines))]


def written_in(translator: Translator, sentence: str, translation: Translation, matches: list[Match],
               finder: TermFinder) -> Translation:
    """The translation of `sentence` with each term of `matches` it misses written over the words its source aligns
    to (the term's first target, as the model writes it), and the report of the result."""
    text = translation.text
    uses = finder.report(matches, text)
    missed = [m for m, use in zip(matches, uses) if not use.used]
    if missed and text.strip():
        spans = place(Sentence(sentence, [Span(m.start, m.end, i) for i, m in enumerate(missed)]), text, translator)
        text = _replaced(text, [(s.start, s.end, finder.target(missed[s.mark].entry)) for s in spans])
    return dataclasses.replace(translation, text=text, terms=finder.report(matches, text))


def _replaced(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each [start, end) replaced by its target, from the right; an edit that overlaps one already made
    is left out (two terms aligned to one word: the first from the right holds it). A target that replaces the
    first word of a capitalised text is capitalised; one put between words gets the spaces a word needs."""
    done_from = len(text) + 1
    for start, end, target in sorted(edits, key=lambda e: (-e[0], -e[1])):
        if end > done_from:
            continue
        if start == 0 and text[:1].isupper():
            target = target[:1].upper() + target[1:]
        if start == end:
            before = " " if start > 0 and spaced_letter(text[start - 1]) and spaced_letter(target[0]) else ""
            after = " " if end < len(text) and spaced_letter(text[end]) and spaced_letter(target[-1]) else ""
            target = before + target + after
        text, done_from = text[:start] + target + text[end:], start
    return text
