"""A training corpus cleaned: the contamination guard, then data.filters in order. Each pair gets the reason it
was removed (or none), and the repair that changed it (or none); both are cached in the run's cache directory, keyed
by the corpus, the filters and the dev and test sets, so a run and its resumption clean once.

The repairs and row filters (mt/data/filters.py) and the columns the column filters and the guard read are computed
by `datasets.map` in parallel batches, each step over the texts the repairs before it left; the column filters then
run over those columns in numpy, and the text filters over the texts of the pairs still kept. The kept pairs that a
repair changed are repaired again (repairs are pure functions of a text) instead of holding every text twice.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets.table import InMemoryTable

from mt.clean.contamination import Guard, chinese_sides, guard_keys, make_guard
from mt.core.atomic import atomic_write_bytes
from mt.core.errors import MtError, first_line
from mt.data.config import CorpusConfig, DataConfig
from mt.data.corpora import take_rows, texts_at
from mt.data.filters import Filter, RepairFilter, RowFilter, TextFilter, row_columns

log = logging.getLogger(__name__)

KEPT = -1  # a pair's reason when no step removed it, and its repair when none changed it
CONTAMINATION = "contamination"
CACHE_FORMAT = 5  # of the cache files (reasons, repairs and the contamination count) and of the judgements


@dataclass
class Cleaned:
    """A corpus after cleaning: the kept pairs, and for each pair of the corpus the step that removed it."""

    name: str
    corpus: datasets.Dataset   # every pair, as read
    pairs: datasets.Dataset    # the kept pairs, in corpus order, repaired
    reasons: np.ndarray        # [pairs of the corpus] the index in `steps` of what removed each pair, or KEPT
    repairs: np.ndarray        # [pairs of the corpus] the index in `steps` of the first repair that changed it, or KEPT
    steps: list[str]           # "contamination", then the filters' names
    contaminated: int          # pairs holding a dev or test sentence (removed, or kept as data.contamination says)

    def removed(self) -> dict[str, int]:
        counts = np.bincount(self.reasons[self.reasons != KEPT], minlength=len(self.steps))
        return {step: int(n) for step, n in zip(self.steps, counts)}

    def repaired(self) -> dict[str, int]:
        """The kept pairs each repair changed, by step."""
        counts = np.bincount(self.repairs[(self.repairs != KEPT) & (self.reasons == KEPT)], minlength=len(self.steps))
        return {step: int(n) for step, n in zip(self.steps, counts) if n}

    def summary(self) -> str:
        """One line: the corpus's pairs, those kept, what removed the others and what repaired some."""
        removed = ", ".join(f"{step} {n:,}" for step, n in self.removed().items() if n)
        repaired = ", ".join(f"{step} {n:,}" for step, n in self.repaired().items())
        return (f"{self.name}: cleaning kept {len(self.pairs):,} of {len(self.corpus):,} pairs"
                + (f" (removed: {removed})" if removed else "") + (f" (repaired: {repaired})" if repaired else ""))

    def facts(self) -> dict:
        """What a checkpoint keeps of it."""
        return {"pairs": len(self.corpus), "kept": len(self.pairs), "removed": self.removed(),
                "repaired": self.repaired(), "contaminated": self.contaminated}


def bind(filters: list[Filter], data: DataConfig, where: str) -> list[Filter]:
    """The filters with what they take from the language pair filled in (the script filter's writing systems)."""
    return [f.bound((data.src_lang, data.tgt_lang), where) for f in filters]


def _read_cached(path: Path, pairs: int, steps: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """A corpus's cached reasons and repairs (one each per pair: KEPT or a step's index) and contamination count;
    None when there are none, or when the file is damaged (it is then removed, to be computed again)."""
    if not path.exists():
        return None
    try:
        with np.load(path) as saved:
            reasons, repairs, contaminated = saved["reasons"], saved["repairs"], int(saved["contaminated"])
        if all(a.shape == (pairs,) and a.dtype.kind == "i" and ((a >= KEPT) & (a < steps)).all()
               for a in (reasons, repairs)):
            return reasons, repairs, contaminated
        problem = "its reasons do not fit the corpus"
    except Exception as e:  # damaged bytes reach numpy's zip and array readers anywhere
        problem = first_line(e)
    log.warning(f"{path}: the cleaning cache is damaged ({problem}); cleaning again")
    path.unlink()
    return None


def step_names(filter_names: list[str]) -> list[str]:
    """The cleaning's steps in the order they run, as its reasons name them: the guard, then the filters."""
    return [CONTAMINATION, *filter_names]


def clean_corpus(name: str, corpus: datasets.Dataset, filters: list[Filter], data: DataConfig, guard: Guard,
                 cache_dir: Path | None) -> Cleaned:
    """The corpus through the guard and the filters (bound); the reasons cached in cache_dir when given."""
    steps = step_names([f.filter for f in filters])
    key = hashlib.sha256(f"{corpus._fingerprint}-{filters}-{data.src_lang}-{data.tgt_lang}-{guard.fingerprint}-"
                         f"{CACHE_FORMAT}".encode()).hexdigest()[:16]
    cached = cache_dir / f"clean-{name}-{key}.npz" if cache_dir else None
    if cached is not None and (saved := _read_cached(cached, len(corpus), len(steps))):
        reasons, repairs, contaminated = saved
    else:
        reasons, repairs, contaminated = _reasons(name, corpus, filters, data, guard)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            buffer = io.BytesIO()
            np.savez(buffer, reasons=reasons, repairs=repairs, contaminated=contaminated)
            atomic_write_bytes(cached, buffer.getvalue())
    kept = np.flatnonzero(reasons == KEPT)
    if len(kept) == 0:
        most = steps[int(np.bincount(reasons).argmax())] if len(reasons) else "none"
        advice = ("is it a dev or test set? (data.contamination: keep keeps such pairs)" if most == CONTAMINATION
                  else "loosen data.filters or check the corpus's languages (data.src_lang, data.tgt_lang)")
        raise MtError(f"{name}: cleaning removed every one of its {len(corpus):,} pairs (most by {most}): {advice}")
    pairs = corpus if len(kept) == len(corpus) else take_rows(corpus, kept, key)
    pairs = _repaired(pairs, repairs[kept], filters, key)
    return Cleaned(name, corpus, pairs, reasons, repairs, steps, contaminated)


def _repaired(pairs: datasets.Dataset, repairs: np.ndarray, filters: list[Filter], key: str) -> datasets.Dataset:
    """The kept pairs with the texts that a repair changed repaired again; repairs [pairs]: KEPT where none did."""
    rows = np.flatnonzero(repairs != KEPT)
    if len(rows) == 0:
        return pairs
    table = pairs.with_format("arrow")[:]
    mask = np.zeros(len(pairs), dtype=bool)
    mask[rows] = True
    for side, texts in zip(("src", "tgt"), _fixed(texts_at(pairs, rows), filters)):
        column = table.column(side).combine_chunks()
        table = table.set_column(table.schema.get_field_index(side), side, pc.replace_with_mask(
            column, pa.array(mask), pa.array(texts, type=column.type)))
    fingerprint = hashlib.sha256(f"{key}-repaired".encode()).hexdigest()[:16]
    return datasets.Dataset(InMemoryTable(table), fingerprint=fingerprint)


def _fixed(sides: tuple[list[str], list[str]], filters: list[Filter]) -> tuple[list[str], list[str]]:
    """Texts of kept pairs through every repair, in order."""
    fixes = [f for f in filters if isinstance(f, RepairFilter)]
    src, tgt = sides
    for f in fixes:
        src, tgt = [f.repaired(s) for s in src], [f.repaired(t) for t in tgt]
    return src, tgt


def _texts(corpus: datasets.Dataset, rows: np.ndarray, repairs: np.ndarray,
           filters: list[Filter]) -> tuple[list[str], list[str]]:
    """The texts of the pairs at `rows` as the repairs left them (only those a repair changed are repaired again)."""
    src, tgt = texts_at(corpus, rows)
    changed = np.flatnonzero(repairs[rows] != KEPT)
    for i, fixed_src, fixed_tgt in zip(changed, *_fixed(([src[i] for i in changed], [tgt[i] for i in changed]),
                                                         filters)):
        src[i], tgt[i] = fixed_src, fixed_tgt
    return src, tgt


def _reasons(name: str, corpus: datasets.Dataset, filters: list[Filter], data: DataConfig,
             guard: Guard) -> tuple[np.ndarray, np.ndarray, int]:
    """Each pair's reason for removal and first repair (KEPT: none), and how many hold a dev or test sentence."""
    columns = _columns(corpus, filters, data)
    reasons = np.full(len(corpus), KEPT, dtype=np.int16)
    repairs = np.full(len(corpus), KEPT, dtype=np.int16)
    contaminated = guard.holds(columns)
    if guard.remove:
        reasons[contaminated] = 0
    elif contaminated.any():
        log.warning(f"{name}: {int(contaminated.sum()):,} training pairs hold a dev or test sentence and are kept "
                    f"(data.contamination: keep): dev and test scores will overstate the model")
    for step, f in enumerate(filters, start=1):
        alive = reasons == KEPT
        if f"keep{step}" in columns:  # a repair's or row filter's verdicts, computed with the columns
            keep = columns[f"keep{step}"]
            if f"fixed{step}" in columns:
                repairs[alive & keep & columns[f"fixed{step}"] & (repairs == KEPT)] = step
        elif isinstance(f, TextFilter):
            rows = np.flatnonzero(alive)
            keep = np.ones(len(corpus), dtype=bool)
            keep[rows] = f.keeps(*_texts(corpus, rows, repairs, filters), _translator_of)
        else:
            keep = f.keeps(columns, alive)
        reasons[alive & ~keep] = step
    return reasons, repairs, int(contaminated.sum())


def _columns(corpus: datasets.Dataset, filters: list[Filter], data: DataConfig) -> dict[str, np.ndarray]:
    """The repairs' and row filters' verdicts (keep1, keep2, … by step; fixed1, … where a repair changed a text),
    and the column filters' columns and the guard's hashes of the repaired texts."""
    chinese = chinese_sides(data)
    langs = data.src_lang, data.tgt_lang

    def compute(batch: dict) -> dict:
        src, tgt, out = batch["src"], batch["tgt"], {}
        for step, f in enumerate(filters, start=1):
            if isinstance(f, RepairFilter):
                fixed_src, fixed_tgt = [f.repaired(s) for s in src], [f.repaired(t) for t in tgt]
                out[f"keep{step}"] = [s is not None and t is not None for s, t in zip(fixed_src, fixed_tgt)]
                out[f"fixed{step}"] = [a != s or b != t for a, b, s, t in zip(fixed_src, fixed_tgt, src, tgt)]
                src = [a if a is not None else s for a, s in zip(fixed_src, src)]
                tgt = [b if b is not None else t for b, t in zip(fixed_tgt, tgt)]
            elif isinstance(f, RowFilter):
                out[f"keep{step}"] = [f.keeps(s, t, langs) for s, t in zip(src, tgt)]
        return out | row_columns(src, tgt, langs) | guard_keys(src, tgt, chinese)

    processes = min(len(os.sched_getaffinity(0)), 8) if len(corpus) >= 100_000 else None
    mapped = corpus.map(compute, batched=True, batch_size=2000, remove_columns=corpus.column_names,
                        keep_in_memory=True, num_proc=processes, new_fingerprint=f"{corpus._fingerprint}-clean")
    table = mapped.with_format("arrow")[:]
    return {name: table.column(name).to_numpy() for name in table.column_names}


def _translator_of(checkpoint: Path):
    """The cross_entropy filter's translators: mt/decode/ stands above mt/data/, where the filter is declared."""
    from mt.decode.translator import load_translator

    return load_translator(checkpoint)


class Cleaning:
    """The cleaning of a run's training corpora, called by TrainingMixture for each: the guard is made once, and
    each corpus's result is kept for the report and the checkpoint."""

    def __init__(self, data: DataConfig, cache_dir: Path | None):
        self.data, self.cache_dir = data, cache_dir
        self.guard = make_guard(data)
        self.done: list[Cleaned] = []

    def __call__(self, name: str, corpus: CorpusConfig, pairs: datasets.Dataset) -> datasets.Dataset:
        own = corpus.filters is not None
        filters = bind(corpus.filters if own else self.data.filters, self.data,
                       f"data.{name}.filters" if own else "data.filters")
        cleaned = clean_corpus(name, pairs, filters, self.data, self.guard, self.cache_dir)
        log.info(cleaned.summary())
        self.done.append(cleaned)
        return cleaned.pairs

    def facts(self) -> dict:
        """What a checkpoint keeps: each corpus's counts, and the guard's setting."""
        return {"contamination": self.data.contamination, "corpora": {c.name: c.facts() for c in self.done}}
