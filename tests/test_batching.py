"""Batches: targets shifted for teacher forcing, PAD kept out of the count, token budgets respected."""

import numpy as np

from mt.batching import make_batch, token_batches
from mt.tokenizer import BOS, EOS, PAD


def test_targets_are_shifted_by_one():
    batch = make_batch([[5, 6, EOS], [7, EOS]], [[BOS, 8, 9, EOS], [BOS, 10, EOS]])
    assert batch.tgt_input.tolist() == [[BOS, 8, 9], [BOS, 10, EOS]]
    assert batch.tgt_label.tolist() == [[8, 9, EOS], [10, EOS, PAD]]
    assert batch.src_mask.shape == (2, 1, 1, 3) and batch.tgt_mask.shape == (2, 1, 3, 3)
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
