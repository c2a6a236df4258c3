"""Real text through a Translator: texts (paragraphs, documents' marked texts) split into sentences, the sentences of
all texts translated as one batch, each text rejoined in its shape with its marks placed on the translation.

In two steps, `split_for` and `finish`, so that `mt serve` can decode the sentences through its batching worker
between them; `translate_marked` and `translate_texts` do both for the command line.
"""

from __future__ import annotations

from dataclasses import dataclass

from mt.config import DecodeConfig
from mt.data.terms import TermUse
from mt.decode.confidence import Confidence
from mt.decode.translator import Translation, Translator, with_confidence
from mt.text.align import place
from mt.text.glossary_modes import GlossaryUse
from mt.text.marks import Marked, Split, split_marked


def split_for(translator: Translator, texts: list[Marked], split: bool = True) -> Split:
    """The texts' sentences in the model's source language, each short enough for its position table."""
    limit = translator.config.model.max_positions

    def fits(sentence: str) -> bool:
        return len(translator.tokenizer.encode_src([sentence])[0]) <= limit

    data = translator.config.data
    return split_marked(texts, data.src_lang, data.tgt_lang, fits, split)


def finish(translator: Translator, split: Split, found: list[list[Translation]]) -> list[Marked]:
    """The texts' translations from their sentences' best translations, marks placed (which reads the model again
    for each sentence that has marks: mt's own engine, or a CTranslate2 export)."""
    translated = [Marked(nbest[0].text, place(sentence, nbest[0].text, translator) if sentence.spans else [])
                  for sentence, nbest in zip(split.sentences, found)]
    return split.join(translated)


def translate_marked(translator: Translator, texts: list[Marked], decode: DecodeConfig | None = None,
                     split: bool = True) -> list[Marked]:
    """Texts with marks → their translations with the marks placed (mt/text/align.py)."""
    return translate_marked_terms(translator, texts, decode, split, None)[0]


def translate_marked_terms(translator: Translator, texts: list[Marked], decode: DecodeConfig | None, split: bool,
                           glossary: GlossaryUse | None) -> tuple[list[Marked], list[TermUse]]:
    """As translate_marked, with a `glossary`; and what became of each of its terms."""
    parts = split_for(translator, texts, split)
    found = _translate(translator, [s.text for s in parts.sentences], decode, glossary)
    return finish(translator, parts, found), [use for nbest in found for use in nbest[0].terms]


def _translate(translator: Translator, sentences: list[str], decode: DecodeConfig | None,
               glossary: GlossaryUse | None) -> list[list[Translation]]:
    return glossary.translate(translator, sentences, decode) if glossary else translator.translate(sentences, decode)


@dataclass
class TermCount:
    """Texts → their translations (translate_plain), counting the glossary's terms they hold; prints as that count."""

    translator: Translator
    decode: DecodeConfig
    split: bool
    glossary: GlossaryUse | None
    used: int = 0
    terms: int = 0

    def __call__(self, texts: list[str]) -> list[str]:
        found = translate_plain(self.translator, texts, self.decode, self.split, self.glossary)
        uses = [use for t in found for use in t.terms]
        self.used, self.terms = self.used + sum(use.used for use in uses), self.terms + len(uses)
        return [t.text for t in found]

    def __str__(self) -> str:
        return f"glossary: {self.used:,} of {self.terms:,} terms used ({100 * self.used / max(self.terms, 1):.1f}%)"


def translate_texts(translator: Translator, texts: list[str], decode: DecodeConfig | None = None,
                    split: bool = True) -> list[str]:
    """Plain texts → their translations, in their shape."""
    return [t.text for t in translate_plain(translator, texts, decode, split)]


def translate_plain(translator: Translator, texts: list[str], decode: DecodeConfig | None = None, split: bool = True,
                    glossary: GlossaryUse | None = None, confidence: bool = False) -> list[Translation]:
    """Plain texts → their translations, in their shape, each with the failure of its first sentence that failed
    (mt/decode/guard.py); with a `glossary`, each with what became of the terms of its sentences, in order; with
    `confidence`, each with its confidence (Confidence.joined, of its sentences')."""
    parts = split_for(translator, [Marked(text) for text in texts], split)
    sentences = [s.text for s in parts.sentences]
    found = _translate(translator, sentences, decode, glossary)
    joined = finish(translator, parts, found)
    per_text = parts.per_text(with_confidence(translator, sentences, found) if confidence else found)
    failures = [next((nbest[0].failure for nbest in mine if nbest[0].failure), None) for mine in per_text]
    confidences = [Confidence.joined([nbest[0].confidence for nbest in mine]) if confidence else None
                   for mine in per_text]
    return [Translation(text.text, 0.0, used, sure, failed)
            for text, used, sure, failed in zip(joined, text_terms(parts, found), confidences, failures)]


def text_terms(parts: Split, found: list[list[Translation]]) -> list[list[TermUse]]:
    """What became of each text's terms: those of its sentences' best translations, in order."""
    return [[use for nbest in mine for use in nbest[0].terms] for mine in parts.per_text(found)]
