"""The corpus filters of data.filters, one small function each (their options: mt/config.py).

A row filter looks at one pair: `keep(src, tgt, options) -> bool`; cleaning runs them in parallel batches. A corpus
filter looks at all the pairs still kept (`alive`): a bound taken from the corpus, or the first of duplicates,
`keep(columns, alive, options) -> keep mask`, with the columns that row_columns computed.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable

import numpy as np

from mt.config import (CopyFilter, DuplicateSourcesFilter, LengthFilter, NumbersFilter, QuestionsFilter, RatioFilter,
                       ScriptFilter, UrlsFilter)
from mt.core.errors import MtError
from mt.clean.normalise import normalised, share_in, stable_hash

DIGITS = re.compile(r"\d+")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Latin and full-width, Arabic, Greek (U+037E, which NFKC would turn into a semicolon), and their combinations
QUESTION_MARKS = frozenset("?？؟\u037e‽⁇⁈⁉")
URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'，。]+|[a-z0-9.+_-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+", re.IGNORECASE)


# ---------------------------------------------------------------- row filters: one pair at a time

def length(src: str, tgt: str, f: LengthFilter) -> bool:
    return all(f.min_chars <= _chars(side) <= f.max_chars for side in (src, tgt))


def copy(src: str, tgt: str, f: CopyFilter) -> bool:
    """Letters compared, not digits: 2007年 / 2007. is a translation."""
    a, b = (DIGITS.sub("", normalised(side, chinese=False)) for side in (src, tgt))
    if not a or not b:
        return True
    if a == b:
        return False
    in_b = set(b)
    if 2 * sum(c in in_b for c in a) / (len(a) + len(b)) < f.max_similarity:  # an upper bound of the ratio: fast
        return True
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() < f.max_similarity


def script(src: str, tgt: str, f: ScriptFilter) -> bool:
    """URLs left out: their letters are Latin in every language (the urls filter looks at them)."""
    return all(share_in(URL.sub("", side), system) >= f.min_share
               for side, system in ((src, f.src_script), (tgt, f.tgt_script)))


def numbers(src: str, tgt: str, f: NumbersFilter) -> bool:
    return _numbers(src, f.min_digits) == _numbers(tgt, f.min_digits)


def urls(src: str, tgt: str, f: UrlsFilter) -> bool:
    return _urls(src) == _urls(tgt)


def _chars(text: str) -> int:
    return len(text.strip())


def _question(text: str) -> bool:
    return not QUESTION_MARKS.isdisjoint(text)


def _numbers(text: str, min_digits: int) -> set[str]:
    """The numbers of min_digits or more digits, as digits alone: 1,000 and 1000 are one number."""
    found = (re.sub(r"[.,]", "", n) for n in NUMBER.findall(unicodedata.normalize("NFKC", text)))
    return {n.lstrip("0") or "0" for n in found if len(n) >= min_digits}


def _urls(text: str) -> set[str]:
    return {url.rstrip(".,;:!?)").lower() for url in URL.findall(unicodedata.normalize("NFKC", text))}


class Langid:
    """langid: py3langid's answer for each side must be the side's language (made once per process)."""

    def __init__(self, src_lang: str, tgt_lang: str):
        try:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier
        except ImportError:
            raise MtError("the langid filter needs py3langid: pip install 'mt[langid]'")
        self.identifier = LanguageIdentifier.from_pickled_model(MODEL_FILE)
        self.langs = src_lang.split("-")[0], tgt_lang.split("-")[0]

    def __call__(self, src: str, tgt: str, f) -> bool:
        return all(self.identifier.classify(side)[0] == lang for side, lang in zip((src, tgt), self.langs))


ROW_FILTERS: dict[str, Callable[[str, str, object], bool]] = {
    "length": length, "copy": copy, "script": script, "numbers": numbers, "urls": urls}


# ---------------------------------------------------------------- corpus filters: all the pairs kept so far

def row_columns(src: list[str], tgt: list[str]) -> dict[str, list]:
    """What the corpus filters read of each pair: its sides' characters and the hashes of its source and pair."""
    spaced = [" ".join(s.split()) for s in src], [" ".join(t.split()) for t in tgt]
    return {"src_chars": [_chars(s) for s in src], "tgt_chars": [_chars(t) for t in tgt],
            "src_question": [_question(s) for s in src], "tgt_question": [_question(t) for t in tgt],
            "src_key": [stable_hash(s) for s in spaced[0]],
            "pair_key": [stable_hash(f"{s}\t{t}") for s, t in zip(*spaced)]}


def ratio(columns: dict[str, np.ndarray], alive: np.ndarray, f: RatioFilter) -> np.ndarray:
    """Within max_factor of the median ratio of the pairs kept so far, or short."""
    src, tgt = columns["src_chars"].astype(float), columns["tgt_chars"].astype(float)
    measured = alive & (src > 0) & (tgt > 0)
    if not measured.any():
        return np.ones(len(src), dtype=bool)
    pair_ratio = np.divide(tgt, src, out=np.ones_like(tgt), where=src > 0)
    median = float(np.median(pair_ratio[measured]))
    short = np.maximum(src, tgt) < f.min_chars
    return short | ((pair_ratio >= median / f.max_factor) & (pair_ratio <= median * f.max_factor))


def questions(columns: dict[str, np.ndarray], alive: np.ndarray, f: QuestionsFilter) -> np.ndarray:
    """Both sides a question or neither, where the pairs kept so far mark questions alike on both sides."""
    src, tgt = columns["src_question"].astype(bool), columns["tgt_question"].astype(bool)
    shares = sorted((int(src[alive].sum()), int(tgt[alive].sum())))
    if shares[1] == 0 or shares[0] < f.min_agreement * shares[1]:
        return np.ones(len(src), dtype=bool)
    return src == tgt


def duplicates(columns: dict[str, np.ndarray], alive: np.ndarray, f) -> np.ndarray:
    return _first(columns["pair_key"], alive, 1)


def duplicate_sources(columns: dict[str, np.ndarray], alive: np.ndarray, f: DuplicateSourcesFilter) -> np.ndarray:
    return _first(columns["src_key"], alive, f.keep)


def _first(keys: np.ndarray, alive: np.ndarray, keep: int) -> np.ndarray:
    """The first `keep` alive rows of each key (in corpus order) kept; the others not."""
    rows = np.flatnonzero(alive)
    order = np.argsort(keys[rows], kind="stable")  # rows of a key together, in corpus order
    sorted_keys = keys[rows][order]
    starts = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
    rank = np.arange(len(rows)) - np.maximum.accumulate(np.where(starts, np.arange(len(rows)), 0))
    kept = np.ones(len(keys), dtype=bool)
    kept[rows[order]] = rank < keep
    return kept


CORPUS_FILTERS = {"ratio": ratio, "questions": questions, "duplicates": duplicates,
                  "duplicate_sources": duplicate_sources}
