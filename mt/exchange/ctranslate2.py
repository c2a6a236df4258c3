"""CTranslate2: a checkpoint exported into CTranslate2's TransformerSpec (mt/decode/ctranslate2.py translates with it).

The export holds CTranslate2's model.bin and vocabularies, our SentencePiece model(s), CTranslate2's vocabulary map
vmap.txt when made from a shortlist, and mt.json (the model's config: languages, decode settings, position table;
its training facts: step, dev scores; the checkpoint it came from), so that a directory alone is enough to
translate.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import torch

from mt.core.atomic import atomic_directory
from mt.core.errors import MtError
from mt.data.tokenizer import Tokenizer
from mt.exchange.checkpoint import estimator_path, load_model, training_facts
from mt.exchange.export import export_kind, optional_package, pieces, sublayers, write_meta
from mt.model.transformer import MultiHeadAttention, Transformer

EXPORT = export_kind("ctranslate2", "a CTranslate2 export of mt")


def export_ctranslate2(checkpoint: Path, output_dir: Path, quantization: str | None = None,
                       vocabulary_map: Callable[[Tokenizer], str] | None = None) -> None:
    """Write the CTranslate2 model of `checkpoint` into `output_dir`: a new directory, or a previous export there,
    replaced as a whole when the new one is complete. `vocabulary_map` gives the text of CTranslate2's vmap.txt for
    the checkpoint's tokenizer (mt/decode/ctranslate2.py, from a shortlist), which `use_vmap` reads."""
    optional_package("ctranslate2", "ctranslate2")
    model, tokenizer, config, record = load_model(checkpoint, torch.device("cpu"))
    vmap = vocabulary_map(tokenizer) if vocabulary_map else None  # a bad shortlist is reported before any writing
    spec = model_spec(model, pieces(tokenizer.src), pieces(tokenizer.tgt))
    spec.validate()
    try:
        spec.optimize(quantization=quantization)
    except ValueError as e:
        raise MtError(f"--quantization {quantization}: {e}")
    with atomic_directory(output_dir, EXPORT) as staging:
        spec.save(str(staging))
        tokenizer.self_converting().save(staging)  # its model files convert Chinese script themselves
        if vmap is not None:
            (staging / "vmap.txt").write_text(vmap, encoding="utf-8")
        if (estimator := estimator_path(checkpoint)).is_file():  # the checkpoint's confidence estimator goes with it
            shutil.copyfile(estimator, estimator_path(staging))
        write_meta(staging, "ctranslate2", checkpoint, config, training_facts(record), tokenizer.vocab_hash)


# Our sublayers under CTranslate2's names: each holds its box's projections and its LayerNorm
CT2_SUBLAYERS = {"self_attention": "self_attention", "cross_attention": "attention", "feed_forward": "ffn"}


def model_spec(model: Transformer, src_vocabulary: list[str], tgt_vocabulary: list[str]):
    """Our modules → CTranslate2's spec, box for box (the OpenNMT-py converter's layout). The vocabularies
    list each id's token string."""
    from ctranslate2.converters import utils
    from ctranslate2.specs import common_spec, transformer_spec

    config = model.config
    spec = transformer_spec.TransformerSpec.from_config(
        (config.num_encoder_layers, config.num_decoder_layers), config.num_heads,
        pre_norm=config.norm == "pre", alignment_heads=config.num_heads,
        activation=common_spec.Activation.SWISH if config.activation == "swish" else common_spec.Activation.RELU)
    spec.config.layer_norm_epsilon = model.encoder.layers[0].add_norm_attn.norm.eps
    table = model.positions.table.detach().numpy()  # our sinusoid layout, not CTranslate2's own

    def linear(target, source: torch.nn.Linear) -> None:
        target.weight = source.weight.detach().numpy()
        if source.bias is not None:
            target.bias = source.bias.detach().numpy()

    def norm(target, source: torch.nn.LayerNorm) -> None:
        target.gamma, target.beta = source.weight.detach().numpy(), source.bias.detach().numpy()

    def attention(target, source: MultiHeadAttention, self_attention: bool) -> None:
        parts = [common_spec.LinearSpec() for _ in range(3)]
        for part, layer in zip(parts, (source.w_q, source.w_k, source.w_v)):
            linear(part, layer)
        if self_attention:  # one fused Q|K|V projection
            utils.fuse_linear(target.linear[0], parts)
        else:  # Q from the decoder; a fused K|V projection of the memory
            linear(target.linear[0], source.w_q)
            utils.fuse_linear(target.linear[1], parts[1:])
        linear(target.linear[-1], source.w_o)

    encoder, decoder = spec.encoder, spec.decoder
    encoder.embeddings[0].weight = model.src_embed.embedding.weight.detach().numpy()
    encoder.position_encodings.encodings = table
    decoder.embeddings.weight = model.tgt_embed.embedding.weight.detach().numpy()
    decoder.position_encodings.encodings = table
    for sublayer in sublayers(model):
        target = getattr(getattr(spec, sublayer.stack).layer[sublayer.layer], CT2_SUBLAYERS[sublayer.kind])
        if sublayer.kind == "feed_forward":
            linear(target.linear_0, sublayer.box.w_1)
            linear(target.linear_1, sublayer.box.w_2)
        else:
            attention(target, sublayer.box, self_attention=sublayer.kind == "self_attention")
        norm(target.layer_norm, sublayer.norm)
    if config.norm == "pre":
        norm(encoder.layer_norm, model.encoder.final_norm)
        norm(decoder.layer_norm, model.decoder.final_norm)
    linear(decoder.projection, model.generator.proj)
    spec.register_source_vocabulary(src_vocabulary)
    spec.register_target_vocabulary(tgt_vocabulary)
    return spec

