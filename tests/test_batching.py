"""Batches: targets shifted for teacher forcing, PAD kept out of the count, token budgets and bucket shapes kept."""

import numpy as np

from mt.data.batching import TrainBatches, bucket_batches, bucket_shape, make_batch, source_batches, token_batches
from mt.data.config import CorpusConfig, DataConfig
from mt.data.corpora import encode_corpus, filter_pairs, lengths, read_corpus
from mt.data.tokenizer import BOS, EOS, PAD


def test_targets_are_shifted_by_one():
    batch = make_batch([[5, 6, EOS], [7, EOS]], [[BOS, 8, 9, EOS], [BOS, 10, EOS]])
    assert batch.tgt_input.tolist() == [[BOS, 8, 9], [BOS, 10, EOS]]
    assert batch.tgt_label.tolist() == [[8, 9, EOS], [10, EOS, PAD]]
    assert batch.num_tokens == 5  # PAD labels do not count


def test_token_batches_cover_every_pair_once_within_the_budget():
    rng = np.random.default_rng(0)
    src_len, tgt_len = rng.integers(2, 40, 500), rng.integers(3, 40, 500)
    batches = token_batches(src_len, tgt_len, max_tokens=200, rng=np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    for indices in batches:
        assert len(indices) * max(src_len[indices].max(), tgt_len[indices].max()) <= 200
    again = token_batches(src_len, tgt_len, max_tokens=200, rng=np.random.default_rng(1))
    assert all((a == b).all() for a, b in zip(batches, again))  # the same seed gives the same order
    alone = token_batches(np.array([3, 50, 4]), np.array([3, 50, 4]), max_tokens=20)
    assert [b.tolist() for b in alone] == [[0, 2], [1]]  # over the budget: a batch of its own, never empty


def test_token_batches_hold_one_source_length_and_close_target_lengths():
    rng = np.random.default_rng(0)
    src_len = rng.integers(2, 30, 2000)
    tgt_len = np.maximum(2, src_len + rng.integers(-4, 5, 2000))
    batches = token_batches(src_len, tgt_len, max_tokens=300, rng=np.random.default_rng(1))
    runs = sorted((sorted(zip(src_len[b].tolist(), tgt_len[b].tolist())) for b in batches),
                  key=lambda run: (run[0], run[-1]))
    pairs = [pair for run in runs for pair in run]
    assert pairs == sorted(pairs)  # the batches cut one run sorted by (source length, target length)
    def padding(side):
        return 1 - side.sum() / sum(len(b) * side[b].max() for b in batches)
    assert padding(src_len) < 0.01 and padding(tgt_len) < 0.1  # targets spread ±4 around their source's length
    other_epoch = token_batches(src_len, tgt_len, max_tokens=300, rng=np.random.default_rng(2))
    assert [b.tolist() for b in other_epoch] != [b.tolist() for b in batches]


def test_bucket_batches_have_one_fixed_shape_per_bucket_and_cover_every_pair_once():
    rng = np.random.default_rng(0)
    src_len, tgt_len = rng.integers(2, 40, 500), rng.integers(3, 41, 500)  # tgt_len - 1 ≤ 40 positions
    buckets = [8, 16, 40]
    batches = bucket_batches(src_len, tgt_len, 200, buckets, rng=np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    shapes = [bucket_shape(src_len[b], tgt_len[b], 200, buckets) for b in batches]
    assert set(shapes) == {(25, 8), (12, 16), (5, 40)}  # the only shapes a compiled model meets
    for indices, (rows, length) in zip(batches, shapes):
        size = np.maximum(src_len[indices], tgt_len[indices] - 1)
        assert size.max() <= length and len(indices) <= rows
        shorter = [b for b in buckets if b < length]
        assert not shorter or (size > shorter[-1]).all()  # each pair in the shortest bucket that holds it
    assert sum(len(b) < rows for b, (rows, _) in zip(batches, shapes)) <= len(buckets)  # one short batch a bucket


def test_a_batch_filled_to_its_bucket_shape_has_empty_rows_without_labels():
    batch = make_batch([[5, 6, EOS]], [[BOS, 8, EOS]], shape=(3, 4))
    assert batch.src.tolist() == [[5, 6, EOS, PAD], [EOS, PAD, PAD, PAD], [EOS, PAD, PAD, PAD]]
    assert batch.tgt_input.tolist() == [[BOS, 8, EOS, PAD], [BOS, PAD, PAD, PAD], [BOS, PAD, PAD, PAD]]
    assert batch.tgt_label.shape == (3, 4) and batch.num_tokens == 2


def test_source_batches_cover_every_source_once_in_length_order():
    sources = [[5] * n for n in (7, 2, 9, 2, 4)]
    batches = source_batches(sources, max_tokens=10)
    assert sorted(sum(batches, [])) == list(range(5)) and source_batches([], 10) == []
    assert [[len(sources[i]) for i in b] for b in batches] == [[2, 2], [4], [7], [9]]


def test_source_batches_in_shares_hold_about_equal_source_tokens_within_the_budget():
    sources = [[5] * n for n in [2] * 30 + [3] * 20 + [10] * 4]  # 160 source tokens
    halves = source_batches(sources, max_tokens=1000, shares=2)
    assert [sum(len(sources[i]) for i in b) for b in halves] == [81, 79]  # ends at the sentence reaching 80
    assert [len(b) for b in halves] == [37, 17]  # the short sentences' batch holds more of them
    assert source_batches(sources, max_tokens=40, shares=2) == source_batches(sources, max_tokens=40)  # budget first
    assert source_batches(sources, max_tokens=1000) == [list(range(54))]


def train_batches(encoded, rows, **settings) -> TrainBatches:
    return TrainBatches(encoded.select_columns(["src_ids", "tgt_ids"]), *lengths(encoded), rows, **settings)


def test_length_sorted_batches_keep_padding_low(corpus_dir, tokenizer, tmp_path):
    data = DataConfig(train=CorpusConfig(path=str(corpus_dir / "train")))
    encoded = encode_corpus(read_corpus(data.train, data, "train"), tokenizer, tmp_path, "t")
    rows, _ = filter_pairs(encoded, 64, "t")
    assert train_batches(encoded, rows, max_tokens=200, seed=1).padding_ratio() < 0.35


def test_length_buckets_give_batches_of_their_fixed_shapes(corpus_dir, tokenizer, tmp_path):
    data = DataConfig(train=CorpusConfig(path=str(corpus_dir / "train")))
    encoded = encode_corpus(read_corpus(data.train, data, "train"), tokenizer, tmp_path, "t")
    rows, _ = filter_pairs(encoded, 64, "t")
    plain = train_batches(encoded, rows, max_tokens=200, seed=1)
    bucketed = train_batches(encoded, rows, max_tokens=200, seed=1, buckets=[8, 16, 64])
    batches = [bucketed.batch(indices) for indices in bucketed.epoch(0)]
    shapes = {(tuple(b.src.shape), tuple(b.tgt_input.shape), tuple(b.tgt_label.shape)) for b in batches}
    assert len(shapes) >= 2 and shapes <= {(s, s, s) for s in [(25, 8), (12, 16), (3, 64)]}
    assert sum(b.num_tokens for b in batches) == int(plain.tgt_len.sum() - len(rows))  # every label, once
    assert plain.padding_ratio() < bucketed.padding_ratio() < 0.6  # the price of fixed shapes
