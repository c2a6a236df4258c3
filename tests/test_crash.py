"""Crashes lose nothing: a training process killed at any moment resumes from an intact checkpoint and ends
exactly where an uninterrupted run ends; Ctrl-C, SIGTERM and SIGUSR1 save a checkpoint first."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from conftest import tiny_yaml
from mt.exchange.checkpoint import load_checkpoint

STEPS, EVERY = 96, 6  # a checkpoint every 6 steps


def start(cwd: Path, run: str, resume: bool) -> subprocess.Popen:
    args = [sys.executable, "-m", "mt", "train", "-c", "tiny.yaml", "--run-dir", run] + (["--resume"] if resume else [])
    # SIGINT at its default in the child, whatever the suite was started with (a background job ignores it, and
    # Python then never turns it into KeyboardInterrupt)
    return subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def newest_step(run: Path) -> int:
    steps = [int(p.stem.split("-")[1]) for p in (run / "checkpoints").glob("step-*.pt")]
    return max(steps, default=0)


def wait_for_checkpoint_after(run: Path, step: int, process: subprocess.Popen, timeout: float = 120) -> bool:
    """True once a checkpoint newer than `step` exists; False if the process ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if newest_step(run) > step:
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.02)
    raise TimeoutError(f"no checkpoint after step {step} in {timeout}s")


def final_weights(run: Path) -> dict:
    state = load_checkpoint(run / "checkpoints" / "last.pt")
    assert state.position.step == STEPS
    return state.model


def test_sigkill_and_sigterm_at_random_moments_then_resume_ends_like_an_uninterrupted_run(corpus_dir, tmp_path):
    (tmp_path / "tiny.yaml").write_text(tiny_yaml(corpus_dir, Path("unused"), max_steps=STEPS, eval_every=EVERY,
                                                  keep_last=2), encoding="utf-8")
    straight = start(tmp_path, "straight", resume=False)
    assert straight.wait(timeout=300) == 0, straight.stderr.read()

    run, rng, resumed_from = tmp_path / "killed", random.Random(7), []
    stops = [signal.SIGKILL, signal.SIGTERM, signal.SIGKILL, signal.SIGUSR1, signal.SIGTERM]
    process = start(tmp_path, "killed", resume=False)
    while len(resumed_from) < len(stops) and wait_for_checkpoint_after(run, newest_step(run), process):
        stop = stops[len(resumed_from)]
        time.sleep(rng.uniform(0.0, 0.15))  # somewhere in the next steps, validation or checkpoint write
        before = newest_step(run)
        process.send_signal(stop)
        status = process.wait()
        state = load_checkpoint(run / "checkpoints" / "last.pt")  # intact, whatever the moment
        if stop == signal.SIGKILL:
            assert state.position.step % EVERY == 0  # only what the last validation saved
        else:  # saved where it stopped, and said so
            assert status == 128 + stop and state.position.step >= before
            assert f"{stop.name}: stopped at step {state.position.step}, saved" in process.stderr.read()
        resumed_from.append(state.position.step)
        process = start(tmp_path, "killed", resume=True)
    assert process.wait(timeout=300) == 0, process.stderr.read()
    assert len(resumed_from) == len(stops) and resumed_from == sorted(resumed_from) and resumed_from[-1] < STEPS
    assert any(step % EVERY for step in resumed_from)  # some resumed between validations
    assert not list((run / "checkpoints").glob(".*.tmp"))
    expected, got = final_weights(tmp_path / "straight"), final_weights(run)
    for name, tensor in expected.items():
        assert torch.equal(tensor, got[name]), name


def test_ctrl_c_saves_a_checkpoint_and_resume_finishes(corpus_dir, tmp_path):
    (tmp_path / "tiny.yaml").write_text(tiny_yaml(corpus_dir, Path("unused"), max_steps=2000, eval_every=1000),
                                        encoding="utf-8")
    run = tmp_path / "run"
    process = start(tmp_path, "run", resume=False)
    deadline = time.monotonic() + 120
    while not (run / "log.jsonl").exists() or not (run / "log.jsonl").read_text():  # training has begun
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130
    message = [line for line in process.stderr.read().splitlines() if line.startswith("mt:")]
    assert len(message) == 1 and "SIGINT: stopped at step" in message[0] and "--resume" in message[0]
    step = load_checkpoint(run / "checkpoints" / "last.pt").position.step
    assert 0 < step < 1000  # saved where it stopped, not at a validation point
    finish = subprocess.run([sys.executable, "-m", "mt", "train", "-c", "tiny.yaml", "--run-dir", "run", "--resume",
                             "--set", f"train.max_steps={step + 5}"], cwd=tmp_path, capture_output=True, text=True)
    assert finish.returncode == 0, finish.stderr
    assert load_checkpoint(run / "checkpoints" / "last.pt").position.step == step + 5


def test_sigterm_to_torchrun_stops_every_process_at_one_update_and_the_main_one_saves(corpus_dir, tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(tiny_yaml(corpus_dir, tmp_path / "run", max_steps=5000, eval_every=2500, max_tokens=150,
                                tensorboard="false"), encoding="utf-8")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    process = subprocess.Popen(torchrun + ["-m", "mt", "train", "-c", str(config)], cwd=tmp_path,
                               env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    log = tmp_path / "run" / "log.jsonl"
    deadline = time.monotonic() + 120
    while not log.exists() or not log.read_text():  # training has begun
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)  # torchrun passes it on to both processes
    process.wait(timeout=120)
    errors = process.stderr.read()
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    assert 0 < state.position.step < 2500 and state.world_size == 2
    assert f"mt: error: SIGTERM: stopped at step {state.position.step}, saved" in errors
    assert errors.count(f"stopped at step {state.position.step}") == 2  # both processes, at the same update
