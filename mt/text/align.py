"""Marks placed on a translation by the model's cross-attention: a mark on some source words goes to the target
words that attended most to them.

The translation is the plain text's (marks never change what the model reads while it translates). To align it, the
source is cut into pieces again with a cut at each mark's edges, so that a mark on 汤姆 in 汤姆说 (one piece) has pieces
of its own, and the translation is read once more, teacher forced (the weights averaged over the heads of `LAYERS`).
Each source piece of a mark goes to the target piece that attends to it most, and the mark's target span runs from
the first to the last of those, widened to whole words. (The other way round, the target pieces that attend most to
the mark's pieces, a function word beside it would often join it: "Tom doesn't" for 汤姆.) A mark on text that the
translation holds as it is (a number, a Latin-script name or code) goes on that copy instead, the one nearest the
attention's place: attention spreads a few target words around a copied number, the copy itself does not. A mark on
the whole sentence stays on the whole translation. (LibreTranslate instead translates the pieces between tags one by
one, which loses word order across them.)
"""

from __future__ import annotations

import re

import torch

from mt.data.tokenizer import EOS
from mt.decode.translator import Translator
from mt.text.marks import Sentence, Span

CLITIC = re.compile(r"['’](s|ll|re|ve|d|m)\b", re.IGNORECASE)  # an English word's clitic, where it begins
# Letters of the scripts written without spaces between words (Han, kana, Thai, Lao, Tibetan, Myanmar, Khmer): no
# space tells where their words end, so a placed mark is not widened over them
UNSPACED = re.compile("[\u3005\u3007\u3040-\u30ff\u31f0-\u31ff\uff65-\uff9f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                      "\U00020000-\U0003134f\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff]")
# The decoder layers whose cross-attention aligns words best (averaged): the last (scripts/bench_real_text.py).
LAYERS = slice(-1, None)


def place(sentence: Sentence, translation: str, translator: Translator) -> list[Span]:
    """The sentence's spans placed on its translation."""
    whole = {s.mark for s in sentence.spans if s.start <= 0 and s.end >= len(sentence.text) and s.start < s.end}
    if len(whole) == len(sentence.spans) or not translation.strip():
        return [Span(0, len(translation) if s.mark in whole else 0, s.mark, s.parent) for s in sentence.spans]
    tokenizer = translator.tokenizer
    source_ids, source = _cut_pieces(translator, sentence)
    attention = translator.attention(sentence.text, translation, source_ids + [EOS])
    target = _offsets(tokenizer.tgt, tokenizer.normalize_tgt([translation])[0], translation)
    weights = attention.weights[LAYERS]
    scores = weights.float().mean(dim=(0, 1))[:len(target), :len(source)]  # [T, S], EOS left out
    aligned = scores.argmax(dim=1).tolist()  # each target piece's source piece
    return [Span(0, len(translation), s.mark, s.parent) if s.mark in whole
            else _span(s, sentence.text, source, target, aligned, scores, translation) for s in sentence.spans]


def _cut_pieces(translator: Translator, sentence: Sentence) -> tuple[list[int], list[tuple[int, int]]]:
    """The sentence's source pieces with a cut at every mark's edge, and where each piece is in the sentence."""
    text, tokenizer = sentence.text, translator.tokenizer
    cuts = sorted({x for s in sentence.spans for x in (s.start, s.end) if 0 < x < len(text)})
    ids, offsets = [], []
    for a, b in zip([0] + cuts, cuts + [len(text)]):
        part = text[a:b]
        pieces = tokenizer.src.encode(tokenizer.normalize_src([part])[0], return_type="proto").pieces
        for piece, (x, y) in zip(pieces, _surface_offsets(pieces, part)):
            if a and not text[a - 1].isspace() and piece.piece.startswith("▁"):  # no word starts at this cut
                bare = tokenizer.src.piece_to_id(piece.piece[1:]) if len(piece.piece) > 1 else None
                if bare is None:
                    continue  # "▁" alone: SentencePiece's space before the part, which the text lacks here
                if bare != tokenizer.src.unk_id():
                    ids.append(bare)
                    offsets.append((a + x, a + y))
                    continue
            ids.append(piece.id)
            offsets.append((a + x, a + y))
    return ids, offsets


def _span(span: Span, text: str, source: list[tuple[int, int]], target: list[tuple[int, int]], aligned: list[int],
          scores: torch.Tensor, translation: str) -> Span:
    """The place in the translation of a mark on part of the sentence."""
    covered = [i for i, (a, b) in enumerate(source) if a < span.end and b > span.start]
    # a point, or a mark on what no piece holds (a space): before the first target piece aligned at or after it
    if not covered:
        after = {i for i, (a, _) in enumerate(source) if a >= span.start}
        rows = [t for t, s in enumerate(aligned) if s in after]
        at = target[min(rows)][0] if rows else len(translation)
        return Span(at, at, span.mark, span.parent)
    rows = [int(scores[:, s].argmax()) for s in covered]  # the target piece that attends most to each
    start, end = _words(translation, target[min(rows)][0], target[max(rows)][1])
    start, end = _copy(text[span.start:span.end], translation, start) or (start, end)
    return Span(start, end, span.mark, span.parent)


def _copy(marked: str, translation: str, near: int) -> tuple[int, int] | None:
    """Where the translation holds the marked text as it is, as words of its own (not "10" inside "2010"), if the
    marked text is ASCII with a letter or digit: the occurrence that starts nearest `near`; None if there is none."""
    marked = marked.strip()
    if not marked.isascii() or not any(c.isalnum() for c in marked):
        return None
    found = [m.span() for m in re.finditer(rf"(?<![0-9A-Za-z]){re.escape(marked)}(?![0-9A-Za-z])", translation)]
    return min(found, key=lambda f: abs(f[0] - near), default=None)


def _words(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) widened to whole words (letters, digits and apostrophes run on: "It's"; not the letters of a
    script without spaces, whose pieces are the words), without whitespace at its ends. An end just before one of
    English's clitics ('s, 'll, 're, …) stays there: they are words of their own, so that a mark on 汤姆 in 汤姆的
    wraps the "Tom" of "Tom's" (but "don't" stays whole)."""
    def word(c: str) -> bool:
        return (c.isalnum() or c in "'’") and not UNSPACED.match(c)

    while start > 0 and word(text[start - 1]) and word(text[start]):
        start -= 1
    while end < len(text) and word(text[end - 1]) and word(text[end]) and not CLITIC.match(text, end):
        end += 1
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _offsets(processor, normalized: str, text: str) -> list[tuple[int, int]]:
    """[start, end) in `text` of each of its pieces, from SentencePiece's own (`normalized`: the text after script
    conversion)."""
    return _surface_offsets(processor.encode(normalized, return_type="proto").pieces, text)


def _surface_offsets(pieces, text: str) -> list[tuple[int, int]]:
    """Each piece's [start, end) in `text`: its surface's characters, counted on; scaled where a script conversion
    changed the text's length."""
    offsets, position = [], 0
    for p in pieces:
        offsets.append((position, position + len(p.surface)))
        position += len(p.surface)
    if position != len(text) and position:
        offsets = [(a * len(text) // position, b * len(text) // position) for a, b in offsets]
    return offsets
