"""The incremental decoding cache: kept keys and values grow and reorder exactly as concatenation would, and a
cached step gives the decoder output of the whole prefix (search tests check whole searches)."""

import torch

from conftest import tiny_model
from mt.decode.cache import DecoderCache, SelfAttentionCache
from mt.model.transformer import make_pad_mask, make_tgt_mask
from mt.data.tokenizer import BOS, EOS, PAD


def test_kept_keys_and_values_grow_and_reorder_like_concatenation():
    cache, reference_k, reference_v, batch = SelfAttentionCache(capacity=2), None, None, 3
    # 6 steps: past the first capacity twice, with rows dropped (as beam search drops finished sentences) and more
    # rows again than the spare buffers hold
    for rows in ([2, 0, 0], [1, 2], [1, 0], [0, 0], [1, 0, 1, 1], [3, 0, 2]):
        k, v = torch.randn(batch, 2, 1, 4), torch.randn(batch, 2, 1, 4)
        reference_k = k if reference_k is None else torch.cat([reference_k, k], dim=2)
        reference_v = v if reference_v is None else torch.cat([reference_v, v], dim=2)
        all_k, all_v = cache.append(k, v)
        assert torch.equal(all_k, reference_k) and torch.equal(all_v, reference_v)
        rows, batch = torch.tensor(rows), len(rows)  # reorder rows, or drop one, as beam search does
        cache.select(rows)
        reference_k, reference_v = reference_k[rows], reference_v[rows]
        kept_k, kept_v = cache.kept()
        assert torch.equal(kept_k, reference_k) and torch.equal(kept_v, reference_v)


def test_a_cached_step_per_beam_gives_the_decoder_output_of_the_whole_prefix():
    model = tiny_model(norm="pre")
    src = torch.tensor([[5, 6, 7, EOS], [8, EOS, PAD, PAD]])
    src_mask = make_pad_mask(src, PAD)
    memory = model.encode(src, src_mask)
    beams = 3
    prefixes = torch.randint(4, 50, (2 * beams, 5))  # each sentence's 3 beams, 5 tokens each
    prefixes[:, 0] = BOS
    cache = DecoderCache(model, memory, src_mask, beams, capacity=2)
    with torch.no_grad():
        for t in range(prefixes.size(1)):
            step = cache.step(prefixes[:, t:t + 1])                                     # [B·K, 1, D]
        rows = torch.arange(2).repeat_interleave(beams)                                 # each beam's sentence
        full, _ = model.decode(prefixes, memory[rows], src_mask[rows], make_tgt_mask(prefixes, PAD))
    torch.testing.assert_close(step[:, 0], full[:, -1], rtol=1e-5, atol=1e-5)
