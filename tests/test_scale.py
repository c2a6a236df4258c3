"""Training that scales: accumulation, the non-finite guard, DDP over gloo, averaging, early stopping, logs."""

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from conftest import ROOT, tiny_config, tiny_yaml
from mt.data.batching import make_batch
from mt.exchange.checkpoint import Position, average_checkpoints, load_checkpoint, save_checkpoint
from mt.config import Config, TrainConfig
from mt.core.errors import MtError
from mt.data.tokenizer import BOS, EOS
from mt.model.config import ModelConfig
from mt.train.loop import train
from mt.train.trainer import MAX_SKIPPED_IN_A_ROW, Trainer


def tiny_trainer(tmp_path: Path, **train_settings) -> Trainer:
    """fp32 unless told (auto would be bf16 on a CPU with native bf16), so that sums can be compared closely."""
    torch.manual_seed(0)
    train_settings.setdefault("precision", "fp32")
    config = Config(model=ModelConfig(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, num_decoder_layers=1,
                                      dropout=0.0),
                    train=TrainConfig(run_dir=str(tmp_path), warmup_steps=10, tensorboard=False, **train_settings))
    vocab = SimpleNamespace(src_vocab_size=40, tgt_vocab_size=40)
    return Trainer(config, vocab, torch.device("cpu"))


def pairs(seed: int, n: int) -> tuple[list[list[int]], list[list[int]]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 9, (n, 2), generator=g).tolist()
    src = [torch.randint(4, 40, (a,), generator=g).tolist() + [EOS] for a, _ in lengths]
    tgt = [[BOS] + torch.randint(4, 40, (b,), generator=g).tolist() + [EOS] for _, b in lengths]
    return src, tgt


def test_accumulating_k_batches_equals_one_k_times_larger_batch(tmp_path):
    parts = [pairs(seed, 3) for seed in range(3)]  # different lengths: each batch is padded differently
    accumulated, whole = tiny_trainer(tmp_path / "a"), tiny_trainer(tmp_path / "b")
    loss_a, tokens_a = accumulated.train_step([make_batch(*part) for part in parts])
    loss_b, tokens_b = whole.train_step([make_batch(sum((p[0] for p in parts), []), sum((p[1] for p in parts), []))])
    assert tokens_a == tokens_b and loss_a == pytest.approx(loss_b, rel=1e-5)
    for (name, a), b in zip(accumulated.model.named_parameters(), whole.model.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-7, msg=name)


def test_a_batch_filled_to_its_bucket_shape_gives_the_same_update(tmp_path):
    src, tgt = pairs(2, 5)
    plain, filled = tiny_trainer(tmp_path / "a"), tiny_trainer(tmp_path / "b")
    loss_a, tokens_a = plain.train_step([make_batch(src, tgt)])
    loss_b, tokens_b = filled.train_step([make_batch(src, tgt, shape=(8, 12))])  # 3 empty rows, wider sides
    assert tokens_a == tokens_b and loss_a == pytest.approx(loss_b, rel=1e-5)
    for (name, a), b in zip(plain.model.named_parameters(), filled.model.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-7, msg=name)


def test_compiled_training_with_length_buckets_compiles_once_per_bucket_shape(tmp_path, monkeypatch):
    counter = CompileCounter()  # counts the graphs torch.compile makes, and runs them eagerly (fast)
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend=counter))
    trainer = tiny_trainer(tmp_path, compile=True, length_buckets=[12, 24], max_tokens=72)
    shapes = [(6, 12), (3, 24)]  # max_tokens // L rows of L tokens
    graphs = []
    for seed in range(6):
        trainer.train_step([make_batch(*pairs(seed, 3), shape=shapes[seed % 2])])
        graphs.append(counter.frame_count)
    assert graphs[0] > 0 and graphs[1] == 2 * graphs[0]  # a static graph for each shape
    assert graphs[-1] == graphs[1]  # and no more: batches of known shapes reuse them


def test_a_non_finite_gradient_skips_the_update_and_persistent_ones_stop_training(tmp_path):
    trainer = tiny_trainer(tmp_path)
    batch = make_batch(*pairs(0, 4))
    with torch.no_grad():
        trainer.model.generator.proj.weight[5, 0] = float("nan")
    before = {name: p.clone() for name, p in trainer.model.named_parameters()}
    assert trainer.train_step([batch]) is None
    for name, p in trainer.model.named_parameters():
        assert torch.equal(p, before[name]) or torch.isnan(before[name]).any(), name
    assert trainer.scheduler.last_epoch == 0  # the schedule did not advance
    with pytest.raises(MtError, match="training diverged") as stopped:
        for _ in range(MAX_SKIPPED_IN_A_ROW):
            trainer.train_step([batch])
    assert stopped.value.exit_code == 1  # a failure at run time, not a usage error (2)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_close_to_fp32(tmp_path, precision):
    batch = make_batch(*pairs(1, 6))
    reference, mixed = tiny_trainer(tmp_path / "a"), tiny_trainer(tmp_path / "b", precision=precision)
    assert mixed.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    for _ in range(3):
        loss_ref, _ = reference.train_step([batch])
        loss_mixed, _ = mixed.train_step([batch])
    assert loss_mixed == pytest.approx(loss_ref, rel=0.02)


@pytest.mark.parametrize("start", ["scratch", "--init-from"])
def test_two_gloo_processes_end_with_the_parameters_of_one_process_given_the_same_batches(corpus_dir, trained_runs,
                                                                                        tmp_path, start):
    """From scratch, and fine-tuning from a trained run's weights (each process loads them)."""
    settings = dict(max_steps=6, eval_every=3, max_tokens=150, tensorboard="false")
    model = "dropout: 0.1}"
    one = tmp_path / "one.yaml"
    one.write_text(tiny_yaml(corpus_dir, tmp_path / "one", accum_steps=2, **settings).replace(model, "dropout: 0.0}"))
    two = tmp_path / "two.yaml"
    two.write_text(tiny_yaml(corpus_dir, tmp_path / "two", accum_steps=1, **settings).replace(model, "dropout: 0.0}"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    source = trained_runs[0] / "checkpoints" / "last.pt"
    init = ["--init-from", str(source)] if start == "--init-from" else []
    subprocess.run([sys.executable, "-m", "mt", "train", "-c", str(one), *init], check=True, env=env,
                   capture_output=True, cwd=ROOT)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = subprocess.run(torchrun + ["-m", "mt", "train", "-c", str(two), *init], env=env, capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count("done: 6 steps") == 1 and "[rank 1]" not in done.stderr  # only the main process reports
    single, ddp = (load_checkpoint(tmp_path / name / "checkpoints" / "last.pt") for name in ("one", "two"))
    assert single.position.step == ddp.position.step == 6 and ddp.world_size == 2
    if init:  # equal parameters at the end, and the single process starts from the weights (tests/test_train.py)
        assert ddp.init_from == single.init_from and ddp.init_from["checkpoint"] == str(source.resolve())
    for name, tensor in single.model.items():
        torch.testing.assert_close(ddp.model[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
    assert single.dev["dev_loss"] == pytest.approx(ddp.dev["dev_loss"], rel=1e-4)  # gathered from both halves


def test_averaging_identical_checkpoints_gives_the_same_model(trained_runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_runs[0], run)
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    for step in (8, 9, 10):
        save_checkpoint(dataclasses.replace(state, position=Position(step=step)), run / "checkpoints" / f"step-{step:08d}.pt")
    averaged = average_checkpoints(run, last=3)
    assert averaged.averaged == ["step-00000008.pt", "step-00000009.pt", "step-00000010.pt"]
    for name, tensor in state.model.items():
        assert torch.equal(averaged.model[name], tensor), name


def test_averaging_two_checkpoints_gives_their_mean_and_a_usable_checkpoint(trained_runs, tmp_path):
    run = trained_runs[0]
    first, second = (load_checkpoint(run / "checkpoints" / f"step-0000000{s}.pt") for s in (4, 8))
    done = subprocess.run([sys.executable, "-m", "mt", "average", str(run), "--last", "2", "-o",
                           str(tmp_path / "avg.pt")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    averaged = load_checkpoint(tmp_path / "avg.pt")
    for name, tensor in first.model.items():
        torch.testing.assert_close(averaged.model[name], (tensor + second.model[name]) / 2)
    translated = subprocess.run([sys.executable, "-m", "mt", "translate", "--checkpoint", str(tmp_path / "avg.pt"),
                                 "我爱你"], capture_output=True, text=True)
    assert translated.returncode == 0, translated.stderr
    with pytest.raises(MtError, match="2 step checkpoints, 5 asked for"):
        average_checkpoints(run, last=5)


def test_early_stopping_ends_training_after_patience_validations_without_gain(corpus_dir, tmp_path):
    # An untrained tiny model's dev BLEU stays 0: the first validation sets the best, the next two do not beat it.
    run = train(tiny_config(corpus_dir, tmp_path / "run", tmp_path, max_steps=40, eval_every=2, patience=2,
                            lr_scale=1e-6))
    assert load_checkpoint(run / "checkpoints" / "last.pt").position.step == 6


def test_max_minutes_ends_training_with_a_validated_checkpoint(corpus_dir, tmp_path):
    run = train(tiny_config(corpus_dir, tmp_path / "run", tmp_path, max_steps=10_000, max_minutes=0.0001))
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state.position.step == 1 and "dev_bleu" in state.dev


def test_training_writes_tensorboard_events_and_a_jsonl_log(corpus_dir, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = train(tiny_config(corpus_dir, tmp_path / "run", tmp_path, max_steps=10, eval_every=5, log_every=5))
    events = EventAccumulator(str(run / "tensorboard")).Reload()
    scalars = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/tok_s", "dev/bleu", "dev/chrf", "dev/loss"} <= scalars
    assert [e.step for e in events.Scalars("dev/bleu")] == [5, 10]
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "dev_bleu" in r] == [5, 10]
