"""What the filters and the contamination guard compare: a text normalised (case, width, punctuation, spaces and
Chinese script ignored), a stable 64-bit hash of a text, and the share of a text's letters in a writing system.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import cache

import opencc

from mt.core.errors import MtError

SKIPPED = ("P", "S", "Z", "C")  # Unicode categories that normalising drops: punctuation, symbols, spaces, controls

# The letters of each writing system (the script filter's); Han includes the CJK extensions and compatibility forms
WRITING_SYSTEMS = {
    "Latin": "A-Za-z\u00c0-\u024f\u1e00-\u1eff",
    "Han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f",
    "Cyrillic": "\u0400-\u052f",
    "Greek": "\u0370-\u03ff\u1f00-\u1fff",
    "Arabic": "\u0600-\u06ff\u0750-\u077f",
    "Hebrew": "\u0590-\u05ff",
    "Hangul": "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f",
    "Japanese": "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff",  # kana and the kanji
    "Devanagari": "\u0900-\u097f",
    "Thai": "\u0e00-\u0e7f",
}
LANGUAGE_SYSTEMS = {  # a language code's writing system; other Latin-script languages are listed with English
    "zh": "Han", "ja": "Japanese", "ko": "Hangul", "ru": "Cyrillic", "uk": "Cyrillic", "bg": "Cyrillic",
    "sr": "Cyrillic", "el": "Greek", "ar": "Arabic", "fa": "Arabic", "ur": "Arabic", "he": "Hebrew",
    "hi": "Devanagari", "mr": "Devanagari", "ne": "Devanagari", "th": "Thai",
    **{code: "Latin" for code in ("en de fr es it pt nl sv da no nb fi et lv lt pl cs sk sl hr bs ro hu tr id ms vi "
                                  "tl sq is ga cy eu ca gl af sw").split()},
}


def normalised(text: str, chinese: bool) -> str:
    """The text as the guard and the copy filter compare it: NFKC (full-width ＡＢＣ → ABC), case folded,
    Traditional Chinese as Simplified, without punctuation, symbols or spaces."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if chinese:
        text = _to_simplified().convert(text)
    return text.translate(_skipped())


@cache
def _skipped() -> dict[int, None]:
    """str.translate's table that deletes the SKIPPED characters of the Basic Multilingual Plane (where nearly all
    punctuation is): one pass in C instead of a category lookup per character."""
    return {cp: None for cp in range(0x10000) if unicodedata.category(chr(cp)).startswith(SKIPPED)}


@cache
def _to_simplified() -> opencc.OpenCC:  # made in each process that needs one: OpenCC's converters don't pickle
    return opencc.OpenCC("t2s")


def stable_hash(text: str) -> int:
    """A 64-bit hash of a text, the same in every process and run (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little",
                          signed=True)


def writing_system(language: str, where: str) -> str:
    """The writing system of a language code (zh, zh-Hant, en-GB → its first part)."""
    system = LANGUAGE_SYSTEMS.get(language.split("-")[0].lower())
    if system is None:
        raise MtError(f"config key {where}: mt does not know the writing system of {language!r}; set it "
                      f"({', '.join(WRITING_SYSTEMS)})")
    return system


@cache
def _letters_of(system: str) -> re.Pattern:
    return re.compile(f"[{WRITING_SYSTEMS[system]}]")


@cache
def _others_of(system: str) -> re.Pattern:
    return re.compile(f"[^\\W\\d_{WRITING_SYSTEMS[system]}]+")


def share_in(text: str, system: str) -> float:
    """The share of the text's letters in the writing system, a word of other letters counting as one letter (so
    the name in 我叫Tom。 weighs as one character); 1 for a text without letters."""
    own, others = len(_letters_of(system).findall(text)), len(_others_of(system).findall(text))
    return own / (own + others) if own + others else 1.0
