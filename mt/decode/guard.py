"""The failure guard: the ways a small model fails without a word, found in its output, and what is done then.

A translation fails when it
- copies its source (the same text of two words or more, or most of its words, three or more, found in the
  source): `copy`;
- loops (an n-gram of up to 4 pieces written 3 times in a row, or half of its piece bigrams written before): `loop`;
- reached its length limit without ending: `cut`;
- is empty, or far shorter or longer than translations of sentences that long are (its length ratio outside the
  model's normal range): `short`, `long`;
- is mostly written in a script its language is not written in (a copied source, another language): `script`.

The checks read the output's text and pieces alone: a translation that passes costs nothing more. One that fails
is searched again another way (`retried`); the new output takes its place if it passes, or if the model is more
confident of it. One that still fails is kept, marked or emptied, as decode.on_failure says (`on_failure`).
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from dataclasses import dataclass

from mt.config import DecodeConfig
from mt.decode.confidence import WORD_START, copied, repetition

MARK = "[?] "  # before a translation that failed, with decode.on_failure "mark"
LONGEST_LOOP = 4  # pieces in the longest n-gram a loop repeats
FEWEST_PIECES = 4  # sources shorter than this many pieces have too few for a length check
SCRIPT_SHARE = 0.5  # of an output's letters, outside its language's scripts: the wrong script
COPY_SHARE = 0.75  # of an output's words, found in its source: a copy


@dataclass(frozen=True)
class Normal:
    """What this model's translations look like: the range of log(output pieces + 1) / (source pieces + 1), and
    the scripts its target language is written in (unicodedata's names: LATIN, CJK, CYRILLIC, …; none: not
    checked). `mt confidence` fits them on the dev set's references; the defaults allow a factor of 3 either way."""

    length_ratio: tuple[float, float] = (-math.log(3), math.log(3))
    scripts: tuple[str, ...] = ()

    @classmethod
    def of_references(cls, src_lengths: list[int], ref_lengths: list[int], references: list[str]) -> Normal:
        """The range the dev set's references span (from their 0.5th to their 99.5th percentile, each widened by a
        quarter in log space), and the scripts that write at least 1% of their letters."""
        ratios = sorted(math.log((r + 1) / (s + 1)) for s, r in zip(src_lengths, ref_lengths))
        low, high = ratios[int(0.005 * (len(ratios) - 1))], ratios[math.ceil(0.995 * (len(ratios) - 1))]
        letters = Counter(script for text in references for script in scripts_of(text))
        total = sum(letters.values())
        return cls((low - 0.25, high + 0.25), tuple(sorted(s for s, n in letters.items() if n >= 0.01 * total)))


def scripts_of(text: str) -> list[str]:
    """The script of each letter of `text`: the first word of its Unicode name."""
    return [unicodedata.name(c, "UNKNOWN").split()[0] for c in text if c.isalpha()]


def failure(src_pieces: list[str], tgt_pieces: list[str], text: str, cut: bool, normal: Normal) -> str | None:
    """How a translation (its pieces without EOS, and its text) of a source (its pieces, without EOS) fails, or
    None when it passes. `cut`: it reached its length limit without ending."""
    source = "".join(src_pieces).replace(WORD_START, " ").strip()
    if not tgt_pieces:
        return "short" if source else None  # nothing of a source with text in it
    words = [word for word in text.split() if any(c.isalnum() for c in word)]
    same = text.strip().casefold() == source.casefold()  # a one-word sentence may be the same in both languages
    if (same and len(words) >= 2) or (len(words) >= 3 and copied(source, words) >= COPY_SHARE):
        return "copy"
    if loops(tgt_pieces):
        return "loop"
    if cut:
        return "cut"
    if len(src_pieces) >= FEWEST_PIECES:
        ratio = math.log((len(tgt_pieces) + 1) / (len(src_pieces) + 1))
        if ratio < normal.length_ratio[0]:
            return "short"
        if ratio > normal.length_ratio[1]:
            return "long"
    letters = scripts_of(text)
    if normal.scripts and len(letters) >= 3 and \
            sum(script not in normal.scripts for script in letters) >= SCRIPT_SHARE * len(letters):
        return "script"
    return None


def loops(pieces: list[str]) -> bool:
    """Whether an n-gram of up to LONGEST_LOOP pieces comes 3 times in a row, or half of the bigrams are repeats."""
    for n in range(1, LONGEST_LOOP + 1):
        for start in range(len(pieces) - 3 * n + 1):
            if pieces[start:start + n] == pieces[start + n:start + 2 * n] == pieces[start + 2 * n:start + 3 * n]:
                return True
    return len(pieces) >= 6 and repetition(pieces) >= 0.5


def retried(decode: DecodeConfig) -> DecodeConfig:
    """The search a failed translation gets again: greedy (a beam as wide as the n-best list where it holds more
    than one), whose outputs run longer than beam search's, with no length penalty, no trigram twice (or the
    decode's own no-repeat size), and a limit longer by one source length. It costs little: a greedy search of the
    failed sentences alone."""
    return decode.replace(beam_size=decode.nbest, alpha=0.0, no_repeat_ngram_size=decode.no_repeat_ngram_size or 3,
                          max_len_a=decode.max_len_a + 1, sample=False)


def on_failure(text: str, how: str) -> str:
    """A failed translation's text as decode.on_failure says: kept, marked (MARK before it) or emptied."""
    return {"keep": text, "mark": MARK + text, "empty": ""}[how]
