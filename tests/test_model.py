"""The Transformer's boxes: masks hide what they must, attention is a distribution, shapes and options hold."""

import math

import pytest
import torch

from conftest import tiny_model
from mt.model.transformer import (MultiHeadAttention, PositionalEncoding, TokenEmbedding, make_causal_mask, make_pad_mask,
                      make_tgt_mask, scaled_dot_product_attention)
from mt.data.tokenizer import BOS, EOS, PAD


def padded_batch():
    """Two source sentences of lengths 6 and 3 (+PAD), and target prefixes of lengths 5 and 2 (+PAD)."""
    src = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, EOS, PAD, PAD, PAD]])
    tgt_input = torch.tensor([[BOS, 12, 13, 14, 15], [BOS, 16, PAD, PAD, PAD]])
    return src, tgt_input


def logits_with(model, src, src_mask, tgt_input, tgt_mask):
    memory = model.encode(src, src_mask)
    hidden, _ = model.decode(tgt_input, memory, src_mask, tgt_mask)
    return model.generator(hidden)


def test_masks_have_the_documented_shapes_and_values():
    src, tgt_input = padded_batch()
    assert make_pad_mask(src, PAD).shape == (2, 1, 1, 6)
    assert make_pad_mask(src, PAD)[1, 0, 0].tolist() == [True, True, True, False, False, False]
    causal = make_causal_mask(4)[0, 0]
    assert causal.tolist() == [[True, False, False, False], [True, True, False, False],
                               [True, True, True, False], [True, True, True, True]]
    tgt_mask = make_tgt_mask(tgt_input, PAD)
    assert tgt_mask.shape == (2, 1, 5, 5)
    assert not tgt_mask[1, 0, 4, 2:].any()  # PAD keys hidden even where the causal mask allows them


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_changing_padded_source_tokens_changes_no_logit(norm):
    model = tiny_model(norm=norm)
    src, tgt_input = padded_batch()
    src_mask, tgt_mask = make_pad_mask(src, PAD), make_tgt_mask(tgt_input, PAD)
    before = logits_with(model, src, src_mask, tgt_input, tgt_mask)
    scrambled = src.clone()
    scrambled[1, 3:] = torch.tensor([20, 21, 22])  # what sits under the padding mask
    after = logits_with(model, scrambled, src_mask, tgt_input, tgt_mask)
    torch.testing.assert_close(after, before, rtol=0, atol=1e-6)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_changing_a_future_target_token_changes_no_earlier_logit(norm):
    model = tiny_model(norm=norm)
    src, tgt_input = padded_batch()
    before = model(src, tgt_input)
    changed = tgt_input.clone()
    changed[0, 3] = 30
    after = model(src, changed)
    torch.testing.assert_close(after[0, :3], before[0, :3], rtol=0, atol=1e-6)
    assert not torch.allclose(after[0, 3:], before[0, 3:])  # the mask hides only the future
    torch.testing.assert_close(after[1], before[1], rtol=0, atol=1e-6)


def test_attention_rows_sum_to_one_and_give_padding_no_weight():
    model = tiny_model()
    src, tgt_input = padded_batch()
    src_mask = make_pad_mask(src, PAD)
    memory = model.encode(src, src_mask)
    _, attention = model.decode(tgt_input, memory, src_mask, make_tgt_mask(tgt_input, PAD), need_weights=True)
    assert len(attention) == 2
    for weights in attention:  # [B, H, T, S]
        assert weights.shape == (2, 2, 5, 6)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 5))
        assert (weights[1, :, :, 3:] == 0).all()


def cross_attention_case():
    """Attention of 4 heads over d_model 16; queries [2,5,16] against a memory [2,7,16] whose second row has 3 PADs."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(d_model=16, num_heads=4)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    return attn, x, memory, make_pad_mask(torch.tensor([[1] * 7, [1] * 4 + [PAD] * 3]), PAD)


def test_fused_attention_equals_the_written_out_formula():
    attn, x, memory, mask = cross_attention_case()
    fused, none = attn(x, memory, memory, mask)
    explicit, weights = attn(x, memory, memory, mask, need_weights=True)
    assert none is None and weights.shape == (2, 4, 5, 7)
    torch.testing.assert_close(fused, explicit, rtol=1e-5, atol=1e-6)


def test_bf16_attention_on_the_cpu_hides_padding_and_matches_fp32():
    """Training in bf16 on a CPU, attention takes the written-out path (torch's fused kernel is slow there)."""
    attn, x, memory, mask = cross_attention_case()
    reference, _ = attn(x, memory, memory, mask)
    changed = memory.clone()
    changed[1, 4:] = 100.0  # what PAD keys hold must not matter
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = attn(x, memory, memory, mask)
        out_changed, _ = attn(x, changed, changed, mask)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference, rtol=0.05, atol=0.02)
    assert torch.equal(out_changed, out)


def test_scaled_dot_product_attention_by_hand():
    q = torch.tensor([[[[1.0, 0.0]]]])                 # [1,1,1,2]
    k = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]]])     # [1,1,2,2]
    v = torch.tensor([[[[10.0, 0.0], [0.0, 10.0]]]])
    out, weights = scaled_dot_product_attention(q, k, v, torch.ones(1, 1, 1, 2, dtype=torch.bool))
    p = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    torch.testing.assert_close(weights[0, 0, 0], torch.tensor([p, 1 - p]))
    torch.testing.assert_close(out[0, 0, 0], torch.tensor([10 * p, 10 * (1 - p)]))


def test_shapes_through_the_model():
    model = tiny_model(vocab=50)
    src, tgt_input = padded_batch()
    memory = model.encode(src, make_pad_mask(src, PAD))
    assert memory.shape == (2, 6, 16)       # [B, S, D]
    assert model(src, tgt_input).shape == (2, 5, 50)  # [B, T, V]


def test_sinusoidal_positions_follow_the_formula():
    pe = PositionalEncoding(d_model=8, dropout=0.0, max_positions=10).table
    pos, i = 3, 2
    assert pe[pos, 2 * i].item() == pytest.approx(math.sin(pos / 10000 ** (2 * i / 8)), abs=1e-6)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos / 10000 ** (2 * i / 8)), abs=1e-6)


def test_learned_positions_are_trained_and_sinusoids_are_not():
    learned, fixed = tiny_model(positions="learned"), tiny_model()
    assert not any(name.startswith("positions") for name, _ in fixed.named_parameters())
    table = dict(learned.named_parameters())["positions.embedding.weight"]
    assert table.shape == (64, 16)
    src, tgt = torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 8, 9]])
    learned(src, tgt).sum().backward()
    assert table.grad[:4].abs().sum() > 0 and table.grad[4:].abs().sum() == 0  # only the positions used


def test_embeddings_are_scaled_by_sqrt_d_model():
    embed = TokenEmbedding(vocab_size=10, d_model=16)
    ids = torch.tensor([[3, 4]])
    torch.testing.assert_close(embed(ids), embed.embedding(ids) * 4.0)


def test_joint_vocabulary_ties_embeddings_and_generator():
    model = tiny_model(vocab=50)
    shared = model.src_embed.embedding.weight
    assert model.tgt_embed.embedding.weight is shared and model.generator.proj.weight is shared
    separate = tiny_model(vocab=50, tgt_vocab=40)
    assert separate.generator.proj.weight.shape == (40, 16)
    assert separate.tgt_embed.embedding.weight is not separate.src_embed.embedding.weight
    untied = tiny_model(vocab=50, tie_embeddings=False)
    assert untied.generator.proj.weight is not untied.src_embed.embedding.weight


def test_pre_ln_adds_a_final_norm_and_post_ln_does_not():
    assert isinstance(tiny_model(norm="pre").encoder.final_norm, torch.nn.LayerNorm)
    assert isinstance(tiny_model(norm="post").decoder.final_norm, torch.nn.Identity)


@pytest.mark.parametrize("std", [0.0, 0.02])
def test_initial_weights_follow_model_init_std(std):
    model = tiny_model(vocab=500, init_std=std, d_model=64)
    w_1 = model.encoder.layers[0].feed_forward.w_1.weight  # [d_ff, d_model]
    expected = std or math.sqrt(2 / sum(w_1.shape))  # Glorot: variance 2 / (fan_in + fan_out)
    assert w_1.std().item() == pytest.approx(expected, rel=0.1)
    assert model.src_embed.embedding.weight.std().item() == pytest.approx(std or 64 ** -0.5, rel=0.1)
