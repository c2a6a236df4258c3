"""Hugging Face Transformers: a checkpoint as a MarianMTModel directory that `transformers` loads with no code of
ours (`MarianMTModel.from_pretrained`, `MarianTokenizer.from_pretrained`; `pipeline("translation", model=DIR)`
with transformers 4).

The export maps box to box, with the residual stream's coordinates in Marian's order (mt/exchange/marian.py), so
the exported model equals ours. Pre-LN and learned positions have no Marian equivalent: refused.

The tokenizer is MarianTokenizer with our own SentencePiece model(s), so the pieces are exactly mt's.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from mt.config import Config
from mt.core.atomic import atomic_directory
from mt.core.errors import MtError
from mt.core.scoring import Scores
from mt.data.tokenizer import BOS, EOS, PAD, UNK, Tokenizer
from mt.exchange.checkpoint import cleaning_line, load_model, training_facts
from mt.exchange.export import export_kind, optional_package, pieces, write_meta
from mt.exchange.marian import check_logits, marian_weights
from mt.model.transformer import Transformer

EXPORT = export_kind("huggingface", "a Hugging Face export of mt")


def export_huggingface(checkpoint: Path, output_dir: Path, test: Scores | None = None) -> None:
    """Write `checkpoint` as a Hugging Face model directory: a new one, or a previous mt export there, replaced
    whole when the new one is complete. `test`: the checkpoint's test-set scores, for the model card."""
    transformers = optional_package("transformers", "huggingface")
    model, tokenizer, config, record = load_model(checkpoint, torch.device("cpu"))
    refuse_what_marian_cannot_express(config)
    marian = transformers.MarianMTModel(marian_config(model, transformers)).eval()
    missing, unexpected = marian.load_state_dict(marian_weights(model), strict=False)
    positions = {f"model.{side}.embed_positions.weight" for side in ("encoder", "decoder")}  # Marian builds these
    tied = {"lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}
    if unexpected or set(missing) - positions - tied:
        raise MtError(f"the Marian model does not fit mt's weights (missing {missing}, unexpected {unexpected})",
                      exit_code=1)
    marian.tie_weights()
    check_logits(model, marian)
    with atomic_directory(output_dir, EXPORT) as staging:
        marian.generation_config = generation_config(config, transformers)
        marian.save_pretrained(staging)  # config.json, generation_config.json, model.safetensors
        save_tokenizer(tokenizer.self_converting(), config, staging, transformers)
        facts = training_facts(record)
        (staging / "README.md").write_text(model_card(config, tokenizer, facts, checkpoint, test), encoding="utf-8")
        write_meta(staging, "huggingface", checkpoint, config, facts, tokenizer.vocab_hash)


def refuse_what_marian_cannot_express(config: Config) -> None:
    m = config.model
    if m.norm != "post":
        raise MtError("this model is pre-LN, and Hugging Face's Marian is post-LN only: train with model.norm: post "
                      "to export it (mt export --ctranslate2 takes pre-LN models)")
    if m.positions != "sinusoidal":
        raise MtError("this model has learned positions, and Hugging Face's Marian has sinusoidal ones only: train "
                      "with model.positions: sinusoidal to export it (mt export --ctranslate2 takes either)")


def marian_config(model: Transformer, transformers):
    """Marian's config for our model: post-LN, our activation, √d-scaled embeddings, our special ids, our tying."""
    m = model.config
    tied = model.tgt_embed.embedding.weight is model.src_embed.embedding.weight
    return transformers.MarianConfig(
        vocab_size=model.src_embed.embedding.num_embeddings,
        decoder_vocab_size=model.tgt_embed.embedding.num_embeddings,
        d_model=m.d_model, encoder_layers=m.num_encoder_layers, decoder_layers=m.num_decoder_layers,
        encoder_attention_heads=m.num_heads, decoder_attention_heads=m.num_heads, encoder_ffn_dim=m.d_ff,
        decoder_ffn_dim=m.d_ff, activation_function=m.activation, dropout=m.dropout, attention_dropout=0.0,
        activation_dropout=0.0, max_position_embeddings=m.max_positions, scale_embedding=True,
        pad_token_id=PAD, eos_token_id=EOS, bos_token_id=BOS, decoder_start_token_id=BOS, forced_eos_token_id=None,
        share_encoder_decoder_embeddings=tied,
        tie_word_embeddings=model.generator.proj.weight is model.tgt_embed.embedding.weight,
        init_std=m.init_std or 0.02, architectures=["MarianMTModel"])


def generation_config(config: Config, transformers):
    """The checkpoint's decode settings. mt's own limits per sentence (a · source length + b) have no equivalent:
    outputs may run to the position table's length. Beam search's length penalty is Hugging Face's own
    (score / length ** alpha), where mt's is GNMT's."""
    d = config.decode
    return transformers.GenerationConfig(
        decoder_start_token_id=BOS, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, forced_eos_token_id=None,
        num_beams=d.beam_size, length_penalty=d.alpha, early_stopping=False,
        no_repeat_ngram_size=d.no_repeat_ngram_size,
        min_new_tokens=d.min_len or None, max_length=config.model.max_positions, suppress_tokens=[PAD, BOS])


def save_tokenizer(tokenizer: Tokenizer, config: Config, directory: Path, transformers) -> None:
    """MarianTokenizer's files: source.spm and target.spm (our models), vocab.json (piece → our id) and, for
    separate vocabularies, target_vocab.json."""
    source, target = directory / "source.spm", directory / "target.spm"
    source.write_bytes(tokenizer.src_proto)
    target.write_bytes(tokenizer.tgt_proto or tokenizer.src_proto)
    vocab, target_vocab = directory / "vocab.json", directory / "target_vocab.json"
    vocab.write_text(json.dumps(_vocabulary(tokenizer.src), ensure_ascii=False), encoding="utf-8")
    if not tokenizer.joint:
        target_vocab.write_text(json.dumps(_vocabulary(tokenizer.tgt), ensure_ascii=False), encoding="utf-8")
    marian = transformers.MarianTokenizer(
        str(source), str(target), str(vocab), target_vocab_file=None if tokenizer.joint else str(target_vocab),
        source_lang=config.data.src_lang, target_lang=config.data.tgt_lang, separate_vocabs=not tokenizer.joint,
        unk_token=tokenizer.src.id_to_piece(UNK), eos_token=tokenizer.src.id_to_piece(EOS),
        pad_token=tokenizer.src.id_to_piece(PAD), model_max_length=config.model.max_positions,
        clean_up_tokenization_spaces=False)  # SentencePiece's own spaces, as mt's output has them
    marian.save_pretrained(directory)


def _vocabulary(processor) -> dict[str, int]:
    """vocab.json's mapping: each piece → its id."""
    return {piece: i for i, piece in enumerate(pieces(processor))}


def model_card(config: Config, tokenizer: Tokenizer, facts: dict, checkpoint: Path, test: Scores | None) -> str:
    """README.md: what the model is, how to use it, what it was trained on and how well it scored."""
    m, d, data = config.model, config.decode, config.data
    corpora = [f"- `{name}`: {c.path or c.hub}" + (f" ({c.max_pairs:,} pairs sampled)" if c.max_pairs else "")
               + (f", repeated {c.repeat}×" if c.repeat > 1 else "")
               + (" — **synthetic** (machine-translated" + (f", sources tagged `{c.tag}`" if c.tag else "") + ")"
                  if c.synthetic else "") for name, c in data.training_corpora().items()]
    dev = facts.get("dev") or {}
    scores = (f"| dev BLEU | {dev['dev_bleu']:.2f} | `{dev.get('bleu_signature', '')}` |\n"
              f"| dev chrF | {dev['dev_chrf']:.2f} | `{dev.get('chrf_signature', '')}` |\n"
              if "dev_bleu" in dev else "| dev | not validated at this checkpoint | |\n")
    if test is not None:
        scores += (f"| test BLEU | {test.bleu:.2f} | `{test.bleu_signature}` |\n"
                   f"| test chrF | {test.chrf:.2f} | `{test.chrf_signature}` |\n")
    script = ("Chinese input may be in either script: the tokenizer converts it to **" + data.chinese_script
              + " characters** itself (OpenCC's tables in its SentencePiece normaliser), as mt does."
              if "zh" in (data.src_lang.split("-")[0], data.tgt_lang.split("-")[0])
              and data.chinese_script != "keep" else "")
    averaged = f" (the average of {', '.join(facts['averaged'])})" if facts.get("averaged") else ""
    vocabulary = ("joint" if tokenizer.joint else f"source and {tokenizer.tgt_vocab_size:,} target")
    return f"""---
language: [{data.src_lang}, {data.tgt_lang}]
library_name: transformers
pipeline_tag: translation
tags: [translation, marian, mt]
---

# {data.src_lang} → {data.tgt_lang} translation, trained with mt

A Transformer (Vaswani et al., 2017) trained with mt and exported by `mt export --huggingface` as a
`MarianMTModel`: d_model {m.d_model}, {m.num_heads} heads, d_ff {m.d_ff}, {m.num_encoder_layers}+{m.num_decoder_layers}
layers, post-LN, {tokenizer.src_vocab_size:,} {vocabulary} SentencePiece BPE pieces. The export checked that
its logits equal mt's own to 1e-4.

```python
from transformers import MarianMTModel, MarianTokenizer

tokenizer = MarianTokenizer.from_pretrained("PATH/TO/THIS/DIRECTORY")
model = MarianMTModel.from_pretrained("PATH/TO/THIS/DIRECTORY")
batch = tokenizer(["我爱你"], return_tensors="pt", padding=True)
print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))
```

With transformers 4.x, `pipeline("translation", model="PATH/TO/THIS/DIRECTORY")` does the same (transformers 5
removed that pipeline).

{script}

## Decoding

`generation_config.json` holds the checkpoint's settings: beam {d.beam_size}, length penalty {d.alpha},
no repeated n-gram of {d.no_repeat_ngram_size or "any size (off)"}, start token `<s>` (id {BOS}). Beam search
differs from mt's in its length penalty: transformers divides a hypothesis's log-probability by length ** α, mt
by GNMT's ((5 + length) / 6) ** α. mt also limits each output to {d.max_len_a:g} · source length + {d.max_len_b}
tokens; transformers limits them to `max_length` ({m.max_positions}).

## Training

Checkpoint `{checkpoint.name}`, step {facts.get("step", 0):,}{averaged}. Training data:

{chr(10).join(corpora)}

{cleaning_line(facts.get("cleaning")).replace("cleaning: ", "Cleaning (mt's contamination guard and corpus filters): ", 1)}.

| | score | sacreBLEU signature |
|---|---:|---|
{scores}
Dev scores are of greedy search, as mt validates{"; test scores of mt's own search with the settings above" if test
else "; test scores were not measured at export (mt export --huggingface … --evaluate)"}.
"""
