"""`mt import --huggingface`: a Marian model as OPUS-MT publishes them (built here at random weights: the hub is
out of reach) becomes an mt checkpoint with Marian's logits, tokens and greedy outputs; mt's own export comes back
bit for bit; what mt cannot express is refused in one line.

The models are laid out as OPUS-MT's (tests/opus_mt.py says how, and where from).
"""

import io
import json

import pytest
import sentencepiece as spm
import torch

from mt.cli import run
from mt.core.errors import MtError
from mt.decode.translator import load_translator
from mt.exchange.huggingface import export_huggingface
from mt.exchange.import_huggingface import import_huggingface

transformers = pytest.importorskip("transformers")
from opus_mt import OPUS_MT_ZH_EN, SMALL, opus_mt_like  # noqa: E402  (it needs transformers)


@pytest.fixture(scope="module")
def opus(corpus_dir, tmp_path_factory):
    """A small OPUS-MT-like directory, and its import as a run directory."""
    root = tmp_path_factory.mktemp("import")
    directory = opus_mt_like(root / "opus-mt-zh-en", corpus_dir, SMALL)
    return directory, import_huggingface(str(directory), root / "run")


def test_the_import_tokenises_as_marians_tokenizer_and_gives_its_logits(opus, corpus_dir):
    directory, checkpoint = opus
    translator = load_translator(checkpoint, "cpu")
    model, tokenizer = translator.engine.models[0], translator.tokenizer
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    marian = transformers.MarianMTModel.from_pretrained(directory).eval()
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()[:20] + ["Hello 世界 ☃"]
    pad = marian.config.pad_token_id  # Marian's start token, mt's BOS (id 2)
    to_marian = torch.tensor([hf_tokenizer.encoder[tokenizer.src.id_to_piece(i)] if i != 2 else pad
                              for i in range(tokenizer.src_vocab_size)])
    ours = tokenizer.encode_src(lines)
    assert [to_marian[ids].tolist() for ids in ours] == hf_tokenizer(lines).input_ids
    src = torch.tensor([ours[0]])
    tgt = torch.tensor([[2] + tokenizer.encode_tgt(["I love you."])[0][1:-1]])
    with torch.no_grad():
        theirs = marian(input_ids=to_marian[src], decoder_input_ids=to_marian[tgt]).logits[..., to_marian]
        torch.testing.assert_close(model(src, tgt), theirs, rtol=0, atol=1e-4)


def test_greedy_output_is_marians_token_for_token_and_text_for_text(opus, corpus_dir):
    directory, checkpoint = opus
    translator = load_translator(checkpoint, "cpu")
    decode = translator.decode.replace(beam_size=1, max_len_a=0.0, max_len_b=12)
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()[:30]
    hf_tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    marian = transformers.MarianMTModel.from_pretrained(directory).eval()
    generated = marian.generate(**hf_tokenizer(lines, return_tensors="pt", padding=True), num_beams=1,
                                max_new_tokens=12)
    pad = marian.config.pad_token_id
    theirs = [[hf_tokenizer.decoder[t] for t in row if t not in (pad, 0)] for row in generated[:, 1:].tolist()]
    ours = [[translator.tokenizer.tgt.id_to_piece(t) for t in hyps[0].tokens]
            for hyps in translator.engine.search(translator.tokenizer.encode_src(lines), decode)]
    assert ours == theirs
    assert translator.translate_lines(lines, decode) == hf_tokenizer.batch_decode(generated, skip_special_tokens=True)


def test_the_run_directory_holds_what_fine_tuning_needs(opus):
    _, checkpoint = opus
    run_dir = checkpoint.parent.parent
    assert (run_dir / "checkpoints" / "best.pt").samefile(checkpoint)
    assert (run_dir / "spm.src.model").exists() and (run_dir / "spm.tgt.model").exists()
    state = torch.load(checkpoint, weights_only=True)
    model = state["config"]["model"]
    assert (model["activation"], model["output_bias"], model["tie_embeddings"], model["max_positions"]) == \
        ("swish", True, True, 32)
    assert state["config"]["data"]["chinese_script"] == "keep" and state["config"]["decode"]["beam_size"] == 4
    assert state["imported"]["format"] == "huggingface"


def test_both_exports_of_an_imported_model_translate_as_it_does(opus, corpus_dir, tmp_path):
    _, checkpoint = opus
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()[:10]
    translator = load_translator(checkpoint, "cpu")
    decode = translator.decode.replace(beam_size=1, max_len_a=0.0, max_len_b=10)
    ours = translator.translate_lines(lines, decode)
    from mt.exchange.ctranslate2 import export_ctranslate2
    export_ctranslate2(checkpoint, tmp_path / "ct2")
    ct2 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    assert ct2.translate_lines(lines, decode) == ours
    export_huggingface(checkpoint, tmp_path / "hf")
    again = import_huggingface(str(tmp_path / "hf"), tmp_path / "again.pt")
    assert load_translator(again, "cpu").translate_lines(lines, decode) == ours


def separate_vocabularies_checkpoint(path):
    """An untrained model with one SentencePiece model and vocabulary per language, as a checkpoint."""
    from conftest import tiny_model
    from mt.config import Config, config_to_dict
    from mt.data.config import DataConfig, TokenizerConfig
    from mt.data.tokenizer import train_tokenizer
    from mt.exchange.checkpoint import Checkpoint, Position, save_checkpoint, tokenizer_state

    zh = ["我爱你。", "你好。", "我们明天去北京。", "谢谢你。"] * 30
    en = ["I love you.", "Hello.", "We will go to Beijing tomorrow.", "Thank you."] * 30
    tokenizer = train_tokenizer(zh, en, TokenizerConfig(vocab_size=40, joint=False, byte_fallback=False))
    model = tiny_model(vocab=tokenizer.src_vocab_size, tgt_vocab=tokenizer.tgt_vocab_size, tie_embeddings=False)
    config = Config(model=model.config, tokenizer=TokenizerConfig(vocab_size=40, joint=False),
                    data=DataConfig(max_len=32))
    save_checkpoint(Checkpoint(model=model.state_dict(), config=config_to_dict(config),
                               tokenizer=tokenizer_state(tokenizer), position=Position(step=3)), path)
    return path


@pytest.mark.parametrize("kind", ["trained, joint vocabulary", "separate vocabularies"])
def test_export_import_export_is_bit_exact(kind, trained_runs, tmp_path):
    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    if kind == "separate vocabularies":
        checkpoint = separate_vocabularies_checkpoint(tmp_path / "separate.pt")
    export_huggingface(checkpoint, tmp_path / "first")
    import_huggingface(str(tmp_path / "first"), tmp_path / "imported.pt")
    export_huggingface(tmp_path / "imported.pt", tmp_path / "second")
    names = ["model.safetensors", "config.json", "generation_config.json", "source.spm", "target.spm", "vocab.json",
             "tokenizer_config.json"] + (["target_vocab.json"] if kind == "separate vocabularies" else [])
    for name in names:
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes(), name


def test_opus_mt_zh_ens_shape_imports_with_marians_logits(corpus_dir, tmp_path):
    directory = opus_mt_like(tmp_path / "opus-mt-zh-en", corpus_dir, OPUS_MT_ZH_EN)
    checkpoint = import_huggingface(str(directory), tmp_path / "opus.pt")  # checks the logits itself, to 1e-4
    model = load_translator(checkpoint, "cpu").engine.models[0]
    assert model.src_embed.embedding.num_embeddings == 65001 + 1  # mt's BOS beside Marian's pad
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(77e6, rel=0.02)


@pytest.mark.parametrize("change, words", [
    ({"activation_function": "gelu"}, "its activation is gelu"),
    ({"decoder_attention_heads": 2}, "encoder and decoder differ"),
    ({"scale_embedding": False}, "not scaled"),
])
def test_what_mt_cannot_express_is_refused_in_one_line(opus, change, words, tmp_path):
    directory, _ = opus
    config = json.loads((directory / "config.json").read_text())
    other = tmp_path / "other"
    other.mkdir()
    for path in directory.iterdir():
        (other / path.name).write_bytes(path.read_bytes())
    (other / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(MtError, match=words):
        import_huggingface(str(other), tmp_path / "x.pt")
    assert not (tmp_path / "x.pt").exists()


def test_the_command_line_imports_and_refuses_to_replace(opus, tmp_path, capsys):
    directory, _ = opus
    assert run(["import", "--huggingface", str(directory), "-o", str(tmp_path / "m.pt")]) == 0
    assert run(["info", str(tmp_path / "m.pt")]) == 0
    assert f"imported from: {directory} (mt import --huggingface)" in capsys.readouterr().out
    assert run(["translate", "--checkpoint", str(tmp_path / "m.pt"), "--beam", "1", "--max-len-b", "5",
                "--max-len-a", "0", "我爱你"]) == 0
    assert run(["import", "--huggingface", str(directory), "-o", str(tmp_path / "m.pt")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert run(["import", "--huggingface", str(tmp_path / "nothing"), "-o", str(tmp_path / "n.pt")]) == 2


def test_a_bpe_model_whose_ids_differ_is_refused():
    from mt.exchange.import_huggingface import ordered_model
    zh = ["我爱你。", "你好。", "我们明天去北京。"] * 50
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(zh), model_writer=model, model_type="bpe", vocab_size=30,
                                   minloglevel=2)
    with pytest.raises(MtError, match="unigram"):
        ordered_model(model.getvalue(), ["<pad>", "<unk>", "<s>", "</s>", "▁我"], "source.spm")


def test_an_imported_model_fine_tunes_from_its_run_directorys_config(opus, corpus_dir, tmp_path):
    _, checkpoint = opus
    run_dir = checkpoint.parent.parent
    overlay = tmp_path / "data.yaml"
    overlay.write_text(f"""data:
  train: {{path: {corpus_dir / 'train'}}}
  dev: {{path: {corpus_dir / 'dev'}}}
  max_len: 32
  dev_max_sentences: 8
decode: {{max_len_a: 1.0, max_len_b: 5}}
train: {{max_steps: 3, max_tokens: 300, eval_every: 3, log_every: 1, warmup_steps: 2}}
""", encoding="utf-8")
    assert run(["train", "-c", str(run_dir / "config.yaml"), "-c", str(overlay), "--init-from", str(checkpoint),
                "--run-dir", str(tmp_path / "tuned")]) == 0
    tuned = torch.load(tmp_path / "tuned" / "checkpoints" / "last.pt", weights_only=True)
    assert tuned["position"]["step"] == 3 and tuned["init_from"]["checkpoint"] == str(checkpoint.resolve())
    start = torch.load(checkpoint, weights_only=True)["model"]
    assert not tuned["model"]["generator.proj.bias"].equal(start["generator.proj.bias"])  # the bias trains too


def test_an_export_changed_by_transformers_imports_as_any_marian_model(trained_runs, tmp_path):
    export_huggingface(trained_runs[0] / "checkpoints" / "last.pt", tmp_path / "hf")
    marian = transformers.MarianMTModel.from_pretrained(tmp_path / "hf")
    with torch.no_grad():
        marian.lm_head.weight.mul_(1.01)  # as fine-tuning with transformers would change it
    marian.save_pretrained(tmp_path / "hf")
    state = torch.load(import_huggingface(str(tmp_path / "hf"), tmp_path / "tuned.pt"), weights_only=True)
    assert state["position"]["step"] == 0 and state["config"]["data"]["chinese_script"] == "keep"  # not mt.json's any more
    assert state["config"]["data"]["src_lang"] == "zh"  # from the tokenizer's config
