"""`mt clean`: the training corpora cleaned without training, and what was removed written where a person can check
it: report.md (per corpus and step: pairs removed and repaired, with examples) and removed.tsv (every removed pair,
its reason).
"""

from __future__ import annotations

import csv
import io
import logging
import time
from pathlib import Path

import numpy as np

from mt.clean.cleaning import CONTAMINATION, KEPT, Cleaned, Cleaning
from mt.config import Config
from mt.core.atomic import TEXT, atomic_write_bytes
from mt.core.run_dir import RunDir
from mt.core.run_lock import lock_run_dir
from mt.data.corpora import TrainingMixture, texts_at

log = logging.getLogger(__name__)

EXAMPLES = 5  # removed and repaired pairs shown per step in report.md


def clean(config: Config, sample: int, output: Path | None) -> Path:
    """Clean the config's training corpora (each sampled to `sample` pairs when given), write the report into
    `output` (default RUN/clean) and return it. The results are cached in RUN/cache for `mt train`."""
    run_dir = Path(config.train.run_dir)
    output = output or RunDir(run_dir).clean
    if sample:
        for corpus in config.data.training_corpora().values():
            corpus.max_pairs = min(corpus.max_pairs or sample, sample)
    start = time.perf_counter()
    with lock_run_dir(run_dir, "mt clean"):
        cleaning = Cleaning(config.data, RunDir(run_dir).cache)
        TrainingMixture(config.data, config.train.seed, cleaning)
    seconds = time.perf_counter() - start
    output.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(output / "report.md", report(cleaning, seconds, config.train.seed).encode("utf-8"), TEXT)
    atomic_write_bytes(output / "removed.tsv", removed_tsv(cleaning.done).encode("utf-8"), TEXT)
    log.info(f"cleaned in {seconds:.1f}s → {output / 'report.md'}, {output / 'removed.tsv'}")
    return output


def report(cleaning: Cleaning, seconds: float, seed: int) -> str:
    guard = "removed" if cleaning.data.contamination == "remove" else "kept (data.contamination: keep)"
    lines = ["# What cleaning removed", "",
             f"Cleaned in {seconds:.1f}s. Pairs holding a dev or test sentence: {guard}. Every removed pair is in "
             "removed.tsv with its reason; each pair counts under the first step that removed it, and a kept pair "
             "under the first repair that changed it.", ""]
    for cleaned in cleaning.done:
        lines += _corpus_report(cleaned, np.random.default_rng(seed))
    return "\n".join(lines)


def _corpus_report(cleaned: Cleaned, rng: np.random.Generator) -> list[str]:
    total = len(cleaned.corpus)
    repaired = cleaned.repaired()
    kept = len(cleaned.pairs)
    lines = [f"## {cleaned.name}", "", f"{total:,} pairs, {kept:,} kept ({kept / total:.1%}).",
             "", "| step | removed | share | repaired (kept) |", "|---|---:|---:|---:|"]
    lines += [f"| {step} | {n:,} | {n / total:.2%} | {repaired.get(step, 0):,} |"
              for step, n in cleaned.removed().items()]
    if cleaned.contaminated and not cleaned.removed()[CONTAMINATION]:
        lines += ["", f"{cleaned.contaminated:,} pairs hold a dev or test sentence and were kept."]
    for index, step in enumerate(cleaned.steps):
        rows = np.flatnonzero(cleaned.reasons == index)
        if len(rows):
            shown = np.sort(rng.choice(rows, min(EXAMPLES, len(rows)), replace=False))
            lines += ["", f"### removed by {step}", "", "| row | source | target |", "|---:|---|---|"]
            lines += [f"| {row + 1} | {_cell(src)} | {_cell(tgt)} |"
                      for row, (src, tgt) in zip(shown, _pairs(cleaned, shown))]
    lines += _repairs_shown(cleaned, rng)
    return lines + [""]


def _repairs_shown(cleaned: Cleaned, rng: np.random.Generator) -> list[str]:
    """Examples of the kept pairs each repair changed: as read, and as kept."""
    kept = np.flatnonzero(cleaned.reasons == KEPT)
    lines = []
    for index, step in enumerate(cleaned.steps):
        rows = kept[cleaned.repairs[kept] == index]
        if len(rows):
            shown = np.sort(rng.choice(rows, min(EXAMPLES, len(rows)), replace=False))
            after = zip(*texts_at(cleaned.pairs, np.searchsorted(kept, shown)))
            lines += ["", f"### repaired by {step}", "", "| row | source, target as read | as kept |", "|---:|---|---|"]
            lines += [f"| {row + 1} | {_cell(src)} / {_cell(tgt)} | {_cell(new_src)} / {_cell(new_tgt)} |"
                      for row, (src, tgt), (new_src, new_tgt) in zip(shown, _pairs(cleaned, shown), after)]
    return lines


def removed_tsv(done: list[Cleaned]) -> str:
    """corpus, row (1-based: the line of the corpus's files when it is not sampled), reason, source, target."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(["corpus", "row", "reason", "source", "target"])
    for cleaned in done:
        rows = np.flatnonzero(cleaned.reasons != KEPT)
        for row, (src, tgt) in zip(rows, _pairs(cleaned, rows)):
            writer.writerow([cleaned.name, row + 1, cleaned.steps[cleaned.reasons[row]], src, tgt])
    return out.getvalue()


def _pairs(cleaned: Cleaned, rows: np.ndarray) -> list[tuple[str, str]]:
    return list(zip(*texts_at(cleaned.corpus, rows)))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
