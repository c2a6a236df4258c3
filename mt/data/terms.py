"""A glossary made ready for one model's tokenizer: where its source terms stand in a sentence, the target ids
that the search must write for them, and which of them an output holds.

A term stands in a text when each of its edges does, judged by the term's own character there: a letter or digit
of a spaced script (Latin, Cyrillic, …) needs a character beside it that is not one (Acme in "Acme's", "(Acme)",
"Acme-based", not in "Acmes"); a character of a script written without spaces (Han, kana, Thai) needs a
SentencePiece piece boundary of the text there (中 does not stand inside a 中国 piece); other characters stand
anywhere. A term matches as written and with its first letter capitalised (acme matches Acme; Acme never matches
acme). Chinese is compared in Simplified on both sides, so 湯姆 in a sentence matches a 汤姆 entry.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import sentencepiece as spm

from mt.core.errors import MtError
from mt.data.glossary import Entry, Glossary
from mt.data.lexical import UNSPACED
from mt.data.script_conversion import sentencepiece_model
from mt.data.tokenizer import UNK, Tokenizer, script_converter

MAX_SENTENCE_TERMS = 8  # term occurrences that constrain one sentence: the first ones in sentence order
MAX_TERM_PIECES = 32  # target pieces of one term
UNSPACED_CHAR = re.compile(f"[{UNSPACED}]")

Forms = list[list[int]]  # a term's alternative target forms, each as target ids (no BOS/EOS)
Index = dict[str, list[tuple[str, object]]]  # first character → (key, value), longest key first


@dataclass(frozen=True)
class Match:
    """A glossary entry found in a sentence at [start, end)."""

    entry: Entry
    start: int
    end: int


@dataclass(frozen=True)
class TermUse:
    """What happened to one term occurrence: its source as the glossary writes it, its target as the model writes
    it (the one found in the output, or the first when missed), and whether the output holds it."""

    source: str
    target: str
    used: bool


class TermFinder:
    """A glossary for one tokenizer. Each target is encoded once, here; a target the vocabulary cannot write, or
    one of more than MAX_TERM_PIECES pieces, is an MtError naming its glossary line."""

    def __init__(self, glossary: Glossary, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        # what the glossary asks, for keys of cached translations: equal for equal entries, whatever their lines
        entries = json.dumps([(e.source, e.targets) for e in glossary.entries], ensure_ascii=False)
        self.key = hashlib.sha256(entries.encode("utf-8")).hexdigest()
        self._simplified = script_converter("simplified")
        self._sources = _source_index(glossary, self._simplified)
        bare = _bare_processor(tokenizer.tgt_proto or tokenizer.src_proto)
        self._forms = {entry: _entry_forms(entry, tokenizer, bare, glossary.name) for entry in glossary.entries}
        self._written = {entry: list(dict.fromkeys(tokenizer.decode_tgt(forms))) for entry, forms in
                         self._forms.items()}  # each target as the model writes it

    def find(self, sentence: str) -> list[Match]:
        """The glossary's terms in a sentence: leftmost-longest, not overlapping, in sentence order."""
        simplified = self._simplified([sentence])[0]
        text = simplified if len(simplified) == len(sentence) else sentence  # a phrase rule changed its length
        bounds = _bounds(self.tokenizer.src, self.tokenizer.normalize_src, sentence)
        return [Match(entry, start, end) for start, end, entry in _scan(text, self._sources, bounds)]

    def forms(self, matches: list[Match]) -> list[Forms]:
        """The search's terms for a sentence's matches: the first MAX_SENTENCE_TERMS, each its target forms."""
        return [self._forms[m.entry] for m in matches[:MAX_SENTENCE_TERMS]]

    def target(self, entry: Entry) -> str:
        """The entry's first target, as the model writes it."""
        return self._written[entry][0]

    def report(self, matches: list[Match], output: str) -> list[TermUse]:
        """Each match's use in the sentence's output, read from the text with the matching's edge rules: the k-th
        occurrence of a source term is used when the output holds one of its targets k times."""
        bounds = _bounds(self.tokenizer.tgt, self.tokenizer.normalize_tgt, output)
        found: dict[Entry, list[str]] = {}
        uses = []
        for m in matches:
            if m.entry not in found:
                index = _index((key, written) for written in self._written[m.entry] for key in _cased(written))
                spans = _scan(output, index, bounds)
                found[m.entry] = [output[start:end] for start, end, _ in spans]  # as the output writes it
            uses.append(_use(m.entry, found[m.entry], self._written[m.entry]))
        return uses


def _use(entry: Entry, held: list[str], written: list[str]) -> TermUse:
    """The use of one occurrence of an entry: the next target the output holds, if one is left."""
    return TermUse(entry.source, held.pop(0), True) if held else TermUse(entry.source, written[0], False)


def _index(pairs) -> Index:
    """(key, value) pairs looked up by the key's first character, longest key first."""
    index: Index = {}
    for key, value in pairs:
        index.setdefault(key[0], []).append((key, value))
    for candidates in index.values():
        candidates.sort(key=lambda pair: -len(pair[0]))  # stable: among equal lengths, the order given
    return index


def _cased(term: str) -> list[str]:
    """A term as written, and with its first letter capitalised where that differs."""
    capital = term[0].upper() + term[1:]
    return [term] if capital == term or len(capital) != len(term) else [term, capital]


def _source_index(glossary: Glossary, simplified: Callable[[list[str]], list[str]]) -> Index:
    """The source terms as written and in Simplified, then each capitalised; two entries of one Simplified form
    with other translations are an error."""
    exact: dict[str, Entry] = {}
    for entry, converted in zip(glossary.entries, simplified([e.source for e in glossary.entries])):
        for key in dict.fromkeys((entry.source, converted)):
            first = exact.setdefault(key, entry)
            if set(first.targets) != set(entry.targets):
                raise MtError(f'{glossary.name}:{entry.line}: "{entry.source}" and "{first.source}" on line '
                              f"{first.line} are one term (Chinese is matched in Simplified), with other "
                              f"translations; give its translations on one line, tab-separated")
    capitalised = {cased: entry for key, entry in exact.items() for cased in _cased(key)[1:] if cased not in exact}
    return _index([*exact.items(), *capitalised.items()])  # among keys of one length, the exact ones first


def _bounds(processor: spm.SentencePieceProcessor, normalize: Callable[[list[str]], list[str]],
            text: str) -> Callable[[], set[int]]:
    """The piece boundaries (character offsets) of the text as the model reads it (`normalize`: its script
    conversion), or as written where that conversion changes its length; worked out when an edge first needs
    them."""
    @cache
    def bounds() -> set[int]:
        converted = normalize([text])[0]
        offsets, position = {0}, 0
        for piece in processor.encode(converted if len(converted) == len(text) else text,
                                      return_type="proto").pieces:
            position += len(piece.surface)
            offsets.add(position)
        return offsets
    return bounds


def _scan(text: str, index: Index, bounds: Callable[[], set[int]]) -> list[tuple[int, int, object]]:
    """(start, end, value) of the index's keys standing in the text: leftmost-longest, not overlapping."""
    found, i = [], 0
    while i < len(text):
        for key, value in index.get(text[i], ()):
            end = i + len(key)
            if text.startswith(key, i) and _stands(text, i, end, bounds):
                found.append((i, end, value))
                i = end
                break
        else:
            i += 1
    return found


def _stands(text: str, start: int, end: int, bounds: Callable[[], set[int]]) -> bool:
    """Whether text[start:end] stands as a term: each edge, by the term's character there."""
    return (_edge(text[start], text[start - 1] if start else "", start, bounds)
            and _edge(text[end - 1], text[end] if end < len(text) else "", end, bounds))


def _edge(inside: str, outside: str, cut: int, bounds: Callable[[], set[int]]) -> bool:
    """Whether a term's edge at offset `cut` stands, its character `inside` beside `outside` ("" at an end)."""
    if UNSPACED_CHAR.match(inside):
        return cut in bounds()
    return not (spaced_letter(inside) and outside and spaced_letter(outside))


def spaced_letter(c: str) -> bool:
    """A letter or digit of a script written with spaces between words."""
    return c.isalnum() and not UNSPACED_CHAR.match(c)


def _bare_processor(proto: bytes) -> spm.SentencePieceProcessor:
    """The target SentencePiece model without its dummy prefix: it writes a text as it comes inside a line, with no
    word starting before it (汤姆 as 汤姆, where the model alone writes ▁汤姆)."""
    model = sentencepiece_model(proto)
    model.normalizer_spec.add_dummy_prefix = False
    return spm.SentencePieceProcessor(model_proto=model.SerializeToString())


def _entry_forms(entry: Entry, tokenizer: Tokenizer, bare: spm.SentencePieceProcessor, name: str) -> Forms:
    """An entry's target forms, one per distinct encoding: a word of its own ("▁Acme"), or, for a target that
    starts with a character of a script without spaces, written without the space before it: in such output a "▁"
    inside the sentence writes a space."""
    forms = []
    for target, text in zip(entry.targets, tokenizer.normalize_tgt(list(entry.targets))):
        pieces = (bare if UNSPACED_CHAR.match(text[0]) else tokenizer.tgt).encode(text, return_type="proto").pieces
        ids = [p.id for p in pieces]
        if not ids or UNK in ids:
            unwritten = next((p.surface for p in pieces if p.id == UNK), target)
            raise MtError(f'{name}:{entry.line}: the model\'s vocabulary cannot write "{unwritten}" of "{target}"')
        if len(ids) > MAX_TERM_PIECES:
            raise MtError(f'{name}:{entry.line}: "{target}" is {len(ids)} pieces for this model; a term has at most '
                          f"{MAX_TERM_PIECES}")
        forms.append(ids)
    return [list(form) for form in dict.fromkeys(map(tuple, forms))]
