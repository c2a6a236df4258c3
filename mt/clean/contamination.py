"""The contamination guard: training pairs whose source or target is one of the dev or test sentences, compared
normalised (mt/data/normalise.py), so that a test sentence in different case, width, punctuation or Chinese
script is still found.

A side is compared alone when it is long enough to be a particular sentence: MIN_SIDE characters after
normalising, a Chinese, Japanese or Korean character counting 2. Shorter ones (是的 / Yes.) are in every corpus
many times with other translations; they count only as a whole pair, source and target together.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

from mt.data.normalise import normalised, stable_hash
from mt.data.config import DataConfig
from mt.data.corpora import read_corpus

MIN_SIDE = 10
WIDE = re.compile("[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")  # CJK: weigh 2


@dataclass
class Guard:
    """The hashes of the normalised dev and test sentences (each side's, and of whole pairs); `remove` or only
    count the training pairs that hold one."""

    src_keys: np.ndarray  # int64
    tgt_keys: np.ndarray
    pair_keys: np.ndarray
    remove: bool

    @property
    def fingerprint(self) -> str:
        keys = b"".join(k.tobytes() for k in (self.src_keys, self.tgt_keys, self.pair_keys))
        return hashlib.sha256(keys + bytes([self.remove])).hexdigest()

    def holds(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """Which pairs (guard_keys' columns) have a side, or are a pair, of the dev or test sets."""
        return (np.isin(columns["src_norm"], self.src_keys) | np.isin(columns["tgt_norm"], self.tgt_keys)
                | np.isin(columns["pair_norm"], self.pair_keys))


def chinese_sides(data: DataConfig) -> tuple[bool, bool]:
    return tuple(lang.split("-")[0] == "zh" for lang in (data.src_lang, data.tgt_lang))


def guard_keys(src: list[str], tgt: list[str], chinese: tuple[bool, bool]) -> dict[str, list[int]]:
    """Each pair's normalised hashes: of its source and target when long enough (else 0, which matches nothing),
    and of the two together (0 when a side is empty after normalising)."""
    src, tgt = [normalised(s, chinese[0]) for s in src], [normalised(t, chinese[1]) for t in tgt]
    return {"src_norm": [_side_key(s) for s in src], "tgt_norm": [_side_key(t) for t in tgt],
            "pair_norm": [stable_hash(f"{s}\t{t}") if s and t else 0 for s, t in zip(src, tgt)]}


def _side_key(text: str) -> int:
    return stable_hash(text) if len(text) + len(WIDE.findall(text)) >= MIN_SIDE else 0


def make_guard(data: DataConfig) -> Guard:
    """The guard of the config's dev and test sets (those that are set)."""
    chinese = chinese_sides(data)
    found: dict[str, list[int]] = {"src_norm": [], "tgt_norm": [], "pair_norm": []}
    for split, corpus in (("dev", data.dev), ("test", data.test)):
        if corpus.is_set:
            pairs = read_corpus(corpus, data, split)
            for name, keys in guard_keys(pairs["src"], pairs["tgt"], chinese).items():
                found[name] += keys

    def unique(keys: list[int]) -> np.ndarray:
        return np.unique(np.array([k for k in keys if k], dtype=np.int64))

    return Guard(unique(found["src_norm"]), unique(found["tgt_norm"]), unique(found["pair_norm"]),
                 data.contamination == "remove")
