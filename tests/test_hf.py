"""`mt export --huggingface`: a MarianMTModel directory that transformers loads with no code of ours, giving mt's
logits and mt's greedy outputs; what Marian cannot express is refused; the write replaces only a previous export."""

import json
import re
import sys

import pytest
import torch

from conftest import tiny_model
from mt.exchange.checkpoint import Checkpoint, Position, save_checkpoint, tokenizer_state
from mt.config import Config, config_to_dict
from mt.data.config import DataConfig, TokenizerConfig
from mt.core.errors import MtError
from mt.exchange.huggingface import export_huggingface
from mt.exchange.marian import marian_weights, residual_order
from mt.model.transformer import Transformer
from mt.data.tokenizer import BOS, EOS, PAD, script_converter, train_tokenizer
from mt.decode.translator import load_translator

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def exported(trained_runs, tmp_path_factory):
    """The trained tiny run's last checkpoint, exported; and the directory."""
    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    directory = tmp_path_factory.mktemp("hf") / "model"
    export_huggingface(checkpoint, directory)
    return checkpoint, directory


def checkpoint_of(model: Transformer, tokenizer, path, **config):
    config = Config(model=model.config, data=DataConfig(max_len=32), **config)
    save_checkpoint(Checkpoint(model=model.state_dict(), config=config_to_dict(config),
                               tokenizer=tokenizer_state(tokenizer), position=Position(step=3)), path)
    return path


def test_transformers_loads_it_and_gets_our_logits_with_padding_on_both_sides(exported, corpus_dir):
    checkpoint, directory = exported
    translator = load_translator(checkpoint, "cpu")
    model, tokenizer = translator.engine.models[0], translator.tokenizer
    marian = transformers.MarianMTModel.from_pretrained(directory).eval()
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()[:6]
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    batch = hf_tokenizer(lines, return_tensors="pt", padding=True)
    assert batch.input_ids.tolist() == [ids + [PAD] * (batch.input_ids.size(1) - len(ids))
                                        for ids in tokenizer.encode_src(lines)]  # the same pieces, EOS, PAD
    targets = tokenizer.encode_tgt(["I love you.", "Hello.", "We go.", "Yes", "No", "Why?"])
    width = max(map(len, targets)) - 1
    tgt_input = torch.tensor([t[:-1] + [PAD] * (width - len(t) + 1) for t in targets])
    with torch.no_grad():
        ours = model(batch.input_ids, tgt_input)
        theirs = marian(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                        decoder_input_ids=tgt_input, decoder_attention_mask=(tgt_input != PAD).long()).logits
    real = tgt_input != PAD  # padded target positions are nobody's prediction
    torch.testing.assert_close(theirs[real], ours[real], rtol=0, atol=1e-4)


def test_its_tokenizer_converts_traditional_chinese_as_mt_does(exported, corpus_dir):
    translator = load_translator(exported[0], "cpu")
    simplified = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()
    lines = script_converter("traditional")(simplified)
    assert lines != simplified
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(exported[1])
    assert hf_tokenizer(lines).input_ids == translator.tokenizer.encode_src(simplified)
    assert "either script" in (exported[1] / "README.md").read_text(encoding="utf-8")


def greedy_case(exported, corpus_dir):
    """The test sentences, and mt's greedy outputs (ids and texts) with one output limit for both sides."""
    checkpoint, directory = exported
    translator = load_translator(checkpoint, "cpu")
    decode = translator.decode.replace(beam_size=1, max_len_a=0.0, max_len_b=12)
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()
    ours = [hyps[0].tokens for hyps in translator.engine.search(translator.tokenizer.encode_src(lines), decode)]
    return lines, ours, translator.translate_lines(lines, decode)


def test_greedy_generation_gives_mts_greedy_output_token_for_token(exported, corpus_dir):
    lines, ours, texts = greedy_case(exported, corpus_dir)
    marian = transformers.MarianMTModel.from_pretrained(exported[1]).eval()
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(exported[1])
    generated = marian.generate(**hf_tokenizer(lines, return_tensors="pt", padding=True), max_new_tokens=12,
                                num_beams=1)  # the rest from generation_config.json
    assert [[t for t in row if t not in (PAD, EOS)] for row in generated[:, 1:].tolist()] == ours  # after <s>
    assert hf_tokenizer.batch_decode(generated, skip_special_tokens=True) == texts


@pytest.mark.skipif(int(transformers.__version__.split(".")[0]) >= 5,
                    reason="transformers 5 removed the translation pipeline (use generate, as the test above does)")
def test_the_translation_pipeline_gives_mts_greedy_output(exported, corpus_dir):
    lines, _, texts = greedy_case(exported, corpus_dir)
    translate = transformers.pipeline("translation", model=str(exported[1]), num_beams=1, max_new_tokens=12)
    assert [r["translation_text"] for r in translate(lines)] == texts


def test_beam_search_without_length_penalty_finds_mts_best_output(exported, corpus_dir):
    checkpoint, directory = exported
    translator = load_translator(checkpoint, "cpu")
    decode = translator.decode.replace(beam_size=4, alpha=0.0, max_len_a=0.0, max_len_b=10)
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()
    ours = [hyps[0].tokens for hyps in translator.engine.search(translator.tokenizer.encode_src(lines), decode)]
    marian = transformers.MarianMTModel.from_pretrained(directory).eval()
    batch = transformers.MarianTokenizer.from_pretrained(directory)(lines, return_tensors="pt", padding=True)
    generated = marian.generate(**batch, num_beams=4, length_penalty=0.0, max_new_tokens=10)
    theirs = [[t for t in row if t not in (PAD, EOS)] for row in generated[:, 1:].tolist()]
    same = sum(a == b for a, b in zip(ours, theirs))
    assert same >= 0.9 * len(lines), f"{same} of {len(lines)}"


def test_the_directory_holds_safetensors_configs_tokenizer_and_a_model_card(exported):
    checkpoint, directory = exported
    names = {p.name for p in directory.iterdir()}
    assert {"model.safetensors", "config.json", "generation_config.json", "source.spm", "target.spm", "vocab.json",
            "tokenizer_config.json", "README.md"} <= names
    generation = json.loads((directory / "generation_config.json").read_text())
    assert generation["decoder_start_token_id"] == BOS and generation["num_beams"] == 4
    assert generation["length_penalty"] == 0.6 and generation["suppress_tokens"] == [PAD, BOS]
    card = (directory / "README.md").read_text(encoding="utf-8")
    state = torch.load(checkpoint, weights_only=True)
    assert f"step {state['position']['step']}" in card and state["dev"]["bleu_signature"] in card
    assert "train.zh" not in card and str(state["config"]["data"]["train"]["path"]) in card
    assert "simplified characters" in card
    assert "285 of 300 training pairs kept; 0 held a dev or test sentence (removed)" in card
    meta = json.loads((directory / "mt.json").read_text(encoding="utf-8"))
    assert meta["format"] == "huggingface" and meta["checkpoint"] == str(checkpoint)
    assert meta["facts"]["step"] == state["position"]["step"] and meta["config"]["model"] == state["config"]["model"]


@pytest.mark.parametrize("kind", ["separate vocabularies", "untied embeddings"])
def test_other_vocabularies_and_tying_export_exactly(kind, tmp_path):
    zh = ["我爱你。", "你好。", "我们明天去北京。", "谢谢你。"] * 30
    en = ["I love you.", "Hello.", "We will go to Beijing tomorrow.", "Thank you."] * 30
    joint = kind != "separate vocabularies"
    tokenizer = train_tokenizer(zh, en, TokenizerConfig(vocab_size=60 if joint else 40, joint=joint,
                                                        byte_fallback=False))
    model = tiny_model(vocab=tokenizer.src_vocab_size, tgt_vocab=tokenizer.tgt_vocab_size,
                       tie_embeddings=joint and kind != "untied embeddings")
    export_huggingface(checkpoint_of(model, tokenizer, tmp_path / "c.pt"), tmp_path / "hf")
    marian = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    src = torch.tensor([tokenizer.encode_src(["我爱你。"])[0]])
    tgt = torch.tensor([tokenizer.encode_tgt(["I love you."])[0][:-1]])
    with torch.no_grad():
        torch.testing.assert_close(marian(input_ids=src, decoder_input_ids=tgt).logits, model(src, tgt),
                                   rtol=0, atol=1e-4)
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(tmp_path / "hf")
    assert hf_tokenizer("我爱你。").input_ids == src[0].tolist()
    assert hf_tokenizer.decode(tgt[0, 1:].tolist() + [EOS], skip_special_tokens=True) == "I love you."


def test_the_permutation_puts_our_sinusoids_in_marians_layout():
    model = tiny_model()
    order = residual_order(model.config.d_model)
    marian = transformers.MarianMTModel(transformers.MarianConfig(
        d_model=16, max_position_embeddings=64, vocab_size=50, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, pad_token_id=PAD, decoder_start_token_id=BOS))
    theirs = marian.model.encoder.embed_positions.weight
    torch.testing.assert_close(theirs, model.positions.table[:, order], rtol=0, atol=1e-6)
    assert marian_weights(model)["model.shared.weight"].equal(model.src_embed.embedding.weight[:, order])


@pytest.mark.parametrize("shape, words", [({"norm": "pre"}, "pre-LN"), ({"positions": "learned"}, "learned positions")])
def test_what_marian_cannot_express_is_refused_with_what_to_train_instead(shape, words, tokenizer, tmp_path):
    model = tiny_model(vocab=tokenizer.src_vocab_size, **shape)
    with pytest.raises(MtError, match=words) as refused:
        export_huggingface(checkpoint_of(model, tokenizer, tmp_path / "c.pt"), tmp_path / "hf")
    assert "train with model." in str(refused.value) and not (tmp_path / "hf").exists()


def test_an_earlier_export_is_replaced_and_anything_else_is_left_alone(exported, tmp_path):
    checkpoint, _ = exported
    export_huggingface(checkpoint, tmp_path / "hf")
    (tmp_path / "hf" / "stale.txt").write_text("old", encoding="utf-8")
    export_huggingface(checkpoint, tmp_path / "hf")
    assert not (tmp_path / "hf" / "stale.txt").exists() and (tmp_path / "hf" / "model.safetensors").is_file()
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(MtError, match="exists and is a (directory|file), not a Hugging Face export of mt"):
        export_huggingface(checkpoint, tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "notes.txt"]


def test_without_transformers_the_export_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    with pytest.raises(MtError, match=re.escape('pip install -e ".[huggingface]"')):
        export_huggingface(tmp_path / "c.pt", tmp_path / "hf")


def test_the_model_card_marks_synthetic_corpora(tokenizer, tmp_path):
    from mt.data.config import CorpusConfig
    from mt.exchange.huggingface import model_card

    data = DataConfig(train=CorpusConfig(path="data/tatoeba/train"),
                      extra_train=[CorpusConfig(path="data/mono.bt", tag="<BT>", synthetic=True)])
    card = model_card(Config(data=data), tokenizer, {"step": 5}, tmp_path / "c.pt", None)
    assert "- `train`: data/tatoeba/train\n" in card
    assert "- `extra_train[0]`: data/mono.bt — **synthetic** (machine-translated, sources tagged `<BT>`)" in card
