"""Crashes lose nothing: a training process killed at any moment resumes from an intact checkpoint and ends
exactly where an uninterrupted run ends; Ctrl-C saves a checkpoint first."""

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from conftest import tiny_yaml
from mt.checkpoint import load_checkpoint

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
    assert state["step"] == STEPS
    return state["model"]


def test_sigkill_at_random_moments_then_resume_ends_like_an_uninterrupted_run(corpus_dir, tmp_path):
    (tmp_path / "tiny.yaml").write_text(tiny_yaml(corpus_dir, Path("unused"), max_steps=STEPS, eval_every=EVERY,
                                                  keep_last=2), encoding="utf-8")
    straight = start(tmp_path, "straight", resume=False)
    assert straight.wait(timeout=300) == 0, straight.stderr.read()

    run, rng, kills, resumed_from = tmp_path / "killed", random.Random(7), 0, []
    process = start(tmp_path, "killed", resume=False)
    while kills < 4 and wait_for_checkpoint_after(run, newest_step(run), process):
        time.sleep(rng.uniform(0.0, 0.15))  # somewhere in the next steps, validation or checkpoint write
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
        state = load_checkpoint(run / "checkpoints" / "last.pt")  # intact, whatever the moment
        assert state["step"] % EVERY == 0
        resumed_from.append(state["step"])
        process = start(tmp_path, "killed", resume=True)
    assert process.wait(timeout=300) == 0, process.stderr.read()
    assert kills == 4 and resumed_from == sorted(resumed_from) and resumed_from[-1] < STEPS
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
    assert len(message) == 1 and "interrupted at step" in message[0] and "--resume" in message[0]
    step = load_checkpoint(run / "checkpoints" / "last.pt")["step"]
    assert 0 < step < 1000  # saved where it stopped, not at a validation point
    finish = subprocess.run([sys.executable, "-m", "mt", "train", "-c", "tiny.yaml", "--run-dir", "run", "--resume",
                             "--set", f"train.max_steps={step + 5}"], cwd=tmp_path, capture_output=True, text=True)
    assert finish.returncode == 0, finish.stderr
    assert load_checkpoint(run / "checkpoints" / "last.pt")["step"] == step + 5
