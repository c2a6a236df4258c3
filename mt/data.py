"""Corpus → `datasets.Dataset` of text pairs → token ids (cached `map`) → length filter → training batches.

Local corpora are read with mt.lines, so that a misaligned file or a bad byte is reported with its file and
line; JSONL and hub datasets go through `datasets.load_dataset`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import datasets
import numpy as np

from mt.batching import Batch, make_batch, token_batches
from mt.config import CorpusConfig, DataConfig
from mt.errors import MtError
from mt.lines import read_lines
from mt.tokenizer import Tokenizer

datasets.disable_progress_bars()


# ---------------------------------------------------------------- reading text pairs

def read_corpus(corpus: CorpusConfig, data: DataConfig, split: str) -> datasets.Dataset:
    """One split's pairs as a Dataset with text columns `src` and `tgt`."""
    if corpus.hub:
        return _read_hub(corpus, data, split)
    if not corpus.path:
        raise MtError(f"config key data.{split}: no corpus given (set data.{split}.path or data.{split}.hub)")
    path = Path(corpus.path)
    if path.suffix == ".tsv":
        return _read_tsv(path)
    if path.suffix == ".jsonl":
        return _read_jsonl(path, corpus, data)
    return _read_aligned(path, data.src_lang, data.tgt_lang)


def aligned_paths(prefix: Path, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    return Path(f"{prefix}.{src_lang}"), Path(f"{prefix}.{tgt_lang}")


def _read_aligned(prefix: Path, src_lang: str, tgt_lang: str) -> datasets.Dataset:
    src_path, tgt_path = aligned_paths(prefix, src_lang, tgt_lang)
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise MtError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: the files must be aligned")
    return datasets.Dataset.from_dict({"src": src, "tgt": tgt})


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
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MtError(f"config key data.{split}.hub: cannot load {corpus.hub!r} "
                      f"(config {corpus.hub_config!r}, split {corpus.split!r}): {first_line}", exit_code=1)
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


# ---------------------------------------------------------------- text → ids

def encode_corpus(pairs: datasets.Dataset, tokenizer: Tokenizer, cache_dir: Path, name: str) -> datasets.Dataset:
    """Add `src_ids`, `tgt_ids` and their lengths via `datasets.map`, cached in the run directory.

    The cache file name hashes the texts' fingerprint and the vocabulary, so a changed corpus or tokenizer
    never reuses stale ids.
    """
    key = hashlib.sha256(f"{pairs._fingerprint}-{tokenizer.vocab_hash}".encode()).hexdigest()[:16]
    cache_dir.mkdir(parents=True, exist_ok=True)

    def encode(batch: dict) -> dict:
        src, tgt = tokenizer.encode_src(batch["src"]), tokenizer.encode_tgt(batch["tgt"])
        return {"src_ids": src, "tgt_ids": tgt,
                "src_len": [len(s) for s in src], "tgt_len": [len(t) for t in tgt]}

    return pairs.map(encode, batched=True, batch_size=2000, cache_file_name=str(cache_dir / f"{name}-{key}.arrow"),
                     new_fingerprint=key, load_from_cache_file=True)


def filter_pairs(encoded: datasets.Dataset, max_len: int, name: str) -> tuple[datasets.Dataset, str]:
    """Drop pairs with an empty side or more than max_len tokens on a side; say how many and why."""
    src_len, tgt_len = np.asarray(encoded["src_len"]), np.asarray(encoded["tgt_len"])
    empty = (src_len <= 1) | (tgt_len <= 2)  # nothing but EOS (source) or BOS EOS (target)
    too_long = ~empty & ((src_len > max_len) | (tgt_len > max_len))
    keep = np.flatnonzero(~empty & ~too_long)
    report = (f"{name}: {len(encoded):,} pairs, kept {len(keep):,} (dropped {int(empty.sum()):,} with an empty "
              f"side, {int(too_long.sum()):,} longer than {max_len} tokens)")
    if len(keep) == 0:
        raise MtError(f"{name}: no pairs left after filtering ({report})")
    return encoded.select(keep), report


# ---------------------------------------------------------------- ids → training batches

class TrainBatches:
    """Endless training batches, addressed by (epoch, index) so that a resumed run sees the same data order."""

    def __init__(self, encoded: datasets.Dataset, max_tokens: int, seed: int):
        self.ids = encoded.select_columns(["src_ids", "tgt_ids"])
        self.src_len = np.asarray(encoded["src_len"])
        self.tgt_len = np.asarray(encoded["tgt_len"])
        self.max_tokens = max_tokens
        self.seed = seed

    def epoch(self, epoch: int) -> list[np.ndarray]:
        return token_batches(self.src_len, self.tgt_len, self.max_tokens, np.random.default_rng([self.seed, epoch]))

    def batch(self, indices: np.ndarray) -> Batch:
        rows = self.ids[indices.tolist()]
        return make_batch(rows["src_ids"], rows["tgt_ids"])

    def padding_ratio(self, epoch: int = 0) -> float:
        """Share of padded positions (both sides) in the epoch's batches."""
        real = padded = 0
        for indices in self.epoch(epoch):
            real += int(self.src_len[indices].sum() + self.tgt_len[indices].sum())
            padded += len(indices) * int(self.src_len[indices].max() + self.tgt_len[indices].max())
        return 1.0 - real / padded
