"""Corpus → `datasets.Dataset` of text pairs → token ids (cached `map`) → length filter.

Local corpora are read with mt.core.lines, so that a misaligned file or a bad byte is reported with its file and
line; JSONL and hub datasets go through `datasets.load_dataset`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
from datasets.table import InMemoryTable

from mt.data.config import CorpusConfig, DataConfig
from mt.core.atomic import atomic_write_bytes, file_checksum
from mt.core.errors import MtError, first_line
from mt.core.lines import read_lines, read_text_column
from mt.data.tokenizer import Sampling, Tokenizer

log = logging.getLogger(__name__)
datasets.disable_progress_bars()


# ---------------------------------------------------------------- reading text pairs

def read_corpus(corpus: CorpusConfig, data: DataConfig, split: str) -> datasets.Dataset:
    """One split's pairs as a Dataset with text columns `src` and `tgt`."""
    if corpus.hub:
        return _read_hub(corpus, data, split)
    if not corpus.path:
        raise MtError(f"config key data.{split}: no corpus given (set data.{split}.path or data.{split}.hub)")
    path = Path(corpus.path)
    missing = [p for p in ([path] if path.suffix in (".tsv", ".jsonl") else
                           aligned_paths(path, data.src_lang, data.tgt_lang)) if not p.exists()]
    if missing:
        raise MtError(f"{missing[0]}: no such file (config key data.{split}.path; a run's token cache is rebuilt "
                      f"from its corpora when needed)")
    if path.suffix == ".tsv":
        return _read_tsv(path)
    if path.suffix == ".jsonl":
        return _read_jsonl(path, corpus, data)
    return _read_aligned(path, data.src_lang, data.tgt_lang)


def aligned_paths(prefix: Path, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """PREFIX.zh and PREFIX.en, or their gzipped PREFIX.zh.gz and PREFIX.en.gz."""
    paths = []
    for lang in (src_lang, tgt_lang):
        path = Path(f"{prefix}.{lang}")
        gzipped = Path(f"{path}.gz")
        paths.append(gzipped if not path.exists() and gzipped.exists() else path)
    return paths[0], paths[1]


def _read_aligned(prefix: Path, src_lang: str, tgt_lang: str) -> datasets.Dataset:
    """Two line-aligned files, straight into Arrow: no Python string per line, so millions of pairs load in
    seconds. The fingerprint comes from the files' names, sizes and times, so the token cache sees changes."""
    src_path, tgt_path = aligned_paths(prefix, src_lang, tgt_lang)
    src, tgt = read_text_column(src_path), read_text_column(tgt_path)
    if len(src) != len(tgt):
        raise MtError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: the files must be aligned")
    stats = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in (src_path, tgt_path)]
    fingerprint = hashlib.sha256(repr(stats).encode()).hexdigest()[:16]
    return datasets.Dataset(InMemoryTable(pa.table({"src": src, "tgt": tgt})), fingerprint=fingerprint)


def _read_tsv(path: Path) -> datasets.Dataset:
    src, tgt = [], []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise MtError(f"{path}:{number}: expected 2 tab-separated fields (source, target), found {len(fields)}")
        src.append(fields[0])
        tgt.append(fields[1])
    return datasets.Dataset.from_dict({"src": src, "tgt": tgt})


def _read_jsonl(path: Path, corpus: CorpusConfig, data: DataConfig) -> datasets.Dataset:
    for number, line in enumerate(read_lines(path), start=1):  # a clear line number before datasets parses it
        if line.strip():
            try:
                json.loads(line)
            except json.JSONDecodeError as e:
                raise MtError(f"{path}:{number}: not valid JSON ({e.msg})")
    dataset = datasets.load_dataset("json", data_files=str(path), split="train")
    return _select_fields(dataset, corpus, data, str(path))


def _read_hub(corpus: CorpusConfig, data: DataConfig, split: str) -> datasets.Dataset:
    try:
        dataset = datasets.load_dataset(corpus.hub, corpus.hub_config or None, split=corpus.split)
    except Exception as e:  # network, unknown name or split: datasets raises many kinds
        raise MtError(f"config key data.{split}.hub: cannot load {corpus.hub!r} "
                      f"(config {corpus.hub_config!r}, split {corpus.split!r}): {first_line(e)}", exit_code=1)
    return _select_fields(dataset, corpus, data, f"hub dataset {corpus.hub}")


def _select_fields(dataset: datasets.Dataset, corpus: CorpusConfig, data: DataConfig, where: str):
    """Pick the source and target fields; "translation.zh" reaches into a nested field."""
    src_field, tgt_field = corpus.src_field or data.src_lang, corpus.tgt_field or data.tgt_lang
    flat = dataset.flatten()
    for name in (src_field, tgt_field):
        if name not in flat.column_names:
            raise MtError(f"{where}: no field {name!r} (fields: {', '.join(flat.column_names)}); "
                          "set src_field/tgt_field in the data config")
    flat = flat.select_columns([src_field, tgt_field])
    return flat.rename_columns({src_field: "src", tgt_field: "tgt"}).cast(
        datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string")}))


Clean = Callable[[str, CorpusConfig, datasets.Dataset], datasets.Dataset]  # (name, corpus, pairs) → kept pairs


class TrainingMixture:
    """The training corpora (data.train and data.extra_train), each sampled to its max_pairs and then cleaned by
    `clean` (mt/clean), one after the other in `pairs`; `rows` lists an epoch's rows, each corpus's `repeat`
    times."""

    def __init__(self, data: DataConfig, seed: int, clean: Clean | None = None):
        corpora = data.training_corpora()
        self.names = list(corpora)
        self.repeats = [corpus.repeat for corpus in corpora.values()]
        self.parts = [sample_pairs(read_corpus(corpus, data, name), corpus.max_pairs, seed)
                      for name, corpus in corpora.items()]
        if clean is not None:
            self.parts = [clean(name, corpus, part) for (name, corpus), part in zip(corpora.items(), self.parts)]
        self.parts = [tagged(part, corpus.tag) for corpus, part in zip(corpora.values(), self.parts)]
        features = self.parts[0].features  # text files read as large strings, other formats as strings
        self.parts = [part if part.features == features else part.cast(features) for part in self.parts]
        self.pairs = self.parts[0] if len(self.parts) == 1 else datasets.concatenate_datasets(self.parts)
        self.rows = self.epoch_rows([np.arange(len(part)) for part in self.parts])

    def epoch_rows(self, kept: list[np.ndarray]) -> np.ndarray:
        """Rows of `pairs` for one epoch, from each corpus's kept rows (numbered within that corpus)."""
        offsets = np.cumsum([0] + [len(part) for part in self.parts])
        return np.concatenate([np.tile(rows + offset, repeat)
                               for rows, offset, repeat in zip(kept, offsets, self.repeats)])

    def encode(self, tokenizer: Tokenizer, cache_dir: Path, max_len: int,
               sampling: Sampling | None = None) -> tuple[datasets.Dataset, np.ndarray]:
        """Token ids of all corpora (each cached on its own) and the epoch's rows without the filtered pairs;
        with `sampling`, one sampled segmentation of them (reported at debug level: one per epoch)."""
        encoded = [encode_corpus(part, tokenizer, cache_dir, ("train" if i == 0 else f"train{i}")
                                 + ("-sampled" if sampling else ""), sampling)
                   for i, part in enumerate(self.parts)]
        kept = []
        for name, part in zip(self.names, encoded):
            rows, report = filter_pairs(part, max_len, name)
            kept.append(rows)
            log.log(logging.DEBUG if sampling else logging.INFO, report)
        rows = self.epoch_rows(kept)
        if len(encoded) > 1 and not sampling:
            log.info(f"training mixture: {len(rows):,} pairs per epoch (" + ", ".join(
                f"{name} {len(k):,}×{r}" for name, k, r in zip(self.names, kept, self.repeats)) + ")")
        return (encoded[0] if len(encoded) == 1 else datasets.concatenate_datasets(encoded)), rows


def tagged(pairs: datasets.Dataset, tag: str) -> datasets.Dataset:
    """`tag` and a space before each source sentence (after cleaning, which reads the sentences as they are)."""
    if not tag:
        return pairs
    return pairs.map(lambda batch: {"src": [f"{tag} {src}" for src in batch["src"]]}, batched=True,
                     new_fingerprint=hashlib.sha256(f"{pairs._fingerprint}-tag-{tag}".encode()).hexdigest()[:16])


# ---------------------------------------------------------------- text → ids

def sample_pairs(pairs: datasets.Dataset, size: int, seed: int) -> datasets.Dataset:
    """At most `size` pairs drawn at random (in corpus order); all of them when size is 0 or not smaller."""
    if not size or len(pairs) <= size:
        return pairs
    rows = np.sort(np.random.default_rng(seed).choice(len(pairs), size, replace=False))
    return take_rows(pairs, rows, f"{size}-{seed}")


def take_rows(pairs: datasets.Dataset, rows: np.ndarray, what: str) -> datasets.Dataset:
    """The pairs at `rows` as a new in-memory table, its fingerprint from the pairs' and `what` (how the rows were
    chosen). Arrow's take: a second for 300,000 of 2M rows, where `select` would make every later read slow, and
    contiguous arrays, where datasets' own lookup of a list of rows gives a table of one-row slices of the old one,
    which costs gigabytes to send to the processes of a `map`."""
    if pairs._indices is not None:  # a selection: its rows made real first
        pairs = pairs.flatten_indices()
    table = pairs.data.table.take(pa.array(rows, type=pa.int64()))
    fingerprint = hashlib.sha256(f"{pairs._fingerprint}-{what}".encode()).hexdigest()[:16]
    return datasets.Dataset(InMemoryTable(table), fingerprint=fingerprint)


def texts_at(pairs: datasets.Dataset, rows: np.ndarray) -> tuple[list[str], list[str]]:
    """The source and target texts of the pairs at `rows`."""
    table = pairs.select_columns(["src", "tgt"]).with_format("arrow")[rows.tolist()]
    return table.column("src").to_pylist(), table.column("tgt").to_pylist()


def tokenizer_sample(pairs: datasets.Dataset, rows: np.ndarray, size: int, seed: int) -> tuple[list[str], list[str]]:
    """The source and target sides of at most `size` of the given rows, drawn at random, for SentencePiece to
    learn from. A row repeated in `rows` (an up-weighted corpus) may be drawn more than once."""
    if len(rows) > size:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size, replace=False))
    return texts_at(pairs, rows)


def encode_corpus(pairs: datasets.Dataset, tokenizer: Tokenizer, cache_dir: Path, name: str,
                  sampling: Sampling | None = None) -> datasets.Dataset:
    """Add `src_ids`, `tgt_ids` and their lengths via `datasets.map`, cached in the run directory.

    The cache file name hashes the texts' fingerprint, the vocabulary, the script conversion and the sampling, so
    a changed corpus or tokenizer never reuses stale ids. With `sampling`, each batch of 2,000 pairs is segmented
    with a seed of its own drawn from sampling.seed, so the ids are the same however many processes map them.
    """
    sampled = f"-{sampling}" if sampling else ""  # the best segmentation keeps the keys of previous versions
    key = hashlib.sha256(f"{pairs._fingerprint}-{tokenizer.vocab_hash}-{tokenizer.scripts}{sampled}".encode()
                         ).hexdigest()[:16]
    cache_dir.mkdir(parents=True, exist_ok=True)

    def encode(batch: dict, indices: list[int]) -> dict:
        src = tokenizer.encode_src(batch["src"], _batch_sampling(sampling, indices[0], 0))
        tgt = tokenizer.encode_tgt(batch["tgt"], _batch_sampling(sampling, indices[0], 1))
        return {"src_ids": src, "tgt_ids": tgt,
                "src_len": [len(s) for s in src], "tgt_len": [len(t) for t in tgt]}

    processes = min(len(os.sched_getaffinity(0)), 8) if len(pairs) >= 200_000 else None  # pays off when big
    cache_file = cache_dir / f"{name}-{key}.arrow"
    checksums = cache_dir / f"{name}-{key}.sha256"
    cached = sorted(cache_dir.glob(f"{name}-{key}*.arrow"))  # with num_proc, one file per process
    if cached and not _checksums_match(checksums, cached):
        log.warning(f"{cached[0]}: the token cache is damaged or incomplete (its checksums are missing or "
                    f"differ); rebuilding it from the corpus")
        for path in cached:
            path.unlink()
        cached = []
    encoded = pairs.map(encode, batched=True, batch_size=2000, with_indices=True, cache_file_name=str(cache_file),
                        new_fingerprint=key, load_from_cache_file=True, num_proc=processes)
    if not cached:  # made now
        files = sorted(cache_dir.glob(f"{name}-{key}*.arrow"))
        atomic_write_bytes(checksums, json.dumps({p.name: file_checksum(p) for p in files}).encode("utf-8"))
    return encoded


def _checksums_match(checksums: Path, files: list[Path]) -> bool:
    """Arrow keeps no checksums of its own, and a damaged cache can crash its reader (an abort, not an error):
    a token cache is read only when each of its files has the checksum written when it was made. A cache whose
    making was stopped before the checksums were written is made again."""
    try:
        expected = json.loads(checksums.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(expected, dict) and sorted(expected) == [p.name for p in files] and all(
        expected[p.name] == file_checksum(p) for p in files)


def _batch_sampling(sampling: Sampling | None, first_row: int, side: int) -> Sampling | None:
    """The sampling of one side of the batch starting at `first_row`: its own seed, drawn from sampling.seed."""
    if sampling is None:
        return None
    return Sampling(sampling.alpha, int(np.random.SeedSequence([sampling.seed, first_row, side]).generate_state(1)[0]))


def lengths(encoded: datasets.Dataset) -> tuple[np.ndarray, np.ndarray]:
    """The token counts of each pair's sides, as arrays read straight from Arrow."""
    table = encoded.select_columns(["src_len", "tgt_len"]).with_format("arrow")[:]  # Arrow's take: fast
    return table.column("src_len").to_numpy(), table.column("tgt_len").to_numpy()


def filter_pairs(encoded: datasets.Dataset, max_len: int, name: str) -> tuple[np.ndarray, str]:
    """The rows to keep: not an empty side, nor more than max_len tokens on a side. The report says how many
    were dropped and why. (Rows, not `select`: datasets reads a selection of millions of rows slowly.)"""
    src_len, tgt_len = lengths(encoded)
    empty = (src_len <= 1) | (tgt_len <= 2)  # nothing but EOS (source) or BOS EOS (target)
    too_long = ~empty & ((src_len > max_len) | (tgt_len > max_len))
    keep = np.flatnonzero(~empty & ~too_long)
    report = (f"{name}: {len(encoded):,} pairs, kept {len(keep):,} (dropped {int(empty.sum()):,} with an empty "
              f"side, {int(too_long.sum()):,} longer than {max_len} tokens)")
    if len(keep) == 0:
        raise MtError(f"{name}: no pairs left after filtering ({report})")
    return keep, report
