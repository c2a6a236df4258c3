"""The JSON answers made from texts through the model: LibreTranslate's alternatives, and /api/translate's lines
with their sentences, n-best lists and attention maps."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from statistics import fmean

from mt.decode.confidence import Confidence
from mt.decode.translator import Attention, Translation
from mt.text.marks import Marked, Split
from mt.text.sentences import Layout


@dataclass
class Done:
    """Texts through the model: their sentences (`split`), each sentence's n-best and attention maps (per
    translation, None where none was asked for), and the texts' translations with their marks placed."""

    split: Split
    found: list[list[Translation]]
    maps: list[list[Attention | None]]
    texts: list[Marked]


def alternative_texts(done: Done, best: list[str], count: int) -> list[list[str]]:
    """Each text's up to `count` other translations: its sentences' i-th translations rejoined, for i = 1 … count
    (a sentence with fewer gives its last), those that differ from the best and from each other."""
    others = [done.split.join([Marked(t.text) for t in _ranked(done.found, i)]) for i in range(1, count + 1)]
    return [list(dict.fromkeys(other[k].text for other in others if other[k].text != text))
            for k, text in enumerate(best)]


def page_terms(done: Done, blocks: list[int]) -> list[list[dict]]:
    """What became of each term of each page (_pages), in order."""
    return [[dataclasses.asdict(use) for t in page for use in t.terms] for page in _pages(done, blocks)]


def page_confidences(done: Done, blocks: list[int]) -> list[Confidence]:
    """The confidence of each page's translation (_pages): Confidence.joined, of its sentences'."""
    return [Confidence.joined([t.confidence for t in page]) for page in _pages(done, blocks)]


def page_failures(done: Done, blocks: list[int]) -> list[str | None]:
    """How each page's translation failed (_pages; mt/decode/guard.py): its first failed sentence's failure, or
    None."""
    return [next((t.failure for t in page if t.failure), None) for page in _pages(done, blocks)]


def _pages(done: Done, blocks: list[int]) -> list[list[Translation]]:
    """Each page's sentences' best translations, in order, a page being `blocks` of done's texts in a row (an HTML
    page's blocks; 1 for a plain text)."""
    per_text, pages, start = done.split.per_text([nbest[0] for nbest in done.found]), [], 0
    for count in blocks:
        pages.append([t for sentences in per_text[start:start + count] for t in sentences])
        start += count
    return pages


def _ranked(found: list[list[Translation]], i: int) -> list[Translation]:
    """Each sentence's i-th translation (its last, where it has fewer)."""
    return [nbest[min(i, len(nbest) - 1)] for nbest in found]


def lines_json(lines: list[str], done: Done, terms: bool = False) -> list[dict]:
    """/api/translate's lines: each line's translation with its confidence, its words' scores and its failure (its
    first failed sentence's, or null), its n-best, and its sentences with theirs (each translation with its
    confidence, and its failure where it failed); with `terms`, what became of each glossary term, per line (its
    best translation) and per sentence translation."""
    answer, start = [], 0
    ones = [1] * len(lines)
    line_terms, confidences, failures = page_terms(done, ones), page_confidences(done, ones), page_failures(done, ones)
    for line, layout, translated, uses, sure, failed in zip(lines, done.split.layouts, done.texts, line_terms,
                                                            confidences, failures):
        end = start + len(layout.spans)
        sentences, found, maps = done.split.sentences[start:end], done.found[start:end], done.maps[start:end]
        answer.append({"source": line, "translation": translated.text, **sure.json(), "failure": failed,
                       **({"terms": uses} if terms else {}),
                       "translations": _line_nbest(layout, found, maps),
                       "sentences": [{"source": sentence.text, "translations": _nbest_json(nbest, attentions, terms)}
                                     for sentence, nbest, attentions in zip(sentences, found, maps)]})
        start = end
    return answer


def _line_nbest(layout: Layout, found: list[list[Translation]], maps: list[list[Attention | None]]) -> list[dict]:
    """A line's n-best: its sentences' i-th translations rejoined (a sentence with fewer gives its last), scored by
    the mean of their scores. A line of one sentence has its sentence's, with their attention maps."""
    if len(found) == 1:
        return [{**t, "text": layout.join([t["text"]])} for t in _nbest_json(found[0], maps[0])]
    nbest = []
    for i in range(max((len(n) for n in found), default=1)):
        picked = _ranked(found, i)
        nbest.append({"text": layout.join([t.text for t in picked]),
                      "score": round(fmean(t.score for t in picked), 4) if picked else 0.0,
                      "confidence": round(Confidence.joined([t.confidence for t in picked]).score, 4)})
    return nbest


def _nbest_json(nbest: list[Translation], maps: list[Attention | None], terms: bool = False) -> list[dict]:
    return [{"text": t.text, "score": round(t.score, 4), "confidence": round(t.confidence.score, 4),
             **({"failure": t.failure} if t.failure else {}),
             **({"attention": _attention_json(a)} if a else {}),
             **({"terms": [dataclasses.asdict(use) for use in t.terms]} if terms else {})}
            for t, a in zip(nbest, maps)]


def _attention_json(attention: Attention) -> dict:
    """Pieces and per-layer weights [layers][T][S] (heads averaged), rounded for the page, with each layer's number
    in the decoder (a CTranslate2 export gives its last layer only)."""
    layers = attention.weights.mean(dim=1)
    return {"source": attention.source, "target": attention.target, "layer_numbers": attention.layer_numbers,
            "layers": [[[round(w, 4) for w in row] for row in layer] for layer in layers.tolist()]}
