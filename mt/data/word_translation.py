"""Word-translation tables learned from a corpus itself: t(e | f), the probability that source unit f translates as
target unit e, by EM for IBM Model 1 (Brown et al. 1993), so that no model has to be trained first. Units are ids:
words for the lexical filter (mt/data/lexical.py), pieces for a decoding shortlist (mt/decode/shortlist.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ITERATIONS = 5        # of EM: the tables change little after
FLOOR = 1e-4          # the least probability of a target unit, so that one unexplained word does not decide
NULL = 0              # the empty word: a target unit may translate nothing of the source
MAX_LINKS = 20_000_000  # links (source unit, target unit) learned from or scored at once: about 1 GB of arrays


@dataclass
class Sides:
    """The unit ids of many sentences, one after another [U], and each sentence's number of units [P]."""

    ids: np.ndarray
    lengths: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.lengths) - self.lengths

    def take(self, rows: np.ndarray) -> Sides:
        lengths = self.lengths[rows]
        index = np.repeat(self.starts[rows] - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())
        return Sides(self.ids[index], lengths)

    def known(self, vocabulary: np.ndarray) -> Sides:
        """Only the units that `vocabulary` (a mask over ids) holds."""
        keep = vocabulary[self.ids]
        pairs = np.repeat(np.arange(len(self.lengths)), self.lengths)
        return Sides(self.ids[keep], np.bincount(pairs[keep], minlength=len(self.lengths)))


def links(src: Sides, tgt: Sides, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (source unit or NULL, target unit) of each pair: keys f · size + e [L], and the target unit's index in
    tgt.ids [L] that each link explains."""
    m, n = src.lengths + 1, tgt.lengths                               # NULL is the last source position
    pair = np.repeat(np.arange(len(n)), m * n)                        # [L]
    offset = np.arange(len(pair)) - np.repeat(np.cumsum(m * n) - m * n, m * n)
    i, j = offset // n[pair], offset % n[pair]                        # source and target positions
    f = np.append(src.ids, NULL)[np.minimum(src.starts[pair] + i, len(src.ids))]     # past its units: NULL
    f[i == src.lengths[pair]] = NULL
    e_index = tgt.starts[pair] + j
    return f * size + tgt.ids[e_index], e_index


@dataclass
class Table:
    """t(e | f), the probability that source unit f translates as target unit e, for the (f, e) seen together."""

    keys: np.ndarray        # f · size + e, sorted [K]
    probs: np.ndarray       # [K]
    known_src: np.ndarray   # masks over ids: the units seen in the pairs it learned from
    known_tgt: np.ndarray

    @classmethod
    def learn(cls, src: Sides, tgt: Sides, size: int) -> Table:
        """EM for IBM Model 1 over the pairs (src, tgt)."""
        keys, e_index = links(src, tgt, size)
        table, link = np.unique(keys, return_inverse=True)
        f = table // size
        probs = np.ones(len(table))
        for _ in range(ITERATIONS):
            p = probs[link]                                                       # [L]
            share = p / np.bincount(e_index, weights=p, minlength=len(tgt.ids))[e_index]   # each f's share of e
            counts = np.bincount(link, weights=share, minlength=len(table))
            probs = counts / np.bincount(f, weights=counts)[f]
        return cls(table, probs, *(np.bincount(side.ids, minlength=size) > 0 for side in (src, tgt)))

    @property
    def size(self) -> int:
        return len(self.known_src)

    def scores(self, src: Sides, tgt: Sides) -> np.ndarray:
        """Each pair's mean log p(e | its source) over the target units [P]; NaN for a pair without target units.
        Units the table never saw are left out: they say nothing of the pair."""
        src, tgt = src.known(self.known_src), tgt.known(self.known_tgt)
        keys, e_index = links(src, tgt, self.size)
        where = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        t = np.where(self.keys[where] == keys, self.probs[where], 0.0)           # [L]
        m = np.repeat(src.lengths + 1, tgt.lengths)                               # per target unit
        p = np.bincount(e_index, weights=t, minlength=len(tgt.ids)) / m           # p(e | source) [U]
        pair = np.repeat(np.arange(len(tgt.lengths)), tgt.lengths)
        with np.errstate(invalid="ignore"):
            return np.bincount(pair, weights=np.log(np.maximum(p, FLOOR)), minlength=len(tgt.lengths)) / tgt.lengths


def chunks(rows: np.ndarray, links_of: np.ndarray):
    """`rows` in consecutive runs of at most MAX_LINKS links (a longer pair alone)."""
    total = np.cumsum(links_of[rows])
    start = 0
    while start < len(rows):
        end = max(int(np.searchsorted(total, total[start] - links_of[rows[start]] + MAX_LINKS, "right")), start + 1)
        yield rows[start:end]
        start = end
