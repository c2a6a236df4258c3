"""The lexical filter: do a pair's words translate each other? Judged by word-translation tables learned from the
corpus itself (IBM Model 1, Brown et al. 1993), one each way, so that no model has to be trained first.

A misaligned pair, a sentence beside another sentence's translation, scores as a random pairing of the corpus's
sentences does. Each pair is scored by tables learned from the other half of the corpus (a table learned from a pair
explains that pair, however wrong), and so are random pairings of its own half: the filter keeps a pair that scores
above a given share of them. A pair's half, and its place in the samples learned from and paired at random, follow
from a hash of its own text, not from its row: a pair is judged alike when other pairs come and go (when other
filters run before this one, or a corpus grows). A corpus that seems to hold few misaligned pairs is left alone: in
a clean one, the pairs scoring as random pairings do are free translations.
"""

from __future__ import annotations

import hashlib
import logging
import re

import numpy as np

from mt.data.word_translation import Sides, Table, chunks

log = logging.getLogger(__name__)

# A unit is a word, or one letter of a script written without spaces between words: Han (radicals, extension A,
# unified, compatibility), kana and Thai, their punctuation left out.
UNSPACED = "\u2e80-\u2fdf\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\u0e01-\u0e3a\u0e40-\u0e4e"
UNIT = re.compile(f"[{UNSPACED}]|[^\\W\\d_{UNSPACED}]+")
MIN_PAIRS = 10_000    # fewer, and a half's tables know too few words: translations score as random pairings


def units(texts: list[str]) -> tuple[Sides, dict[str, int]]:
    """Lowercased units of each text, as ids (from 1: 0 is NULL), and the vocabulary."""
    vocabulary: dict[str, int] = {}
    ids = [[vocabulary.setdefault(u, len(vocabulary) + 1) for u in UNIT.findall(text.lower())] for text in texts]
    lengths = np.array([len(i) for i in ids], dtype=np.int64)
    flat = np.fromiter((u for i in ids for u in i), dtype=np.int64, count=int(lengths.sum()))
    return Sides(flat, lengths), vocabulary


def lexical_keep(src_texts: list[str], tgt_texts: list[str], quantile: float, max_pairs: int,
                 min_misaligned: float) -> np.ndarray:
    """Which pairs to keep [P]: those scoring above `quantile` of random pairings, each half of the pairs scored by
    tables learned from (a sample of at most max_pairs of) the other half, both ways; a pair without known units on
    a side is kept. Every pair is kept when the corpus seems to hold fewer than min_misaligned misaligned pairs."""
    keep = np.ones(len(src_texts), dtype=bool)
    if len(src_texts) < MIN_PAIRS:
        return keep
    halves = list(_scored_halves(src_texts, tgt_texts, max_pairs))
    share = misaligned_share(halves)
    log.info(f"lexical: about {share:.1%} of the {len(src_texts):,} pairs seem misaligned"
             + (f" (under min_misaligned, {min_misaligned:.1%}): every pair kept" if share < min_misaligned else ""))
    if share < min_misaligned:
        return keep
    for rows, scores, baseline in halves:
        bound = np.nanquantile(baseline, quantile) if np.isfinite(baseline).any() else -np.inf
        keep[rows] = ~(scores < bound)  # NaN: nothing known, kept
    return keep


def misaligned_share(halves: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float:
    """The corpus's share of misaligned pairs, estimated: a misaligned pair scores as a random pairing does, under
    the pairings' median half the time, and a translation seldom scores that low; so twice the share of pairs under
    that median (an overestimate by twice the translations that score so low)."""
    under = known = 0
    for _, scores, baseline in halves:
        if np.isfinite(baseline).any():
            finite = scores[np.isfinite(scores)]
            under, known = under + int((finite < np.nanmedian(baseline)).sum()), known + len(finite)
    return 2 * under / known if known else 0.0


def _scored_halves(src_texts: list[str], tgt_texts: list[str], max_pairs: int):
    """For each half of the corpus: its rows, their scores by tables learned from the other half, and the scores
    of random pairings of its sentences by the same tables."""
    (src, src_vocabulary), (tgt, tgt_vocabulary) = units(src_texts), units(tgt_texts)
    size = max(len(src_vocabulary), len(tgt_vocabulary)) + 1
    links_of = (src.lengths + 1) * tgt.lengths + (tgt.lengths + 1) * src.lengths  # both ways [P]
    keys = pair_keys(src_texts, tgt_texts)
    order = np.argsort(keys, kind="stable")                # a random order of the rows that each pair keeps
    half = (keys & 1).astype(bool)
    halves_in_order = [order[half[order] == h] for h in (False, True)]
    for h in (False, True):
        scored, learned = np.flatnonzero(half == h), halves_in_order[not h]
        learned = np.sort(next(chunks(learned[:max_pairs], links_of)))
        src_learned, tgt_learned = src.take(learned), tgt.take(learned)
        tables = Table.learn(src_learned, tgt_learned, size), Table.learn(tgt_learned, src_learned, size)
        pairings = halves_in_order[h][:max_pairs]          # each source beside the next one's target
        baseline = np.concatenate([score(tables, src.take(rows), tgt.take(np.roll(rows, 1)))
                                   for rows in chunks(pairings, links_of)])
        scores = np.concatenate([score(tables, src.take(rows), tgt.take(rows)) for rows in chunks(scored, links_of)])
        yield scored, scores, baseline


def pair_keys(src_texts: list[str], tgt_texts: list[str]) -> np.ndarray:
    """A 64-bit hash of each pair's text [P]: the same in every process and corpus (Python's own hash is not)."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(f"{s}\t{t}".encode(), digest_size=8).digest(), "little")
                        for s, t in zip(src_texts, tgt_texts)), dtype=np.uint64, count=len(src_texts))


def score(tables: tuple[Table, Table], src: Sides, tgt: Sides) -> np.ndarray:
    """Each pair's score [P]: its mean log-probability per unit, target given source and source given target,
    averaged."""
    forward, backward = tables
    return (forward.scores(src, tgt) + backward.scores(tgt, src)) / 2
