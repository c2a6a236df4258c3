"""Corpus → `datasets.Dataset` of text pairs → token ids (cached `map`) → length filter → token-budget batches.

Local corpora are read line by line so that a misaligned file or a bad byte is reported with its file and
line; JSONL and hub datasets go through `datasets.load_dataset`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import datasets
import numpy as np
import torch
from torch import Tensor

from mt.config import CorpusConfig, DataConfig
from mt.errors import MtError
from mt.model import make_pad_mask, make_tgt_mask
from mt.tokenizer import PAD, Tokenizer

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


def read_lines(path: Path) -> list[str]:
    """A UTF-8 text file as lines (without line ends). Errors name the file and the line."""
    return list(iter_file_lines(path))


def iter_file_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file, read lazily; a missing file is reported at once."""
    try:
        stream = open(path, "rb")
    except FileNotFoundError:
        raise MtError(f"{path}: no such file")
    except OSError as e:
        raise MtError(f"{path}: cannot read ({e.strerror})")

    def lines() -> Iterator[str]:
        with stream:
            yield from iter_lines(stream, str(path))

    return lines()


def iter_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """Decode a byte stream line by line (split at \\n only); bad UTF-8 is an error naming `name` and the line."""
    for number, line in enumerate(stream, start=1):
        try:
            yield line.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
            raise MtError(f"{name}:{number}: invalid UTF-8 (byte {e.start + 1})")


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
    report = (f"{name}: {len(encoded):,} pairs, kept {len(keep):,} "
              f"(dropped {int(empty.sum()):,} with an empty side, {int(too_long.sum()):,} longer than {max_len} tokens)")
    if len(keep) == 0:
        raise MtError(f"{name}: no pairs left after filtering ({report})")
    return encoded.select(keep), report


# ---------------------------------------------------------------- ids → batches

@dataclass
class Batch:
    """A padded batch for teacher forcing: the decoder reads `tgt_input` and must predict `tgt_label`."""

    src: Tensor        # [B, S]
    tgt_input: Tensor  # [B, T]   tgt[:, :-1]: BOS w1 … wn
    tgt_label: Tensor  # [B, T]   tgt[:, 1:]:  w1 … wn EOS
    src_mask: Tensor   # [B, 1, 1, S]
    tgt_mask: Tensor   # [B, 1, T, T]

    @property
    def num_tokens(self) -> int:
        """Target tokens that count in the loss (PAD excluded)."""
        return int((self.tgt_label != PAD).sum())

    def to(self, device: torch.device) -> Batch:
        return Batch(*(t.to(device, non_blocking=True) for t in
                       (self.src, self.tgt_input, self.tgt_label, self.src_mask, self.tgt_mask)))


def pad_ids(sequences: list[list[int]]) -> Tensor:
    """Ragged ids → [B, L_max], right-padded with PAD."""
    out = torch.full((len(sequences), max(len(s) for s in sequences)), PAD, dtype=torch.long)
    for row, seq in enumerate(sequences):
        out[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def make_batch(src_ids: list[list[int]], tgt_ids: list[list[int]]) -> Batch:
    src, tgt = pad_ids(src_ids), pad_ids(tgt_ids)
    tgt_input, tgt_label = tgt[:, :-1], tgt[:, 1:]
    return Batch(src, tgt_input, tgt_label, make_pad_mask(src, PAD), make_tgt_mask(tgt_input, PAD))


def token_batches(src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int,
                  rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Group pair indices into batches of at most `max_tokens` padded tokens per side.

    Pairs are sorted by length so that a batch holds similar lengths (little padding); with `rng`, ties are
    broken at random and the batch order is shuffled, so each epoch differs while padding stays low.
    """
    size = np.maximum(src_len, tgt_len)
    tiebreak = rng.permutation(len(size)) if rng is not None else np.arange(len(size))
    order = np.lexsort((tiebreak, size))  # by length, then by the tiebreak
    batches, start, longest = [], 0, 0
    for pos, index in enumerate(order):
        longest = max(longest, size[index])
        if (pos - start + 1) * longest > max_tokens:
            batches.append(order[start:pos])
            start, longest = pos, size[index]
    batches.append(order[start:])
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


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
