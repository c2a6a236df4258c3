"""CTranslate2 export: the exported model decodes exactly as mt's own greedy search (float32), each sentence within
its own output limit, and in int8 where asked or where the CPU multiplies 8-bit integers in hardware; a directory
that is not an export is refused in one line."""

import json
import platform
import re
import subprocess
import sys

import pytest
import torch

from mt.exchange.checkpoint import Checkpoint, save_checkpoint, tokenizer_state
from mt.config import Config, config_to_dict
from mt.decode.ctranslate2 import compute_type
from mt.exchange.ctranslate2 import export_ctranslate2
from mt.core import device
from mt.core.errors import MtError
from mt.model.config import ModelConfig
from mt.model.transformer import Transformer
from mt.data.tokenizer import PAD, script_converter
from mt.decode.translator import load_translator

pytest.importorskip("ctranslate2")


def untrained_checkpoint(tokenizer, path, **model):
    """A checkpoint of an untrained model of another kind than the trained fixture run's (post-LN, sinusoidal)."""
    torch.manual_seed(0)
    config = Config(model=ModelConfig(d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2, num_decoder_layers=2,
                                      dropout=0.0, max_positions=128, **model))
    model = Transformer(config.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, PAD)
    with torch.no_grad():
        model.generator.proj.weight.mul_(4.0)  # sharper outputs than an untrained model's
    save_checkpoint(Checkpoint(model=model.state_dict(), config=config_to_dict(config),
                               tokenizer=tokenizer_state(tokenizer)), path)
    return path


@pytest.mark.parametrize("kind", ["trained", "pre-LN", "learned positions"])
def test_exported_model_gives_mts_greedy_output(kind, trained_runs, tokenizer, corpus_dir, tmp_path):
    other = {"pre-LN": {"norm": "pre"}, "learned positions": {"positions": "learned"}}.get(kind)
    checkpoint = (trained_runs[0] / "checkpoints" / "last.pt" if other is None
                  else untrained_checkpoint(tokenizer, tmp_path / "other.pt", **other))
    export_ctranslate2(checkpoint, tmp_path / "ct2")
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()
    lines += script_converter("traditional")(lines[:5]) + ["", "我爱你"]  # its model file converts
    mt = load_translator(checkpoint, "cpu")
    ct2 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    assert ct2.config == mt.config  # languages, position table and decode settings travel with the export
    decode = mt.decode.replace(beam_size=1, max_len_a=1.0, max_len_b=5)
    ours, theirs = mt.translate(lines, decode), ct2.translate(lines, decode)
    assert [t[0].text for t in theirs] == [t[0].text for t in ours]
    assert theirs[-2][0].text == ""


def test_exported_model_attends_as_mts_last_layer_and_places_inline_tags_as_it_does(trained_runs, tmp_path):
    """The export's cross-attention (what places HTML's inline tags and a document's runs) is mt's last layer,
    averaged over its heads; so a tagged sentence comes back with its tags where mt's own engine puts them."""
    from mt.text.markup import read_html
    from mt.text.texts import translate_marked

    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    export_ctranslate2(checkpoint, tmp_path / "ct2")
    mt = load_translator(checkpoint, "cpu")
    ct2 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    for source in ("我爱你。", "汤姆说他明天会来。"):
        translation = mt.translate_lines([source])[0]
        ours, theirs = mt.attention(source, translation), ct2.attention(source, translation)
        assert (theirs.source, theirs.target) == (ours.source, ours.target)
        assert theirs.weights.shape == (1, 1, len(ours.target), len(ours.source))
        torch.testing.assert_close(theirs.weights[0, 0], ours.weights[-1].mean(dim=0), atol=1e-5, rtol=1e-4)
    page = read_html("<p><b>汤姆</b>说他明天<i>会来</i>。</p>")
    greedy = mt.decode.replace(beam_size=1)  # (beam search's length penalties differ: CTranslate2's is length ** α)
    placed = [translate_marked(translator, page.texts, greedy) for translator in (mt, ct2)]
    assert page.render(placed[1]) == page.render(placed[0])


@pytest.mark.parametrize("beam", [1, 3])
def test_each_sentence_is_searched_within_its_own_output_limit(beam, tokenizer, tmp_path):
    """A short sentence that stops at its limit, batched with a longer one (a larger limit), gets what it gets
    alone, and what mt's own search gets: the same outputs, the same scores, in the same order."""
    checkpoint = untrained_checkpoint(tokenizer, tmp_path / "model.pt")
    export_ctranslate2(checkpoint, tmp_path / "ct2")
    mt = load_translator(checkpoint, "cpu")
    ct2 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    decode = mt.decode.replace(beam_size=beam, nbest=beam, alpha=0.0, max_len_a=1.0, max_len_b=1,
                               guard=False)  # scores: log p; the engine alone, as mt.engine.search below
    short, long = ct2.encode(["我爱你。", "我们明天去北京看看我们的朋友。"])  # one batch, limits 1 · length + 1
    ours = mt.engine.search([short], decode)[0]
    assert len(ours[0].tokens) == len(short) + 1  # the untrained model runs on to the limit
    for sources in ([short], [short, long]):
        theirs = ct2.translate_ids(sources, decode)[0]
        assert [t.text for t in theirs] == mt.tokenizer.decode_tgt([h.tokens for h in ours])
        assert [t.score for t in theirs] == pytest.approx([h.score for h in ours], abs=1e-4)


@pytest.mark.parametrize("vendor, vnni, avx512, expected", [
    ("GenuineIntel", True, True, "int8"), ("GenuineIntel", False, False, "default"),  # MKL: int8 pays with VNNI
    ("AuthenticAMD", True, True, "default"), ("AuthenticAMD", False, False, "int8")])  # oneDNN: on AVX2 only
def test_auto_compute_type_is_int8_only_where_int8_decodes_faster(monkeypatch, vendor, vnni, avx512, expected):
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: vnni)
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: avx512)
    monkeypatch.setattr(torch.cpu, "_is_avx2_supported", lambda: False)  # an AMD CPU older than AVX2: float32
    monkeypatch.setattr(device, "cpu_vendor", lambda: vendor)
    assert compute_type("auto", torch.device("cpu")) == ("int8" if vendor == "GenuineIntel" and vnni else "default")
    monkeypatch.setattr(torch.cpu, "_is_avx2_supported", lambda: True)
    assert compute_type("auto", torch.device("cpu")) == expected
    assert compute_type("float32", torch.device("cpu")) == "float32"
    for check in ("_is_vnni_supported", "_is_avx2_supported"):  # a torch that cannot say: the export's own type
        monkeypatch.delattr(torch.cpu, check)
    assert compute_type("auto", torch.device("cpu")) == "default"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="an x86 CPU's vendor")
def test_the_cpu_vendor_is_read_from_the_machine():
    assert device.cpu_vendor() in ("GenuineIntel", "AuthenticAMD")


def test_translating_with_ctranslate2_loads_it_before_torch_so_that_it_keeps_its_own_threads(tokenizer, tmp_path):
    export_ctranslate2(untrained_checkpoint(tokenizer, tmp_path / "model.pt"), tmp_path / "ct2")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "mt", "translate", "--engine", "ctranslate2",
                           "--checkpoint", str(tmp_path / "ct2"), "我爱你"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    finished = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert finished.index("ctranslate2._ext") < finished.index("torch")  # its native library, with its libgomp


def test_evaluate_scores_an_export_as_it_scores_its_checkpoint(trained_runs, tmp_path):
    """`mt evaluate --engine ctranslate2`: an export's BLEU and chrF on the test set its config names, the same
    as its checkpoint's (greedy, float32)."""
    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    export_ctranslate2(checkpoint, tmp_path / "ct2")

    def evaluate(*model: str) -> str:
        done = subprocess.run([sys.executable, "-m", "mt", "evaluate", "--device", "cpu", "--beam", "1", *model],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    theirs = evaluate("--engine", "ctranslate2", "--compute-type", "float32", "--checkpoint", str(tmp_path / "ct2"))
    assert theirs.startswith("BLEU") and theirs == evaluate("--checkpoint", str(checkpoint))


def test_compute_type_reaches_ctranslate2_and_a_wrong_one_is_one_line(trained_runs, tokenizer, corpus_dir, tmp_path):
    export_ctranslate2(untrained_checkpoint(tokenizer, tmp_path / "model.pt"), tmp_path / "ct2")
    int8 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="int8")
    assert int8.engine.translator.compute_type.startswith("int8")  # weights quantised as the model loads
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()
    outputs = int8.translate(lines, int8.decode.replace(beam_size=1, min_len=3, max_len_b=5))
    assert all(len(t[0].text.split()) >= 1 for t in outputs)
    with pytest.raises(MtError, match="--compute-type bogus: Invalid compute type"):
        load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="bogus")
    with pytest.raises(MtError, match="--compute-type int8: mt.s engine computes in float32 or bfloat16"):
        load_translator(trained_runs[0] / "checkpoints" / "last.pt", "cpu", compute_type="int8")


def test_export_replaces_a_previous_export_whole_and_nothing_else(trained_runs, tmp_path):
    checkpoint, target = trained_runs[0] / "checkpoints" / "last.pt", tmp_path / "ct2"
    export_ctranslate2(checkpoint, target)
    (target / "stale.txt").write_text("old", encoding="utf-8")
    export_ctranslate2(checkpoint, target)
    assert not (target / "stale.txt").exists() and (target / "model.bin").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    (tmp_path / "file").write_text("keep me too", encoding="utf-8")
    for path in (mine, tmp_path / "file"):
        with pytest.raises(MtError, match="exists and is a (directory|file), not a CTranslate2 export of mt"):
            export_ctranslate2(checkpoint, path)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert (tmp_path / "file").read_text(encoding="utf-8") == "keep me too"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2", "file", "mine"]


NOT_EXPORTS = {"no mt.json": None, "not UTF-8": b"\xff\xfe", "not JSON": "{not", "not an object": "[1, 2]",
               "no format": '{"config": {}}', "another format": '{"format": "huggingface"}'}


@pytest.mark.parametrize("meta", NOT_EXPORTS.values(), ids=NOT_EXPORTS.keys())
def test_a_directory_without_a_ctranslate2_mt_json_is_not_an_export_in_one_line(meta, tmp_path):
    if meta is not None:
        (tmp_path / "mt.json").write_bytes(meta if isinstance(meta, bytes) else meta.encode("utf-8"))
    with pytest.raises(MtError, match="not a CTranslate2 export of mt"):
        load_translator(tmp_path, "cpu", engine="ctranslate2")


def test_a_damaged_export_is_one_line(tokenizer, tmp_path):
    export_ctranslate2(untrained_checkpoint(tokenizer, tmp_path / "model.pt"), tmp_path / "ct2")
    meta = json.loads((tmp_path / "ct2" / "mt.json").read_text(encoding="utf-8"))
    (tmp_path / "ct2" / "mt.json").write_text(json.dumps({**meta, "config": None}), encoding="utf-8")
    with pytest.raises(MtError, match="a config must be a mapping"):
        load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2")
    (tmp_path / "ct2" / "mt.json").write_text(json.dumps(meta), encoding="utf-8")
    (tmp_path / "ct2" / "config.json").write_bytes(b"{}")  # CTranslate2 would fail only when it translates
    with pytest.raises(MtError, match="config.json: damaged or changed since `mt export` wrote it"):
        load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2")
    del meta["files"]  # as an export made before mt.json listed its files: CTranslate2's and SentencePiece's checks
    (tmp_path / "ct2" / "mt.json").write_text(json.dumps(meta), encoding="utf-8")
    (tmp_path / "ct2" / "model.bin").write_bytes(b"garbage")
    with pytest.raises(MtError, match="CTranslate2 cannot load it"):
        load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2")
    for model in tmp_path.glob("ct2/*.model"):
        model.unlink()
    with pytest.raises(MtError, match="its SentencePiece model is missing"):
        load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2")


def test_a_file_missing_from_an_export_is_named(tokenizer, tmp_path):
    export_ctranslate2(untrained_checkpoint(tokenizer, tmp_path / "model.pt"), tmp_path / "ct2")
    (tmp_path / "ct2" / "spm.model").unlink()
    with pytest.raises(MtError, match="spm.model: missing since `mt export` wrote it"):
        load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2")


def test_without_ctranslate2_exporting_and_translating_say_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` raises ImportError
    hint = re.escape('pip install -e ".[ctranslate2]"')
    with pytest.raises(MtError, match=hint):
        export_ctranslate2(tmp_path / "model.pt", tmp_path / "ct2")
    with pytest.raises(MtError, match=hint):
        load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2")


def test_the_export_samples_too_and_is_greedy_at_top_k_one(trained_runs, corpus_dir, tmp_path):
    """Not seeded: CTranslate2's seed does not make its draws repeat (OpenNMT/CTranslate2#1757)."""
    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    export_ctranslate2(checkpoint, tmp_path / "ct2")
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()
    ct2 = load_translator(tmp_path / "ct2", "cpu", engine="ctranslate2", compute_type="float32")
    decode = ct2.decode.replace(sample=True, temperature=3.0, max_len_a=1.0, max_len_b=5)

    def texts(engine, **change):
        return [t[0].text for t in engine.translate(lines, decode.replace(**change))]

    greedy = texts(load_translator(checkpoint, "cpu"), sample=False, beam_size=1)
    assert texts(ct2, top_k=1) == texts(load_translator(checkpoint, "cpu"), top_k=1) == greedy
    drawn = texts(ct2)
    assert sum(a != b for a, b in zip(drawn, greedy)) > len(lines) / 2
