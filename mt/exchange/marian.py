"""Marian's names and layout for our weights, both ways: the Hugging Face export writes them, the import reads them.

Marian is the paper's post-LN Transformer with √d-scaled embeddings and sinusoidal positions, as mt's default
model is, so the two map box to box. One difference: Marian lays its position table out as
[sin(every frequency) | cos(every frequency)], where ours interleaves sin and cos. A Transformer computes the same
function under any fixed permutation of its residual stream's coordinates (LayerNorm and the residual sums act on
each coordinate alike), so every weight that reads from or writes to that stream is permuted along that axis.

The vocabulary may be ordered differently too: an imported model's id i is Marian's id `vocabulary[i]` (see
mt/exchange/import_huggingface.py), so the embeddings' and the generator's rows are taken in that order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from mt.core.errors import MtError
from mt.data.tokenizer import BOS, EOS
from mt.exchange.export import sublayers
from mt.model.transformer import Transformer

# Our sublayers under Marian's names; the LayerNorm after each is NAME_layer_norm
MARIAN_SUBLAYERS = {"self_attention": "self_attn", "cross_attention": "encoder_attn", "feed_forward": "final"}


def residual_order(d_model: int) -> Tensor:
    """Marian's coordinate k of the residual stream is our coordinate order[k]: its [sin | cos] table is ours
    with the even (sin) coordinates first, then the odd (cos) ones."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


@dataclass
class MarianWeight:
    """One of our tensors under Marian's name: which of its axes runs along the residual stream (permuted), and
    which runs over a vocabulary ("src" or "tgt", reordered on import)."""

    name: str
    ours: Tensor
    stream_axis: int | None = None
    vocabulary: str | None = None


def marian_layout(model: Transformer) -> list[MarianWeight]:
    """Every weight of `model` as Marian names it. Tied matrices appear once, as Marian ties them; a model
    without a generator bias has none (Marian's final_logits_bias is then zeros)."""
    layout: list[MarianWeight] = []

    def reads(name: str, linear: nn.Linear) -> None:  # a projection of the residual stream: its input columns
        layout.append(MarianWeight(f"{name}.weight", linear.weight, 1))
        if linear.bias is not None:
            layout.append(MarianWeight(f"{name}.bias", linear.bias))

    def writes(name: str, linear: nn.Linear) -> None:  # a projection into the residual stream: its output rows
        layout.append(MarianWeight(f"{name}.weight", linear.weight, 0))
        layout.append(MarianWeight(f"{name}.bias", linear.bias, 0))

    src, tgt = model.src_embed.embedding.weight, model.tgt_embed.embedding.weight
    if tgt is src:
        layout.append(MarianWeight("model.shared.weight", src, 1, "src"))
    else:
        layout.append(MarianWeight("model.encoder.embed_tokens.weight", src, 1, "src"))
        layout.append(MarianWeight("model.decoder.embed_tokens.weight", tgt, 1, "tgt"))
    generator = model.generator.proj
    if generator.weight is not tgt:
        layout.append(MarianWeight("lm_head.weight", generator.weight, 1, "tgt"))
    if generator.bias is not None:
        layout.append(MarianWeight("final_logits_bias", generator.bias, vocabulary="tgt"))
    for sublayer in sublayers(model):
        layer, theirs = f"model.{sublayer.stack}.layers.{sublayer.layer}", MARIAN_SUBLAYERS[sublayer.kind]
        if sublayer.kind == "feed_forward":  # fc1 and fc2 sit in the layer itself
            reads(f"{layer}.fc1", sublayer.box.w_1)
            writes(f"{layer}.fc2", sublayer.box.w_2)
        else:
            box = sublayer.box
            for ours, name in ((box.w_q, "q_proj"), (box.w_k, "k_proj"), (box.w_v, "v_proj")):
                reads(f"{layer}.{theirs}.{name}", ours)
            writes(f"{layer}.{theirs}.out_proj", box.w_o)
        layout.append(MarianWeight(f"{layer}.{theirs}_layer_norm.weight", sublayer.norm.weight, 0))
        layout.append(MarianWeight(f"{layer}.{theirs}_layer_norm.bias", sublayer.norm.bias, 0))
    return layout


def marian_weights(model: Transformer) -> dict[str, Tensor]:
    """Our weights under Marian's names, the residual stream's coordinates in Marian's order."""
    order = residual_order(model.config.d_model)
    weights = {w.name: w.ours.index_select(w.stream_axis, order) if w.stream_axis is not None else w.ours
               for w in marian_layout(model)}
    weights.setdefault("final_logits_bias", torch.zeros(model.generator.proj.out_features))
    weights["final_logits_bias"] = weights["final_logits_bias"][None]  # Marian's is [1, V]
    return {name: tensor.detach().clone() for name, tensor in weights.items()}


@torch.no_grad()
def load_marian_weights(model: Transformer, theirs: dict[str, Tensor], vocabularies: dict[str, Tensor]) -> None:
    """Set `model`'s weights from a MarianMTModel's state dict `theirs`: the residual stream back in our order,
    and the rows of each vocabulary in ours (`vocabularies["src"][i]` is Marian's id of our source id i)."""
    inverse = residual_order(model.config.d_model).argsort()
    for weight in marian_layout(model):
        tensor = theirs[weight.name].float()
        if weight.name == "final_logits_bias":
            tensor = tensor[0]
        if weight.vocabulary:
            tensor = tensor.index_select(0, vocabularies[weight.vocabulary])
        if weight.stream_axis is not None:
            tensor = tensor.index_select(weight.stream_axis, inverse)
        weight.ours.copy_(tensor)


@torch.no_grad()
def check_logits(model: Transformer, marian, vocabularies: dict[str, Tensor] | None = None, what: str = "exported",
                 tolerance: float = 1e-4) -> None:
    """The Marian model must give our logits on random ids, each side's ids mapped to Marian's through
    `vocabularies` (none: the same ids). A failure here is a fault of mt's, not the user's."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, model.src_embed.embedding.num_embeddings, (2, 9), generator=generator)
    tgt = torch.randint(4, model.tgt_embed.embedding.num_embeddings, (2, 7), generator=generator)
    src[:, -1], tgt[:, 0] = EOS, BOS
    ours = model.eval()(src, tgt)                                                  # [B, T, V]
    if vocabularies is not None:
        src, tgt = vocabularies["src"][src], vocabularies["tgt"][tgt]
    theirs = marian(input_ids=src, decoder_input_ids=tgt).logits                  # [B, T, V'] in Marian's ids
    if vocabularies is not None:
        theirs = theirs.index_select(-1, vocabularies["tgt"])
    if not torch.allclose(ours, theirs, atol=tolerance, rtol=0):
        raise MtError(f"the {what} model's logits differ from mt's by up to {(ours - theirs).abs().max():.2g}; "
                      "nothing was written", exit_code=1)
