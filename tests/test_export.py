"""CTranslate2 export: the exported model decodes exactly as mt's own greedy search (fp32)."""

import pytest
import torch

from mt.checkpoint import load_model, save_checkpoint, tokenizer_state
from mt.config import Config, ModelConfig, config_to_dict
from mt.export import CTranslate2Engine, export_ctranslate2
from mt.model import Transformer
from mt.tokenizer import PAD
from mt.translate import translate_nbest

pytest.importorskip("ctranslate2")


def untrained_checkpoint(tokenizer, path, **model):
    """A checkpoint of an untrained model of another kind than the trained fixture run's (post-LN, sinusoidal)."""
    torch.manual_seed(0)
    config = Config(model=ModelConfig(d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2, num_decoder_layers=2,
                                      dropout=0.0, max_positions=128, **model))
    model = Transformer(config.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, PAD)
    with torch.no_grad():
        model.generator.proj.weight.mul_(4.0)  # sharper outputs than an untrained model's
    save_checkpoint({"model": model.state_dict(), "config": config_to_dict(config),
                     "tokenizer": tokenizer_state(tokenizer)}, path)
    return path


@pytest.mark.parametrize("kind", ["trained", "pre-LN", "learned positions"])
def test_exported_model_gives_mts_greedy_output(kind, trained_runs, tokenizer, corpus_dir, tmp_path):
    other = {"pre-LN": {"norm": "pre"}, "learned positions": {"positions": "learned"}}.get(kind)
    checkpoint = (trained_runs[0] / "checkpoints" / "last.pt" if other is None
                  else untrained_checkpoint(tokenizer, tmp_path / "other.pt", **other))
    export_ctranslate2(checkpoint, tmp_path / "ct2")
    model, tok, config, _ = load_model(checkpoint, torch.device("cpu"))
    lines = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines() + ["", "我爱你"]
    decode = config.decode.__class__(beam_size=1, max_len_a=1.0, max_len_b=5)
    ours = translate_nbest(model, tok, lines, decode, torch.device("cpu"))
    theirs = CTranslate2Engine(tmp_path / "ct2", torch.device("cpu")).translate_nbest(lines, decode)
    assert [t[0].text for t in theirs] == [t[0].text for t in ours]
    assert theirs[-2][0].text == ""


def test_export_replaces_a_previous_one_whole(trained_runs, tmp_path):
    target = tmp_path / "ct2"
    target.mkdir()
    (target / "stale.txt").write_text("old", encoding="utf-8")
    export_ctranslate2(trained_runs[0] / "checkpoints" / "last.pt", target)
    assert not (target / "stale.txt").exists() and (target / "model.bin").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]
