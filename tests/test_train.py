"""Training: the loss ignores padding, the schedule is the paper's, a tiny model learns, checkpoints are exact."""

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from conftest import tiny_config, tiny_model, tiny_yaml
from mt.data.batching import make_batch
from mt.exchange.checkpoint import load_checkpoint, load_model, save_checkpoint
from mt.config import Config, TrainConfig, load_config
from mt.core.errors import MtError
from mt.train.prepare import prepare_data
from mt.decode.searcher import Searcher
from mt.data.tokenizer import PAD, UNK
from mt.model.config import ModelConfig
from mt.train.loop import train
from mt.train.progress import Progress
from mt.train.trainer import inverse_sqrt_lr, learning_rate, spread_layers
from mt.decode.translator import Translator, load_translator


def test_padding_never_enters_the_loss():
    model = tiny_model(vocab=30)
    pairs = [([5, 6, 7, 3], [2, 8, 9, 10, 11, 3]), ([12, 3], [2, 13, 3])]
    criterion = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1, reduction="sum")

    def total_loss(chunk):
        batch = make_batch([s for s, _ in chunk], [t for _, t in chunk])
        logits = model(batch.src, batch.tgt_input)
        return criterion(logits.flatten(0, 1), batch.tgt_label.flatten()).item(), batch.num_tokens

    together, tokens = total_loss(pairs)  # the second pair is padded here
    alone = [total_loss([pair]) for pair in pairs]  # no padding at all
    assert tokens == sum(n for _, n in alone) == 7
    assert together == pytest.approx(sum(loss for loss, _ in alone), rel=1e-5)


def test_learning_rate_schedule_is_the_papers():
    d, warmup = 512, 4000
    assert inverse_sqrt_lr(1, d, warmup) == pytest.approx(d ** -0.5 * warmup ** -1.5)
    peak = inverse_sqrt_lr(warmup, d, warmup)
    assert peak == pytest.approx(d ** -0.5 * warmup ** -0.5)
    assert inverse_sqrt_lr(warmup - 1, d, warmup) < peak > inverse_sqrt_lr(warmup + 1, d, warmup)
    assert inverse_sqrt_lr(4 * warmup, d, warmup) == pytest.approx(peak / 2)
    assert inverse_sqrt_lr(10, d, warmup, scale=2.0) == pytest.approx(2 * inverse_sqrt_lr(10, d, warmup))


def test_linear_decay_warms_up_as_the_paper_then_falls_to_zero_at_max_steps():
    config = Config(model=ModelConfig(d_model=256), train=TrainConfig(warmup_steps=100, max_steps=1100, lr_scale=0.7))
    paper = [learning_rate(s, config) for s in (1, 50, 100, 600, 1100)]
    config.train.decay = "linear"
    linear = [learning_rate(s, config) for s in (1, 50, 100, 600, 1100, 1200)]
    peak = paper[2]
    assert linear[:3] == pytest.approx(paper[:3])  # the same warm-up to the same peak
    assert linear[3:] == pytest.approx([peak / 2, 0.0, 0.0])
    assert paper[3] == pytest.approx(peak * (100 / 600) ** 0.5)
    config.train.max_steps = 80  # a run shorter than its warm-up ends within it
    assert [learning_rate(s, config) for s in (50, 80)] == pytest.approx(paper[1:2] + [peak * 0.8])


def test_under_a_time_budget_the_progress_bar_counts_to_the_update_where_time_runs_out(tmp_path):
    budget = TrainConfig(max_steps=1_000_000, max_minutes=1.0)
    progress = Progress(tmp_path, budget, step=0, main=False)
    assert progress.bar.total is None  # no count to max_steps, nor hundreds of hours left, before the speed is known
    progress.started -= 30  # 100 updates in the first 30 s of 60: the time runs out near update 200
    progress.update(loss=2.0, tokens=1000)
    progress.log(100, lr=1e-3)
    assert 195 <= progress.bar.total <= 205
    unbounded = Progress(tmp_path, TrainConfig(max_steps=1000), step=0, main=False)
    unbounded.update(loss=2.0, tokens=1000)
    unbounded.log(100, lr=1e-3)
    assert unbounded.bar.total == 1000  # max_steps alone: the bar counts to it


def twenty_pairs(corpus_dir, tokenizer) -> tuple[list[str], list[str]]:
    """20 distinct real pairs from the tokenizer's training slice, every piece in its vocabulary."""
    zh = (corpus_dir / "train.zh").read_text(encoding="utf-8").splitlines()
    en = (corpus_dir / "train.en").read_text(encoding="utf-8").splitlines()
    pairs = {}
    for src, tgt in zip(zh[100:], en[100:]):
        ids = tokenizer.encode_src([src])[0] + tokenizer.encode_tgt([tgt])[0]
        if UNK not in ids and src not in pairs and tgt not in pairs.values():
            pairs[src] = tgt
    return list(pairs)[:20], list(pairs.values())[:20]


def test_a_tiny_model_overfits_20_pairs_until_greedy_reproduces_them(corpus_dir, tokenizer):
    torch.manual_seed(0)
    zh, en = twenty_pairs(corpus_dir, tokenizer)
    model = tiny_model(vocab=tokenizer.src_vocab_size, d_model=64, num_heads=4, d_ff=128).train()
    batch = make_batch(tokenizer.encode_src(zh), tokenizer.encode_tgt(en))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        logits = model(batch.src, batch.tgt_input)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_label.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    translator = Translator(Searcher(model, torch.device("cpu")), tokenizer, Config(model=model.config))
    assert translator.translate_lines(zh) == en


def test_a_resumed_run_ends_with_the_same_parameters(trained_runs):
    straight, resumed = (load_checkpoint(run / "checkpoints" / "last.pt") for run in trained_runs)
    assert straight.position.step == resumed.position.step == 8
    for name, tensor in straight.model.items():
        assert torch.equal(tensor, resumed.model[name]), name
    assert straight.optimizer["state"][0]["exp_avg"].equal(resumed.optimizer["state"][0]["exp_avg"])


def test_a_run_directory_holds_what_the_user_needs(trained_runs):
    run = trained_runs[0]
    for name in ("config.yaml", "spm.model", "log.jsonl", "checkpoints/last.pt", "checkpoints/best.pt"):
        assert (run / name).is_file(), name
    assert sorted(p.name for p in (run / "checkpoints").glob("step-*.pt")) == ["step-00000004.pt", "step-00000008.pt"]


def test_save_then_load_gives_identical_outputs(trained_runs, corpus_dir):
    path = trained_runs[0] / "checkpoints" / "last.pt"
    model, tok, config, checkpoint = load_model(path, torch.device("cpu"))
    again, _, _, _ = load_model(path, torch.device("cpu"))
    src = (corpus_dir / "test.zh").read_text(encoding="utf-8").splitlines()
    batch = make_batch(tok.encode_src(src[:4]), tok.encode_tgt(["Hello."] * 4))
    torch.testing.assert_close(model(batch.src, batch.tgt_input), again(batch.src, batch.tgt_input), rtol=0, atol=0)
    assert checkpoint.tokenizer["vocab_hash"] == tok.vocab_hash
    assert load_translator(path, "cpu").translate_lines(src) == load_translator(path, "cpu").translate_lines(src)


def test_training_into_an_existing_run_needs_resume(trained_runs, corpus_dir, tmp_path):
    with pytest.raises(MtError, match="already holds a run: pass --resume"):
        train(tiny_config(corpus_dir, trained_runs[0], tmp_path, max_steps=8))
    with pytest.raises(MtError, match="--resume: no checkpoint"):
        train(tiny_config(corpus_dir, tmp_path / "new", tmp_path), resume=True)


class RunsCode:
    """A pickle payload that creates a file when it is unpickled."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_checkpoint_carrying_code_is_refused_and_the_code_does_not_run(tmp_path):
    path, marker = tmp_path / "evil.pt", tmp_path / "ran"
    torch.save({"model": {}, "config": {}, "payload": RunsCode(marker)}, path, pickle_protocol=2)
    with pytest.raises(MtError, match="refused"):
        load_checkpoint(path)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # what an unguarded load would do: the payload is real
    assert marker.exists()


def test_a_truncated_checkpoint_is_a_clear_error(trained_runs, tmp_path):
    data = (trained_runs[0] / "checkpoints" / "last.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(MtError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "cut.pt")


def saved_data(path: Path) -> dict:
    """A checkpoint file's plain data, as torch.save wrote it."""
    return torch.load(path, weights_only=True)


@pytest.mark.parametrize("bend", ["a key of its cleaning record renamed", "its step a string",
                                  "a dev score missing", "a record of an unknown name"])
def test_a_checkpoint_whose_records_are_bent_is_not_readable(trained_runs, tmp_path, bend):
    """Bits flipped in a key or a value of a record that mt info reads: one line, not a KeyError mid-way."""
    state = saved_data(trained_runs[0] / "checkpoints" / "last.pt")
    state["cleaning"] = state["cleaning"] or {"contamination": "remove", "corpora": {}}
    if bend.startswith("a key"):
        state["cleaning"]["contaminatiom"] = state["cleaning"].pop("contamination")
    elif bend.startswith("its step"):
        state["position"]["step"] = "8"
    elif bend.startswith("a dev"):
        del state["dev"]["dev_chrf"]
    else:
        state["dew"] = state.pop("dev")
    torch.save(state, tmp_path / "bent.pt")
    with pytest.raises(MtError, match="not a readable checkpoint .*record is not as mt writes it"):
        load_checkpoint(tmp_path / "bent.pt")


def test_a_checkpoint_whose_tokenizer_does_not_match_its_vocabulary_hash_is_refused(trained_runs, tmp_path):
    checkpoint = load_checkpoint(trained_runs[0] / "checkpoints" / "last.pt")
    checkpoint.tokenizer["vocab_hash"] = "0" * 16  # as if the tokenizer had been swapped
    save_checkpoint(checkpoint, tmp_path / "swapped.pt")
    with pytest.raises(MtError, match="does not match its vocabulary hash"):
        load_model(tmp_path / "swapped.pt", torch.device("cpu"))


def first_format(state: dict) -> dict:
    """A checkpoint's data as format 1 wrote it in its first versions: no format_version, the position's fields at
    the top without evals_without_gain, no scaler or world_size, and dev {} when not validated."""
    position = state.pop("position")
    del position["evals_without_gain"], state["format_version"], state["scaler"], state["world_size"]
    return {**{k: v for k, v in state.items() if v is not None and v != []}, **position, "dev": state["dev"] or {}}


def test_a_checkpoint_of_the_first_format_reads_as_the_record_it_holds(trained_runs, tmp_path):
    path = trained_runs[0] / "checkpoints" / "last.pt"
    torch.save(first_format(saved_data(path)), tmp_path / "old.pt")
    old, new = load_checkpoint(tmp_path / "old.pt"), load_checkpoint(path)
    assert old.position == dataclasses.replace(new.position, evals_without_gain=0)
    assert (old.world_size, old.scaler, old.dev, old.cleaning) == (1, {}, new.dev, new.cleaning)
    assert all(old.model[name].equal(tensor) for name, tensor in new.model.items())


def test_a_checkpoint_of_a_later_format_is_refused_in_one_line(trained_runs, tmp_path):
    state = saved_data(trained_runs[0] / "checkpoints" / "last.pt")
    state["format_version"] += 1
    torch.save(state, tmp_path / "later.pt")
    with pytest.raises(MtError, match="later.pt: a checkpoint of format .*upgrade mt"):
        load_checkpoint(tmp_path / "later.pt")


def test_a_checkpoint_of_the_first_format_still_resumes(trained_runs, corpus_dir, tmp_path):
    run = tmp_path / "old"
    shutil.copytree(trained_runs[0], run)
    last = run / "checkpoints" / "last.pt"
    state = first_format(saved_data(last))
    last.unlink()  # a hard link to step-8: replace the link, not the step checkpoint's file
    torch.save(state, last)
    train(tiny_config(corpus_dir, run, tmp_path, max_steps=10, eval_every=4), resume=True)
    assert load_checkpoint(last).position.step == 10


ALL = frozenset({"optimizer", "schedule", "position"})


def test_a_run_started_from_a_checkpoint_keeping_everything_continues_it_exactly(trained_runs, corpus_dir, tmp_path):
    straight = trained_runs[0]
    source = straight / "checkpoints" / "step-00000004.pt"
    train(tiny_config(corpus_dir, tmp_path / "continued", tmp_path, max_steps=8, eval_every=4), init_from=source,
          keep=ALL)
    expected, got = (load_checkpoint(run / "checkpoints" / "last.pt") for run in (straight, tmp_path / "continued"))
    assert got.position.step == 8 and got.init_from == {"checkpoint": str(source.resolve()), "step": 4,
                                                     "kept": ["optimizer", "position", "schedule"]}
    for name, tensor in expected.model.items():
        assert torch.equal(tensor, got.model[name]), name
    assert (tmp_path / "continued" / "spm.model").read_bytes() == (straight / "spm.model").read_bytes()


def test_fine_tuning_starts_from_the_weights_alone_and_its_resume_remembers_where_it_started(trained_runs, corpus_dir,
                                                                                             tmp_path):
    source = trained_runs[0] / "checkpoints" / "last.pt"
    path = tmp_path / "tune.yaml"  # fine-tuning may change the dropout, not the model's shape
    path.write_text(tiny_yaml(corpus_dir, tmp_path / "tuned", max_steps=2, eval_every=2).replace(
        "dropout: 0.1}", "dropout: 0.3}"), encoding="utf-8")
    config = load_config([path])
    before = load_checkpoint(source).model
    train(config, init_from=source)
    tuned = load_checkpoint(tmp_path / "tuned" / "checkpoints" / "last.pt")
    assert tuned.position.step == 2 and tuned.scheduler["last_epoch"] == 2  # a fresh position and schedule
    assert all(int(s["step"]) == 2 for s in tuned.optimizer["state"].values())  # fresh Adam moments
    assert any(not torch.equal(t, tuned.model[n]) for n, t in before.items())  # it trained on
    train(dataclasses.replace(config, train=dataclasses.replace(config.train, max_steps=4)), resume=True,
          init_from=source)  # a re-queued job's command line: the run continues
    resumed = load_checkpoint(tmp_path / "tuned" / "checkpoints" / "last.pt")
    assert resumed.position.step == 4 and resumed.init_from == tuned.init_from and not tuned.init_from["kept"]
    info = subprocess.run([sys.executable, "-m", "mt", "info", str(tmp_path / "tuned" / "checkpoints" / "last.pt")],
                          capture_output=True, text=True)
    assert f"started from: {source.resolve()} (step 8)\n" in info.stdout


def layered_config(corpus_dir, run, tmp_path, encoder: int, decoder: int, **train_settings) -> Config:
    path = tmp_path / f"{run.name}.yaml"
    path.write_text(tiny_yaml(corpus_dir, run, **train_settings).replace(
        "num_encoder_layers: 1, num_decoder_layers: 1",
        f"num_encoder_layers: {encoder}, num_decoder_layers: {decoder}"), encoding="utf-8")
    return load_config([path])


def test_spread_layers_keeps_the_first_and_the_last():
    assert spread_layers(6, 3) == [0, 2, 5] and spread_layers(3, 2) == [0, 2] and spread_layers(6, 2) == [0, 5]
    assert spread_layers(3, 1) == [2]  # one alone: the last, which the next box was trained to read


def test_a_student_with_fewer_layers_starts_from_a_spread_of_its_teachers(corpus_dir, tmp_path):
    teacher = train(layered_config(corpus_dir, tmp_path / "teacher", tmp_path, 3, 3, max_steps=2, eval_every=2))
    source = teacher / "checkpoints" / "last.pt"
    taught = load_checkpoint(source).model
    # one update at a learning rate too small to move a weight in fp32: the student's weights are where it started
    student = layered_config(corpus_dir, tmp_path / "student", tmp_path, 2, 1, max_steps=1, eval_every=1,
                             lr_scale=1e-30, precision="fp32")
    train(student, init_from=source)
    state = load_checkpoint(tmp_path / "student" / "checkpoints" / "last.pt")
    assert state.init_from["layers"] == {"encoder": [0, 2], "decoder": [2]}
    renamed = {"encoder.layers.1.": "encoder.layers.2.", "decoder.layers.0.": "decoder.layers.2."}
    for name, tensor in state.model.items():
        theirs = next((name.replace(mine, their) for mine, their in renamed.items() if name.startswith(mine)), name)
        assert torch.equal(tensor, taught[theirs]), name
    assert len(state.model) < len(taught)
    info = subprocess.run([sys.executable, "-m", "mt", "info", str(tmp_path / "student" / "checkpoints" / "last.pt")],
                          capture_output=True, text=True)
    assert "(step 2), with its encoder layers 0, 2, with its decoder layers 2\n" in info.stdout
    with pytest.raises(MtError, match="its moments are for all its 3 layers"):
        train(layered_config(corpus_dir, tmp_path / "kept", tmp_path, 3, 2), init_from=source, keep=frozenset({
            "optimizer"}))
    with pytest.raises(MtError, match="num_decoder_layers is 4 here but 3 .* fewer of its layers, not more"):
        train(layered_config(corpus_dir, tmp_path / "deeper", tmp_path, 3, 4), init_from=source)


@pytest.mark.parametrize("key, value, words", [("model.d_model", 64, "model.d_model is 64 here but 32"),
                                               ("tokenizer.vocab_size", 700, "tokenizer.vocab_size/joint are 700"),
                                               ("data.chinese_script", "traditional", "data.chinese_script is")])
def test_fine_tuning_refuses_a_config_that_does_not_fit_the_checkpoint(trained_runs, corpus_dir, tmp_path, key, value,
                                                                       words):
    path = tmp_path / "tiny.yaml"
    path.write_text(tiny_yaml(corpus_dir, tmp_path / "tuned"), encoding="utf-8")
    with pytest.raises(MtError, match=words):
        train(load_config([path], [f"{key}={value}"]), init_from=trained_runs[0] / "checkpoints" / "last.pt")
    assert not (tmp_path / "tuned" / "checkpoints" / "last.pt").exists()


def test_subword_regularisation_segments_each_epoch_anew_and_a_resumed_run_ends_the_same(corpus_dir, tmp_path):
    """300 pairs in ~10 updates an epoch: 24 updates cross two epochs, the interruption at 12 one of them."""
    def config(run: str, steps: int) -> Config:
        path = tmp_path / f"{run}.yaml"
        path.write_text(tiny_yaml(corpus_dir, tmp_path / run, max_steps=steps, eval_every=10).replace(
            "byte_fallback: false}", "byte_fallback: false, sampling_alpha: 0.1}"), encoding="utf-8")
        return load_config([path])

    train(config("straight", 24))
    train(config("stopped", 12))
    train(config("stopped", 24), resume=True)
    expected, got = (load_checkpoint(tmp_path / run / "checkpoints" / "last.pt") for run in ("straight", "stopped"))
    assert expected.position.epoch >= 2
    for name, tensor in expected.model.items():
        assert torch.equal(tensor, got.model[name]), name
    data = prepare_data(config("straight", 24), tmp_path / "straight", None)
    pairs = {epoch: data.train_batches(epoch).ids[:50]["tgt_ids"] for epoch in (0, 1, 0)}  # epoch 0 made again
    best = data.train.ids[:50]["tgt_ids"]
    assert pairs[0] != pairs[1] and best not in (pairs[0], pairs[1])
    assert data.train_batches(0).ids[:50]["tgt_ids"] == pairs[0]  # the same draw, rebuilt
    dev = data.dev[:]
    assert dev["tgt_ids"] == data.tokenizer.encode_tgt(dev["tgt"])  # validation: the best segmentation
    assert len(list((tmp_path / "straight" / "cache").glob("train-sampled-*.arrow"))) == 1  # only the newest kept
