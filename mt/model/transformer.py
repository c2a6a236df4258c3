"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), one class per box of its Figure 1.

    src ids [B,S] → TokenEmbedding ×√d + PositionalEncoding → Encoder (N × EncoderLayer) → memory [B,S,D]
    tgt ids [B,T] → TokenEmbedding ×√d + PositionalEncoding → Decoder (N × DecoderLayer, attending to memory)
                  → Generator → logits [B,T,V]

Masks are boolean and True where attention is allowed: `src_mask` [B,1,1,S] hides PAD keys, `tgt_mask`
[B,1,T,T] also hides future positions. They broadcast over heads and query positions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mt.model.config import ModelConfig
from mt.model.dropout import Dropout


def make_pad_mask(tokens: Tensor, pad_idx: int) -> Tensor:
    """[B, L] ids → [B, 1, 1, L]: True for real tokens, False for PAD keys."""
    return (tokens != pad_idx)[:, None, None, :]


def make_causal_mask(length: int, device: torch.device | None = None) -> Tensor:
    """[1, 1, L, L]: position i may attend to positions ≤ i only."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]


def make_tgt_mask(tgt_input: Tensor, pad_idx: int) -> Tensor:
    """[B, T] ids → [B, 1, T, T]: padding mask and causal mask together."""
    return make_pad_mask(tgt_input, pad_idx) & make_causal_mask(tgt_input.size(1), tgt_input.device)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """softmax(QKᵀ/√d_k) V, written out. q [B,H,T,d_k], k and v [B,H,S,d_k], mask [B,1,T|1,S] or None (all).

    Returns the output [B,H,T,d_k] and the attention weights [B,H,T,S].
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B,H,T,S]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def fused_kernel_is_slow(q: Tensor) -> bool:
    """torch's fused attention kernel for the CPU is slow to train in bf16 (its backward is many times its fp32
    one), while the written-out form runs bf16 matrix products at full speed. Its forward alone is fast, so
    decoding keeps it."""
    return q.device.type == "cpu" and q.dtype == torch.bfloat16 and q.requires_grad


class MultiHeadAttention(nn.Module):
    """Project Q, K, V into h heads of d_k = d_model/h, attend in each, concatenate, project back."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """query [B,T,D], key/value [B,S,D], mask [B,1,T|1,S] → output [B,T,D], weights [B,H,T,S] or None."""
        return self.attend(query, *self.keys_values(key, value), mask, need_weights)

    def keys_values(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Project and split K and V: [B,S,D] → [B,H,S,d_k] each. Decoding computes the memory's once."""
        return self._split(self.w_k(key)), self._split(self.w_v(value))

    def attend(self, query: Tensor, k: Tensor, v: Tensor, mask: Tensor | None,
               need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """query [B,T,D] against projected k, v [B,H,S,d_k] → output [B,T,D], weights [B,H,T,S] or None."""
        q = self._split(self.w_q(query))
        if need_weights or fused_kernel_is_slow(q):
            out, weights = scaled_dot_product_attention(q, k, v, mask)
            weights = weights if need_weights else None
        else:  # the same computation in torch's fused kernel
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None
        batch, _, length, _ = out.shape
        return self.w_o(out.transpose(1, 2).reshape(batch, length, -1)), weights

    def _split(self, x: Tensor) -> Tensor:
        """[B, L, D] → [B, H, L, d_k]"""
        return x.view(x.size(0), x.size(1), self.num_heads, self.d_k).transpose(1, 2)


# The feed-forward network's activation: the paper's max(0, x), or swish x·sigmoid(x), which Marian's models use.
# max(0, x) is taken in place: nothing else reads W1's output [B,L,d_ff] and its gradient needs only the result, so a
# training step neither allocates nor writes a second tensor of that size.
ACTIVATIONS = {"relu": torch.relu_, "swish": F.silu}


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to each position alike: [B,L,D] → [B,L,D]. With
    model.activation swish, x·sigmoid(x) takes the place of max(0, x)."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu"):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        # [B·L, D]: on 2-D input W1's output is a tensor of its own, not a view that an in-place max(0, x) would
        # make autograd copy back into its base
        hidden = self.activation(self.w_1(x.flatten(0, -2)))  # [B·L, d_ff]
        return self.w_2(hidden).view_as(x)


class AddNorm(nn.Module):
    """The residual connection around a sub-layer, with dropout on the sub-layer's output.

    post-LN (the paper): LayerNorm(x + Dropout(Sublayer(x))). pre-LN: x + Dropout(Sublayer(LayerNorm(x))),
    which trains more stably in deep stacks and needs a final LayerNorm after the stack.
    """

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, sublayer) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention, Add&Norm, feed-forward, Add&Norm."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        pre = config.norm == "pre"
        self.self_attn = MultiHeadAttention(config.d_model, config.num_heads)
        self.feed_forward = PositionwiseFeedForward(config.d_model, config.d_ff, config.activation)
        self.add_norm_attn = AddNorm(config.d_model, config.dropout, pre)
        self.add_norm_ff = AddNorm(config.d_model, config.dropout, pre)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        """x [B,S,D], src_mask [B,1,1,S] → [B,S,D]"""
        x = self.add_norm_attn(x, lambda y: self.self_attn(y, y, y, src_mask)[0])
        return self.add_norm_ff(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, Add&Norm, cross-attention over the memory, Add&Norm, feed-forward, Add&Norm."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        pre = config.norm == "pre"
        self.self_attn = MultiHeadAttention(config.d_model, config.num_heads)
        self.cross_attn = MultiHeadAttention(config.d_model, config.num_heads)
        self.feed_forward = PositionwiseFeedForward(config.d_model, config.d_ff, config.activation)
        self.add_norm_self = AddNorm(config.d_model, config.dropout, pre)
        self.add_norm_cross = AddNorm(config.d_model, config.dropout, pre)
        self.add_norm_ff = AddNorm(config.d_model, config.dropout, pre)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """x [B,T,D], memory [B,S,D] → [B,T,D], and the cross-attention weights [B,H,T,S] if asked."""
        weights = None

        def cross_attention(y: Tensor) -> Tensor:  # Q from the decoder, K and V from the encoder's memory
            nonlocal weights
            out, weights = self.cross_attn(y, memory, memory, src_mask, need_weights)
            return out

        x = self.add_norm_self(x, lambda y: self.self_attn(y, y, y, tgt_mask)[0])
        x = self.add_norm_cross(x, cross_attention)
        return self.add_norm_ff(x, self.feed_forward), weights


class TokenEmbedding(nn.Module):
    """ids [B,L] → vectors [B,L,D], scaled by √d_model as in the paper (section 3.4)."""

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = math.sqrt(d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.embedding(tokens) * self.scale


class PositionalEncoding(nn.Module):
    """Adds PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(…), then dropout: [B,L,D] → [B,L,D]."""

    def __init__(self, d_model: int, dropout: float, max_positions: int):
        super().__init__()
        position = torch.arange(max_positions).unsqueeze(1)  # [P, 1]
        inv_freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))  # [D/2]
        table = torch.zeros(max_positions, d_model)
        table[:, 0::2] = torch.sin(position * inv_freq)
        table[:, 1::2] = torch.cos(position * inv_freq)
        self.register_buffer("table", table, persistent=False)  # [P, D], rebuilt, never trained
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        return self.dropout(x + self.table[offset:offset + x.size(1)])


class LearnedPositionalEmbedding(nn.Module):
    """The paper's alternative (Table 3, row E): a trained vector per position, added, then dropout."""

    def __init__(self, d_model: int, dropout: float, max_positions: int):
        super().__init__()
        self.embedding = nn.Embedding(max_positions, d_model)
        self.dropout = Dropout(dropout)

    @property
    def table(self) -> Tensor:
        """[P, D], as PositionalEncoding's (the CTranslate2 export reads it)."""
        return self.embedding.weight

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        return self.dropout(x + self.table[offset:offset + x.size(1)])


class Encoder(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.num_encoder_layers))
        self.final_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.final_norm(x)


class Decoder(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_decoder_layers))
        self.final_norm = nn.LayerNorm(config.d_model) if config.norm == "pre" else nn.Identity()

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor,
                need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        """→ hidden states [B,T,D], and per layer the cross-attention weights [B,H,T,S] if asked."""
        attention = []
        for layer in self.layers:
            x, weights = layer(x, memory, src_mask, tgt_mask, need_weights)
            if need_weights:
                attention.append(weights)
        return self.final_norm(x), attention


class Generator(nn.Module):
    """The final linear layer: hidden states [B,T,D] → logits [B,T,V]. The loss applies the softmax. The paper's
    has no bias; model.output_bias adds one (Marian's models have it)."""

    def __init__(self, d_model: int, vocab_size: int, bias: bool = False):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x)


class Transformer(nn.Module):
    """The encoder-decoder. `encode` and `decode` are separate so that search can encode once."""

    def __init__(self, config: ModelConfig, src_vocab_size: int, tgt_vocab_size: int, pad_idx: int):
        super().__init__()
        self.config = config
        self.pad_idx = pad_idx
        self.src_embed = TokenEmbedding(src_vocab_size, config.d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, config.d_model)
        positions = LearnedPositionalEmbedding if config.positions == "learned" else PositionalEncoding
        self.positions = positions(config.d_model, config.dropout, config.max_positions)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.generator = Generator(config.d_model, tgt_vocab_size, config.output_bias)
        self._init_weights()
        if config.tie_embeddings and src_vocab_size == tgt_vocab_size:
            # Section 3.4: one matrix for both embeddings and the pre-softmax projection (joint vocabulary).
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.generator.proj.weight = self.src_embed.embedding.weight

    def _init_weights(self) -> None:
        """Glorot-uniform projections and zero biases, as in the reference tensor2tensor code; embeddings
        N(0, d^-1/2) so that after the ×√d scaling they have unit variance like the positional signal.
        With model.init_std, every weight is N(0, init_std²) instead (BERT, Marian): small sub-layer outputs
        keep a post-LN stack close to the identity at first, which speeds up early training."""
        std = self.config.init_std
        for module in self.modules():
            if isinstance(module, nn.Linear):
                if std:
                    nn.init.normal_(module.weight, 0.0, std)
                else:
                    nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, std or self.config.d_model ** -0.5)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src [B,S], src_mask [B,1,1,S] → memory [B,S,D]"""
        return self.encoder(self.positions(self.src_embed(src)), src_mask)

    def decode(self, tgt_input: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor,
               need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        """tgt_input [B,T], memory [B,S,D] → hidden [B,T,D] (and cross-attention weights if asked)."""
        return self.decoder(self.positions(self.tgt_embed(tgt_input)), memory, src_mask, tgt_mask, need_weights)

    @torch.no_grad()
    def cross_attention(self, src: Tensor, tgt_input: Tensor) -> Tensor:
        """What each target position attended to, given a translation (teacher forced):
        src [B,S], tgt_input [B,T] → weights [B, layers, heads, T, S]; PAD columns get 0."""
        src_mask = make_pad_mask(src, self.pad_idx)
        memory = self.encode(src, src_mask)
        _, weights = self.decode(tgt_input, memory, src_mask, make_tgt_mask(tgt_input, self.pad_idx), need_weights=True)
        return torch.stack(weights, dim=1)

    def forward(self, src: Tensor, tgt_input: Tensor) -> Tensor:
        """Teacher forcing: src [B,S], tgt_input [B,T] → logits [B,T,V]."""
        src_mask = make_pad_mask(src, self.pad_idx)
        memory = self.encode(src, src_mask)
        hidden, _ = self.decode(tgt_input, memory, src_mask, make_tgt_mask(tgt_input, self.pad_idx))
        return self.generator(hidden)
