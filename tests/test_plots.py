"""Pictures: training curves, attention maps (shape, rows summing to 1), and `mt info`."""

import subprocess
import sys

import torch

from conftest import tiny_model
from mt import plots
from mt.data.batching import pad_ids
from mt.plots import Pieces, plot_attention, plot_training

PNG = b"\x89PNG\r\n\x1a\n"


def test_cross_attention_has_one_row_per_target_position_summing_to_one_over_real_source_tokens():
    model = tiny_model(vocab=30, num_decoder_layers=3)
    src = pad_ids([[5, 6, 7, 8, 3], [9, 10, 3]])     # the second sentence has 2 PAD positions
    tgt_input = pad_ids([[2, 11, 12, 13], [2, 14, 15, 16]])
    weights = model.cross_attention(src, tgt_input)
    assert weights.shape == (2, 3, 2, 4, 5)  # [B, layers, heads, T, S]
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 2, 4))
    assert torch.all(weights[1, ..., 3:] == 0)


def test_training_curves_are_drawn_in_four_panels(trained_runs, tmp_path):
    figure = plot_training(trained_runs[1], tmp_path / "curves.png")  # the resumed run: steps logged twice
    assert len(figure.axes) == 4
    data = (tmp_path / "curves.png").read_bytes()
    assert data.startswith(PNG) and len(data) > 20_000
    assert [line.get_xdata().tolist() for line in figure.axes[2].lines][0] == [4, 8]  # dev BLEU, once per step


def test_attention_map_has_a_panel_per_layer_or_the_chosen_one(tmp_path):
    weights = torch.rand(3, 2, 4, 5).softmax(-1)
    src, tgt = Pieces(["▁我", "爱", "你", "。", "</s>"], [10, 11, 12, 13, 3]), Pieces(["▁I", "▁love", "▁you", "."], [5, 6, 7, 8])
    assert len(plot_attention(weights, src, tgt, tmp_path / "all.png").axes) == 3
    assert len(plot_attention(weights, src, tgt, tmp_path / "one.png", layer=2, head=1).axes) == 1
    assert (tmp_path / "one.png").read_bytes().startswith(PNG)


def test_without_a_cjk_font_chinese_pieces_are_labelled_by_id(monkeypatch, capsys):
    monkeypatch.setattr(plots, "cjk_font", lambda: None)
    assert Pieces(["▁我", "爱"], [10, 11]).labels() == ["10", "11"]
    assert Pieces(["▁I", "▁love"], [5, 6]).labels() == ["▁I", "▁love"]


def run_mt(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mt", *args], capture_output=True, text=True, cwd=cwd)


def test_translate_draws_the_attention_of_its_translation(trained_runs, tmp_path):
    checkpoint = trained_runs[0] / "checkpoints" / "last.pt"
    done = run_mt("translate", "--checkpoint", str(checkpoint), "我爱你。", "--attention", str(tmp_path / "a.png"),
                  "--layer", "1")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.png").read_bytes().startswith(PNG)
    two = run_mt("translate", "--checkpoint", str(checkpoint), "一", "二", "--attention", str(tmp_path / "b.png"))
    assert two.returncode == 2 and "one sentence" in two.stderr


def test_plot_and_info_commands(trained_runs):
    run = trained_runs[0]
    done = run_mt("plot", str(run))
    assert done.returncode == 0, done.stderr
    assert (run / "training.png").read_bytes().startswith(PNG)
    info = run_mt("info", str(run / "checkpoints" / "last.pt"))
    assert info.returncode == 0, info.stderr
    for expected in ("step: 8", "parameters: ", "vocabulary: 600 pieces, joint", "dev: BLEU",
                     "cleaning: 285 of 300 training pairs kept; 0 held a dev or test sentence (removed)",
                     "BLEU signature: nrefs:1|case:mixed|eff:no|tok:13a", "d_model: 32"):
        assert expected in info.stdout, expected
