"""A run's data, ready to train on: its training corpora cleaned (mt/clean), its tokenizer (trained on them if the
run has none yet), the token ids of every corpus (cached in RUN/cache by `datasets.map`), the length filter, and
the training batches.

`mt train` calls it before training, `mt prepare` alone (so that a long corpus is tokenised once, ahead of time),
and the training benchmark to build real batches.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np

from mt.clean.cleaning import Cleaning
from mt.data.batching import TrainBatches
from mt.config import Config
from mt.data.corpora import TrainingMixture, encode_corpus, filter_pairs, lengths, read_corpus, tokenizer_sample
from mt.core.errors import MtError
from mt.core.run_dir import RunDir
from mt.core.run_lock import lock_run_dir
from mt.data.tokenizer import Sampling, Tokenizer, tokenizer_files, train_tokenizer

log = logging.getLogger(__name__)


@dataclass
class PreparedData:
    tokenizer: Tokenizer
    train: TrainBatches  # the training batches of the best segmentation
    dev: datasets.Dataset  # encoded and filtered dev pairs, texts included
    cleaning: dict  # what cleaning removed from each training corpus (Cleaning.facts), for the checkpoints
    resample: Callable[[int], TrainBatches] | None = None  # subword regularisation: an epoch's own segmentation

    def train_batches(self, epoch: int) -> TrainBatches:
        """The training batches of an epoch: segmented anew for it with subword regularisation, else the same."""
        return self.train if self.resample is None else self.resample(epoch)


def saved_tokenizer(config: Config, run_dir: Path) -> Tokenizer | None:
    """The tokenizer saved in run_dir (checked against the config), or None."""
    tokenizer = Tokenizer.load(run_dir, config.data.scripts())
    if tokenizer is not None:
        _check_vocabulary(tokenizer, config, run_dir)
    return tokenizer


def new_tokenizer(config: Config, run_dir: Path, mixture: TrainingMixture) -> Tokenizer:
    """A tokenizer trained on a sample of the (cleaned) training corpora, saved in run_dir."""
    start = time.perf_counter()
    src, tgt = tokenizer_sample(mixture.pairs, mixture.rows, config.tokenizer.sample_size, config.train.seed)
    tokenizer = train_tokenizer(src, tgt, config.tokenizer, config.data.scripts(), config.data.tags())
    tokenizer.save(run_dir)
    kind = "joint" if tokenizer.joint else "separate"
    log.info(f"tokenizer: trained SentencePiece BPE, {tokenizer.src_vocab_size:,} pieces ({kind}) on "
             f"{len(src):,} pairs in {time.perf_counter() - start:.1f}s → {run_dir}")
    return tokenizer


def _check_vocabulary(tokenizer: Tokenizer, config: Config, run_dir: Path) -> None:
    """A saved SentencePiece model cut short can still load, with fewer pieces: refuse one whose size is not the
    config's (damaged, or trained for another config)."""
    wanted = config.tokenizer.vocab_size
    for side, size in (("", tokenizer.src_vocab_size), (" target", tokenizer.tgt_vocab_size)):
        if size != wanted:
            files = " and ".join(str(path) for path in tokenizer_files(run_dir))
            raise MtError(f"{files}: the run's{side} SentencePiece model has {size:,} pieces, but tokenizer.vocab_size "
                          f"is {wanted:,}: it is damaged, or was trained for another config; remove it and "
                          f"{RunDir(run_dir).cache} to train a new one (checkpoints keep their own copy)")


def prepare_data(config: Config, run_dir: Path, tokenizer: Tokenizer | None) -> PreparedData:
    """Everything training reads, with `tokenizer` (a resumed run's) or the run's own."""
    data = config.data
    tokenizer = tokenizer or saved_tokenizer(config, run_dir)  # checked before the corpora are read
    cache = RunDir(run_dir).cache
    cleaning = Cleaning(data, cache)
    mixture = TrainingMixture(data, config.train.seed, cleaning)
    dev_pairs = read_corpus(data.dev, data, "dev")
    if data.dev_max_sentences:
        dev_pairs = dev_pairs.select(range(min(data.dev_max_sentences, len(dev_pairs))))
    tokenizer = tokenizer or new_tokenizer(config, run_dir, mixture)
    train_encoded, train_rows = mixture.encode(tokenizer, cache, data.max_len)
    dev_encoded = encode_corpus(dev_pairs, tokenizer, cache, "dev")
    dev_rows, report = filter_pairs(dev_encoded, data.max_len, "dev")
    log.info(report)
    t = config.train

    def batches(encoded: datasets.Dataset, rows: np.ndarray) -> TrainBatches:
        return TrainBatches(encoded.select_columns(["src_ids", "tgt_ids"]), *lengths(encoded), rows, t.max_tokens,
                            t.seed, t.length_buckets)

    def resample(epoch: int) -> TrainBatches:
        """The training pairs segmented with BPE-dropout, one draw per (seed, epoch), cached until the next."""
        seed = int(np.random.SeedSequence([t.seed, epoch]).generate_state(1)[0])
        start = time.perf_counter()
        encoded, rows = mixture.encode(tokenizer, cache, data.max_len, Sampling(config.tokenizer.sampling_alpha, seed))
        current = {Path(f["filename"]).name for f in encoded.cache_files}
        for other in cache.glob("train*-sampled-*.arrow"):  # previous epochs' segmentations
            if other.name not in current:
                other.unlink()
        for checksums in cache.glob("train*-sampled-*.sha256"):  # and their checksums
            if not any(cache.glob(f"{checksums.stem}*.arrow")):
                checksums.unlink()
        log.debug(f"epoch {epoch}: {len(rows):,} pairs segmented anew in {time.perf_counter() - start:.1f}s")
        return batches(encoded, rows)

    return PreparedData(tokenizer, batches(train_encoded, train_rows), dev_encoded.select(dev_rows), cleaning.facts(),
                        resample if config.tokenizer.sampling_alpha else None)


def prepare(config: Config) -> PreparedData:
    """`mt prepare`: the run's tokenizer (trained if missing) and its token cache, without training a model."""
    run_dir = Path(config.train.run_dir)
    start = time.perf_counter()
    with lock_run_dir(run_dir, "mt prepare"):
        data = prepare_data(config, run_dir, None)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    log.info(f"prepared in {time.perf_counter() - start:.1f}s, peak memory {peak_mb:,.0f} MB: "
             f"{len(data.train.src_len):,} training pairs, {data.train.padding_ratio():.1%} of batch positions "
             f"padding → {run_dir}")
    return data
