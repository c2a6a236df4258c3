"""`mt import --huggingface`: a transformers MarianMTModel (a directory, as OPUS-MT's models are, or a hub name
where the hub is reachable) becomes an mt checkpoint that every command takes.

A Marian model's ids are those of its vocab.json (one vocabulary for both sides, as OPUS-MT's, or one per side),
not of either SentencePiece model; its pad is the decoder's start token, and EOS is often id 0. mt's ids are fixed
(PAD 0, UNK 1, BOS 2, EOS 3) and its tokenizer gives SentencePiece's own ids. So the import orders the vocabulary
mt's way: the four special tokens first (mt's BOS is Marian's start token), then Marian's other pieces in Marian's
order. Each side's SentencePiece model is written anew with exactly those pieces in that order; a piece of the
other side's model (or of none) becomes UNUSED, which SentencePiece's unigram segmentation never produces, so each
side segments its text as before. The embeddings' and the generator's rows are taken in the same order
(mt/exchange/marian.py). A model whose ids already are mt's (mt's own export) is taken as it is.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from mt.config import Config, DecodeConfig, config_from_dict, config_to_dict, save_config
from mt.core.errors import MtError, first_line
from mt.core.run_dir import RunDir
from mt.data.config import DataConfig, TokenizerConfig
from mt.data.script_conversion import sentencepiece_model
from mt.data.tokenizer import PAD, Tokenizer
from mt.exchange.checkpoint import (FORMAT_VERSION, Checkpoint, save_checkpoint, save_run_checkpoint,
                                   tokenizer_state)
from mt.exchange.export import EXPORT_META_FILE, check_export_files, export_meta, optional_package
from mt.exchange.marian import check_logits, load_marian_weights
from mt.model.config import ModelConfig
from mt.model.transformer import ACTIVATIONS, Transformer


def import_huggingface(source: str, output: Path, src_lang: str = "", tgt_lang: str = "") -> Path:
    """Write the Marian model `source` as an mt checkpoint: `output` ending in .pt is the checkpoint file; any
    other `output` is a run directory (checkpoints/best.pt, the tokenizer, config.yaml for fine-tuning it).
    Returns the checkpoint's path."""
    transformers = optional_package("transformers", "huggingface")
    output = Path(output)
    _refuse_existing(output)
    marian, hf_tokenizer = _load(source, transformers)
    refuse_what_mt_cannot_express(marian, hf_tokenizer, source)
    sides, src_proto, tgt_proto = _vocabularies(marian.config, hf_tokenizer)
    meta = _mt_export_meta(source)
    joint = tgt_proto == src_proto
    config = _config(marian, len(sides["src"][1]), joint, meta, src_lang or hf_tokenizer.source_lang or "",
                     tgt_lang or hf_tokenizer.target_lang or "", source)
    tokenizer = Tokenizer(src_proto, None if joint else tgt_proto, config.data.scripts())
    model = Transformer(config.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, PAD)
    vocabularies = {side: ids for side, (ids, _) in sides.items()}
    load_marian_weights(model, marian.state_dict(), vocabularies)
    check_logits(model, marian, vocabularies, what="imported")
    facts = meta.get("facts", {}) if meta else {}  # mt's export keeps its checkpoint's (checkpoint.training_facts)
    checkpoint = Checkpoint.from_state(
        {"format_version": FORMAT_VERSION, "model": model.state_dict(), "config": config_to_dict(config),
         "tokenizer": tokenizer_state(tokenizer), "position": {"step": facts.get("step", 0)},
         "imported": {"from": str(source), "format": "huggingface"},
         **{key: facts[key] for key in ("dev", "averaged", "cleaning") if facts.get(key)}}, Path(source))
    return _write(checkpoint, config, tokenizer, output)


def _vocabularies(c, hf_tokenizer) -> tuple[dict[str, tuple[Tensor, list[str]]], bytes, bytes]:
    """Each side's vocabulary in mt's order (_side) and its SentencePiece model with those pieces."""
    sides = {"src": _side(hf_tokenizer.encoder, c, "vocab.json")}
    sides["tgt"] = _side(hf_tokenizer.target_encoder, c, "target_vocab.json") if hf_tokenizer.separate_vocabs \
        else sides["src"]
    src_proto = ordered_model(hf_tokenizer.spm_source.serialized_model_proto(), sides["src"][1], "source.spm")
    tgt_proto = ordered_model(hf_tokenizer.spm_target.serialized_model_proto(), sides["tgt"][1], "target.spm")
    return sides, src_proto, tgt_proto


def _write(checkpoint: Checkpoint, config: Config, tokenizer: Tokenizer, output: Path) -> Path:
    """The checkpoint file, or a run directory with it, the tokenizer and config.yaml; its path."""
    if output.suffix == ".pt":
        save_checkpoint(checkpoint, output)
        return output
    run = RunDir(output)
    run.checkpoints.mkdir(parents=True, exist_ok=True)
    tokenizer.save(output)
    save_config(config, run.config)
    return save_run_checkpoint(checkpoint, output, best=True, keep_last=1)


def _refuse_existing(output: Path) -> None:
    """An import writes a new checkpoint or run; it never replaces one."""
    taken = output if output.suffix == ".pt" else RunDir(output).last
    if taken.exists():
        raise MtError(f"{taken}: already exists; choose another -o (an import never replaces a checkpoint)")


def _load(source: str, transformers):
    """The model and its tokenizer by transformers' own loading (a directory, or a hub name)."""
    transformers.utils.logging.disable_progress_bar()
    try:
        kind = transformers.AutoConfig.from_pretrained(source).model_type
    except (OSError, ValueError) as e:
        raise MtError(f"{source}: not a model transformers can load ({first_line(e)[:200]})")
    if kind != "marian":
        raise MtError(f"{source}: a {kind} model; mt imports Marian models (MarianMTModel, as OPUS-MT's are)")
    try:
        marian = transformers.MarianMTModel.from_pretrained(source).float().eval()
        return marian, transformers.MarianTokenizer.from_pretrained(source)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise MtError(f"{source}: transformers cannot load it ({first_line(e)[:200]})")


def refuse_what_mt_cannot_express(marian, hf_tokenizer, source: str) -> None:
    """mt's model has one shape for both stacks, √d-scaled embeddings and Marian's sinusoids; its tokenizer has no
    target-language tokens."""
    c = marian.config
    why = []
    if c.encoder_attention_heads != c.decoder_attention_heads or c.encoder_ffn_dim != c.decoder_ffn_dim:
        why.append("its encoder and decoder differ in heads or feed-forward width")
    if c.activation_function not in ACTIVATIONS:
        why.append(f"its activation is {c.activation_function} (mt has {', '.join(ACTIVATIONS)})")
    if not c.scale_embedding:
        why.append("its embeddings are not scaled by √d_model")
    if hf_tokenizer.supported_language_codes:
        why.append("it is multilingual (a >>lang<< token chooses the target language)")
    if why:
        raise MtError(f"{source}: mt cannot express this Marian model: {'; '.join(why)}")


def _side(encoder: dict[str, int], c, file: str) -> tuple[Tensor, list[str]]:
    """One side's vocabulary in mt's order: Marian's id of each of our ids, and each of our ids' piece."""
    by_id = {i: piece for piece, i in encoder.items()}
    if sorted(by_id) != list(range(len(by_id))):
        raise MtError(f"{file}: its ids are not 0 … {len(by_id) - 1}, one per piece")
    pad, eos, start = c.pad_token_id, c.eos_token_id, c.decoder_start_token_id
    unk = encoder.get("<unk>")
    if unk is None:
        raise MtError(f"{file}: no <unk> piece")
    specials = [pad, unk, start, eos]
    ids = specials + [i for i in range(len(by_id)) if i not in specials]
    pieces = [by_id[i] for i in ids]
    if start == pad:  # one piece, two of mt's ids: PAD and BOS
        pieces[2] = "<s>"
    if len(set(pieces)) != len(pieces):
        raise MtError(f"{file}: a piece appears twice once mt's <s> is added")
    return torch.tensor(ids), pieces


def ordered_model(proto: bytes, pieces: list[str], name: str) -> bytes:
    """The SentencePiece model `proto` with exactly `pieces`, in that order, as its pieces: mt's special tokens
    first, its own pieces with their scores, and any other piece UNUSED (never produced). Unchanged when its
    pieces already are those."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2  # its enums

    model = sentencepiece_model(proto)
    if [p.piece for p in model.pieces] == pieces:
        return proto
    if model.trainer_spec.model_type != model_pb2.TrainerSpec.UNIGRAM:
        raise MtError(f"{name}: its ids are not the vocabulary's, and mt can reorder a unigram SentencePiece model "
                      "only (this one is BPE or another kind)")
    own = {p.piece: p for p in model.pieces}
    kind = model_pb2.ModelProto.SentencePiece
    special = {0: kind.CONTROL, 1: kind.UNKNOWN, 2: kind.CONTROL, 3: kind.CONTROL}  # PAD, UNK, BOS, EOS
    del model.pieces[:]
    for i, piece in enumerate(pieces):
        entry = model.pieces.add(piece=piece)
        if i in special:
            entry.type, entry.score = special[i], 0.0
        elif piece in own and own[piece].type not in (kind.CONTROL, kind.UNKNOWN):
            entry.type, entry.score = own[piece].type, own[piece].score
        else:
            entry.type, entry.score = kind.UNUSED, 0.0
    spec = model.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = 0, 1, 2, 3
    spec.pad_piece, spec.unk_piece, spec.bos_piece, spec.eos_piece = pieces[:4]
    spec.vocab_size = len(pieces)
    return model.SerializeToString()


def _mt_export_meta(source: str) -> dict | None:
    """mt.json when `source` is a directory that mt's Hugging Face export wrote, as it wrote it: it keeps the
    model's whole config (corpora, decoding, script conversion) and its training facts. Once its files have
    changed (a model fine-tuned with transformers and saved there), the directory is a Marian model like any."""
    meta = export_meta(Path(source)) if Path(source).is_dir() else None
    if meta is None or meta["format"] != "huggingface":
        return None
    try:
        check_export_files(Path(source), meta)
    except MtError:
        return None
    return meta


def _config(marian, vocab_size: int, joint: bool, meta: dict | None, src_lang: str, tgt_lang: str,
            source: str) -> Config:
    """The checkpoint's config: mt's own for mt's export (mt.json); else the model's shape from Marian's config,
    the languages, and Marian's beam size, with no script conversion (Marian's models have none)."""
    if meta is not None:
        return config_from_dict(meta["config"], source=str(Path(source) / EXPORT_META_FILE))
    if not (src_lang and tgt_lang):
        raise MtError(f"{source}: its tokenizer names no languages; give them with --src-lang and --tgt-lang")
    c, model = marian.config, marian.model
    shared = model.encoder.embed_tokens.weight.data_ptr() == model.decoder.embed_tokens.weight.data_ptr()
    tied = shared and marian.lm_head.weight.data_ptr() == model.decoder.embed_tokens.weight.data_ptr()
    beam = getattr(marian.generation_config, "num_beams", None) or DecodeConfig().beam_size
    config = Config(
        model=ModelConfig(d_model=c.d_model, num_heads=c.encoder_attention_heads, d_ff=c.encoder_ffn_dim,
                          num_encoder_layers=c.encoder_layers, num_decoder_layers=c.decoder_layers, dropout=c.dropout,
                          tie_embeddings=tied, init_std=c.init_std, max_positions=c.max_position_embeddings,
                          activation=c.activation_function, output_bias=bool(marian.final_logits_bias.any())),
        tokenizer=TokenizerConfig(vocab_size=vocab_size, joint=joint),
        data=DataConfig(src_lang=src_lang, tgt_lang=tgt_lang, chinese_script="keep",
                        max_len=min(DataConfig().max_len, c.max_position_embeddings)),
        decode=DecodeConfig(beam_size=beam))
    return config_from_dict(config_to_dict(config), source=source)
