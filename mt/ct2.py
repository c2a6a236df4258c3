"""CTranslate2: export a checkpoint into CTranslate2's TransformerSpec, and translate with the exported model.

The export holds CTranslate2's model.bin and vocabularies, our SentencePiece model(s), and mt.json (the model's
config: languages, decode settings, position table; and its training facts: step, dev scores), so that a
directory alone is enough to translate.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from mt.atomic import Kind, atomic_directory
from mt.batching import source_batches
from mt.checkpoint import EXPORT_META_FILE, export_format, load_model, training_facts
from mt.config import Config, DecodeConfig, ModelConfig, config_from_dict, config_to_dict
from mt.device import has_int8_products
from mt.errors import MtError
from mt.model import MultiHeadAttention, Transformer
from mt.search import Hypothesis, output_limit
from mt.tokenizer import BOS, PAD, Tokenizer


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise MtError("the ctranslate2 package is not installed: pip install ctranslate2", exit_code=1)
    return ctranslate2


def export_ctranslate2(checkpoint: Path, output_dir: Path, quantization: str | None = None) -> None:
    """Write the CTranslate2 model of `checkpoint` into `output_dir`: a new directory, or an earlier export there,
    replaced as a whole when the new one is complete."""
    _ctranslate2()
    model, tokenizer, config, state = load_model(checkpoint, torch.device("cpu"))
    spec = model_spec(model, _pieces(tokenizer.src), _pieces(tokenizer.tgt))
    spec.validate()
    try:
        spec.optimize(quantization=quantization)
    except ValueError as e:
        raise MtError(f"--quantization {quantization}: {e}")
    with atomic_directory(output_dir, EXPORT) as staging:
        spec.save(str(staging))
        tokenizer.save(staging)
        meta = {"format": "ctranslate2", "config": config_to_dict(config), "scripts": tokenizer.scripts,
                "facts": training_facts(state)}
        (staging / EXPORT_META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")


def is_export(directory: Path) -> bool:
    return export_format(directory) == "ctranslate2"


EXPORT = Kind("a CTranslate2 export of mt", is_export, directory=True)


def model_spec(model: Transformer, src_vocabulary: list[str], tgt_vocabulary: list[str]):
    """Our modules → CTranslate2's spec, box for box (the OpenNMT-py converter's layout). The vocabularies
    list each id's token string."""
    from ctranslate2.converters import utils
    from ctranslate2.specs import common_spec, transformer_spec

    config = model.config
    spec = transformer_spec.TransformerSpec.from_config(
        (config.num_encoder_layers, config.num_decoder_layers), config.num_heads,
        pre_norm=config.norm == "pre")
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

    def feed_forward(target, layer) -> None:
        linear(target.linear_0, layer.feed_forward.w_1)
        linear(target.linear_1, layer.feed_forward.w_2)
        norm(target.layer_norm, layer.add_norm_ff.norm)

    encoder, decoder = spec.encoder, spec.decoder
    encoder.embeddings[0].weight = model.src_embed.embedding.weight.detach().numpy()
    encoder.position_encodings.encodings = table
    for target, layer in zip(encoder.layer, model.encoder.layers):
        attention(target.self_attention, layer.self_attn, self_attention=True)
        norm(target.self_attention.layer_norm, layer.add_norm_attn.norm)
        feed_forward(target.ffn, layer)
    decoder.embeddings.weight = model.tgt_embed.embedding.weight.detach().numpy()
    decoder.position_encodings.encodings = table
    for target, layer in zip(decoder.layer, model.decoder.layers):
        attention(target.self_attention, layer.self_attn, self_attention=True)
        norm(target.self_attention.layer_norm, layer.add_norm_self.norm)
        attention(target.attention, layer.cross_attn, self_attention=False)
        norm(target.attention.layer_norm, layer.add_norm_cross.norm)
        feed_forward(target.ffn, layer)
    if config.norm == "pre":
        norm(encoder.layer_norm, model.encoder.final_norm)
        norm(decoder.layer_norm, model.decoder.final_norm)
    linear(decoder.projection, model.generator.proj)
    spec.register_source_vocabulary(src_vocabulary)
    spec.register_target_vocabulary(tgt_vocabulary)
    return spec


def _pieces(processor) -> list[str]:
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def compute_type(requested: str, device: torch.device) -> str:
    """CTranslate2's compute type for --compute-type: auto is int8 (weights quantised as the model loads) on a CPU
    with 8-bit products in hardware, where it decoded 1.3–1.7× float32's speed within 0.2 BLEU (README: Decoding
    speed); elsewhere the export's own type ("default")."""
    if requested != "auto":
        return requested
    return "int8" if has_int8_products(device) else "default"


class CTranslate2Engine:
    """An exported model, translating sources (ids) as mt's own Searcher does: in mt's length-sorted batches, each
    sentence with its own output limit, PAD and BOS never output. Beam search differs in its length penalty:
    CTranslate2 divides by length ** alpha (mt: GNMT's), and so do the scores it returns. It runs torch's number of
    threads (one per core, or OMP_NUM_THREADS), as mt's own search does, rather than CTranslate2's default of 4."""

    def __init__(self, model_dir: Path, device: torch.device, requested_type: str = "auto"):
        ctranslate2 = _ctranslate2()
        model_dir = Path(model_dir)
        if not is_export(model_dir):
            raise MtError(f"{model_dir}: not a CTranslate2 export of mt (make one with `mt export --ctranslate2`)")
        meta = json.loads((model_dir / EXPORT_META_FILE).read_text(encoding="utf-8"))
        if "config" in meta:
            self.config = config_from_dict(meta["config"], source=str(model_dir / EXPORT_META_FILE))
        else:  # exports of earlier versions kept only these
            self.config = Config(model=ModelConfig(max_positions=meta["max_positions"]),
                                 decode=DecodeConfig(**meta["decode"]))
        self.facts = meta.get("facts", {})
        self.tokenizer = Tokenizer.load(model_dir, tuple(meta.get("scripts", ("keep", "keep"))))  # older exports: none
        try:
            self.translator = ctranslate2.Translator(str(model_dir), device=device.type,
                                                     compute_type=compute_type(requested_type, device),
                                                     intra_threads=torch.get_num_threads())
        except ValueError as e:  # a compute type this device or build lacks
            raise MtError(f"--compute-type {requested_type}: {e}")

    def search(self, src_ids: list[list[int]], decode: DecodeConfig) -> list[list[Hypothesis]]:
        """The decode.nbest best outputs of each source, best first, in input order."""
        src, tgt = self.tokenizer.src, self.tokenizer.tgt
        found: list[list[Hypothesis]] = [[] for _ in src_ids]
        for batch in source_batches(src_ids, decode.max_tokens):  # one looping output delays only its batch
            limits = [output_limit(decode, len(src_ids[i]), self.config.model.max_positions) for i in batch]
            results = self.translator.translate_batch(
                [[src.id_to_piece(t) for t in src_ids[i]] for i in batch],
                beam_size=decode.beam_size, num_hypotheses=decode.nbest, length_penalty=decode.alpha,
                max_decoding_length=max(limits), min_decoding_length=decode.min_len,
                no_repeat_ngram_size=decode.no_repeat_ngram_size,
                max_input_length=self.config.model.max_positions, return_scores=True,
                suppress_sequences=[[tgt.id_to_piece(PAD)], [tgt.id_to_piece(BOS)]])
            for i, limit, result in zip(batch, limits, results):  # CTranslate2 leaves EOS out
                found[i] = [Hypothesis([tgt.piece_to_id(p) for p in pieces][:limit], score)
                            for pieces, score in zip(result.hypotheses, result.scores)]
        return found
