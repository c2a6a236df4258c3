"""The corpus filters of data.filters, each declared once: its keys (a section of its own, named by its `filter`
key), with their defaults, help and ranges, and what it keeps. Declaring one (@registered) adds it to FILTERS, and
so to CorpusFilter, the union that a config's filters are read as.

A filter is of one of four kinds, by what it reads; mt/clean/cleaning.py runs them in order, each over the pairs
that the ones before it kept:
- RepairFilter: one side's text, `repaired(text) -> text, or None to remove the pair`; run in parallel batches,
  and every later step reads the repaired texts.
- RowFilter: one pair, `keeps(src, tgt, langs) -> bool`; run in parallel batches.
- ColumnFilter: the columns that row_columns computed of every pair, and which pairs are still kept (`alive`): a bound
  taken from the corpus, or the first of duplicates; `keeps(columns, alive) -> keep mask` over all the pairs.
- TextFilter: the texts of the pairs still kept, `keeps(src, tgt, translator_of) -> keep mask` over them.

numpy is imported where a filter runs: mt/config.py reads this module, and `mt --help` would wait for numpy.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
import difflib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, Union

from pydantic import Field, model_validator

from mt.core.errors import MtError
from mt.core.schema import SECTION, Float, Int, NonNegative, Positive, Share, key, key_error
from mt.data.normalise import normalised, share_in, stable_hash, writing_system
from mt.data.repairs import ends_sentence, oddities, sentences, without_markup, without_mojibake

if TYPE_CHECKING:
    import numpy as np

WritingSystem = Literal["", "Latin", "Han", "Cyrillic", "Greek", "Arabic", "Hebrew", "Hangul", "Japanese",
                        "Devanagari", "Thai"]  # the script filter's; "": the one of the side's language
Langs = tuple[str, str]  # data.src_lang, data.tgt_lang

DIGITS = re.compile(r"\d+")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Latin and full-width, Arabic, Greek (U+037E, which NFKC would turn into a semicolon), and their combinations
QUESTION_MARKS = frozenset("?？؟\u037e‽⁇⁈⁉")
URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'，。]+|[a-z0-9.+_-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+", re.IGNORECASE)


class Filter:
    """What every filter has: pydantic's checks of a config section, and its binding to a corpus's languages."""

    __pydantic_config__ = SECTION

    def bound(self, langs: Langs, where: str) -> Filter:
        """The filter with what it takes from the language pair filled in; `where` names it in errors."""
        return self


class RepairFilter(Filter, ABC):
    @abstractmethod
    def repaired(self, text: str) -> str | None:
        """A side's text repaired (the same text when there is nothing to repair); None: the pair is removed."""


class RowFilter(Filter, ABC):
    @abstractmethod
    def keeps(self, src: str, tgt: str, langs: Langs) -> bool:
        """Whether to keep one pair."""


class ColumnFilter(Filter, ABC):
    @abstractmethod
    def keeps(self, columns: dict[str, np.ndarray], alive: np.ndarray) -> np.ndarray:
        """Which of the pairs still `alive` to keep, read from whole columns at once."""


class TextFilter(Filter, ABC):
    @abstractmethod
    def keeps(self, src: list[str], tgt: list[str], translator_of: Callable[[Path], Any]) -> np.ndarray:
        """Which pairs to keep; translator_of: a checkpoint's translator (mt/decode/, which stands above this
        package)."""


FILTERS: dict[str, type[Filter]] = {}  # by name, in the order declared
F = TypeVar("F", bound=type[Filter])


def registered(kind: F) -> F:
    """A filter's class as a dataclass, added to FILTERS under its name."""
    kind = dataclass(kind)
    FILTERS[kind.filter] = kind
    return kind


# ---------------------------------------------------------------- the filters, in the order docs/config.md lists them

@registered
class EncodingFilter(RepairFilter):
    """encoding: encoding damage repaired where it can be (UTF-8 read as Latin-1, Windows-1252 or GBK: `Iâ€™m`,
    `æ—¥æœ¬`, `鎴戠埍浣`); a pair is removed when bytes were lost (U+FFFD, `锟斤拷`, control characters) or the
    damage stays after repair (mt/data/repairs.py)."""

    filter: Literal["encoding"] = key("encoding", "The filter.")

    def repaired(self, text: str) -> str | None:
        return without_mojibake(text)


@registered
class MarkupFilter(RepairFilter):
    """markup: HTML tags taken out and entities read (`<div class="x">Hello&nbsp;</div>` → `Hello`); a pair is
    removed when a side held code (script, style), nothing is left of it, or markup remains that is not text."""

    filter: Literal["markup"] = key("markup", "The filter.")

    def repaired(self, text: str) -> str | None:
        return without_markup(text)


@registered
class LengthFilter(RowFilter):
    """length: a pair with a side of fewer or more characters than these. (Length in pieces is bounded by
    data.max_len, after tokenising.)"""

    filter: Literal["length"] = key("length", "The filter.")
    min_chars: NonNegative = key(1, "Fewest characters on a side (spaces at its ends not counted).")
    max_chars: Int = key(1000, "Most characters on a side.")

    @model_validator(mode="after")
    def _ordered(self) -> LengthFilter:
        if self.max_chars < self.min_chars:
            raise key_error(f"must be at least min_chars ({self.min_chars})", "max_chars")
        return self

    def keeps(self, src: str, tgt: str, langs: Langs) -> bool:
        return all(self.min_chars <= _chars(side) <= self.max_chars for side in (src, tgt))


@registered
class RatioFilter(ColumnFilter):
    """ratio: a pair whose length ratio (target characters / source characters) is more than max_factor times the
    corpus's median ratio, or less than its 1/max_factor. The median makes one bound fit every language pair
    (zh→en: about 3 English characters per Chinese one)."""

    filter: Literal["ratio"] = key("ratio", "The filter.")
    max_factor: Annotated[Float, Field(gt=1)] = key(3.0, "How far a pair's ratio may be from the median, as a factor "
                                                    "either way.")
    min_chars: NonNegative = key(12, "Pairs whose longer side has fewer characters are kept: short pairs vary most.")

    def keeps(self, columns: dict[str, np.ndarray], alive: np.ndarray) -> np.ndarray:
        """Within max_factor of the median ratio of the pairs kept so far, or short."""
        import numpy as np

        src, tgt = columns["src_chars"].astype(float), columns["tgt_chars"].astype(float)
        measured = alive & (src > 0) & (tgt > 0)
        if not measured.any():
            return np.ones(len(src), dtype=bool)
        pair_ratio = np.divide(tgt, src, out=np.ones_like(tgt), where=src > 0)
        median = float(np.median(pair_ratio[measured]))
        short = np.maximum(src, tgt) < self.min_chars
        return short | ((pair_ratio >= median / self.max_factor) & (pair_ratio <= median * self.max_factor))


@registered
class TruncatedFilter(ColumnFilter):
    """truncated: a target cut short: it does not end a sentence where its source does (in a corpus whose two
    sides end sentences alike), or its ratio (target characters / source characters) is under 1/max_factor of the
    ratio usual for sources of its length."""

    filter: Literal["truncated"] = key("truncated", "The filter.")
    max_factor: Annotated[Float, Field(gt=1)] = key(2.5, "How far under the usual ratio a pair's may be, as a "
                                                    "factor.")
    min_chars: NonNegative = key(12, "Pairs whose longer side has fewer characters are not judged by their ratio.")
    min_agreement: Share = key(0.9, "The smallest share of the pairs whose source ends a sentence whose target ends "
                                    "one too, for the filter to judge a corpus by its sentence ends.")

    def keeps(self, columns: dict[str, np.ndarray], alive: np.ndarray) -> np.ndarray:
        import numpy as np

        src_end, tgt_end = columns["src_end"].astype(bool), columns["tgt_end"].astype(bool)
        ending = alive & src_end
        agree = ending.any() and tgt_end[ending].mean() >= self.min_agreement
        cut = src_end & ~tgt_end if agree else np.zeros(len(src_end), dtype=bool)
        ratio, usual = _ratios(columns, alive)
        long = np.maximum(columns["src_chars"], columns["tgt_chars"]) >= self.min_chars
        return ~(cut | (long & (ratio < usual / self.max_factor)))


@registered
class GluedFilter(ColumnFilter):
    """glued: one side holds more sentences than the other may hold, and is longer than usual for the other's
    length by max_factor or more: a sentence added on one side only (the sentences of subtitles or crawled pages
    paired one off). Sentences are counted by their stops, and by sentencex in languages written with spaces; in a
    language written without them, a space between two phrases may end a sentence or not (subtitles), and in one
    written with them, so may a sentence of one word (an interjection: "Oh.")."""

    filter: Literal["glued"] = key("glued", "The filter.")
    max_factor: Annotated[Float, Field(gt=1)] = key(1.3, "How far from the usual ratio the side with more "
                                                    "sentences may make a pair's, as a factor.")

    def keeps(self, columns: dict[str, np.ndarray], alive: np.ndarray) -> np.ndarray:
        ratio, usual = _ratios(columns, alive)
        src_more = columns["src_sentences"] > columns["tgt_sentences_most"]  # more than the other side may hold
        tgt_more = columns["tgt_sentences"] > columns["src_sentences_most"]
        return ~((src_more & (ratio < usual / self.max_factor)) | (tgt_more & (ratio > usual * self.max_factor)))


@registered
class CopyFilter(RowFilter):
    """copy: a target that is its source copied, or nearly (a normalised similarity of max_similarity or more:
    case, width, punctuation and spaces ignored)."""

    filter: Literal["copy"] = key("copy", "The filter.")
    max_similarity: Share = key(0.8, "difflib's similarity ratio of the two normalised sides, from 0 to 1.")

    def keeps(self, src: str, tgt: str, langs: Langs) -> bool:
        """Letters compared, not digits: 2007年 / 2007. is a translation."""
        a, b = (DIGITS.sub("", normalised(side, chinese=False)) for side in (src, tgt))
        if not a or not b:
            return True
        if a == b:
            return False
        in_b = set(b)
        if 2 * sum(c in in_b for c in a) / (len(a) + len(b)) < self.max_similarity:  # an upper bound of the ratio
            return True
        return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() < self.max_similarity


@registered
class ScriptFilter(RowFilter):
    """script: a side with less than min_share of its letters in its language's writing system (Han for Chinese,
    Latin for English): the wrong language, swapped sides, or markup."""

    filter: Literal["script"] = key("script", "The filter.")
    min_share: Share = key(0.5, "The smallest share of a side's letters in its writing system.")
    src_script: WritingSystem = key("", "The source's writing system (empty: data.src_lang's).")
    tgt_script: WritingSystem = key("", "The target's writing system (empty: data.tgt_lang's).")

    def bound(self, langs: Langs, where: str) -> ScriptFilter:
        """The writing systems of the sides' languages where none is given."""
        return dataclasses.replace(
            self, src_script=self.src_script or writing_system(langs[0], f"{where}.src_script"),
            tgt_script=self.tgt_script or writing_system(langs[1], f"{where}.tgt_script"))

    def keeps(self, src: str, tgt: str, langs: Langs) -> bool:
        """URLs left out: their letters are Latin in every language (the urls filter looks at them)."""
        return all(share_in(URL.sub("", side), system) >= self.min_share
                   for side, system in ((src, self.src_script), (tgt, self.tgt_script)))


@registered
class NumbersFilter(RowFilter):
    """numbers: a number of min_digits or more digits on one side only (smaller ones are often spelt out)."""

    filter: Literal["numbers"] = key("numbers", "The filter.")
    min_digits: Positive = key(2, "The fewest digits of a number that must appear on both sides.")

    def keeps(self, src: str, tgt: str, langs: Langs) -> bool:
        return _numbers(src, self.min_digits) == _numbers(tgt, self.min_digits)


@registered
class UrlsFilter(RowFilter):
    """urls: a URL or e-mail address on one side only, or different ones on the two sides."""

    filter: Literal["urls"] = key("urls", "The filter.")

    def keeps(self, src: str, tgt: str, langs: Langs) -> bool:
        return _urls(src) == _urls(tgt)


@registered
class QuestionsFilter(ColumnFilter):
    """questions: a question mark on one side only: a question paired with a statement, most often another
    sentence's translation. A corpus whose two sides do not mark questions alike is left alone: where the side with
    fewer marked lines has less than min_agreement times the other's (TVsub's Chinese side, nearly without
    punctuation, marks 1.7% of its lines against its English side's 18.6%)."""

    filter: Literal["questions"] = key("questions", "The filter.")
    min_agreement: Annotated[Float, Field(ge=0, le=1)] = key(
        0.5, "The smallest ratio of the two sides' shares of lines with a question mark for the filter to act on a "
        "corpus.")

    def keeps(self, columns: dict[str, np.ndarray], alive: np.ndarray) -> np.ndarray:
        """Both sides a question or neither, where the pairs kept so far mark questions alike on both sides."""
        import numpy as np

        src, tgt = columns["src_question"].astype(bool), columns["tgt_question"].astype(bool)
        shares = sorted((int(src[alive].sum()), int(tgt[alive].sum())))
        if shares[1] == 0 or shares[0] < self.min_agreement * shares[1]:
            return np.ones(len(src), dtype=bool)
        return src == tgt


@registered
class DuplicatesFilter(ColumnFilter):
    """duplicates: a pair seen before in the corpus, compared normalised as the contamination guard compares
    texts (case, width, punctuation, spaces and Chinese script ignored), or with `near: false` only spaces at the
    ends and doubled inside ignored. Of a pair's copies, the best-formed is kept (repairs.oddities: fewest signs
    of careless copying, then the first)."""

    filter: Literal["duplicates"] = key("duplicates", "The filter.")
    near: bool = key(True, "Pairs that differ only in case, width, punctuation, spaces or Chinese script are "
                           "duplicates (false: only in spaces).")

    def keeps(self, columns: dict[str, np.ndarray], alive: np.ndarray) -> np.ndarray:
        """A pair with a side that is nothing after normalising (numbers, punctuation) is compared exactly."""
        import numpy as np

        near = columns["pair_norm"]
        keys = np.where(near != 0, near, columns["pair_key"]) if self.near else columns["pair_key"]
        return _first(keys, alive, 1, columns["pair_oddities"])


@registered
class DuplicateSourcesFilter(ColumnFilter):
    """duplicate_sources: a source seen `keep` times before with other targets. Not among the defaults: a
    hand-made corpus such as Tatoeba gives a fifth of its sentences several translations, all good."""

    filter: Literal["duplicate_sources"] = key("duplicate_sources", "The filter.")
    keep: Positive = key(1, "Pairs kept per source, the first ones in the corpus.")

    def keeps(self, columns: dict[str, np.ndarray], alive: np.ndarray) -> np.ndarray:
        return _first(columns["src_key"], alive, self.keep)


@registered
class LangidFilter(RowFilter):
    """langid: a side that py3langid (its model ships inside the package: `pip install 'mt[langid]'`) identifies as
    another language than the side's. Not among the defaults: it removes good short sentences."""

    filter: Literal["langid"] = key("langid", "The filter.")

    def keeps(self, src: str, tgt: str, langs: Langs) -> bool:
        identifier = _language_identifier()
        return all(identifier.classify(side)[0] == lang.split("-")[0] for side, lang in zip((src, tgt), langs))


@registered
class CrossEntropyFilter(TextFilter):
    """cross_entropy: dual conditional cross-entropy (Junczys-Dowmunt, 2018): with H(y|x) the forward model's and
    H(x|y) the reverse model's cross-entropy per token, a pair scores |H(y|x) − H(x|y)| + (H(y|x) + H(x|y)) / 2
    (H(y|x) alone without a reverse model); the pairs scoring lowest are kept."""

    filter: Literal["cross_entropy"] = key("cross_entropy", "The filter.")
    forward: str = key("", "A checkpoint translating source → target.")
    reverse: str = key("", "A checkpoint translating target → source (optional).")
    threshold: Float = key(0.0, "Keep pairs scoring at most this (nats per token); 0: use keep_fraction.")
    keep_fraction: Float = key(0.0, "Keep this share of the pairs, the best scoring (with threshold 0).")

    @model_validator(mode="after")
    def _one_bound(self) -> CrossEntropyFilter:
        if not self.forward:
            raise key_error("a checkpoint is needed", "forward")
        if (self.threshold > 0) == (0 < self.keep_fraction <= 1):
            raise key_error("give either a positive threshold or a keep_fraction in (0, 1]", "threshold")
        return self

    def keeps(self, src: list[str], tgt: list[str], translator_of: Callable[[Path], Any]) -> np.ndarray:
        """The pairs scoring lowest: at most threshold, or the keep_fraction best."""
        import numpy as np

        forward = -np.array([s.mean for s in translator_of(Path(self.forward)).score(src, tgt)])  # H(y|x), nats/token
        score = forward
        if self.reverse:
            reverse = -np.array([s.mean for s in translator_of(Path(self.reverse)).score(tgt, src)])
            score = np.abs(forward - reverse) + (forward + reverse) / 2
        if self.threshold > 0:
            return score <= self.threshold
        good = np.zeros(len(src), dtype=bool)
        good[np.argsort(score, kind="stable")[:round(self.keep_fraction * len(src))]] = True
        return good


@registered
class LexicalFilter(TextFilter):
    """lexical: a pair whose words translate each other no better than those of random pairings of the corpus's
    sentences do (a misaligned pair, most often), by word-translation tables learned from the corpus itself (IBM
    Model 1, both ways; mt/data/lexical.py), each pair scored by tables learned from the other half of the corpus.
    A corpus of which fewer than 10,000 pairs reach it is left alone: half of them teach too few words."""

    filter: Literal["lexical"] = key("lexical", "The filter.")
    quantile: Annotated[Float, Field(gt=0, lt=1)] = key(0.9, "A pair stays when it scores above this share of random "
                                                        "pairings: about the share of misaligned pairs it removes.")
    max_pairs: Annotated[Int, Field(ge=1000)] = key(100_000, "The most pairs each half's tables learn from (and at "
                                                    "most 20 million word links), and random pairings scored; drawn "
                                                    "by a hash of each pair's text.")
    min_misaligned: Annotated[Float, Field(ge=0, lt=1)] = key(
        0.02, "The corpus is left alone when its share of misaligned pairs, estimated as twice the share of its "
        "pairs scoring under the median random pairing, is under this.")

    def keeps(self, src: list[str], tgt: list[str], translator_of: Callable[[Path], Any]) -> np.ndarray:
        from mt.data.lexical import lexical_keep

        return lexical_keep(src, tgt, self.quantile, self.max_pairs, self.min_misaligned)


CorpusFilter = Annotated[Union[tuple(FILTERS.values())], Field(discriminator="filter")]
DEFAULT_FILTERS = [EncodingFilter(), MarkupFilter(), LengthFilter(), CopyFilter(), ScriptFilter(), NumbersFilter(),
                   UrlsFilter(), QuestionsFilter(), RatioFilter(), TruncatedFilter(), GluedFilter(), DuplicatesFilter(),
                   LexicalFilter()]


# ---------------------------------------------------------------- what the filters read

def row_columns(src: list[str], tgt: list[str], langs: Langs) -> dict[str, list]:
    """What the column filters read of each pair: its sides' characters, questions, sentence ends and sentences,
    how carelessly it seems copied (oddities), and the hashes of its source and pair."""
    spaced = [" ".join(s.split()) for s in src], [" ".join(t.split()) for t in tgt]
    src_end, tgt_end = [ends_sentence(s) for s in src], [ends_sentence(t) for t in tgt]
    return {"src_chars": [_chars(s) for s in src], "tgt_chars": [_chars(t) for t in tgt],
            "src_question": [_question(s) for s in src], "tgt_question": [_question(t) for t in tgt],
            "src_end": src_end, "tgt_end": tgt_end,
            "pair_oddities": [oddities(s, b) + oddities(t, a) for s, t, a, b in zip(src, tgt, src_end, tgt_end)],
            **_ranges("src_sentences", [sentences(s, langs[0]) for s in src]),
            **_ranges("tgt_sentences", [sentences(t, langs[1]) for t in tgt]),
            "src_key": [stable_hash(s) for s in spaced[0]],
            "pair_key": [stable_hash(f"{s}\t{t}") for s, t in zip(*spaced)]}


def _ranges(name: str, counts: list[tuple[int, int]]) -> dict[str, list[int]]:
    """Columns `name` (the fewest) and `name`_most of (fewest, most) counts."""
    return {name: [least for least, _ in counts], f"{name}_most": [most for _, most in counts]}


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


def _ratios(columns: dict[str, np.ndarray], alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's ratio (target characters / source characters) [P], and the ratio usual for its source's length
    [P]: the median ratio of the pairs still alive, with as many sentences on each side, whose sources are of about
    that length (a tenth of them each, by length). Short sources take more target characters for each of theirs;
    pairs with a sentence more on one side would pull the median their way."""
    import numpy as np

    src, tgt = columns["src_chars"].astype(float), columns["tgt_chars"].astype(float)
    ratio = np.divide(tgt, src, out=np.ones_like(tgt), where=src > 0)
    measured = alive & (src > 0) & (tgt > 0) & _as_many_sentences(columns)
    if not measured.any():
        return ratio, ratio
    edges = np.unique(np.quantile(src[measured], np.linspace(0, 1, 11)))
    bins = np.clip(np.searchsorted(edges, src, "right") - 1, 0, max(len(edges) - 2, 0))
    medians = np.array([np.median(ratio[measured & (bins == b)]) if (measured & (bins == b)).any()
                        else np.median(ratio[measured]) for b in range(max(len(edges) - 1, 1))])
    return ratio, medians[bins]


def _as_many_sentences(columns: dict[str, np.ndarray]) -> np.ndarray:
    """Pairs whose sides may hold as many sentences [P]: their ranges meet."""
    return ((columns["src_sentences"] <= columns["tgt_sentences_most"])
            & (columns["tgt_sentences"] <= columns["src_sentences_most"]))


def _first(keys: np.ndarray, alive: np.ndarray, keep: int, worse: np.ndarray | None = None) -> np.ndarray:
    """The first `keep` alive rows of each key kept (the least `worse` first, then in corpus order); the others
    not."""
    import numpy as np

    rows = np.flatnonzero(alive)
    worst_last = worse[rows] if worse is not None else np.zeros(len(rows), dtype=np.int64)
    order = np.lexsort((worst_last, keys[rows]))  # rows of a key together, the least worse first (a stable sort)
    sorted_keys = keys[rows][order]
    starts = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
    rank = np.arange(len(rows)) - np.maximum.accumulate(np.where(starts, np.arange(len(rows)), 0))
    kept = np.ones(len(keys), dtype=bool)
    kept[rows[order]] = rank < keep
    return kept


@cache
def _language_identifier() -> Any:
    """py3langid's identifier, made once per process: its model is large to send to the others."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        raise MtError("the langid filter needs py3langid: pip install 'mt[langid]'")
    return LanguageIdentifier.from_model_file(MODEL_FILE)
