"""A Marian model laid out as OPUS-MT publishes them, built at random weights (the hub is out of reach here), for
tests/test_import.py and scripts/bench_import.py.

OPUS-MT's layout, from transformers' converter (src/transformers/models/marian/convert_marian_to_pytorch.py,
OpusState): one vocab.json for both sides with `</s>` 0, `<unk>` 1 and `<pad>` last; pad = the decoder's start
token; EOS = 0; swish; √d-scaled embeddings; every embedding and the generator tied; the output layer's bias as
final_logits_bias; max_position_embeddings = d_model; two unigram SentencePiece models (source.spm, target.spm).
opus-mt-zh-en's shape: d_model 512, 8 heads, d_ff 2048, 6+6 layers, vocabulary 65,001 (pad 65,000).
"""

import io
import json
import random

import sentencepiece as spm
import torch
import transformers


OPUS_MT_ZH_EN = dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                     decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, vocab_size=65001)
SMALL = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=64, decoder_ffn_dim=64)


def unigram(texts: list[str], size: int) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model, model_type="unigram",
                                   vocab_size=size, character_coverage=1.0, hard_vocab_limit=False,
                                   minloglevel=2)
    return model.getvalue()


def opus_mt_like(directory, corpus_dir, shape: dict, seed: int = 0):
    """A MarianMTModel directory laid out as OPUS-MT's, at random weights (a non-zero logits bias)."""
    directory.mkdir()
    zh = (corpus_dir / "train.zh").read_text(encoding="utf-8").splitlines()
    en = (corpus_dir / "train.en").read_text(encoding="utf-8").splitlines()
    (directory / "source.spm").write_bytes(unigram(zh, 500))
    (directory / "target.spm").write_bytes(unigram(en, 400))
    vocab = ["</s>", "<unk>"]
    for name in ("source.spm", "target.spm"):
        processor = spm.SentencePieceProcessor(model_file=str(directory / name))
        vocab += [p for p in (processor.id_to_piece(i) for i in range(processor.get_piece_size()))
                  if p not in vocab and not p.startswith("<")]
    random.Random(seed).shuffle(rest := vocab[2:])  # Marian's order is the training data's, not SentencePiece's
    size = shape.get("vocab_size", len(vocab) + 1)
    vocab = vocab[:2] + rest + [f"▁filler{i}" for i in range(size - 1 - len(vocab))] + ["<pad>"]
    (directory / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}, ensure_ascii=False))
    files = [str(directory / name) for name in ("source.spm", "target.spm", "vocab.json")]
    transformers.MarianTokenizer(*files, source_lang="zh", target_lang="en").save_pretrained(directory)
    pad = len(vocab) - 1
    config = transformers.MarianConfig(**{**shape, "vocab_size": len(vocab)}, activation_function="swish",
                                       max_position_embeddings=shape["d_model"], scale_embedding=True,
                                       pad_token_id=pad, eos_token_id=0, bos_token_id=0, decoder_start_token_id=pad,
                                       dropout=0.1, share_encoder_decoder_embeddings=True)
    torch.manual_seed(seed)
    marian = transformers.MarianMTModel(config)
    with torch.no_grad():
        marian.final_logits_bias.normal_(0, 1)
        for name, tensor in marian.named_parameters():
            if "layer_norm" in name:
                tensor.normal_(1 if name.endswith("weight") else 0, 0.2)  # LayerNorms not at their start
    marian.generation_config = transformers.GenerationConfig(decoder_start_token_id=pad, eos_token_id=0,
                                                             pad_token_id=pad, bad_words_ids=[[pad]], num_beams=4)
    marian.save_pretrained(directory)
    return directory
